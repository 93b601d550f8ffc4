import CSystem
import EmulatorSupport
import HTTPServer
import JWT
import PhoneAuthAPI
import PhoneAuthCore
#if canImport(Glibc)
import Glibc
#endif

// SIGINT/SIGTERM are blocked before any thread starts, then awaited with sigwait on this thread.
_ = csys_block_termination_signals()
csys_ignore_sigpipe()
csys_stdout_line_buffered()

func fail(_ message: String, code: Int32 = 2) -> Never {
    StandardErrorSink().write("phone-auth-emulator: \(message)")
    exit(code)
}

func printLine(_ s: String) {
    var bytes = Array((s + "\n").utf8)
    _ = bytes.withUnsafeMutableBytes { write(1, $0.baseAddress, $0.count) }
}

let outcome: ServerSettings.Outcome
do {
    outcome = try ServerSettings.resolve(
        arguments: Array(CommandLine.arguments.dropFirst()), environment: { Files.environment($0) },
        readFile: { try Files.read($0) }, fileExists: { Files.exists($0) })
} catch {
    fail(error.description)
}

let settings: ServerSettings
switch outcome {
case .help:
    printLine(ServerSettings.usage)
    exit(0)
case .version:
    printLine("phone-auth-emulator \(PhoneAuthApp.version)")
    exit(0)
case .run(let s):
    settings = s
}

let logger = Logger(label: "phone-auth-emulator", level: settings.logLevel, format: settings.logFormat)
let clock = EmulatorClock()

// The signing key: loaded from --signing-key, else generated.
var signingKey: SigningKey? = nil
if settings.tokenSigning == .rs256 || settings.signingKeyPath != nil {
    do {
        let key: RSAKey
        if let path = settings.signingKeyPath {
            let pem: [UInt8]
            do { pem = try Files.read(path) } catch { fail("cannot read signing key \(path): \(error)") }
            do { key = try RSAKey.privateKey(pem: pem) } catch { fail("signing key \(path) is not a usable RSA private key (PEM, 2048 bits or more): \(error)") }
        } else {
            key = try RSAKey.generate(bits: 2048)
        }
        signingKey = try SigningKey(key: key, createdAt: clock.nowSeconds())
    } catch {
        fail("cannot prepare the signing key: \(error)", code: 1)
    }
}

let cpus = max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
let emulator = Emulator(defaultProjectId: settings.projectId, projectConfigs: settings.projects, clock: clock, random: SystemRandom(), logger: logger)
let tokens = TokenService(mode: settings.tokenSigning, initialKey: signingKey)
let pool = settings.tokenSigning == .rs256 ? WorkerPool(threads: cpus) : nil
let app = PhoneAuthApp(emulator: emulator, tokens: tokens, signingPool: pool, apiKeyProjects: settings.apiKeys, logger: logger)
var policy = ConnectionPolicy()
policy.requestTimeoutSeconds = settings.requestTimeoutSeconds
let server = HTTPServer(
    configuration: HTTPServer.Configuration(host: settings.host, port: settings.port, eventLoops: min(cpus, 4), policy: policy),
    responder: app, logger: logger)

let port: Int
do {
    port = try server.start()
} catch {
    fail("\(error)", code: 1)
}

let shownHost = settings.host.contains(":") && !settings.host.hasPrefix("[") ? "[\(settings.host)]" : settings.host
printLine("listening on http://\(shownHost):\(port)")
let fictional = settings.projects[settings.projectId]?.testPhoneNumbers.count ?? 0
logger.info("phone-auth-emulator \(PhoneAuthApp.version) ready", [
    ("project", settings.projectId), ("config", settings.configSource), ("tokenSigning", settings.tokenSigning.rawValue),
    ("kid", signingKey?.kid ?? "-"), ("fictionalNumbers", String(fictional)),
])
if settings.host != "127.0.0.1" && settings.host != "localhost" && settings.host != "::1" {
    logger.warning("listening beyond loopback on \(settings.host): anyone who can reach this port can sign in and administer users")
}

let signal = csys_wait_termination_signal()
logger.info("received \(signal == SIGINT ? "SIGINT" : "SIGTERM"), shutting down")
server.shutdown()
pool?.shutdown()
logger.info("stopped")
exit(0)
