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

    /// The custom-token sign-in without blocking functions, in one call (`signIn(key, .customToken(…))`).
    public func completeCustomTokenSignIn(_ key: StoreKey, grant: CustomTokenGrant) throws(AuthError) -> CustomTokenSignInResult {
        guard case .signedIn(let s) = try signIn(key, .customToken(.init(grant: grant))) else {
            throw AuthError.internalError("a custom-token sign-in ends signed in")
        }
        return CustomTokenSignInResult(user: s.user, isNewUser: s.isNewUser, refreshToken: s.refreshToken, authTime: s.authTime)
    }
}

extension SignInRequest {
    /// A checked custom token's grant (PhoneAuthAPI/CustomTokens.swift checks the token itself).
    public struct CustomToken: Sendable {
        public var grant: CustomTokenGrant
        /// The caller's address (a new user counts against `protection.accountsPerIp`).
        public var clientIP: String?
        public init(grant: CustomTokenGrant, clientIP: String? = nil) {
            self.grant = grant
            self.clientIP = clientIP
        }
    }
}

extension SignInRequest.CustomToken: SignInMethod {
    /// With blocking functions: refuses a disabled tenant (`PROJECT_DISABLED`) or user (`USER_DISABLED`) and names
    /// the user they see — the one the token names, or a new one with its uid (beforeCreate then). Without, the
    /// commit decides alone (it makes the same checks).
    func plan(_ e: Emulator, _ tx: inout StoreTransaction, now: Int64, hooked: Bool) throws(AuthError) -> SignInStep<SignInCandidate?> {
        guard hooked else { return .proceed(nil) }
        try tx.checkTenantEnabled()
        let existing = tx.store.users[grant.uid]
        if let existing, existing.disabled { throw AuthError(.userDisabled) }
        return .proceed(SignInCandidate(user: existing ?? UserRecord(localId: grant.uid, createdAt: now), isNew: existing == nil, method: .custom))
    }

    func candidate(_ decision: SignInCandidate?) -> SignInCandidate? { decision }

    /// Creates or updates the user (with the functions' changes), records the login and issues the refresh token
    /// carrying the token's developer claims. It decides again: a user another request created while the functions
    /// ran is signed in (`isNewUser: false`); one they disabled is saved disabled and the sign-in is `USER_DISABLED`.
    func commit(_ e: Emulator, _ tx: inout StoreTransaction, _ decision: consuming SignInCandidate?, changes: BlockingFunctions.Outcome?,
                now: Int64) throws(AuthError) -> SignInOutcome {
        try tx.checkTenantEnabled()
        var user: UserRecord
        let before = tx.store.users[grant.uid]
        if let existing = before {
            guard !existing.disabled else { throw AuthError(.userDisabled) }
            user = existing
        } else {
            try e.checkUserQuota(userCount: tx.store.users.count)
            try e.countAccountCreation(&tx, clientIP: clientIP, now: now)
            user = try e.newUser(tx, tx.key, localId: grant.uid, changes: UserChanges(), now: now)
        }
        if let changes {
            changes.apply(to: &user)
            if user.disabled {
                tx.save(user)
                emitSaved(&tx, user, before: before)
                throw AuthError(.userDisabled)
            }
        }
        user.lastLoginAt = now
        user.lastRefreshAt = now
        tx.save(user)
        emitSaved(&tx, user, before: before)
        return e.issueSession(&tx, user, isNew: before == nil, provider: Emulator.customTokenProvider, authTime: now / 1000,
                              developerClaims: grant.developerClaims)
    }

    /// `user.created` (provider `custom`) for a user this sign-in made, else what it changed (`user.updated`…).
    private func emitSaved(_ tx: inout StoreTransaction, _ user: UserRecord, before: UserRecord?) {
        if let before {
            tx.emitUserChanges(from: before, to: user)
        } else {
            tx.emit(.userCreated(uid: user.localId, phoneNumber: user.phoneNumber, email: user.email, provider: Emulator.customTokenProvider))
        }
    }
}
