import EmulatorSupport
@testable import PhoneAuthCore
import PhoneAuthTestSupport
import XCTest

/// App verification, regions, rate limits and quota on a manual clock. Fictional numbers are exempt from all.
final class SendPolicyTests: XCTestCase {
    let key = StoreKey(projectId: "p")
    var clock: EmulatorClock!
    var emulator: Emulator!

    override func setUp() {
        clock = EmulatorClock(fixedAtMillis: 1_800_000_000_000)
        emulator = makeTestEmulator(clock: clock, seed: 3)
    }

    func patch(_ json: JSON) throws { _ = try emulator.patchConfig(key, json) }

    func send(_ phone: String, ip: String? = "10.0.0.1", _ creds: AppCredentials = AppCredentials()) throws -> String {
        try emulator.sendVerificationCode(key, phoneNumber: phone, clientIP: ip, credentials: creds)
    }

    func code(_ f: () throws -> Any) -> String? {
        do { _ = try f(); return nil } catch let e as AuthError { return e.description } catch { return "\(error)" }
    }

    func testEnforceNeedsAValidCredentialExceptForFictionalNumbers() throws {
        try patch(["phoneAuth": ["appVerification": "ENFORCE"]])
        XCTAssertNil(code { try self.send("+16505554567") })
        var fake = AppCredentials()
        fake.recaptchaToken = "fake-recaptcha-token"
        XCTAssertNil(code { try self.send("+16505554567", fake) }, "fictional numbers accept mock credentials")
        XCTAssertEqual(code { try self.send("+15551234567") }, "MISSING_APP_CREDENTIAL")
        var noRecaptcha = AppCredentials()
        noRecaptcha.captchaResponse = "NO_RECAPTCHA"
        XCTAssertEqual(code { try self.send("+15551234567", noRecaptcha) }, "MISSING_APP_CREDENTIAL")
        XCTAssertEqual(code { try self.send("+15551234567", fake) }, "CAPTCHA_CHECK_FAILED : Recaptcha verification failed - MALFORMED")
        var play = AppCredentials()
        play.playIntegrityToken = "forged"
        XCTAssertEqual(code { try self.send("+15551234567", play) }, "INVALID_APP_CREDENTIAL")

        var good = AppCredentials()
        good.recaptchaToken = emulator.mintAppCredential(key, type: .recaptcha).token
        XCTAssertNil(code { try self.send("+15551234567", good) })
        XCTAssertEqual(code { try self.send("+15551234567", good) }, "CAPTCHA_CHECK_FAILED : Recaptcha verification failed - MALFORMED", "single use")

        var enterprise = AppCredentials()
        enterprise.captchaResponse = emulator.mintAppCredential(key, type: .recaptcha).token
        XCTAssertNil(code { try self.send("+15551234567", enterprise) })

        var android = AppCredentials()
        android.playIntegrityToken = emulator.mintAppCredential(key, type: .playIntegrity).token
        XCTAssertNil(code { try self.send("+15551234567", android) })

        let receipt = try emulator.verifyClient(key, appToken: "apns-device-token")
        let push = emulator.pushNotifications(key).last!
        XCTAssertEqual(push.receipt, receipt)
        var ios = AppCredentials()
        ios.iosReceipt = receipt
        ios.iosSecret = "wrong"
        XCTAssertEqual(code { try self.send("+15551234567", ios) }, "INVALID_APP_CREDENTIAL")
        ios.iosSecret = push.secret
        XCTAssertNil(code { try self.send("+15551234567", ios) })
        XCTAssertEqual(code { try self.emulator.verifyClient(self.key, appToken: nil) }, "MISSING_IOS_APP_TOKEN")

        var late = AppCredentials()
        late.recaptchaToken = emulator.mintAppCredential(key, type: .recaptcha).token
        clock.advance(millis: 121_000)
        XCTAssertEqual(code { try self.send("+15551234567", late) }, "CAPTCHA_CHECK_FAILED : Recaptcha verification failed - MALFORMED")
    }

