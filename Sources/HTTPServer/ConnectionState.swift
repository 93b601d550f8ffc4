/// What happened to a connection, as the event loop tells its `ConnectionState`. Times are one monotonic reading
/// (nanoseconds) per loop iteration, so no stamp is ever later than the `now` a timeout is checked against.
enum ConnectionEvent: Sendable {
    /// The connection was accepted: the state asks for its first interest.
    case opened
    /// `recv` returned these bytes.
    case received(ArraySlice<UInt8>, now: UInt64)
    /// `recv` returned 0: the peer shut its sending side (FIN; what `EPOLLRDHUP` announces).
    case endOfInput
    /// The socket is unusable (`EPOLLERR`, `EPOLLHUP`, a failed `recv`/`send`/`epoll_ctl`) or the server gives up on it.
    case hangup
    /// `EPOLLOUT`: the socket takes bytes again.
    case writable
    /// `EPOLLIN` while the state wants no input: reading was paused by something outside the connection (the server's
    /// output budget used up by others) since it last chose its interest; it chooses again (level-triggered input
    /// left armed would be reported on every `epoll_wait`).
    case readable
    /// `send` took `n` (> 0) bytes of the pending output.
    case wrote(Int, now: UInt64)
    /// `send` would block: wait for `writable`.
    case writeWouldBlock
    /// The answer to request number `k` (from the responder, on the loop or handed over from another thread).
    case responded(UInt64, HTTPResponse, now: UInt64)
    /// The responder will answer request number `k` later (it returned nil).
    case deferred(UInt64)
    /// A close hook for request number `k` (`ResponseContext.onClose`).
    case closeHook(UInt64, @Sendable () -> Void)
    /// The periodic timer: timeouts are decided against `now`.
    case tick(now: UInt64)
    /// The stream of request number `k` has something (its source's `wake`).
    case streamReady(UInt64)
    /// Pull the stream now (the loop's answer to `.pullStream`): the source writes straight into the pending output,
    /// no copy of what it wrote (an event stream's bytes are otherwise copied once more per reader).
    case pull(any HTTPStreamSource, limit: Int, now: UInt64)
    /// The server is shutting down: finish what is in flight, keep nothing alive.
    case stop
}

/// Which readiness the connection wants reported.
struct Interest: OptionSet, Sendable, Hashable {
    let rawValue: UInt8
    static let read = Interest(rawValue: 1)
    static let write = Interest(rawValue: 2)
}

/// What the event loop must do for a connection, in order. `dispatch` and `send` need an answer (the event their
/// system call or the responder produced) and are always the last action of a batch.
enum ConnectionAction: Sendable {
    /// Register or change the epoll interest (read includes `EPOLLRDHUP`).
    case interest(Interest)
    /// Hand request number `k` to the responder; feed back `.responded` if it answers at once, else `.deferred`.
    case dispatch(HTTPRequest, UInt64)
    /// One `send` of `pendingOutput`; feed back `.wrote`, `.writeWouldBlock` or `.hangup`.
    case send
    /// `shutdown(SHUT_WR)`: the lingering close of a connection that answered its last response.
    case shutdownWrite
    /// Close the socket and forget the connection.
    case close
    /// Run these hooks (after `close`): the client left before its request was answered.
    case fireCloseHooks([@Sendable () -> Void])
    /// Give the stream of request `k` its wake-up (`HTTPStreamSource.attach`).
    case attachStream(any HTTPStreamSource, UInt64)
    /// Pull up to `limit` bytes from the stream: feed back `.pull` when it may run. Always the last action of a batch.
    case pullStream(any HTTPStreamSource, limit: Int)
    /// The stream is over: `HTTPStreamSource.detach`.
    case detachStream(any HTTPStreamSource)
}

/// One connection as a value: the HTTP parser, buffers, pipelining (one request in flight, answers in order),
/// backpressure, limits and timeouts. No I/O and no clock: the event loop feeds events and performs the actions.
struct ConnectionState {
    struct Config {
        var requestTimeout: UInt64
        var idleTimeout: UInt64
        var writeTimeout: UInt64
        var linger: UInt64
        var limits: HTTPLimits
        /// Stop reading while this much input is unread and no request is in flight (the request being received: the
        /// parser refuses one past the head and body limits).
        var inputCap: Int
        /// Stop reading while this much input is unread behind a request in flight (pipelined requests read ahead).
        var readAhead: Int
        /// Stop parsing and reading while this much output waits for the client: the connection holds at most this,
        /// one answer and `compactAfter` bytes already sent.
        var outputHighWater: Int
        /// The server's budget for unread output, shared by every connection (nil: none).
        var budget: OutputBudget?
        var renderError: @Sendable (HTTPParseError) -> HTTPResponse

