import EmulatorSupport
import PhoneAuthCore

/// A bad flag, environment variable or config file: printed, and the server exits with code 2.
public struct SettingsError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ d: String) { description = d }
}

/// Everything the server needs to start, resolved with precedence flag > environment > config file > default.
public struct ServerSettings: Sendable {
    public var host = "127.0.0.1"
    public var port = 9099
    public var projectId = "demo-phone"
    public var tokenSigning = TokenSigningMode.rs256
    public var signingKeyPath: String?
    public var logLevel = LogLevel.info
    public var logFormat = LogFormat.text
    /// Seconds a client may take to send one whole request (then 408 and close).
    public var requestTimeoutSeconds = 15.0
    /// `--data-dir`: durable state (SQLite); nil keeps everything in memory.
    public var dataDir: String?
    /// `--durability normal|full`: WAL with synchronous=NORMAL (survives kill -9) or FULL (also power loss).
    public var durabilityFull = false
    /// `--import DIR`: a firebase-tools export to load at start.
    public var importDir: String?
    /// `--export-on-exit DIR`: write a firebase-tools export on SIGINT/SIGTERM.
    public var exportOnExit: String?
    /// `--export-root DIR`: `POST …:export` writes only below it; nil: the working directory.
    public var exportRoot: String?
    /// `--max-projects N`: projects created on first use are bounded (`QUOTA_EXCEEDED` past it).
    public var maxProjects = Emulator.defaultMaxProjects
    /// `--max-users N`: users per project and per tenant (`QUOTA_EXCEEDED` past it).
    public var maxUsers = Emulator.defaultMaxUsersPerProject
    /// `--admin-token T`: admin calls need `Bearer T` instead of `Bearer owner`.
    public var adminToken: String?
    /// `--allow-origin` (repeatable): origins added to the loopback defaults for the emulator API and admin calls.
    public var allowOrigins: [String] = []
    /// `--allow-host` (repeatable): `Host` names accepted besides IP literals and localhost.
    public var allowHosts: [String] = []
    /// The browser boundary built from `host`, `allowOrigins` and `allowHosts`.
    public var boundary = WebBoundary()
    /// `--max-connections-per-peer N`: connections one address may hold; 0 (default) = half the descriptor budget,
    /// loopback exempt. An explicit N applies to loopback too.
    public var maxConnectionsPerPeer = 0
    /// Where the configuration came from (a path, or "embedded default").
    public var configSource = "embedded default"
    public var projects: [String: ProjectConfig] = [:]
    public var apiKeys: [String: String] = [:]

    public enum Outcome: Sendable {
        case run(ServerSettings)
        case help
        case version
    }

