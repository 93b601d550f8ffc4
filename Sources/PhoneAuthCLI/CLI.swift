import EmulatorSupport
import JWT

/// What the CLI needs from its process: environment, terminal, output. Injected so tests can run commands in-process.
public struct CLIContext {
    public var environment: (String) -> String?
    public var stdinIsTerminal: Bool
    public var readLine: () -> String?
    public var out: (String) -> Void
    public var err: (String) -> Void
    public init(environment: @escaping (String) -> String?, stdinIsTerminal: Bool, readLine: @escaping () -> String?,
                out: @escaping (String) -> Void, err: @escaping (String) -> Void) {
        self.environment = environment
        self.stdinIsTerminal = stdinIsTerminal
        self.readLine = readLine
        self.out = out
        self.err = err
    }
}

/// One subcommand: its words, usage, an example, its own options, and what it does.
struct Command: Sendable {
    let words: [String]
    let arguments: String
    let summary: String
    let example: String
    var valued: Set<String> = []
    var boolean: Set<String> = []
    let minPositionals: Int
    let maxPositionals: Int
    let run: @Sendable (Session, [String]) throws -> Void
}

/// The `phone-auth` command line.
public enum CLI {
    public static let version = ProductVersion.string
    static let globalValued: Set<String> = ["emulator", "project", "api-key", "tenant", "admin-token"]
    static let globalBoolean: Set<String> = ["json", "help", "version"]

