@testable import HTTPServer
import Synchronization
import XCTest

/// A connection driven the way the event loop drives it, without sockets: a client that writes bytes, a socket with a
/// bounded send buffer, a responder, and a clock the test moves by hand.
struct Harness {
    var state: ConnectionState
    /// The injected monotonic clock (nanoseconds).
    var now: UInt64 = 5_000_000_000
    /// What the client has received.
    var wire: [UInt8] = []
    /// Bytes the socket takes before `send` would block (nil: unbounded).
    var room: Int?
    /// At most this many bytes per `send` (a partial write), nil: all it can.
    var sendChunk: Int?
    var sends = 0
    var dispatched: [(request: HTTPRequest, number: UInt64)] = []
    var interest: Interest? = nil
    var closed = false
    var shutWrite = false
    var firedHooks: [@Sendable () -> Void] = []
    /// Streams attached (with the request number) and detached, and the wake-up of the last attached one.
    var attached: [UInt64] = []
    var detached = 0
    var wake: (@Sendable () -> Void)? = nil
    /// Answers at once when it returns a response; nil defers (the test answers with `respond`).
    var responder: (HTTPRequest) -> HTTPResponse? = { r in HTTPResponse(status: 200, body: Array("\(r.method) \(r.path)".utf8)) }

    init(policy: ConnectionPolicy = ConnectionPolicy(), budget: OutputBudget? = nil) {
        state = ConnectionState(config: .init(policy, budget: budget), remote: "127.0.0.1", now: 5_000_000_000)
        feed(.opened)
    }

    mutating func advance(seconds: Double) { now += UInt64(seconds * 1e9) }

    /// Feeds one event and performs its actions as the loop does, following `dispatch` and `send` with their events.
    mutating func feed(_ event: ConnectionEvent) {
        var next: ConnectionEvent? = event
        while let e = next {
            next = nil
            let actions = state.on(e)
            for (i, a) in actions.enumerated() {
                switch a {
                case .interest(let x):
                    interest = x
                case .dispatch(let r, let n):
                    XCTAssertEqual(i, actions.count - 1, "dispatch ends a batch")
                    dispatched.append((r, n))
                    if let response = responder(r) { next = .responded(n, response, now: now) } else { next = .deferred(n) }
                case .send:
                    XCTAssertEqual(i, actions.count - 1, "send ends a batch")
                    XCTAssertFalse(closed)
                    sends += 1
                    var n = min(state.pendingOutput, sendChunk ?? Int.max)
                    XCTAssertGreaterThan(n, 0, "send with nothing pending")
                    if let r = room { n = min(n, r) }
                    if n == 0 {
                        next = .writeWouldBlock
                    } else {
                        state.withPendingOutput { wire.append(contentsOf: $0.prefix(n)) }
                        if room != nil { room! -= n }
                        next = .wrote(n, now: now)
                    }
                case .shutdownWrite:
                    shutWrite = true
                case .close:
                    XCTAssertFalse(closed, "closed twice")
                    closed = true
                case .fireCloseHooks(let hooks):
                    XCTAssertTrue(closed, "hooks run after the close")
                    firedHooks += hooks
                    for h in hooks { h() }
                case .attachStream(let source, let n):
                    attached.append(n)
                    source.attach { }
                case .pullStream(let source, let limit):
                    XCTAssertEqual(i, actions.count - 1, "pull ends a batch")
                    next = .pull(source, limit: limit, now: now)
                case .detachStream(let source):
                    detached += 1
                    source.detach()
                }
            }
        }
    }

    mutating func receive(_ text: String) { feed(.received(ArraySlice(text.utf8), now: now)) }
    mutating func respond(_ number: UInt64, _ response: HTTPResponse) { feed(.responded(number, response, now: now)) }
    mutating func tick() { feed(.tick(now: now)) }

