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

/// A start that could not complete: the message the executable prints, and its exit code (2: a setting, a file or
/// the data directory is unusable; 1: the keys could not be prepared or the address could not be bound).
public struct StartError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public let exitCode: Int32
    public init(_ description: String, exitCode: Int32 = 2) {
        self.description = description
        self.exitCode = exitCode
    }
}

/// The whole server wired from its settings: logger, data directory (opened and locked first), signing keys,
/// import, emulator, app, thread pools and the HTTP listener. `main.swift` only parses the settings, starts, waits for
/// a signal and stops; tests start it on port 0 the same way.
public enum PhoneAuthServer {
    /// Starts everything and returns once the server is listening. On failure, whatever was started is stopped (the
    /// data directory is closed, so its lock is released) before the error is thrown.
    ///
    /// - Parameters:
    ///   - logSink: where log lines go; nil: a writer thread on stderr (flushed by `stop()`).
    ///   - clock: the emulator clock (tests may pass a fixed one).
    public static func start(settings: ServerSettings, logSink: (any LogSink)? = nil,
                             clock: EmulatorClock = EmulatorClock()) throws(StartError) -> RunningServer {
        let asyncSink = logSink == nil ? AsyncStandardErrorSink() : nil
        let logger = Logger(label: "phone-auth-emulator", level: settings.logLevel, format: settings.logFormat,
                            sink: logSink ?? asyncSink!)
        var cleanup = Cleanup(logSink: asyncSink)
        do {
            return try start(settings, logger: logger, clock: clock, cleanup: &cleanup)
        } catch {
            cleanup.run()
            throw error
        }
    }

    /// What a failed start undoes, in order.
    private struct Cleanup {
        var logSink: AsyncStandardErrorSink?
        var pool: WorkerPool?
        var tokens: TokenService?
        var dataDir: DataDirectory?
        func run() {
            pool?.shutdown()
            // A key still being generated is stored in the data directory: let it finish before closing the database.
            tokens?.waitForKeys()
            dataDir?.close()
            logSink?.flush()
        }
    }