    static let commands: [Command] = [
        Command(words: ["send"], arguments: "PHONE", summary: "start a verification and print its sessionInfo",
                example: "phone-auth send +15551234567", minPositionals: 1, maxPositionals: 1, run: Commands.send),
        Command(words: ["sign-in"], arguments: "PHONE [--code CODE]",
                summary: "send, then verify with --code, the inbox's code, or a code typed at the prompt; prints uid and tokens",
                example: "phone-auth sign-in +16505554567 --code 123456 --json | jq -r .idToken", valued: ["code"],
                minPositionals: 1, maxPositionals: 1, run: Commands.signIn),
        Command(words: ["verify"], arguments: "SESSION CODE", summary: "verify a code for a sessionInfo",
                example: "phone-auth verify \"$SESSION\" 123456", minPositionals: 2, maxPositionals: 2, run: Commands.verify),
        Command(words: ["codes"], arguments: "[--phone PHONE] [--wait SECONDS]",
                summary: "list pending codes, or wait up to SECONDS for the next code of --phone",
                example: "phone-auth codes --phone +15551234567 --wait 10", valued: ["phone", "wait"],
                minPositionals: 0, maxPositionals: 0, run: Commands.codes),
        Command(words: ["events"], arguments: "[--follow] [--type T]… [--since ID]",
                summary: "print the project's events (codes sent, users created, limits hit, …), one line each; --follow waits for more; --json prints the JSON lines",
                example: "phone-auth events --follow --type code.sent --type 'user.*'", valued: ["type", "since"], boolean: ["follow"],
                minPositionals: 0, maxPositionals: 0, run: EventCommands.events),
        Command(words: ["users", "list"], arguments: "[--limit N]", summary: "list the project's users",
                example: "phone-auth users list --json", valued: ["limit"], minPositionals: 0, maxPositionals: 0, run: Commands.usersList),
        Command(words: ["users", "get"], arguments: "UID|PHONE", summary: "show one user (by uid or phone number)",
                example: "phone-auth users get +16505554567", minPositionals: 1, maxPositionals: 1, run: Commands.usersGet),
        Command(words: ["users", "create"],
                arguments: "[--email E --password P] [--phone PHONE] [--provider PROVIDER:RAWID[:EMAIL]]… [--display-name N] [--email-verified] [--uid UID]",
                summary: "create a user (admin API): a phone user, an email + password user, a provider user (google.com, apple.com, …; linked with linkProviderUserInfo), or several at once; prints the stored record",
                example: "phone-auth users create --provider google.com:1234567890:ada@example.com --display-name 'Ada L'",
                valued: ["email", "password", "phone", "display-name", "uid", "provider"], boolean: ["email-verified"],
                minPositionals: 0, maxPositionals: 0, run: Commands.usersCreate),
        Command(words: ["users", "delete"], arguments: "UID", summary: "delete a user",
                example: "phone-auth users delete Xy12…", minPositionals: 1, maxPositionals: 1, run: Commands.usersDelete),
        Command(words: ["idp", "sign-in"], arguments: "PROVIDER [--sub S] [--email E] [--name N] [--picture URL]",
                summary: "sign in as a provider's test user (signInWithIdp with an id_token of these claims, as signInWithCredential sends; a new --sub each time unless given); prints uid and tokens",
                example: "phone-auth idp sign-in google.com --sub 1234567890 --email ada@example.com --json | jq -r .idToken",
                valued: ["sub", "email", "name", "picture"], minPositionals: 1, maxPositionals: 1, run: Commands.idpSignIn),
        Command(words: ["oob-codes"], arguments: "[--email E] [--wait [--timeout SECONDS]]",
                summary: "list out-of-band codes (verify email, password reset, change email), or wait up to --timeout seconds (default 30) for one for --email",
                example: "phone-auth oob-codes --email ada@example.com --wait --timeout 10", valued: ["email", "timeout"], boolean: ["wait"],
                minPositionals: 0, maxPositionals: 0, run: Commands.oobCodes),
        Command(words: ["mfa", "list"], arguments: "UID", summary: "list a user's second factors, SMS and TOTP (admin lookup)",
                example: "phone-auth mfa list Xy12…", minPositionals: 1, maxPositionals: 1, run: Commands.mfaList),
        Command(words: ["mfa", "enroll"], arguments: "--email E --password P (--phone PHONE | --totp) [--display-name N] [--code CODE] [--enrollment ID]",
                summary: "sign in with the password (a user with factors passes --enrollment ID or the first, code from the inbox) and enroll PHONE (code from --code or the inbox) or a TOTP factor (code from --code or the emulator) as a second factor; prints the enrollment",
                example: "phone-auth mfa enroll --email ada@example.com --password secret123 --phone +16505554567",
                valued: ["email", "password", "phone", "display-name", "code", "enrollment"], boolean: ["totp"], minPositionals: 0, maxPositionals: 0,
                run: Commands.mfaEnroll),
        Command(words: ["mfa", "totp-code"], arguments: "UID [ENROLLMENT_ID]",
                summary: "the code a user's TOTP factor accepts now on the emulator clock (the first TOTP factor without an id)",
                example: "phone-auth mfa totp-code Xy12…", minPositionals: 1, maxPositionals: 2, run: Commands.mfaTotpCode),
        Command(words: ["mfa", "sign-in"], arguments: "--email E --password P [--enrollment ID] [--code CODE]",
                summary: "sign in with the password, then the second factor (code from --code, the inbox, or the emulator for TOTP); prints uid and tokens",
                example: "phone-auth mfa sign-in --email ada@example.com --password secret123 --json | jq -r .idToken",
                valued: ["email", "password", "enrollment", "code"], minPositionals: 0, maxPositionals: 0, run: Commands.mfaSignIn),
        Command(words: ["mfa", "unenroll"], arguments: "UID ENROLLMENT_ID", summary: "remove one second factor of a user (admin update)",
                example: "phone-auth mfa unenroll Xy12… 4Ab9…", minPositionals: 2, maxPositionals: 2, run: Commands.mfaUnenroll),
        Command(words: ["claims", "set"], arguments: "UID JSON", summary: "set a user's custom claims ('{}' clears them)",
                example: "phone-auth claims set Xy12… '{\"role\":\"admin\"}'", minPositionals: 2, maxPositionals: 2, run: Commands.claimsSet),
        Command(words: ["token", "decode"], arguments: "TOKEN", summary: "show a JWT's header and claims with readable times",
                example: "phone-auth token decode \"$ID_TOKEN\"", minPositionals: 1, maxPositionals: 1, run: Commands.tokenDecode),
        Command(words: ["token", "verify"], arguments: "TOKEN",
                summary: "check the signature (the emulator's JWKS), iss, aud and exp; exit 1 if any fails",
                example: "phone-auth token verify \"$ID_TOKEN\"", minPositionals: 1, maxPositionals: 1, run: Commands.tokenVerify),
        Command(words: ["token", "mint"], arguments: "UID [--claims JSON] [--phone P] [--email E [--email-verified]] [--display-name N] [--provider P] [--second-factor phone|totp] [--auth-time S] [--expires-in S]",
                summary: "sign in UID in one call (the user created or updated) and print its ID and refresh tokens: a test principal",
                example: "phone-auth token mint alice --claims '{\"role\":\"admin\"}' --json | jq -r .idToken",
                valued: ["claims", "phone", "email", "display-name", "provider", "second-factor", "auth-time", "expires-in"], boolean: ["email-verified"],
                minPositionals: 1, maxPositionals: 1, run: Commands.tokenMint),
        Command(words: ["credentials", "mint"], arguments: "recaptcha|recaptcha-enterprise|play-integrity|app-check|pnv [--score X --action A --toll-fraud-score X] [--app-id ID] [--phone P] [--ttl S]",
                summary: "mint an attestation: a reCAPTCHA or Play Integrity token (passes appVerification ENFORCE once), a reCAPTCHA Enterprise token with the score and action its assessment reports (SMS defense), an App Check token (for X-Firebase-AppCheck), a Phone Number Verification token for a test number",
                example: "phone-auth credentials mint recaptcha-enterprise --score 0.2 --action sendVerificationCode --json | jq -r .token",
                valued: ["app-id", "phone", "ttl", "score", "action", "toll-fraud-score"], minPositionals: 1, maxPositionals: 1, run: Commands.credentialsMint),
        Command(words: ["app-check", "status"], arguments: "",
                summary: "the App Check enforcement in force and the client calls counted (verified, missing, invalid, refused)",
                example: "phone-auth app-check status", minPositionals: 0, maxPositionals: 0, run: Commands.appCheckStatus),
        Command(words: ["config", "get"], arguments: "", summary: "show the project's emulator config",
                example: "phone-auth config get --json", minPositionals: 0, maxPositionals: 0, run: Commands.configGet),
        Command(words: ["config", "set"], arguments: "JSON", summary: "merge JSON into the project's emulator config",
                example: "phone-auth config set '{\"phoneAuth\":{\"maxCodeAttempts\":3}}'", minPositionals: 1, maxPositionals: 1, run: Commands.configSet),
        Command(words: ["test-numbers", "list"], arguments: "", summary: "list fictional numbers and their codes",
                example: "phone-auth test-numbers list", minPositionals: 0, maxPositionals: 0, run: Commands.testNumbersList),
        Command(words: ["test-numbers", "add"], arguments: "PHONE CODE", summary: "add (or change) a fictional number",
                example: "phone-auth test-numbers add +15555550100 654321", minPositionals: 2, maxPositionals: 2, run: Commands.testNumbersAdd),
        Command(words: ["test-numbers", "remove"], arguments: "PHONE", summary: "remove a fictional number",
                example: "phone-auth test-numbers remove +15555550100", minPositionals: 1, maxPositionals: 1, run: Commands.testNumbersRemove),
        Command(words: ["reset"], arguments: "[--all]",
                summary: "put the project (with its tenants) back to its starting state: the config file's config and --import's users, nothing else; --all: every project, and the clock",
                example: "phone-auth reset --project demo-phone", boolean: ["all"], minPositionals: 0, maxPositionals: 0, run: Commands.reset),
        Command(words: ["snapshot", "save"], arguments: "NAME", summary: "save the project's state (with its tenants) as NAME (kept in memory)",
                example: "phone-auth snapshot save seeded", minPositionals: 1, maxPositionals: 1, run: Commands.snapshotSave),
        Command(words: ["snapshot", "restore"], arguments: "NAME", summary: "put the snapshot NAME back",
                example: "phone-auth snapshot restore seeded", minPositionals: 1, maxPositionals: 1, run: Commands.snapshotRestore),
        Command(words: ["snapshot", "list"], arguments: "", summary: "list the project's snapshots",
                example: "phone-auth snapshot list --json", minPositionals: 0, maxPositionals: 0, run: Commands.snapshotList),
        Command(words: ["snapshot", "delete"], arguments: "NAME", summary: "delete the snapshot NAME",
                example: "phone-auth snapshot delete seeded", minPositionals: 1, maxPositionals: 1, run: Commands.snapshotDelete),
        Command(words: ["health"], arguments: "", summary: "exit 0 when the emulator answers and is ready",
                example: "phone-auth health --emulator http://127.0.0.1:9099", minPositionals: 0, maxPositionals: 0, run: Commands.health),
    ]