    /// The client reads `n` bytes from the socket buffer: room grows, and a blocked connection hears EPOLLOUT.
    mutating func clientReads(_ n: Int) {
        room = (room ?? 0) + n
        if interest?.contains(.write) == true { feed(.writable) }
    }

    var text: String { String(decoding: wire, as: UTF8.self) }

    /// Status codes of the responses on the wire, in order (bodies never contain "HTTP/1.1 ").
    var statuses: [Int] {
        text.components(separatedBy: "HTTP/1.1 ").dropFirst().compactMap { Int($0.prefix(3)) }
    }
}

final class ConnectionStateTests: XCTestCase {
    func response(_ body: String, close: Bool = false) -> HTTPResponse {
        HTTPResponse(status: 200, body: Array(body.utf8), closeConnection: close)
    }

    // MARK: pipelining

    func testPipelinedRequestsInOneReadAreAnsweredInOrder() {
        var h = Harness()
        XCTAssertEqual(h.interest, [.read])
        h.receive("GET /a HTTP/1.1\r\n\r\nPOST /b HTTP/1.1\r\nContent-Length: 3\r\n\r\nxyzGET /c HTTP/1.1\r\n\r\n")
        XCTAssertEqual(h.dispatched.map(\.request.path), ["/a", "/b", "/c"])
        XCTAssertEqual(h.dispatched.map(\.number), [1, 2, 3])
        XCTAssertEqual(h.dispatched[1].request.body, Array("xyz".utf8))
        XCTAssertEqual(h.statuses, [200, 200, 200])
        let bodies = h.text.components(separatedBy: "\r\n\r\n").dropFirst().map { String($0.prefix(while: { $0 != "H" })) }
        XCTAssertEqual(bodies, ["GET /a", "POST /b", "GET /c"])
        XCTAssertEqual(h.sends, 1, "answers given at once go out in one send")
        XCTAssertFalse(h.closed)
        XCTAssertTrue(h.state.isIdle)
    }

    func testOneRequestInFlightAndAnswersInOrderWhenDeferred() {
        var h = Harness()
        h.responder = { _ in nil }
        h.receive("GET /1 HTTP/1.1\r\n\r\nGET /2 HTTP/1.1\r\n\r\nGET /3 HTTP/1.1\r\n\r\n")
        XCTAssertEqual(h.dispatched.map(\.number), [1], "the next request waits for this one's answer")
        h.respond(2, response("wrong"))  // not in flight: ignored
        XCTAssertTrue(h.wire.isEmpty)
        h.respond(1, response("one"))
        XCTAssertEqual(h.dispatched.map(\.number), [1, 2])
        h.respond(1, response("again"))  // answered already: ignored
        h.respond(2, response("two"))
        h.respond(3, response("three"))
        XCTAssertEqual(h.text.components(separatedBy: "\r\n\r\n").dropFirst().map { String($0.prefix(while: { $0 != "H" })) },
                       ["one", "two", "three"])
    }

    func testConnectionCloseRequestEndsThePipeline() {
        var h = Harness()
        h.receive("GET /a HTTP/1.1\r\nConnection: close\r\n\r\nGET /b HTTP/1.1\r\n\r\n")
        XCTAssertEqual(h.dispatched.map(\.request.path), ["/a"])
        XCTAssertTrue(h.text.contains("Connection: close\r\n"))
        XCTAssertTrue(h.shutWrite, "lingering close: our side shuts, the client's bytes are drained")
        XCTAssertFalse(h.closed)
        XCTAssertEqual(h.interest, [.read])
        h.receive("more junk")
        XCTAssertEqual(h.dispatched.count, 1)
        h.feed(.endOfInput)
        XCTAssertTrue(h.closed)
    }

    func testHTTP10DefaultsToCloseAndHeadHasNoBody() {
        var h = Harness()
        h.receive("HEAD /x HTTP/1.1\r\n\r\n")
        XCTAssertTrue(h.text.hasSuffix("Content-Length: 7\r\n\r\n"), h.text)
        h.wire = []
        h.receive("GET /y HTTP/1.0\r\n\r\n")
        XCTAssertTrue(h.text.contains("Connection: close\r\n"))
        XCTAssertTrue(h.text.hasSuffix("GET /y"))
        XCTAssertTrue(h.shutWrite)
    }

