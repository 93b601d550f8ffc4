import Dispatch
import EmulatorSupport
import HTTPServer
import JWT
@testable import PhoneAuthAPI
import PhoneAuthCore
import PhoneAuthTestSupport
import XCTest

/// `.adaptive` routes (signInWithPassword): answered on the calling thread (an event loop) when nothing costly is
/// needed — an enrolled user's MFA-required answer with a password verified before — and moved to the signing pool
/// before a PBKDF2 derivation or a signature, with nothing changed on the loop.
final class AdaptiveExecutionTests: XCTestCase {
    private var emulator: Emulator!
    private var app: PhoneAuthApp!
    private var pool: WorkerPool!
    private let key = StoreKey(projectId: "demo-phone")

    override func setUp() {
        emulator = makeTestEmulator(projectId: "demo-phone", clock: EmulatorClock(fixedAtMillis: testEpochMillis), seed: 11)
        pool = WorkerPool(threads: 1)
        app = PhoneAuthApp(emulator: emulator, tokens: TokenService(mode: .rs256, initialKey: TestKeys.signingKey), signingPool: pool,
                           logger: .quiet)
    }

    override func tearDown() { pool.shutdown() }

    /// The answer now (`now` true) or the one delivered later from the pool.
    private func signIn(_ email: String, _ password: String) -> (now: Bool, status: Int, body: JSON) {
        let req = HTTPRequest(method: "POST", target: "/identitytoolkit.googleapis.com/v1/accounts:signInWithPassword?key=k",
                              body: Array(#"{"email":"\#(email)","password":"\#(password)","returnSecureToken":true}"#.utf8))
        let later = Locked<HTTPResponse?>(nil)
        let done = DispatchSemaphore(value: 0)
        if let r = app.respond(to: req, deliver: { r in later.withLock { $0 = r }; done.signal() }) {
            return (true, r.status, (try? JSONParser.parse(r.body)) ?? .null)
        }
        XCTAssertEqual(done.wait(timeout: .now() + 30), .success)
        let r = later.withLock { $0 }!
        return (false, r.status, (try? JSONParser.parse(r.body)) ?? .null)
    }

    private func createUser(_ email: String, mfa: Bool) {
        var body = #"{"email":"\#(email)","password":"secret1","emailVerified":true"#
        if mfa { body += #","mfaInfo":[{"phoneInfo":"+16505554567"}]"# }
        body += "}"
        var h = HTTPHeaders()
        h.add("Authorization", "Bearer owner")
        let req = HTTPRequest(method: "POST", target: "/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts", headers: h,
                              body: Array(body.utf8))
        XCTAssertEqual(app.respond(to: req, deliver: { _ in })?.status, 200)
    }

    func testEnrolledUserWithAKnownPasswordIsAnsweredOnTheLoop() {
        createUser("mfa@example.com", mfa: true)
        // Known password (the admin API derived it when it set it): answered where it arrived, no token signed.
        let again = signIn("mfa@example.com", "secret1")
        XCTAssertTrue(again.now)
        XCTAssertEqual(again.status, 200)
        XCTAssertNotNil(again.body["mfaPendingCredential"]?.stringValue)
        XCTAssertNil(again.body["idToken"])
        // A wrong password is never known: derived on the pool, refused there.
        let wrong = signIn("mfa@example.com", "wrong-one")
        XCTAssertFalse(wrong.now)
        XCTAssertEqual(wrong.body["error"]?["message"]?.stringValue, "INVALID_LOGIN_CREDENTIALS")
    }

    func testASignInThatSignsMovesToThePoolWithNothingChangedOnTheLoop() throws {
        createUser("plain@example.com", mfa: false)
        _ = signIn("plain@example.com", "secret1")  // the password is known from now on
        let before = try XCTUnwrap(emulator.user(key, email: "plain@example.com"))
        let tokensBefore = emulator.refreshTokenCount
        let r = signIn("plain@example.com", "secret1")
        XCTAssertFalse(r.now, "a signature never runs on the loop")
        XCTAssertEqual(r.status, 200)
        let jwt = try XCTUnwrap(r.body["idToken"]?.stringValue.flatMap(DecodedJWT.init))
        XCTAssertTrue(TestKeys.signingKey.verify(jwt))
        // One sign-in happened (one refresh token, one login stamp), not two.
        XCTAssertEqual(emulator.refreshTokenCount, tokensBefore + 1)
        XCTAssertNotNil(emulator.user(key, email: "plain@example.com")?.lastLoginAt)
        XCTAssertEqual(before.localId, emulator.user(key, email: "plain@example.com")?.localId)
    }

    func testWithoutAPoolOrUnsignedEverythingStaysWhereItArrived() {
        app = PhoneAuthApp(emulator: emulator, tokens: TokenService(mode: .none, initialKey: nil), signingPool: pool, logger: .quiet)
        createUser("none@example.com", mfa: false)
        let r = signIn("none@example.com", "secret1")
        XCTAssertTrue(r.now)
        XCTAssertEqual(r.status, 200)
        XCTAssertNotNil(r.body["idToken"]?.stringValue)
    }
}