        init(_ p: ConnectionPolicy, budget: OutputBudget? = nil) {
            func nanos(_ s: Double) -> UInt64 { s <= 0 ? 0 : s >= 1e9 ? UInt64(1e18) : UInt64(s * 1e9) }
            requestTimeout = nanos(p.requestTimeoutSeconds)
            idleTimeout = nanos(p.idleTimeoutSeconds)
            writeTimeout = nanos(p.writeTimeoutSeconds)
            linger = nanos(p.lingerSeconds)
            limits = p.limits
            inputCap = p.limits.maxHeadBytes + p.limits.maxBodyBytes + 65536
            readAhead = 65536
            outputHighWater = max(1, p.outputHighWaterBytes)
            self.budget = budget
            renderError = p.renderError
        }
    }

    private struct InFlight {
        let number: UInt64
        let keepAlive: Bool
        let versionMinor: Int
        let head: Bool
    }

    let config: Config
    let remote: String

    /// A streamed response in progress (the in-flight request stays in flight until it ends).
    private struct Streaming {
        let body: HTTPStreamBody
        /// Pull when the output is below `streamLowWater`.
        var wantsPull = true
        var lastWrite: UInt64
        let keepAliveNanos: UInt64
    }
    private var stream: Streaming? = nil
    /// A stream is pulled only while less than this waits for the client.
    static let streamLowWater = 64 * 1024
    var isStreaming: Bool { stream != nil }

    private var input: [UInt8] = []
    private var inputStart = 0
    private var parser: HTTPRequestParser
    private var output: [UInt8] = []
    private var outputStart = 0
    private var inFlight: InFlight? = nil
    /// Requests dispatched so far; the in-flight one is number `requestNumber`.
    private(set) var requestNumber: UInt64 = 0
    private var closeHooks: [@Sendable () -> Void] = []
    /// What this connection counts against `config.budget` now: the output it holds past `OutputBudget.floor`.
    private var charged = 0
    /// Output already sent is dropped from the buffer once this much of it precedes what is pending and more may be
    /// appended (a client that reads slowly would otherwise keep up to its whole history of answers).
    static let compactAfter = 65536
    #if DEBUG
    /// The most output this connection has held (pending and sent-but-not-yet-dropped bytes), and the most input
    /// (debug builds, for tests).
    private(set) var peakHeldOutput = 0
    private(set) var peakHeldInput = 0
    #endif

    /// The peer's FIN was read: nothing more will arrive.
    private(set) var readClosed = false
    /// The response being written is the last one.
    private var closeAfterFlush = false
    /// Our side is shut (last response written); what the client still sends is drained and dropped.
    private(set) var lingering = false
    private(set) var closed = false
    private var stopping = false
    /// The last `send` would block: write interest is armed until the output drains.
    private var writeBlocked = false
    /// The interest last asked of the loop (nil: never registered).
    private var interest: Interest? = nil

    /// The latest time seen in an event.
    private var clock: UInt64
    /// When the incomplete request in the input began to be awaited (nil: none).
    private var requestStartedAt: UInt64? = nil
    private var lastActivity: UInt64
    private var lastWriteProgress: UInt64

    init(config: Config, remote: String, now: UInt64) {
        self.config = config
        self.remote = remote
        parser = HTTPRequestParser(limits: config.limits)
        clock = now
        lastActivity = now
        lastWriteProgress = now
    }

    var unreadInput: Int { input.count - inputStart }
    var pendingOutput: Int { output.count - outputStart }
    /// The bytes the output buffer holds: what is pending and what was sent but not dropped yet.
    var heldOutput: Int { output.count }
    var outputCapacity: Int { output.capacity }
    var inputCapacity: Int { input.capacity }
    var isAwaitingResponse: Bool { inFlight != nil }

    /// Nothing in flight, buffered or half-parsed.
    var isIdle: Bool { inFlight == nil && unreadInput == 0 && pendingOutput == 0 && !parser.isMidRequest }

    /// Whether the loop should `recv` now (reading pauses under backpressure and stops after the FIN).
    @inline(__always) var wantsInput: Bool {
        !closed && !readClosed && (lingering || (!closeAfterFlush && mayAddAnswer && inputRoom > 0))
    }

