import EmulatorSupport

// The phone sign-in (`accounts:signInWithPhoneNumber`): sign-in, sign-up, link (an ID token's user gains the number),
// re-auth (`operation: "REAUTH"`) and the temporary-proof conflict path, as one `SignInMethod` (SignIn.swift).

/// The outcome of `Emulator.signInWithPhoneNumber`.
public enum PhoneSignInOutcome: Sendable, Equatable {
    /// Signed in; `refreshToken` was stored in the same durable transaction as the user.
    case signedIn(user: UserRecord, isNewUser: Bool, refreshToken: String, authTime: Int64)
    /// The number belongs to another user: production answers 200 with a temporary proof.
    case conflict(phoneNumber: String, temporaryProof: String)
}

extension SignInRequest {
    /// A phone credential: `sessionInfo` and `code`, or a `temporaryProof` with its `phoneNumber`.
    public struct Phone: Sendable {
        public var sessionInfo: String?
        public var code: String?
        public var temporaryProof: String?
        public var phoneNumber: String?
        /// The verified identity of the request's `idToken` (link / re-auth), already checked.
        public var tokenUser: TokenIdentity?
        public var operation: String?
        public var clientIP: String?

        @inlinable
        public init(sessionInfo: String?, code: String?, temporaryProof: String?, phoneNumber: String?, tokenUser: TokenIdentity?,
                    operation: String?, clientIP: String? = nil) {
            self.sessionInfo = sessionInfo
            self.code = code
            self.temporaryProof = temporaryProof
            self.phoneNumber = phoneNumber
            self.tokenUser = tokenUser
            self.operation = operation
            self.clientIP = clientIP
        }
    }
}

extension SignInRequest.Phone: SignInMethod {
    /// Sign `user` in (as it would be saved: phone number and sign-in time set). `isNew`: created by this sign-in.
    /// `linking`: an ID token's user gains the number.
    struct Decision {
        var user: UserRecord
        var isNew: Bool
        var linking: Bool
    }

    /// Verifies the code (single use, consumed before the account checks, as production) or the temporary proof, and
    /// decides: a conflict (finished here), or the user to sign in.
    func plan(_ e: Emulator, _ tx: inout StoreTransaction, now: Int64, hooked: Bool) throws(AuthError) -> SignInStep<Decision> {
        try tx.checkTenantEnabled()
        let phone: String
        let viaProof: Bool
        if let proof = temporaryProof, !proof.isEmpty {
            guard let raw = phoneNumber, !raw.isEmpty else { throw AuthError(.missingPhoneNumber) }
            let p = try PhoneNumber(parsing: raw).e164
            guard tx.store.temporaryProofs.peek(proof, now: now) == p else { throw AuthError(.invalidTemporaryProof) }
            phone = p
            viaProof = true
        } else {
            guard let info = sessionInfo, !info.isEmpty else { throw AuthError(.missingSessionInfo) }
            guard let code, !code.isEmpty else { throw AuthError(.missingCode) }
            // MFA codes only by MFA finalize.
            let session = try e.consumeCode(&tx, sessionInfo: info, code: code, clientIP: clientIP, now: now) { $0.kind == .signIn && $0.owner == nil }
            phone = session.phoneNumber
            viaProof = false
        }

        let owner = tx.user(phone: phone)
        if let tokenUser {
            guard var user = tx.store.users[tokenUser.localId] else { throw AuthError(.userNotFound) }
            if let owner, owner.localId != user.localId {
                if viaProof { throw AuthError(.phoneNumberExists) }
                let proof = e.random.token(byteCount: 64)
                tx.temporaryProofs.insert(proof, phone, expiresAt: now + Emulator.temporaryProofLifetimeMillis, now: now)
                return .done(.phoneLinkConflict(phoneNumber: phone, temporaryProof: proof))
            }
            guard !user.disabled else { throw AuthError(.userDisabled) }
            guard user.mfaInfo.isEmpty else { throw Emulator.phoneFirstFactorOfMFAUser }
            user.phoneNumber = phone
            user.lastLoginAt = now
            return .proceed(Decision(user: user, isNew: false, linking: true))
        }
        if var user = owner {
            guard !user.disabled else { throw AuthError(.userDisabled) }
            guard user.mfaInfo.isEmpty else { throw Emulator.phoneFirstFactorOfMFAUser }
            user.lastLoginAt = now
            return .proceed(Decision(user: user, isNew: false, linking: false))
        }
        if operation == "REAUTH" { throw AuthError(.userNotFound) }
        if let full = e.userQuotaError(userCount: tx.store.users.count) { throw full }
        try e.countAccountCreation(&tx, clientIP: clientIP, now: now)
        var user = UserRecord(localId: e.newUserID(in: tx.store.users), createdAt: now)
        user.phoneNumber = phone
        user.lastRefreshAt = now
        user.lastLoginAt = now
        user.tenantId = tx.key.tenantId
        return .proceed(Decision(user: user, isNew: true, linking: false))
    }