    // MARK: half-close

    func testHalfCloseAnswersEveryPipelinedRequestBeforeClosing() {
        // The old loop closed as soon as the output drained after the FIN, dropping requests still unread behind a
        // large answer (backpressure stops parsing at 1 MiB of pending output).
        var h = Harness()
        let big = [UInt8](repeating: 0x61, count: 1_500_000)
        h.responder = { r in HTTPResponse(status: 200, body: r.path == "/big" ? big : Array(r.path.utf8)) }
        h.room = 100_000
        h.receive("GET /big HTTP/1.1\r\n\r\nGET /big HTTP/1.1\r\n\r\nGET /small HTTP/1.1\r\n\r\n")
        h.feed(.endOfInput)
        XCTAssertEqual(h.dispatched.count, 1, "parsing waits while a MiB is pending")
        XCTAssertFalse(h.closed)
        XCTAssertEqual(h.interest, [.write], "no read interest after the FIN (no RDHUP spin)")
        while !h.closed {
            let before = h.wire.count
            h.clientReads(2_000_000)  // reads fast: one EPOLLOUT drains everything pending
            if h.wire.count == before && !h.closed { return XCTFail("stalled at \(h.wire.count) bytes") }
        }
        XCTAssertEqual(h.dispatched.map(\.request.path), ["/big", "/big", "/small"])
        XCTAssertEqual(h.statuses, [200, 200, 200])
        XCTAssertTrue(h.text.hasSuffix("/small"))
        XCTAssertFalse(h.shutWrite, "the client already left: close, no linger")
    }

    func testHalfCloseWithDeferredAnswerStillAnswers() {
        var h = Harness()
        h.responder = { r in r.path == "/later" ? nil : HTTPResponse(status: 200, body: Array(r.path.utf8)) }
        h.receive("GET /later HTTP/1.1\r\n\r\nGET /next HTTP/1.1\r\n\r\n")
        h.feed(.endOfInput)
        XCTAssertEqual(h.interest, [], "a half-closed connection waiting for its answer asks for no events")
        XCTAssertFalse(h.closed)
        h.respond(1, response("later"))
        XCTAssertEqual(h.dispatched.map(\.request.path), ["/later", "/next"])
        XCTAssertTrue(h.text.hasSuffix("/next"))
        XCTAssertTrue(h.closed)
    }

    func testHalfCloseMidRequestClosesWithoutAnswer() {
        var h = Harness()
        h.receive("GET /a HTTP/1.1\r\n\r\nPOST /b HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc")
        h.feed(.endOfInput)
        XCTAssertEqual(h.statuses, [200])
        XCTAssertTrue(h.closed)
    }

    // MARK: close hooks

    func testDeferredRequestWhoseClientLeavesFiresItsHooksOnce() {
        var h = Harness()
        h.responder = { _ in nil }
        let fired = Atomic<Int>(0)
        h.receive("GET /poll HTTP/1.1\r\n\r\n")
        h.feed(.closeHook(1, { fired.wrappingAdd(1, ordering: .relaxed) }))
        h.feed(.closeHook(7, { fired.wrappingAdd(100, ordering: .relaxed) }))  // another request's: never runs
        XCTAssertEqual(fired.load(ordering: .relaxed), 0)
        h.feed(.endOfInput)  // the client half-closes: a poll's client is gone
        XCTAssertTrue(h.closed)
        XCTAssertEqual(fired.load(ordering: .relaxed), 1)
        // Whatever happens next, the hook does not run again and nothing is written.
        h.feed(.hangup)
        h.feed(.endOfInput)
        h.respond(1, response("late"))
        h.advance(seconds: 1000)
        h.tick()
        XCTAssertEqual(fired.load(ordering: .relaxed), 1)
        XCTAssertTrue(h.wire.isEmpty)
    }

