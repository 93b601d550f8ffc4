import EmulatorSupport
import PhoneAuthCore

/// Admin bulk operations: `accounts:batchGet` (GET, paged), `accounts:batchDelete`, `accounts:query`,
/// `accounts:batchCreate` (what `import_users` and firebase-tools import send).
enum BatchAccounts {
    static func batchGet(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        let tenant = try call.queryTenant()
        let key = try call.enabled(StoreKey(projectId: call.projectId, tenantId: tenant))
        return try download(app, key, maxResults: call.queryValue("maxResults"), after: call.queryValue("nextPageToken"))
    }

    /// v3 `downloadAccount` (the iOS SDK's and old admin tools' path): `accounts:batchGet` with its parameters in the
    /// body (`targetProjectId` picks the project, as for every admin call; `tenantId` a tenant).
    static func downloadAccount(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        let key = try call.readStoreKey()
        return try download(app, key, maxResults: try call.string("maxResults"), after: try call.string("nextPageToken"))
    }

    /// One page of users by uid: at most `maxResults` (1 to 1000, -1 for all; 20 when not given) after the page token.
    static func download(_ app: PhoneAuthApp, _ key: StoreKey, maxResults: String?, after token: String?) throws -> Reply {
        var limit = 20
        if let m = maxResults, !m.isEmpty {
            guard let n = Int(m), n == -1 || (1...1000).contains(n) else {
                throw AuthError.invalidArgument("maxResults must be between 1 and 1000 (or -1 for all).")
            }
            limit = n == -1 ? Int.max : n
        }
        let users = app.emulator.listUsers(key, after: token.flatMap { $0.isEmpty ? nil : $0 }, limit: limit)
        var o: JSONObject = ["kind": "identitytoolkit#DownloadAccountResponse", "users": .array(users.map { app.emulator.userFields.render($0) })]
        // A full page always carries a token, even the last (production, firebase-tools#3231): its page is empty.
        if limit != Int.max, users.count == limit, let last = users.last { o["nextPageToken"] = .string(last.localId) }
        return Reply(.object(o))
    }

    static func batchDelete(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        let key = try call.storeKey()
        let ids = try call.strings("localIds")
        // Production's one code for both: an empty list and more than 1000 ids.
        guard (1...1000).contains(ids.count) else { throw AuthError(.localIdListExceedsLimit) }
        let force = try call.bool("force") ?? false
        // One transaction: the disabled check and the deletes see the same users, and all of them commit or none.
        let errors: [JSON] = try app.emulator.deleteUsers(key, localIds: ids, force: force).map { e in
            ["index": .int(e.index), "localId": .string(e.localId), "message": "NOT_DISABLED : Disable the account before batch deletion."]
        }
        var o = JSONObject()
        if !errors.isEmpty { o["errors"] = .array(errors) }
        return Reply(.object(o))
    }

    /// `accounts:query`'s `sortBy` (Identity Toolkit's `SortByField`).
    enum QuerySort: String {
        case unspecified = "SORT_BY_FIELD_UNSPECIFIED", userId = "USER_ID", name = "NAME", createdAt = "CREATED_AT"
        case lastLoginAt = "LAST_LOGIN_AT", userEmail = "USER_EMAIL"
    }

