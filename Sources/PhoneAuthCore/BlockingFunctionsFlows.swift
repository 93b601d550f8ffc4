import EmulatorSupport

// The phone sign-in in two parts, so that a blocking function can be called between them with no lock held:
// `planPhoneSignIn` verifies the credential (consuming the code, as production does before the account checks) and
// decides what the sign-in will do; `phoneSignedIn` saves the user and its refresh token. Without a function both
// run in one transaction (`Emulator.signInWithPhoneNumber`); with one, the API runs `beginPhoneSignIn`, calls the
// function, then `finishPhoneSignIn`, which re-checks in its own transaction what the plan assumed.

/// What a verified phone credential leads to.
public enum PhoneSignInPlan: Sendable, Equatable {
    /// Finished already (a link conflict answered with a temporary proof).
    case done(PhoneSignInOutcome)
    /// Sign `user` in (as it would be saved: phone number and sign-in time set). `isNew`: created by this sign-in.
    /// `linking`: an ID token's user gains the number.
    case signIn(user: UserRecord, isNew: Bool, linking: Bool)
}

extension Emulator {
    /// Verifies the code (or temporary proof) and decides the outcome, inside `tx`. Throws what the flow throws.
    func planPhoneSignIn(_ tx: inout StoreTransaction, _ key: StoreKey, sessionInfo: String?, code: String?, temporaryProof: String?,
                         phoneNumber: String?, tokenUser: TokenIdentity?, operation: String?, clientIP: String?,
                         now: Int64) throws(AuthError) -> PhoneSignInPlan {
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
            // Single use, consumed before the account checks (as production); MFA codes only by MFA finalize.
            let session = try consumeCode(&tx, sessionInfo: info, code: code, clientIP: clientIP, now: now) { $0.kind == .signIn && $0.owner == nil }
            phone = session.phoneNumber
            viaProof = false
        }

