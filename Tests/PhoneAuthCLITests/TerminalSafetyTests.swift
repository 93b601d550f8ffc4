import EmulatorSupport
@testable import PhoneAuthCLI
import XCTest

/// Red-team F5 (issue 11 follow-up): nothing the CLI prints from a token or the server reaches the terminal raw.
final class TerminalSafetyTests: XCTestCase {
    func run(_ args: [String]) -> (Int32, String, String) {
        var out = "", err = ""
        let ctx = CLIContext(environment: { _ in nil }, stdinIsTerminal: false, readLine: { nil },
                             out: { out += $0 + "\n" }, err: { err += $0 + "\n" })
        return (CLI.run(args, context: ctx), out, err)
    }

    static func token(header: JSON, claims: JSON) -> String {
        Base64URL.encode(header.serialized()) + "." + Base64URL.encode(claims.serialized()) + "."
    }

    /// Control characters (C0 other than the line breaks the CLI itself prints, DEL, C1) and bidi controls.
    func assertSafe(_ text: String, file: StaticString = #filePath, line: UInt = #line) {
        for u in text.unicodeScalars where u != "\n" {
            XCTAssertFalse(LogEscaping.isControl(u.value), "raw U+\(String(u.value, radix: 16)) in \(text.debugDescription)", file: file, line: line)
        }
    }

    func testTokenDecodeEscapesHeaderAndClaimKeysAndValues() {
        // The red team's evil.jwt: an OSC title, BEL and screen clear in a header key; a colour, CR LF and a forged
        // "uid: admin" line in a claim key; plus C1, DEL and bidi overrides in values.
        let token = Self.token(
            header: ["alg": "none", "\u{1B}]0;pwned\u{07}\u{1B}[2J": 1],
            claims: ["sub": "x", "\u{1B}[31mRED\r\nuid: admin": 2, "name": "a\u{9B}31m\u{7F}b\u{202E}cba\u{2066}", "iat": 1_800_000_000])
        let (rc, out, _) = run(["token", "decode", token])
        XCTAssertEqual(rc, 0)
        assertSafe(out)
        XCTAssertFalse(out.contains("\nuid: admin"), "no forged line")
        XCTAssertTrue(out.contains(#"\u{1B}]0;pwned\u{7}\u{1B}[2J"#), out)
        XCTAssertTrue(out.contains(#"\u{202E}"#), out)
        // --json: still valid JSON meaning the same text, with the unsafe characters as \u escapes.
        let (jrc, json, _) = run(["token", "decode", token, "--json"])
        XCTAssertEqual(jrc, 0)
        assertSafe(json)
        let parsed = try? JSONParser.parse(json)
        XCTAssertEqual(parsed?["claims"]?["name"]?.stringValue, "a\u{9B}31m\u{7F}b\u{202E}cba\u{2066}")
    }

    func testHugeTimesNeverTrapAndShowAsOutOfRange() {
        let (rc, out, _) = run(["token", "decode", Self.token(header: ["alg": "none"], claims: ["exp": 1e17, "iat": -9.2e18])])
        XCTAssertEqual(rc, 0)
        XCTAssertTrue(out.contains("exp: 100000000000000000 (100000000000000000 (out of range))"), out)
    }

    func testTableAndRowCellsAreSafe() {
        let s = Session(args: (try? Arguments.parse([], valued: [], boolean: []))!, context: CLIContext(
            environment: { _ in nil }, stdinIsTerminal: false, readLine: { nil }, out: { self.captured += $0 + "\n" }, err: { _ in }))
        s.emit(.null, rows: [("name", "\u{1B}]0;t\u{07}x\r\nuid: admin\u{202E}")])
        s.table(["UID"], [["a\u{1B}[2Jb\u{85}"]])
        assertSafe(captured)
        XCTAssertEqual(captured.split(separator: "\n").count, 3)
    }
    var captured = ""
}
