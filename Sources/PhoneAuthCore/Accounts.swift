import Dispatch
import EmulatorSupport

/// A field an update sets, clears, or leaves alone.
public enum FieldChange<T: Sendable & Equatable>: Sendable, Equatable {
    case unchanged
    case set(T)
    case clear
}

/// What a create, an update, an import or a blocking function changes on a user: a change per field of the table
/// (`UserFields.swift`: by name, the value in the field's canonical form, checked when it was read), and the password.
/// The typed properties below are views of `fields` for code that sets one field by hand.
public struct UserChanges: Sendable {
    /// Each changed field's name and its change (`.unchanged` is never stored), in the order they were set. A list,
    /// not a dictionary: a change holds a handful of fields, found by comparing names faster than by hashing them
    /// (and a dictionary's growth cost an import a dozen allocations per user).
    public private(set) var fields: [(name: String, change: FieldChange<JSON>)] = []
    /// A new password (already hashed), or its removal; nil leaves it alone.
    public var password: PasswordChange?

    public init() {}

    public subscript(field name: String) -> FieldChange<JSON> {
        get {
            for f in fields where f.name == name { return f.change }
            return .unchanged
        }
        set {
            if let i = fields.firstIndex(where: { $0.name == name }) {
                if newValue == .unchanged { fields.remove(at: i) } else { fields[i].change = newValue }
            } else if newValue != .unchanged {
                fields.append((name, newValue))
            }
        }
    }

    public var isEmpty: Bool { fields.isEmpty && password == nil }

    /// Room for `n` changed fields (an import knows how many its record holds).
    mutating func reserve(_ n: Int) { fields.reserveCapacity(n) }

    /// Adds a change of a field not changed yet (`UserFieldTable.importChanges`, which reads each field once).
    mutating func appendNew(field name: String, _ change: FieldChange<JSON>) {
        if change != .unchanged { fields.append((name, change)) }
    }

    public var displayName: FieldChange<String> {
        get { self[field: "displayName"].map(\.stringValue) }
        set { self[field: "displayName"] = newValue.map { JSON.string($0) } }
    }
    public var photoUrl: FieldChange<String> {
        get { self[field: "photoUrl"].map(\.stringValue) }
        set { self[field: "photoUrl"] = newValue.map { JSON.string($0) } }
    }
    public var email: FieldChange<String> {
        get { self[field: "email"].map(\.stringValue) }
        set { self[field: "email"] = newValue.map { JSON.string($0) } }
    }
    public var phoneNumber: FieldChange<String> {
        get { self[field: "phoneNumber"].map(\.stringValue) }
        set { self[field: "phoneNumber"] = newValue.map { JSON.string($0) } }
    }
    public var emailVerified: Bool? {
        get { self[field: "emailVerified"].value?.boolValue }
        set { self[field: "emailVerified"] = newValue.map { .set(.bool($0)) } ?? .unchanged }
    }
    public var disabled: Bool? {
        get { self[field: "disabled"].value?.boolValue }
        set { self[field: "disabled"] = newValue.map { .set(.bool($0)) } ?? .unchanged }
    }
    /// Validated JSON text of custom claims (`{}` clears).
    public var customAttributes: String? {
        get { self[field: "customAttributes"].value?.stringValue }
        set { self[field: "customAttributes"] = newValue.map { .set(.string($0)) } ?? .unchanged }
    }
    public var validSince: Int64? {
        get { self[field: "validSince"].value?.exactInt64 }
        set { self[field: "validSince"] = newValue.map { .set(.exactInt($0)) } ?? .unchanged }
    }
    public var createdAt: Int64? {
        get { self[field: "createdAt"].value?.exactInt64 }
        set { self[field: "createdAt"] = newValue.map { .set(.exactInt($0)) } ?? .unchanged }
    }
    public var lastLoginAt: Int64? {
        get { self[field: "lastLoginAt"].value?.exactInt64 }
        set { self[field: "lastLoginAt"] = newValue.map { .set(.exactInt($0)) } ?? .unchanged }
    }
    /// Replaces the second factors (`[]` clears); nil leaves them alone. Checked by `MultiFactor.enrollments`.
    public var mfaInfo: [MFAEnrollment]? {
        get {
            switch self[field: "mfaInfo"] {
            case .unchanged: nil
            case .clear: []
            case .set(let v): (v.arrayValue ?? []).compactMap(MFAEnrollment.init(journal:))
            }
        }
        set { self[field: "mfaInfo"] = newValue.map { $0.isEmpty ? .clear : .set(.array($0.map(\.journalJSON))) } ?? .unchanged }
    }

