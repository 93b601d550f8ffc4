import EmulatorSupport

// # Test principals
//
// `POST /emulator/v1/projects/{p}[/tenants/{t}]/idTokens` signs in a user of the caller's choosing in one call: the
// user is created (or the given fields of an existing one updated) through the user field table, like an admin
// create or update, custom claims set with the Admin API's rules, and a real refresh token stored in the same
// transaction — so the session is an ordinary one from then on: it refreshes, it is revoked by `validSince`, it dies
// with its user. The API layer signs the ID token with the key and claims every sign-in uses
// (PhoneAuthAPI/TestPrincipals.swift).

/// What a test principal asks for (checked at the API boundary).
public struct PrincipalRequest: Sendable {
    /// The user's uid (`Identifiers.isValidLocalID`).
    public var uid: String
    /// Fields to set (phone number, email, `emailVerified`, display name, custom claims), as an admin update would.
    public var changes: UserChanges
    /// `firebase.sign_in_provider`: one of `Emulator.principalProviders`, or `oidc.…` / `saml.…`.
    public var signInProvider: String
    /// `phone` or `totp`: the token says the session passed that second factor.
    public var secondFactor: String?
    /// Seconds (the emulator clock's now when nil); not in the future.
    public var authTime: Int64?

    public init(uid: String, changes: UserChanges = UserChanges(), signInProvider: String = Emulator.customTokenProvider,
                secondFactor: String? = nil, authTime: Int64? = nil) {
        self.uid = uid
        self.changes = changes
        self.signInProvider = signInProvider
        self.secondFactor = secondFactor
        self.authTime = authTime
    }
}

/// A committed test principal: the user as saved and the session's refresh token (stored with it).
public struct MintedPrincipal: Sendable, Equatable {
    public let user: UserRecord
    public let isNewUser: Bool
    public let refreshToken: String
    /// Seconds.
    public let authTime: Int64
    /// `firebase.second_factor_identifier` (an enrollment's id, or a generated one), with `secondFactor`.
    public let secondFactorId: String?
    public let secondFactor: String?
}

extension Emulator {
    /// Providers a test principal may name besides `oidc.<id>` and `saml.<id>` (production's `sign_in_provider` values).
    public static let principalProviders: Set<String> = [
        "custom", "phone", "password", "anonymous", "google.com", "facebook.com", "twitter.com", "github.com", "apple.com",
        "microsoft.com", "yahoo.com", "playgames.google.com", "gc.apple.com",
    ]
    public static let principalSecondFactors: Set<String> = ["phone", "totp"]

    /// Whether `p` is a provider a test principal may name.
    public static func isPrincipalProvider(_ p: String) -> Bool {
        if principalProviders.contains(p) { return true }
        for prefix in ["oidc.", "saml."] where p.hasPrefix(prefix) {
            let id = p.utf8.dropFirst(prefix.utf8.count)
            return !id.isEmpty && id.count <= 64 && id.allSatisfy { b in
                (b >= 0x30 && b <= 0x39) || ((b | 0x20) >= 0x61 && (b | 0x20) <= 0x7A) || b == 0x2D || b == 0x5F || b == 0x2E
            }
        }
        return false
    }

    /// Creates or updates the user and issues its session, in one transaction. Refuses a disabled tenant
    /// (`PROJECT_DISABLED`) or user (`USER_DISABLED`), a new user past `--max-users` (`QUOTA_EXCEEDED`), the field
    /// table's checks (`PHONE_NUMBER_EXISTS`, `EMAIL_EXISTS`, `INVALID_EMAIL`, `CLAIMS_TOO_LARGE`…) and a provider
    /// the user could not have signed in with (`INVALID_ARGUMENT`: `phone` without a number, `password` without an
    /// email, `anonymous` with either, a second factor after a first factor MFA is not available for).
    public func mintPrincipal(_ key: StoreKey, _ r: PrincipalRequest) throws(AuthError) -> MintedPrincipal {
        let now = clock.nowMillis()
        let authTime = r.authTime ?? now / 1000
        guard authTime >= 0, authTime <= now / 1000 else {
            throw AuthError.invalidArgument("authTime must be seconds since the epoch, not after the emulator clock's now (\(now / 1000)).")
        }
        return try transaction(key) { tx throws(AuthError) -> MintedPrincipal in
            try tx.checkTenantEnabled()
            let before = tx.store.users[r.uid]
            var user: UserRecord
            if var existing = before {
                guard !existing.disabled else { throw AuthError(.userDisabled) }
                try tx.apply(r.changes, to: &existing, table: userFields, now: now)
                user = existing
            } else {
                try checkUserQuota(userCount: tx.store.users.count)
                user = try newUser(tx, key, localId: r.uid, changes: r.changes, now: now)
            }
            try Self.checkPrincipal(r, user)
            var factorId: String? = nil
            if let factor = r.secondFactor {
                // The user's own factor of that kind when it has one (a TOTP principal names its TOTP enrollment).
                factorId = user.mfaInfo.first(where: { $0.factorId == factor })?.mfaEnrollmentId ?? random.alphanumeric(28)
            }
            user.lastLoginAt = authTime * 1000
            user.lastRefreshAt = now
            tx.save(user)
            if let before {
                tx.emitUserChanges(from: before, to: user)
            } else {
                tx.emit(.userCreated(uid: user.localId, phoneNumber: user.phoneNumber, email: user.email, provider: r.signInProvider))
            }
            let (token, record) = newRefreshToken(key, localId: user.localId, authTime: authTime, signInProvider: r.signInProvider,
                                                  secondFactorId: factorId, secondFactor: factorId == nil ? nil : r.secondFactor)
            tx.insertRefreshToken(token, record)
            tx.emit(.tokensIssued(uid: user.localId, provider: r.signInProvider, secondFactor: r.secondFactor))
            return MintedPrincipal(user: user, isNewUser: before == nil, refreshToken: token, authTime: authTime, secondFactorId: factorId,
                                   secondFactor: factorId == nil ? nil : r.secondFactor)
        }
    }

    /// The provider and second factor must be ones this user could have signed in with.
    static func checkPrincipal(_ r: PrincipalRequest, _ user: UserRecord) throws(AuthError) {
        switch r.signInProvider {
        case "phone" where user.phoneNumber == nil:
            throw AuthError.invalidArgument("signInProvider phone needs a user with a phone number (give phoneNumber).")
        case "password" where user.email == nil:
            throw AuthError.invalidArgument("signInProvider password needs a user with an email (give email).")
        case "anonymous" where user.phoneNumber != nil || user.email != nil:
            throw AuthError.invalidArgument("signInProvider anonymous is for a user without a phone number or email.")
        default: break
        }
        if r.secondFactor != nil, MultiFactor.ineligibleProviders.contains(r.signInProvider) {
            throw AuthError.invalidArgument(
                "secondFactor needs a first factor multi-factor sign-in exists for (password, google.com, …), not \(r.signInProvider): give signInProvider.")
        }
    }
}
