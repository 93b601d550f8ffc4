import EmulatorSupport
import PhoneAuthCore
#if canImport(Glibc)
import Glibc
#endif

/// The firebase-tools emulator export layout, so exports move both ways between us and the official emulator:
///
///     DIR/firebase-export-metadata.json   {"version": …, "auth": {"version": …, "path": "auth_export"}}
///     DIR/auth_export/accounts.json       {"kind": "identitytoolkit#DownloadAccountResponse", "users": [...]}
///     DIR/auth_export/accounts-<tenant>.json
///     DIR/auth_export/config.json         the emulator config (official fields plus ours)
///
/// Every file is written to a temporary name, fsynced and renamed, so a crash never leaves half a file.
public enum ExportImport {
    public struct Failure: Error, CustomStringConvertible, Sendable {
        public let description: String
    }

    /// Writes the project's users (and each tenant's) and config to `dir`.
    @discardableResult
    public static func export(_ app: PhoneAuthApp, projectId: String, to dir: String) throws(Failure) -> (users: Int, tenants: Int) {
        let authDir = dir + "/auth_export"
        try makeDirectories(authDir)
        let version = PhoneAuthApp.version
        try write(dir + "/firebase-export-metadata.json", ["version": .string(version), "auth": ["version": .string(version), "path": "auth_export"]])
        let root = StoreKey(projectId: projectId)
        var total = 0
        func accounts(_ key: StoreKey) -> JSON {
            let users = app.emulator.store(key).read { s in s.users.keys.sorted().compactMap { s.users[$0] } }
            total += users.count
            return ["kind": "identitytoolkit#DownloadAccountResponse", "users": .array(users.map(UserJSON.render))]
        }
        try write(authDir + "/accounts.json", accounts(root))
        let tenants = app.emulator.tenants(of: projectId)
        for t in tenants {
            try write(authDir + "/accounts-\(t).json", accounts(StoreKey(projectId: projectId, tenantId: t)))
        }
        // config.json: what the official emulator reads (signIn.allowDuplicateEmails, emailPrivacyConfig) plus ours.
        var config = app.emulator.config(root).toJSON().objectValue ?? JSONObject()
        var signIn = config["signIn"]?.objectValue ?? JSONObject()
        signIn["allowDuplicateEmails"] = false
        config["signIn"] = .object(signIn)
        config["emailPrivacyConfig"] = ["enableImprovedEmailPrivacy": false]
        try write(authDir + "/config.json", .object(config))
        return (total, tenants.count)
    }

