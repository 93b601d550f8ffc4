import EmulatorSupport

// # One pipeline for every sign-in
//
// Every sign-in — phone (with link, re-auth and the temporary-proof conflict), password, custom token, anonymous and
// email/password sign-up, SMS second-factor finalize — is one `SignInRequest` run by `Emulator.signIn`:
//
// 1. **plan** (inside a transaction): verify the credential, consume what production consumes (a phone code), and
//    decide — the user as it would be saved, whether the sign-in creates it, its provider, the second factor; or
//    finish at once (a phone-link conflict answers a temporary proof, an enrolled user owes a second factor);
// 2. **hook** (optional): the blocking functions — beforeCreate for a new user, then beforeSignIn — see that user;
// 3. **commit**: save the user with the functions' changes, its refresh token and the events, in one transaction;
//    after a hook it is a second transaction that first re-checks what the plan assumed (a user the functions
//    disabled is saved disabled and the sign-in is `USER_DISABLED`);
// 4. **tokens**: the API mints the ID token from the `SignedIn` (with a beforeSignIn's session claims).
//
// Without a hook (no function configured: the hot path) plan and commit are ONE transaction and nothing else is
// allocated or locked. With one (`hook` given: PhoneAuthAPI/SignInAndSend.swift gives it only when a function is
// configured, and then runs the whole sign-in on the blocking pool) the plan commits on its own, the functions run with no lock held,
// and the commit re-checks.
//
// Adding a sign-in (TOTP finalize, …) is one new case (IdpSignIn.swift and EmailLinkSignIn.swift are examples):
// 1. a struct nested in `SignInRequest` holding what the handler parsed and verified outside the lock, conforming to
//    `SignInMethod` in the file of its flow: `plan` (checks, consumes, decides: `.proceed(decision)` or
//    `.done(outcome)`), `candidate` (what the functions see; nil: they are not called) and `commit` (with `changes`
//    nil it runs in the plan's transaction; else it re-checks first, then applies them) — ending in `issueSession`;
// 2. its case in `SignInRequest` (and its line in `Emulator.signIn`'s switch and in `blockingEvents`);
// 3. its handler (PhoneAuthAPI) builds the request and calls `app.signIn(call, key, request, answer)` once, with a
//    `SignInAnswer` that shapes its reply. A first factor that a second may follow calls `passFirstFactor` in its plan.

/// A sign-in as a handler hands it to the pipeline (see the top of this file): what it parsed and checked outside
/// the store's lock.
public enum SignInRequest: Sendable {
    /// `accounts:signInWithPhoneNumber` (PhoneSignIn.swift).
    case phone(Phone)
    /// `accounts:signInWithPassword`, the password already verified against a hash (EmailAccounts.swift).
    case password(Password)
    /// `accounts:signInWithCustomToken`, the token already checked (CustomTokenSignIn.swift).
    case customToken(CustomToken)
    /// Client `accounts:signUp`: an anonymous or email/password user (SignUp.swift).
    case signUp(SignUp)
    /// `mfaSignIn:finalize` with an SMS code (MultiFactor.swift).
    case mfaFinalize(MFAFinalize)
    /// `mfaSignIn:finalize` with a TOTP code (TOTP.swift).
    case totpFinalize(TOTPFinalize)
    /// `accounts:signInWithIdp`, the credential already parsed (IdpSignIn.swift).
    case idp(Idp)
    /// `accounts:signInWithEmailLink` (EmailLinkSignIn.swift).
    case emailLink(EmailLink)

    static let createThenSignIn: [BlockingEvent] = [.beforeCreate, .beforeSignIn]
    static let signInOnly: [BlockingEvent] = [.beforeSignIn]

    /// The blocking-function events this sign-in may call: with none of them configured it runs as one transaction.
    public var blockingEvents: [BlockingEvent] {
        switch self {
        case .phone, .customToken, .signUp, .idp, .emailLink: Self.createThenSignIn
        case .password(let p): p.secondFactorExpected ? [] : Self.signInOnly  // beforeSignIn then runs at mfaSignIn:finalize
        case .mfaFinalize, .totpFinalize: Self.signInOnly
        }
    }

    /// Whether the sign-in is expected to issue tokens (an `.adaptive` route moves off the loop before it runs).
    public var expectsTokens: Bool {
        if case .password(let p) = self { return !p.secondFactorExpected }
        return true
    }
}

