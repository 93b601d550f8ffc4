import CSystem
import Dispatch
import EmulatorSupport
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// One connection on one event loop thread: its socket and its `ConnectionState`.
final class Connection {
    let fd: Int32
    let id: UInt64
    /// What the per-peer connection cap counts this connection against.
    let peer: PeerAddress
    var state: ConnectionState
    var registered = false
    /// Waiting in `EventLoop.queuedSends` for this iteration's batch.
    var sendQueued = false

    init(fd: Int32, id: UInt64, peer: PeerAddress, state: ConnectionState) {
        self.fd = fd
        self.id = id
        self.peer = peer
        self.state = state
    }
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
    /// A connection parses no further request (and is not read) while this much of its output waits for the client:
    /// it holds at most this, one answer and 64 KiB already sent.
    public var outputHighWaterBytes = 256 * 1024
    /// Unread output of all connections together (see `OutputBudget`): while this much is held, connections holding
    /// 16 KiB or more are not read until their clients read; 0: no budget.
    public var outputBudgetBytes = 64 << 20
    /// The response for an HTTP-level failure (400, 408, 411, 413, 431, 505, and 503 to a connection over a cap); the
    /// connection closes after it.
    public var renderError: @Sendable (HTTPParseError) -> HTTPResponse = ConnectionPolicy.defaultErrorResponse
    public init() {}

    /// Plain text: the server knows nothing of the API it carries. The application supplies its own rendering
    /// (PhoneAuthAPI renders these in Google's error envelope).
    public static let defaultErrorResponse: @Sendable (HTTPParseError) -> HTTPResponse = { e in
        HTTPResponse(status: e.status, headers: [("Content-Type", "text/plain; charset=utf-8")],
                     body: Array("\(e.message)\n".utf8), closeConnection: true)
    }
}

/// Work that runs on "the event loop I am on", from code that knows nothing of connections (the journal's commits).
public enum CurrentEventLoop {
    /// Runs `job` later on the event loop whose thread calls this, after the events at hand (as
    /// `ResponseContext.runOnLoop`); false, and nothing queued, on any other thread or when the loop's queue is full.
    public static func runLater(_ job: @escaping @Sendable () -> Void) -> Bool {
        guard let p = csys_current_loop() else { return false }
        return Unmanaged<EventLoop>.fromOpaque(p).takeUnretainedValue().runLater(job)
    }
}

/// The turn counter the loops of one server share (see `EventLoop.siblings`).
final class AcceptTurns: Sendable {
    let next = Atomic<UInt>(0)
}

/// One epoll loop on its own thread. All connection state is touched only by that thread; `enqueueCompletion`,
/// `enqueueCloseHook` and `requestStop` are the only entry points from other threads.
///
/// The loop performs system calls and nothing else: each connection's `ConnectionState` decides (parsing,
/// pipelining, backpressure, limits, timeouts) from the events the loop feeds it, with one clock reading per
/// iteration.
final class EventLoop: @unchecked Sendable {
    private static let listenerTag: UInt64 = 0
    private static let wakeTag: UInt64 = 1

    private let epfd: Int32
    private let wakeFD: Int32
    private let listenFD: Int32
    private let responder: any HTTPResponder
    private let config: ConnectionState.Config
    /// The answer to a connection over a cap (`HTTPParseError.tooManyConnections` as the policy renders it), whole.
    private let refusal: [UInt8]
    private let logger: Logger
    private let admission: ConnectionAdmission
    private let budget: OutputBudget

