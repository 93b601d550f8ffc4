import CSystem
@testable import HTTPServer
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// The socket helper maps results once: bytes, would-block, end of stream, failure.
final class PosixTests: XCTestCase {
    func testReceiveAndSendResults() {
        var fds: [Int32] = [0, 0]
        XCTAssertEqual(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0, &fds), 0)
        defer { close(fds[0]) }
        var buf = [UInt8](repeating: 0, count: 16)
        XCTAssertEqual(buf.withUnsafeMutableBytes { Posix.receive(fds[0], into: $0) }, .wouldBlock)
        XCTAssertEqual(Array("hello".utf8).withUnsafeBytes { Posix.send(fds[1], $0) }, .bytes(5))
        XCTAssertEqual(buf.withUnsafeMutableBytes { Posix.receive(fds[0], into: $0) }, .bytes(5))
        XCTAssertEqual(Array(buf[0..<5]), Array("hello".utf8))
        // Fill the peer's buffer until send would block.
        let chunk = [UInt8](repeating: 1, count: 65536)
        var sent = 0
        while case .bytes(let n) = chunk.withUnsafeBytes({ Posix.send(fds[0], $0) }) { sent += n }
        XCTAssertGreaterThan(sent, 0)
        XCTAssertEqual(chunk.withUnsafeBytes { Posix.send(fds[0], $0) }, .wouldBlock)
        // The peer shuts its side: end of stream, then sends fail (no SIGPIPE).
        shutdown(fds[1], Int32(SHUT_RDWR))
        XCTAssertEqual(buf.withUnsafeMutableBytes { Posix.receive(fds[0], into: $0) }, .endOfStream)
        guard case .failed = chunk.withUnsafeBytes({ Posix.send(fds[0], $0) }) else { return XCTFail("send to a closed peer") }
        close(fds[1])
    }
}