    func candidate(_ d: Decision) -> SignInCandidate? { SignInCandidate(user: d.user, isNew: d.isNew, method: .phone) }

    /// Saves the user and a new refresh token. After the functions, first re-checks what the plan assumed (the number
    /// still free for a new user or a link, the user still there, enabled and without second factors, the number
    /// still theirs) and applies their changes: a user they disabled is saved disabled and gets `USER_DISABLED` (as
    /// the official emulator: beforeCreate's `disabled: true` still creates the account).
    func commit(_ e: Emulator, _ tx: inout StoreTransaction, _ d: consuming Decision, changes: BlockingFunctions.Outcome?,
                now: Int64) throws(AuthError) -> SignInOutcome {
        if let changes {
            try recheck(e, &tx, &d)
            changes.apply(to: &d.user)
            if d.user.disabled {
                let before = tx.save(d.user)
                emitSaved(&tx, d.user, before: d.isNew ? nil : before)
                throw AuthError(.userDisabled)
            }
        }
        d.user.lastRefreshAt = now  // a token is minted now (lookup's lastRefreshAt, as the official emulator)
        let before = tx.save(d.user)
        emitSaved(&tx, d.user, before: d.isNew ? nil : before)
        return e.issueSession(&tx, d.user, isNew: d.isNew, provider: "phone", authTime: now / 1000)
    }

    /// The second transaction's checks; `d.user` becomes the stored user with the number and the plan's login time.
    private func recheck(_ e: Emulator, _ tx: inout StoreTransaction, _ d: inout Decision) throws(AuthError) {
        try tx.checkTenantEnabled()
        guard let phone = d.user.phoneNumber else { throw AuthError.internalError("phone sign-in without a number") }
        let owner = tx.user(phone: phone)
        if d.isNew {
            // Taken meanwhile (another sign-in for the same number finished while the function ran).
            if owner != nil { throw AuthError(.phoneNumberExists) }
            guard tx.store.users[d.user.localId] == nil else { throw AuthError(.duplicateLocalId) }
            if let full = e.userQuotaError(userCount: tx.store.users.count) { throw full }
            return
        }
        guard var current = tx.store.users[d.user.localId] else { throw AuthError(.userNotFound) }
        guard !current.disabled else { throw AuthError(.userDisabled) }
        guard current.mfaInfo.isEmpty else { throw Emulator.phoneFirstFactorOfMFAUser }
        if d.linking {
            if let owner, owner.localId != current.localId { throw AuthError(.phoneNumberExists) }
        } else if owner?.localId != current.localId {
            throw AuthError(.userNotFound)  // the number was unlinked meanwhile
        }
        current.phoneNumber = phone
        current.lastLoginAt = d.user.lastLoginAt
        d.user = current
    }

    /// `user.created` (provider `phone`) for a user the sign-in made; else what it changed: the number a link added
    /// (`user.updated` `phoneNumber`), a function's changes, `user.disabled`.
    private func emitSaved(_ tx: inout StoreTransaction, _ user: UserRecord, before: UserRecord?) {
        if let before {
            tx.emitUserChanges(from: before, to: user)
        } else {
            tx.emit(.userCreated(uid: user.localId, phoneNumber: user.phoneNumber, email: user.email, provider: "phone"))
        }
    }
}

extension Emulator {
    /// A temporary proof (phone-number link conflict) is good for an hour; a store keeps the newest 256.
    public static let temporaryProofLifetimeMillis: Int64 = 3_600_000
    public static let maxTemporaryProofs = 256

    /// The phone sign-in without blocking functions, in one call (`signIn(key, .phone(…))`).
    public func signInWithPhoneNumber(_ key: StoreKey, sessionInfo: String?, code: String?, temporaryProof: String?,
                                      phoneNumber: String?, tokenUser: TokenIdentity?, operation: String?,
                                      clientIP: String? = nil) throws(AuthError) -> PhoneSignInOutcome {
        let request = SignInRequest.Phone(sessionInfo: sessionInfo, code: code, temporaryProof: temporaryProof, phoneNumber: phoneNumber,
                                          tokenUser: tokenUser, operation: operation, clientIP: clientIP)
        switch try signIn(key, .phone(request)) {
        case .signedIn(let s): return .signedIn(user: s.user, isNewUser: s.isNewUser, refreshToken: s.refreshToken, authTime: s.authTime)
        case .phoneLinkConflict(let phone, let proof): return .conflict(phoneNumber: phone, temporaryProof: proof)
        case .secondFactorRequired, .needConfirmation: throw AuthError.internalError("a phone sign-in owes no second factor")
        }
    }
}
