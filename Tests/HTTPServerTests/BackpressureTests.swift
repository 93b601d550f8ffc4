import CSystem
@testable import HTTPServer
import EmulatorSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Answers `/n/K` at once with a body of `NumberedResponder.size` bytes that starts with "K\n"; `/hold` when the
/// test calls `release()`, with the body of `/n/hold`.
final class NumberedResponder: HTTPResponder {
    static let size = 2000
    let held = Locked<[ResponseContext]>([])

    func respond(to request: HTTPRequest, context: ResponseContext) -> HTTPResponse? {
        if request.path == "/hold" {
            held.withLock { $0.append(context) }
            return nil
        }
        return HTTPResponse(status: 200, body: NumberedResponder.body(String(request.path.dropFirst(3))))
    }

    func release() {
        for c in held.withLock({ h -> [ResponseContext] in let all = h; h = []; return all }) {
            c.complete(HTTPResponse(status: 200, body: NumberedResponder.body("hold")))
        }
    }

    static let filler = [UInt8](repeating: UInt8(ascii: "."), count: size)

    static func body(_ k: String) -> [UInt8] {
        var b = Array("\(k)\n".utf8)
        b.append(contentsOf: filler[b.count...])
        return b
    }
}

/// Clients that pipeline requests and do not read the answers: what the server holds for them is bounded per
/// connection (the high-water mark) and in all (the output budget), on real sockets.
final class BackpressureTests: XCTestCase {
    var server: HTTPServer!
    let responder = NumberedResponder()
    var port = 0
    var senders: [NativeThread] = []
    var fds: [Int32] = []

    func start(_ policy: ConnectionPolicy) throws {
        server = HTTPServer(configuration: .init(host: "127.0.0.1", port: 0, eventLoops: 2, policy: policy),
                            responder: responder, logger: Logger(label: "test", level: .critical))
        port = try server.start()
    }

    override func tearDown() {
        fds.forEach { close($0) }
        senders.forEach { $0.join() }
        server?.shutdown()
    }

    /// A connection that sends `count` pipelined requests from a thread of its own (the server stops reading them
    /// while their answers wait) and reads nothing until the test does. Its receive buffer is small (loopback's
    /// kernel buffers would otherwise take megabytes of the answers, and the server's share would be far smaller).
    func pipeline(_ count: Int) -> Int32 {
        let fd = loopbackConnect(port: port, receiveTimeoutSeconds: 20, receiveBuffer: 4096)
        var requests: [UInt8] = []
        for k in 0..<count { requests += Array("GET /n/\(k) HTTP/1.1\r\n\r\n".utf8) }
        let sending = requests
        senders.append(NativeThread.start { sendAll(fd, sending) })
        fds.append(fd)
        return fd
    }

    /// Waits (up to 20 s) until `condition` holds; false if it never did.
    func eventually(_ condition: () -> Bool) -> Bool {
        let deadline = csys_monotonic_ns() + 20_000_000_000
        while !condition() {
            if csys_monotonic_ns() > deadline { return false }
            usleep(2000)
        }
        return true
    }

    /// Reads `count` answers from `fd` and checks they are the numbered bodies 0..<count, in order.
    func assertEveryAnswerInOrder(_ fd: Int32, count: Int, file: StaticString = #filePath, line: UInt = #line) {
        setReceiveBuffer(fd, 1 << 20)  // reading now: faster
        let bodies = readBodies(fd, count: count)
        XCTAssertEqual(bodies.count, count, "every answer arrives", file: file, line: line)
        for (k, body) in bodies.enumerated() where body != NumberedResponder.body(String(k)) {
            XCTFail("answer \(k) is not the answer to request \(k): \(String(decoding: body.prefix(12), as: UTF8.self))", file: file, line: line)
            return
        }
    }

    /// The wire size of one answer (head and body).
    var answerBytes: Int { "HTTP/1.1 200 OK\r\nContent-Length: \(NumberedResponder.size)\r\n\r\n".utf8.count + NumberedResponder.size }

    /// 5,000 pipelined requests (10 MB of answers) never read: the connection stops parsing at its high-water mark,
    /// so it holds at most the mark, one answer and what was already sent but not yet dropped; reading afterwards
    /// gets every answer, in order. (Before, a connection held up to twice a 1 MiB mark: the sent bytes stayed in the
    /// buffer until a whole MiB of them had gone.)
    func testAConnectionThatPipelinesWithoutReadingHoldsAtMostItsMark() throws {
        let policy = ConnectionPolicy()
        try start(policy)
        let mark = policy.outputHighWaterBytes
        let fd = pipeline(5000)
        // The answers pile up to the mark (the kernel's buffers take far less than 10 MB), and stop there.
        XCTAssertTrue(eventually { server.peakConnectionOutput >= mark }, "the unread answers reach the mark: \(server.peakConnectionOutput)")
        assertEveryAnswerInOrder(fd, count: 5000)
        let bound = mark + answerBytes + ConnectionState.compactAfter
        XCTAssertLessThanOrEqual(server.peakConnectionOutput, bound, "held at most the mark, one answer and 64 KiB already sent")
    }

