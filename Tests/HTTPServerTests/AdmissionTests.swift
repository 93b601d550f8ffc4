import CSystem
import EmulatorSupport
@testable import HTTPServer
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Issue 11: connection caps (total and per peer) and rate-limited warnings.
final class AdmissionTests: XCTestCase {
    func v4(_ text: String) -> PeerAddress {
        var storage = sockaddr_storage()
        withUnsafeMutablePointer(to: &storage) { p in
            p.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { sin in
                sin.pointee.sin_family = sa_family_t(AF_INET)
                _ = inet_pton(AF_INET, text, &sin.pointee.sin_addr)
            }
        }
        return PeerAddress(&storage)
    }

    func v6(_ text: String) -> PeerAddress {
        var storage = sockaddr_storage()
        withUnsafeMutablePointer(to: &storage) { p in
            p.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { sin in
                sin.pointee.sin6_family = sa_family_t(AF_INET6)
                _ = inet_pton(AF_INET6, text, &sin.pointee.sin6_addr)
            }
        }
        return PeerAddress(&storage)
    }

    func testPeersAreAddressesOrIPv6Slash64() {
        XCTAssertEqual(v4("192.168.1.20"), PeerAddress(key: "192.168.1.20", isLoopback: false))
        XCTAssertEqual(v4("127.0.0.2"), PeerAddress(key: "127.0.0.2", isLoopback: true))
        XCTAssertEqual(v6("::ffff:10.0.0.7"), PeerAddress(key: "10.0.0.7", isLoopback: false), "IPv4-mapped counts as IPv4")
        XCTAssertEqual(v6("::1"), PeerAddress(key: "::1", isLoopback: true))
        XCTAssertEqual(v6("2001:db8:1:2:aaaa::1").key, v6("2001:db8:1:2:bbbb:cccc:dddd:eeee").key, "one host owns its /64")
        XCTAssertNotEqual(v6("2001:db8:1:2::1").key, v6("2001:db8:1:3::1").key)
        XCTAssertFalse(v6("2001:db8::1").isLoopback)
    }

    func testDefaultCapsLeaveAReserveAndExemptLoopbackFromThePerPeerCap() {
        let a = ConnectionAdmission(descriptorLimit: 1024, maxConnections: 0, maxPerPeer: 0)
        XCTAssertEqual(a.maxConnections, 960)
        XCTAssertEqual(a.maxPerPeer, 480)
        let lan = v4("192.168.1.20"), other = v4("192.168.1.21"), local = v4("127.0.0.1")
        for _ in 0..<480 { XCTAssertEqual(a.admit(lan), .admitted) }
        XCTAssertEqual(a.admit(lan), .overPeer, "one LAN peer gets half")
        XCTAssertEqual(a.admit(other), .admitted)
        for _ in 0..<479 { XCTAssertEqual(a.admit(local), .admitted) }
        XCTAssertEqual(a.admit(local), .overTotal, "loopback is bounded by the total only")
        a.release(lan)
        XCTAssertEqual(a.admit(lan), .admitted, "a closed connection frees its slot")
        XCTAssertEqual(a.open("192.168.1.20"), 480)
    }

    func testAnExplicitPerPeerCapAppliesToLoopbackToo() {
        let a = ConnectionAdmission(descriptorLimit: 20_000, maxConnections: 0, maxPerPeer: 3)
        XCTAssertEqual(a.maxConnections, 18_750)
        for _ in 0..<3 { XCTAssertEqual(a.admit(v4("127.0.0.1")), .admitted) }
        XCTAssertEqual(a.admit(v4("127.0.0.1")), .overPeer)
        XCTAssertEqual(a.admit(v4("127.0.0.2")), .admitted)
        for _ in 0..<3 { a.release(v4("127.0.0.1")) }
        XCTAssertEqual(a.open("127.0.0.1"), 0)
    }

    func testWarningsRepeatAtMostOncePerInterval() {
        let w = RateLimitedWarning(intervalSeconds: 10)
        var lines: [Int] = []
        for i in 0..<98 {
            // 98 occurrences over 12 seconds.
            if let held = w.shouldLog(now: UInt64(i) * 122_448_979) { lines.append(held) }
        }
        XCTAssertEqual(lines, [0, 81], "one line, then one more after ten seconds counting what it held back")
    }

    func testTheSoftDescriptorLimitIsRaisedToTheHardLimit() {
        var rl = rlimit()
        XCTAssertEqual(getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &rl), 0)
        let original = rl
        var lowered = rl
        lowered.rlim_cur = min(rl.rlim_max, 256)
        XCTAssertEqual(setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &lowered), 0)
        defer { var r = original; _ = setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &r) }
        let (before, after) = DescriptorLimit.raiseSoftToHard()
        XCTAssertEqual(before, Int(lowered.rlim_cur))
        XCTAssertEqual(after, rl.rlim_max == rlim_t.max ? 1 << 20 : Int(rl.rlim_max))
    }

    /// A connection over a cap is answered with the policy's rendering of `tooManyConnections` (the server writes
    /// no error body of its own: the application's renderer, as for every HTTP-level failure).
    func testTheRefusalIsRenderedByThePolicy() throws {
        var policy = ConnectionPolicy()
        policy.renderError = { e in HTTPResponse(status: e.status, body: Array("custom \(e.status) \(e.message)".utf8), closeConnection: true) }
        let server = HTTPServer(configuration: .init(host: "127.0.0.1", port: 0, eventLoops: 1, policy: policy, maxConnectionsPerPeer: 1),
                                responder: EchoResponder(), logger: Logger(label: "test", level: .critical))
        let port = try server.start()
        defer { server.shutdown() }
        let held = loopbackConnect(port: port)
        defer { close(held) }
        sendText(held, "GET /one HTTP/1.1\r\nHost: x\r\n\r\n")
        XCTAssertEqual(readBodies(held, count: 1).map { String(decoding: $0, as: UTF8.self) }, ["GET /one 0"])
        let over = loopbackConnect(port: port)
        defer { close(over) }
        XCTAssertEqual(readBodies(over, count: 1).map { String(decoding: $0, as: UTF8.self) }, ["custom 503 Too many connections from this address."])
    }
}