    /// `accounts:query` and `projects.queryAccounts`, as production: only the first `expression` is evaluated (its
    /// `userId`, `email` (any case) and `phoneNumber`, all that are given); `sortBy` (default `USER_ID`) and `order`
    /// (`ASC`, `DESC`); `offset`; `limit` at most 500 (the default, also for 0, proto3's unset). `recordsCount` is the number of accounts returned,
    /// or with `returnUserInfo: false` the number matching.
    static func query(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        let key = try call.readStoreKey()
        guard let sort = QuerySort(rawValue: try call.string("sortBy") ?? "SORT_BY_FIELD_UNSPECIFIED") else {
            throw AuthError.invalidJSON("Invalid value at 'sort_by' (type.googleapis.com/google.cloud.identitytoolkit.v1.QueryUserInfoRequest.SortByField), \(call.body["sortBy"]?.serializedString.prefix(100) ?? "")")
        }
        let order = try call.string("order") ?? "ORDER_UNSPECIFIED"
        guard ["ORDER_UNSPECIFIED", "ASC", "DESC"].contains(order) else {
            throw AuthError.invalidJSON("Invalid value at 'order' (type.googleapis.com/google.cloud.identitytoolkit.v1.QueryUserInfoRequest.Order), \(call.body["order"]?.serializedString.prefix(100) ?? "")")
        }
        let offset = try call.int("offset") ?? 0
        let limit = try call.int("limit") ?? 500
        guard offset >= 0, limit >= 0 else { throw AuthError.invalidArgument("offset and limit must not be negative.") }
        let returnUserInfo = try call.bool("returnUserInfo") ?? true
        var match: (id: String?, email: String?, phone: String?)?
        if case .array(let expressions)? = call.body["expression"], let first = expressions.first {
            guard case .object(let e) = first else { throw AuthError.invalidJSON("Invalid value at 'expression[0]' (type.googleapis.com/google.cloud.identitytoolkit.v1.SqlExpression), \(first.serializedString.prefix(100))") }
            func field(_ name: String) throws(AuthError) -> String? {
                guard let v = e[name], v != .null else { return nil }
                guard let s = v.stringValue else { throw AuthError.invalidJSON("Invalid value at 'expression[0].\(name)' (TYPE_STRING), \(v.serializedString.prefix(100))") }
                return s
            }
            let phone = try field("phoneNumber")
            match = (try field("userId"), try field("email")?.lowercased(), phone.map { (try? PhoneNumber(parsing: $0).e164) ?? $0 })
        } else if let v = call.body["expression"], v != .null, v.arrayValue == nil {
            throw AuthError.invalidJSON("Invalid value at 'expression' (type.googleapis.com/google.cloud.identitytoolkit.v1.SqlExpression), \(v.serializedString.prefix(100))")
        }
        let skip = Int(min(offset, Int64(Int32.max))), take = limit == 0 ? 500 : Int(min(limit, 500))
        // O(result) where an index answers: a uid, a phone number or (one account per email) an email names at most
        // one user; no expression, by uid ascending, is a page of the ordered uids; a count is the table's. Other
        // sorts and orders read every user (they have no index).
        let byUID = sort == .userId || sort == .unspecified, ascending = order != "DESC"
        var users: [UserRecord] = app.emulator.existingStore(key)?.read { store -> [UserRecord] in
            func matches(_ u: UserRecord, _ m: (id: String?, email: String?, phone: String?)) -> Bool {
                (m.id.map { $0 == u.localId } ?? true) && (m.email.map { $0 == u.email?.lowercased() } ?? true)
                    && (m.phone.map { $0 == u.phoneNumber } ?? true)
            }
            guard let m = match else {
                if !returnUserInfo { return [] }
                if byUID && ascending {
                    return store.users.ids(after: nil, limit: skip + take).dropFirst(skip).compactMap { store.users[$0] }
                }
                return Array(store.users.values)
            }
            let candidate: String?? = m.id.map { .some($0) } ?? m.phone.map { store.phoneIndex[$0] }
                ?? (store.config.allowDuplicateEmails ? nil : m.email.map { store.emailIndex[$0] })
            if let candidate {
                return candidate.flatMap { store.users[$0] }.map { matches($0, m) ? [$0] : [] } ?? []
            }
            return store.users.values.filter { matches($0, m) }
        } ?? []
        guard returnUserInfo else {
            let count = match == nil ? (app.emulator.existingStore(key)?.read { $0.users.count } ?? 0) : users.count
            return Reply(["recordsCount": .string(String(count))])
        }
        if match == nil && byUID && ascending {
            return Reply(["recordsCount": .string(String(users.count)), "userInfo": .array(users.map { app.emulator.userFields.render($0) })])
        }
        switch sort {
        case .name: users.sort { ($0.displayName ?? "", $0.localId) < ($1.displayName ?? "", $1.localId) }
        case .createdAt: users.sort { ($0.createdAt, $0.localId) < ($1.createdAt, $1.localId) }
        case .lastLoginAt: users.sort { ($0.lastLoginAt ?? 0, $0.localId) < ($1.lastLoginAt ?? 0, $1.localId) }
        case .userEmail: users.sort { ($0.email ?? "", $0.localId) < ($1.email ?? "", $1.localId) }
        case .userId, .unspecified: users.sort { $0.localId < $1.localId }
        }
        if order == "DESC" { users.reverse() }
        let page = users.dropFirst(Int(min(offset, Int64(Int32.max)))).prefix(limit == 0 ? 500 : Int(min(limit, 500)))
        return Reply(["recordsCount": .string(String(page.count)), "userInfo": .array(page.map { app.emulator.userFields.render($0) })])
    }

