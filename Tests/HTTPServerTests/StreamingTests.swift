@testable import HTTPServer
import EmulatorSupport
import Synchronization
import XCTest

/// A source the test fills by hand: `pull` hands out what is queued.
final class ScriptedSource: HTTPStreamSource {
    struct State {
        var queued: [UInt8] = []
        var finished = false
        var pulls = 0
        var attached = 0
        var detached = 0
    }
    let state = Locked(State())

    func push(_ s: String) { state.withLock { $0.queued += Array(s.utf8) } }
    func finish() { state.withLock { $0.finished = true } }

    func attach(wake: @escaping @Sendable () -> Void) { state.withLock { $0.attached += 1 } }
    func pull(into out: inout [UInt8], limit: Int) -> HTTPStreamPull {
        state.withLock { s in
            s.pulls += 1
            let n = min(limit, s.queued.count)
            out += s.queued.prefix(n)
            s.queued.removeFirst(n)
            if !s.queued.isEmpty { return .more }
            return s.finished ? .finished : .waiting
        }
    }
    func detach() { state.withLock { $0.detached += 1 } }
}

final class StreamingTests: XCTestCase {
    func streamResponse(_ source: ScriptedSource, keepAlive: String = ": ka\n\n") -> HTTPResponse {
        var r = HTTPResponse(status: 200, headers: [("Content-Type", "text/event-stream")])
        r.stream = HTTPStreamBody(source: source, keepAlive: Array(keepAlive.utf8), keepAliveSeconds: 15)
        return r
    }

    func testAStreamIsSentCloseDelimitedAsTheSourceProducesIt() {
        let source = ScriptedSource()
        source.push("one\n")
        var h = Harness()
        h.responder = { _ in nil }
        h.receive("GET /events HTTP/1.1\r\n\r\n")
        h.respond(1, streamResponse(source))
        XCTAssertTrue(h.text.hasPrefix("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\none\n"), h.text)
        XCTAssertFalse(h.text.contains("Content-Length"))
        XCTAssertEqual(h.attached, [1])
        XCTAssertEqual(source.state.withLock { $0.attached }, 1)
        // Nothing more until the source wakes the connection.
        source.push("two\n")
        XCTAssertFalse(h.text.hasSuffix("two\n"))
        h.feed(.streamReady(1))
        XCTAssertTrue(h.text.hasSuffix("one\ntwo\n"))
        // A stale wake-up (another request number) does nothing.
        source.push("three\n")
        h.feed(.streamReady(7))
        XCTAssertFalse(h.text.hasSuffix("three\n"))
        // More requests on the connection are not served while it streams.
        h.receive("GET /other HTTP/1.1\r\n\r\n")
        XCTAssertEqual(h.dispatched.count, 1)
        source.finish()
        h.feed(.streamReady(1))
        XCTAssertTrue(h.text.hasSuffix("three\n"))
        XCTAssertTrue(h.shutWrite, "a finished stream ends the connection")
        XCTAssertEqual(h.detached, 1)
        h.feed(.endOfInput)
        XCTAssertTrue(h.closed)
        XCTAssertEqual(h.detached, 1, "detached exactly once")
    }

    func testAClientThatDoesNotReadStopsThePulling() {
        let source = ScriptedSource()
        source.push(String(repeating: "x", count: 10 * ConnectionState.streamLowWater))
        var h = Harness()
        h.room = 0  // the client reads nothing
        h.responder = { _ in nil }
        h.receive("GET /events HTTP/1.1\r\n\r\n")
        h.respond(1, streamResponse(source))
        let pulls = source.state.withLock { $0.pulls }
        XCTAssertLessThanOrEqual(h.state.pendingOutput, ConnectionState.streamLowWater + 200)
        for _ in 0..<20 { h.feed(.streamReady(1)) }
        XCTAssertEqual(source.state.withLock { $0.pulls }, pulls, "no pulls while the output is full")
        XCTAssertGreaterThan(source.state.withLock { $0.queued.count }, 8 * ConnectionState.streamLowWater, "the rest stays with the source")
        // The client reads: pulling resumes.
        h.clientReads(1 << 20)
        XCTAssertGreaterThan(source.state.withLock { $0.pulls }, pulls)
        // A client that reads nothing for the write timeout is dropped, and the source detached.
        h.room = 0
        source.push(String(repeating: "y", count: 1000))
        h.feed(.streamReady(1))
        XCTAssertGreaterThan(h.state.pendingOutput, 0)
        h.advance(seconds: 61)
        h.tick()
        XCTAssertTrue(h.closed)
        XCTAssertEqual(h.detached, 1)
    }