    static let globalHelp = """
        Global options (before or after the command):
          --emulator URL   the emulator (default: $FIREBASE_AUTH_EMULATOR_HOST, else http://127.0.0.1:9099)
          --project ID     project (default: the emulator's default project)
          --tenant ID      act inside a tenant
          --api-key KEY    API key for client calls (default fake-api-key)
          --admin-token T  the emulator's --admin-token, sent as "Authorization: Bearer T" on admin and /emulator/
                           calls (default $PHONE_AUTH_EMULATOR_ADMIN_TOKEN; without it: "Bearer owner")
          --json           machine-readable output
          --help, --version
        Exit codes: 0 success, 1 API or verification error (the Google code is printed), 64 usage error.
        """

    static func usage() -> String {
        var s = "Usage: phone-auth <command> [options]\n\nCommands:\n"
        // Summaries in one column; a command whose arguments are longer than the column has its summary on the next line.
        let lefts = commands.map { $0.words.joined(separator: " ") + ($0.arguments.isEmpty ? "" : " " + $0.arguments) }
        let width = min(40, lefts.map(\.count).max() ?? 0)
        for (c, left) in zip(commands, lefts) {
            if left.count > width {
                s += "  " + left + "\n" + String(repeating: " ", count: width + 4) + c.summary + "\n"
            } else {
                s += "  " + left + String(repeating: " ", count: width - left.count + 2) + c.summary + "\n"
            }
        }
        return s + "\n" + globalHelp + "\n\nExample:\n  phone-auth sign-in +16505554567 --code 123456\n"
    }

