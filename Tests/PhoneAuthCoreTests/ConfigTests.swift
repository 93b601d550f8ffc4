import EmulatorSupport
import PhoneAuthCore
import XCTest

final class ConfigTests: XCTestCase {
    func testAppliesAndRendersTheContractShape() throws {
        var c = ProjectConfig()
        try c.apply(try JSONParser.parse(#"""
            {"signIn": {"phoneNumber": {"enabled": true, "testPhoneNumbers": {"+1 650 555 4567": "123456"}}},
             "smsRegionConfig": {"allowlistOnly": {"allowedRegions": ["US", "CA"]}},
             "phoneAuth": {"appVerification": "ENFORCE", "codeLength": 6, "sessionTtlSeconds": 60, "maxCodeAttempts": 2,
                           "sendRateLimits": {"perPhoneNumber": {"max": 3, "perSeconds": 60}},
                           "smsQuota": {"max": 10}, "scenarioNumbers": {"+15005550006": {"onSend": "QUOTA_EXCEEDED"}}}}
            """#))
        XCTAssertEqual(c.testPhoneNumbers, ["+16505554567": "123456"])
        XCTAssertEqual(c.smsRegion, .allowlistOnly(allowed: ["US", "CA"]))
        XCTAssertEqual(c.phoneAuth.appVerification, .enforce)
        XCTAssertEqual(c.phoneAuth.perPhoneNumber, RateLimit(max: 3, perSeconds: 60))
        XCTAssertEqual(c.phoneAuth.perIp, RateLimit(max: 0, perSeconds: 3600))
        XCTAssertEqual(c.phoneAuth.smsQuota, RateLimit(max: 10, perSeconds: 86400))
        var round = ProjectConfig()
        try round.apply(c.toJSON())
        XCTAssertEqual(round, c)
        XCTAssertTrue(c.smsRegion.allows(region: "US"))
        XCTAssertFalse(c.smsRegion.allows(region: "GB"))
    }

    func testRefusesUnknownKeysAndBadValues() {
        func error(_ text: String) -> String? {
            var c = ProjectConfig()
            do { try c.apply(try JSONParser.parse(text)); return nil } catch let e as ConfigError { return e.description } catch { return "\(error)" }
        }
        XCTAssertEqual(error(#"{"phoneAuth": {"codeLenght": 6}}"#), "phoneAuth.codeLenght: unknown key")
        XCTAssertEqual(error(#"{"nope": 1}"#), "nope: unknown key")
        XCTAssertNotNil(error(#"{"phoneAuth": {"codeLength": 3}}"#))
        XCTAssertNotNil(error(#"{"phoneAuth": {"maxCodeAttempts": -1}}"#))
        XCTAssertNotNil(error(#"{"phoneAuth": {"appVerification": "MAYBE"}}"#))
        XCTAssertNotNil(error(#"{"signIn": {"phoneNumber": {"testPhoneNumbers": {"123": "123456"}}}}"#))
        XCTAssertNotNil(error(#"{"signIn": {"phoneNumber": {"testPhoneNumbers": {"+16505554567": "12ab56"}}}}"#))
        XCTAssertNotNil(error(#"{"smsRegionConfig": {"allowByDefault": {"disallowedRegions": ["usa"]}}}"#))
        XCTAssertNotNil(error(#"{"smsRegionConfig": {"allowByDefault": {}, "allowlistOnly": {}}}"#))
        XCTAssertNotNil(error(#"{"phoneAuth": {"smsQuota": {"perSeconds": 0}}}"#))
        XCTAssertNotNil(error(#"[]"#))
    }
}