    /// A stream is one more buffer a slow reader grows: with the server's output budget used up by others, it pulls
    /// nothing more while it holds the floor (the events wait in the source), and resumes once there is room.
    func testAStreamPullsNothingWhileTheBudgetIsUsedUp() {
        let budget = OutputBudget(limit: 1 << 20)
        budget.charge(1 << 20)  // held by other connections
        let source = ScriptedSource()
        source.push(String(repeating: "x", count: 10 * ConnectionState.streamLowWater))
        var h = Harness(budget: budget)
        h.room = 0
        h.responder = { _ in nil }
        h.receive("GET /events HTTP/1.1\r\n\r\n")
        h.respond(1, streamResponse(source))
        XCTAssertGreaterThanOrEqual(h.state.heldOutput, OutputBudget.floor, "the first pull: up to the low-water mark")
        let pulls = source.state.withLock { $0.pulls }
        h.clientReads(20_000)  // below the low-water mark, still past the floor
        h.feed(.streamReady(1))
        XCTAssertEqual(source.state.withLock { $0.pulls }, pulls, "no pull while the budget is used up")
        budget.charge(-(1 << 20))
        h.clientReads(1)
        XCTAssertGreaterThan(source.state.withLock { $0.pulls }, pulls, "room again: pulling resumes")
        XCTAssertLessThanOrEqual(h.state.pendingOutput, ConnectionState.streamLowWater + 200)
    }

    func testAQuietStreamWritesItsKeepAlive() {
        let source = ScriptedSource()
        var h = Harness()
        h.responder = { _ in nil }
        h.receive("GET /events HTTP/1.1\r\n\r\n")
        h.respond(1, streamResponse(source))
        let head = h.wire.count
        h.advance(seconds: 14)
        h.tick()
        XCTAssertEqual(h.wire.count, head)
        h.advance(seconds: 2)
        h.tick()
        XCTAssertEqual(String(decoding: h.wire[head...], as: UTF8.self), ": ka\n\n")
        h.advance(seconds: 400)  // far past the idle timeout: a stream is never idle
        h.tick()
        XCTAssertFalse(h.closed)
    }

    func testTheClientLeavingDetachesTheStreamAndRunsCloseHooks() {
        let source = ScriptedSource()
        var h = Harness()
        h.responder = { _ in nil }
        h.receive("GET /events HTTP/1.1\r\n\r\n")
        let ran = Atomic<Int>(0)
        h.feed(.closeHook(1, { ran.wrappingAdd(1, ordering: .relaxed) }))
        h.respond(1, streamResponse(source))
        XCTAssertFalse(h.closed)
        h.feed(.endOfInput)
        XCTAssertTrue(h.closed)
        XCTAssertEqual(h.detached, 1)
        XCTAssertEqual(ran.load(ordering: .relaxed), 1)
    }

    func testAStreamForAHeadRequestOrAStaleAnswerIsDetachedAtOnce() {
        let source = ScriptedSource()
        var h = Harness()
        h.responder = { _ in nil }
        h.receive("HEAD /events HTTP/1.1\r\n\r\n")
        h.respond(1, streamResponse(source))
        XCTAssertEqual(h.detached, 1)
        XCTAssertEqual(h.attached, [])
        let other = ScriptedSource()
        h.respond(5, streamResponse(other))
        XCTAssertEqual(h.detached, 2)
    }

    func testStoppingEndsAStream() {
        let source = ScriptedSource()
        var h = Harness()
        h.responder = { _ in nil }
        h.receive("GET /events HTTP/1.1\r\n\r\n")
        h.respond(1, streamResponse(source))
        h.feed(.stop)
        XCTAssertEqual(h.detached, 1)
        XCTAssertTrue(h.shutWrite)
    }
}