/// The user blocking functions see between plan and commit: as it would be saved.
public struct SignInCandidate: Sendable {
    public var user: UserRecord
    /// Created by this sign-in: beforeCreate runs first.
    public var isNew: Bool
    public var method: BlockingSignInMethod
    /// `"phone"` after an SMS second factor.
    public var secondFactor: String? = nil
    /// A federated sign-in's credential and raw profile.
    public var federated: FederatedCredential? = nil
}

/// A committed sign-in: the user as saved and the session's refresh token (stored in the same transaction), with
/// everything its ID token needs.
public struct SignedIn: Sendable, Equatable {
    public var user: UserRecord
    public var isNewUser: Bool
    public var refreshToken: String
    /// `firebase.sign_in_provider`.
    public var signInProvider: String
    /// Seconds.
    public var authTime: Int64
    /// The SMS second factor the session passed.
    public var secondFactorId: String?
    /// A custom token's developer claims (validated JSON object text): in every ID token of the session.
    public var developerClaims: String?
    /// A beforeSignIn function's session claims: in this sign-in's ID token only, never stored.
    public var sessionClaims: JSONObject?
    /// A federated sign-in found the user by its email, and the user had another identity of the same provider.
    public var emailRecycled = false
    /// The second factor's kind when `secondFactorId` is set: nil (`phone`) or `totp`.
    public var secondFactor: String? = nil
}

/// How a sign-in ended.
public enum SignInOutcome: Sendable, Equatable {
    case signedIn(SignedIn)
    /// A phone link whose number belongs to another user: production answers 200 with a temporary proof.
    case phoneLinkConflict(phoneNumber: String, temporaryProof: String)
    /// A first factor passed by an enrolled user: no tokens, a pending credential (`FirstFactorOutcome.mfaRequired`).
    case secondFactorRequired(user: UserRecord, FirstFactorOutcome)
    /// A federated identity whose (unverified) email belongs to another account: nothing changed; the client signs in
    /// to that account first (`needConfirmation`). `verifiedProviders`: its federated providers (nil: it has none at all).
    case needConfirmation(localId: String, verifiedProviders: [String]?)
}

/// What a plan decided.
enum SignInStep<Decision> {
    /// Commit this decision (after the functions, if a hook is given and `candidate` names a user).
    case proceed(Decision)
    /// Finished in the plan.
    case done(SignInOutcome)
}

/// One kind of sign-in, as `Emulator.signIn` runs it: the payloads of `SignInRequest` conform.
protocol SignInMethod: Sendable {
    associatedtype Decision
    /// The error when the store does not exist (the sign-in then runs on no store); nil: created on first use.
    var missingStore: AuthError? { get }
    /// Verifies and decides inside `tx`. `hooked`: blocking functions run before `commit`, which is then a second
    /// transaction (a plan that would otherwise consume what a refused function must leave, only reads).
    func plan(_ e: Emulator, _ tx: inout StoreTransaction, now: Int64, hooked: Bool) throws(AuthError) -> SignInStep<Decision>
    /// What the functions see (asked only with a hook); nil: they are not called and `commit` runs in the plan's
    /// transaction.
    func candidate(_ decision: Decision) -> SignInCandidate?
    /// Saves the sign-in. `changes` nil: in the plan's transaction. Else, after the functions, in a new one: re-checks
    /// what the plan assumed, then applies `changes`.
    func commit(_ e: Emulator, _ tx: inout StoreTransaction, _ decision: consuming Decision, changes: BlockingFunctions.Outcome?,
                now: Int64) throws(AuthError) -> SignInOutcome
}

extension SignInMethod {
    var missingStore: AuthError? { nil }
}

extension Emulator {
    /// What runs between plan and commit: the blocking functions on the candidate, answering their changes.
    public typealias SignInHook = (SignInCandidate) throws(AuthError) -> BlockingFunctions.Outcome