    /// How many bytes the loop may read now: 0 unless `wantsInput`, then at most what keeps the unread input within
    /// `readAhead` behind a request in flight, or within `inputCap` while a request is received. Set after every
    /// event (a stored value: reading it from the loop costs no copy of the state); the budget part may have changed
    /// since, which costs one read at most (the state then parses nothing and drops its read interest).
    private(set) var readRoom = 0

    @inline(__always) private var inputRoom: Int {
        if lingering || stream != nil { return Int.max }  // drained and dropped
        return (inFlight == nil ? config.inputCap : config.readAhead) - unreadInput
    }

    /// Whether another request may be parsed (and its answer added): less than the high-water mark waits for the
    /// client, and the server's budget is not used up — or this connection holds less than `OutputBudget.floor`,
    /// which every connection may hold whatever the others do (a client that reads its answers is always served).
    @inline(__always) private var mayAddAnswer: Bool { pendingOutput < config.outputHighWater && withinBudget }

    /// A connection the budget holds back holds at least `OutputBudget.floor`, so it has output to send and
    /// resumes as its client reads.
    @inline(__always) private var withinBudget: Bool {
        guard output.count >= OutputBudget.floor, let budget = config.budget else { return true }
        // Counting what this connection added since it last charged (`account` runs after each event).
        return budget.hasRoom(uncharged: output.count - OutputBudget.floor - charged)
    }

