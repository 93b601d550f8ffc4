import EmulatorSupport
@testable import PhoneAuthAPI
import PhoneAuthCore
import PhoneAuthStorage
import PhoneAuthTestSupport
import XCTest

/// `--data-dir`: password users and pending out-of-band codes survive a restart (issue 13).
final class EmailDurabilityTests: XCTestCase {
    var dir = ""
    override func setUp() { dir = TemporaryDirectory.make("phone-auth-email") }
    override func tearDown() { TemporaryDirectory.remove(dir) }

    func reopen() throws -> (DataDirectory, Emulator) { try reopenDataDirectory(dir) }

    func testPasswordUserAndPendingCodesSurviveARestart() throws {
        let key = StoreKey(projectId: "p")
        let tenant = StoreKey(projectId: "p", tenantId: "t1")
        var verifyCode = "", resetCode = "", usedCode = ""
        do {
            let (d, e) = try reopen()
            for k in [key, tenant] {
                var c = UserChanges()
                c.email = .set("Pat@example.com")
                (c.passwordHash, c.salt) = Passwords.hash("secret1", random: e.random)
                _ = try e.createUser(k, localId: "pat", changes: c)
            }
            verifyCode = try e.createOobCode(key, email: "pat@example.com", newEmail: nil, type: .verifyEmail, link: { "http://h/\($0)" }).code
            resetCode = try e.createOobCode(tenant, email: "pat@example.com", newEmail: nil, type: .passwordReset, link: { "http://h/\($0)" }).code
            usedCode = try e.createOobCode(key, email: "pat@example.com", newEmail: nil, type: .verifyEmail, link: { "http://h/\($0)" }).code
            _ = try e.applyOobCode(key, code: usedCode)
            d.close()
        }
        let (d, e) = try reopen()
        defer { d.close() }
        let user = try XCTUnwrap(e.user(key, email: "PAT@example.com"), "the email index is rebuilt")
        XCTAssertTrue(Passwords.matches("secret1", hash: user.passwordHash, salt: user.salt))
        XCTAssertNotNil(user.passwordUpdatedAt)
        XCTAssertTrue(user.emailVerified, "an applied code's effect is durable")
        guard case .signedIn(let signedIn, _, _) = try e.signInWithPassword(key, localId: "pat", verifiedHash: user.passwordHash!) else {
            return XCTFail("no second factor is enrolled")
        }
        XCTAssertEqual(signedIn.localId, "pat")
        XCTAssertEqual(e.oobCodes(key, email: nil).map(\.code), [verifyCode], "a used code stays used")
        XCTAssertEqual(e.oobCodes(tenant, email: "pat@example.com").map(\.code), [resetCode])
        XCTAssertEqual(e.oobCodes(key, email: nil).first?.link, "http://h/\(verifyCode)")
        let (code, _) = try e.resetPassword(tenant, code: resetCode, passwordHash: "h2", salt: "s2")
        XCTAssertEqual(code.requestType, .passwordReset)
        XCTAssertThrowsError(try e.applyOobCode(key, code: usedCode)) { XCTAssertEqual(($0 as? AuthError)?.code, .invalidOobCode) }
        // Codes made after the restart continue the creation order.
        let later = try e.createOobCode(key, email: "pat@example.com", newEmail: nil, type: .verifyEmail, link: { $0 })
        XCTAssertEqual(e.oobCodes(key, email: nil).map(\.code), [verifyCode, later.code])
        XCTAssertEqual(try e.clearOobCodes(key, email: nil), 2)
    }

    func testClearedCodesStayClearedAfterARestart() throws {
        let key = StoreKey(projectId: "p")
        do {
            let (d, e) = try reopen()
            for _ in 0..<3 { _ = try e.createOobCode(key, email: "a@example.com", newEmail: nil, type: .verifyEmail, link: { $0 }) }
            XCTAssertEqual(try e.clearOobCodes(key, email: nil), 3)
            _ = try e.createOobCode(key, email: "b@example.com", newEmail: nil, type: .verifyEmail, link: { $0 })
            d.close()
        }
        let (d, e) = try reopen()
        defer { d.close() }
        XCTAssertEqual(e.oobCodes(key, email: nil).map(\.email), ["b@example.com"])
    }
}
