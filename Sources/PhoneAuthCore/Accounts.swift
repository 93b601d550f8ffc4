import EmulatorSupport

/// A field an update sets, clears, or leaves alone.
public enum FieldChange<T: Sendable & Equatable>: Sendable, Equatable {
    case unchanged
    case set(T)
    case clear
}

/// What `accounts` (create) and `accounts:update` may change on a user.
public struct UserChanges: Sendable {
    public var displayName: FieldChange<String> = .unchanged
    public var photoUrl: FieldChange<String> = .unchanged
    public var email: FieldChange<String> = .unchanged
    public var emailVerified: Bool?
    public var disabled: Bool?
    public var phoneNumber: FieldChange<String> = .unchanged
    /// Validated JSON text of custom claims (`{}` clears).
    public var customAttributes: String?
    public var validSince: Int64?
    public var passwordHash: String?
    /// A new password revokes older tokens (production); imports keep their `validSince`.
    public var passwordRevokesTokens = true
    public var createdAt: Int64?
    public var lastLoginAt: Int64?
    public init() {}
}

/// Custom claims rules shared by every path that sets them.
public enum CustomClaims {
    /// Claim names custom claims may not use (firebase-admin's RESERVED_CLAIMS and the emulator's list).
    public static let reserved: Set<String> = [
        "acr", "amr", "at_hash", "aud", "auth_time", "azp", "cnf", "c_hash", "exp", "firebase", "iat", "iss", "jti", "nbf", "nonce", "sub",
    ]

    /// Validates `customAttributes` text: ≤ 1000 characters (`CLAIMS_TOO_LARGE`), a JSON object (`INVALID_CLAIMS`),
    /// no reserved names (`FORBIDDEN_CLAIM : <name>`). Returns the canonical text.
    /// The claims size limit, counted as JavaScript and firebase-tools count it (UTF-16 code units; never grapheme
    /// clusters, which would let one "character" of combining marks carry megabytes).
    public static let maxLength = 1000

    public static func validate(_ text: String) throws(AuthError) -> String {
        guard text.utf16.count <= maxLength else { throw AuthError("CLAIMS_TOO_LARGE") }
        guard case .object(let o)? = try? JSONParser.parse(text, maxDepth: 32) else { throw AuthError("INVALID_CLAIMS") }
        for k in o.keys where reserved.contains(k) { throw AuthError("FORBIDDEN_CLAIM", k) }
        return text
    }
}

/// Size limits of the free-text user fields, enforced on every path that sets them (client `signUp` and
/// `accounts:update`, admin create/update, `batchCreate`, firebase-tools import) by `Emulator.apply`.
///
/// Production documents no limit for `displayName`, `photoUrl` or a password hash; these are generous bounds so a
/// client cannot park megabytes in one account (the official emulator has none either). Lengths are in UTF-16 code
/// units, as JavaScript and firebase-tools count (a UTF-8 byte count is at most 3× that). Custom claims keep
/// production's 1000 (`CustomClaims`), uids 128 bytes and emails 254 bytes (`Identifiers`).
public enum UserFieldLimits {
    /// `displayName`: at most 1024 (`INVALID_DISPLAY_NAME`).
    public static let displayName = 1024
    /// `photoUrl`: at most 2048, the de facto URL limit (`INVALID_PHOTO_URL`).
    public static let photoUrl = 2048
    /// An imported `passwordHash` (base64 of a hash; scrypt's is 88 characters): at most 1024 (`INVALID_PASSWORD_HASH`).
    public static let passwordHash = 1024

    static func check(_ value: String, _ limit: Int, code: String, field: String) throws(AuthError) {
        let n = value.utf16.count
        guard n <= limit else { throw AuthError(code, "\(field) must be at most \(limit) characters (got \(n)).") }
    }

    /// Throws the field's error if `c` would store an over-long value.
    public static func validate(_ c: UserChanges) throws(AuthError) {
        if case .set(let v) = c.displayName { try check(v, displayName, code: "INVALID_DISPLAY_NAME", field: "displayName") }
        if case .set(let v) = c.photoUrl { try check(v, photoUrl, code: "INVALID_PHOTO_URL", field: "photoUrl") }
        if let v = c.passwordHash { try check(v, passwordHash, code: "INVALID_PASSWORD_HASH", field: "passwordHash") }
        if let v = c.customAttributes, v.utf16.count > CustomClaims.maxLength { throw AuthError("CLAIMS_TOO_LARGE") }
    }
}

/// Per-tenant settings (the v2 Tenant resource's fields we act on, plus whatever else was stored).
public struct TenantSettings: Sendable, Equatable {
    public var displayName: String?
    public var disableAuth = false
    public var allowPasswordSignup = true
    public var enableEmailLinkSignin = false
    public var enableAnonymousUser = true
    public var extra = JSONObject()
    public init() {}
}

extension Emulator {
    /// Creates a user (admin `accounts` / client `signUp`). A given `localId` must be new (`DUPLICATE_LOCAL_ID`).
    public func createUser(_ key: StoreKey, localId: String?, changes: UserChanges) throws(AuthError) -> UserRecord {
        let now = clock.nowMillis()
        return try withStore(key) { s throws(AuthError) -> UserRecord in
            try Self.checkTenantEnabled(s)
            try checkUserQuota(s)
            let id: String
            if let localId {
                guard Identifiers.isValidLocalID(localId) else { throw Identifiers.invalidLocalID }
                guard s.users[localId] == nil else { throw AuthError("DUPLICATE_LOCAL_ID") }
                id = localId
            } else {
                id = newUserID(in: s)
            }
            var user = UserRecord(localId: id, createdAt: changes.createdAt ?? now)
            user.tenantId = key.tenantId
            try Self.apply(changes, to: &user, in: s, now: now)
            s.save(user)
            try persist([.userSaved(key, user)])
            return user
        }
    }