    /// Imports users. Per-user problems come back in a 200 as `error[{index, message}]`.
    static func batchCreate(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        let key = try call.storeKey()
        guard case .array(let items)? = call.body["users"], !items.isEmpty else { throw AuthError(.missingUserAccount) }
        guard items.count <= 1000 else { throw AuthError.invalidArgument("A maximum of 1000 users can be imported at once.") }
        let algorithm = try ImportedPassword.requestAlgorithm(call.body)
        if try call.bool("sanityCheck") == true {
            let oneAccountPerEmail = !(app.emulator.existingStore(key)?.read { $0.config.allowDuplicateEmails } ?? false)
            try sanityCheck(items, emails: oneAccountPerEmail)
        }
        let errors = try importUsers(app, key, items, allowOverwrite: try call.bool("allowOverwrite") ?? false, hashAlgorithm: algorithm)
        var o: JSONObject = ["kind": "identitytoolkit#UploadAccountResponse"]
        if !errors.isEmpty { o["error"] = .array(errors.map { ["index": .int($0.index), "message": .string($0.message)] }) }
        return Reply(.object(o))
    }

    /// `sanityCheck: true`: two users of the batch with one email (`emails`: one account per email), or one provider
    /// identity, refuse the whole batch (`DUPLICATE_EMAIL : <email>`, `DUPLICATE_RAW_ID : Provider id(<p>), Raw id(<r>)`,
    /// as production and the official emulator).
    static func sanityCheck(_ items: [JSON], emails checkEmails: Bool) throws(AuthError) {
        var emails = Set<String>(), identities = Set<[String]>()
        for item in items {
            guard case .object(let u) = item else { continue }
            // Emails that are not valid are left to the per-user checks; the message names the repeat as given.
            if checkEmails, let e = stringField(u["email"]), Identifiers.isValidEmail(e), !emails.insert(e.lowercased()).inserted {
                throw AuthError(.duplicateEmail, Identifiers.printable(e, limit: 256))
            }
            for p in u["providerUserInfo"]?.arrayValue ?? [] {
                guard let id = stringField(p["providerId"]), let raw = stringField(p["rawId"]) else { continue }
                if !identities.insert([id, raw]).inserted {
                    throw AuthError(.duplicateRawId, "Provider id(\(Identifiers.printable(id, limit: 64))), Raw id(\(Identifiers.printable(raw, limit: 256)))")
                }
            }
        }
    }

    /// Creates users from exported/imported records (the batchCreate and firebase-tools `accounts.json` shape).
    /// Returns the per-user problems; throws for a duplicate localId inside the batch and a password hash that is not
    /// base64 under `hashAlgorithm` (batchCreate's top-level hash fields, ImportedHashes.swift).
    static func importUsers(_ app: PhoneAuthApp, _ key: StoreKey, _ items: [JSON], allowOverwrite: Bool,
                            hashAlgorithm: ImportedHash? = nil) throws(AuthError) -> [(index: Int, message: String)] {
        try commitUsers(app, key, try prepareUsers(app, key, items, hashAlgorithm: hashAlgorithm), allowOverwrite: allowOverwrite)
    }

