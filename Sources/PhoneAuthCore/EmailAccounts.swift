import EmulatorSupport

/// Email + password accounts: password sign-in and what out-of-band codes do to an account. Passwords are hashed by
/// the caller (PhoneAuthAPI/Passwords.swift, outside any lock); these functions only compare stored values.
extension Emulator {
    /// The user with this email (any case), or nil. Never creates a store.
    public func user(_ key: StoreKey, email: String) -> UserRecord? {
        existingStore(key)?.read { $0.user(email: email) }
    }

    /// Signs in the user whose password the caller verified against `verifiedHash`: in one transaction, the user must
    /// still have that hash (a password changed meanwhile is `INVALID_LOGIN_CREDENTIALS`), `USER_DISABLED` otherwise
    /// checked, `lastLoginAt` set and a refresh token issued. Returns the user, its refresh token and the auth time.
    /// The outcome of a password sign-in: signed in, or (an enrolled user) the second factor is required first.
    public enum PasswordSignIn: Sendable {
        case signedIn(user: UserRecord, refreshToken: String, authTime: Int64)
        /// No token and no login recorded: the sign-in continues with `mfaSignIn:start` / `:finalize`.
        case secondFactorRequired(user: UserRecord, outcome: FirstFactorOutcome)
    }

    /// `changes`: what a beforeSignIn function answered (BlockingCalls.swift), saved with the sign-in. `upgrade`: our
    /// own hash of a password verified against an imported one, stored in the same transaction when the sign-in
    /// completes (not when a second factor is still required) and the imported hash is still there.
    public func signInWithPassword(_ key: StoreKey, localId: String, verifiedHash: String,
                                   changes: BlockingFunctions.Outcome? = nil, upgrade: PasswordUpgrade? = nil) throws(AuthError) -> PasswordSignIn {
        let now = clock.nowMillis()
        guard let box = existingStore(key) else { throw AuthError(.invalidLoginCredentials) }
        return try transaction(box) { tx throws(AuthError) -> PasswordSignIn in
            try tx.checkTenantEnabled()
            guard var user = tx.store.users[localId], let hash = user.passwordHash, constantTimeEquals(hash, verifiedHash) else {
                throw AuthError(.invalidLoginCredentials)
            }
            guard !user.disabled else { throw AuthError(.userDisabled) }
            let outcome = passFirstFactor(&tx, user: user, signInProvider: "password")
            if case .mfaRequired = outcome { return .secondFactorRequired(user: user, outcome: outcome) }
            // The rehash is saved with the sign-in but is not a change a `user.updated` event reports. The hash is the
            // verified one (checked above); its algorithm must be too.
            if let upgrade, !user.upgradePassword(upgrade) { throw AuthError(.invalidLoginCredentials) }
            let old = user
            changes?.apply(to: &user)
            user.lastLoginAt = now
            user.lastRefreshAt = now
            tx.save(user)
            tx.emitUserChanges(from: old, to: user)  // what a beforeSignIn function changed
            let (token, record) = newRefreshToken(key, localId: user.localId, authTime: now / 1000, signInProvider: "password")
            tx.insertRefreshToken(token, record)
            tx.emit(.tokensIssued(uid: user.localId, provider: "password", secondFactor: nil))
            return .signedIn(user: user, refreshToken: token, authTime: now / 1000)
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
    /// moves the account to the new email, verified (`EMAIL_EXISTS` if taken meanwhile). The code is used up.
    /// A password-reset code is `INVALID_OOB_CODE` here (and stays usable for `resetPassword`).
    public func applyOobCode(_ key: StoreKey, code: String) throws(AuthError) -> (OobCode, UserRecord) {
        try useOobCode(key, code: code, consume: false) { tx, c throws(AuthError) in
            guard c.requestType != .passwordReset else { throw AuthError(.invalidOobCode) }
            tx.deleteOobCode(c.code)
            guard var user = tx.store.user(email: c.email) else { throw AuthError(.invalidOobCode) }
            let old = user
            switch c.requestType {
            case .verifyEmail:
                user.emailVerified = true
            case .verifyAndChangeEmail:
                guard let newEmail = c.newEmail else { throw AuthError(.invalidOobCode) }
                if let owner = tx.store.emailIndex[newEmail], owner != user.localId { throw AuthError(.emailExists) }
                user.email = newEmail.lowercased()
                user.emailVerified = true
            case .passwordReset:
                break
            }
            tx.save(user)
            tx.emitUserChanges(from: old, to: user)
            return (c, user)
        }
    }
}