    private static func start(_ settings: ServerSettings, logger: Logger, clock: EmulatorClock,
                              cleanup: inout Cleanup) throws(StartError) -> RunningServer {
        // Idle keep-alive connections must not be what runs the server out of descriptors: use all the hard limit allows.
        let descriptors = DescriptorLimit.raiseSoftToHard()
        logger.debug("descriptor limit", [("before", String(descriptors.before)), ("now", String(descriptors.after))])

        // Durable state, if asked for: opened (and locked) before anything else touches it.
        var dataDir: DataDirectory? = nil
        if let path = settings.dataDir {
            do { dataDir = try DataDirectory(path: path, durability: settings.durabilityFull ? .full : .normal) } catch {
                throw StartError(error.description)
            }
            cleanup.dataDir = dataDir
        }

        let signingKeys = try loadSigningKeys(settings, dataDir: dataDir, clock: clock, logger: logger)

        let cpus = max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
        // With `--durability normal` a commit is a WAL append (no fsync): an event loop runs it after the requests that
        // wrote it, instead of waking the committer's thread. `full` fsyncs each commit: never on a loop.
        let onLoop: @Sendable (@escaping @Sendable () -> Void) -> Bool = { job in CurrentEventLoop.runLater(job) }
        let commitHere = settings.durabilityFull ? nil : onLoop
        let emulator = Emulator(defaultProjectId: settings.projectId, projectConfigs: settings.projects, clock: clock,
                                random: SystemRandom(), logger: logger, journal: dataDir, maxProjects: settings.maxProjects,
                                maxUsersPerProject: settings.maxUsers, maxSessions: settings.maxSessions,
                                maxUsersTotal: settings.maxUsersTotal, exposed: settings.isExposed,
                                commitHere: commitHere)
        if let dataDir {
            do {
                // Wall-clock times for the log only (how long a restart spends reading and how long restoring).
                let started = Timestamp.systemMillis()
                let snapshot = try dataDir.loadSnapshot()
                let loaded = Timestamp.systemMillis()
                // `restore` takes each store's decoded chunks as its user table (`AuthStore.restoreUsers`); the snapshot
                // is dropped at the end of this block, before anything writes a chunk (which would copy it).
                emulator.restore(snapshot.stores, refreshTokens: snapshot.refreshTokens)
                let users = snapshot.stores.reduce(0) { $0 + $1.userCount }
                logger.info("restored state", [("dataDir", dataDir.path), ("users", String(users)),
                                               ("refreshTokens", String(snapshot.refreshTokens.count)),
                                               ("readMillis", String(loaded - started)),
                                               ("restoreMillis", String(Timestamp.systemMillis() - loaded))])
            } catch {
                throw StartError("cannot read the data directory \(dataDir.path): \(error)")
            }
        }
        let tokens = TokenService(mode: settings.tokenSigning, keys: signingKeys)
        cleanup.tokens = tokens
        // Thread layout: event loops and signing threads (tunable for benchmarking; defaults measured in bench/).
        // One loop per core: loops sign the tokens of their own requests (a loop job), so fewer loops than cores
        // would leave cores to the pool, which only takes what a loop's job queue cannot hold.
        let loopCount = settings.eventLoops ?? min(cpus, 64)
        let signerCount = settings.signingThreads ?? cpus
        // The worker pool signs tokens (rs256) and runs bulk admin work (batch deletes, wipes, imports) in every mode.
        let pool = WorkerPool(threads: settings.tokenSigning == .rs256 ? signerCount : min(2, signerCount))
        cleanup.pool = pool
        var saveKey: (@Sendable (SigningKey) throws -> Void)? = nil
        if let dir = dataDir {
            saveKey = { @Sendable (key: SigningKey) throws in
                try dir.saveSigningKey(kid: key.kid, pem: try key.key.privateKeyPEM(), created: Timestamp.systemMillis(),
                                       keepNewest: TokenService.maxPublishedKeys)
            }
        }
        // --export-root: must be an existing directory (the default, the working directory, always is).
        if let root = settings.exportRoot {
            var st = stat()
            guard stat(root, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR else {
                throw StartError("--export-root \(root) is not an existing directory")
            }
        }
        let attestation = try loadAttestationKeys(dataDir, clock: clock)
        let app = PhoneAuthApp(emulator: emulator, tokens: tokens, signingPool: pool, apiKeyProjects: settings.apiKeys,
                               logger: logger, saveSigningKey: saveKey, adminToken: settings.adminToken,
                               exportRoot: settings.exportRoot, boundary: settings.boundary,
                               blocking: BlockingCalls(timeoutMillis: settings.blockingTimeoutMillis), attestation: attestation)
        if let dir = settings.importDir {
            try importAtStart(dir, settings, app: app, emulator: emulator, tokens: tokens, clock: clock, dataDir: dataDir)
        }
        // A large import or restore leaves its parse garbage in malloc's free lists (a third of the RSS after a
        // million users): give it back before serving.
        if settings.importDir != nil || dataDir != nil { _ = malloc_trim(0) }
        if settings.tokenSigning == .rs256 && signingKeys.isEmpty {
            // No key yet: generate it in the background while the server starts listening (after an import, which
            // signs nothing: on two cores the key's 0.1–0.3 s of a core would come out of the import's). Without a key
            // nothing can be signed: the process exits (code 1), as it would have at start.
            let log = logger
            tokens.generateInitialKey(createdAt: clock.nowSeconds(), store: saveKey) { error in
                log.error("cannot generate a signing key: \(error)")
                _exit(1)
            }
        }
        var policy = ConnectionPolicy()
        policy.requestTimeoutSeconds = settings.requestTimeoutSeconds
        policy.renderError = PhoneAuthApp.renderHTTPError
        let http = HTTPServer(
            configuration: HTTPServer.Configuration(host: settings.host, port: settings.port, eventLoops: loopCount, policy: policy,
                                                    maxConnectionsPerPeer: settings.maxConnectionsPerPeer, batchSends: settings.batchSends),
            responder: app, logger: logger)
        let port: Int
        do { port = try http.start() } catch { throw StartError("\(error)", exitCode: 1) }

        if let limits = http.connectionLimits {
            logger.debug("connection limits", [("total", String(limits.total)), ("perPeer", String(limits.perPeer)),
                                               ("loopbackCapped", limits.perPeerAppliesToLoopback ? "yes" : "no")])
        }
        let fictional = settings.projects[settings.projectId]?.testPhoneNumbers.count ?? 0
        logger.info("phone-auth-emulator \(ProductVersion.string) ready", [
            ("project", settings.projectId), ("config", settings.configSource), ("tokenSigning", settings.tokenSigning.rawValue),
            ("kid", signingKeys.first?.kid ?? (settings.tokenSigning == .rs256 ? "(generating)" : "-")),
            ("fictionalNumbers", String(fictional)), ("dataDir", settings.dataDir ?? "-"),
        ])
        if settings.host != "127.0.0.1" && settings.host != "localhost" && settings.host != "::1" {
            logger.warning("listening beyond loopback on \(settings.host): anyone who can reach this port can sign in and administer users")
        }
        return RunningServer(settings: settings, port: port, logger: logger, logSink: cleanup.logSink, http: http, pool: pool,
                             app: app, tokens: tokens, dataDir: dataDir)
    }

    /// `--import`, and the state `:reset` returns to (PhoneAuthCore/Snapshots.swift): the config file and flags plus
    /// the import. All or nothing: without a data directory the import goes straight into the emulator (a bad record
    /// fails the start, and nothing outlives the process); with one, whose state from earlier runs is not part of the
    /// starting state, the whole import is first read and checked in a scratch emulator without a journal — a bad
    /// record fails the start with the data directory untouched — then its users are written over the data
    /// directory's (`Emulator.absorbUsers`: checked against them first, one transaction per store) and its state
    /// becomes the baseline.
    private static func importAtStart(_ dir: String, _ settings: ServerSettings, app: PhoneAuthApp, emulator: Emulator,
                                      tokens: TokenService, clock: EmulatorClock, dataDir: DataDirectory?) throws(StartError) {
        let logger = app.logger
        guard dataDir != nil else {
            do {
                let imported = try ExportImport.importDirectory(app, projectId: settings.projectId, from: dir)
                logger.info("imported \(imported.users) users", [("from", dir)])
            } catch {
                throw StartError("cannot import \(dir): \(error.description)")
            }
            do { try emulator.captureBaseline() } catch { throw StartError("cannot record the starting state of \(dir): \(error)") }
            return
        }
        let quiet = Logger(label: "starting-state", level: .critical)
        let scratch = Emulator(defaultProjectId: settings.projectId, projectConfigs: settings.projects, clock: clock, logger: quiet,
                               maxProjects: settings.maxProjects, maxUsersPerProject: settings.maxUsers, maxSessions: settings.maxSessions,
                               maxUsersTotal: settings.maxUsersTotal)
        let imported: ExportImport.Imported
        do {
            imported = try ExportImport.importDirectory(PhoneAuthApp(emulator: scratch, tokens: tokens, signingPool: nil, logger: quiet),
                                                        projectId: settings.projectId, from: dir)
        } catch {
            throw StartError("cannot import \(dir) (the data directory is unchanged): \(error.description)")
        }
        do {
            let users = try emulator.absorbUsers(from: scratch)
            if let patch = imported.configPatch { _ = try emulator.patchConfig(StoreKey(projectId: settings.projectId), .object(patch)) }
            try emulator.adoptBaseline(from: scratch)
            logger.info("imported \(users) users", [("from", dir)])
        } catch {
            throw StartError("cannot import \(dir) (the data directory is unchanged): \(error)")
        }
    }

    /// The App Check and PNV key sets: the data directory's (newest first), each key stored there before it signs;
    /// without a data directory they are made on first use and live as long as the process.
    private static func loadAttestationKeys(_ dataDir: DataDirectory?, clock: EmulatorClock) throws(StartError) -> AttestationKeys {
        guard let dataDir else { return AttestationKeys(clock: clock) }
        do {
            let keep = TokenService.maxPublishedKeys
            let appCheck = try AttestationKeys.loadAppCheck(Array(try dataDir.attestationKeys(kind: AttestationKeys.Kind.appCheck.rawValue).prefix(keep)), clock: clock)
            let pnv = try AttestationKeys.loadPNV(Array(try dataDir.attestationKeys(kind: AttestationKeys.Kind.pnv.rawValue).prefix(keep)))
            return AttestationKeys(appCheck: appCheck, pnv: pnv, clock: clock) { kind, kid, pem in
                try dataDir.saveAttestationKey(kind: kind.rawValue, kid: kid, pem: pem, keepNewest: keep)
            }
        } catch {
            throw StartError("cannot read the App Check / PNV keys of \(dataDir.path): \(error)", exitCode: 1)
        }
    }

    /// Signing keys: `--signing-key`, else the data directory's, else none yet (generated in the background).
    private static func loadSigningKeys(_ settings: ServerSettings, dataDir: DataDirectory?, clock: EmulatorClock,
                                        logger: Logger) throws(StartError) -> [SigningKey] {
        guard settings.tokenSigning == .rs256 || settings.signingKeyPath != nil else { return [] }
        var signingKeys: [SigningKey] = []
        do {
            if let path = settings.signingKeyPath {
                if !Files.exists(path) {
                    // Create it, readable by this user only, so later runs (and other tools) share one stable key.
                    let key = try RSAKey.generate(bits: 2048)
                    do { try Files.createExclusively(path, Array(try key.privateKeyPEM().utf8), mode: 0o600) } catch {
                        throw StartError("cannot create signing key \(path): \(error)")
                    }
                    logger.info("created a new signing key", [("path", path)])
                }
                let pem: [UInt8]
                do { pem = try Files.read(path) } catch { throw StartError("cannot read signing key \(path): \(error)") }
                do { signingKeys = [try SigningKey(key: try RSAKey.privateKey(pem: pem), createdAt: clock.nowSeconds())] } catch {
                    throw StartError("signing key \(path) is not a usable RSA private key (PEM, 2048 bits or more): \(error)")
                }
            }
            if let dataDir {
                // The --signing-key key is the newest; only the newest TokenService.maxPublishedKeys stay on disk, so keys
                // retired before (or by) this start are pruned and never published again.
                let keep = TokenService.maxPublishedKeys
                if let current = signingKeys.first {
                    try dataDir.saveSigningKey(kid: current.kid, pem: try current.key.privateKeyPEM(), created: Timestamp.systemMillis(),
                                               keepNewest: keep)
                } else {
                    try dataDir.pruneSigningKeys(keepNewest: keep)
                }
                for (_, pem) in try dataDir.signingKeys().prefix(keep) {
                    let k = try SigningKey(key: try RSAKey.privateKey(pem: Array(pem.utf8)), createdAt: clock.nowSeconds())
                    if !signingKeys.contains(where: { $0.kid == k.kid }) { signingKeys.append(k) }
                }
            }
        } catch let error as StartError {
            throw error
        } catch {
            throw StartError("cannot prepare the signing keys: \(error)", exitCode: 1)
        }
        return signingKeys
    }
}

/// A server started by `PhoneAuthServer.start`. `stop()` shuts it down gracefully: listener and connections,
/// worker pool, `--export-on-exit`, a key still being generated, the data directory, the log writer.
public final class RunningServer: Sendable {
    public let settings: ServerSettings
    /// The bound port (the one picked when the settings said 0).
    public let port: Int
    public let logger: Logger
    /// The app behind the listener (in-process access for tests and tools).
    public let app: PhoneAuthApp
    private let logSink: AsyncStandardErrorSink?
    private let http: HTTPServer
    private let pool: WorkerPool
    private let tokens: TokenService
    private let dataDir: DataDirectory?
    private let exitCode = Locked<Int32?>(nil)

