import EmulatorSupport
import PhoneAuthCore

/// A bad flag, environment variable or config file: printed, and the server exits with code 2.
public struct SettingsError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ d: String) { description = d }
}

/// Everything the server needs to start, resolved with precedence flag > environment > config file > default.
/// The options themselves (flag, environment variable, config key, parser, help, default) are the rows of
/// `ServerSettings.options` (ServerOptions.swift); `--help` and docs/configuration.md's table are generated from it.
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
    /// `--blocking-timeout-ms`: how long a blocking function may take (BlockingCalls.swift).
    public var blockingTimeoutMillis = BlockingFunctions.defaultTimeoutMillis
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
    /// `--max-users-total N`: users in all projects and tenants together (`QUOTA_EXCEEDED` past it).
    public var maxUsersTotal = Emulator.defaultMaxUsersTotal
    /// `--max-sessions N`: pending verification sessions in all projects (`QUOTA_EXCEEDED` past it).
    public var maxSessions = Emulator.defaultMaxSessions
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
    /// `--test-phone` / `PHONE_AUTH_EMULATOR_TEST_PHONES`: `+E164=CODE` entries, already added to the default
    /// project's config in `projects`.
    public var testPhones: [String] = []
    /// `PHONE_AUTH_EMULATOR_EVENT_LOOPS` (1–64; benchmarking): nil = one per CPU (at most 64).
    public var eventLoops: Int?
    /// `PHONE_AUTH_EMULATOR_SIGNING_THREADS` (1–64; benchmarking): nil = the CPU count.
    public var signingThreads: Int?
    /// `PHONE_AUTH_EMULATOR_BATCH_SENDS=0` (benchmarking): one send(2) per answer instead of io_uring batches.
    public var batchSends = true
    /// Where the configuration came from (a path, or "embedded default").
    public var configSource = "embedded default"
    public var projects: [String: ProjectConfig] = [:]
    public var apiKeys: [String: String] = [:]

    public init() {}

    /// Reachable by others: it listens beyond loopback, or has an admin token (which only matters then). The abuse
    /// limits of `protection.mode` `AUTO` follow this (PhoneAuthCore/Protection.swift).
    public var isExposed: Bool { adminToken != nil || !WebBoundary.isLoopbackHost(host) }

    public enum Outcome: Sendable {
        case run(ServerSettings)
        case help
        case version
    }

    /// The `--help` text, generated from `options`.
    public static let usage: String = {
        var lines = [
            "Usage: phone-auth-emulator [options]",
            "       phone-auth-emulator exec [options] -- COMMAND [ARGS...]   (exec --help: run a test command against it)",
            "",
            "A Firebase-compatible phone-auth emulator: fictional numbers with preset codes, real RS256 ID tokens.",
            "",
            "Options (flag > environment variable > config file > default):",
        ]
        for option in options where option.flag != nil && !option.hidden { lines += option.helpLines() }
        lines += ["  --help, --version", "", "Example:", "  phone-auth-emulator --port 0 --test-phone +15555550100=654321"]
        return lines.joined(separator: "\n")
    }()

    /// The README's configuration table (flag | environment | default | what), generated from `options`.
    public static var configurationTable: String {
        var lines = ["| flag | environment | default | what |", "|---|---|---|---|"]
        for option in options where option.flag != nil && !option.hidden { lines.append(option.readmeRow()) }
        return lines.joined(separator: "\n")
    }

    /// Resolves the settings. `environment` and `readFile` are injected for tests.
    ///
    /// 1. Flags are read (`--help`/`-h` and `--version` stop there); 2. the config file (`--config`, its environment
    /// variable, else `config/emulator.json` if present, else the embedded default) is applied key by key, in the
    /// file's order; 3. each option of `options`, in table order, takes its flag, else its environment variable, over
    /// the file; 4. the web boundary and the test phones are built from the result.
    public static func resolve(arguments: [String], environment: (String) -> String?,
                               readFile: (String) throws -> [UInt8], fileExists: (String) -> Bool) throws(SettingsError) -> Outcome {
        // 1. Flags.
        var flags: [String: [String]] = [:]
        var i = 0
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
            guard optionsByFlag[name] != nil else { throw SettingsError("unknown option '--\(name)' (see --help)") }
            if value == nil {
                i += 1
                guard i < arguments.count else { throw SettingsError("option '--\(name)' needs a value") }
                value = arguments[i]
            }
            flags[name, default: []].append(value!)
            i += 1
        }
        /// The last flag, else a non-empty environment variable.
        func pick(_ option: ServerOption) -> String? {
            if let flag = option.flag, let f = flags[flag]?.last { return f }
            if let env = option.env, let e = environment(env), !e.isEmpty { return e }
            return nil
        }
        func commaSeparated(_ text: String) -> [String] {
            text.split(separator: ",").map { $0.trimmingSpaces() }.filter { !$0.isEmpty }
        }

        // 2. Config file.
        var s = ServerSettings()
        let configText: [UInt8]
        if let path = pick(configOption) {
            guard fileExists(path) else { throw SettingsError("config file \(path) does not exist") }
            do { configText = try readFile(path) } catch { throw SettingsError("cannot read config file \(path): \(error)") }
            s.configSource = path
        } else if fileExists("config/emulator.json") {
            do { configText = try readFile("config/emulator.json") } catch { throw SettingsError("cannot read config file config/emulator.json: \(error)") }
            s.configSource = "config/emulator.json"
        } else {
            configText = Array(EmbeddedDefaults.configJSON.utf8)
        }
        let file: JSONObject
        do {
            guard case .object(let o) = try JSONParser.parse(configText) else { throw SettingsError("\(s.configSource): the config must be a JSON object") }
            file = o
        } catch let e as SettingsError {
            throw e
        } catch {
            throw SettingsError("\(s.configSource): invalid JSON: \(error)")
        }
        let source = s.configSource
        var fileLists: [String: [String]] = [:]
        for (key, value) in file {
            guard let option = optionsByConfigKey[key] else { throw SettingsError("\(source): unknown key \"\(key)\"") }
            switch option.kind {
            case .list:
                let values = value.arrayValue?.compactMap(\.stringValue)
                guard let values, values.count == value.arrayValue?.count else { throw SettingsError("\(source): \"\(key)\" must be an array of strings") }
                fileLists[key] = values
            default:
                try run { try option.fromFile?(&s, value, source) }
            }
        }

        // 3. Environment and flags over the file, in table order.
        for option in options {
            switch option.kind {
            case .configFile, .fileOnly:
                continue
            case .one(let apply):
                if let value = pick(option) {
                    try run { try apply(&s, value) }
                } else if let key = option.configKey, file[key] == nil, let first = option.fallbackEnvs.lazy.compactMap(environment).first,
                          !first.isEmpty {
                    try run { try apply(&s, first) }
                }
            case .list(let apply):
                // Repeatable flags, else the environment (comma-separated), else the config file.
                if let f = option.flag.flatMap({ flags[$0] }) {
                    try run { try apply(&s, f) }
                } else if let env = option.env, let e = environment(env), !e.isEmpty {
                    try run { try apply(&s, commaSeparated(e)) }
                } else if let key = option.configKey, let values = fileLists[key] {
                    try run { try apply(&s, values) }
                }
            case .added(let apply):
                // The environment's entries (comma-separated), then the flags', all together.
                var values: [String] = []
                if let env = option.env, let e = environment(env) { values += commaSeparated(e) }
                if let flag = option.flag { values += flags[flag] ?? [] }
                try run { try apply(&s, values) }
            }
        }

        // 4. What depends on several options.
        s.boundary = try WebBoundary(bindHost: s.host, allowOrigins: s.allowOrigins, allowHosts: s.allowHosts)
        s.allowOrigins = s.allowOrigins.compactMap(WebBoundary.normalizeOrigin)
        s.allowHosts = s.allowHosts.compactMap(WebBoundary.normalizeHost)
        var project = s.projects[s.projectId] ?? ProjectConfig()
        for entry in s.testPhones {
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

    /// Runs a row's parser: its `SettingsError` as it is, anything else as a `SettingsError`.
    private static func run(_ body: () throws -> Void) throws(SettingsError) {
        do { try body() } catch let e as SettingsError { throw e } catch { throw SettingsError("\(error)") }
    }

    static let optionsByFlag: [String: ServerOption] = Dictionary(
        options.compactMap { o in o.flag.map { ($0, o) } }, uniquingKeysWith: { a, _ in a })
    static let optionsByConfigKey: [String: ServerOption] = Dictionary(
        options.compactMap { o in o.configKey.map { ($0, o) } }, uniquingKeysWith: { a, _ in a })
    static let configOption = options.first { if case .configFile = $0.kind { return true } else { return false } }!
}

