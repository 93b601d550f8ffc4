import Dispatch
import EmulatorSupport
import HTTPServer
@testable import PhoneAuthAPI
import PhoneAuthCore
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// The inbox API on a real socket: long-polls whose clients leave are unregistered at once (issue 11: 5,000 `:wait`
/// requests that connected and closed kept their waiters for 300 s and made `GET /` time out), the per-project cap,
/// paging, and hostile JSON bodies answered with a clear 400.
final class InboxLiveTests: XCTestCase {
    var emulator: Emulator!
    var server: HTTPServer!
    var app: PhoneAuthApp!
    var port = 0
    var base: String { "http://127.0.0.1:\(port)" }

    override func setUpWithError() throws {
        emulator = Emulator(defaultProjectId: "demo-phone", random: SystemRandom(), logger: Logger(label: "t", level: .critical))
        app = PhoneAuthApp(emulator: emulator, tokens: TokenService(mode: .none, initialKey: nil), signingPool: nil,
                           logger: Logger(label: "t", level: .critical))
        server = HTTPServer(configuration: .init(host: "127.0.0.1", port: 0, eventLoops: 2), responder: app,
                            logger: Logger(label: "t", level: .critical))
        port = try server.start()
    }

    override func tearDown() { server.shutdown() }

    func connect() -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let rc = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        XCTAssertEqual(rc, 0)
        return fd
    }

    func sendWait(_ fd: Int32, phone: String) {
        let req = Array("GET /emulator/v1/projects/demo-phone/verificationCodes:wait?phoneNumber=\(URLEncoding.percentEncode(phone))&timeoutSeconds=300 HTTP/1.1\r\nHost: localhost\r\n\r\n".utf8)
        _ = req.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
    }

    /// Polls `condition` every 10 ms for at most 10 s (a bound on waiting, not a timing assertion).
    func eventually(_ condition: () -> Bool) -> Bool {
        for _ in 0..<1000 {
            if condition() { return true }
            usleep(10_000)
        }
        return condition()
    }

    func testWaitersOfClosedConnectionsAreUnregistered() throws {
        let fds = (0..<300).map { i -> Int32 in
            let fd = connect()
            sendWait(fd, phone: "+1555\(sevenDigits(i % 50))")
            return fd
        }
        XCTAssertTrue(eventually { emulator.pendingWaiterCount == 300 }, "\(emulator.pendingWaiterCount) waiters registered")
        for fd in fds { close(fd) }
        XCTAssertTrue(eventually { emulator.pendingWaiterCount == 0 }, "\(emulator.pendingWaiterCount) waiters left after their clients closed")
        XCTAssertTrue(eventually { server.openConnections == 0 })
        // Connect-send-close at once (the request and the FIN arrive together) is cancelled too.
        for i in 0..<300 {
            let fd = connect()
            sendWait(fd, phone: "+1555\(sevenDigits(i))")
            close(fd)
        }
        XCTAssertTrue(eventually { emulator.pendingWaiterCount == 0 && server.openConnections == 0 })
        let r = try HTTPClient.send(method: "GET", url: base + "/")
        XCTAssertEqual(r.status, 200)
    }

    func testWaiterCapAndAnAnsweredPoll() throws {
        let fds = (0..<Emulator.maxWaitersPerStore).map { i -> Int32 in
            let fd = connect()
            sendWait(fd, phone: "+1555\(sevenDigits(i))")
            return fd
        }
        defer { for fd in fds { close(fd) } }
        XCTAssertTrue(eventually { emulator.pendingWaiterCount == Emulator.maxWaitersPerStore })
        let over = try HTTPClient.send(method: "GET", url: base + "/emulator/v1/projects/demo-phone/verificationCodes:wait?phoneNumber=%2B15559999999&timeoutSeconds=5")
        XCTAssertEqual(over.status, 429)
        XCTAssertEqual(try JSONParser.parse(over.body)["error"]?["status"], "RESOURCE_EXHAUSTED")
        // A send answers its own waiter (and only it).
        _ = try HTTPClient.send(method: "POST", url: base + "/identitytoolkit.googleapis.com/v1/accounts:sendVerificationCode?key=k",
                                body: Array(#"{"phoneNumber":"+15550000007"}"#.utf8))
        XCTAssertEqual(emulator.pendingWaiterCount, Emulator.maxWaitersPerStore - 1)
        var buf = [UInt8](repeating: 0, count: 4096)
        var tv = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fds[7], SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        let n = buf.withUnsafeMutableBytes { recv(fds[7], $0.baseAddress, $0.count, 0) }
        let text = String(decoding: buf[0..<max(0, n)], as: UTF8.self)
        XCTAssertTrue(text.hasPrefix("HTTP/1.1 200") && text.contains("+15550000007"), text)
    }

    func testListingIsPagedAndSmallInboxesKeepTheOfficialShape() throws {
        let url = base + "/emulator/v1/projects/demo-phone/verificationCodes"
        for i in 0..<5 {
            _ = try HTTPClient.send(method: "POST", url: base + "/identitytoolkit.googleapis.com/v1/accounts:sendVerificationCode?key=k",
                                    body: Array(#"{"phoneNumber":"+1555000\#(1000 + i)"}"#.utf8))
        }
        let all = try JSONParser.parse(try HTTPClient.send(method: "GET", url: url).body)
        XCTAssertEqual(all.objectValue?.keys, ["verificationCodes"])
        XCTAssertEqual(all["verificationCodes"]?.arrayValue?.count, 5)
        var seen: [JSON] = []
        var token: String? = nil
        repeat {
            let page = try JSONParser.parse(try HTTPClient.send(method: "GET", url: url + "?pageSize=2" + (token.map { "&pageToken=" + $0 } ?? "")).body)
            seen += page["verificationCodes"]?.arrayValue ?? []
            token = page["nextPageToken"]?.stringValue
        } while token != nil
        XCTAssertEqual(seen, all["verificationCodes"]?.arrayValue)
        for bad in ["?pageSize=0", "?pageSize=10001", "?pageSize=x", "?pageToken=-1", "?pageToken=abc"] {
            XCTAssertEqual(try HTTPClient.send(method: "GET", url: url + bad).status, 400, bad)
        }
        let one = try JSONParser.parse(try HTTPClient.send(method: "GET", url: url + "?phoneNumber=%2B15550001003").body)
        XCTAssertEqual(one["verificationCodes"]?.arrayValue?.map { $0["phoneNumber"] }, ["+15550001003"])
        let deleted = try JSONParser.parse(try HTTPClient.send(method: "DELETE", url: url + "?phoneNumber=%2B15550001003").body)
        XCTAssertEqual(deleted["deleted"], 1)
        XCTAssertEqual(emulator.verificationCodes(StoreKey(projectId: "demo-phone"), phone: nil).count, 4)
    }

    /// A body with more keys than the cap is a 400 INVALID_ARGUMENT, not minutes of work; duplicates: last wins.
    func testHostileBodiesGetAClear400() throws {
        var s = "{"
        for k in 0...JSONParser.defaultMaxObjectKeys { s += (k == 0 ? "" : ",") + "\"k\(k)\":0" }
        let r = try HTTPClient.send(method: "POST", url: base + "/identitytoolkit.googleapis.com/v1/accounts:sendVerificationCode?key=k",
                                    body: Array((s + "}").utf8))
        XCTAssertEqual(r.status, 400)
        let e = try JSONParser.parse(r.body)["error"]
        XCTAssertEqual(e?["status"], "INVALID_ARGUMENT")
        XCTAssertTrue(e?["message"]?.stringValue?.hasPrefix("Invalid JSON payload received. Too many keys in one object (more than 10000)") ?? false,
                      "\(String(describing: e))")
        // Form bodies (securetoken's token endpoint accepts them) have the same cap.
        let form = (0...JSONParser.defaultMaxObjectKeys).map { "f\($0)=1" }.joined(separator: "&")
        let f = try HTTPClient.send(method: "POST", url: base + "/securetoken.googleapis.com/v1/token?key=k",
                                    headers: [("Content-Type", "application/x-www-form-urlencoded")], body: Array(form.utf8))
        XCTAssertEqual(f.status, 400)
        XCTAssertEqual(try JSONParser.parse(f.body)["error"]?["message"], "Invalid JSON payload received. Too many form fields (more than 10000).")
        let dup = try HTTPClient.send(method: "POST", url: base + "/identitytoolkit.googleapis.com/v1/accounts:sendVerificationCode?key=k",
                                      body: Array(#"{"phoneNumber":"not a number","phone_number":"+15550002222"}"#.utf8))
        XCTAssertEqual(dup.status, 200, "phone_number folds onto phoneNumber and, coming last, wins")
        XCTAssertEqual(emulator.verificationCodes(StoreKey(projectId: "demo-phone"), phone: "+15550002222").count, 1)
    }
}
