@testable import PhoneAuthCLI
import XCTest

final class ArgumentsTests: XCTestCase {
    func testOptionsBeforeAndAfterPositionals() throws {
        let a = try Arguments.parse(["--json", "+16505554567", "--code=123456", "--emulator", "http://x:1", "--", "--literal"],
                                    valued: ["code", "emulator"], boolean: ["json"])
        XCTAssertEqual(a.positionals, ["+16505554567", "--literal"])
        XCTAssertEqual(a.value("code"), "123456")
        XCTAssertEqual(a.value("emulator"), "http://x:1")
        XCTAssertTrue(a.has("json"))
    }

    func testErrorsNameTheFlag() {
        XCTAssertThrowsError(try Arguments.parse(["--nope"], valued: [], boolean: [])) { XCTAssertTrue("\($0)".contains("--nope")) }
        XCTAssertThrowsError(try Arguments.parse(["--code"], valued: ["code"], boolean: [])) { XCTAssertTrue("\($0)".contains("needs a value")) }
        XCTAssertThrowsError(try Arguments.parse(["--json=yes"], valued: [], boolean: ["json"])) { XCTAssertTrue("\($0)".contains("takes no value")) }
        XCTAssertThrowsError(try Arguments.parse(["-x"], valued: [], boolean: []))
    }

    func testNumbersAreNotOptions() throws {
        XCTAssertEqual(try Arguments.parse(["-5", "+1650"], valued: [], boolean: []).positionals, ["-5", "+1650"])
    }

    /// A sessionInfo is 22 base64url characters and one in 64 begins with `-`: it is a value, not an unknown option.
    func testWordsAfterOneDashAreValues() throws {
        let a = try Arguments.parse(["-EL-VG-BdJ1Ex3pjamrCdg", "123456", "--json", "-h"], valued: [], boolean: ["json", "help"],
                                    shorts: ["h": "help"])
        XCTAssertEqual(a.positionals, ["-EL-VG-BdJ1Ex3pjamrCdg", "123456"])
        XCTAssertTrue(a.has("json") && a.has("help"))
        XCTAssertEqual(run(["verify", "-EL-VG-BdJ1Ex3pjamrCdg", "123456", "--emulator", "http://127.0.0.1:1"]).0, 1,
                       "reaches the request (no server there: exit 1), not a usage error")
        XCTAssertThrowsError(try Arguments.parse(["--EL-VG-BdJ1Ex3pjamrC"], valued: [], boolean: [])) {
            XCTAssertTrue("\($0)".contains("after a '--' argument"))
        }
        XCTAssertEqual(try Arguments.parse(["--", "--EL-VG-BdJ1Ex3pjamrC"], valued: [], boolean: []).positionals, ["--EL-VG-BdJ1Ex3pjamrC"])
    }

    func run(_ args: [String]) -> (Int32, String, String) {
        var out = "", err = ""
        let ctx = CLIContext(environment: { _ in nil }, stdinIsTerminal: false, readLine: { nil },
                             out: { out += $0 + "\n" }, err: { err += $0 + "\n" })
        return (CLI.run(args, context: ctx), out, err)
    }

    func testUsageErrorsExit64AndHelpExits0() {
        XCTAssertEqual(run([]).0, 64)
        XCTAssertEqual(run(["frobnicate"]).0, 64)
        XCTAssertEqual(run(["users"]).0, 64)
        XCTAssertEqual(run(["send"]).0, 64)
        XCTAssertEqual(run(["send", "a", "b"]).0, 64)
        XCTAssertEqual(run(["sign-in", "+1", "--bogus"]).0, 64)
        let (code, out, _) = run(["token", "decode", "--help"])
        XCTAssertEqual(code, 0)
        XCTAssertTrue(out.contains("Example:"))
        XCTAssertEqual(run(["--version"]).1, "phone-auth 0.1.0\n")
        for c in CLI.commands {
            let (rc, text, _) = run(c.words + ["--help"])
            XCTAssertEqual(rc, 0, c.words.joined(separator: " "))
            XCTAssertTrue(text.contains("phone-auth " + c.words.joined(separator: " ")), text)
        }
    }

    func testTokenDecodeNeedsNoServer() {
        let token = "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.eyJzdWIiOiJ1MSIsImlhdCI6MTgwMDAwMDAwMH0."
        let (rc, out, _) = run(["token", "decode", token])
        XCTAssertEqual(rc, 0)
        XCTAssertTrue(out.contains("iat: 1800000000 (2027-01-15T08:00:00.000Z)"), out)
        XCTAssertEqual(run(["token", "decode", "nope"]).0, 64)
    }

    func testUnreachableEmulatorIsExit1() {
        let (rc, _, err) = run(["health", "--emulator", "http://127.0.0.1:1"])
        XCTAssertEqual(rc, 1)
        XCTAssertTrue(err.contains("cannot reach"), err)
    }
}