/// A wrong `phone-auth-emulator exec` command line (no `--`, no command): printed with the usage, exit status 64.
public struct ExecUsageError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ d: String) { description = d }
}

/// `phone-auth-emulator exec [options] -- COMMAND [ARGS…]`: the server starts, COMMAND runs against it, and the
/// command's status is exec's (main.swift's `Exec` runs it). Every option means what it means for the server, except
/// that the port is a free one unless `--port` is given.
public enum ExecCommandLine: Sendable, Equatable {
    case help
    /// The server's arguments (`--port 0` first, so a `--port` among the options wins over it) and the command.
    case run(serverArguments: [String], command: [String])

    /// exec's own statuses; any other is the command's (128 + N when signal N ended it, as a shell reports it).
    public enum Status {
        /// No `--`, or nothing after it (sysexits' EX_USAGE).
        public static let usage: Int32 = 64
        /// The settings are wrong: what the server itself refuses with exit code 2 (EX_CONFIG; 2 is a test runner's
        /// status too, pytest's for an interrupted run).
        public static let badSettings: Int32 = 78
        /// The settings are fine but the server could not start or did not answer: the port is in use, the data
        /// directory is locked, the signing key is unusable (EX_UNAVAILABLE).
        public static let serverUnavailable: Int32 = 69
        /// The command ran and exited 0, but stopping the server failed (`--export-on-exit` could not write)
        /// (EX_SOFTWARE). When the command failed, its own status wins.
        public static let stopFailed: Int32 = 70
        /// The command was not found (in PATH, for a name without a slash), as a shell reports it.
        public static let notFound: Int32 = 127
        /// The command was found but could not be run (not executable), as a shell reports it.
        public static let notExecutable: Int32 = 126
    }

