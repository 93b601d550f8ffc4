import CSystem
import EmulatorSupport
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Per-connection state, owned by one event loop thread.
final class Connection {
    let fd: Int32
    let id: UInt64
    let remote: String
    /// What the per-peer connection cap counts this connection against.
    let peer: PeerAddress
    var input: [UInt8] = []
    var inputStart = 0
    var parser: HTTPRequestParser
    var output: [UInt8] = []
    var outputStart = 0
    var awaiting = false
    var inFlightKeepAlive = true
    var inFlightVersionMinor = 1
    var inFlightHead = false
    var closeWhenFlushed = false
    var readClosed = false
    var lingering = false
    var requestStartedAt: UInt64? = nil
    var lastActivity: UInt64
    var lastWriteProgress: UInt64
    var mask: UInt32 = 0
    var registered = false
    /// Requests dispatched so far; the in-flight one is number `requestNumber`.
    var requestNumber: UInt64 = 0
    /// What to run if the client goes away before the in-flight request is answered (`ResponseContext.onClose`).
    var closeHooks: [@Sendable () -> Void] = []

    init(fd: Int32, id: UInt64, remote: String, peer: PeerAddress, limits: HTTPLimits, now: UInt64) {
        self.fd = fd
        self.id = id
        self.remote = remote
        self.peer = peer
        self.parser = HTTPRequestParser(limits: limits)
        self.lastActivity = now
        self.lastWriteProgress = now
    }

    var unreadInput: Int { input.count - inputStart }
    var pendingOutput: Int { output.count - outputStart }
}

/// Timeouts and buffer bounds for connections.
public struct ConnectionPolicy: Sendable {
    /// A request must arrive completely within this long after its first byte (slow clients get 408).
    public var requestTimeoutSeconds: Double = 15
    /// Idle keep-alive connections are closed after this long.
    public var idleTimeoutSeconds: Double = 300
    /// A client that reads none of its pending response for this long is dropped.
    public var writeTimeoutSeconds: Double = 60
    /// How long a closing connection drains the client's remaining bytes (so the error response is not lost to RST).
    public var lingerSeconds: Double = 2
    public var limits = HTTPLimits()
    public init() {}
}

/// One epoll loop on its own thread. All connection state is touched only by that thread; `enqueueCompletion` and
/// `requestStop` are the only entry points from other threads.
final class EventLoop: @unchecked Sendable {
    private static let listenerTag: UInt64 = 0
    private static let wakeTag: UInt64 = 1

    private let epfd: Int32
    private let wakeFD: Int32
    private let listenFD: Int32
    private let responder: any HTTPResponder
    private let policy: ConnectionPolicy
    private let logger: Logger
    private let index: Int
    private let admission: ConnectionAdmission

    private var connections: [UInt64: Connection] = [:]
    private var nextID: UInt64 = 2
    private var listening = false
    private var listenerPausedUntil: UInt64 = 0
    private var stoppingSince: UInt64? = nil
    /// Work handed to the loop by other threads, in order: answers and close hooks for deferred requests.
    private enum Handoff {
        case response(UInt64, HTTPResponse)
        case closeHook(UInt64, UInt64, @Sendable () -> Void)
    }
    private let completions = Locked<[Handoff]>([])
    private let stopRequested = Atomic<Bool>(false)
    private let connectionCount = Atomic<Int>(0)
    private var readBuffer = [UInt8](repeating: 0, count: 65536)

    var openConnections: Int { connectionCount.load(ordering: .relaxed) }
    #if DEBUG
    /// Connection events handled (debug builds): tests check an idle or half-closed connection costs none.
    let connectionEvents = Atomic<Int>(0)
    #endif

    init(index: Int, listenFD: Int32, responder: any HTTPResponder, policy: ConnectionPolicy, logger: Logger,
         admission: ConnectionAdmission) throws {
        self.index = index
        self.admission = admission
        self.listenFD = listenFD
        self.responder = responder
        self.policy = policy
        self.logger = logger
        epfd = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard epfd >= 0 else { throw SystemError("epoll_create1", errno: csys_errno()) }
        wakeFD = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        guard wakeFD >= 0 else { close(epfd); throw SystemError("eventfd", errno: csys_errno()) }
        try ctl(EPOLL_CTL_ADD, wakeFD, EPOLLIN.rawValue, tag: EventLoop.wakeTag)
        try addListener()
    }