        let owner = tx.user(phone: phone)
        if let tokenUser {
            guard var user = tx.store.users[tokenUser.localId] else { throw AuthError(.userNotFound) }
            if let owner, owner.localId != user.localId {
                if viaProof { throw AuthError(.phoneNumberExists) }
                let proof = random.token(byteCount: 64)
                tx.temporaryProofs.insert(proof, phone, expiresAt: now + Self.temporaryProofLifetimeMillis, now: now)
                return .done(.conflict(phoneNumber: phone, temporaryProof: proof))
            }
            guard !user.disabled else { throw AuthError(.userDisabled) }
            guard user.mfaInfo.isEmpty else { throw Self.phoneFirstFactorOfMFAUser }
            user.phoneNumber = phone
            user.lastLoginAt = now
            return .signIn(user: user, isNew: false, linking: true)
        }
        if var user = owner {
            guard !user.disabled else { throw AuthError(.userDisabled) }
            guard user.mfaInfo.isEmpty else { throw Self.phoneFirstFactorOfMFAUser }
            user.lastLoginAt = now
            return .signIn(user: user, isNew: false, linking: false)
        }
        if operation == "REAUTH" { throw AuthError(.userNotFound) }
        if let full = userQuotaError(tx.store) { throw full }
        var user = UserRecord(localId: newUserID(in: tx.store), createdAt: now)
        user.phoneNumber = phone
        user.lastRefreshAt = now
        user.lastLoginAt = now
        user.tenantId = key.tenantId
        return .signIn(user: user, isNew: true, linking: false)
    }

    /// Saves the signed-in user and a new refresh token, inside `tx`.
    func phoneSignedIn(_ tx: inout StoreTransaction, _ key: StoreKey, _ user: consuming UserRecord, isNewUser: Bool, now: Int64) -> PhoneSignInOutcome {
        user.lastRefreshAt = now  // a token is minted now (lookup's lastRefreshAt, as the official emulator)
        let before = tx.save(user)
        emitPhoneSaved(&tx, user, before: isNewUser ? nil : before)
        let (token, record) = newRefreshToken(key, localId: user.localId, authTime: now / 1000, signInProvider: "phone")
        tx.insertRefreshToken(token, record)
        tx.emit(.tokensIssued(uid: user.localId, provider: "phone", secondFactor: nil))
        return .signedIn(user: user, isNewUser: isNewUser, refreshToken: token, authTime: now / 1000)
    }

    /// `user.created` (provider `phone`) for a user the sign-in made; else what it changed: the number a link added
    /// (`user.updated` `phoneNumber`), a function's changes, `user.disabled`.
    private func emitPhoneSaved(_ tx: inout StoreTransaction, _ user: UserRecord, before: UserRecord?) {
        if let before {
            tx.emitUserChanges(from: before, to: user)
        } else {
            tx.emit(.userCreated(uid: user.localId, phoneNumber: user.phoneNumber, email: user.email, provider: "phone"))
        }
    }

    /// The first transaction of a phone sign-in with a blocking function: verifies and consumes the credential and
    /// returns the plan (a conflict is finished here). No user is saved yet.
    public func beginPhoneSignIn(_ key: StoreKey, sessionInfo: String?, code: String?, temporaryProof: String?,
                                 phoneNumber: String?, tokenUser: TokenIdentity?, operation: String?,
                                 clientIP: String? = nil) throws(AuthError) -> PhoneSignInPlan {
        let now = clock.nowMillis()
        return try transaction(key) { tx throws(AuthError) -> PhoneSignInPlan in
            try planPhoneSignIn(&tx, key, sessionInfo: sessionInfo, code: code, temporaryProof: temporaryProof,
                                phoneNumber: phoneNumber, tokenUser: tokenUser, operation: operation, clientIP: clientIP, now: now)
        }
    }

    /// The second transaction: re-checks what `plan` assumed (the number still free for a new user or a link, the
    /// user still there, enabled and without second factors, the number still theirs), applies the function's
    /// changes and saves. A user the functions disabled is saved disabled and gets `USER_DISABLED` (as the official
    /// emulator: beforeCreate's `disabled: true` still creates the account).
    public func finishPhoneSignIn(_ key: StoreKey, _ plan: PhoneSignInPlan, changes: BlockingFunctions.Outcome) throws(AuthError) -> PhoneSignInOutcome {
        guard case .signIn(let planned, let isNew, let linking) = plan else {
            if case .done(let o) = plan { return o }
            throw AuthError.internalError("unexpected plan")
        }
        let now = clock.nowMillis()
        let outcome: PhoneSignInOutcome? = try transaction(key) { tx throws(AuthError) -> PhoneSignInOutcome? in
            try tx.checkTenantEnabled()
            guard let phone = planned.phoneNumber else { throw AuthError.internalError("phone sign-in without a number") }
            let owner = tx.user(phone: phone)
            var user: UserRecord
            if isNew {
                // Taken meanwhile (another sign-in for the same number finished while the function ran).
                if owner != nil { throw AuthError(.phoneNumberExists) }
                guard tx.store.users[planned.localId] == nil else { throw AuthError(.duplicateLocalId) }
                if let full = userQuotaError(tx.store) { throw full }
                user = planned
            } else {
                guard var current = tx.store.users[planned.localId] else { throw AuthError(.userNotFound) }
                guard !current.disabled else { throw AuthError(.userDisabled) }
                guard current.mfaInfo.isEmpty else { throw Self.phoneFirstFactorOfMFAUser }
                if linking {
                    if let owner, owner.localId != current.localId { throw AuthError(.phoneNumberExists) }
                } else if owner?.localId != current.localId {
                    throw AuthError(.userNotFound)  // the number was unlinked meanwhile
                }
                current.phoneNumber = phone
                current.lastLoginAt = planned.lastLoginAt
                user = current
            }
            changes.apply(to: &user)
            if user.disabled {
                let before = tx.store.users[user.localId]
                tx.save(user)
                emitPhoneSaved(&tx, user, before: isNew ? nil : before)
                return nil
            }
            return phoneSignedIn(&tx, key, user, isNewUser: isNew, now: now)
        }
        guard let outcome else { throw AuthError(.userDisabled) }
        return outcome
    }
}

// MARK: client sign-up (anonymous, email/password)