    func testHooksRunOnHangupAndOnlyForTheRequestInFlight() {
        var h = Harness()
        h.responder = { _ in nil }
        let fired = Atomic<Int>(0)
        h.receive("GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\n\r\n")
        h.feed(.closeHook(1, { fired.wrappingAdd(1, ordering: .relaxed) }))
        h.respond(1, response("a"))  // answered: its hook is dropped
        h.feed(.closeHook(1, { fired.wrappingAdd(10, ordering: .relaxed) }))  // late, for an answered request
        h.feed(.closeHook(2, { fired.wrappingAdd(100, ordering: .relaxed) }))
        h.feed(.hangup)
        XCTAssertTrue(h.closed)
        XCTAssertEqual(fired.load(ordering: .relaxed), 100)
        XCTAssertEqual(h.firedHooks.count, 1)
    }

    func testHookArrivingAfterTheClientHalfClosedClosesAtOnce() {
        var h = Harness()
        h.responder = { _ in nil }
        let fired = Atomic<Int>(0)
        h.receive("GET /late HTTP/1.1\r\n\r\n")
        h.feed(.endOfInput)
        XCTAssertFalse(h.closed, "no hook yet: the request may still be answered")
        h.feed(.closeHook(1, { fired.wrappingAdd(1, ordering: .relaxed) }))
        XCTAssertTrue(h.closed)
        XCTAssertEqual(fired.load(ordering: .relaxed), 1)
        // A hook for a connection already closed runs at once.
        h.feed(.closeHook(1, { fired.wrappingAdd(1, ordering: .relaxed) }))
        XCTAssertEqual(fired.load(ordering: .relaxed), 2)
    }

    // MARK: writes and backpressure

    func testLargeResponseAcrossManyPartialWritesArrivesWhole() {
        var h = Harness()
        var body = [UInt8](repeating: 0, count: 5_000_003)
        var x: UInt32 = 12345
        for i in body.indices { x = x &* 1_103_515_245 &+ 12345; body[i] = UInt8(truncatingIfNeeded: x >> 16) }
        h.responder = { r in HTTPResponse(status: 200, body: r.path == "/big" ? body : Array("small".utf8)) }
        h.sendChunk = 7919
        h.room = 0
        h.receive("GET /big HTTP/1.1\r\n\r\n")
        XCTAssertEqual(h.interest, [.write], "reading pauses while a MiB or more is pending")
        var rounds = 0
        while h.state.pendingOutput > 0 {
            rounds += 1
            h.clientReads(33_333 + rounds % 7)
            h.advance(seconds: 0.01)
        }
        XCTAssertGreaterThan(h.sends, 600)
        XCTAssertEqual(h.interest, [.read], "drained: write interest off, reading again")
        let head = "HTTP/1.1 200 OK\r\nContent-Length: 5000003\r\n\r\n"
        XCTAssertEqual(h.wire.count, head.utf8.count + body.count)
        XCTAssertEqual(Array(h.wire[0..<head.utf8.count]), Array(head.utf8))
        XCTAssertTrue(h.wire[head.utf8.count...].elementsEqual(body))
        XCTAssertFalse(h.closed)
        h.room = nil
        h.wire = []
        h.receive("GET /next HTTP/1.1\r\n\r\n")
        XCTAssertTrue(h.text.hasSuffix("small"))
    }

    func testInputIsCappedWhileARequestIsInFlight() {
        var policy = ConnectionPolicy()
        policy.limits.maxHeadBytes = 1024
        policy.limits.maxBodyBytes = 1024
        var h = Harness(policy: policy)
        h.responder = { _ in nil }
        h.receive("GET /a HTTP/1.1\r\n\r\n")
        XCTAssertTrue(h.state.wantsInput)
        h.receive(String(repeating: "GET /b HTTP/1.1\r\n\r\n", count: 4000))
        XCTAssertFalse(h.state.wantsInput)
        XCTAssertEqual(h.interest, [], "stop reading until the answer")
        h.responder = { _ in HTTPResponse(status: 204) }
        h.respond(1, HTTPResponse(status: 204))
        XCTAssertEqual(h.dispatched.count, 4001)
        XCTAssertEqual(h.interest, [.read])
    }