    deinit {
        close(wakeFD)
        close(epfd)
    }

    private func ctl(_ op: Int32, _ fd: Int32, _ events: UInt32, tag: UInt64) throws {
        var ev = epoll_event()
        ev.events = events
        ev.data.u64 = tag
        guard epoll_ctl(epfd, op, fd, &ev) == 0 else { throw SystemError("epoll_ctl", errno: csys_errno()) }
    }

    private func addListener() throws {
        try ctl(EPOLL_CTL_ADD, listenFD, EPOLLIN.rawValue | EPOLLEXCLUSIVE.rawValue, tag: EventLoop.listenerTag)
        listening = true
    }

    private func removeListener() {
        guard listening else { return }
        var ev = epoll_event()
        _ = epoll_ctl(epfd, EPOLL_CTL_DEL, listenFD, &ev)
        listening = false
    }

    // MARK: cross-thread entry points

    func enqueueCompletion(_ id: UInt64, _ response: HTTPResponse) {
        completions.withLock { $0.append(.response(id, response)) }
        wake()
    }

    func enqueueCloseHook(_ id: UInt64, _ requestNumber: UInt64, _ hook: @escaping @Sendable () -> Void) {
        completions.withLock { $0.append(.closeHook(id, requestNumber, hook)) }
        wake()
    }

    func requestStop() {
        stopRequested.store(true, ordering: .releasing)
        wake()
    }

    private func wake() {
        var one: UInt64 = 1
        _ = withUnsafeBytes(of: &one) { write(wakeFD, $0.baseAddress, 8) }
    }

    // MARK: the loop

    func run() {
        var events = [epoll_event](repeating: epoll_event(), count: 256)
        var lastSweep = monotonicNanos()
        while true {
            let n = events.withUnsafeMutableBufferPointer { epoll_wait(epfd, $0.baseAddress, Int32($0.count), 250) }
            if n < 0 && csys_errno() != EINTR {
                logger.error("epoll_wait failed", [("errno", String(csys_errno()))])
                break
            }
            let now = monotonicNanos()
            if n > 0 {
                for k in 0..<Int(n) {
                    let ev = events[k]
                    let tag = ev.data.u64
                    switch tag {
                    case EventLoop.listenerTag: acceptAll(now: now)
                    case EventLoop.wakeTag: drainWake()
                    default:
                        guard let c = connections[tag] else { continue }
                        #if DEBUG
                        connectionEvents.wrappingAdd(1, ordering: .relaxed)
                        #endif
                        handle(c, events: ev.events, now: now)
                    }
                }
            }
            if stopRequested.load(ordering: .acquiring), stoppingSince == nil { beginStopping(now: now) }
            if now &- lastSweep >= 250_000_000 {
                // A fresh clock: handling the events above stamped connections with times later than `now`, and
                // `now &- stamp` would wrap into a spurious request/write timeout (408 or a reset mid-pipeline).
                sweep(now: monotonicNanos())
                lastSweep = now
            }
            if let since = stoppingSince {
                if connections.isEmpty { break }
                if now &- since > 10_000_000_000 {
                    for c in Array(connections.values) { closeConnection(c) }
                    break
                }
            }
        }
    }

    private func beginStopping(now: UInt64) {
        stoppingSince = now
        removeListener()
        for c in Array(connections.values) where isIdle(c) { closeConnection(c) }
    }

    private func isIdle(_ c: Connection) -> Bool {
        !c.awaiting && c.unreadInput == 0 && c.pendingOutput == 0 && !c.parser.isMidRequest
    }