    /// The bytes to send next (for `ConnectionAction.send`).
    func withPendingOutput<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
        output.withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0[outputStart...])) }
    }

    /// Feeds one event; returns what the loop must do, in order.
    mutating func on(_ event: ConnectionEvent) -> [ConnectionAction] {
        var actions: [ConnectionAction] = []
        on(event, into: &actions)
        return actions
    }

    /// Feeds one event, appending the actions to `actions` (the loop reuses one buffer).
    mutating func on(_ event: ConnectionEvent, into actions: inout [ConnectionAction]) {
        guard !closed else {
            // The client is gone already: a hook registered now runs at once.
            if case .closeHook(_, let hook) = event { actions.append(.fireCloseHooks([hook])) }
            return
        }
        handle(event, &actions)
        account()
        readRoom = wantsInput ? inputRoom : 0
    }

    @inline(__always) private mutating func handle(_ event: ConnectionEvent, _ actions: inout [ConnectionAction]) {
        switch event {
        case .opened:
            advance(&actions)

        case .received(let bytes, let now):
            see(now)
            lastActivity = clock
            // A closing connection drains and drops what the client still sends; a streaming one serves nothing else.
            if lingering || stream != nil { return }
            if inputStart > 0 {
                // What was parsed goes before more is appended (at most the unread input is moved: a read's worth).
                input.removeFirst(inputStart)
                inputStart = 0
            }
            input.append(contentsOf: bytes)
            advance(&actions)

        case .endOfInput:
            readClosed = true
            // A lingering close is done; a deferred request that asked to know (a long poll) has lost its client.
            if lingering || stream != nil || (inFlight != nil && !closeHooks.isEmpty) { return close(&actions) }
            advance(&actions)

        case .hangup:
            close(&actions)

        case .writable:
            writeBlocked = false
            advance(&actions)

        case .readable:
            advance(&actions)

        case .wrote(let n, let now):
            see(now)
            outputStart += n
            lastWriteProgress = clock
            if outputStart >= output.count {
                output.removeAll(keepingCapacity: output.capacity <= OutputBudget.floor)
                outputStart = 0
                writeBlocked = false
            } else if outputStart >= Self.compactAfter && pendingOutput < config.outputHighWater {
                compactOutput()
            }
            advance(&actions)

        case .writeWouldBlock:
            writeBlocked = true
            advance(&actions)

        case .responded(let number, let response, let now):
            see(now)
            guard let f = inFlight, f.number == number, stream == nil else {  // stale or answered twice
                if let body = response.stream { actions.append(.detachStream(body.source)) }
                return
            }
            if let body = response.stream, !stopping, !f.head {
                // Close-delimited: the head now, the body as the source produces it; close hooks stay until the end.
                startWriteClock()
                response.serialize(into: &output, keepAlive: false, versionMinor: f.versionMinor, headOnly: true)
                let ka = body.keepAliveSeconds <= 0 || body.keepAlive.isEmpty ? UInt64.max : UInt64(min(body.keepAliveSeconds, 1e6) * 1e9)
                stream = Streaming(body: body, lastWrite: clock, keepAliveNanos: ka)
                actions.append(.attachStream(body.source, number))
                return advance(&actions)
            }
            if let body = response.stream { actions.append(.detachStream(body.source)) }  // HEAD, or stopping: the head only
            inFlight = nil
            closeHooks.removeAll()
            let keepAlive = f.keepAlive && !response.closeConnection && !stopping
            startWriteClock()
            response.serialize(into: &output, keepAlive: keepAlive, versionMinor: f.versionMinor, headOnly: f.head)
            if !keepAlive { closeAfterFlush = true }
            advance(&actions)

        case .deferred:
            advance(&actions)  // send what earlier requests left pending, and wait with the right interest

        case .closeHook(let number, let hook):
            guard let f = inFlight, f.number == number else { return }  // answered already: it never runs
            closeHooks.append(hook)
            if readClosed { close(&actions) }  // the peer left before the hook arrived

        case .tick(let now):
            see(now)
            timeouts(&actions)

        case .streamReady(let number):
            guard var s = stream, let f = inFlight, f.number == number else { return }
            s.wantsPull = true
            stream = s
            advance(&actions)

        case .pull(let source, let limit, let now):
            see(now)
            guard var s = stream, s.body.source === source else { return }
            let before = output.count
            let result = source.pull(into: &output, limit: limit)
            if output.count > before {
                startWriteClock()
                s.lastWrite = clock
            }
            switch result {
            case .more: s.wantsPull = true; stream = s
            case .waiting: s.wantsPull = false; stream = s
            case .finished: endStream(&actions)
            }
            advance(&actions)

        case .stop:
            stopping = true
            if stream != nil { endStream(&actions); return advance(&actions) }
            if isIdle { close(&actions) }
        }
    }

    // MARK: transitions

    private mutating func see(_ now: UInt64) {
        if now > clock { clock = now }
    }

    /// `clock - stamp`, never wrapping.
    private func elapsed(since stamp: UInt64) -> UInt64 { clock > stamp ? clock - stamp : 0 }

    /// Decides the next step after any change: dispatch the next request, send, finish, or wait (with the right interest).
    private mutating func advance(_ actions: inout [ConnectionAction]) {
        if lingering { return setInterest(&actions) }
        if let s = stream, s.wantsPull, pendingOutput < Self.streamLowWater, withinBudget {
            return actions.append(.pullStream(s.body.source, limit: Self.streamLowWater - pendingOutput))
        }
        if inFlight == nil && !closeAfterFlush && mayAddAnswer && unreadInput > 0 {
            switch parser.parse(input, from: inputStart, remoteAddress: remote) {
            case .needMore:
                break
            case .request(let request, let consumed):
                inputStart += consumed
                compactInput()
                requestNumber &+= 1
                inFlight = InFlight(number: requestNumber, keepAlive: request.keepAlive && !stopping,
                                    versionMinor: request.versionMinor, head: request.method == "HEAD")
                requestStartedAt = nil
                actions.append(.dispatch(request, requestNumber))
                return
            case .failure(let e):
                fail(e)
            }
        }
        compactInput()
        // The request timer runs while an incomplete request waits for its bytes (not while one is in flight).
        if inFlight == nil && !closeAfterFlush && (unreadInput > 0 || parser.isMidRequest) {
            if requestStartedAt == nil { requestStartedAt = clock }
        } else {
            requestStartedAt = nil
        }
        if pendingOutput > 0 {
            if !writeBlocked { return actions.append(.send) }
            return setInterest(&actions)
        }
        if closeAfterFlush {
            if readClosed { return close(&actions) }
            // Lingering close: stop sending, drain what the client still sends (so it reads our answer, not a reset).
            lingering = true
            lastActivity = clock
            actions.append(.shutdownWrite)
            return setInterest(&actions)
        }
        // After the peer's FIN, once everything it sent is answered: what is left is an incomplete request.
        if readClosed && inFlight == nil { return close(&actions) }
        if stopping && isIdle { return close(&actions) }
        setInterest(&actions)
    }

    /// Answers an HTTP-level failure and closes after it; the rest of the input is dropped.
    private mutating func fail(_ e: HTTPParseError) {
        input.removeAll()
        inputStart = 0
        parser = HTTPRequestParser(limits: config.limits)
        requestStartedAt = nil
        var r = config.renderError(e)
        r.closeConnection = true
        startWriteClock()
        r.serialize(into: &output, keepAlive: false, versionMinor: 1, headOnly: false)
        closeAfterFlush = true
    }

    /// The write timeout counts from when there is something to write: an answer that comes long after the last one
    /// (a long poll) is not charged for the time the output sat empty.
    private mutating func startWriteClock() {
        if pendingOutput == 0 { lastWriteProgress = clock }
    }

    /// Drops the output already sent, before more is appended behind what is pending (less than the high-water
    /// mark: at most that much is copied per `compactAfter` bytes sent). Into a new buffer that fits, so the pages
    /// of a larger one go back (a large answer earlier, or the sent bytes) rather than stay with the connection.
    private mutating func compactOutput() {
        output = Array(output[outputStart...])
        outputStart = 0
    }

    /// Charges the output held past `OutputBudget.floor` to the server's budget (a closed connection holds none).
    /// What a buffer holds is what it occupies: the sent bytes are dropped into a new buffer (`compactOutput`), a
    /// drained one keeps at most `floor` of room, and room past what was written is never touched.
    private mutating func account() {
        #if DEBUG
        if output.count > peakHeldOutput { peakHeldOutput = output.count }
        if input.count > peakHeldInput { peakHeldInput = input.count }
        #endif
        // The common answer, smaller than the floor, leaves the budget alone (not even a reference to it is taken).
        let charge = closed ? 0 : max(0, output.count - OutputBudget.floor)
        guard charge != charged, let budget = config.budget else { return }
        budget.charge(charge - charged)
        charged = charge
    }

    private mutating func compactInput() {
        if inputStart == input.count {
            input.removeAll(keepingCapacity: input.capacity <= 65536)
            inputStart = 0
        } else if inputStart > 65536 {
            input.removeFirst(inputStart)
            inputStart = 0
        }
    }

    private mutating func setInterest(_ actions: inout [ConnectionAction]) {
        var wanted: Interest = []
        if wantsInput { wanted.insert(.read) }
        if pendingOutput > 0 && writeBlocked { wanted.insert(.write) }
        guard wanted != interest else { return }
        interest = wanted
        actions.append(.interest(wanted))
    }

    /// The stream is over: detach its source; the connection closes once the output is sent (close hooks run then).
    private mutating func endStream(_ actions: inout [ConnectionAction]) {
        guard let s = stream else { return }
        stream = nil
        inFlight = nil
        closeAfterFlush = true
        actions.append(.detachStream(s.body.source))
    }

    private mutating func close(_ actions: inout [ConnectionAction]) {
        closed = true
        // Nothing more is sent or parsed: the buffers go now, not when the loop lets go of the connection.
        config.budget?.noteReleased(output.capacity + input.capacity)
        output = []
        outputStart = 0
        input = []
        inputStart = 0
        actions.append(.close)
        if let s = stream {
            stream = nil
            actions.append(.detachStream(s.body.source))
        }
        if !closeHooks.isEmpty {
            actions.append(.fireCloseHooks(closeHooks))
            closeHooks = []
        }
    }

    private mutating func timeouts(_ actions: inout [ConnectionAction]) {
        if lingering {
            if elapsed(since: lastActivity) > config.linger || elapsed(since: lastWriteProgress) > config.linger + config.writeTimeout {
                close(&actions)
            }
            return
        }
        if pendingOutput > 0 {
            // A client that reads nothing of its answer for this long is dropped.
            if elapsed(since: lastWriteProgress) > config.writeTimeout { close(&actions) }
            return
        }
        if var s = stream {
            // A quiet stream writes its keep-alive (a client or proxy that times out idle connections keeps it).
            if elapsed(since: s.lastWrite) >= s.keepAliveNanos {
                startWriteClock()
                output.append(contentsOf: s.body.keepAlive)
                s.lastWrite = clock
                stream = s
                advance(&actions)
            }
            return
        }
        if inFlight != nil { return }
        if let started = requestStartedAt {
            if elapsed(since: started) > config.requestTimeout {
                fail(.timeout)
                advance(&actions)
            }
            return
        }
        // A connection that has not yet sent a whole request gets the request timeout, not the keep-alive idle time:
        // a peer that connects and says nothing must not hold a descriptor for minutes.
        let bound = requestNumber == 0 ? min(config.idleTimeout, config.requestTimeout) : config.idleTimeout
        if elapsed(since: lastActivity) > bound { close(&actions) }
    }
}
