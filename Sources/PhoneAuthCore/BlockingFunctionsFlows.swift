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
                         phoneNumber: String?, tokenUser: TokenIdentity?, operation: String?, now: Int64) throws(AuthError) -> PhoneSignInPlan {
        try Self.checkTenantEnabled(tx.store)
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
            guard let sid = SessionID(info), var session = tx.store.sessions[sid], session.kind == .signIn, session.owner == nil else {
                throw AuthError(.invalidSessionInfo)  // MFA codes are consumed only by MFA finalize
            }
            if let exp = session.expiresAt, now >= exp {
                tx.deleteSession(sid)
                throw AuthError(.sessionExpired)
            }
            if let left = session.attemptsLeft, left <= 0 {
                tx.deleteSession(sid)
                throw AuthError(.tooManyAttemptsTryLater)
            }
            if let scenario = tx.store.config.phoneAuth.scenarioNumbers[session.phoneNumber]?.onSignIn {
                throw Self.scenarioError(scenario)
            }
            guard constantTimeEquals(code, session.code) else {
                if let left = session.attemptsLeft {
                    session.attemptsLeft = left - 1
                    tx.save(session)
                }
                throw AuthError(.invalidCode)
            }
            tx.deleteSession(sid)  // single use, consumed before the account checks (as production)
            phone = session.phoneNumber
            viaProof = false
        }

        let owner = tx.store.user(phone: phone)
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
    func phoneSignedIn(_ tx: inout StoreTransaction, _ key: StoreKey, _ user: UserRecord, isNewUser: Bool, now: Int64) -> PhoneSignInOutcome {
        var user = user
        user.lastRefreshAt = now  // a token is minted now (lookup's lastRefreshAt, as the official emulator)
        tx.save(user)
        let (token, record) = newRefreshToken(key, localId: user.localId, authTime: now / 1000, signInProvider: "phone")
        tx.insertRefreshToken(token, record)
        return .signedIn(user: user, isNewUser: isNewUser, refreshToken: token, authTime: now / 1000)
    }

    /// The first transaction of a phone sign-in with a blocking function: verifies and consumes the credential and
    /// returns the plan (a conflict is finished here). No user is saved yet.
    public func beginPhoneSignIn(_ key: StoreKey, sessionInfo: String?, code: String?, temporaryProof: String?,
                                 phoneNumber: String?, tokenUser: TokenIdentity?, operation: String?) throws(AuthError) -> PhoneSignInPlan {
        let now = clock.nowMillis()
        return try transaction(key) { tx throws(AuthError) -> PhoneSignInPlan in
            try planPhoneSignIn(&tx, key, sessionInfo: sessionInfo, code: code, temporaryProof: temporaryProof,
                                phoneNumber: phoneNumber, tokenUser: tokenUser, operation: operation, now: now)
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
            try Self.checkTenantEnabled(tx.store)
            guard let phone = planned.phoneNumber else { throw AuthError.internalError("phone sign-in without a number") }
            let owner = tx.store.user(phone: phone)
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
                tx.save(user)
                return nil
            }
            return phoneSignedIn(&tx, key, user, isNewUser: isNew, now: now)
        }
        guard let outcome else { throw AuthError(.userDisabled) }
        return outcome
    }
}