    private func acceptAll(now: UInt64) {
        guard stoppingSince == nil else { return }
        while true {
            var addr = sockaddr_storage()
            var len = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let fd = withUnsafeMutablePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { csys_accept_nonblocking(listenFD, $0, &len) }
            }
            if fd < 0 {
                let e = csys_errno()
                if e == EAGAIN || e == EWOULDBLOCK || e == EINTR || e == ECONNABORTED { return }
                if e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM {
                    // Out of descriptors: stop polling the listener briefly instead of spinning.
                    if let held = admission.pausedWarning.shouldLog(now: now) {
                        logger.warning("accept failed; pausing the listener", [("errno", String(e)), ("repeats", String(held))])
                    }
                    removeListener()
                    listenerPausedUntil = now &+ 100_000_000
                    return
                }
                return
            }
            let peer = PeerAddress(&addr)
            let verdict = admission.admit(peer)
            guard verdict == .admitted else {
                refuse(fd, peer, verdict, now: now)
                continue
            }
            var one: Int32 = 1
            _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            let id = nextID
            nextID += 1
            let c = Connection(fd: fd, id: id, remote: Self.describe(&addr), peer: peer, limits: policy.limits, now: now)
            connections[id] = c
            connectionCount.wrappingAdd(1, ordering: .relaxed)
            updateInterest(c)
        }
    }

    private static let refusal: [UInt8] = {
        let body = #"{"error":{"code":503,"message":"Too many connections from this address.","errors":[{"message":"Too many connections from this address.","domain":"global","reason":"backendError"}],"status":"UNAVAILABLE"}}"#
        return Array("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)".utf8)
    }()

    /// Over a connection cap: a best-effort 503 (one non-blocking send) and close, so the client fails fast instead of
    /// waiting in the backlog.
    private func refuse(_ fd: Int32, _ peer: PeerAddress, _ verdict: ConnectionAdmission.Verdict, now: UInt64) {
        _ = Self.refusal.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT)) }
        shutdown(fd, Int32(SHUT_WR))
        close(fd)
        if let held = admission.refusedWarning.shouldLog(now: now) {
            let over = verdict == .overPeer
            logger.warning(over ? "refusing connections: this peer holds too many" : "refusing connections: the server holds its maximum",
                           [("peer", peer.key), ("open", String(over ? admission.open(peer.key) : admission.maxConnections)),
                            ("limit", String(over ? admission.maxPerPeer : admission.maxConnections)), ("repeats", String(held))])
        }
    }

    private static func describe(_ addr: inout sockaddr_storage) -> String {
        var buf = [CChar](repeating: 0, count: 64)
        switch Int32(addr.ss_family) {
        case AF_INET:
            return withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { p in
                    var a = p.pointee.sin_addr
                    inet_ntop(AF_INET, &a, &buf, socklen_t(buf.count))
                    return buf.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
                }
            }
        case AF_INET6:
            return withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { p in
                    var a = p.pointee.sin6_addr
                    inet_ntop(AF_INET6, &a, &buf, socklen_t(buf.count))
                    return buf.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
                }
            }
        default:
            return "unknown"
        }
    }

    private func drainWake() {
        var v: UInt64 = 0
        _ = withUnsafeMutableBytes(of: &v) { read(wakeFD, $0.baseAddress, 8) }
        let done = completions.withLock { q -> [Handoff] in
            let d = q
            q.removeAll(keepingCapacity: true)
            return d
        }
        for item in done {
            switch item {
            case .response(let id, let response):
                guard let c = connections[id], c.awaiting else { continue }
                finishRequest(c, response)
                process(c)
            case .closeHook(let id, let number, let hook):
                guard let c = connections[id] else { hook(); continue }  // already gone
                guard c.awaiting, c.requestNumber == number else { continue }  // already answered
                c.closeHooks.append(hook)
                if c.readClosed { closeConnection(c) }  // the peer left before the hook arrived
            }
        }
    }

    private func handle(_ c: Connection, events: UInt32, now: UInt64) {
        if events & (EPOLLIN.rawValue | EPOLLRDHUP.rawValue | EPOLLHUP.rawValue | EPOLLERR.rawValue) != 0 {
            readAvailable(c, now: now)
            guard connections[c.id] != nil else { return }
        }
        if events & EPOLLOUT.rawValue != 0 {
            flush(c, now: now)
            guard connections[c.id] != nil else { return }
            if !c.awaiting { process(c) }
        }
    }

    private func readAvailable(_ c: Connection, now: UInt64) {
        var gotData = false
        while true {
            if !c.lingering && c.unreadInput > policy.limits.maxHeadBytes + policy.limits.maxBodyBytes + 65536 { break }
            let n = readBuffer.withUnsafeMutableBytes { recv(c.fd, $0.baseAddress, $0.count, 0) }
            if n > 0 {
                c.lastActivity = now
                if c.lingering { continue }  // discard what a closing client still sends
                if c.unreadInput == 0 && c.requestStartedAt == nil && !c.awaiting { c.requestStartedAt = now }
                c.input.append(contentsOf: readBuffer[0..<n])
                gotData = true
                if n < readBuffer.count { break }
                continue
            }
            if n == 0 {
                c.readClosed = true
                if c.lingering { closeConnection(c); return }
                // A deferred request that asked to know (a long poll): its client is gone.
                if c.awaiting && !c.closeHooks.isEmpty { closeConnection(c); return }
                break
            }
            let e = csys_errno()
            if e == EINTR { continue }
            if e == EAGAIN || e == EWOULDBLOCK { break }
            closeConnection(c)
            return
        }
        if gotData || c.readClosed { process(c) }
    }

    /// Parses and dispatches as many requests as the connection may have in flight (one at a time).
    private func process(_ c: Connection) {
        guard connections[c.id] != nil else { return }
        while !c.awaiting && !c.closeWhenFlushed && c.pendingOutput < 1 << 20 && c.unreadInput > 0 {
            switch c.parser.parse(c.input, from: c.inputStart, remoteAddress: c.remote) {
            case .needMore:
                break
            case .request(let req, let consumed):
                c.inputStart += consumed
                c.requestStartedAt = c.unreadInput > 0 ? monotonicNanos() : nil
                dispatch(c, req)
                continue
            case .failure(let e):
                c.inputStart = c.input.count
                respondWithError(c, e)
            }
            break
        }
        if c.inputStart == c.input.count {
            c.input.removeAll(keepingCapacity: c.input.capacity <= 65536)
            c.inputStart = 0
        } else if c.inputStart > 65536 {
            c.input.removeFirst(c.inputStart)
            c.inputStart = 0
        }
        flush(c, now: monotonicNanos())
    }

    private func dispatch(_ c: Connection, _ req: HTTPRequest) {
        c.awaiting = true
        c.requestNumber &+= 1
        c.inFlightKeepAlive = req.keepAlive && stoppingSince == nil
        c.inFlightVersionMinor = req.versionMinor
        c.inFlightHead = req.method == "HEAD"
        if let response = responder.respond(to: req, context: ResponseContext(loop: self, connectionID: c.id, requestNumber: c.requestNumber)) {
            finishRequest(c, response)
        }
    }

    private func finishRequest(_ c: Connection, _ response: HTTPResponse) {
        c.awaiting = false
        if !c.closeHooks.isEmpty { c.closeHooks.removeAll() }
        let keepAlive = c.inFlightKeepAlive && !response.closeConnection && stoppingSince == nil
        response.serialize(into: &c.output, keepAlive: keepAlive, versionMinor: c.inFlightVersionMinor, headOnly: c.inFlightHead)
        if !keepAlive { c.closeWhenFlushed = true }
    }

    private func respondWithError(_ c: Connection, _ e: HTTPParseError) {
        let body = JSON.object([
            "error": .object([
                "code": .int(e.status), "message": .string(e.message),
                "errors": [.object(["message": .string(e.message), "domain": "global", "reason": "badRequest"])],
                "status": .string(e.status == 408 ? "DEADLINE_EXCEEDED" : e.status == 413 || e.status == 431 ? "OUT_OF_RANGE" : "INVALID_ARGUMENT"),
            ])
        ]).serialized()
        let r = HTTPResponse(status: e.status, headers: [("Content-Type", "application/json; charset=utf-8")], body: body, closeConnection: true)
        r.serialize(into: &c.output, keepAlive: false, versionMinor: 1, headOnly: false)
        c.closeWhenFlushed = true
        c.awaiting = false
    }

    private func flush(_ c: Connection, now: UInt64) {
        while c.pendingOutput > 0 {
            let n = c.output.withUnsafeBytes { buf in
                send(c.fd, buf.baseAddress! + c.outputStart, c.pendingOutput, Int32(MSG_NOSIGNAL))
            }
            if n > 0 {
                c.outputStart += n
                c.lastWriteProgress = now
                continue
            }
            let e = csys_errno()
            if n < 0 && e == EINTR { continue }
            if n < 0 && (e == EAGAIN || e == EWOULDBLOCK) { break }
            closeConnection(c)
            return
        }
        if c.pendingOutput == 0 {
            c.output.removeAll(keepingCapacity: c.output.capacity <= 65536)
            c.outputStart = 0
            c.lastWriteProgress = now
            if c.closeWhenFlushed && !c.lingering {
                if c.readClosed { closeConnection(c); return }
                // Lingering close: stop sending, drain what the client still sends, then close.
                shutdown(c.fd, Int32(SHUT_WR))
                c.lingering = true
                c.lastActivity = now
            } else if c.readClosed && !c.awaiting && !c.lingering {
                closeConnection(c)
                return
            } else if stoppingSince != nil && isIdle(c) {
                closeConnection(c)
                return
            }
        } else if c.outputStart > 1 << 20 {
            c.output.removeFirst(c.outputStart)
            c.outputStart = 0
        }
        updateInterest(c)
    }

    private func updateInterest(_ c: Connection) {
        var mask: UInt32 = 0
        let wantRead = !c.readClosed && (c.lingering || (!c.closeWhenFlushed && c.pendingOutput < 1 << 20
            && c.unreadInput <= policy.limits.maxHeadBytes + policy.limits.maxBodyBytes + 65536))
        // RDHUP only while reading: once the peer's FIN has been read (or reading is paused) a level-triggered
        // RDHUP would be reported on every epoll_wait and spin the loop (a half-closed long poll did, at 100% CPU).
        if wantRead { mask |= EPOLLIN.rawValue | EPOLLRDHUP.rawValue }
        if c.pendingOutput > 0 { mask |= EPOLLOUT.rawValue }
        guard mask != c.mask || !c.registered else { return }
        let op = c.registered ? EPOLL_CTL_MOD : EPOLL_CTL_ADD
        c.registered = true
        c.mask = mask
        do { try ctl(op, c.fd, mask, tag: c.id) } catch { closeConnection(c) }
    }

    private func closeConnection(_ c: Connection) {
        guard connections.removeValue(forKey: c.id) != nil else { return }
        var ev = epoll_event()
        _ = epoll_ctl(epfd, EPOLL_CTL_DEL, c.fd, &ev)
        close(c.fd)
        connectionCount.wrappingSubtract(1, ordering: .relaxed)
        admission.release(c.peer)
        if !c.closeHooks.isEmpty {
            let hooks = c.closeHooks
            c.closeHooks = []
            for h in hooks { h() }
        }
    }

    private func sweep(now: UInt64) {
        if !listening && stoppingSince == nil && now >= listenerPausedUntil { try? addListener() }
        let requestTimeout = UInt64(policy.requestTimeoutSeconds * 1e9)
        let idleTimeout = UInt64(policy.idleTimeoutSeconds * 1e9)
        let writeTimeout = UInt64(policy.writeTimeoutSeconds * 1e9)
        let linger = UInt64(policy.lingerSeconds * 1e9)
        for c in Array(connections.values) {
            if c.lingering {
                if now &- c.lastActivity > linger || now &- c.lastWriteProgress > linger + writeTimeout { closeConnection(c) }
                continue
            }
            if c.pendingOutput > 0 {
                if now &- c.lastWriteProgress > writeTimeout { closeConnection(c) }
                continue
            }
            if c.awaiting { continue }
            if let started = c.requestStartedAt, c.unreadInput > 0 || c.parser.isMidRequest {
                if now &- started > requestTimeout {
                    logger.debug("request timed out", [("peer", c.remote)])
                    c.inputStart = c.input.count
                    respondWithError(c, .timeout)
                    flush(c, now: now)
                }
                continue
            }
            if now &- c.lastActivity > idleTimeout { closeConnection(c) }
        }
    }
}

/// A failed system call with its errno.
public struct SystemError: Error, CustomStringConvertible, Sendable {
    public let call: String
    public let errno: Int32
    public init(_ call: String, errno: Int32) {
        self.call = call
        self.errno = errno
    }
    public var description: String { "\(call): \(String(cString: strerror(errno)))" }
}