    static func usage(_ c: Command) -> String {
        """
            Usage: phone-auth \(c.words.joined(separator: " ")) \(c.arguments)

            \(c.summary).

            \(globalHelp)

            Example:
              \(c.example)

            """
    }

    /// Runs the CLI and returns the exit code.
    public static func run(_ args: [String], context: CLIContext) -> Int32 {
        // Find the command: the longest word prefix among the positionals.
        var words: [String] = []
        var i = 0
        var rest: [String] = []
        while i < args.count {
            let a = args[i]
            if a.hasPrefix("-"), !Arguments.isNumberLike(a) {
                rest.append(a)
                // An option that takes a value (for the commands the words so far can still name) keeps its value
                // out of the command words: `--email list` is not the word `list`.
                let valued = commands.filter { $0.words.starts(with: words) }.reduce(globalValued) { $0.union($1.valued) }
                if !a.contains("="), valued.contains(String(a.dropFirst(2))), i + 1 < args.count {
                    rest.append(args[i + 1])
                    i += 1
                }
            } else if words.count < 2, commands.contains(where: { $0.words.starts(with: words + [a]) }) {
                words.append(a)
            } else {
                rest.append(a)
            }
            i += 1
        }
        let command = commands.first { $0.words == words }
        let parsed: Arguments
        do {
            parsed = try Arguments.parse(rest, valued: globalValued.union(command?.valued ?? []), boolean: globalBoolean.union(command?.boolean ?? []),
                                         shorts: ["h": "help"])
        } catch {
            context.err("phone-auth: \(error.description)\n\n" + (command.map(usage) ?? usage()))
            return 64
        }
        if parsed.has("version") {
            context.out("phone-auth \(version)")
            return 0
        }
        guard let command else {
            if parsed.has("help") {
                context.out(usage())
                return 0
            }
            let what = words.isEmpty ? (parsed.positionals.first.map { "unknown command '\($0)'" } ?? "no command given")
                : "'\(words.joined(separator: " "))' needs a subcommand"
            context.err("phone-auth: \(what)\n\n" + usage())
            return 64
        }
        if parsed.has("help") {
            context.out(usage(command))
            return 0
        }
        guard parsed.positionals.count >= command.minPositionals, parsed.positionals.count <= command.maxPositionals else {
            context.err("phone-auth \(command.words.joined(separator: " ")): expected \(command.arguments.isEmpty ? "no arguments" : command.arguments)\n\n" + usage(command))
            return 64
        }
        let session = Session(args: parsed, context: context)
        do {
            try command.run(session, parsed.positionals)
            return session.failed ? 1 : 0
        } catch let e as UsageError {
            context.err("phone-auth \(command.words.joined(separator: " ")): \(e.description)\n\n" + usage(command))
            return 64
        } catch let e as APIError {
            if parsed.has("json") {
                context.out(Terminal.json(JSON.object(["error": ["code": .string(e.code), "message": .string(e.message), "status": .int(e.status)]]).prettyString))
            }
            context.err("error: \(Terminal.safe(e.code))" + (e.message != e.code ? " (\(Terminal.safe(e.message)))" : "") + " [HTTP \(e.status)]")
            return 1
        } catch {
            context.err("error: \(Terminal.safe(String(describing: error)))")
            return 1
        }
    }
}

