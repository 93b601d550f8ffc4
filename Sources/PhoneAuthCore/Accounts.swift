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
    /// The salt `passwordHash` was made with (set together with it).
    public var salt: String?
    /// Milliseconds: when the password was set (an import may give it; else now).
    public var passwordUpdatedAt: Int64?
    /// `deleteAttribute: ["PASSWORD"]`: the user has no password afterwards.
    public var clearPassword = false
    /// A new password revokes older tokens (production); imports keep their `validSince`.
    public var passwordRevokesTokens = true
    public var createdAt: Int64?
    public var lastLoginAt: Int64?
    /// Replaces the second factors (`[]` clears); nil leaves them alone. Checked by `MultiFactor.enrollments`.
    public var mfaInfo: [MFAEnrollment]?
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
        guard text.utf16.count <= maxLength else { throw AuthError(.claimsTooLarge) }
        guard case .object(let o)? = try? JSONParser.parse(text, maxDepth: 32) else { throw AuthError(.invalidClaims) }
        for k in o.keys where reserved.contains(k) { throw AuthError(.forbiddenClaim, k) }
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

    static func check(_ value: String, _ limit: Int, code: AuthError.Code, field: String) throws(AuthError) {
        let n = value.utf16.count
        guard n <= limit else { throw AuthError(code, "\(field) must be at most \(limit) characters (got \(n)).") }
    }

    /// Throws the field's error if `c` would store an over-long value.
    public static func validate(_ c: UserChanges) throws(AuthError) {
        if case .set(let v) = c.displayName { try check(v, displayName, code: .invalidDisplayName, field: "displayName") }
        if case .set(let v) = c.photoUrl { try check(v, photoUrl, code: .invalidPhotoUrl, field: "photoUrl") }
        if let v = c.passwordHash { try check(v, passwordHash, code: .invalidPasswordHash, field: "passwordHash") }
        if let v = c.customAttributes, v.utf16.count > CustomClaims.maxLength { throw AuthError(.claimsTooLarge) }
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
        return try transaction(key) { tx throws(AuthError) -> UserRecord in
            try tx.checkTenantEnabled()
            try checkUserQuota(tx.store)
            let user = try newUser(tx.store, key, localId: localId, changes: changes, now: now)
            tx.save(user)
            tx.emit(.userCreated(uid: user.localId, phoneNumber: user.phoneNumber, email: user.email, provider: "admin"))
            return user
        }
    }

    /// A new user record with `changes` applied (not saved).
    func newUser(_ s: AuthStore, _ key: StoreKey, localId: String?, changes: UserChanges, now: Int64) throws(AuthError) -> UserRecord {
        let id: String
        if let localId {
            guard Identifiers.isValidLocalID(localId) else { throw Identifiers.invalidLocalID }
            guard s.users[localId] == nil else { throw AuthError(.duplicateLocalId) }
            id = localId
        } else {
            id = newUserID(in: s)
        }
        var user = UserRecord(localId: id, createdAt: changes.createdAt ?? now)
        user.tenantId = key.tenantId
        try Self.apply(changes, to: &user, in: s, now: now)
        return user
    }

    /// What a new refresh token issued with an update says.
    public struct RefreshGrant: Sendable {
        public var signInProvider: String
        public var authTime: Int64
        public init(signInProvider: String, authTime: Int64) {
            self.signInProvider = signInProvider
            self.authTime = authTime
        }
    }

    /// Applies `changes` to an existing user (`USER_NOT_FOUND` otherwise).
    public func updateUser(_ key: StoreKey, localId: String, changes: UserChanges, deleteProviders: [String] = []) throws(AuthError) -> UserRecord {
        try updateUser(key, localId: localId, changes: changes, deleteProviders: deleteProviders, refresh: nil).user
    }

    /// Applies `changes` and, with `refresh`, issues a refresh token for the result, in one transaction.
    public func updateUser(_ key: StoreKey, localId: String, changes: UserChanges, deleteProviders: [String] = [],
                           refresh: RefreshGrant?) throws(AuthError) -> (user: UserRecord, refreshToken: String?) {
        let now = clock.nowMillis()
        return try transaction(key) { tx throws(AuthError) -> (UserRecord, String?) in
            guard var user = tx.store.users[localId] else { throw AuthError(.userNotFound) }
            let old = user
            try Self.apply(changes, to: &user, in: tx.store, now: now)
            for p in deleteProviders {
                switch p {
                case "phone": user.phoneNumber = nil
                case "password": user.passwordHash = nil; user.salt = nil
                case "email": user.email = nil; user.emailVerified = false
                default: break
                }
            }
            tx.save(user)
            tx.emitUserChanges(from: old, to: user)
            guard let refresh else { return (user, nil) }
            let (token, record) = newRefreshToken(key, localId: user.localId, authTime: refresh.authTime, signInProvider: refresh.signInProvider)
            tx.insertRefreshToken(token, record)
            tx.emit(.tokensIssued(uid: user.localId, provider: refresh.signInProvider, secondFactor: nil))
            return (user, token)
        }
    }

    /// Imports users in one transaction: each item replaces (with `allowOverwrite`) or creates its user. A problem
    /// with one user leaves that user as it was and is returned with its index; the others are imported.
    /// An existing user without `allowOverwrite` is `DUPLICATE_LOCAL_ID`.
    public func importUsers(_ key: StoreKey, _ items: [(index: Int, localId: String, changes: UserChanges)],
                            allowOverwrite: Bool) throws(AuthError) -> [(index: Int, error: AuthError)] {
        let now = clock.nowMillis()
        return try transaction(key) { tx throws(AuthError) -> [(index: Int, error: AuthError)] in
            var problems: [(index: Int, error: AuthError)] = []
            for item in items {
                do throws(AuthError) {
                    try tx.checkTenantEnabled()
                    guard Identifiers.isValidLocalID(item.localId) else { throw Identifiers.invalidLocalID }
                    let exists = tx.store.users[item.localId] != nil
                    if exists && !allowOverwrite { throw AuthError(.duplicateLocalId) }
                    if !exists { try checkUserQuota(tx.store) }
                    var user = UserRecord(localId: item.localId, createdAt: item.changes.createdAt ?? now)
                    user.tenantId = key.tenantId
                    try Self.apply(item.changes, to: &user, in: tx.store, now: now)
                    let old = tx.store.users[item.localId]
                    if exists { tx.deleteUser(item.localId) }  // a replaced user's refresh tokens stop working
                    tx.save(user)
                    // One event per imported user (a batch is at most 1000): created, or what the replacement changed.
                    if let old {
                        tx.emitUserChanges(from: old, to: user)
                    } else {
                        tx.emit(.userCreated(uid: user.localId, phoneNumber: user.phoneNumber, email: user.email, provider: "admin"))
                    }
                } catch {
                    problems.append((item.index, error))
                }
            }
            return problems
        }
    }

    static func apply(_ c: UserChanges, to user: inout UserRecord, in s: AuthStore, now: Int64) throws(AuthError) {
        try UserFieldLimits.validate(c)
        switch c.phoneNumber {
        case .unchanged: break
        case .clear: user.phoneNumber = nil
        case .set(let raw):
            let phone = try PhoneNumber(parsing: raw).e164
            if let owner = s.phoneIndex[phone], owner != user.localId { throw AuthError(.phoneNumberExists) }
            user.phoneNumber = phone
        }
        switch c.email {
        case .unchanged: break
        case .clear: user.email = nil; user.emailVerified = false
        case .set(let e):
            guard Self.isPlausibleEmail(e) else { throw AuthError(.invalidEmail) }
            let lower = e.lowercased()
            if let owner = s.emailIndex[lower], owner != user.localId { throw AuthError(.emailExists) }
            user.email = lower  // stored canonical (lower case), as production and the official emulator
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
        if c.clearPassword {
            user.passwordHash = nil
            user.salt = nil
        }
        if let v = c.passwordHash {
            user.passwordHash = v
            user.salt = c.salt
            user.passwordUpdatedAt = c.passwordUpdatedAt ?? now
            if c.passwordRevokesTokens { user.validSince = now / 1000 }
        }
        if let v = c.createdAt { user.createdAt = v }
        if let v = c.lastLoginAt { user.lastLoginAt = v }
        if let v = c.mfaInfo { user.mfaInfo = v }
    }

    /// A new user must fit the store's cap (`maxUsersPerProject`: a project, or one tenant of it): `QUOTA_EXCEEDED`.
    func checkUserQuota(_ s: AuthStore) throws(AuthError) {
        if let full = userQuotaError(s) { throw full }
    }

    func userQuotaError(_ s: AuthStore) -> AuthError? {
        guard s.users.count >= maxUsersPerProject else { return nil }
        return AuthError(.quotaExceeded, "Too many users: a project (or tenant) holds at most \(maxUsersPerProject) users (--max-users).")
    }

    static func isPlausibleEmail(_ e: String) -> Bool { Identifiers.isValidEmail(e) }


    /// Deletes a user; `USER_NOT_FOUND` if absent. Their refresh tokens stop working (same transaction).
    public func deleteUser(_ key: StoreKey, localId: String) throws(AuthError) {
        try transaction(key) { tx throws(AuthError) in
            guard tx.deleteUser(localId) else { throw AuthError(.userNotFound) }
            tx.emit(.userDeleted(uid: localId))
        }
    }

    /// Deletes users in one transaction; absent ones are skipped. Without `force`, enabled users are kept and
    /// returned with their index (`accounts:batchDelete`'s `NOT_DISABLED`).
    public func deleteUsers(_ key: StoreKey, localIds: [String], force: Bool) throws(AuthError) -> [(index: Int, localId: String)] {
        try transaction(key) { tx throws(AuthError) -> [(index: Int, localId: String)] in
            var notDisabled: [(index: Int, localId: String)] = []
            for (i, id) in localIds.enumerated() {
                guard let user = tx.store.users[id] else { continue }
                if !force && !user.disabled {
                    notDisabled.append((i, id))
                    continue
                }
                tx.deleteUser(id)
                tx.emit(.userDeleted(uid: id))
            }
            return notDisabled
        }
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
        try transaction(key) { tx throws(AuthError) in tx.setConfig(tx.store.config, tenant: settings) }
    }

    /// Read-modify-write of a tenant's config and settings in one transaction. `creating`: the tenant was just
    /// admitted for this call (`POST …/tenants`): a failed commit unregisters it, and so does an error from `body`.
    public func updateTenant<T>(_ key: StoreKey, creating: Bool,
                                _ body: (inout ProjectConfig, inout TenantSettings) throws(AuthError) -> T) throws(AuthError) -> T {
        try transaction(key) { tx throws(AuthError) -> T in
            if creating { tx.markCreated() }
            var config = tx.store.config, tenant = tx.store.tenant ?? TenantSettings()
            let result: T
            do throws(AuthError) {
                result = try body(&config, &tenant)
            } catch {
                if creating { tx.deleteStore() }
                throw error
            }
            tx.setConfig(config, tenant: tenant)
            return result
        }
    }

    /// Tenants of a project (every tenant store created so far), sorted by id.
    public func tenants(of projectId: String) -> [String] { tenantIDs(of: projectId) }

    /// Removes a tenant with all its users, codes and tokens, in one transaction; the next use starts afresh.
    public func deleteTenant(_ key: StoreKey) throws(AuthError) {
        guard let box = existingStore(key) else { return }
        try transaction(box) { tx throws(AuthError) in tx.deleteStore() }
    }
}
