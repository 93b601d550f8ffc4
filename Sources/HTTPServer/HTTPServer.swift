import CSystem
import EmulatorSupport
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// An HTTP/1.1 server: one listening socket shared by N epoll loops (EPOLLEXCLUSIVE wakes one loop per
/// connection), keep-alive, in-order pipelining, limits and timeouts from `ConnectionPolicy`.
public final class HTTPServer: Sendable {
    public struct Configuration: Sendable {
        public var host: String
        public var port: Int
        public var eventLoops: Int
        public var policy: ConnectionPolicy
        /// Most connections one peer (IPv4 address or IPv6 /64) may hold; 0: half of `maxConnections`, loopback exempt.
        public var maxConnectionsPerPeer: Int
        /// Most connections in all; 0: the descriptor limit minus a reserve (max(64, limit/16)).
        public var maxConnections: Int
        /// Send an event loop iteration's answers in one io_uring submission where the kernel allows it (see
        /// `EventLoop.uring`); false: one send(2) each.
        public var batchSends: Bool
        public init(host: String = "127.0.0.1", port: Int = 9099, eventLoops: Int = 2, policy: ConnectionPolicy = ConnectionPolicy(),
                    maxConnectionsPerPeer: Int = 0, maxConnections: Int = 0, batchSends: Bool = true) {
            self.batchSends = batchSends
            self.host = host
            self.port = port
            self.eventLoops = eventLoops
            self.policy = policy
            self.maxConnectionsPerPeer = maxConnectionsPerPeer
            self.maxConnections = maxConnections
        }
    }

    private struct Running: @unchecked Sendable {
        var listenFD: Int32
        var loops: [EventLoop]
        var threads: [NativeThread]
        var budget: OutputBudget
    }

    public let configuration: Configuration
    private let responder: any HTTPResponder
    private let logger: Logger
    private let running = Locked<Running?>(nil)
    private let boundPort = Atomic<Int>(0)
    private let admission = Locked<ConnectionAdmission?>(nil)

    public init(configuration: Configuration, responder: any HTTPResponder, logger: Logger) {
        self.configuration = configuration
        self.responder = responder
        self.logger = logger
    }

    /// The port actually bound (after `start`; meaningful with port 0).
    public var port: Int { boundPort.load(ordering: .acquiring) }

    /// The connection caps in force (after `start`): in all, and per peer (`perPeerAppliesToLoopback` false by default).
    public var connectionLimits: (total: Int, perPeer: Int, perPeerAppliesToLoopback: Bool)? {
        admission.withLock { a in a.map { ($0.maxConnections, $0.maxPerPeer, $0.capsLoopback) } }
    }

    /// Connections open right now, across loops.
    public var openConnections: Int { running.withLock { $0?.loops.reduce(0) { $0 + $1.openConnections } ?? 0 } }

    #if DEBUG
    /// Connection events the loops handled so far (debug builds, for tests).
    var connectionEventCount: Int { running.withLock { $0?.loops.reduce(0) { $0 + $1.connectionEvents.load(ordering: .relaxed) } ?? 0 } }
    /// The most output, and the most input, any one connection has held so far (debug builds, for tests).
    var peakConnectionOutput: Int { running.withLock { $0?.loops.map { $0.peakConnectionOutput.load(ordering: .relaxed) }.max() ?? 0 } }
    var peakConnectionInput: Int { running.withLock { $0?.loops.map { $0.peakConnectionInput.load(ordering: .relaxed) }.max() ?? 0 } }
    /// The output charged to the budget now, and the most ever (debug builds, for tests).
    var outputBudgetUse: (now: Int, peak: Int) { running.withLock { r in r.map { ($0.budget.bytes, $0.budget.peak) } ?? (0, 0) } }
    #endif

