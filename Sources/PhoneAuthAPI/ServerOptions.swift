import EmulatorSupport
import PhoneAuthCore

/// One server option: its flag, environment variable, config-file key, how a value is parsed and checked, its help
/// and its default. `ServerSettings.resolve` walks `ServerSettings.options`; `--help` and docs/configuration.md's
/// table are generated from it.
public struct ServerOption: Sendable {
    /// How values arrive and combine.
    public enum Kind: Sendable {
        /// `--config`: read before everything else, to find the config file.
        case configFile
        /// One value: the last flag, else the environment variable, else the config file's key, else the default.
        case one(@Sendable (inout ServerSettings, String) throws -> Void)
        /// A list: the repeated flags, else the environment variable (comma-separated), else the config file's array.
        case list(@Sendable (inout ServerSettings, [String]) throws -> Void)
        /// A list added up: the environment variable's entries (comma-separated), then the repeated flags.
        case added(@Sendable (inout ServerSettings, [String]) throws -> Void)
        /// Only in the config file.
        case fileOnly
    }

    /// The long flag without `--`; nil: no flag.
    public let flag: String?
    /// The value's name in `--help` and the README (`N`, `FILE`, `rs256|none`).
    public let metavar: String
    public let env: String?
    /// Read (in order, the first one set) when neither the flag, nor `env`, nor the config file's key gives a value.
    public let fallbackEnvs: [String]
    public let configKey: String?
    public let kind: Kind
    /// Not in `--help` nor the README (benchmark tuning).
    public let hidden: Bool
    /// What the option does (`--help`).
    public let help: String
    /// The default, in Markdown (backticks are dropped in `--help`); nil: none.
    public let defaultText: String?
    /// A config-file value: checked and applied (`where` is the file, for messages).
    let fromFile: (@Sendable (inout ServerSettings, JSON, _ where: String) throws -> Void)?

    init(_ flag: String?, _ metavar: String = "", env: String? = nil, fallbackEnvs: [String] = [], config: String? = nil,
         _ kind: Kind, file: (@Sendable (inout ServerSettings, JSON, String) throws -> Void)? = nil, hidden: Bool = false,
         help: String = "", default defaultText: String? = nil) {
        self.flag = flag
        self.metavar = metavar
        self.env = env
        self.fallbackEnvs = fallbackEnvs
        self.configKey = config
        self.kind = kind
        self.fromFile = file
        self.hidden = hidden
        self.help = help
        self.defaultText = defaultText
    }

    /// A whole number in `range` (flag, environment variable or config file) stored at `field`.
    static func count(_ flag: String, env: String, config: String, range: ClosedRange<Int>, _ field: WritableKeyPath<ServerSettings, Int> & Sendable,
                      help: String, default value: Int) -> ServerOption {
        let expected = "expected \(range.lowerBound) to \(range.upperBound)"
        return ServerOption(flag, "N", env: env, config: config,
                            .one { s, v in
                                guard let n = Int(v), range.contains(n) else { throw SettingsError("invalid --\(flag) '\(v)': \(expected)") }
                                s[keyPath: field] = n
                            },
                            file: { s, v, at in
                                guard let n = v.int64Value, n >= Int64(range.lowerBound), n <= Int64(range.upperBound) else {
                                    throw SettingsError("\(at): \"\(config)\" must be an integer from \(range.lowerBound) to \(range.upperBound)")
                                }
                                s[keyPath: field] = Int(n)
                            },
                            help: help, default: "`\(value)`")
    }

    var isList: Bool {
        switch kind {
        case .list, .added: return true
        default: return false
        }
    }

