import CSystem
import EmulatorSupport
import HTTPServer
import Synchronization
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// `/job` runs its answer as a job of its own event loop (`ResponseContext.runOnLoop`), falling back to a pool when
/// the loop refuses; `/elsewhere` asks from a pool thread, where the loop must refuse; anything else answers at once.
final class LoopJobResponder: HTTPResponder {
    let pool = WorkerPool(threads: 1)
    let onLoop = Atomic<Int>(0)
    let onPool = Atomic<Int>(0)
    let wrongThread = Atomic<Int>(0)

    func respond(to request: HTTPRequest, context: ResponseContext) -> HTTPResponse? {
        switch request.path {
        case "/job":
            let responding = UInt(pthread_self())
            let job: @Sendable () -> Void = { [self] in
                if UInt(pthread_self()) == responding { onLoop.wrappingAdd(1, ordering: .relaxed) } else { onPool.wrappingAdd(1, ordering: .relaxed) }
                context.complete(HTTPResponse(status: 200, body: Array("job".utf8)))
            }
            if !context.runOnLoop(job) { pool.submit(job) }
            return nil
        case "/elsewhere":
            pool.submit { [self] in
                let taken = context.runOnLoop { [self] in wrongThread.wrappingAdd(1, ordering: .relaxed) }
                context.complete(HTTPResponse(status: 200, body: Array((taken ? "taken" : "refused").utf8)))
            }
            return nil
        default:
            return HTTPResponse(status: 200, body: Array("cheap".utf8))
        }
    }
}

/// Work a responder runs later on its own event loop: answered, in order, on the loop's thread, and refused from
/// other threads.
final class LoopJobTests: XCTestCase {
    var server: HTTPServer!
    let responder = LoopJobResponder()
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

    func connect() -> Int32 { loopbackConnect(port: port, receiveTimeoutSeconds: 10) }

    func send(_ fd: Int32, _ text: String) { sendText(fd, text) }

    /// Reads `count` responses (by their Content-Length) and returns their bodies.
    func readBodies(_ fd: Int32, count: Int) -> [String] {
        HTTPServerTests.readBodies(fd, count: count).map { String(decoding: $0, as: UTF8.self) }
    }

    func testAJobRunsOnTheLoopThatHoldsTheRequestAndAnswersInOrder() {
        let fd = connect()
        defer { close(fd) }
        send(fd, "GET /job HTTP/1.1\r\nHost: x\r\n\r\nGET /cheap HTTP/1.1\r\nHost: x\r\n\r\nGET /job HTTP/1.1\r\nHost: x\r\n\r\n")
        XCTAssertEqual(readBodies(fd, count: 3), ["job", "cheap", "job"])
        XCTAssertEqual(responder.onLoop.load(ordering: .relaxed), 2, "both jobs ran on the responding loop's thread")
        XCTAssertEqual(responder.onPool.load(ordering: .relaxed), 0)
    }

    func testOtherThreadsCannotQueueJobsOnALoop() {
        let fd = connect()
        defer { close(fd) }
        send(fd, "GET /elsewhere HTTP/1.1\r\nHost: x\r\n\r\n")
        XCTAssertEqual(readBodies(fd, count: 1), ["refused"])
        XCTAssertEqual(responder.wrongThread.load(ordering: .relaxed), 0)
    }

    func testManyJobsAtOnceAreAllAnswered() {
        // More connections than one loop queues jobs for: whatever the loops refuse runs on the pool; every
        // request is answered once.
        let fds = (0..<150).map { _ in connect() }
        defer { fds.forEach { close($0) } }
        for fd in fds { send(fd, "GET /job HTTP/1.1\r\nHost: x\r\n\r\n") }
        for fd in fds { XCTAssertEqual(readBodies(fd, count: 1), ["job"]) }
        XCTAssertEqual(responder.onLoop.load(ordering: .relaxed) + responder.onPool.load(ordering: .relaxed), 150)
    }
}