    /// Binds, listens and starts the event loop threads. Throws a readable error if the address cannot be used.
    @discardableResult
    public func start() throws -> Int {
        csys_ignore_sigpipe()
        HTTPServer.returnLargeBuffersOnFree()
        let fd = try Self.listen(host: configuration.host, port: configuration.port)
        let gate = ConnectionAdmission(descriptorLimit: DescriptorLimit.current, maxConnections: configuration.maxConnections,
                                       maxPerPeer: configuration.maxConnectionsPerPeer)
        admission.withLock { $0 = gate }
        let budget = OutputBudget(limit: configuration.policy.outputBudgetBytes)
        var loops: [EventLoop] = []
        do {
            for _ in 0..<max(1, configuration.eventLoops) {
                loops.append(try EventLoop(listenFD: fd, responder: responder, policy: configuration.policy, logger: logger,
                                           admission: gate, budget: budget, batchSends: configuration.batchSends))
            }
        } catch {
            close(fd)
            throw error
        }
        let turns = AcceptTurns()
        for loop in loops { loop.join(loops, turns: turns) }
        let threads = loops.map { loop in NativeThread.start { loop.run() } }
        for loop in loops { loop.started.wait() }
        let port = Self.localPort(fd)
        boundPort.store(port, ordering: .releasing)
        running.withLock { $0 = Running(listenFD: fd, loops: loops, threads: threads, budget: budget) }
        return port
    }

    /// Makes glibc's malloc serve every block of 128 KiB or more with its own mapping, unmapped when freed (the
    /// default threshold rises to the largest block freed so far, up to 32 MiB, after which such blocks come from the
    /// threads' heaps and stay there). The large blocks here are connections' output and input buffers, which
    /// clients can make a few hundred KiB each: with the default, the memory of many such connections was still held
    /// after they closed. Process-wide, and set before the loops' threads run.
    static func returnLargeBuffersOnFree() {
        _ = mallopt(M_MMAP_THRESHOLD, 128 * 1024)
    }

    /// Stops accepting, lets in-flight requests finish (up to 10 s), closes every connection and returns.
    public func shutdown() {
        guard let r = running.withLock({ r -> Running? in let c = r; r = nil; return c }) else { return }
        for l in r.loops { l.requestStop() }
        for t in r.threads { t.join() }
        close(r.listenFD)
    }

    public struct ListenError: Error, CustomStringConvertible, Sendable {
        public let description: String
    }

    static func listen(host: String, port: Int) throws -> Int32 {
        guard (0...65535).contains(port) else { throw ListenError(description: "invalid port \(port)") }
        var h = host
        if h.hasPrefix("[") && h.hasSuffix("]") { h = String(h.dropFirst().dropLast()) }
        if h == "localhost" { h = "127.0.0.1" }
        var storage = sockaddr_storage()
        var len: socklen_t
        let family: Int32
        var v4 = in_addr()
        var v6 = in6_addr()
        if inet_pton(AF_INET, h, &v4) == 1 {
            family = AF_INET
            var sa = sockaddr_in()
            sa.sin_family = sa_family_t(AF_INET)
            sa.sin_port = in_port_t(UInt16(port).bigEndian)
            sa.sin_addr = v4
            withUnsafeMutableBytes(of: &storage) { dst in withUnsafeBytes(of: &sa) { dst.copyMemory(from: $0) } }
            len = socklen_t(MemoryLayout<sockaddr_in>.size)
        } else if inet_pton(AF_INET6, h, &v6) == 1 {
            family = AF_INET6
            var sa = sockaddr_in6()
            sa.sin6_family = sa_family_t(AF_INET6)
            sa.sin6_port = in_port_t(UInt16(port).bigEndian)
            sa.sin6_addr = v6
            withUnsafeMutableBytes(of: &storage) { dst in withUnsafeBytes(of: &sa) { dst.copyMemory(from: $0) } }
            len = socklen_t(MemoryLayout<sockaddr_in6>.size)
        } else {
            throw ListenError(description: "cannot listen on \(host):\(port): not an IP address (use e.g. 127.0.0.1, 0.0.0.0 or ::)")
        }
        let fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw ListenError(description: "socket: \(String(cString: strerror(csys_errno())))") }
        var one: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        let rc = withUnsafePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) } }
        guard rc == 0 else {
            let e = csys_errno()
            close(fd)
            throw ListenError(description: "cannot listen on \(host):\(port): \(String(cString: strerror(e)))")
        }
        guard Glibc.listen(fd, 4096) == 0 else {
            let e = csys_errno()
            close(fd)
            throw ListenError(description: "listen on \(host):\(port): \(String(cString: strerror(e)))")
        }
        return fd
    }

    static func localPort(_ fd: Int32) -> Int {
        var storage = sockaddr_storage()
        var len = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
        if Int32(storage.ss_family) == AF_INET6 {
            return withUnsafePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin6_port)) } }
        }
        return withUnsafePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin_port)) } }
    }
}