    private var connections: [UInt64: Connection] = [:]
    private var nextID: UInt64 = 2
    private var listening = false
    private var listenerPausedUntil: UInt64 = 0
    private var stoppingSince: UInt64? = nil
    /// Work handed to the loop by other threads, in order: answers and close hooks for deferred requests.
    private enum Handoff {
        case response(UInt64, UInt64, HTTPResponse)
        case closeHook(UInt64, UInt64, @Sendable () -> Void)
        case streamReady(UInt64, UInt64)
        /// A connection another loop accepted for this one (see `siblings`).
        case adopt(Int32, PeerAddress, String)
    }
    private let completions = Locked<[Handoff]>([])
    /// Hand-offs made on the loop's own thread (a job below answering, a close hook registered while responding, an
    /// event published by a handler waking a stream on this loop): no lock and no eventfd, taken before the loop
    /// waits again.
    private var localHandoffs: [Handoff] = []
    /// The loop's thread (`pthread_self()` as a number; 0 until `run` starts): what tells a hand-off from its own
    /// thread apart from one from elsewhere.
    private let ownerThread = Atomic<UInt>(0)
    /// Costly work a responder asked to run on this loop later (`ResponseContext.runOnLoop`): signing a token
    /// (~200 µs) here, after the events at hand, costs no thread hand-off and no context switch. Run in slices of
    /// `jobSliceNanos` between polls, so cheap requests that arrive meanwhile wait for at most one slice.
    /// All the server's loops, this one included (set before they run), and the shared turn counter: accepted
    /// connections are dealt to the loops in turn, so each loop serves its share (the first loop to wake would
    /// otherwise accept a whole burst of connections, and with signing on the loops one core would do all the work).
    private var siblings: [EventLoop] = []
    private var turns: AcceptTurns? = nil
    private var jobs: [(@Sendable () -> Void)?] = []
    private var jobsHead = 0
    /// At most this many jobs wait on one loop; a responder that finds the queue full runs its work elsewhere.
    static let maxQueuedJobs = 64
    static let jobSliceNanos: UInt64 = 1_000_000
    /// The sends of one iteration go out together, through an io_uring: one system call for many sockets. A client
    /// woken by an answer then runs once after the batch instead of preempting the loop after every answer (that
    /// preemption was most of a sign-in's context switches under load). nil where io_uring is refused (a seccomp
    /// profile, an old kernel) or turned off: each send is then its own `send(2)`, at once.
    private var uring: OpaquePointer? = nil
    private let batchSends: Bool
    /// Signalled once `run` has set up what the loop owns (its ring): `HTTPServer.start` returns after that, so a
    /// started server has all its descriptors open.
    let started = DispatchSemaphore(value: 0)
    private var queuedSends: [Connection] = []
    private var batch: [Connection] = []
    private var sendFDs: [Int32] = []
    private var sendLengths: [UInt32] = []
    private var sendResults: [Int32] = []
    private var sendBuffers: [UnsafeRawPointer?] = []
    /// At most this much of one connection's output per batch (the rest goes in the next round).
    static let maxBatchedSend = 256 * 1024
    /// At most this many connections per submission (the ring's size); connections past it wait for the next round.
    /// Each is sent from its own output buffer, held for the submission (nothing is copied for the batch).
    static let maxBatchConnections = 64
    /// Streams that have something, pulled together once `streamPullsDue` passes: events that arrive within
    /// `streamBatchNanos` go out in one pull and one `send` per stream instead of one each (ten readers of a stream
    /// under load would otherwise cost ten system calls per event).
    private var streamPulls: [(UInt64, UInt64)] = []
    private var streamPullsDue: UInt64? = nil
    static let streamBatchNanos: UInt64 = 5_000_000
    private let stopRequested = Atomic<Bool>(false)
    private let connectionCount = Atomic<Int>(0)
    private var readBuffer = [UInt8](repeating: 0, count: 65536)
    /// Reused for every event's actions (the loop is not reentrant).
    private var actions: [ConnectionAction] = []

    var openConnections: Int { connectionCount.load(ordering: .relaxed) }
    #if DEBUG
    /// Connection events handled (debug builds): tests check an idle or half-closed connection costs none.
    let connectionEvents = Atomic<Int>(0)
    /// The most output, and the most input, one connection of this loop has held (debug builds, for tests).
    let peakConnectionOutput = Atomic<Int>(0)
    let peakConnectionInput = Atomic<Int>(0)
    #endif