    /// A batch of records read and checked, not yet stored: each valid one's changes, the others' problems.
    struct PreparedUsers: Sendable {
        var valid: [(index: Int, localId: String, changes: UserChanges)] = []
        var errors: [(index: Int, message: String)] = []
        /// Each record's `localId` as given (nil: none, or not a user object), for an import's duplicate checks.
        var ids: [String?] = []
    }

    /// The first half of `importUsers`: every record through the user field table and the password import, touching
    /// no store (the start-up import runs it on its reading thread, ExportImport.swift, with a `table` of its own:
    /// `UserFieldTable.ownCopy`).
    static func prepareUsers(_ app: PhoneAuthApp, _ key: StoreKey, _ items: [JSON], hashAlgorithm: ImportedHash? = nil,
                             table: UserFieldTable? = nil) throws(AuthError) -> PreparedUsers {
        var seen = Set<String>(minimumCapacity: items.count)
        let claims = ValidClaims()
        let table = table ?? app.emulator.userFields
        let random = app.emulator.random, clock = app.emulator.clock
        var prepared = PreparedUsers()
        prepared.valid.reserveCapacity(items.count)
        prepared.ids.reserveCapacity(items.count)
        for (i, item) in items.enumerated() {
            func fail(_ m: String) { prepared.errors.append((i, m)) }
            guard case .object(let u) = item else { prepared.ids.append(nil); fail("user must be an object"); continue }
            let given = stringField(u["localId"])
            prepared.ids.append(given)
            guard let localId = given, !localId.isEmpty else { fail("localId is missing"); continue }
            guard localId.utf8.count <= 128 else { fail("localId is too long"); continue }
            guard seen.insert(localId).inserted else { throw AuthError(.duplicateLocalId, localId) }
            if let t = stringField(u["tenantId"]), !t.isEmpty, t != key.tenantId {
                fail("Tenant id in userInfo does not match the tenant id in request."); continue
            }
            // Every field imports may set, through the user field table (PhoneAuthCore/UserFields.swift).
            var c: UserChanges
            let input = UserFieldInput(random: random, now: clock.nowMillis(), claims: claims)
            switch table.importChanges(u, input: input) {
            case .success(let changes): c = changes
            case .failure(let e): fail(e.message); continue
            }
            switch try ImportedPassword.change(u, index: i, random: random, algorithm: hashAlgorithm) {
            case .success(let password): c.password = password ?? c.password
            case .failure(let e): fail(e.message); continue
            }
            prepared.valid.append((i, localId, c))
        }
        return prepared
    }

    /// The second half of `importUsers`: the valid records stored, in one transaction for the whole batch (a replaced
    /// user is never deleted without its replacement); returns every problem, in record order.
    static func commitUsers(_ app: PhoneAuthApp, _ key: StoreKey, _ prepared: PreparedUsers,
                            allowOverwrite: Bool) throws(AuthError) -> [(index: Int, message: String)] {
        var errors = prepared.errors
        for (i, e) in try app.emulator.importUsers(key, prepared.valid, allowOverwrite: allowOverwrite) {
            switch e.code {
            // Production's and the official emulator's messages.
            case .duplicateLocalId: errors.append((i, "localId belongs to an existing account - can not overwrite."))
            case .phoneNumberExists: errors.append((i, "phone number already exists"))
            case .emailExists: errors.append((i, "email exists in other account in database"))
            case .federatedUserIdAlreadyLinked: errors.append((i, "raw id exists in other account in database"))
            default: errors.append((i, e.wire.message))
            }
        }
        return errors.sorted { $0.index < $1.index }
    }

    /// A string, or a number written as one (imports coerce them, as firebase-tools does).
    static func stringField(_ v: JSON?) -> String? { UserFields.text(v) }
}
