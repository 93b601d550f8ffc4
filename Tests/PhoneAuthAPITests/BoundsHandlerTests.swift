import EmulatorSupport
import HTTPServer
import JWT
@testable import PhoneAuthAPI
import PhoneAuthCore
import PhoneAuthTestSupport
import XCTest

/// Issue 11 through the responder: client times are range-checked, tokens with absurd times are refused (never a
/// trap), key rotation keeps a bounded set, bulk admin routes leave the event loop.
final class BoundsHandlerTests: XCTestCase, AppCalling {
    static let signingKey = TestKeys.signingKey
    static let owner = [("Authorization", "Bearer owner")]
    var clock: EmulatorClock!
    var app: PhoneAuthApp!

    override func setUp() {
        clock = EmulatorClock(fixedAtMillis: testEpochMillis)
        app = makeTestApp(clock: clock, seed: 7)
    }

    func admin(_ op: String, _ body: String) -> (Int, JSON) {
        call("POST", "/identitytoolkit.googleapis.com/v1/projects/demo-phone/\(op)", body, headers: Self.owner)
    }

    func signIn() -> JSON {
        let session = itk("sendVerificationCode", #"{"phoneNumber":"+16505554567"}"#).1["sessionInfo"]!.stringValue!
        return itk("signInWithPhoneNumber", #"{"sessionInfo":"\#(session)","code":"123456"}"#).1
    }

    // MARK: clock

    func testClockAdvanceIsBoundedWithAClearError() {
        let tenYears = 10 * 365 * 86_400
        for _ in 0..<10 { XCTAssertEqual(call("POST", "/emulator/v1/clock:advance", #"{"seconds":\#(tenYears)}"#).0, 200) }
        for _ in 0..<50 {
            let r = call("POST", "/emulator/v1/clock:advance", #"{"seconds":\#(tenYears)}"#)
            XCTAssertEqual(r.0, 400)
            XCTAssertEqual(r.1["error"]?["status"], "INVALID_ARGUMENT")
            XCTAssertTrue(message(r)?.contains("clock:reset") == true, message(r) ?? "")
        }
        XCTAssertEqual(call("POST", "/emulator/v1/clock:advance", #"{"seconds":\#(tenYears + 1)}"#).0, 400)
        XCTAssertEqual(call("POST", "/emulator/v1/clock:advance", #"{"seconds":1e308}"#).0, 400)
        XCTAssertEqual(call("GET", "/emulator/v1/clock").0, 200)
        XCTAssertEqual(signIn()["expiresIn"], "3600", "tokens still work a hundred years on")
        XCTAssertEqual(call("POST", "/emulator/v1/clock:reset", "{}").0, 200)
        XCTAssertEqual(call("POST", "/emulator/v1/clock:advance", #"{"seconds":60}"#).0, 200)
    }

    // MARK: account times

    func testAccountTimesOutsideTheTimestampRangeAreRefused() {
        for body in [#"{"createdAt":"9223372036854775807"}"#, #"{"createdAt":9223372036854775807}"#, #"{"createdAt":"-1"}"#,
                     #"{"lastLoginAt":"253402300800000"}"#, #"{"validSince":"253402300800"}"#, #"{"validSince":-5}"#] {
            let r = admin("accounts", body)
            XCTAssertEqual(r.0, 400, body)
            XCTAssertEqual(r.1["error"]?["status"], "INVALID_ARGUMENT", body)
        }
        XCTAssertEqual(admin("accounts", #"{"createdAt":"99999999999999999999"}"#).0, 400, "beyond Int64")
        XCTAssertEqual(admin("accounts", #"{"localId":"ok","createdAt":"253402300799999","lastLoginAt":"0","validSince":"253402300799"}"#).0, 200)
        let user = admin("accounts:lookup", #"{"localId":["ok"]}"#).1["users"]?.arrayValue?.first
        XCTAssertEqual(user?["createdAt"], "253402300799999")
        XCTAssertEqual(user?["validSince"], "253402300799")
        XCTAssertEqual(admin("accounts:update", #"{"localId":"ok","validSince":"9223372036854775807"}"#).0, 400)
        XCTAssertEqual(admin("accounts:update", #"{"localId":"ok","validSince":1800000000}"#).0, 200)
    }

    func testImportReportsOutOfRangeTimesPerUser() {
        let r = admin("accounts:batchCreate", #"{"users":[{"localId":"a","createdAt":"9223372036854775807"},{"localId":"b","createdAt":"1700000000000"},{"localId":"c","validSince":1e300},{"localId":"d","lastLoginAt":""}]}"#)
        XCTAssertEqual(r.0, 200)
        let errors = r.1["error"]?.arrayValue ?? []
        XCTAssertEqual(errors.map { $0["index"] }, [0, 2])
        XCTAssertTrue(errors.first?["message"]?.stringValue?.contains("createdAt") == true)
        XCTAssertEqual(admin("accounts:lookup", #"{"localId":["a","b","c","d"]}"#).1["users"]?.arrayValue?.count, 2)
    }

    // MARK: tokens

    func forged(_ claims: JSONObject) throws -> String { try Self.signingKey.sign(payload: claims) }

    func testTokensWithAbsurdTimesAreInvalidNotATrap() throws {
        let uid = signIn()["localId"]!.stringValue!
        let base: JSONObject = ["iss": "https://securetoken.google.com/demo-phone", "aud": "demo-phone", "sub": .string(uid),
                                "iat": 1_800_000_000, "exp": 1_800_003_600, "auth_time": 1_800_000_000]
        XCTAssertEqual(itk("lookup", #"{"idToken":"\#(try forged(base))"}"#).0, 200)
        let cases: [(String, JSON)] = [("exp", .number(9.223372036854775807e18)), ("exp", .number(1e300)), ("exp", .number(-1)),
                                       ("iat", .number(9.2e18)), ("iat", .number(-9.2e18)), ("auth_time", .number(1e19)), ("exp", "soon")]
        for (claim, value) in cases {
            var c = base
            c[claim] = value
            let r = itk("lookup", #"{"idToken":"\#(try forged(c))"}"#)
            XCTAssertEqual(message(r), "INVALID_ID_TOKEN", "\(claim) = \(value.serializedString)")
        }
        // The same in unsigned mode, where the client writes every claim.
        app = PhoneAuthApp(emulator: app.emulator, tokens: TokenService(mode: .none, initialKey: nil), signingPool: nil, logger: app.logger)
        var c = base
        c["exp"] = .number(9.3e18)
        XCTAssertEqual(message(itk("lookup", #"{"idToken":"\#(JWTSerializer.unsigned(payload: c))"}"#)), "INVALID_ID_TOKEN")
        c["exp"] = .number(Double(Timestamp.maxSeconds))
        c["auth_time"] = .number(Double(Timestamp.maxSeconds))
        let ok = itk("update", #"{"idToken":"\#(JWTSerializer.unsigned(payload: c))","returnSecureToken":true}"#)
        XCTAssertEqual(ok.0, 200, ok.1.serializedString)
    }

    // MARK: key rotation

    func testRotationKeepsTheCurrentKeyAndFourPreviousAndRefusesRetiredKeys() throws {
        let first = signIn()["idToken"]!.stringValue!
        var published: [String] = []
        var retired: [String] = []
        for _ in 0..<6 {
            let r = call("POST", "/emulator/v1/keys:rotate", "{}")
            XCTAssertEqual(r.0, 200)
            published = r.1["publishedKids"]?.arrayValue?.compactMap(\.stringValue) ?? []
            retired += r.1["retiredKids"]?.arrayValue?.compactMap(\.stringValue) ?? []
            XCTAssertLessThanOrEqual(published.count, TokenService.maxPublishedKeys)
        }
        XCTAssertEqual(published.count, 5)
        XCTAssertEqual(retired.count, 2)
        XCTAssertTrue(retired.contains(Self.signingKey.kid))
        XCTAssertEqual(call("GET", "/www.googleapis.com/robot/v1/metadata/x509/securetoken@system.gserviceaccount.com").1.objectValue?.keys.sorted(),
                       published.sorted())
        XCTAssertEqual(message(itk("lookup", #"{"idToken":"\#(first)"}"#)), "INVALID_ID_TOKEN", "a retired key's token is refused")
        XCTAssertEqual(itk("lookup", #"{"idToken":"\#(signIn()["idToken"]!.stringValue!)"}"#).0, 200)
    }

    // MARK: bulk work

    func testBulkAdminRoutesRunOnTheWorkerPoolInEveryMode() {
        let pool = WorkerPool(threads: 1)
        defer { pool.shutdown() }
        app = PhoneAuthApp(emulator: app.emulator, tokens: TokenService(mode: .none, initialKey: nil), signingPool: pool, logger: app.logger)
        // Nil from respond(): the request was handed to the pool, not answered on the calling (event loop) thread.
        XCTAssertEqual(call("POST", "/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts:batchDelete", #"{"localIds":["x"],"force":true}"#,
                            headers: Self.owner).0, 0)
        XCTAssertEqual(call("DELETE", "/emulator/v1/projects/demo-phone/accounts").0, 0)
        XCTAssertEqual(call("POST", "/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts:query", "{}", headers: Self.owner).0, 0)
        // Light routes stay inline.
        XCTAssertEqual(call("GET", "/").0, 200)
        XCTAssertEqual(itk("sendVerificationCode", #"{"phoneNumber":"+16505554567"}"#).0, 200)
    }
}