/// Per-run state shared by commands: the client, output mode and helpers.
final class Session {
    let args: Arguments
    let context: CLIContext
    let json: Bool
    var failed = false
    private var resolvedProject: String?

    init(args: Arguments, context: CLIContext) {
        self.args = args
        self.context = context
        self.json = args.has("json")
        self.resolvedProject = args.value("project")
    }

    /// `--admin-token`, else `PHONE_AUTH_EMULATOR_ADMIN_TOKEN`.
    var adminToken: String? {
        if let t = args.value("admin-token"), !t.isEmpty { return t }
        if let t = context.environment("PHONE_AUTH_EMULATOR_ADMIN_TOKEN"), !t.isEmpty { return t }
        return nil
    }

    var baseURL: String { args.value("emulator") ?? EmulatorClient.defaultURL(environment: context.environment) }

    /// The project: `--project`, else the emulator's default (asked once).
    func client() throws -> EmulatorClient {
        var c = EmulatorClient(baseURL: baseURL, project: resolvedProject ?? "demo-phone", apiKey: args.value("api-key") ?? "fake-api-key",
                               tenant: args.value("tenant"), adminToken: adminToken)
        if resolvedProject == nil {
            let status = try c.request("GET", "/")
            resolvedProject = status["phoneAuthEmulator"]?["projectId"]?.stringValue ?? "demo-phone"
            c.project = resolvedProject!
        }
        return c
    }

    func print(_ s: String) { context.out(s) }

    /// Prints `json` in --json mode, else aligned `key: value` rows. Text from the server is made terminal-safe.
    func emit(_ json: JSON, rows: [(String, String)]) {
        if self.json { printJSON(json); return }
        let rows = rows.map { (Terminal.safe($0.0), Terminal.safe($0.1)) }
        let width = rows.map(\.0.count).max() ?? 0
        for (k, v) in rows { print(k + ":" + String(repeating: " ", count: width - k.count + 1) + v) }
    }

    /// Pretty JSON with every unsafe character inside strings written as a `\uXXXX` escape (the same JSON).
    func printJSON(_ json: JSON) {
        let text = json.prettyString
        print(Terminal.json(text.hasSuffix("\n") ? String(text.dropLast()) : text))
    }

    /// A table with a header row, columns padded; cells are made terminal-safe.
    func table(_ header: [String], _ rows: [[String]]) {
        let rows = rows.map { $0.map(Terminal.safe) }
        var widths = header.map(\.count)
        for r in rows { for (i, c) in r.enumerated() where i < widths.count { widths[i] = max(widths[i], c.count) } }
        func line(_ cells: [String]) -> String {
            var s = ""
            for (i, c) in cells.enumerated() { s += i == cells.count - 1 ? c : c + String(repeating: " ", count: widths[i] - c.count + 2) }
            return s
        }
        print(line(header))
        for r in rows { print(line(r)) }
    }
}

/// Everything the CLI prints that came from the server or a token goes through here: control characters (C0, DEL,
/// C1, U+2028/2029) and bidi controls are shown as escapes (`\u{1B}`, `\n`, `\u{202E}`), so a display name or a JWT
/// claim can neither move the cursor, retitle the terminal, forge a line, nor reorder what is shown.
enum Terminal {
    static func safe(_ s: String) -> String { LogEscaping.escape(s) }
    /// Serialized JSON: unsafe characters inside strings as `\uXXXX` (C0 is already escaped by the writer).
    static func json(_ s: String) -> String { LogEscaping.escapeJSONText(s) }
}
