import EmulatorSupport

/// What a checked custom token asks for (the token itself is parsed and checked in PhoneAuthAPI/CustomTokens.swift).
public struct CustomTokenGrant: Sendable, Equatable {
    /// The user the token names (`uid`); created if absent.
    public let uid: String
    /// The token's developer `claims`, validated JSON object text (`CustomClaims.validate`); nil: none. They go into
    /// every ID token of this session (refreshes included), never into the user record.
    public let developerClaims: String?

    public init(uid: String, developerClaims: String?) {
        self.uid = uid
        self.developerClaims = developerClaims
    }
}

/// A committed custom-token sign-in: the user as saved, and the session's refresh token (stored in the same
/// transaction as the user).
public struct CustomTokenSignInResult: Sendable, Equatable {
    public let user: UserRecord
    public let isNewUser: Bool
    public let refreshToken: String
    /// Seconds.
    public let authTime: Int64
}

extension Emulator {
    /// The provider custom-token sessions carry (`firebase.sign_in_provider`).
    public static let customTokenProvider = "custom"

    /// A custom-token sign-in in two steps, so that what runs between them (blocking functions: `beforeCreate` when
    /// the answer is nil, `beforeSignIn` always) holds no lock and no transaction:
    ///
    /// 1. `customTokenSubject` — the decision: the existing user the token names, or nil when the sign-in will create
    ///    one. Read only; refuses a disabled tenant (`PROJECT_DISABLED`) or user (`USER_DISABLED`).
    /// 2. `completeCustomTokenSignIn` — one transaction: creates or updates the user (applying `changes`, e.g. what a
    ///    blocking function returned), records the login and issues the refresh token. The caller then mints the ID
    ///    token (`TokenService.claims(…, signInProvider: "custom", extraClaims:)`).
    ///
    /// If another request creates the user between the steps, step 2 signs in to that user (`isNewUser: false`).
    public func customTokenSubject(_ key: StoreKey, uid: String) throws(AuthError) -> UserRecord? {
        guard let box = existingStore(key) else { return nil }  // a store that does not exist yet has no users
        let (tenantDisabled, user) = box.read { s in (s.tenant?.disableAuth == true, s.users[uid]) }
        if tenantDisabled { throw AuthError(.projectDisabled) }
        if let user, user.disabled { throw AuthError(.userDisabled) }
        return user
    }

    /// Step 2 of a custom-token sign-in (see `customTokenSubject`).
    /// `blocking`: what beforeCreate/beforeSignIn returned, applied to the user saved here; a user they disabled is
    /// saved disabled and the sign-in ends with `USER_DISABLED` (no refresh token).
    public func completeCustomTokenSignIn(_ key: StoreKey, grant: CustomTokenGrant, changes: UserChanges = UserChanges(),
                                          blocking: BlockingFunctions.Outcome? = nil) throws(AuthError) -> CustomTokenSignInResult {
        let now = clock.nowMillis()
        let authTime = now / 1000
        return try transaction(key) { tx throws(AuthError) -> CustomTokenSignInResult in
            try tx.checkTenantEnabled()
            var user: UserRecord
            let isNewUser: Bool
            let before = tx.store.users[grant.uid]
            if var existing = before {
                guard !existing.disabled else { throw AuthError(.userDisabled) }
                try apply(changes, to: &existing, in: tx.store, now: now)
                user = existing
                isNewUser = false
            } else {
                try checkUserQuota(tx.store)
                user = try newUser(tx.store, key, localId: grant.uid, changes: changes, now: now)
                isNewUser = true
            }
            if let blocking {
                blocking.apply(to: &user)
                if user.disabled {
                    tx.save(user)
                    emitSaved(&tx, user, before: before)
                    return CustomTokenSignInResult(user: user, isNewUser: isNewUser, refreshToken: "", authTime: authTime)
                }
            }
            user.lastLoginAt = now
            user.lastRefreshAt = now
            tx.save(user)
            emitSaved(&tx, user, before: before)
            let (token, record) = newRefreshToken(key, localId: user.localId, authTime: authTime, signInProvider: Self.customTokenProvider,
                                                  extraClaims: grant.developerClaims)
            tx.insertRefreshToken(token, record)
            tx.emit(.tokensIssued(uid: user.localId, provider: Self.customTokenProvider, secondFactor: nil))
            return CustomTokenSignInResult(user: user, isNewUser: isNewUser, refreshToken: token, authTime: authTime)
        }
    }

    /// `user.created` (provider `custom`) for a user this sign-in made, else what it changed (`user.updated`…).
    private func emitSaved(_ tx: inout StoreTransaction, _ user: UserRecord, before: UserRecord?) {
        if let before {
            tx.emitUserChanges(from: before, to: user)
        } else {
            tx.emit(.userCreated(uid: user.localId, phoneNumber: user.phoneNumber, email: user.email, provider: Self.customTokenProvider))
        }
    }
}