    init(listenFD: Int32, responder: any HTTPResponder, policy: ConnectionPolicy, logger: Logger,
         admission: ConnectionAdmission, budget: OutputBudget, batchSends: Bool = true) throws {
        self.admission = admission
        self.budget = budget
        self.listenFD = listenFD
        self.responder = responder
        self.config = ConnectionState.Config(policy, budget: budget)
        var refusal: [UInt8] = []
        policy.renderError(.tooManyConnections).serialize(into: &refusal, keepAlive: false, versionMinor: 1, headOnly: false)
        self.refusal = refusal
        self.logger = logger
        actions.reserveCapacity(8)
        self.batchSends = batchSends
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

    func enqueueCompletion(_ id: UInt64, _ requestNumber: UInt64, _ response: HTTPResponse) {
        enqueue(.response(id, requestNumber, response))
    }

    func enqueueCloseHook(_ id: UInt64, _ requestNumber: UInt64, _ hook: @escaping @Sendable () -> Void) {
        enqueue(.closeHook(id, requestNumber, hook))
    }

    /// One wake-up per burst: only the hand-off that finds the queue empty writes the eventfd. The loop reads the
    /// eventfd before it takes the queue, so an item queued after that take finds the queue empty and wakes it
    /// again; an item queued before it is in the take. (A committer delivering a batch of answers, or signing
    /// threads finishing together, cost one write and one wake-up instead of one each.)
    private func enqueue(_ item: Handoff) {
        if onOwnerThread {
            localHandoffs.append(item)
            return
        }
        let first = completions.withLock { q -> Bool in
            q.append(item)
            return q.count == 1
        }
        if first { wake() }
    }

    /// Makes the loops of one server deal accepted connections in turn. Call before any of them runs.
    func join(_ loops: [EventLoop], turns: AcceptTurns) {
        siblings = loops
        self.turns = turns
    }

    /// Takes over a connection another loop accepted (from that loop's thread).
    private func adopt(_ fd: Int32, _ peer: PeerAddress, _ remote: String) {
        enqueue(.adopt(fd, peer, remote))
    }

    /// Whether the caller runs on this loop's thread.
    @inline(__always) var onOwnerThread: Bool {
        ownerThread.load(ordering: .relaxed) == UInt(pthread_self())
    }

    /// Queues `job` to run on this loop after the events at hand (see `jobs`). Only from the loop's own thread (a
    /// responder answering a request); false, and nothing queued, from any other thread, when `maxQueuedJobs` wait
    /// already, or while the loop stops.
    func runLater(_ job: @escaping @Sendable () -> Void) -> Bool {
        guard onOwnerThread, stoppingSince == nil, jobs.count - jobsHead < Self.maxQueuedJobs else { return false }
        jobs.append(job)
        return true
    }

    /// Jobs queued and not yet run.
    private var hasJobs: Bool { jobsHead < jobs.count }

    /// Runs queued jobs for up to one slice, taking what they hand back (answers) after each, so an answer goes out
    /// as soon as its job is done.
    private func runJobs() {
        let start = monotonicNanos()
        while jobsHead < jobs.count {
            let job = jobs[jobsHead]
            jobs[jobsHead] = nil
            jobsHead += 1
            job?()
            let now = monotonicNanos()
            takeLocalHandoffs(now: now)
            if now &- start >= Self.jobSliceNanos { break }
        }
        if jobsHead == jobs.count {
            jobs.removeAll(keepingCapacity: jobs.capacity <= 256)
            jobsHead = 0
            settle(now: monotonicNanos())
        }
    }

    /// Takes the hand-offs made on this thread and sends what is queued, until neither is left (a send's result can
    /// close a connection and run close hooks, which can answer other requests).
    private func settle(now: UInt64) {
        repeat {
            takeLocalHandoffs(now: now)
            flushSends()
        } while !localHandoffs.isEmpty || !queuedSends.isEmpty
    }

    /// Sends every queued connection's pending output in one io_uring submission (more rounds for partial sends and
    /// past `maxBatchConnections`), feeding each result back as `send` would.
    private func flushSends() {
        guard let uring else { return }
        while !queuedSends.isEmpty {
            swap(&batch, &queuedSends)
            queuedSends.removeAll(keepingCapacity: true)
            sendFDs.removeAll(keepingCapacity: true)
            sendLengths.removeAll(keepingCapacity: true)
            sendBuffers.removeAll(keepingCapacity: true)
            var live = 0
            // By index, compacting in place (iterating the array while writing to it would copy it every round).
            for k in batch.indices {
                let c = batch[k]
                if live == Self.maxBatchConnections {
                    queuedSends.append(contentsOf: batch[k...])  // still marked queued: the next round sends them
                    break
                }
                c.sendQueued = false
                // Closed meanwhile (its descriptor may already belong to a new connection), or nothing left to send.
                guard !c.state.closed, connections[c.id] === c, c.state.pendingOutput > 0 else { continue }
                batch[live] = c
                live += 1
                sendFDs.append(c.fd)
            }
            batch.removeSubrange(live...)
            guard live > 0 else { continue }
            sendResults.removeAll(keepingCapacity: true)
            sendResults.append(contentsOf: repeatElement(0, count: live))
            submitHoldingOutputs(from: 0, uring)
            let now = monotonicNanos()
            for (i, c) in batch.enumerated() {
                let r = sendResults[i]
                let event: ConnectionEvent
                if r > 0 {
                    event = .wrote(Int(r), now: now)
                } else if r == 0 || r == -EAGAIN || r == -EWOULDBLOCK || r == -EINTR {
                    event = .writeWouldBlock
                } else {
                    event = .hangup  // a socket error, or a ring failure that left it unknown what was sent
                }
                drive(c, event, now: now)
            }
            batch.removeAll(keepingCapacity: true)
        }
    }

    /// Holds `batch[k...]`'s output buffers open, one inside the other (at most `maxBatchConnections` deep), and
    /// submits the sends from them: the kernel copies each answer straight from its connection's buffer, which stays
    /// valid and unchanged until the submission returns (the ring completes every send before it does).
    private func submitHoldingOutputs(from k: Int, _ uring: OpaquePointer) {
        guard k < batch.count else {
            _ = csys_uring_send_batch(uring, Int32(batch.count), sendFDs, sendBuffers, sendLengths, &sendResults)
            return
        }
        batch[k].state.withPendingOutput { out in
            sendBuffers.append(out.baseAddress)
            sendLengths.append(UInt32(min(out.count, Self.maxBatchedSend)))
            submitHoldingOutputs(from: k + 1, uring)
        }
    }

    /// Performs the hand-offs made on this thread, including those they make in turn.
    private func takeLocalHandoffs(now: UInt64) {
        while !localHandoffs.isEmpty {
            let items = localHandoffs
            localHandoffs.removeAll(keepingCapacity: true)
            perform(items, now: now)
        }
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
        ownerThread.store(UInt(pthread_self()), ordering: .relaxed)
        csys_set_current_loop(Unmanaged.passUnretained(self).toOpaque())
        // The ring belongs to this thread from set-up to teardown (io_uring ties work to the task that made the ring;
        // made on another thread, its teardown interrupted that thread's blocking calls with EINTR).
        if batchSends { uring = csys_uring_create(64) }
        started.signal()
        defer {
            if let uring { csys_uring_destroy(uring) }
            uring = nil
        }
        var events = [epoll_event](repeating: epoll_event(), count: 256)
        var lastSweep = monotonicNanos()
        while true {
            var waitMillis: Int32 = 250
            if hasJobs || !localHandoffs.isEmpty {
                waitMillis = 0  // only look: queued work goes on right after
            } else if let due = streamPullsDue {
                let t = monotonicNanos()
                waitMillis = due <= t ? 0 : Int32(min(250, (due - t + 999_999) / 1_000_000))
            }
            let n = events.withUnsafeMutableBufferPointer { epoll_wait(epfd, $0.baseAddress, Int32($0.count), waitMillis) }
            if n < 0 && csys_errno() != EINTR {
                logger.error("epoll_wait failed", [("errno", String(csys_errno()))])
                break
            }
            // The one clock reading of this iteration: every stamp and every timeout check below uses it.
            let now = monotonicNanos()
            if n > 0 {
                for k in 0..<Int(n) {
                    let ev = events[k]
                    let tag = ev.data.u64
                    switch tag {
                    case EventLoop.listenerTag: acceptAll(now: now)
                    case EventLoop.wakeTag: drainWake(now: now)
                    default:
                        guard let c = connections[tag] else { continue }
                        #if DEBUG
                        connectionEvents.wrappingAdd(1, ordering: .relaxed)
                        #endif
                        handle(c, events: ev.events, now: now)
                    }
                }
            }
            // One batch of answers per job slice: what was just read is answered and leaves with the answers of the
            // last slice's jobs, before the next slice (a request that came in during a slice waits for the rest of
            // that slice only); a client woken once reads them all (it would preempt the loop for each batch).
            settle(now: now)
            if hasJobs { runJobs() }
            if let due = streamPullsDue, now >= due {
                let ready = streamPulls
                streamPulls.removeAll(keepingCapacity: true)
                streamPullsDue = nil
                for (id, number) in ready {
                    if let c = connections[id] { drive(c, .streamReady(number), now: now) }
                }
            }
            if stopRequested.load(ordering: .acquiring), stoppingSince == nil { beginStopping(now: now) }
            if now &- lastSweep >= 250_000_000 {
                sweep(now: now)
                lastSweep = now
            }
            // While jobs remain, their answers so far wait for the next iteration's batch, a look at the sockets away.
            if hasJobs { takeLocalHandoffs(now: now) } else { settle(now: now) }
            if let since = stoppingSince {
                if connections.isEmpty { break }
                if now &- since > 10_000_000_000 {
                    for c in Array(connections.values) { drive(c, .hangup, now: now) }
                    break
                }
            }
        }
        // Jobs still queued run now (at most `maxQueuedJobs`): work a request began, or a journal commit, is not lost.
        while hasJobs { runJobs() }
        csys_set_current_loop(nil)
        siblings = []  // the loops referenced each other: let them go
        // Connections another loop dealt to this one after it stopped: closed, not leaked.
        let left = completions.withLock { q -> [Handoff] in let d = q; q.removeAll(); return d } + localHandoffs
        for case .adopt(let fd, let peer, _) in left {
            close(fd)
            admission.release(peer)
        }
    }

    private func beginStopping(now: UInt64) {
        stoppingSince = now
        removeListener()
        for c in Array(connections.values) { drive(c, .stop, now: now) }
    }

    private func acceptAll(now: UInt64) {
        guard stoppingSince == nil else { return }
        while true {
            var addr = sockaddr_storage()
            let fd: Int32
            switch Posix.accept(listenFD, &addr) {
            case .accepted(let accepted):
                fd = accepted
            case .wouldBlock:
                return
            case .failed(let e):
                if e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM {
                    // Out of descriptors: stop polling the listener briefly instead of spinning.
                    if let held = admission.pausedWarning.shouldLog(now: now) {
                        logger.warning("accept failed; pausing the listener", [("errno", String(e)), ("repeats", String(held))])
                    }
                    removeListener()
                    listenerPausedUntil = now &+ 100_000_000
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
            let remote = Self.describe(&addr)
            if siblings.count > 1, let turns {
                let target = siblings[Int(turns.next.wrappingAdd(1, ordering: .relaxed).oldValue % UInt(siblings.count))]
                if target !== self {
                    target.adopt(fd, peer, remote)
                    continue
                }
            }
            register(fd, peer, remote, now: now)
        }
    }

    /// Starts serving an accepted connection on this loop.
    private func register(_ fd: Int32, _ peer: PeerAddress, _ remote: String, now: UInt64) {
        let id = nextID
        nextID += 1
        let c = Connection(fd: fd, id: id, peer: peer, state: ConnectionState(config: config, remote: remote, now: now))
        connections[id] = c
        connectionCount.wrappingAdd(1, ordering: .relaxed)
        drive(c, .opened, now: now)
    }

    /// Over a connection cap: a best-effort 503 (one non-blocking send) and close, so the client fails fast instead of
    /// waiting in the backlog.
    private func refuse(_ fd: Int32, _ peer: PeerAddress, _ verdict: ConnectionAdmission.Verdict, now: UInt64) {
        _ = refusal.withUnsafeBytes { Posix.send(fd, $0) }
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

    private func drainWake(now: UInt64) {
        var v: UInt64 = 0
        _ = withUnsafeMutableBytes(of: &v) { read(wakeFD, $0.baseAddress, 8) }
        let done = completions.withLock { q -> [Handoff] in
            let d = q
            q.removeAll(keepingCapacity: true)
            return d
        }
        perform(done, now: now)
    }

    /// Answers, close hooks and stream wake-ups handed to the loop, in order.
    private func perform(_ done: [Handoff], now: UInt64) {
        for item in done {
            switch item {
            case .response(let id, let number, let response):
                guard let c = connections[id] else {
                    response.stream?.source.detach()  // the client left before its stream began
                    continue
                }
                drive(c, .responded(number, response, now: now), now: now)
            case .closeHook(let id, let number, let hook):
                guard let c = connections[id] else { hook(); continue }  // already gone
                drive(c, .closeHook(number, hook), now: now)
            case .streamReady(let id, let number):
                streamPulls.append((id, number))
                if streamPullsDue == nil { streamPullsDue = now &+ EventLoop.streamBatchNanos }
            case .adopt(let fd, let peer, let remote):
                if stoppingSince != nil {
                    close(fd)
                    admission.release(peer)
                } else {
                    register(fd, peer, remote, now: now)
                }
            }
        }
    }

    private func handle(_ c: Connection, events: UInt32, now: UInt64) {
        // EPOLLHUP: both directions are shut (a reset, or our half-close answered by the peer's FIN); EPOLLERR: a
        // socket error. Either way nothing more can be sent: close (running close hooks). Both are reported whatever
        // the mask, so leaving them pending would spin the loop.
        if events & (EPOLLHUP.rawValue | EPOLLERR.rawValue) != 0 { return drive(c, .hangup, now: now) }
        if events & (EPOLLIN.rawValue | EPOLLRDHUP.rawValue) != 0 {
            readAvailable(c, peerClosed: events & EPOLLRDHUP.rawValue != 0, now: now)
            if c.state.closed { return }
        }
        if events & EPOLLOUT.rawValue != 0 { drive(c, .writable, now: now) }
    }

    /// Reads while the state wants input. A short read usually means the socket is drained; after EPOLLRDHUP the
    /// loop reads on to the end of the stream so the state learns of the FIN now, not on the next wakeup.
    private func readAvailable(_ c: Connection, peerClosed: Bool, now: UInt64) {
        guard c.state.readRoom > 0 else { return drive(c, .readable, now: now) }
        while c.state.readRoom > 0 {
            let want = min(readBuffer.count, c.state.readRoom)
            let r = readBuffer.withUnsafeMutableBytes { Posix.receive(c.fd, into: UnsafeMutableRawBufferPointer(rebasing: $0[0..<want])) }
            switch r {
            case .bytes(let n):
                drive(c, .received(readBuffer[0..<n], now: now), now: now)
                if n < want && !peerClosed { return }
            case .wouldBlock:
                return
            case .endOfStream:
                return drive(c, .endOfInput, now: now)
            case .failed:
                return drive(c, .hangup, now: now)
            }
        }
    }

    private func sweep(now: UInt64) {
        if !listening && stoppingSince == nil && now >= listenerPausedUntil { try? addListener() }
        if budget.shouldTrim(now: now) {
            // Closed connections' small buffers back to the system (a few ms after hundreds closed at once).
            let started = monotonicNanos()
            _ = malloc_trim(0)
            logger.debug("returned free memory to the system", [("ms", String((monotonicNanos() - started) / 1_000_000))])
        }
        if budget.isExhausted, let held = budget.exhaustedWarning.shouldLog(now: now) {
            logger.warning("unread answers use up the output budget; connections holding 16 KiB or more are not read until their clients read",
                           [("held", String(budget.bytes)), ("budget", String(budget.limit)), ("repeats", String(held))])
        }
        for c in Array(connections.values) { drive(c, .tick(now: now), now: now) }
    }

    // MARK: performing actions

    /// Feeds `event` to the connection and performs the actions; a `dispatch` answered at once or a `send` produces
    /// the next event, until the state waits for the socket or the responder.
    private func drive(_ c: Connection, _ event: ConnectionEvent, now: UInt64) {
        var next: ConnectionEvent? = event
        while let e = next {
            next = nil
            actions.removeAll(keepingCapacity: true)
            c.state.on(e, into: &actions)
            perform: for action in actions {
                switch action {
                case .interest(let interest):
                    // Cannot poll it: close (the rest of this batch is moot).
                    if !setInterest(c, interest) { next = .hangup; break perform }
                case .dispatch(let request, let number):
                    let context = ResponseContext(loop: self, connectionID: c.id, requestNumber: number)
                    if let response = responder.respond(to: request, context: context) {
                        next = .responded(number, response, now: now)
                    } else {
                        next = .deferred(number)
                    }
                case .send:
                    if uring != nil {
                        if !c.sendQueued {
                            c.sendQueued = true
                            queuedSends.append(c)
                        }
                        break
                    }
                    switch c.state.withPendingOutput({ Posix.send(c.fd, $0) }) {
                    case .bytes(let n): next = .wrote(n, now: now)
                    case .wouldBlock, .endOfStream: next = .writeWouldBlock
                    case .failed: next = .hangup
                    }
                case .shutdownWrite:
                    shutdown(c.fd, Int32(SHUT_WR))
                case .close:
                    closeConnection(c)
                case .fireCloseHooks(let hooks):
                    for h in hooks { h() }
                case .attachStream(let source, let number):
                    let id = c.id
                    source.attach { [self] in enqueue(.streamReady(id, number)) }
                case .pullStream(let source, let limit):
                    next = .pull(source, limit: limit, now: now)
                case .detachStream(let source):
                    source.detach()
                }
            }
        }
        #if DEBUG
        if c.state.peakHeldOutput > peakConnectionOutput.load(ordering: .relaxed) {
            peakConnectionOutput.store(c.state.peakHeldOutput, ordering: .relaxed)
        }
        if c.state.peakHeldInput > peakConnectionInput.load(ordering: .relaxed) {
            peakConnectionInput.store(c.state.peakHeldInput, ordering: .relaxed)
        }
        #endif
    }

    private func setInterest(_ c: Connection, _ interest: Interest) -> Bool {
        var mask: UInt32 = 0
        // RDHUP only while reading: once the peer's FIN has been read (or reading is paused) a level-triggered
        // RDHUP would be reported on every epoll_wait and spin the loop (a half-closed long poll did, at 100% CPU).
        if interest.contains(.read) { mask |= EPOLLIN.rawValue | EPOLLRDHUP.rawValue }
        if interest.contains(.write) { mask |= EPOLLOUT.rawValue }
        let op = c.registered ? EPOLL_CTL_MOD : EPOLL_CTL_ADD
        c.registered = true
        do { try ctl(op, c.fd, mask, tag: c.id) } catch { return false }
        return true
    }

    private func closeConnection(_ c: Connection) {
        guard connections.removeValue(forKey: c.id) != nil else { return }
        var ev = epoll_event()
        _ = epoll_ctl(epfd, EPOLL_CTL_DEL, c.fd, &ev)
        close(c.fd)
        connectionCount.wrappingSubtract(1, ordering: .relaxed)
        admission.release(c.peer)
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