    /// `--flag METAVAR` in a 28-column left margin, then the help wrapped to 118 columns.
    func helpLines() -> [String] {
        guard let flag else { return [] }
        let left = "  --\(flag)" + (metavar.isEmpty ? "" : " \(metavar)")
        var envs = env.map { isList ? "\($0), comma-separated" : $0 } ?? ""
        if !fallbackEnvs.isEmpty { envs += ", then " + fallbackEnvs.joined(separator: " / ") }
        var parts = [envs]
        if let d = defaultText { parts.append("default " + String(d.filter { $0 != "`" })) }
        var text = help
        if isList { text += "; repeatable" }
        text += " (" + parts.filter { !$0.isEmpty }.joined(separator: "; ") + ")"
        let indent = String(repeating: " ", count: 28)
        var lines: [String] = []
        var line = left.count < 28 ? left + String(repeating: " ", count: 28 - left.count) : left
        if left.count >= 28 {
            lines.append(line)
            line = indent
        }
        var first = true
        for word in text.split(separator: " ") {
            if !first && line.count + 1 + word.count > 118 {
                lines.append(line)
                line = indent
                first = true
            }
            line += (first ? "" : " ") + word
            first = false
        }
        lines.append(line)
        return lines
    }

    /// `| --flag METAVAR | ENV | default | help |`.
    func readmeRow() -> String {
        func cell(_ s: String) -> String { s.map { $0 == "|" ? "\\|" : String($0) }.joined() }
        let flagCell = "`--\(flag ?? "")" + (metavar.isEmpty ? "" : " \(metavar)") + "`" + (isList ? " (repeatable)" : "")
        var envCell = env.map { "`\($0)`" } ?? "—"
        if !fallbackEnvs.isEmpty { envCell += ", then " + fallbackEnvs.map { "`\($0)`" }.joined(separator: " / ") }
        if isList { envCell += " (comma-separated)" }
        return "| \(cell(flagCell)) | \(cell(envCell)) | \(cell(defaultText ?? "—")) | \(cell(help)) |"
    }
}

