import CSystem
import EmulatorSupport
import HTTPServer
import JWT
import PhoneAuthAPI
import PhoneAuthCore
import PhoneAuthStorage
#if canImport(Glibc)
import Glibc
#endif

// SIGINT/SIGTERM are blocked before any thread starts, then awaited with sigwait on this thread.
_ = csys_block_termination_signals()
csys_ignore_sigpipe()
csys_stdout_line_buffered()

/// Prints the problem and leaves at once: `_exit`, because a background key generation may be inside OpenSSL, whose
/// atexit cleanup must not run under it.
func fail(_ message: String, code: Int32 = 2) -> Never {
    logSinkForFailures?.flush()
    StandardErrorSink().write("phone-auth-emulator: \(message)")
    _exit(code)
}
nonisolated(unsafe) var logSinkForFailures: AsyncStandardErrorSink? = nil

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

let logSink = AsyncStandardErrorSink()
logSinkForFailures = logSink
let logger = Logger(label: "phone-auth-emulator", level: settings.logLevel, format: settings.logFormat, sink: logSink)
// Idle keep-alive connections must not be what runs the server out of descriptors: use all the hard limit allows.
let descriptors = DescriptorLimit.raiseSoftToHard()
logger.debug("descriptor limit", [("before", String(descriptors.before)), ("now", String(descriptors.after))])
let clock = EmulatorClock()

// Durable state, if asked for: opened (and locked) before anything else touches it.
var dataDir: DataDirectory? = nil
if let path = settings.dataDir {
    do { dataDir = try DataDirectory(path: path, durability: settings.durabilityFull ? .full : .normal) } catch { fail(error.description) }
}

// Signing keys: --signing-key, else the data directory's, else a new one (stored in the data directory).
var signingKeys: [SigningKey] = []
if settings.tokenSigning == .rs256 || settings.signingKeyPath != nil {
    do {
        if let path = settings.signingKeyPath {
            if !Files.exists(path) {
                // Create it, readable by this user only, so later runs (and other tools) share one stable key.
                let key = try RSAKey.generate(bits: 2048)
                do { try Files.createExclusively(path, Array(try key.privateKeyPEM().utf8), mode: 0o600) } catch {
                    fail("cannot create signing key \(path): \(error)")
                }
                logger.info("created a new signing key", [("path", path)])
            }
            let pem: [UInt8]
            do { pem = try Files.read(path) } catch { fail("cannot read signing key \(path): \(error)") }
            do { signingKeys = [try SigningKey(key: try RSAKey.privateKey(pem: pem), createdAt: clock.nowSeconds())] } catch {
                fail("signing key \(path) is not a usable RSA private key (PEM, 2048 bits or more): \(error)")
            }
        }
        if let dataDir {
            // The --signing-key key is the newest; only the newest TokenService.maxPublishedKeys stay on disk, so keys
            // retired before (or by) this start are pruned and never published again.
            let keep = TokenService.maxPublishedKeys
            if let current = signingKeys.first {
                try dataDir.saveSigningKey(kid: current.kid, pem: try current.key.privateKeyPEM(), created: Timestamp.systemMillis(), keepNewest: keep)
            } else {
                try dataDir.pruneSigningKeys(keepNewest: keep)
            }
            for (_, pem) in try dataDir.signingKeys().prefix(keep) {
                let k = try SigningKey(key: try RSAKey.privateKey(pem: Array(pem.utf8)), createdAt: clock.nowSeconds())
                if !signingKeys.contains(where: { $0.kid == k.kid }) { signingKeys.append(k) }
            }
        }
    } catch {
        fail("cannot prepare the signing keys: \(error)", code: 1)
    }
}

let cpus = max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
let emulator = Emulator(defaultProjectId: settings.projectId, projectConfigs: settings.projects, clock: clock, random: SystemRandom(),
                        logger: logger, journal: dataDir, maxProjects: settings.maxProjects,
                        maxUsersPerProject: settings.maxUsers)