    /// Applies `changes` to an existing user (`USER_NOT_FOUND` otherwise).
    public func updateUser(_ key: StoreKey, localId: String, changes: UserChanges, deleteProviders: [String] = []) throws(AuthError) -> UserRecord {
        let now = clock.nowMillis()
        return try withStore(key) { s throws(AuthError) -> UserRecord in
            guard var user = s.users[localId] else { throw AuthError.userNotFound }
            try Self.apply(changes, to: &user, in: s, now: now)
            for p in deleteProviders {
                switch p {
                case "phone": user.phoneNumber = nil
                case "password": user.passwordHash = nil
                case "email": user.email = nil; user.emailVerified = false
                default: break
                }
            }
            s.save(user)
            try persist([.userSaved(key, user)])
            return user
        }
    }

    static func apply(_ c: UserChanges, to user: inout UserRecord, in s: AuthStore, now: Int64) throws(AuthError) {
        try UserFieldLimits.validate(c)
        switch c.phoneNumber {
        case .unchanged: break
        case .clear: user.phoneNumber = nil
        case .set(let raw):
            let phone = try PhoneNumber(parsing: raw).e164
            if let owner = s.phoneIndex[phone], owner != user.localId { throw AuthError("PHONE_NUMBER_EXISTS") }
            user.phoneNumber = phone
        }
        switch c.email {
        case .unchanged: break
        case .clear: user.email = nil; user.emailVerified = false
        case .set(let e):
            guard Self.isPlausibleEmail(e) else { throw AuthError("INVALID_EMAIL") }
            let lower = e.lowercased()
            if s.users.values.contains(where: { $0.localId != user.localId && $0.email?.lowercased() == lower }) { throw AuthError("EMAIL_EXISTS") }
            user.email = e
        }
        switch c.displayName {
        case .unchanged: break
        case .clear: user.displayName = nil
        case .set(let v): user.displayName = v
        }
        switch c.photoUrl {
        case .unchanged: break
        case .clear: user.photoUrl = nil
        case .set(let v): user.photoUrl = v
        }
        if let v = c.emailVerified { user.emailVerified = v }
        if let v = c.disabled { user.disabled = v }
        if let v = c.customAttributes { user.customAttributes = v == "{}" ? nil : v }
        if let v = c.validSince { user.validSince = v }
        if let v = c.passwordHash {
            user.passwordHash = v
            if c.passwordRevokesTokens { user.validSince = now / 1000 }
        }
        if let v = c.createdAt { user.createdAt = v }
        if let v = c.lastLoginAt { user.lastLoginAt = v }
    }

    /// A new user must fit the store's cap (`maxUsersPerProject`: a project, or one tenant of it): `QUOTA_EXCEEDED`.
    func checkUserQuota(_ s: AuthStore) throws(AuthError) {
        if let full = userQuotaError(s) { throw full }
    }

    func userQuotaError(_ s: AuthStore) -> AuthError? {
        guard s.users.count >= maxUsersPerProject else { return nil }
        return AuthError("QUOTA_EXCEEDED", "Too many users: a project (or tenant) holds at most \(maxUsersPerProject) users (--max-users).")
    }

    static func isPlausibleEmail(_ e: String) -> Bool { Identifiers.isValidEmail(e) }

    static func checkTenantEnabled(_ s: AuthStore) throws(AuthError) {
        if s.tenant?.disableAuth == true { throw AuthError("PROJECT_DISABLED") }
    }

    /// Deletes a user; `USER_NOT_FOUND` if absent. Their refresh tokens stop working.
    public func deleteUser(_ key: StoreKey, localId: String) throws(AuthError) {
        try withStore(key) { s throws(AuthError) in
            guard s.users[localId] != nil else { throw AuthError.userNotFound }
            s.deleteUser(localId)
            try persist([.userDeleted(key, localId)])  // deletes the user's refresh tokens on disk too
        }
        forgetRefreshTokens(key, localId: localId, persisting: false)
    }

    /// Users sorted by localId after `pageToken`, at most `limit`.
    public func listUsers(_ key: StoreKey, after pageToken: String?, limit: Int) -> [UserRecord] {
        guard let box = existingStore(key) else { return [] }
        return box.read { s in
            var ids = s.users.keys.sorted()
            if let t = pageToken, !t.isEmpty { ids = ids.filter { $0 > t } }
            return ids.prefix(limit).compactMap { s.users[$0] }
        }
    }

    // MARK: tenants

    /// A tenant's settings; nil for a project or a tenant that does not exist (nothing is created).
    public func tenantSettings(_ key: StoreKey) -> TenantSettings? {
        guard key.tenantId != nil else { return nil }
        return existingStore(key)?.read { $0.tenant }
    }

    public func setTenantSettings(_ key: StoreKey, _ settings: TenantSettings) throws(AuthError) {
        try withStore(key) { s throws(AuthError) in
            s.tenant = settings
            s.implicitTenant = false
            try persist([.configSaved(key, s.config, settings)])
        }
    }

    /// Tenants of a project (every tenant store created so far), sorted by id.
    public func tenants(of projectId: String) -> [String] { tenantIDs(of: projectId) }

    /// Removes a tenant with all its users, codes and tokens.
    public func deleteTenant(_ key: StoreKey) {
        forgetRefreshTokens(key, localId: nil)
        removeStore(key)
    }
}