    /// Requests pipelined behind one that is answered later are read ahead at most 64 KiB (before: up to the 1.1 MiB
    /// one request may take, and a 64 KiB read past that); the rest waits in the kernel until the answer.
    func testRequestsBehindADeferredOneAreReadAheadAtMost64KiB() throws {
        try start(ConnectionPolicy())
        let fd = loopbackConnect(port: port, receiveTimeoutSeconds: 20)
        fds.append(fd)
        var requests = Array("GET /hold HTTP/1.1\r\n\r\n".utf8)
        for k in 0..<10_000 { requests += Array("GET /n/\(k) HTTP/1.1\r\n\r\n".utf8) }  // 250 KB
        let sending = requests
        senders.append(NativeThread.start { sendAll(fd, sending) })
        let readAhead = ConnectionState.Config(ConnectionPolicy()).readAhead
        XCTAssertTrue(eventually { server.peakConnectionInput >= readAhead - 64 }, "it reads ahead: \(server.peakConnectionInput)")
        usleep(100_000)  // it would read on now if it did
        XCTAssertLessThanOrEqual(server.peakConnectionInput, readAhead)
        responder.release()
        let bodies = readBodies(fd, count: 10_001)
        XCTAssertEqual(bodies.count, 10_001)
        XCTAssertTrue(bodies.first == NumberedResponder.body("hold") && bodies.last == NumberedResponder.body("9999"), "in order")
        // Answered at once, the rest is read a read at a time behind what is left of one request.
        XCTAssertLessThanOrEqual(server.peakConnectionInput, readAhead + 64)
    }

    /// Eight connections that pipeline and never read could hold 8 × 256 KiB; with a 1 MiB budget they stop at
    /// the budget (each may still hold the 16 KiB floor), a client that reads its answers is served meanwhile, every
    /// answer arrives once the clients read, and closing returns every charged byte.
    func testTheOutputBudgetBoundsWhatAllConnectionsHoldTogether() throws {
        var policy = ConnectionPolicy()
        policy.outputBudgetBytes = 1 << 20
        try start(policy)
        let connections = 8
        // 10 MB of answers each: far more than loopback's kernel buffers take (4 MiB at most by default).
        let stuck = (0..<connections).map { _ in pipeline(5000) }
        XCTAssertTrue(eventually { server.outputBudgetUse.now >= policy.outputBudgetBytes }, "the budget is used up: \(server.outputBudgetUse)")
        // A client that reads each answer before it asks again is below the floor: served while the budget is used up.
        let polite = loopbackConnect(port: port, receiveTimeoutSeconds: 20)
        fds.append(polite)
        for k in 0..<20 {
            sendText(polite, "GET /n/\(k) HTTP/1.1\r\n\r\n")
            let answer = readBodies(polite, count: 1).first
            XCTAssertTrue(answer == NumberedResponder.body(String(k)), "answer \(k): \(String(decoding: (answer ?? []).prefix(8), as: UTF8.self))")
        }
        // Past the budget by at most one answer per connection (one that crossed the floor) and per loop.
        let bound = policy.outputBudgetBytes + (connections + 2) * answerBytes
        XCTAssertLessThanOrEqual(server.outputBudgetUse.peak, bound, "the connections together held more than the budget")
        for fd in stuck { assertEveryAnswerInOrder(fd, count: 5000) }
        XCTAssertLessThanOrEqual(server.outputBudgetUse.peak, bound)
        for fd in fds { close(fd) }
        fds = []
        XCTAssertTrue(eventually { server.openConnections == 0 && server.outputBudgetUse.now == 0 }, "closed connections charge nothing: \(server.outputBudgetUse)")
    }

    /// A connection paused because the budget was used up by others after it last chose its interest costs no events
    /// when its client sends more: it drops its read interest (level-triggered input left armed was reported on
    /// every epoll_wait, spinning the loop).
    func testAConnectionPausedByOthersUsingUpTheBudgetCostsNoEvents() throws {
        var policy = ConnectionPolicy()
        policy.outputHighWaterBytes = 64 << 20  // the budget alone pauses
        policy.outputBudgetBytes = 8 << 20
        try start(policy)
        // Megabytes of answers wait for this one, and it reads on: it has room in the budget and wants more requests.
        let first = pipeline(4000)
        XCTAssertTrue(eventually { server.outputBudgetUse.now > 0 && server.outputBudgetUse.now < policy.outputBudgetBytes },
                      "the first connection holds part of the budget: \(server.outputBudgetUse)")
        // Others use up the rest; then the first one's client sends another request.
        let others = (0..<4).map { _ in pipeline(5000) }
        XCTAssertTrue(eventually { server.outputBudgetUse.now >= policy.outputBudgetBytes }, "the budget is used up: \(server.outputBudgetUse)")
        sendText(first, "GET /n/4000 HTTP/1.1\r\n\r\n")
        usleep(100_000)  // let it arrive
        let before = server.connectionEventCount
        usleep(300_000)
        let events = server.connectionEventCount - before
        XCTAssertLessThan(events, 20, "paused connections produced \(events) events")
        assertEveryAnswerInOrder(first, count: 4001)
        for fd in others { assertEveryAnswerInOrder(fd, count: 5000) }
    }
}
