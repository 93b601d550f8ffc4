import CSystem
import EmulatorSupport
@testable import HTTPServer
import Synchronization
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// `/poll` waits for ever and asks to be told when its client leaves; `/hang` waits for ever without asking;
/// `/late` registers its hook from another thread after a delay; `/answered` registers a hook, then answers.
final class PollResponder: HTTPResponder {
    let closed = Atomic<Int>(0)
    let pool = WorkerPool(threads: 1)
    let hung = Locked<[ResponseContext]>([])
    func respond(to request: HTTPRequest, context: ResponseContext) -> HTTPResponse? {
        switch request.path {
        case "/poll":
            context.onClose { self.closed.wrappingAdd(1, ordering: .relaxed) }
            return nil
        case "/hang":
            hung.withLock { $0.append(context) }
            return nil
        case "/late":
            pool.submit {
                usleep(100_000)
                context.onClose { self.closed.wrappingAdd(1, ordering: .relaxed) }
            }
            return nil
        case "/answered":
            context.onClose { self.closed.wrappingAdd(1, ordering: .relaxed) }
            context.complete(HTTPResponse(status: 200, body: Array("done".utf8)))
            return nil
        default:
            return HTTPResponse(status: 200, body: Array("ok".utf8))
        }
    }
}

/// The server tells a deferred request's handler when its client goes away, and a half-closed connection with a
/// request in flight costs no CPU (it used to spin an event loop on a level-triggered EPOLLRDHUP).
final class CloseHookTests: XCTestCase {
    var server: HTTPServer!
    let responder = PollResponder()
    var port = 0

    override func setUpWithError() throws {
        server = HTTPServer(configuration: .init(host: "127.0.0.1", port: 0, eventLoops: 2), responder: responder,
                            logger: Logger(label: "test", level: .critical))
        port = try server.start()
    }

    override func tearDown() {
        server.shutdown()
        responder.pool.shutdown()
    }

    func connectAndSend(_ path: String) -> Int32 {
        let fd = loopbackConnect(port: port)
        sendText(fd, "GET \(path) HTTP/1.1\r\nHost: x\r\n\r\n")
        return fd
    }

    /// Polls `condition` every 10 ms for at most 5 s (a bound on waiting, not a timing assertion).
    func eventually(_ condition: () -> Bool) -> Bool {
        for _ in 0..<500 {
            if condition() { return true }
            usleep(10_000)
        }
        return condition()
    }

    func testHookRunsWhenClientsCloseWithARequestInFlight() {
        let fds = (0..<50).map { _ in connectAndSend("/poll") }
        XCTAssertTrue(eventually { server.openConnections == 50 })
        for fd in fds { close(fd) }
        XCTAssertTrue(eventually { responder.closed.load(ordering: .relaxed) == 50 }, "\(responder.closed.load(ordering: .relaxed)) of 50 hooks ran")
        XCTAssertTrue(eventually { server.openConnections == 0 })
    }

    func testHalfCloseCancelsAPollAndClosesTheConnection() {
        let fd = connectAndSend("/poll")
        defer { close(fd) }
        shutdown(fd, Int32(SHUT_WR))
        var buf = [UInt8](repeating: 0, count: 64)
        let n = buf.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        XCTAssertEqual(n, 0, "the server closes the connection of a cancelled poll")
        XCTAssertTrue(eventually { responder.closed.load(ordering: .relaxed) == 1 })
    }

    func testHookRegisteredAfterTheClientLeftRunsAtOnce() {
        let fd = connectAndSend("/late")
        close(fd)
        XCTAssertTrue(eventually { responder.closed.load(ordering: .relaxed) == 1 })
        XCTAssertTrue(eventually { server.openConnections == 0 })
    }

    func testHookOfAnAnsweredRequestNeverRuns() {
        let fd = connectAndSend("/answered")
        var buf = [UInt8](repeating: 0, count: 512)
        let n = buf.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        XCTAssertGreaterThan(n, 0)
        XCTAssertTrue(String(decoding: buf[0..<max(0, n)], as: UTF8.self).hasPrefix("HTTP/1.1 200"))
        close(fd)
        XCTAssertTrue(eventually { server.openConnections == 0 })
        XCTAssertEqual(responder.closed.load(ordering: .relaxed), 0)
    }

    /// A request without a hook still gets its answer after a half-close (LiveServerTests covers that); while it
    /// waits, the half-closed connection must cost no events. The old mask kept EPOLLRDHUP after the FIN was read:
    /// level-triggered, it was reported on every epoll_wait (hundreds of thousands of events in this window).
    func testHalfClosedConnectionWithARequestInFlightDoesNotSpin() {
        let fd = connectAndSend("/hang")
        defer { close(fd) }
        shutdown(fd, Int32(SHUT_WR))
        XCTAssertTrue(eventually { server.openConnections == 1 })
        usleep(100_000)  // let the FIN be read
        let before = server.connectionEventCount
        usleep(300_000)
        let events = server.connectionEventCount - before
        XCTAssertLessThan(events, 20, "a half-closed connection produced \(events) events while idle")
        // The answer still goes out, and then the connection closes.
        for c in responder.hung.withLock({ $0 }) { c.complete(HTTPResponse(status: 200, body: Array("late".utf8))) }
        var buf = [UInt8](repeating: 0, count: 512)
        let n = buf.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        XCTAssertTrue(String(decoding: buf[0..<max(0, n)], as: UTF8.self).hasPrefix("HTTP/1.1 200"))
        XCTAssertTrue(eventually { server.openConnections == 0 })
    }
}