    /// Pipelined requests behind one in flight are read ahead at most 64 KiB (before, up to the 1.1 MiB a single
    /// request may take); the request being received may still take all of that.
    func testPipelinedInputIsReadAheadAtMost64KiBBehindARequestInFlight() {
        var h = Harness()
        h.responder = { _ in nil }
        h.receive("GET /a HTTP/1.1\r\n\r\n")
        XCTAssertTrue(h.state.wantsInput)
        h.receive(String(repeating: "GET /b HTTP/1.1\r\n\r\n", count: 3500))
        XCTAssertGreaterThan(h.state.unreadInput, h.state.config.readAhead)
        XCTAssertFalse(h.state.wantsInput, "64 KiB read ahead: stop reading until the answer")
        h.responder = { _ in HTTPResponse(status: 204) }
        h.respond(1, HTTPResponse(status: 204))
        XCTAssertEqual(h.dispatched.count, 3501)
        XCTAssertTrue(h.state.wantsInput)
        // Nothing in flight: a large request is read whole (the parser bounds it).
        h.receive("POST /c HTTP/1.1\r\nContent-Length: 1000000\r\n\r\n" + String(repeating: "z", count: 900_000))
        XCTAssertTrue(h.state.wantsInput)
        h.receive(String(repeating: "z", count: 100_000))
        XCTAssertEqual(h.dispatched.last?.request.body.count, 1_000_000)
    }

    /// A client that reads its pipelined answers slowly: the connection holds at most its high-water mark, one answer
    /// and 64 KiB already sent (the sent bytes are dropped before more answers are added), and every answer arrives
    /// in order. Before, sent bytes stayed until a whole MiB of them had gone: twice the mark.
    func testASlowReaderOfPipelinedAnswersHoldsAtMostTheMarkAndOneAnswer() {
        var h = Harness()
        let filler = [UInt8](repeating: 0x2E, count: 2000)
        h.responder = { r in HTTPResponse(status: 200, body: Array(r.path.utf8) + filler) }
        h.room = 0
        h.sendChunk = 7919
        h.receive((0..<5000).map { "GET /\($0) HTTP/1.1\r\n\r\n" }.joined())
        XCTAssertGreaterThanOrEqual(h.state.pendingOutput, h.state.config.outputHighWater, "parsing stops at the mark")
        XCTAssertLessThan(h.dispatched.count, 5000)
        while h.state.pendingOutput > 0 { h.clientReads(5003) }
        XCTAssertEqual(h.dispatched.count, 5000)
        var expected: [UInt8] = []
        for k in 0..<5000 {
            HTTPResponse(status: 200, body: Array("/\(k)".utf8) + filler).serialize(into: &expected, keepAlive: true, versionMinor: 1, headOnly: false)
        }
        XCTAssertTrue(h.wire == expected, "every answer, in order")
        let answer = expected.count / 5000 + 10
        XCTAssertLessThanOrEqual(h.state.peakHeldOutput, h.state.config.outputHighWater + answer + ConnectionState.compactAfter)
    }

