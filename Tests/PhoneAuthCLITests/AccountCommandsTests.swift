@testable import PhoneAuthCLI
import EmulatorSupport
import XCTest

/// `users create`, `oob-codes` and `mfa …`: flags are checked before any request (`CLIRunning`).
final class AccountCommandsTests: XCTestCase, CLIRunning {
    func testUsersCreateBodyForEmailPasswordAndPhone() throws {
        let a = try parse(["users", "create"], ["--email", "ada@example.com", "--password=secret123", "--phone", "+15551230000",
                                                "--display-name", "Ada L", "--email-verified", "--uid", "ada"])
        let body = try Commands.userCreateBody(a)
        XCTAssertEqual(JSON.object(body), ["localId": "ada", "email": "ada@example.com", "password": "secret123",
                                           "phoneNumber": "+15551230000", "displayName": "Ada L", "emailVerified": true])
        // The phone user of before: only the phone.
        XCTAssertEqual(JSON.object(try Commands.userCreateBody(try parse(["users", "create"], ["--phone", "+15551230000"]))),
                       ["phoneNumber": "+15551230000"])
        XCTAssertNil(try Commands.userCreateBody(try parse(["users", "create"], ["--email", "a@b.co", "--password", "x"]))["emailVerified"])
    }

    func testUsersCreateUsageErrors() {
        for bad in [[], ["--password", "p"], ["--email", "a@b.co"], ["--phone", "+1555", "--email-verified"], ["--email-verified"]] {
            let (rc, _, err) = run(["users", "create"] + bad + nowhere)
            XCTAssertEqual(rc, 64, "\(bad): \(err)")
            XCTAssertTrue(err.contains("Usage: phone-auth users create"), err)
        }
        XCTAssertEqual(run(["users", "create", "--email-verified=yes"] + nowhere).0, 64)
        XCTAssertEqual(run(["users", "create", "extra", "--phone", "+15551230000"] + nowhere).0, 64)
        // Well-formed: it gets as far as the (unreachable) emulator.
        let (rc, _, err) = run(["users", "create", "--email", "a@b.co", "--password", "secret123", "--email-verified"] + nowhere)
        XCTAssertEqual(rc, 1)
        XCTAssertTrue(err.contains("cannot reach"), err)
    }

    func testOobCodesFlags() throws {
        XCTAssertNil(try Commands.oobWaitTimeout(try parse(["oob-codes"], ["--email", "a@b.co"])))
        XCTAssertEqual(try Commands.oobWaitTimeout(try parse(["oob-codes"], ["--email", "a@b.co", "--wait"])), "30")
        XCTAssertEqual(try Commands.oobWaitTimeout(try parse(["oob-codes"], ["--wait", "--timeout", "2.5", "--email", "a@b.co"])), "2.5")
        for bad in [["--wait"], ["--timeout", "5", "--email", "a@b.co"], ["--wait", "--email", "a@b.co", "--timeout", "301"],
                    ["--wait", "--email", "a@b.co", "--timeout", "-1"], ["--wait", "--email", "a@b.co", "--timeout", "nan"],
                    ["--wait=5", "--email", "a@b.co"]] {
            XCTAssertEqual(run(["oob-codes"] + bad + nowhere).0, 64, "\(bad)")
        }
        // --wait is a flag here (it takes seconds in `codes`): the word after it is not swallowed.
        let (rc, _, err) = run(["oob-codes", "--wait", "--email", "a@b.co"] + nowhere)
        XCTAssertEqual(rc, 1, err)
        XCTAssertTrue(err.contains("cannot reach"), err)
        XCTAssertEqual(run(["codes", "--wait", "5", "--phone", "+15551230000"] + nowhere).0, 1)
    }

    func testMFAUsage() {
        for (args, rc) in [
            (["mfa"], 64), (["mfa", "frob"], 64), (["mfa", "list"], 64), (["mfa", "list", "a", "b"], 64),
            (["mfa", "unenroll", "uid"], 64), (["mfa", "enroll", "--email", "a@b.co", "--password", "x"], 64),
            (["mfa", "enroll", "--password", "x", "--phone", "+16505554567"], 64), (["mfa", "enroll", "--email", "a@b.co", "--phone", "+1650"], 64),
            (["mfa", "sign-in", "--email", "a@b.co"], 64), (["mfa", "sign-in", "--password", "x"], 64),
            (["mfa", "sign-in", "--email", "a@b.co", "--password", "x", "--phone", "+1650"], 64),
            (["mfa", "sign-in", "--email", "a@b.co", "--password", "x", "--enrollment", "E1"], 1),
            (["mfa", "enroll", "--email", "a@b.co", "--password", "x", "--phone", "+16505554567", "--display-name", "work"], 1),
            (["mfa", "list", "uid"], 1), (["mfa", "unenroll", "uid", "E1"], 1),
        ] as [([String], Int32)] {
            let (code, _, err) = run(args + nowhere)
            XCTAssertEqual(code, rc, "\(args): \(err)")
        }
    }

    /// A value that spells a command word stays a value, wherever the options stand.
    func testOptionValuesAreNotCommandWords() {
        // `--display-name mfa` before `users create`: `mfa` must not become the command.
        let (rc, _, err) = run(["--display-name", "mfa", "users", "create", "--phone", "+15551230000"] + nowhere)
        XCTAssertEqual(rc, 1, err)
        XCTAssertTrue(err.contains("cannot reach"), err)
        XCTAssertEqual(run(["--email", "mfa", "mfa", "sign-in", "--password", "x"] + nowhere).0, 1)
        XCTAssertEqual(run(["--project", "mfa", "health", "--emulator", "http://127.0.0.1:1"]).0, 1)
    }

    func testHelpNamesTheNewCommands() {
        let (rc, out, _) = run(["--help"])
        XCTAssertEqual(rc, 0)
        for w in ["users create", "oob-codes", "mfa list", "mfa enroll", "mfa sign-in", "mfa unenroll"] {
            XCTAssertTrue(out.contains("  " + w), w)
        }
        let (rc2, text, _) = run(["mfa", "enroll", "--help"])
        XCTAssertEqual(rc2, 0)
        XCTAssertTrue(text.contains("--phone PHONE") && text.contains("Example:"), text)
    }

    func testMaskKeepsTheLastFourDigits() {
        XCTAssertEqual(Commands.maskPhone("+16505554567"), "+*******4567")
        XCTAssertEqual(Commands.maskPhone(""), "")
        XCTAssertEqual(Commands.enrollmentRows(["mfaEnrollmentId": "E", "phoneInfo": "+*******4567", "unobfuscatedPhoneInfo": "+16505554567"])
            .map(\.1), ["E", "phone", "+16505554567", "+*******4567", "-", ""])
        XCTAssertEqual(Commands.enrollmentRows(["mfaEnrollmentId": "T", "totpInfo": .object(JSONObject()), "displayName": "app"])
            .map(\.1), ["T", "totp", "-", "-", "app", ""])
    }
}
