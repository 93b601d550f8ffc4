import EmulatorSupport
import HTTPServer
@testable import PhoneAuthAPI
import PhoneAuthCore
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Red-team info items (issue 11 follow-up): bidi controls and long client text in log lines, deep export paths,
/// and `Host` values that are not real IPv6 literals or DNS names.
final class HostileTextTests: XCTestCase {
    // MARK: log lines

    func testBidiControlsAreEscapedInLogLines() {
        let sink = MemoryLogSink()
        let text = Logger(label: "t", sink: sink)
        let json = Logger(label: "t", format: .json, sink: sink)
        let hostile = "user\u{202E}gnp.exe\u{2066}x\u{2069}\u{200F}"
        text.warning("uid \(hostile)", [("uid", hostile)])
        json.warning("uid \(hostile)", [("uid", hostile)])
        for line in sink.all {
            XCTAssertFalse(line.unicodeScalars.contains { LogEscaping.isBidiControl($0.value) }, line)
        }
        XCTAssertTrue(sink.all[0].contains(#"user\u{202E}gnp.exe\u{2066}x\u{2069}\u{200F}"#), sink.all[0])
        XCTAssertTrue(sink.all[1].contains(#"user\u202egnp.exe\u2066x\u2069\u200f"#), sink.all[1])
        // The JSON line still parses to the same text.
        let parsed = try? JSONParser.parse(sink.all[1])
        XCTAssertEqual(parsed?["uid"]?.stringValue, hostile)
        // Uids may hold them (production allows any string of at most 128 characters); logs show them escaped.
        XCTAssertTrue(Identifiers.isValidLocalID(hostile))
        XCTAssertEqual(Identifiers.printable(hostile), #"user\u{202E}gnp.exe\u{2066}x\u{2069}\u{200F}"#)
    }

    func testClientTextInLogLinesIsCut() {
        let sink = MemoryLogSink()
        let logger = Logger(label: "t", sink: sink)
        logger.warning(String(repeating: "m", count: 50_000), [("path", String(repeating: "p", count: 50_000))])
        // Combining marks: one character, many scalars; the cut counts scalars.
        logger.warning("x", [("v", "e" + String(repeating: "\u{301}", count: 50_000))])
        XCTAssertLessThan(sink.all[0].utf8.count, 1400)
        XCTAssertTrue(sink.all[0].contains(String(repeating: "m", count: LogEscaping.maxMessageLength) + "…"))
        XCTAssertTrue(sink.all[0].hasSuffix("path=" + String(repeating: "p", count: LogEscaping.maxValueLength) + "…"))
        XCTAssertLessThan(sink.all[1].utf8.count, 600)
        XCTAssertEqual(LogEscaping.truncate("short", to: 5), "short")
        XCTAssertEqual(LogEscaping.truncate("longer", to: 5), "longe…")
        XCTAssertEqual(Identifiers.printable("e" + String(repeating: "\u{301}", count: 1000), limit: 10).unicodeScalars.count, 11)
    }

    // MARK: export paths

    func testExportCreatesABoundedNumberOfDirectories() throws {
        var template = Array("/tmp/phone-auth-depth-XXXXXX".utf8CString)
        let root = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
        defer { _ = system("rm -rf '\(root)'") }
        let sink = MemoryLogSink()
        let logger = Logger(label: "t", sink: sink)
        let emulator = Emulator(defaultProjectId: "demo-phone", logger: logger)
        let app = PhoneAuthApp(emulator: emulator, tokens: TokenService(mode: .none, initialKey: nil), signingPool: nil, logger: logger,
                               exportRoot: root)
        func export(_ path: String) -> (Int, String?) {
            let body = JSON.object(["path": .string(path)]).serialized()
            let resp = app.respond(to: HTTPRequest(method: "POST", target: "/emulator/v1/projects/demo-phone:export", headers: HTTPHeaders(), body: body),
                                   context: .detached)!
            return (resp.status, (try? JSONParser.parse(resp.body))?["error"]?["message"]?.stringValue)
        }
        let tooDeep = "INVALID_ARGUMENT : path may be at most 32 directories deep and create at most 2 of them"
        // The red team's `d/d/d/…`: refused, and not one directory is created.
        XCTAssertEqual(export(String(repeating: "d/", count: 100)).1, tooDeep)
        XCTAssertEqual(export("a/b/c").1, tooDeep)
        XCTAssertEqual(try entries(root), [])
        // Two new directories are fine, and more below existing ones.
        XCTAssertEqual(export("a/b").0, 200)
        XCTAssertEqual(export("a/b/c/d").0, 200)
        XCTAssertTrue(Files.exists(root + "/a/b/c/d/auth_export/accounts.json"))
        XCTAssertEqual(export(root + "/a/b/c/d/e/f/g").1, tooDeep)
        XCTAssertFalse(Files.exists(root + "/a/b/c/d/e"))
        // At most 32 components even when they all exist.
        var deep = root
        for _ in 0..<33 { deep += "/x"; mkdir(deep, 0o755) }
        XCTAssertEqual(export(String(repeating: "x/", count: 32)).0, 200)
        XCTAssertEqual(export(String(repeating: "x/", count: 33)).1, tooDeep)
        // Refusals are logged with the client's path cut to a bound.
        XCTAssertEqual(export(String(repeating: "d/", count: 5000)).1, tooDeep)
        let line = try XCTUnwrap(sink.all.last { $0.contains("export refused") })
        XCTAssertLessThan(line.utf8.count, 600, line)
        XCTAssertTrue(line.contains("…"))
    }

    func entries(_ path: String) throws -> [String] {
        guard let d = opendir(path) else { throw Files.IOError(path: path, errnoCode: errno) }
        defer { closedir(d) }
        var names: [String] = []
        while let e = readdir(d) {
            let name = withUnsafeBytes(of: e.pointee.d_name) { String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self) }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    // MARK: Host

    func testHostMustBeARealIPv6LiteralOrDNSName() throws {
        let loopback = WebBoundary()
        let wildcard = try WebBoundary(bindHost: "0.0.0.0")
        let any = try WebBoundary(bindHost: "127.0.0.1", allowHosts: ["*"])
        // (Host, loopback bind, wildcard bind); `--allow-host *` accepts exactly the well-formed ones.
        let cases: [(String, Bool, Bool)] = [
            ("[:]", false, false),
            ("[:]:9099", false, false),
            ("[::]", true, true),
            ("[1]", false, false),
            ("[::1]evil", false, false),
            ("[1::2::3]", false, false),
            ("[:::1]", false, false),
            ("[1:2:3:4:5:6:7:8]", true, true),
            ("[1:2:3:4:5:6:7:8:9]", false, false),
            ("[1:2:3:4:5:6:7]", false, false),
            ("[1:2:3:4:5:6:7::]", true, true),
            ("[12345::1]", false, false),
            ("[::ffff:127.0.0.1]", true, true),
            ("[::ffff:127.0.0.1:1]", false, false),
            ("[::1.2.3]", false, false),
            ("[fe80::1%25eth0]", false, false),
            ("[fe80::g]", false, false),
            ("-", false, false),
            ("-:9099", false, false),
            ("-auth", false, false),
            ("auth-", false, false),
            ("auth.", false, false),                 // a top-level domain, not a single-label (Compose) name
            ("auth.:9099", false, false),
            ("auth", false, true),
            ("my-service_1", false, true),
            ("_", false, false),
            ("a..b", false, false),
            (".", false, false),
            (".localhost", false, false),
            ("localhost.", true, true),
            ("localhost..", false, false),
            (String(repeating: "a", count: 64) + ".test", false, false),
            (String(repeating: "a", count: 63), false, true),
        ]
        for (host, l, w) in cases {
            XCTAssertEqual(loopback.hostAllowed(host), l, "loopback bind, Host \(host)")
            XCTAssertEqual(wildcard.hostAllowed(host), w, "0.0.0.0 bind, Host \(host)")
        }
        for ok in ["dev.example.test.", "xn--lcalhost-7db.test", "a-b.c_d.test"] { XCTAssertTrue(any.hostAllowed(ok), ok) }
        for bad in ["[:]", "-", "a..b", "-a.test", "a-.test", "[fe80::1%25eth0]"] { XCTAssertFalse(any.hostAllowed(bad), bad) }
        XCTAssertNil(WebBoundary.normalizeHost("-"))
        XCTAssertEqual(WebBoundary.normalizeHost("Dev.Example.Test."), "dev.example.test")
    }
}
