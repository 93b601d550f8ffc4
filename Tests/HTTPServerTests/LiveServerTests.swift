import CSystem
import HTTPServer
import EmulatorSupport
import Synchronization
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// A responder that echoes the path, answering `/slow` later from another thread; `/big` is 2 MB of "x", `/medium`
/// 300 KB of "y".
final class EchoResponder: HTTPResponder {
    let pool = WorkerPool(threads: 2)
    func respond(to request: HTTPRequest, context: ResponseContext) -> HTTPResponse? {
        if request.path == "/big" { return HTTPResponse(status: 200, body: [UInt8](repeating: 0x78, count: 2_000_000)) }
        if request.path == "/medium" { return HTTPResponse(status: 200, body: [UInt8](repeating: 0x79, count: 300_000)) }
        let body = Array("\(request.method) \(request.path) \(request.body.count)".utf8)
        if request.path == "/slow" {
            pool.submit {
                usleep(50_000)
                context.complete(HTTPResponse(status: 200, body: body))
            }
            return nil
        }
        return HTTPResponse(status: 200, body: body)
    }
}

/// The real server on a real socket (port 0).
final class LiveServerTests: XCTestCase {
    var server: HTTPServer!
    var port = 0

    override func setUpWithError() throws {
        var policy = ConnectionPolicy()
        policy.requestTimeoutSeconds = 1
        server = HTTPServer(configuration: .init(host: "127.0.0.1", port: 0, eventLoops: 2, policy: policy),
                            responder: EchoResponder(), logger: Logger(label: "test", level: .critical))
        port = try server.start()
    }

    override func tearDown() { server.shutdown() }

    func exchange(_ text: String, shutdownWrite: Bool = true) throws -> String {
        let fd = loopbackConnect(port: port)
        defer { close(fd) }
        sendText(fd, text)
        if shutdownWrite { shutdown(fd, Int32(SHUT_WR)) }
        var out: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buf.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            out.append(contentsOf: buf[0..<n])
        }
        return String(decoding: out, as: UTF8.self)
    }

    func testPipelinedResponsesStayInOrderAcrossAsyncWork() throws {
        let out = try exchange("GET /slow HTTP/1.1\r\n\r\nGET /fast HTTP/1.1\r\n\r\nPOST /slow HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcGET /last HTTP/1.1\r\n\r\n")
        let bodies = out.components(separatedBy: "\r\n\r\n").dropFirst().map { String($0.prefix(while: { $0 != "H" })) }
        XCTAssertEqual(bodies, ["GET /slow 0", "GET /fast 0", "POST /slow 3", "GET /last 0"])
    }

    /// A client that pipelines and half-closes gets every answer: large answers (backpressure pauses parsing) no
    /// longer make the server close with requests still unread once its output drains.
    func testHalfClosedClientGetsEveryPipelinedAnswer() throws {
        let out = try exchange("GET /big HTTP/1.1\r\n\r\nGET /big HTTP/1.1\r\n\r\nGET /slow HTTP/1.1\r\n\r\nGET /last HTTP/1.1\r\n\r\n")
        XCTAssertEqual(out.components(separatedBy: "HTTP/1.1 200 OK").count - 1, 4)
        XCTAssertEqual(out.utf8.count(where: { $0 == 0x78 }), 4_000_000)
        XCTAssertTrue(out.hasSuffix("GET /last 0"))
    }

    /// Many connections with large answers at once: the batched sends go out in bounded rounds (at most 256 KB of a
    /// connection and 64 connections per submission, each sent from its own buffer) and every byte arrives, in order.
    func testManyLargeAnswersAtOnceArriveWhole() {
        // 80 a loop: past the 64 connections of one submission, and past the 256 KB of one connection's round.
        let fds = (0..<160).map { _ in loopbackConnect(port: port) }
        defer { fds.forEach { close($0) } }
        for (n, fd) in fds.enumerated() {
            sendText(fd, n % 8 == 0 ? "GET /big HTTP/1.1\r\n\r\n" : "GET /medium HTTP/1.1\r\n\r\nGET /last HTTP/1.1\r\n\r\n")
            shutdown(fd, Int32(SHUT_WR))
        }
        var buf = [UInt8](repeating: 0, count: 65536)
        for (n, fd) in fds.enumerated() {
            var answer: [UInt8] = []
            while true {
                let got = buf.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                if got <= 0 { break }
                answer += buf[0..<got]
            }
            if n % 8 == 0 {
                XCTAssertEqual(answer.count(where: { $0 == 0x78 }), 2_000_000)
            } else {
                XCTAssertEqual(answer.count(where: { $0 == 0x79 }), 300_000)
                let text = String(decoding: answer.suffix(64), as: UTF8.self)
                XCTAssertTrue(text.hasSuffix("GET /last 0"), "the pipelined answer follows the large one, whole: \(text.suffix(20))")
            }
        }
    }

    func testMalformedRequestGets400AndClose() throws {
        let out = try exchange("NOT HTTP AT ALL\r\n\r\n")
        XCTAssertTrue(out.hasPrefix("HTTP/1.1 400 "), out)
        XCTAssertTrue(out.contains("Connection: close"))
    }

    func testStalledRequestGets408() throws {
        let start = monotonic()
        let out = try exchange("POST /x HTTP/1.1\r\nContent-Length: 10\r\n\r\nab", shutdownWrite: false)
        XCTAssertTrue(out.hasPrefix("HTTP/1.1 408 "), out)
        XCTAssertLessThan(monotonic() - start, 4)
    }

    func monotonic() -> Double { Double(csys_monotonic_ns()) / 1e9 }
}

extension String {
    func components(separatedBy sep: String) -> [String] {
        var out: [String] = []
        var rest = self[...]
        while let r = rest.firstRange(of: sep) {
            out.append(String(rest[..<r.lowerBound]))
            rest = rest[r.upperBound...]
        }
        out.append(String(rest))
        return out
    }
}