    /// The password hash a change sets (nil: none set), and its salt: views of `password`.
    public var passwordHash: String? {
        get { password?.hash }
        set {
            if password == nil { password = PasswordChange(hash: nil, salt: nil) }
            password?.hash = newValue
        }
    }
    public var salt: String? {
        get { password?.salt }
        set {
            if password == nil { password = PasswordChange(hash: nil, salt: nil) }
            password?.salt = newValue
        }
    }
}

/// A password change: a new hash (and its salt; when it was set, if an import says), or the removal of the password.
public struct PasswordChange: Sendable, Equatable {
    public var hash: String?
    public var salt: String?
    /// Milliseconds: when the password was set (an import may give it; else now).
    public var updatedAt: Int64?
    /// `deleteAttribute: ["PASSWORD"]`: no password afterwards (a `hash` set with it wins).
    public var clear = false
    /// A new password revokes older tokens (production); imports keep their `validSince`.
    public var revokesTokens = true
    /// An imported foreign hash's algorithm (`UserRecord.passwordHashAlgorithm`); nil: `hash` is ours.
    public var algorithm: JSON?

    public init(hash: String?, salt: String?, updatedAt: Int64? = nil, revokesTokens: Bool = true, algorithm: JSON? = nil) {
        self.hash = hash
        self.salt = salt
        self.updatedAt = updatedAt
        self.revokesTokens = revokesTokens
        self.algorithm = algorithm
    }

    public static let remove: PasswordChange = { var p = PasswordChange(hash: nil, salt: nil); p.clear = true; return p }()
}

extension FieldChange {
    /// The value a `.set` carries.
    public var value: T? { if case .set(let v) = self { v } else { nil } }
}

/// Custom claims rules shared by every path that sets them.
public enum CustomClaims {
    /// Claim names custom claims may not use (firebase-admin's RESERVED_CLAIMS and the emulator's list).
    public static let reserved: Set<String> = [
        "acr", "amr", "at_hash", "aud", "auth_time", "azp", "cnf", "c_hash", "exp", "firebase", "iat", "iss", "jti", "nbf", "nonce", "sub",
    ]

    /// The claims size limit, counted as JavaScript and firebase-tools count it (UTF-16 code units; never grapheme
    /// clusters, which would let one "character" of combining marks carry megabytes).
    public static let maxLength = 1000

    /// Validates `customAttributes` text: ≤ 1000 characters (`CLAIMS_TOO_LARGE`), a JSON object (`INVALID_CLAIMS`),
    /// no reserved names (`FORBIDDEN_CLAIM : <name>`). Returns the canonical text.
    public static func validate(_ text: String) throws(AuthError) -> String {
        guard text.utf16.count <= maxLength else { throw AuthError(.claimsTooLarge) }
        guard case .object(let o)? = try? JSONParser.parse(text, maxDepth: 32) else { throw AuthError(.invalidClaims) }
        for (k, _) in o where mayBeReserved(k) && reserved.contains(k) { throw AuthError(.forbiddenClaim, k) }  // no array of the keys
        return text
    }

    /// The reserved names' first bytes, a bit each (by the byte's low six bits): a name whose first byte has no bit
    /// here is none of them, without hashing it (an import checks every user's claims).
    static let reservedInitials: UInt64 = reserved.reduce(0) { $0 | 1 << UInt64($1.utf8.first! & 63) }

    @inline(__always) static func mayBeReserved(_ name: String) -> Bool {
        guard let f = name.utf8.first else { return false }
        return reservedInitials & (1 << UInt64(f & 63)) != 0
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

    /// A tenant that came into being by being used (not through the tenants API): every sign-in method on, email
    /// link included, as the official emulator's tenants made on the fly. The tenants API's default leaves email
    /// link off, as production's.
    public static let createdOnFirstUse: TenantSettings = {
        var t = TenantSettings()
        t.enableEmailLinkSignin = true
        return t
    }()
}

extension Emulator {
    /// Creates a user (admin `accounts` / client `signUp`). A given `localId` must be new (`DUPLICATE_LOCAL_ID`).
    public func createUser(_ key: StoreKey, localId: String?, changes: UserChanges) throws(AuthError) -> UserRecord {
        let now = clock.nowMillis()
        return try transaction(key) { tx throws(AuthError) -> UserRecord in
            try tx.checkTenantEnabled()
            try checkUserQuota(userCount: tx.store.users.count)
            let user = try newUser(tx, key, localId: localId, changes: changes, now: now)
            tx.save(user)
            tx.emit(.userCreated(uid: user.localId, phoneNumber: user.phoneNumber, email: user.email, provider: "admin"))
            return user
        }
    }

