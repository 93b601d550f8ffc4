import EmulatorSupport

// # Email-link sign-in (`accounts:signInWithEmailLink`)
//
// An EMAIL_SIGNIN code (`sendOobCode`, OobCodes.swift) proves the email: the code must be pending, of that type and
// for that email (a wrong email is `INVALID_EMAIL` and leaves the code usable); it is then used up, whatever follows.
// The user is the ID token's (link: its email becomes the link's, a password staying with it), else the one with that
// email, else a new one; it ends with the email verified and email-link sign-in on (`password` provider, sign-in
// method `emailLink`). Tokens say `sign_in_provider: "password"`, as production's. An enrolled user is saved, then
// owes the second factor.

extension SignInRequest {
    /// An email link: the email the client typed and the link's code; `tokenUser` links.
    public struct EmailLink: Sendable {
        /// Lower-case.
        public var email: String
        public var oobCode: String
        public var tokenUser: TokenIdentity?
        public var clientIP: String?

        public init(email: String, oobCode: String, tokenUser: TokenIdentity?, clientIP: String? = nil) {
            self.email = email.lowercased()
            self.oobCode = oobCode
            self.tokenUser = tokenUser
            self.clientIP = clientIP
        }
    }
}

extension SignInRequest.EmailLink: SignInMethod {
    /// No store: no code was ever made there.
    var missingStore: AuthError? { AuthError(.invalidOobCode) }

    struct Decision {
        var user: UserRecord
        var isNew: Bool
    }

    func plan(_ e: Emulator, _ tx: inout StoreTransaction, now: Int64, hooked: Bool) throws(AuthError) -> SignInStep<Decision> {
        try tx.checkTenantEnabled()
        let code = try e.liveOobCode(&tx, oobCode, now: now)
        guard code.requestType == .emailSignIn else { throw AuthError(.invalidOobCode) }
        guard code.email == email else { throw AuthError(.invalidEmail, "The email provided does not match the sign-in email address.") }
        tx.deleteOobCode(oobCode)
        switch try decide(e, &tx, now: now, planned: nil) {
        case .proceed(let d): return .proceed(d)
        case .done(let outcome): return .done(outcome)
        }
    }

    /// The user as the sign-in saves it, from the store as it is now (the code already checked). `planned`: the
    /// commit's re-check after the functions (a new user keeps the uid they saw).
    private func decide(_ e: Emulator, _ tx: inout StoreTransaction, now: Int64, planned: Decision?) throws(AuthError) -> SignInStep<Decision> {
        let byEmail = tx.store.user(email: email)
        var user: UserRecord
        let isNew: Bool
        if let tokenUser {
            guard let u = tx.store.users[tokenUser.localId] else { throw AuthError(.userNotFound) }
            user = u
            isNew = false
        } else if let u = byEmail {
            user = u
            isNew = false
        } else if let planned, planned.isNew {
            guard tx.store.users[planned.user.localId] == nil else { throw AuthError(.duplicateLocalId) }
            if let full = e.userQuotaError(userCount: tx.store.users.count) { throw full }
            return .proceed(planned)
        } else {
            if let full = e.userQuotaError(userCount: tx.store.users.count) { throw full }
            try e.countAccountCreation(&tx, clientIP: clientIP, now: now)
            user = UserRecord(localId: e.newUserID(in: tx.store.users), createdAt: now)
            user.tenantId = tx.key.tenantId
            isNew = true
        }
        if !isNew {
            guard !user.disabled else { throw AuthError(.userDisabled) }
            if let byEmail, byEmail.localId != user.localId { throw AuthError(.emailExists) }
            if let planned, planned.isNew || planned.user.localId != user.localId { throw AuthError(.emailExists) }
        }
        user.email = email
        user.emailVerified = true
        user.emailLinkSignin = true
        if !isNew {
            let first = e.passFirstFactor(&tx, user: user, signInProvider: "password")
            if case .mfaRequired = first {
                save(&tx, user, isNew: false)
                return .done(.secondFactorRequired(user: user, first))
            }
        }
        return .proceed(Decision(user: user, isNew: isNew))
    }

    func candidate(_ d: Decision) -> SignInCandidate? { SignInCandidate(user: d.user, isNew: d.isNew, method: .emailLink) }

    func commit(_ e: Emulator, _ tx: inout StoreTransaction, _ decision: consuming Decision, changes: BlockingFunctions.Outcome?,
                now: Int64) throws(AuthError) -> SignInOutcome {
        var d = decision
        if let changes {
            try tx.checkTenantEnabled()
            switch try decide(e, &tx, now: now, planned: d) {
            case .proceed(let fresh): d = fresh
            case .done(let outcome): return outcome
            }
            changes.apply(to: &d.user)
            if d.user.disabled {
                save(&tx, d.user, isNew: d.isNew)
                throw AuthError(.userDisabled)
            }
        }
        d.user.lastLoginAt = now
        d.user.lastRefreshAt = now
        save(&tx, d.user, isNew: d.isNew)
        return e.issueSession(&tx, d.user, isNew: d.isNew, provider: "password", authTime: now / 1000)
    }

    private func save(_ tx: inout StoreTransaction, _ user: UserRecord, isNew: Bool) {
        let before = tx.save(user)
        if isNew {
            tx.emit(.userCreated(uid: user.localId, phoneNumber: user.phoneNumber, email: user.email, provider: "emailLink"))
        } else if let before {
            tx.emitUserChanges(from: before, to: user)
        }
    }
}
