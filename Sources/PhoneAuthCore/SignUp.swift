import EmulatorSupport

extension SignInRequest {
    /// Client `accounts:signUp` without an ID token: an anonymous user (no changes), or an email/password one (the
    /// handler checked the request and hashed the password).
    public struct SignUp: Sendable {
        public var changes: UserChanges
        /// The caller's address (the new user counts against `protection.accountsPerIp`).
        public var clientIP: String?
        public init(changes: UserChanges, clientIP: String? = nil) {
            self.changes = changes
            self.clientIP = clientIP
        }
    }
}

extension SignInRequest.SignUp: SignInMethod {
    /// The user as it would be saved, signed in now: checked (tenant enabled, user quota, email free) but not saved.
    /// Its `localId` is reserved only by being unused now: after the functions, the commit checks again.
    func plan(_ e: Emulator, _ tx: inout StoreTransaction, now: Int64, hooked: Bool) throws(AuthError) -> SignInStep<UserRecord> {
        try tx.checkTenantEnabled()
        try e.checkUserQuota(userCount: tx.store.users.count)
        try e.countAccountCreation(&tx, clientIP: clientIP, now: now)
        var user = try e.newUser(tx, tx.key, localId: nil, changes: changes, now: now)
        user.lastLoginAt = now / 1000 * 1000
        user.lastRefreshAt = now
        return .proceed(user)
    }

    func candidate(_ user: UserRecord) -> SignInCandidate? {
        SignInCandidate(user: user, isNew: true, method: user.isAnonymous ? .anonymous : .password)
    }

    /// Saves the user (`user.created`, provider `anonymous` or `password`) and its refresh token. After the functions,
    /// first re-checks what may have changed while they ran (quota, the uid and the email still free) and applies
    /// their changes: a user they disabled is saved, and the sign-up is `USER_DISABLED`.
    func commit(_ e: Emulator, _ tx: inout StoreTransaction, _ decision: consuming UserRecord, changes: BlockingFunctions.Outcome?,
                now: Int64) throws(AuthError) -> SignInOutcome {
        var user = decision
        if let changes {
            try tx.checkTenantEnabled()
            try e.checkUserQuota(userCount: tx.store.users.count)
            guard tx.store.users[user.localId] == nil else { throw AuthError(.duplicateLocalId) }
            if let email = user.email, tx.store.user(email: email) != nil { throw AuthError(.emailExists) }
            changes.apply(to: &user)
        }
        let provider = user.isAnonymous ? "anonymous" : "password"
        tx.save(user)
        tx.emit(.userCreated(uid: user.localId, phoneNumber: user.phoneNumber, email: user.email, provider: provider))
        if user.disabled { throw AuthError(.userDisabled) }
        return e.issueSession(&tx, user, isNew: true, provider: provider, authTime: now / 1000)
    }
}