    /// The one entry point of every sign-in (see the top of this file). Without `hook`: one transaction. With one:
    /// the plan's transaction, `hook` with no lock held, then the commit's (blocking: call it off the event loops).
    public func signIn(_ key: StoreKey, _ request: SignInRequest, hook: SignInHook? = nil) throws(AuthError) -> SignInOutcome {
        switch request {
        case .phone(let m): try run(key, m, hook: hook)
        case .password(let m): try run(key, m, hook: hook)
        case .customToken(let m): try run(key, m, hook: hook)
        case .signUp(let m): try run(key, m, hook: hook)
        case .mfaFinalize(let m): try run(key, m, hook: hook)
        case .totpFinalize(let m): try run(key, m, hook: hook)
        case .idp(let m): try run(key, m, hook: hook)
        case .emailLink(let m): try run(key, m, hook: hook)
        }
    }

    func run<M: SignInMethod>(_ key: StoreKey, _ method: M, hook: SignInHook?) throws(AuthError) -> SignInOutcome {
        let now = clock.nowMillis()
        guard let hook else {
            return try transaction(key, method) { tx throws(AuthError) -> SignInOutcome in
                let step = try method.plan(self, &tx, now: now, hooked: false)
                switch consume step {
                case .proceed(let decision): return try method.commit(self, &tx, decision, changes: nil, now: now)
                case .done(let outcome): return outcome
                }
            }
        }
        let planned = try transaction(key, method) { tx throws(AuthError) -> SignInStep<(M.Decision, SignInCandidate)> in
            switch try method.plan(self, &tx, now: now, hooked: true) {
            case .proceed(let decision):
                guard let candidate = method.candidate(decision) else {
                    return .done(try method.commit(self, &tx, decision, changes: nil, now: now))
                }
                return .proceed((decision, candidate))
            case .done(let outcome): return .done(outcome)
            }
        }
        let decision: M.Decision, candidate: SignInCandidate
        switch consume planned {
        case .proceed(let p): (decision, candidate) = p
        case .done(let outcome): return outcome
        }
        let changes = try hook(candidate)
        let later = clock.nowMillis()
        var outcome = try transaction(key, method) { tx throws(AuthError) -> SignInOutcome in
            try method.commit(self, &tx, decision, changes: changes, now: later)
        }
        if let claims = changes.sessionClaims, case .signedIn(var s) = outcome {
            s.sessionClaims = claims
            outcome = .signedIn(s)
        }
        return outcome
    }

    /// A sign-in's transaction: on the store for `key` (created on first use), or only an existing one.
    private func transaction<M: SignInMethod, T>(_ key: StoreKey, _ method: M,
                                                 _ body: (inout StoreTransaction) throws(AuthError) -> T) throws(AuthError) -> T {
        guard let missing = method.missingStore else { return try transaction(key, body) }
        guard let box = existingStore(key) else { throw missing }
        return try transaction(box, body)
    }

    /// The end of every commit: a refresh token for `user` in the same transaction, `tokens.issued`, and the outcome.
    func issueSession(_ tx: inout StoreTransaction, _ user: consuming UserRecord, isNew: Bool, provider: String, authTime: Int64,
                      secondFactorId: String? = nil, secondFactor: String? = nil, developerClaims: String? = nil) -> SignInOutcome {
        let (token, record) = newRefreshToken(tx.key, localId: user.localId, authTime: authTime, signInProvider: provider,
                                              secondFactorId: secondFactorId, extraClaims: developerClaims, secondFactor: secondFactor)
        tx.insertRefreshToken(token, record)
        tx.emit(.tokensIssued(uid: user.localId, provider: provider, secondFactor: secondFactorId == nil ? nil : (secondFactor ?? "phone")))
        return .signedIn(SignedIn(user: user, isNewUser: isNew, refreshToken: token, signInProvider: provider, authTime: authTime,
                                  secondFactorId: secondFactorId, developerClaims: developerClaims, secondFactor: secondFactor))
    }

    /// A function disabled an existing user: its changes are saved (`user.updated`), nothing else of the sign-in (a
    /// code or pending credential stays as it was), and the sign-in is `USER_DISABLED`.
    func refuseDisabled(_ tx: inout StoreTransaction, localId: String, _ changes: BlockingFunctions.Outcome) throws(AuthError) -> Never {
        guard var user = tx.store.users[localId] else { throw AuthError(.userNotFound) }
        let old = user
        changes.apply(to: &user)
        tx.save(user)
        tx.emitUserChanges(from: old, to: user)
        throw AuthError(.userDisabled)
    }
}
