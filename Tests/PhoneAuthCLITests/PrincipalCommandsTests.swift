@testable import PhoneAuthCLI
import EmulatorSupport
import XCTest

/// `token mint`, `reset` and `snapshot …`: flags are checked before any request (`CLIRunning`). The commands against a
/// server: Tests/Interop/test_principals.py.
final class PrincipalCommandsTests: XCTestCase, CLIRunning {
    func body(_ args: [String]) throws -> JSON {
        .object(try Commands.tokenMintBody(try parse(["token", "mint"], args), uid: "alice"))
    }

    func testTokenMintBody() throws {
        XCTAssertEqual(try body([]), ["uid": "alice"])
        XCTAssertEqual(try body(["--claims", #"{"role":"admin","n":[1]}"#, "--phone", "+15551230000", "--email", "a@b.co", "--email-verified",
                                 "--display-name", "Alice", "--provider", "password", "--second-factor", "totp", "--expires-in", "60",
                                 "--auth-time=1800000000"]),
                       ["uid": "alice", "claims": ["role": "admin", "n": [1]], "phoneNumber": "+15551230000", "email": "a@b.co", "emailVerified": true,
                        "displayName": "Alice", "signInProvider": "password", "secondFactor": "totp", "expiresIn": 60, "authTime": 1_800_000_000])
    }

    func testUsageErrorsMakeNoRequest() {
        for bad in [["token", "mint"], ["token", "mint", "a", "b"], ["token", "mint", "a", "--claims", "[1]"], ["token", "mint", "a", "--claims", "{"],
                    ["token", "mint", "a", "--email-verified"], ["token", "mint", "a", "--expires-in", "1h"], ["token", "mint", "a", "--auth-time", "now"],
                    ["reset", "x"], ["reset", "--all=yes"], ["reset", "--tenant", "t"], ["snapshot", "save"], ["snapshot", "restore"],
                    ["snapshot", "save", "s", "--tenant", "t"], ["snapshot", "list", "x"], ["snapshot"]] {
            let (rc, _, err) = run(bad + nowhere)
            XCTAssertEqual(rc, 64, "\(bad): \(err)")
            XCTAssertTrue(err.contains("Usage: phone-auth"), err)
        }
        // Well-formed: each gets as far as the (unreachable) emulator.
        for good in [["token", "mint", "a", "--claims", #"{"r":1}"#], ["reset"], ["reset", "--all"], ["snapshot", "save", "s"], ["snapshot", "list"],
                     ["snapshot", "restore", "s"], ["snapshot", "delete", "s"]] {
            let (rc, _, err) = run(good + nowhere)
            XCTAssertEqual(rc, 1, "\(good): \(err)")
            XCTAssertTrue(err.contains("cannot reach"), err)
        }
    }
}