    /// With the server's output budget used up by others, a connection parses on only while it holds less than the
    /// floor; once the budget has room it goes on to its mark or the budget, and what it charged is returned when
    /// its client reads and when it closes.
    func testAUsedUpBudgetStopsAConnectionAtTheFloor() {
        let budget = OutputBudget(limit: 100_000)
        budget.charge(100_000)  // held by other connections
        var h = Harness(budget: budget)
        let filler = [UInt8](repeating: 0x2E, count: 2000)
        h.responder = { _ in HTTPResponse(status: 200, body: filler) }
        h.room = 0
        h.receive(String(repeating: "GET /n HTTP/1.1\r\n\r\n", count: 300))
        let answer = h.state.heldOutput / h.dispatched.count
        XCTAssertGreaterThanOrEqual(h.state.heldOutput, OutputBudget.floor)
        XCTAssertLessThan(h.state.heldOutput - answer, OutputBudget.floor, "stopped at the first answer past the floor")
        XCTAssertFalse(h.state.wantsInput)
        XCTAssertEqual(budget.bytes, 100_000 + h.state.heldOutput - OutputBudget.floor)
        // Reading a little changes nothing while the budget is used up.
        let parsed = h.dispatched.count
        h.clientReads(1)
        XCTAssertEqual(h.dispatched.count, parsed)
        // The others let go: on to the budget (its first 100,000 bytes past the floor), not to the mark.
        budget.charge(-100_000)
        h.clientReads(1)
        XCTAssertTrue(budget.isExhausted)
        XCTAssertLessThan(budget.bytes, 100_000 + answer)
        XCTAssertLessThan(h.state.pendingOutput, h.state.config.outputHighWater)
        // The client reads everything: every answer, and nothing charged.
        h.clientReads(1 << 30)
        XCTAssertEqual(h.dispatched.count, 300)
        XCTAssertEqual(h.statuses.count, 300)
        XCTAssertEqual(budget.bytes, 0)
        // A connection that closes with answers unread returns its charge.
        h.room = 0
        h.receive(String(repeating: "GET /n HTTP/1.1\r\n\r\n", count: 300))
        XCTAssertGreaterThan(budget.bytes, 0)
        h.feed(.hangup)
        XCTAssertEqual(budget.bytes, 0)
    }

    /// Closed connections report the buffers they let go of; once 16 MiB went, the loop is told (once, and then at
    /// most once a second) to give free memory back to the system.
    func testClosedConnectionsBuffersLeadToOneTrim() {
        let budget = OutputBudget(limit: 1 << 30)
        var released = 0
        var now: UInt64 = 10_000_000_000
        while released < OutputBudget.trimAfter {
            var h = Harness(budget: budget)
            h.room = 0
            h.receive(String(repeating: "GET /n HTTP/1.1\r\n\r\n", count: 3000))
            released += h.state.outputCapacity + h.state.inputCapacity
            XCTAssertFalse(budget.shouldTrim(now: now), "not before 16 MiB were released")
            h.feed(.hangup)
            now += 1_000_000
        }
        XCTAssertTrue(budget.shouldTrim(now: now))
        XCTAssertFalse(budget.shouldTrim(now: now), "once")
        budget.noteReleased(OutputBudget.trimAfter)
        XCTAssertFalse(budget.shouldTrim(now: now + 500_000_000), "at most once a second")
        XCTAssertTrue(budget.shouldTrim(now: now + 1_000_000_000))
    }

    // MARK: timeouts (injected clock)

    func testSlowReaderIsDroppedAfterNoWriteProgress() {
        var policy = ConnectionPolicy()
        policy.writeTimeoutSeconds = 60
        var h = Harness(policy: policy)
        h.responder = { _ in HTTPResponse(status: 200, body: [UInt8](repeating: 1, count: 300_000)) }
        h.room = 50_000
        h.receive("GET /big HTTP/1.1\r\n\r\n")
        XCTAssertEqual(h.interest, [.read, .write])
        h.advance(seconds: 59)
        h.tick()
        XCTAssertFalse(h.closed)
        h.clientReads(10)  // a little progress restarts the clock
        h.advance(seconds: 59)
        h.tick()
        XCTAssertFalse(h.closed)
        h.advance(seconds: 2)
        h.tick()
        XCTAssertTrue(h.closed, "no progress for more than the write timeout")
    }

