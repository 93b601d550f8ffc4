@testable import PhoneAuthCLI
import EmulatorSupport
import XCTest

/// `credentials mint` and `app-check status`: flags are checked before any request. Against a server:
/// Tests/Interop/test_attestation.py.
final class CredentialCommandsTests: XCTestCase, CLIRunning {
    func body(_ type: String, _ args: [String] = []) throws -> JSON {
        .object(try Commands.credentialsMintBody(try parse(["credentials", "mint"], [type] + args), type: type))
    }

    func testMintBodies() throws {
        XCTAssertEqual(try body("recaptcha"), ["type": "RECAPTCHA"])
        XCTAssertEqual(try body("Play-Integrity"), ["type": "PLAY_INTEGRITY"])
        XCTAssertEqual(try body("app-check", ["--app-id", "1:12345:ios:ab", "--ttl", "1800"]),
                       ["type": "APP_CHECK", "appId": "1:12345:ios:ab", "ttlSeconds": 1800])
        XCTAssertEqual(try body("pnv", ["--phone", "+16505554567"]), ["type": "PNV", "phoneNumber": "+16505554567"])
        XCTAssertEqual(try body("recaptcha-enterprise", ["--score", "0.2", "--action", "sendVerificationCode", "--toll-fraud-score", "0.95"]),
                       ["type": "RECAPTCHA_ENTERPRISE", "score": 0.2, "action": "sendVerificationCode", "tollFraudScore": 0.95])
        XCTAssertEqual(try body("recaptcha-enterprise"), ["type": "RECAPTCHA_ENTERPRISE"])
    }

    func testUsageErrorsMakeNoRequest() {
        for bad in [["credentials", "mint"], ["credentials", "mint", "sms"], ["credentials", "mint", "pnv"],
                    ["credentials", "mint", "recaptcha", "--ttl", "60"], ["credentials", "mint", "app-check", "--ttl", "1h"],
                    ["credentials", "mint", "pnv", "--phone", "+1", "--app-id", "x"], ["credentials", "mint", "app-check", "--phone", "+1"],
                    ["credentials", "mint", "recaptcha", "--score", "0.5"], ["credentials", "mint", "recaptcha-enterprise", "--score", "2"],
                    ["credentials", "mint", "recaptcha-enterprise", "--score", "nan"], ["credentials", "mint", "app-check", "--action", "x"],
                    ["app-check", "status", "x"]] {
            let (rc, _, err) = run(bad + nowhere)
            XCTAssertEqual(rc, 64, "\(bad): \(err)")
        }
        for good in [["credentials", "mint", "app-check"], ["credentials", "mint", "pnv", "--phone", "+16505554567"], ["app-check", "status"]] {
            let (rc, _, err) = run(good + nowhere)
            XCTAssertEqual(rc, 1, "\(good): \(err)")
            XCTAssertTrue(err.contains("cannot reach"), err)
        }
    }
}