    init(settings: ServerSettings, port: Int, logger: Logger, logSink: AsyncStandardErrorSink?, http: HTTPServer, pool: WorkerPool,
         app: PhoneAuthApp, tokens: TokenService, dataDir: DataDirectory?) {
        self.settings = settings
        self.port = port
        self.logger = logger
        self.logSink = logSink
        self.http = http
        self.pool = pool
        self.app = app
        self.tokens = tokens
        self.dataDir = dataDir
    }

    /// `http://HOST:PORT/`-style base URL without the trailing slash (IPv6 hosts in brackets).
    public var url: String {
        let host = settings.host.contains(":") && !settings.host.hasPrefix("[") ? "[\(settings.host)]" : settings.host
        return "http://\(host):\(port)"
    }

    /// Stops everything; returns the process exit code (1 when `--export-on-exit` failed, else 0). A second call
    /// returns the first call's code and does nothing.
    @discardableResult
    public func stop() -> Int32 {
        exitCode.withLock { code -> Int32 in
            if let code { return code }
            let result = shutDown()
            code = result
            return result
        }
    }

    private func shutDown() -> Int32 {
        http.shutdown()
        pool.shutdown()
        app.blocking.shutdown()  // waits at most one deadline for calls in flight
        app.webhooks.shutdown()  // queued deliveries are not made
        var result: Int32 = 0
        if let dir = settings.exportOnExit {
            do {
                let (users, tenants) = try ExportImport.export(app, projectId: settings.projectId, to: dir)
                logger.info("exported \(users) users (\(tenants) tenants)", [("to", dir)])
            } catch {
                logger.error("export failed: \(error.description)")
                result = 1
            }
        }
        // A key still being generated is stored in the data directory: wait for it before closing the database (a stop
        // right after start otherwise failed with "the database is closed" and exit code 1).
        tokens.waitForKeys()
        dataDir?.close()
        logger.info("stopped")
        logSink?.flush()
        return result
    }
}
