import EmulatorSupport

/// Email + password accounts: password sign-in and what out-of-band codes do to an account. Passwords are hashed by
/// the caller (PhoneAuthAPI/Passwords.swift, outside any lock); these functions only compare stored values.
extension Emulator {
    /// The user with this email (any case), or nil. Never creates a store.
    public func user(_ key: StoreKey, email: String) -> UserRecord? {
        existingStore(key)?.read { $0.user(email: email) }
    }

    /// The outcome of a password sign-in: signed in, or (an enrolled user) the second factor is required first.
    public enum PasswordSignIn: Sendable {
        case signedIn(user: UserRecord, refreshToken: String, authTime: Int64)
        /// No token and no login recorded: the sign-in continues with `mfaSignIn:start` / `:finalize`.
        case secondFactorRequired(user: UserRecord, outcome: FirstFactorOutcome)
    }

    /// The password sign-in without blocking functions, in one call (`signIn(key, .password(…))`).
    public func signInWithPassword(_ key: StoreKey, localId: String, verifiedHash: String, upgrade: PasswordUpgrade? = nil) throws(AuthError) -> PasswordSignIn {
        switch try signIn(key, .password(.init(localId: localId, verifiedHash: verifiedHash, secondFactorExpected: false, upgrade: upgrade))) {
        case .signedIn(let s): return .signedIn(user: s.user, refreshToken: s.refreshToken, authTime: s.authTime)
        case .secondFactorRequired(let user, let outcome): return .secondFactorRequired(user: user, outcome: outcome)
        case .phoneLinkConflict, .needConfirmation: throw AuthError.internalError("a password sign-in ends signed in or owing a factor")
        }
    }

    /// `resetPassword` without `newPassword`: the code's details, if it is good (`INVALID_OOB_CODE`, `EXPIRED_OOB_CODE`).
    public func checkOobCode(_ key: StoreKey, code: String) throws(AuthError) -> OobCode {
        try useOobCode(key, code: code, consume: false) { _, c throws(AuthError) in c }
    }

    /// `resetPassword` with `newPassword` (already hashed): a PASSWORD_RESET code sets the password of its email's
    /// account, marks the email verified and revokes older tokens; the code is used up.
    public func resetPassword(_ key: StoreKey, code: String, passwordHash: String, salt: String) throws(AuthError) -> (OobCode, UserRecord) {
        let now = clock.nowMillis()
        return try useOobCode(key, code: code, consume: false) { tx, c throws(AuthError) in
            guard c.requestType == .passwordReset else { throw AuthError(.invalidOobCode) }
            tx.deleteOobCode(c.code)
            guard var user = tx.store.user(email: c.email) else { throw AuthError(.invalidOobCode) }
            let old = user
            user.setPassword(hash: passwordHash, salt: salt, algorithm: nil)
            user.passwordUpdatedAt = now
            user.emailVerified = true
            user.validSince = now / 1000
            tx.save(user)
            tx.emitUserChanges(from: old, to: user)
            return (c, user)
        }
    }

    /// `accounts:update {oobCode}` (applyActionCode): VERIFY_EMAIL marks the email verified; VERIFY_AND_CHANGE_EMAIL
    /// moves the account to the new email, verified (`EMAIL_EXISTS` if taken meanwhile) and, with `recoveryLink`,
    /// sends the old address a RECOVER_EMAIL code; RECOVER_EMAIL moves the account that still has the address it moved
    /// to back to the code's, verified (`EMAIL_EXISTS` when another account took it meanwhile). The code is used up.
    /// A password-reset code is `INVALID_OOB_CODE` here (and stays usable for `resetPassword`).
    public func applyOobCode(_ key: StoreKey, code: String, recoveryLink: (@Sendable (String) -> String)? = nil) throws(AuthError) -> (OobCode, UserRecord) {
        let now = clock.nowMillis()
        return try useOobCode(key, code: code, consume: false) { tx, c throws(AuthError) in
            guard [.verifyEmail, .verifyAndChangeEmail, .recoverEmail].contains(c.requestType) else { throw AuthError(.invalidOobCode) }
            tx.deleteOobCode(c.code)
            let holder = c.requestType == .recoverEmail ? c.newEmail : c.email
            guard let holder, var user = tx.store.user(email: holder) else { throw AuthError(.invalidOobCode) }
            let old = user
            switch c.requestType {
            case .verifyEmail:
                user.emailVerified = true
            case .verifyAndChangeEmail:
                guard let newEmail = c.newEmail else { throw AuthError(.invalidOobCode) }
                if let owner = tx.store.emailIndex[newEmail], owner != user.localId { throw AuthError(.emailExists) }
                user.email = newEmail.lowercased()
                user.emailVerified = true
                noteEmailChange(&tx, from: old, to: &user, now: now, recoveryLink: recoveryLink)
            case .recoverEmail:
                if let owner = tx.store.emailIndex[c.email], owner != user.localId { throw AuthError(.emailExists) }
                user.email = c.email
                user.emailVerified = true
            case .passwordReset, .emailSignIn:
                break
            }
            tx.save(user)
            tx.emitUserChanges(from: old, to: user)
            return (c, user)
        }
    }