extension ServerSettings {
    /// Every option, in the order `--help` lists them and `resolve` applies them.
    public static let options: [ServerOption] = [
        ServerOption("config", "FILE", env: "PHONE_AUTH_EMULATOR_CONFIG", .configFile,
                     help: "JSON config", default: "`config/emulator.json` if present, else the embedded copy"),
        ServerOption("host", "H", env: "PHONE_AUTH_EMULATOR_HOST", config: "host", .one { s, v in s.host = v },
                     file: { s, v, at in
                         guard let h = v.stringValue, !h.isEmpty else { throw SettingsError("\(at): \"host\" must be a non-empty string") }
                         s.host = h
                     },
                     help: "listen address", default: "`127.0.0.1`"),
        ServerOption("port", "N", env: "PHONE_AUTH_EMULATOR_PORT", config: "port",
                     .one { s, v in
                         guard let n = Int(v), (0...65535).contains(n) else { throw SettingsError("invalid port '\(v)': expected 0 to 65535") }
                         s.port = n
                     },
                     file: { s, v, at in
                         guard let p = v.int64Value, (0...65535).contains(p) else { throw SettingsError("\(at): \"port\" must be an integer from 0 to 65535") }
                         s.port = Int(p)
                     },
                     help: "listen port; 0 picks a free one (printed: listening on …)", default: "`9099`"),
        ServerOption("project", "ID", env: "PHONE_AUTH_EMULATOR_PROJECT", fallbackEnvs: ["GCLOUD_PROJECT", "GOOGLE_CLOUD_PROJECT"],
                     config: "projectId",
                     .one { s, v in
                         guard PhoneAuthApp.isValidProjectID(v) else { throw SettingsError("invalid project id '\(v)'") }
                         s.projectId = v
                     },
                     file: { s, v, at in
                         guard let p = v.stringValue, PhoneAuthApp.isValidProjectID(p) else {
                             throw SettingsError("\(at): \"projectId\" must be a project id (letters, digits, - and _)")
                         }
                         s.projectId = p
                     },
                     help: "default project", default: "`demo-phone`"),
        ServerOption("test-phone", "+E164=CODE", env: "PHONE_AUTH_EMULATOR_TEST_PHONES", .added { s, v in s.testPhones = v },
                     help: "extra fictional number for the default project"),
        ServerOption("token-signing", "rs256|none", env: "PHONE_AUTH_EMULATOR_TOKEN_SIGNING", config: "tokenSigning",
                     .one { s, v in
                         guard let m = TokenSigningMode(rawValue: v.lowercased()) else {
                             throw SettingsError("invalid --token-signing '\(v)': expected rs256 or none")
                         }
                         s.tokenSigning = m
                     },
                     file: { s, v, at in
                         guard let t = v.stringValue, let m = TokenSigningMode(rawValue: t.lowercased()) else {
                             throw SettingsError("\(at): \"tokenSigning\" must be \"rs256\" or \"none\"")
                         }
                         s.tokenSigning = m
                     },
                     help: "rs256: real signatures; none: unsigned, like the official emulator", default: "`rs256`"),
        ServerOption("signing-key", "FILE", env: "PHONE_AUTH_EMULATOR_SIGNING_KEY", config: "signingKey", .one { s, v in s.signingKeyPath = v },
                     file: { s, v, at in
                         guard let p = v.stringValue, !p.isEmpty else { throw SettingsError("\(at): \"signingKey\" must be a file path") }
                         s.signingKeyPath = p
                     },
                     help: "PEM RSA private key (2048 bits or more) to sign with; created (mode 0600) if it does not exist", default: "a key generated at start"),
        ServerOption("admin-token", "TOKEN", env: "PHONE_AUTH_EMULATOR_ADMIN_TOKEN", config: "adminToken",
                     .one { s, v in
                         guard v.utf8.count >= 8, !v.contains(" ") else { throw SettingsError("invalid --admin-token: use at least 8 characters and no spaces") }
                         s.adminToken = v
                     },
                     file: { s, v, at in
                         guard let t = v.stringValue, t.utf8.count >= 8 else { throw SettingsError("\(at): \"adminToken\" must be a string of at least 8 characters") }
                         s.adminToken = t
                     },
                     help: "admin calls and the /emulator/ API need \"Authorization: Bearer TOKEN\"; for emulators reachable beyond loopback",
                     default: "admin calls use `Bearer owner`, the `/emulator/` API is open; with a token both need `Bearer TOKEN`"),
        ServerOption("allow-origin", "ORIGIN", env: "PHONE_AUTH_EMULATOR_ALLOW_ORIGINS", config: "allowOrigins",
                     .list { s, v in s.allowOrigins = v },
                     help: "let web pages from ORIGIN (scheme://host[:port]) call the /emulator/ API and admin routes",
                     default: "`http(s)://localhost|127.0.0.1|[::1]` on any port, and the server's own origin"),
        ServerOption("allow-host", "NAME", env: "PHONE_AUTH_EMULATOR_ALLOW_HOSTS", config: "allowHosts", .list { s, v in s.allowHosts = v },
                     help: "accept requests whose Host header is NAME (or NAME:PORT, *.SUFFIX, * for any); other DNS names are refused (DNS rebinding)",
                     default: "IP literals and `localhost` (plus single-label names such as a Compose service when bound to `0.0.0.0` or `::`)"),
        ServerOption("data-dir", "DIR", env: "PHONE_AUTH_EMULATOR_DATA_DIR", .one { s, v in s.dataDir = v },
                     help: "durable state (users, config, sessions, refresh tokens, keys) in SQLite", default: "in memory"),
        ServerOption("durability", "normal|full", env: "PHONE_AUTH_EMULATOR_DURABILITY",
                     .one { s, v in
                         guard v == "normal" || v == "full" else { throw SettingsError("invalid --durability '\(v)': expected normal or full") }
                         s.durabilityFull = v == "full"
                     },
                     help: "normal: survives kill -9; full: also power loss", default: "`normal`"),
        ServerOption("import", "DIR", env: "PHONE_AUTH_EMULATOR_IMPORT", .one { s, v in s.importDir = v },
                     help: "load a firebase-tools export (firebase-export-metadata.json, auth_export/), or one firebase auth:export .json/.csv file, at start (streamed; a bad record fails the start, nothing half-imported)"),
        ServerOption("export-on-exit", "DIR", env: "PHONE_AUTH_EMULATOR_EXPORT_ON_EXIT", .one { s, v in s.exportOnExit = v },
                     help: "write a firebase-tools export on SIGINT/SIGTERM"),
        ServerOption("export-root", "DIR", env: "PHONE_AUTH_EMULATOR_EXPORT_ROOT", config: "exportRoot",
                     .one { s, v in
                         guard !Files.hasNUL(v) else { throw SettingsError("invalid --export-root: a directory path") }
                         s.exportRoot = v
                     },
                     file: { s, v, at in
                         guard let p = v.stringValue, !p.isEmpty, !Files.hasNUL(p) else { throw SettingsError("\(at): \"exportRoot\" must be a directory path") }
                         s.exportRoot = p
                     },
                     help: "POST /emulator/v1/projects/{p}:export writes only inside DIR; relative paths start there",
                     default: "the working directory"),
        ServerOption.count("max-projects", env: "PHONE_AUTH_EMULATOR_MAX_PROJECTS", config: "maxProjects", range: 1...1_000_000, \.maxProjects,
                           help: "at most N projects, counting those created on first use by any request; more answer QUOTA_EXCEEDED",
                           default: Emulator.defaultMaxProjects),
        ServerOption.count("max-users", env: "PHONE_AUTH_EMULATOR_MAX_USERS", config: "maxUsers", range: 1...100_000_000, \.maxUsers,
                           help: "at most N users per project, and per tenant; more answer QUOTA_EXCEEDED",
                           default: Emulator.defaultMaxUsersPerProject),
        ServerOption.count("max-users-total", env: "PHONE_AUTH_EMULATOR_MAX_USERS_TOTAL", config: "maxUsersTotal", range: 1...100_000_000,
                           \.maxUsersTotal, help: "at most N users in all projects and tenants together; more answer QUOTA_EXCEEDED",
                           default: Emulator.defaultMaxUsersTotal),
        ServerOption.count("max-sessions", env: "PHONE_AUTH_EMULATOR_MAX_SESSIONS", config: "maxSessions", range: 1...100_000_000, \.maxSessions,
                           help: "at most N pending verification sessions in all projects; a send past it answers QUOTA_EXCEEDED",
                           default: Emulator.defaultMaxSessions),
        ServerOption("request-timeout", "S", env: "PHONE_AUTH_EMULATOR_REQUEST_TIMEOUT",
                     .one { s, v in
                         guard let t = Double(v), t >= 0.5, t <= 3600 else {
                             throw SettingsError("invalid --request-timeout '\(v)': expected seconds from 0.5 to 3600")
                         }
                         s.requestTimeoutSeconds = t
                     },
                     help: "seconds a client may take to send a whole request before 408", default: "`15`"),
        ServerOption("blocking-timeout-ms", "MS", env: "PHONE_AUTH_EMULATOR_BLOCKING_TIMEOUT_MS", config: "blockingTimeoutMs",
                     .one { s, v in
                         guard let n = Int(v), (100...60_000).contains(n) else {
                             throw SettingsError("invalid --blocking-timeout-ms '\(v)': expected milliseconds from 100 to 60000")
                         }
                         s.blockingTimeoutMillis = n
                     },
                     file: { s, v, w in
                         guard let n = v.int64Value, (100...60_000).contains(n) else {
                             throw SettingsError("\(w): blockingTimeoutMs must be milliseconds from 100 to 60000")
                         }
                         s.blockingTimeoutMillis = Int(n)
                     },
                     help: "deadline for a blocking function (beforeCreate, beforeSignIn, beforeSendSms, beforeSendEmail) to answer; later is BLOCKING_FUNCTION_ERROR_RESPONSE",
                     default: "`7000` (production's 7 s)"),
        ServerOption("max-connections-per-peer", "N", env: "PHONE_AUTH_EMULATOR_MAX_CONNECTIONS_PER_PEER",
                     .one { s, v in
                         guard let n = Int(v), (0...1_048_576).contains(n) else {
                             throw SettingsError("invalid --max-connections-per-peer '\(v)': expected 0 (automatic) to 1048576")
                         }
                         s.maxConnectionsPerPeer = n
                     },
                     help: "connections one IP address (IPv6: /64) may hold open; more get 503 and are closed",
                     default: "half the descriptor budget, loopback exempt; an explicit N also applies to loopback"),
        ServerOption("log-level", "L", env: "PHONE_AUTH_EMULATOR_LOG_LEVEL", config: "logLevel",
                     .one { s, v in
                         guard let l = LogLevel(name: v) else { throw SettingsError("invalid --log-level '\(v)'") }
                         s.logLevel = l
                     },
                     file: { s, v, at in
                         guard let l = v.stringValue.flatMap(LogLevel.init(name:)) else {
                             throw SettingsError("\(at): \"logLevel\" must be one of trace, debug, info, notice, warning, error")
                         }
                         s.logLevel = l
                     },
                     help: "trace|debug|info|notice|warning|error", default: "`info`"),
        ServerOption("log-format", "text|json", env: "PHONE_AUTH_EMULATOR_LOG_FORMAT", config: "logFormat",
                     .one { s, v in
                         guard let f = LogFormat(rawValue: v.lowercased()) else { throw SettingsError("invalid --log-format '\(v)': expected text or json") }
                         s.logFormat = f
                     },
                     file: { s, v, at in
                         guard let f = v.stringValue.flatMap(LogFormat.init(rawValue:)) else { throw SettingsError("\(at): \"logFormat\" must be \"text\" or \"json\"") }
                         s.logFormat = f
                     },
                     help: "log line format", default: "`text`"),
        // Config file only.
        ServerOption(nil, config: "apiKeys", .fileOnly,
                     file: { s, v, at in
                         guard case .object(let m) = v else { throw SettingsError("\(at): \"apiKeys\" must be an object mapping API keys to project ids") }
                         for (key, proj) in m {
                             guard let p = proj.stringValue, PhoneAuthApp.isValidProjectID(p), !key.isEmpty else {
                                 throw SettingsError("\(at): apiKeys.\(key) must be a project id")
                             }
                             s.apiKeys[key] = p
                         }
                     }),
        ServerOption(nil, config: "projects", .fileOnly,
                     file: { s, v, at in
                         guard case .object(let m) = v else { throw SettingsError("\(at): \"projects\" must be an object keyed by project id") }
                         for (pid, block) in m {
                             guard PhoneAuthApp.isValidProjectID(pid) else { throw SettingsError("\(at): projects: \"\(pid)\" is not a valid project id") }
                             var pc = ProjectConfig()
                             do { try pc.apply(block, path: "projects.\(pid)") } catch let e as ConfigError { throw SettingsError("\(at): \(e.description)") }
                             s.projects[pid] = pc
                         }
                     }),
        // Environment only, for benchmarking: values outside 1–64 are clamped, anything else is ignored.
        ServerOption(nil, env: "PHONE_AUTH_EMULATOR_EVENT_LOOPS", .one { s, v in if let n = Int(v) { s.eventLoops = max(1, min(n, 64)) } },
                     hidden: true),
        ServerOption(nil, env: "PHONE_AUTH_EMULATOR_SIGNING_THREADS", .one { s, v in if let n = Int(v) { s.signingThreads = max(1, min(n, 64)) } },
                     hidden: true),
        // Environment only, for benchmarking: `0` sends each answer with its own send(2) instead of batching an event
        // loop iteration's sends through io_uring.
        ServerOption(nil, env: "PHONE_AUTH_EMULATOR_BATCH_SENDS", .one { s, v in s.batchSends = v != "0" }, hidden: true),
    ]
}