    func testWriteClockStartsWhenALateAnswerIsQueued() {
        // A long poll answered after the write timeout, into a socket buffer the client has not drained yet, is not
        // dropped at the next tick: the clock counts from when there was something to write.
        var h = Harness()
        h.responder = { _ in nil }
        h.receive("GET /poll HTTP/1.1\r\n\r\n")
        h.advance(seconds: 120)
        h.room = 0
        h.respond(1, response("late"))
        XCTAssertEqual(h.interest, [.read, .write])
        h.advance(seconds: 1)
        h.tick()
        XCTAssertFalse(h.closed)
        h.clientReads(1000)
        XCTAssertTrue(h.text.hasSuffix("late"))
    }

    func testIncompleteRequestGets408AfterTheRequestTimeout() {
        var policy = ConnectionPolicy()
        policy.requestTimeoutSeconds = 15
        var h = Harness(policy: policy)
        h.receive("POST /x HTTP/1.1\r\nContent-Length: 10\r\n\r\nab")
        h.advance(seconds: 10)
        h.receive("cd")  // bytes trickling in do not extend the deadline
        h.advance(seconds: 5)
        h.tick()
        XCTAssertTrue(h.wire.isEmpty)
        h.advance(seconds: 0.001)
        h.tick()
        XCTAssertEqual(h.statuses, [408])
        XCTAssertTrue(h.text.contains("Connection: close"))
        XCTAssertTrue(h.text.contains("Content-Type: text/plain"), "the server's own rendering knows nothing of Google")
        XCTAssertTrue(h.shutWrite)
        XCTAssertFalse(h.closed)
        h.advance(seconds: 2.5)
        h.tick()
        XCTAssertTrue(h.closed, "the linger ends")
    }

    func testRequestClockStartsWhenTheServerIsReadyForIt() {
        // A partial request read behind a deferred one is timed from that one's answer, not from its arrival.
        var h = Harness()
        h.responder = { r in r.path == "/slow" ? nil : HTTPResponse(status: 200) }
        h.receive("GET /slow HTTP/1.1\r\n\r\nGET /next HTT")
        h.advance(seconds: 30)
        h.tick()
        XCTAssertTrue(h.wire.isEmpty, "nothing times out while a request is in flight")
        h.respond(1, response("slow"))
        h.advance(seconds: 14)
        h.tick()
        XCTAssertEqual(h.statuses, [200])
        h.advance(seconds: 2)
        h.tick()
        XCTAssertEqual(h.statuses, [200, 408])
    }

    func testIdleKeepAliveConnectionClosesAfterTheIdleTimeout() {
        var policy = ConnectionPolicy()
        policy.idleTimeoutSeconds = 300
        var h = Harness(policy: policy)
        h.receive("GET /a HTTP/1.1\r\n\r\n")
        h.advance(seconds: 299)
        h.tick()
        XCTAssertFalse(h.closed)
        h.receive("GET /b HTTP/1.1\r\n\r\n")
        h.advance(seconds: 299)
        h.tick()
        XCTAssertFalse(h.closed)
        h.advance(seconds: 2)
        h.tick()
        XCTAssertTrue(h.closed)
        XCTAssertEqual(h.statuses, [200, 200], "an idle close writes nothing")
    }

    func testAConnectionThatNeverSendsARequestGetsTheRequestTimeoutNotTheIdleTime() {
        // Red team F6: a peer that connects and sends nothing held a descriptor for the whole 300 s idle time.
        var policy = ConnectionPolicy()
        policy.idleTimeoutSeconds = 300
        policy.requestTimeoutSeconds = 15
        var h = Harness(policy: policy)
        h.advance(seconds: 14)
        h.tick()
        XCTAssertFalse(h.closed)
        h.advance(seconds: 2)
        h.tick()
        XCTAssertTrue(h.closed)
        XCTAssertEqual(h.statuses, [], "nothing was asked: the close writes nothing")
    }