    public static let usage = """
        Usage: phone-auth-emulator [options]

        A Firebase-compatible phone-auth emulator: fictional numbers with preset codes, real RS256 ID tokens.

        Options (flag > environment variable > config file > default):
          --config FILE             JSON config (PHONE_AUTH_EMULATOR_CONFIG; default config/emulator.json if present,
                                    else the embedded default)
          --host H                  listen address (PHONE_AUTH_EMULATOR_HOST; default 127.0.0.1)
          --port N                  listen port, 0 picks a free one (PHONE_AUTH_EMULATOR_PORT; default 9099)
          --project ID              default project (PHONE_AUTH_EMULATOR_PROJECT, then GCLOUD_PROJECT /
                                    GOOGLE_CLOUD_PROJECT; default demo-phone)
          --test-phone +E164=CODE   extra fictional number for the default project, repeatable
                                    (PHONE_AUTH_EMULATOR_TEST_PHONES, comma-separated)
          --token-signing MODE      rs256 (real signatures, default) or none (unsigned, like the official emulator)
                                    (PHONE_AUTH_EMULATOR_TOKEN_SIGNING)
          --signing-key FILE        PEM RSA private key to sign with; created (mode 0600) if it does not exist
                                    (PHONE_AUTH_EMULATOR_SIGNING_KEY)
          --admin-token TOKEN       admin calls and the /emulator/ API need "Authorization: Bearer TOKEN" (instead of
                                    "Bearer owner" / nothing) (PHONE_AUTH_EMULATOR_ADMIN_TOKEN); for emulators
                                    reachable beyond loopback
          --allow-origin ORIGIN     let web pages from ORIGIN (scheme://host[:port]) call the /emulator/ API and admin
                                    routes; repeatable (PHONE_AUTH_EMULATOR_ALLOW_ORIGINS, comma-separated). Always
                                    allowed: http(s)://localhost, 127.0.0.1, [::1] on any port, and the server itself
          --allow-host NAME         accept requests whose Host header is NAME (or NAME:PORT, *.SUFFIX, * for any);
                                    repeatable (PHONE_AUTH_EMULATOR_ALLOW_HOSTS, comma-separated). Always accepted: IP
                                    addresses and localhost (and single-label names such as a Compose service name
                                    when bound to 0.0.0.0 or ::); other DNS names are refused (DNS rebinding)
          --data-dir DIR            durable state (users, config, sessions, refresh tokens, keys) in SQLite
                                    (PHONE_AUTH_EMULATOR_DATA_DIR); without it everything stays in memory
          --durability MODE         normal (survives kill -9, default) or full (also power loss)
                                    (PHONE_AUTH_EMULATOR_DURABILITY)
          --import DIR              load a firebase-tools export (firebase-export-metadata.json, auth_export/) at start
                                    (PHONE_AUTH_EMULATOR_IMPORT)
          --export-on-exit DIR      write a firebase-tools export on SIGINT/SIGTERM (PHONE_AUTH_EMULATOR_EXPORT_ON_EXIT)
          --export-root DIR         POST /emulator/v1/projects/{p}:export writes only inside DIR; relative paths start
                                    there (PHONE_AUTH_EMULATOR_EXPORT_ROOT; default the working directory)
          --max-projects N          at most N projects, counting those created on first use by any request
                                    (PHONE_AUTH_EMULATOR_MAX_PROJECTS; default 5000)
          --max-users N             at most N users per project, and per tenant (PHONE_AUTH_EMULATOR_MAX_USERS;
                                    default 200000)
          --request-timeout S       seconds a client may take to send a whole request before 408
                                    (PHONE_AUTH_EMULATOR_REQUEST_TIMEOUT; default 15)
          --max-connections-per-peer N
                                    connections one IP address (IPv6: /64) may hold open; more get 503 and are closed
                                    (PHONE_AUTH_EMULATOR_MAX_CONNECTIONS_PER_PEER; default half the descriptor
                                    limit, loopback exempt; an explicit N also applies to loopback)
          --log-level L             trace|debug|info|notice|warning|error (PHONE_AUTH_EMULATOR_LOG_LEVEL; default info)
          --log-format F            text|json (PHONE_AUTH_EMULATOR_LOG_FORMAT; default text)
          --help, --version

        Example:
          phone-auth-emulator --port 0 --test-phone +15555550100=654321
        """