    /// Reads an export written by firebase-tools (or by us) into the project. Users keep their localId, phone,
    /// claims, disabled flag and timestamps; existing users with the same localId are replaced.
    @discardableResult
    public static func importDirectory(_ app: PhoneAuthApp, projectId: String, from dir: String) throws(Failure) -> (users: Int, problems: [String]) {
        var authPath = "auth_export"
        if Files.exists(dir + "/firebase-export-metadata.json") {
            let meta = try readJSON(dir + "/firebase-export-metadata.json")
            guard let auth = meta["auth"]?.objectValue else {
                throw Failure(description: "\(dir)/firebase-export-metadata.json has no \"auth\" entry: this export holds no Auth data")
            }
            if let p = auth["path"]?.stringValue, !p.isEmpty {
                guard !p.contains(".."), !p.hasPrefix("/") else { throw Failure(description: "\(dir)/firebase-export-metadata.json: invalid auth path \(p)") }
                authPath = p
            }
        } else if !Files.exists(dir + "/auth_export") {
            throw Failure(description: "\(dir) is not an emulator export (no firebase-export-metadata.json and no auth_export/)")
        }
        let authDir = dir + "/" + authPath
        guard isDirectory(authDir) else { throw Failure(description: "\(authDir) does not exist or is not a directory") }

        if Files.exists(authDir + "/config.json") {
            let json = try readJSON(authDir + "/config.json")
            guard case .object(let o) = json else { throw Failure(description: "\(authDir)/config.json must hold a JSON object") }
            // Official exports carry fields we do not model (allowDuplicateEmails, emailPrivacyConfig…): keep only ours.
            var ours = JSONObject()
            if let pn = o["signIn"]?["phoneNumber"] { ours["signIn"] = ["phoneNumber": pn] }
            if let r = o["smsRegionConfig"] { ours["smsRegionConfig"] = r }
            if let p = o["phoneAuth"] { ours["phoneAuth"] = p }
            if !ours.isEmpty {
                do { _ = try app.emulator.patchConfig(StoreKey(projectId: projectId), .object(ours)) } catch {
                    throw Failure(description: "\(authDir)/config.json: \(error.description)")
                }
            }
        }
        var names: [String] = []
        guard let d = opendir(authDir) else { throw Failure(description: "cannot read \(authDir): \(String(cString: strerror(errno)))") }
        while let e = readdir(d) {
            let name = withUnsafeBytes(of: e.pointee.d_name) { String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self) }
            if name.hasPrefix("accounts"), name.hasSuffix(".json") { names.append(name) }
        }
        closedir(d)
        var imported = 0
        var problems: [String] = []
        for name in names.sorted() {
            var tenant = String(name.dropFirst("accounts".count).dropLast(".json".count))
            if tenant.hasPrefix("-") { tenant.removeFirst() }
            guard tenant.isEmpty || PhoneAuthApp.isValidProjectID(tenant) else { throw Failure(description: "\(authDir)/\(name): invalid tenant id \(tenant)") }
            let json = try readJSON(authDir + "/" + name)
            guard case .object(let o) = json else { throw Failure(description: "\(authDir)/\(name) must hold a JSON object") }
            guard let users = o["users"]?.arrayValue ?? (o["users"] == nil ? [] : nil) else {
                throw Failure(description: "\(authDir)/\(name): \"users\" must be an array")
            }
            let key = StoreKey(projectId: projectId, tenantId: tenant)
            if !tenant.isEmpty, app.emulator.tenantSettings(key) == nil { _ = app.emulator.store(key) }
            do {
                let errors = try BatchAccounts.importUsers(app, key, users, allowOverwrite: true)
                imported += users.count - errors.count
                problems += errors.map { "\(name) user \($0.index): \($0.message)" }
            } catch {
                throw Failure(description: "\(authDir)/\(name): \(error.message)")
            }
        }
        return (imported, problems)
    }

    // MARK: files

    static func readJSON(_ path: String) throws(Failure) -> JSON {
        let bytes: [UInt8]
        do { bytes = try Files.read(path) } catch { throw Failure(description: "cannot read \(path): \(error)") }
        do { return try JSONParser.parse(bytes, maxDepth: 64) } catch { throw Failure(description: "\(path) is not valid JSON: \(error)") }
    }

    static func write(_ path: String, _ json: JSON) throws(Failure) {
        do { try Files.writeAtomically(path, json.prettySerialized()) } catch { throw Failure(description: "cannot write \(path): \(error)") }
    }

    static func isDirectory(_ path: String) -> Bool {
        var st = stat()
        return stat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR
    }

    static func makeDirectories(_ path: String) throws(Failure) {
        var current = path.hasPrefix("/") ? "" : "."
        for part in path.split(separator: "/") {
            current += "/" + part
            if isDirectory(current) { continue }
            if mkdir(current, 0o755) != 0 && errno != EEXIST {
                throw Failure(description: "cannot create \(current): \(String(cString: strerror(errno)))")
            }
        }
    }
}

/// `POST /emulator/v1/projects/{p}:export {"path": "…"}`: an on-demand export in the firebase-tools layout.
enum ExportEndpoint {
    static func handle(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        guard let path = try call.string("path"), !path.isEmpty else { throw AuthError.invalidArgument("path is required.") }
        do {
            let (users, tenants) = try ExportImport.export(app, projectId: call.projectId, to: path)
            return Reply(["path": .string(path), "users": .int(users), "tenants": .int(tenants)])
        } catch {
            throw AuthError.internalError(error.description)
        }
    }
}