    func testStampsLaterThanTheTickNeverWrapIntoTimeouts() {
        // The old loop stamped with a clock read after the iteration's `now`; `now - stamp` wrapped to ~2^64 and gave
        // pipelined requests a spurious 408 and large answers a reset.
        var h = Harness()
        h.responder = { _ in HTTPResponse(status: 200, body: [UInt8](repeating: 2, count: 200_000)) }
        h.room = 10_000
        h.receive("GET /a HTTP/1.1\r\n\r\nGET /b HTT")
        h.feed(.tick(now: h.now - 1_000_000))
        XCTAssertFalse(h.closed)
        h.clientReads(1_000_000)
        h.feed(.tick(now: h.now - 1_000_000))
        XCTAssertEqual(h.statuses, [200])
        XCTAssertFalse(h.closed)
    }

    // MARK: limits

    func status(for request: String, _ configure: (inout ConnectionPolicy) -> Void = { _ in }) -> (Harness, Int?) {
        var policy = ConnectionPolicy()
        configure(&policy)
        var h = Harness(policy: policy)
        h.receive(request)
        return (h, h.statuses.first)
    }

    func testLimitsAnswerWithTheirStatusAndClose() {
        let cases: [(String, Int, (inout ConnectionPolicy) -> Void)] = [
            ("GET / HTTP/1.1\r\nX-Big: \(String(repeating: "a", count: 2000))\r\n\r\n", 431, { $0.limits.maxHeadBytes = 1024 }),
            ("GET / HTTP/1.1\r\nX-Big: \(String(repeating: "a", count: 2000))", 431, { $0.limits.maxHeadBytes = 1024 }),
            ("POST / HTTP/1.1\r\nContent-Length: 2000\r\n\r\n", 413, { $0.limits.maxBodyBytes = 1024 }),
            ("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 411, { _ in }),
            ("BAD\r\n\r\n", 400, { _ in }),
            ("GET / HTTP/2.0\r\n\r\n", 505, { _ in }),
        ]
        for (request, expected, configure) in cases {
            let (h, status) = status(for: request, configure)
            XCTAssertEqual(status, expected, request)
            XCTAssertTrue(h.text.contains("Connection: close\r\n"))
            XCTAssertTrue(h.shutWrite)
            XCTAssertEqual(h.dispatched.count, 0)
        }
    }

    func testErrorAfterGoodRequestsKeepsTheirAnswersAndDropsTheRest() {
        var h = Harness()
        h.receive("GET /a HTTP/1.1\r\n\r\nBAD\r\n\r\nGET /c HTTP/1.1\r\n\r\n")
        XCTAssertEqual(h.statuses, [200, 400])
        XCTAssertEqual(h.dispatched.map(\.request.path), ["/a"])
    }

    func testErrorRenderingIsInjected() {
        var policy = ConnectionPolicy()
        policy.renderError = { e in HTTPResponse(status: e.status, body: Array("custom \(e.status)".utf8)) }
        var h = Harness(policy: policy)
        h.receive("BAD\r\n\r\n")
        XCTAssertTrue(h.text.hasPrefix("HTTP/1.1 400 "))
        XCTAssertTrue(h.text.contains("Connection: close\r\n"), "closes even if the renderer forgot to ask")
        XCTAssertTrue(h.text.hasSuffix("custom 400"))
    }

    // MARK: stopping

    func testStopClosesIdleConnectionsAndEndsBusyOnesAfterTheirAnswer() {
        var idle = Harness()
        idle.receive("GET /a HTTP/1.1\r\n\r\n")
        idle.feed(.stop)
        XCTAssertTrue(idle.closed)

        var busy = Harness()
        busy.responder = { _ in nil }
        busy.receive("GET /a HTTP/1.1\r\n\r\n")
        busy.feed(.stop)
        XCTAssertFalse(busy.closed)
        busy.respond(1, response("bye"))
        XCTAssertTrue(busy.text.contains("Connection: close\r\n"))
        XCTAssertTrue(busy.shutWrite)
    }
}