    /// Splits the arguments after the word `exec` at the first `--`. `--help`/`-h` before it asks for the usage.
    public static func parse(_ arguments: [String]) throws(ExecUsageError) -> ExecCommandLine {
        let separator = arguments.firstIndex(of: "--")
        let options = Array(arguments[..<(separator ?? arguments.endIndex)])
        if options.contains("--help") || options.contains("-h") { return .help }
        guard let separator else {
            throw ExecUsageError("exec needs -- between its options and the command: phone-auth-emulator exec [options] -- COMMAND [ARGS...]")
        }
        let command = Array(arguments[(separator + 1)...])
        guard let first = command.first, !first.isEmpty else { throw ExecUsageError("exec needs a command after --") }
        return .run(serverArguments: ["--port", "0"] + options, command: command)
    }

    /// `phone-auth-emulator exec --help`.
    public static let usage: String = [
        "Usage: phone-auth-emulator exec [options] -- COMMAND [ARGS...]",
        "",
        "Starts the emulator on a free port (or --port N), waits until it answers, runs COMMAND with",
        "  FIREBASE_AUTH_EMULATOR_HOST=HOST:PORT, PHONE_AUTH_EMULATOR_URL=http://HOST:PORT,",
        "  GCLOUD_PROJECT and PHONE_AUTH_EMULATOR_PROJECT set to the default project,",
        "forwards SIGINT and SIGTERM to it, stops the emulator (--export-on-exit applies) and exits with COMMAND's status",
        "(128 + N when signal N ended it). COMMAND is looked up in PATH like a shell does.",
        "",
        "Options: the server's (phone-auth-emulator --help), with the same meaning; the port is a free one unless --port",
        "is given (the config file's and PHONE_AUTH_EMULATOR_PORT's port do not apply).",
        "",
        "Exit status: COMMAND's, else",
        "  \(Status.usage)   no -- or no command",
        "  \(Status.badSettings)   a bad option, environment variable or config file (the server's exit code 2)",
        "  \(Status.serverUnavailable)   the emulator could not start (port in use, data directory locked, ...)",
        "  \(Status.stopFailed)   COMMAND succeeded but stopping the emulator failed (--export-on-exit)",
        "  \(Status.notFound)  COMMAND not found; \(Status.notExecutable): not executable",
        "",
        "Example:",
        "  phone-auth-emulator exec --test-phone +15555550100=654321 -- npm test",
    ].joined(separator: "\n")
}