    func testRegionPolicy() throws {
        try patch(["smsRegionConfig": ["allowByDefault": ["disallowedRegions": ["CA", "GB"]]]])
        let blocked = "OPERATION_NOT_ALLOWED : SMS unable to be sent until this region enabled by the app developer"
        XCTAssertEqual(code { try self.send("+14165551234") }, blocked)
        XCTAssertEqual(code { try self.send("+447911123456") }, blocked)
        XCTAssertNil(code { try self.send("+12125551234") })
        try patch(["smsRegionConfig": ["allowlistOnly": ["allowedRegions": ["CA"]]]])
        XCTAssertNil(code { try self.send("+14165551234") })
        XCTAssertEqual(code { try self.send("+12125551234") }, blocked)
        XCTAssertNil(code { try self.send("+16505554567") }, "fictional numbers ignore the region policy")
    }

    func testPerPhoneAndPerIPWindows() throws {
        try patch(["phoneAuth": ["sendRateLimits": ["perPhoneNumber": ["max": 2, "perSeconds": 60], "perIp": ["max": 3, "perSeconds": 600]]]])
        XCTAssertNil(code { try self.send("+15550000001") })
        XCTAssertNil(code { try self.send("+15550000001") })
        XCTAssertEqual(code { try self.send("+15550000001") }, "TOO_MANY_ATTEMPTS_TRY_LATER")
        XCTAssertNil(code { try self.send("+15550000002") })
        XCTAssertEqual(code { try self.send("+15550000003") }, "TOO_MANY_ATTEMPTS_TRY_LATER", "the IP has used its 3")
        XCTAssertNil(code { try self.send("+15550000003", ip: "10.0.0.2") })
        for _ in 0..<10 { XCTAssertNil(code { try self.send("+16505554567") }) }
        clock.advance(millis: 60_000)
        XCTAssertEqual(code { try self.send("+15550000001") }, "TOO_MANY_ATTEMPTS_TRY_LATER", "IP window still full")
        XCTAssertNil(code { try self.send("+15550000001", ip: "10.0.0.3") }, "phone window moved on")
        clock.advance(millis: 600_000)
        XCTAssertNil(code { try self.send("+15550000004") })
    }

    func testProjectQuota() throws {
        try patch(["phoneAuth": ["smsQuota": ["max": 2, "perSeconds": 3600]]])
        XCTAssertNil(code { try self.send("+15550000001") })
        XCTAssertNil(code { try self.send("+15550000002", ip: "1.1.1.1") })
        XCTAssertEqual(code { try self.send("+15550000003", ip: "2.2.2.2") }, "QUOTA_EXCEEDED : Exceeded quota.")
        XCTAssertNil(code { try self.send("+16505554567") })
        clock.advance(millis: 3_600_000)
        XCTAssertNil(code { try self.send("+15550000003") })
    }

    func testWaitForCode() throws {
        let got = expectation(description: "code")
        try emulator.waitForCode(key, phone: "+15559990000", timeoutSeconds: 5) { s in
            XCTAssertEqual(s?.phoneNumber, "+15559990000")
            got.fulfill()
        }
        _ = try send("+15559990000")
        wait(for: [got], timeout: 2)
        let timedOut = expectation(description: "timeout")
        try emulator.waitForCode(key, phone: "+15559990001", timeoutSeconds: 0.1) { s in
            XCTAssertNil(s)
            timedOut.fulfill()
        }
        wait(for: [timedOut], timeout: 2)
        let immediate = expectation(description: "pending")
        try emulator.waitForCode(key, phone: "+15559990000", timeoutSeconds: 5) { s in
            XCTAssertNotNil(s)
            immediate.fulfill()
        }
        wait(for: [immediate], timeout: 1)
    }

    func testAutoRetrievalHashEndsTheMessage() throws {
        _ = try emulator.sendVerificationCode(key, phoneNumber: "+15551112222", autoRetrievalHash: "FA+9qCX9VSu")
        let m = emulator.verificationCodes(key, phone: "+15551112222")[0].message
        XCTAssertTrue(m.hasSuffix("\nFA+9qCX9VSu"), m)
    }
}