extension Emulator {
    /// The user a client `signUp` would create, checked (tenant enabled, user quota, email free) but not saved:
    /// what beforeCreate sees. Its `localId` is reserved only by being unused now; `finishSignUp` re-checks.
    public func planSignUp(_ key: StoreKey, changes: UserChanges) throws(AuthError) -> UserRecord {
        let now = clock.nowMillis()
        let authTime = clock.nowSeconds()
        return try transaction(key) { tx throws(AuthError) -> UserRecord in
            try tx.checkTenantEnabled()
            try checkUserQuota(tx.store)
            var user = try newUser(tx.store, key, localId: nil, changes: changes, now: now)
            user.lastLoginAt = authTime * 1000
            user.lastRefreshAt = now
            return user
        }
    }

    /// Saves `planned` with the functions' changes and a refresh token, after re-checking what may have changed
    /// while they ran (quota, the uid and the email still free). A user they disabled is saved and `USER_DISABLED`.
    public func finishSignUp(_ key: StoreKey, _ planned: UserRecord, changes: BlockingFunctions.Outcome) throws(AuthError)
        -> (user: UserRecord, refreshToken: String, signInProvider: String, authTime: Int64) {
        let authTime = clock.nowSeconds()
        let result: (UserRecord, String, String, Int64)? = try transaction(key) { tx throws(AuthError) -> (UserRecord, String, String, Int64)? in
            try tx.checkTenantEnabled()
            try checkUserQuota(tx.store)
            guard tx.store.users[planned.localId] == nil else { throw AuthError(.duplicateLocalId) }
            if let e = planned.email, tx.store.user(email: e) != nil { throw AuthError(.emailExists) }
            var user = planned
            changes.apply(to: &user)
            tx.save(user)
            let provider = user.isAnonymous ? "anonymous" : "password"
            tx.emit(.userCreated(uid: user.localId, phoneNumber: user.phoneNumber, email: user.email, provider: provider))
            if user.disabled { return nil }
            let (token, record) = newRefreshToken(key, localId: user.localId, authTime: authTime, signInProvider: provider)
            tx.insertRefreshToken(token, record)
            tx.emit(.tokensIssued(uid: user.localId, provider: provider, secondFactor: nil))
            return (user, token, provider, authTime)
        }
        guard let result else { throw AuthError(.userDisabled) }
        return result
    }

    /// Saves a blocking function's `changes` to an existing user outside a sign-in (the user it disabled), in one
    /// transaction.
    public func applyBlockingChanges(_ key: StoreKey, localId: String, _ changes: BlockingFunctions.Outcome) throws(AuthError) {
        try transaction(key) { tx throws(AuthError) in
            guard var user = tx.store.users[localId] else { throw AuthError(.userNotFound) }
            let old = user
            changes.apply(to: &user)
            tx.save(user)
            tx.emitUserChanges(from: old, to: user)
        }
    }
}

// MARK: SMS second factor

extension Emulator {
    /// What `mfaSignIn:finalize` would sign in, if the code and the pending credential are good right now: the user
    /// and the first factor's provider; nil otherwise (then the finalize itself answers the precise error and counts
    /// the attempt). Reads only: nothing is consumed until `finalizeMFASignIn` re-checks and saves.
    public func peekMFASignIn(_ key: StoreKey, pendingCredential: String, sessionInfo: String?, code: String?) -> (UserRecord, String)? {
        guard let box = existingStore(key), let sessionInfo, let code, !code.isEmpty, let sid = SessionID(sessionInfo) else { return nil }
        let now = clock.nowMillis()
        return box.read { s -> (UserRecord, String)? in
            guard pendingCredential.utf8.count <= 512, let p = s.mfaPending.peek(pendingCredential, now: now),
                  let session = s.sessions[sid], session.kind == .mfaSignIn, session.owner == p.localId, p.sessions.contains(sid),
                  constantTimeEquals(code, session.code), session.expiresAt.map({ now < $0 }) ?? true, let user = s.users[p.localId],
                  !user.disabled, user.mfaInfo.contains(where: { $0.phoneInfo == session.phoneNumber })
            else { return nil }
            return (user, p.signInProvider)
        }
    }

    /// The user a pending MFA credential names (for beforeSendSms on `mfaSignIn:start`), if any.
    public func pendingMFAUser(_ key: StoreKey, pendingCredential: String?) -> UserRecord? {
        guard let box = existingStore(key), let c = pendingCredential, c.utf8.count <= 512 else { return nil }
        let now = clock.nowMillis()
        return box.read { s in s.mfaPending.peek(c, now: now).flatMap { s.users[$0.localId] } }
    }
}