    /// After `old`'s email changed to `user`'s (inside the change's transaction, before `user` is saved): the old
    /// address becomes `initialEmail` if none is kept yet and, with `recoveryLink` (a change the user made, not an
    /// admin), the old address gets a RECOVER_EMAIL code that restores it — production's "your sign-in email was
    /// changed" mail. An account that had no email (an anonymous one gaining its first) gets neither.
    func noteEmailChange(_ tx: inout StoreTransaction, from old: UserRecord, to user: inout UserRecord, now: Int64,
                         recoveryLink: ((String) -> String)?) {
        guard let previous = old.email, let current = user.email, previous.lowercased() != current.lowercased() else { return }
        if user.initialEmail == nil { user.initialEmail = previous.lowercased() }
        guard let recoveryLink else { return }
        let code = makeOobCode(&tx, email: previous, newEmail: current, type: .recoverEmail, now: now, link: recoveryLink)
        let key = tx.key
        tx.onCommit { [self] in logOobCode(key, code) }
    }
}

extension SignInRequest {
    /// A password the caller verified against `verifiedHash` (hashed outside the store's lock: PhoneAuthAPI/Passwords.swift).
    public struct Password: Sendable {
        public var localId: String
        public var verifiedHash: String
        /// The caller's guess (`Emulator.secondFactorLikelyRequired`) that the user owes a second factor: then no
        /// blocking function runs here (beforeSignIn follows the second factor, at `mfaSignIn:finalize`) and the
        /// answer is expected to carry no token.
        public var secondFactorExpected: Bool
        /// Our own hash of a password verified against an imported one: stored with the sign-in when it completes
        /// (not when a second factor is still required) and the imported hash is still there (production rehashes on
        /// sign-in).
        public var upgrade: PasswordUpgrade?

        public init(localId: String, verifiedHash: String, secondFactorExpected: Bool, upgrade: PasswordUpgrade? = nil) {
            self.localId = localId
            self.verifiedHash = verifiedHash
            self.secondFactorExpected = secondFactorExpected
            self.upgrade = upgrade
        }
    }
}

extension SignInRequest.Password: SignInMethod {
    var missingStore: AuthError? { AuthError(.invalidLoginCredentials) }

    /// The user must still have the verified hash (a password changed meanwhile is `INVALID_LOGIN_CREDENTIALS`) and be
    /// enabled; an enrolled user owes the second factor (`passFirstFactor`: a pending credential, no tokens).
    func plan(_ e: Emulator, _ tx: inout StoreTransaction, now: Int64, hooked: Bool) throws(AuthError) -> SignInStep<UserRecord> {
        try tx.checkTenantEnabled()
        guard let user = tx.store.users[localId], let hash = user.passwordHash, constantTimeEquals(hash, verifiedHash) else {
            throw AuthError(.invalidLoginCredentials)
        }
        guard !user.disabled else { throw AuthError(.userDisabled) }
        let outcome = e.passFirstFactor(&tx, user: user, signInProvider: "password")
        if case .mfaRequired = outcome { return .done(.secondFactorRequired(user: user, outcome)) }
        return .proceed(user)
    }

    func candidate(_ user: UserRecord) -> SignInCandidate? { SignInCandidate(user: user, isNew: false, method: .password) }

    /// Records the login (`lastLoginAt`) and issues the refresh token. After beforeSignIn: a user it disabled gets its
    /// changes saved and `USER_DISABLED`; otherwise the plan's checks run again and its changes are saved with the
    /// sign-in.
    func commit(_ e: Emulator, _ tx: inout StoreTransaction, _ decision: consuming UserRecord, changes: BlockingFunctions.Outcome?,
                now: Int64) throws(AuthError) -> SignInOutcome {
        var user = decision
        if let changes {
            if changes.disabled == true { try e.refuseDisabled(&tx, localId: localId, changes) }
            switch try plan(e, &tx, now: now, hooked: true) {
            case .proceed(let current): user = current
            case .done(let outcome): return outcome
            }
        }
        // The rehash is saved with the sign-in but is not a change a `user.updated` event reports. The hash is the
        // verified one (the plan checked it); its algorithm must be too.
        if let upgrade, !user.upgradePassword(upgrade) { throw AuthError(.invalidLoginCredentials) }
        let old = user
        changes?.apply(to: &user)
        user.lastLoginAt = now
        user.lastRefreshAt = now
        tx.save(user)
        tx.emitUserChanges(from: old, to: user)  // what a beforeSignIn function changed
        return e.issueSession(&tx, user, isNew: false, provider: "password", authTime: now / 1000)
    }
}