if let dataDir {
    do {
        let snapshot = try dataDir.loadSnapshot()
        emulator.restore(snapshot.stores, refreshTokens: snapshot.refreshTokens)
        let users = snapshot.stores.reduce(0) { $0 + $1.users.count }
        logger.info("restored state", [("dataDir", dataDir.path), ("users", String(users)), ("refreshTokens", String(snapshot.refreshTokens.count))])
    } catch {
        fail("cannot read the data directory \(dataDir.path): \(error)")
    }
}
let tokens = TokenService(mode: settings.tokenSigning, keys: signingKeys)
// Thread layout: event loops and signing threads (tunable for benchmarking; defaults measured in bench/).
let loopCount = Files.environment("PHONE_AUTH_EMULATOR_EVENT_LOOPS").flatMap { Int($0) }.map { max(1, min($0, 64)) } ?? min(cpus, 4)
let signerCount = Files.environment("PHONE_AUTH_EMULATOR_SIGNING_THREADS").flatMap { Int($0) }.map { max(1, min($0, 64)) } ?? cpus
// The worker pool signs tokens (rs256) and runs bulk admin work (batch deletes, wipes, imports) in every mode.
let pool = WorkerPool(threads: settings.tokenSigning == .rs256 ? signerCount : min(2, signerCount))
let durableKeys: DataDirectory? = dataDir
var saveKey: (@Sendable (SigningKey) throws -> Void)? = nil
if let dir = durableKeys {
    saveKey = { @Sendable (key: SigningKey) throws in
        try dir.saveSigningKey(kid: key.kid, pem: try key.key.privateKeyPEM(), created: Timestamp.systemMillis(),
                               keepNewest: TokenService.maxPublishedKeys)
    }
}
// --export-root: must be an existing directory (the default, the working directory, always is).
let exportRoot: String? = settings.exportRoot
if let root = exportRoot {
    var st = stat()
    guard stat(root, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR else { fail("--export-root \(root) is not an existing directory") }
}
let app = PhoneAuthApp(emulator: emulator, tokens: tokens, signingPool: pool, apiKeyProjects: settings.apiKeys, logger: logger,
                       saveSigningKey: saveKey, adminToken: settings.adminToken, exportRoot: exportRoot, boundary: settings.boundary)
if settings.tokenSigning == .rs256 && signingKeys.isEmpty {
    // No key yet: generate it in the background while the server starts listening.
    let log = logger
    tokens.generateInitialKey(createdAt: clock.nowSeconds(), store: saveKey) { error in
        log.error("cannot generate a signing key: \(error)")
        _exit(1)
    }
}
if let dir = settings.importDir {
    do {
        let (users, problems) = try ExportImport.importDirectory(app, projectId: settings.projectId, from: dir)
        for p in problems { logger.warning("import: \(p)") }
        logger.info("imported \(users) users", [("from", dir)])
    } catch {
        fail("cannot import \(dir): \(error.description)")
    }
}
var policy = ConnectionPolicy()
policy.requestTimeoutSeconds = settings.requestTimeoutSeconds
let server = HTTPServer(
    configuration: HTTPServer.Configuration(host: settings.host, port: settings.port, eventLoops: loopCount, policy: policy,
                                            maxConnectionsPerPeer: settings.maxConnectionsPerPeer),
    responder: app, logger: logger)

let port: Int
do {
    port = try server.start()
} catch {
    fail("\(error)", code: 1)
}

if let limits = server.connectionLimits {
    logger.debug("connection limits", [("total", String(limits.total)), ("perPeer", String(limits.perPeer)),
                                       ("loopbackCapped", limits.perPeerAppliesToLoopback ? "yes" : "no")])
}
let shownHost = settings.host.contains(":") && !settings.host.hasPrefix("[") ? "[\(settings.host)]" : settings.host
printLine("listening on http://\(shownHost):\(port)")
let fictional = settings.projects[settings.projectId]?.testPhoneNumbers.count ?? 0
logger.info("phone-auth-emulator \(PhoneAuthApp.version) ready", [
    ("project", settings.projectId), ("config", settings.configSource), ("tokenSigning", settings.tokenSigning.rawValue),
    ("kid", signingKeys.first?.kid ?? (settings.tokenSigning == .rs256 ? "(generating)" : "-")), ("fictionalNumbers", String(fictional)),
    ("dataDir", settings.dataDir ?? "-"),
])
if settings.host != "127.0.0.1" && settings.host != "localhost" && settings.host != "::1" {
    logger.warning("listening beyond loopback on \(settings.host): anyone who can reach this port can sign in and administer users")
}

let signal = csys_wait_termination_signal()
logger.info("received \(signal == SIGINT ? "SIGINT" : "SIGTERM"), shutting down")
server.shutdown()
pool.shutdown()
var exitCode: Int32 = 0
if let dir = settings.exportOnExit {
    do {
        let (users, tenants) = try ExportImport.export(app, projectId: settings.projectId, to: dir)
        logger.info("exported \(users) users (\(tenants) tenants)", [("to", dir)])
    } catch {
        logger.error("export failed: \(error.description)")
        exitCode = 1
    }
}
// A key still being generated is stored in the data directory: wait for it before closing the database (a stop
// right after start otherwise failed with "the database is closed" and exit code 1).
tokens.waitForKeys()
dataDir?.close()
logger.info("stopped")
logSink.flush()
exit(exitCode)