    /// Resolves the settings. `environment` and `readFile` are injected for tests.
    public static func resolve(arguments: [String], environment: (String) -> String?,
                               readFile: (String) throws -> [UInt8], fileExists: (String) -> Bool) throws(SettingsError) -> Outcome {
        // 1. Flags.
        var flags: [String: String] = [:]
        var flagPhones: [String] = []
        var flagLists: [String: [String]] = [:]
        var i = 0
        let valued: Set<String> = ["config", "host", "port", "project", "test-phone", "token-signing", "signing-key", "log-level", "log-format", "request-timeout", "data-dir", "durability", "import", "export-on-exit", "admin-token", "export-root", "max-projects", "max-users", "allow-origin", "allow-host", "max-connections-per-peer"]
        while i < arguments.count {
            let arg = arguments[i]
            if arg == "--help" || arg == "-h" { return .help }
            if arg == "--version" { return .version }
            guard arg.hasPrefix("--") else { throw SettingsError("unexpected argument '\(arg)' (see --help)") }
            var name = String(arg.dropFirst(2))
            var value: String? = nil
            if let eq = name.firstIndex(of: "=") {
                value = String(name[name.index(after: eq)...])
                name = String(name[..<eq])
            }
            guard valued.contains(name) else { throw SettingsError("unknown option '--\(name)' (see --help)") }
            if value == nil {
                i += 1
                guard i < arguments.count else { throw SettingsError("option '--\(name)' needs a value") }
                value = arguments[i]
            }
            if name == "test-phone" { flagPhones.append(value!) } else if name == "allow-origin" || name == "allow-host" {
                flagLists[name, default: []].append(value!)
            } else { flags[name] = value! }
            i += 1
        }
        func pick(_ flag: String, _ env: String) -> String? {
            if let f = flags[flag] { return f }
            if let e = environment(env), !e.isEmpty { return e }
            return nil
        }

        // 2. Config file.
        var s = ServerSettings()
        var file = JSONObject()
        let explicitConfig = pick("config", "PHONE_AUTH_EMULATOR_CONFIG")
        let configText: [UInt8]
        if let path = explicitConfig {
            guard fileExists(path) else { throw SettingsError("config file \(path) does not exist") }
            do { configText = try readFile(path) } catch { throw SettingsError("cannot read config file \(path): \(error)") }
            s.configSource = path
        } else if fileExists("config/emulator.json") {
            do { configText = try readFile("config/emulator.json") } catch { throw SettingsError("cannot read config file config/emulator.json: \(error)") }
            s.configSource = "config/emulator.json"
        } else {
            configText = Array(EmbeddedDefaults.configJSON.utf8)
        }
        do {
            guard case .object(let o) = try JSONParser.parse(configText) else { throw SettingsError("\(s.configSource): the config must be a JSON object") }
            file = o
        } catch let e as SettingsError {
            throw e
        } catch {
            throw SettingsError("\(s.configSource): invalid JSON: \(error)")
        }
        let where_ = s.configSource
        var fileLists: [String: [String]] = [:]
        for (k, v) in file {
            switch k {
            case "host": guard let h = v.stringValue, !h.isEmpty else { throw SettingsError("\(where_): \"host\" must be a non-empty string") }; s.host = h
            case "port":
                guard let p = v.int64Value, (0...65535).contains(p) else { throw SettingsError("\(where_): \"port\" must be an integer from 0 to 65535") }
                s.port = Int(p)
            case "projectId": guard let p = v.stringValue, PhoneAuthApp.isValidProjectID(p) else { throw SettingsError("\(where_): \"projectId\" must be a project id (letters, digits, - and _)") }; s.projectId = p
            case "tokenSigning":
                guard let t = v.stringValue, let m = TokenSigningMode(rawValue: t.lowercased()) else { throw SettingsError("\(where_): \"tokenSigning\" must be \"rs256\" or \"none\"") }
                s.tokenSigning = m
            case "logLevel": guard let l = v.stringValue.flatMap(LogLevel.init(name:)) else { throw SettingsError("\(where_): \"logLevel\" must be one of trace, debug, info, notice, warning, error") }; s.logLevel = l
            case "logFormat": guard let f = v.stringValue.flatMap(LogFormat.init(rawValue:)) else { throw SettingsError("\(where_): \"logFormat\" must be \"text\" or \"json\"") }; s.logFormat = f
            case "adminToken": guard let t = v.stringValue, t.utf8.count >= 8 else { throw SettingsError("\(where_): \"adminToken\" must be a string of at least 8 characters") }; s.adminToken = t
            case "exportRoot": guard let p = v.stringValue, !p.isEmpty, !Files.hasNUL(p) else { throw SettingsError("\(where_): \"exportRoot\" must be a directory path") }; s.exportRoot = p
            case "maxProjects":
                guard let n = v.int64Value, (1...1_000_000).contains(n) else { throw SettingsError("\(where_): \"maxProjects\" must be an integer from 1 to 1000000") }
                s.maxProjects = Int(n)
            case "maxUsers":
                guard let n = v.int64Value, (1...100_000_000).contains(n) else { throw SettingsError("\(where_): \"maxUsers\" must be an integer from 1 to 100000000") }
                s.maxUsers = Int(n)
            case "allowOrigins", "allowHosts":
                let values = v.arrayValue?.compactMap(\.stringValue)
                guard let values, values.count == v.arrayValue?.count else { throw SettingsError("\(where_): \"\(k)\" must be an array of strings") }
                fileLists[k] = values
            case "signingKey": guard let p = v.stringValue, !p.isEmpty else { throw SettingsError("\(where_): \"signingKey\" must be a file path") }; s.signingKeyPath = p
            case "apiKeys":
                guard case .object(let m) = v else { throw SettingsError("\(where_): \"apiKeys\" must be an object mapping API keys to project ids") }
                for (key, proj) in m {
                    guard let p = proj.stringValue, PhoneAuthApp.isValidProjectID(p), !key.isEmpty else {
                        throw SettingsError("\(where_): apiKeys.\(key) must be a project id")
                    }
                    s.apiKeys[key] = p
                }
            case "projects":
                guard case .object(let m) = v else { throw SettingsError("\(where_): \"projects\" must be an object keyed by project id") }
                for (pid, block) in m {
                    guard PhoneAuthApp.isValidProjectID(pid) else { throw SettingsError("\(where_): projects: \"\(pid)\" is not a valid project id") }
                    var pc = ProjectConfig()
                    do { try pc.apply(block, path: "projects.\(pid)") } catch { throw SettingsError("\(where_): \(error.description)") }
                    s.projects[pid] = pc
                }
            default:
                throw SettingsError("\(where_): unknown key \"\(k)\"")
            }
        }

        // 3. Environment and flags over the file.
        if let h = pick("host", "PHONE_AUTH_EMULATOR_HOST") { s.host = h }
        if let p = pick("port", "PHONE_AUTH_EMULATOR_PORT") {
            guard let n = Int(p), (0...65535).contains(n) else { throw SettingsError("invalid port '\(p)': expected 0 to 65535") }
            s.port = n
        }
        if let p = pick("project", "PHONE_AUTH_EMULATOR_PROJECT") {
            s.projectId = p
        } else if file["projectId"] == nil, let p = environment("GCLOUD_PROJECT") ?? environment("GOOGLE_CLOUD_PROJECT"), !p.isEmpty {
            s.projectId = p
        }
        guard PhoneAuthApp.isValidProjectID(s.projectId) else { throw SettingsError("invalid project id '\(s.projectId)'") }
        if let t = pick("token-signing", "PHONE_AUTH_EMULATOR_TOKEN_SIGNING") {
            guard let m = TokenSigningMode(rawValue: t.lowercased()) else { throw SettingsError("invalid --token-signing '\(t)': expected rs256 or none") }
            s.tokenSigning = m
        }
        if let k = pick("signing-key", "PHONE_AUTH_EMULATOR_SIGNING_KEY") { s.signingKeyPath = k }
        if let l = pick("log-level", "PHONE_AUTH_EMULATOR_LOG_LEVEL") {
            guard let lv = LogLevel(name: l) else { throw SettingsError("invalid --log-level '\(l)'") }
            s.logLevel = lv
        }
        if let f = pick("log-format", "PHONE_AUTH_EMULATOR_LOG_FORMAT") {
            guard let fm = LogFormat(rawValue: f.lowercased()) else { throw SettingsError("invalid --log-format '\(f)': expected text or json") }
            s.logFormat = fm
        }
        if let t = pick("request-timeout", "PHONE_AUTH_EMULATOR_REQUEST_TIMEOUT") {
            guard let v = Double(t), v >= 0.5, v <= 3600 else { throw SettingsError("invalid --request-timeout '\(t)': expected seconds from 0.5 to 3600") }
            s.requestTimeoutSeconds = v
        }
        if let t = pick("admin-token", "PHONE_AUTH_EMULATOR_ADMIN_TOKEN") {
            guard t.utf8.count >= 8, !t.contains(" ") else { throw SettingsError("invalid --admin-token: use at least 8 characters and no spaces") }
            s.adminToken = t
        }
        if let v = pick("max-connections-per-peer", "PHONE_AUTH_EMULATOR_MAX_CONNECTIONS_PER_PEER") {
            guard let n = Int(v), (0...1_048_576).contains(n) else {
                throw SettingsError("invalid --max-connections-per-peer '\(v)': expected 0 (automatic) to 1048576")
            }
            s.maxConnectionsPerPeer = n
        }
        if let d = pick("data-dir", "PHONE_AUTH_EMULATOR_DATA_DIR") { s.dataDir = d }
        if let d = pick("durability", "PHONE_AUTH_EMULATOR_DURABILITY") {
            guard d == "normal" || d == "full" else { throw SettingsError("invalid --durability '\(d)': expected normal or full") }
            s.durabilityFull = d == "full"
        }
        if let d = pick("import", "PHONE_AUTH_EMULATOR_IMPORT") { s.importDir = d }
        if let d = pick("export-on-exit", "PHONE_AUTH_EMULATOR_EXPORT_ON_EXIT") { s.exportOnExit = d }
        if let d = pick("export-root", "PHONE_AUTH_EMULATOR_EXPORT_ROOT") {
            guard !Files.hasNUL(d) else { throw SettingsError("invalid --export-root: a directory path") }
            s.exportRoot = d
        }
        if let m = pick("max-projects", "PHONE_AUTH_EMULATOR_MAX_PROJECTS") {
            guard let n = Int(m), (1...1_000_000).contains(n) else { throw SettingsError("invalid --max-projects '\(m)': expected 1 to 1000000") }
            s.maxProjects = n
        }
        if let m = pick("max-users", "PHONE_AUTH_EMULATOR_MAX_USERS") {
            guard let n = Int(m), (1...100_000_000).contains(n) else { throw SettingsError("invalid --max-users '\(m)': expected 1 to 100000000") }
            s.maxUsers = n
        }
        // Lists: flags, else the environment (comma-separated), else the config file.
        func pickList(_ flag: String, _ env: String, _ key: String) -> [String] {
            if let f = flagLists[flag] { return f }
            if let e = environment(env), !e.isEmpty { return e.split(separator: ",").map { $0.trimmingSpaces() }.filter { !$0.isEmpty } }
            return fileLists[key] ?? []
        }
        let origins = pickList("allow-origin", "PHONE_AUTH_EMULATOR_ALLOW_ORIGINS", "allowOrigins")
        let hostNames = pickList("allow-host", "PHONE_AUTH_EMULATOR_ALLOW_HOSTS", "allowHosts")
        s.boundary = try WebBoundary(bindHost: s.host, allowOrigins: origins, allowHosts: hostNames)
        s.allowOrigins = origins.compactMap(WebBoundary.normalizeOrigin)
        s.allowHosts = hostNames.compactMap(WebBoundary.normalizeHost)
        var phones: [String] = []
        if let env = environment("PHONE_AUTH_EMULATOR_TEST_PHONES") {
            phones += env.split(separator: ",").map { $0.trimmingSpaces() }.filter { !$0.isEmpty }
        }
        phones += flagPhones
        var project = s.projects[s.projectId] ?? ProjectConfig()
        for entry in phones {
            guard let eq = entry.lastIndex(of: "=") else { throw SettingsError("invalid test phone '\(entry)': expected +E164=CODE") }
            let num = String(entry[..<eq]), code = String(entry[entry.index(after: eq)...])
            do {
                let parsed = try ProjectConfig.parseTestNumbers(.object([num: .string(code)]), path: "test phone")
                for (k, v) in parsed { project.testPhoneNumbers[k] = v }
            } catch {
                throw SettingsError("invalid test phone '\(entry)': \(error.message)")
            }
        }
        s.projects[s.projectId] = project
        return .run(s)
    }
}