    /// A new user record with `changes` applied (not saved).
    func newUser(_ tx: borrowing StoreTransaction, _ key: StoreKey, localId: String?, changes: UserChanges, now: Int64) throws(AuthError) -> UserRecord {
        let id: String
        if let localId {
            guard Identifiers.isValidLocalID(localId) else { throw Identifiers.invalidLocalID }
            guard tx.store.users[localId] == nil else { throw AuthError(.duplicateLocalId) }
            id = localId
        } else {
            id = newUserID(in: tx.store.users)
        }
        var user = UserRecord(localId: id, createdAt: changes.createdAt ?? now)
        user.tenantId = key.tenantId
        try tx.apply(changes, to: &user, table: userFields, now: now)
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
    /// `deleteProviders`: `phone`, `password` (the hash, and email-link sign-in), `email`, or a federated provider id
    /// (its identity is unlinked). `linkProvider`: an admin's `linkProviderUserInfo`, upserted by provider id; an identity
    /// linked to another user is `FEDERATED_USER_ID_ALREADY_LINKED`.
    ///
    /// An email changed from another one sets `initialEmail` (unless `anonymousSession`: a change made by an anonymous
    /// session, as the official emulator) and, with `recoveryLink`, sends the old address a RECOVER_EMAIL code
    /// (`noteEmailChange`), in the same transaction.
    public func updateUser(_ key: StoreKey, localId: String, changes: UserChanges, deleteProviders: [String] = [],
                           linkProvider: ProviderUserInfo? = nil, anonymousSession: Bool = false,
                           recoveryLink: (@Sendable (String) -> String)? = nil,
                           refresh: RefreshGrant?) throws(AuthError) -> (user: UserRecord, refreshToken: String?) {
        let now = clock.nowMillis()
        return try transaction(key) { tx throws(AuthError) -> (UserRecord, String?) in
            guard var user = tx.store.users[localId] else { throw AuthError(.userNotFound) }
            let old = user
            try tx.apply(changes, to: &user, table: userFields, now: now)
            for p in deleteProviders {
                switch p {
                case "phone": user.phoneNumber = nil
                case "password":
                    user.setPassword(hash: nil, salt: nil, algorithm: nil)
                    user.emailLinkSignin = false
                case "email": user.email = nil; user.emailVerified = false
                default: user.providerUserInfo.removeAll { $0.providerId == p }
                }
            }
            if let link = linkProvider {
                if let owner = tx.store.federatedIndex[link.indexKey], owner != user.localId { throw AuthError(.federatedUserIdAlreadyLinked) }
                user.link(link)
            }
            if !anonymousSession { noteEmailChange(&tx, from: old, to: &user, now: now, recoveryLink: recoveryLink) }
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
                    // Found once (apply reads the store, it does not change it).
                    let old = tx.store.users[item.localId]
                    let exists = old != nil
                    if exists && !allowOverwrite { throw AuthError(.duplicateLocalId) }
                    if !exists { try checkUserQuota(userCount: tx.store.users.count) }
                    var user = UserRecord(localId: item.localId, createdAt: item.changes.createdAt ?? now)
                    user.tenantId = key.tenantId
                    try tx.apply(item.changes, to: &user, table: userFields, now: now)
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

    /// Writes the users of `other` — an emulator without a journal that a whole import was read and checked in — into
    /// this one's stores (`--import` with `--data-dir`, over the state of earlier runs). All or nothing: every store is
    /// checked first (a phone number, email or federated identity held here by a user the import does not replace
    /// refuses the whole import, naming both uids), then each store's users are written in one transaction (a user
    /// with the same uid is replaced, its refresh tokens revoked), and all of those — every tenant's, the tenants
    /// themselves — reach the journal in one commit: a process killed while it is written leaves none of it. Tenants
    /// are created as the import's. Returns how many users were written.
    public func absorbUsers(from other: Emulator) throws(AuthError) -> Int {
        guard let committer else { return try absorbStores(from: other) }
        let scope = DurabilityScope()
        let written = try committer.holding { () throws(AuthError) -> Int in
            let r = DurabilityScope.$current.withValue(scope) { () -> Result<Int, AuthError> in
                do throws(AuthError) { return .success(try absorbStores(from: other)) } catch { return .failure(error) }
            }
            return try r.get()
        }
        let done = DispatchSemaphore(value: 0)
        let ok = Locked(false)
        whenDurable(scope) { committed in
            ok.withLock { $0 = committed }
            done.signal()
        }
        done.wait()
        guard ok.withLock({ $0 }) else { throw Emulator.notDurable }
        return written
    }

    private func absorbStores(from other: Emulator) throws(AuthError) -> Int {
        let states = try other.storeStates()
        // The project before its tenants.
        let keys = states.keys.sorted { ($0.tenantId ?? "", $0.projectId) < ($1.tenantId ?? "", $1.projectId) }
        var added = 0
        for key in keys {
            guard let incoming = states[key], !incoming.users.isEmpty else { continue }
            let (problem, have, new) = existingStore(key)?.read { live in
                (Self.importConflict(live, incoming.users), live.users.count, incoming.users.keys.reduce(0) { $0 + (live.users[$1] == nil ? 1 : 0) })
            } ?? (nil, 0, incoming.users.count)
            if let problem { throw AuthError(.invalidArgument, key.tenantId.map { "tenant \($0): " + problem } ?? problem) }
            if have + new > maxUsersPerProject {
                throw AuthError(.quotaExceeded, "Too many users: the import and the data directory hold \(have + new) users in one project or tenant, more than \(maxUsersPerProject) (--max-users).")
            }
            added += new
        }
        if budgets.users.count + added > budgets.users.limit {
            throw AuthError(.quotaExceeded, "Too many users: the import and the data directory hold \(budgets.users.count + added) users, more than \(budgets.users.limit) (--max-users-total).")
        }
        var written = 0
        for key in keys {
            guard let incoming = states[key] else { continue }
            if key.tenantId != nil { try admit(key, create: true, explicit: true) }
            guard !incoming.users.isEmpty else { continue }
            try transaction(key) { tx throws(AuthError) in
                for (id, user) in incoming.users {
                    if tx.store.users[id] != nil { _ = tx.deleteUser(id) }
                    _ = tx.save(user)
                }
            }
            written += incoming.users.count
        }
        return written
    }

    /// The first identity of `incoming` (a whole import's users of one store) that `live` gives a user the import
    /// does not replace: phone number, email (one account per email) or federated identity.
    static func importConflict(_ live: AuthStore, _ incoming: UserTable) -> String? {
        func taken(_ owner: String?, _ id: String) -> Bool {
            guard let owner, owner != id else { return false }
            return incoming[owner] == nil
        }
        let oneAccountPerEmail = !live.config.allowDuplicateEmails
        for (id, u) in incoming {
            if let p = u.phoneNumber, taken(live.phoneIndex[p], id) {
                return "user \(id)'s phone number belongs to user \(live.phoneIndex[p] ?? "") of the data directory"
            }
            if oneAccountPerEmail, let e = u.email?.lowercased(), taken(live.emailIndex[e], id) {
                return "user \(id)'s email belongs to user \(live.emailIndex[e] ?? "") of the data directory"
            }
            for p in u.providerUserInfo where taken(live.federatedIndex[p.indexKey], id) {
                return "user \(id)'s \(p.providerId) identity belongs to user \(live.federatedIndex[p.indexKey] ?? "") of the data directory"
            }
        }
        return nil
    }

    /// A new user must fit the store's cap (`maxUsersPerProject`: a project, or one tenant of it): `QUOTA_EXCEEDED`.
    /// Given the store's user count, not the store: passing a store borrowed in place by value copied it.
    func checkUserQuota(userCount: Int) throws(AuthError) {
        if let full = userQuotaError(userCount: userCount) { throw full }
    }

    func userQuotaError(userCount: Int) -> AuthError? {
        if budgets.users.isFull {
            return AuthError(.quotaExceeded, "Too many users: this emulator holds at most \(budgets.users.limit) users in all projects and tenants (--max-users-total).")
        }
        guard userCount >= maxUsersPerProject else { return nil }
        return AuthError(.quotaExceeded, "Too many users: a project (or tenant) holds at most \(maxUsersPerProject) users (--max-users).")
    }


    /// Deletes a user; `USER_NOT_FOUND` if absent. Their refresh tokens stop working (same transaction).
    public func deleteUser(_ key: StoreKey, localId: String) throws(AuthError) {
        try transaction(key) { tx throws(AuthError) in
            guard let old = tx.store.users[localId], tx.deleteUser(localId) else { throw AuthError(.userNotFound) }
            tx.emit(.userDeleted(uid: localId))
            tx.noteDeletedUser(old)
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
                tx.noteDeletedUser(user)
            }
            return notDisabled
        }
    }

    /// Users sorted by localId after `pageToken`, at most `limit`: O(limit) (`UserTable.ids(after:limit:)`).
    public func listUsers(_ key: StoreKey, after pageToken: String?, limit: Int) -> [UserRecord] {
        guard let box = existingStore(key) else { return [] }
        return box.read { s in
            s.users.ids(after: pageToken, limit: limit).compactMap { s.users[$0] }
        }
    }

    // MARK: tenants

    /// A tenant's settings; nil for a project or a tenant that does not exist (nothing is created).
    public func tenantSettings(_ key: StoreKey) -> TenantSettings? {
        guard key.tenantId != nil else { return nil }
        return existingStore(key)?.read { $0.tenant }
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
