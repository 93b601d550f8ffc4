import EmulatorSupport
import JWT
@testable import PhoneAuthAPI
import PhoneAuthCore
import PhoneAuthTestSupport
import XCTest

/// `projects/{p}[/tenants/{t}]:createSessionCookie` and the session-cookie key URL, through the responder.
final class SessionCookieTests: XCTestCase, AppCalling {
    var clock: EmulatorClock!
    var app: PhoneAuthApp!
    var logs: MemoryLogSink!
    let now: Int64 = 1_800_000_000
    static let admin = [("Authorization", "Bearer owner")]
    static let path = "/identitytoolkit.googleapis.com/v1/projects/demo-phone:createSessionCookie"

    override func setUp() {
        clock = EmulatorClock(fixedAtMillis: testEpochMillis)
        logs = MemoryLogSink()
        app = makeTestApp(clock: clock, seed: 11, logger: Logger(label: "t", sink: logs))
    }

    func phoneSignIn(tenant: String? = nil) throws -> JSON {
        let t = tenant.map { #","tenantId":"\#($0)""# } ?? ""
        let session = try XCTUnwrap(itk("sendVerificationCode", #"{"phoneNumber":"+16505554567"\#(t)}"#).1["sessionInfo"]?.stringValue)
        let r = itk("signInWithPhoneNumber", #"{"sessionInfo":"\#(session)","code":"123456"\#(t)}"#)
        XCTAssertEqual(r.0, 200, "\(r.1)")
        return r.1
    }

    func create(_ body: String, path: String = SessionCookieTests.path, headers: [(String, String)] = SessionCookieTests.admin) -> (Int, JSON) {
        call("POST", path, body, headers: headers)
    }

    func testCookieCarriesTheIdTokensClaimsWithProductionsIssuer() throws {
        let user = try phoneSignIn()
        let idToken = try XCTUnwrap(user["idToken"]?.stringValue)
        clock.advance(millis: 10_000)
        let r = create(#"{"idToken":"\#(idToken)","validDuration":"600"}"#)
        XCTAssertEqual(r.0, 200, "\(r.1)")
        XCTAssertEqual(r.1.objectValue?.keys.map { $0 }, ["sessionCookie"])
        let cookie = try XCTUnwrap(DecodedJWT(try XCTUnwrap(r.1["sessionCookie"]?.stringValue)))
        XCTAssertTrue(TestKeys.signingKey.verify(cookie))
        XCTAssertEqual(cookie.keyID, TestKeys.signingKey.kid)
        let id = try XCTUnwrap(DecodedJWT(idToken)).payload
        XCTAssertEqual(cookie.payload["iss"], "https://session.firebase.google.com/demo-phone")
        XCTAssertEqual(cookie.payload["aud"], "demo-phone")
        XCTAssertEqual(cookie.payload["iat"], .int(now + 10))
        XCTAssertEqual(cookie.payload["exp"], .int(now + 10 + 600))
        for k in ["sub", "user_id", "auth_time", "phone_number", "firebase"] { XCTAssertEqual(cookie.payload[k], id[k], k) }
        XCTAssertTrue(logs.all.contains { $0.contains("session cookie created") && $0.contains("validSeconds=600") }, "\(logs.all)")
        // The same certificates are published at production's session-cookie key URL.
        let keys = call("GET", "/www.googleapis.com/identitytoolkit/v3/relyingparty/publicKeys")
        XCTAssertEqual(keys.0, 200)
        XCTAssertEqual(keys.1[TestKeys.signingKey.kid]?.stringValue, TestKeys.signingKey.certificatePEM)
    }

    func testDurationBounds() throws {
        let idToken = try XCTUnwrap(try phoneSignIn()["idToken"]?.stringValue)
        func exp(_ duration: String) throws -> JSON? {
            let r = create(#"{"idToken":"\#(idToken)"\#(duration)}"#)
            XCTAssertEqual(r.0, 200, "\(duration) \(r.1)")
            return DecodedJWT(try XCTUnwrap(r.1["sessionCookie"]?.stringValue))?.payload["exp"]
        }
        XCTAssertEqual(try exp(#","validDuration":300"#), .int(now + 300))
        XCTAssertEqual(try exp(#","validDuration":"1209600""#), .int(now + 1_209_600))
        XCTAssertEqual(try exp(""), .int(now + 1_209_600), "absent: fourteen days, as the official emulator")
        for bad in ["299", "1209601", "-300", #""-1""#, #""9223372036854775807""#] {
            XCTAssertEqual(message(create(#"{"idToken":"\#(idToken)","validDuration":\#(bad)}"#)), "INVALID_DURATION", bad)
        }
        for bad in ["300.5", #""five minutes""#, "true", "[300]", "1e300", #""99999999999999999999999""#] {
            let r = create(#"{"idToken":"\#(idToken)","validDuration":\#(bad)}"#)
            XCTAssertEqual(r.0, 400, bad)
            XCTAssertEqual(r.1["error"]?["status"], "INVALID_ARGUMENT", bad)
            XCTAssertEqual(message(r)?.contains("Invalid value at 'valid_duration'"), true, "\(bad) \(r.1)")
        }
    }

    func testIdTokenChecks() throws {
        XCTAssertEqual(message(create(#"{"validDuration":600}"#)), "MISSING_ID_TOKEN")
        XCTAssertEqual(message(create(#"{"idToken":"nope","validDuration":600}"#)), "INVALID_ID_TOKEN")
        let user = try phoneSignIn()
        let idToken = try XCTUnwrap(user["idToken"]?.stringValue)
        // Another project's path.
        XCTAssertEqual(message(create(#"{"idToken":"\#(idToken)"}"#, path: "/identitytoolkit.googleapis.com/v1/projects/other-project:createSessionCookie")),
                       "INVALID_ID_TOKEN")
        XCTAssertNil(app.emulator.existingStore(StoreKey(projectId: "other-project")), "a read-only route creates no project")
        // Tampered.
        let parts = idToken.split(separator: ".")
        XCTAssertEqual(message(create(#"{"idToken":"\#(parts[0]).\#(parts[1]).AAAA"}"#)), "INVALID_ID_TOKEN")
        // Revoked (validSince after the token's iat), then expired on the emulator clock.
        clock.advance(millis: 5_000)
        let uid = try XCTUnwrap(user["localId"]?.stringValue)
        let u = call("POST", "/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts:update",
                     #"{"localId":"\#(uid)","validSince":"\#(now + 5)"}"#, headers: Self.admin)
        XCTAssertEqual(u.0, 200, "\(u.1)")
        XCTAssertEqual(message(create(#"{"idToken":"\#(idToken)"}"#)), "TOKEN_EXPIRED")
        let fresh = try XCTUnwrap(try phoneSignIn()["idToken"]?.stringValue)
        XCTAssertEqual(create(#"{"idToken":"\#(fresh)"}"#).0, 200)
        clock.advance(millis: 3_600_000)
        XCTAssertEqual(message(create(#"{"idToken":"\#(fresh)"}"#)), "TOKEN_EXPIRED")
        XCTAssertTrue(logs.all.contains { $0.contains("session cookie refused") && $0.contains("TOKEN_EXPIRED") }, "\(logs.all)")
    }

    func testDisabledAndDeletedUsers() throws {
        let user = try phoneSignIn()
        let idToken = try XCTUnwrap(user["idToken"]?.stringValue), uid = try XCTUnwrap(user["localId"]?.stringValue)
        _ = call("POST", "/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts:update", #"{"localId":"\#(uid)","disableUser":true}"#,
                 headers: Self.admin)
        XCTAssertEqual(message(create(#"{"idToken":"\#(idToken)"}"#)), "USER_DISABLED")
        _ = call("POST", "/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts:delete", #"{"localId":"\#(uid)"}"#, headers: Self.admin)
        XCTAssertEqual(message(create(#"{"idToken":"\#(idToken)"}"#)), "USER_NOT_FOUND")
    }

    func testAdminOnly() throws {
        let idToken = try XCTUnwrap(try phoneSignIn()["idToken"]?.stringValue)
        XCTAssertEqual(create(#"{"idToken":"\#(idToken)"}"#, path: Self.path + "?key=fake-api-key", headers: []).0, 401)
        XCTAssertEqual(create(#"{"idToken":"\#(idToken)"}"#, headers: [("Authorization", "Bearer someone")]).0, 401)
    }

    func testTenants() throws {
        let tenantUser = try phoneSignIn(tenant: "team-a")
        let idToken = try XCTUnwrap(tenantUser["idToken"]?.stringValue)
        let tenantPath = "/identitytoolkit.googleapis.com/v1/projects/demo-phone/tenants/team-a:createSessionCookie"
        let r = create(#"{"idToken":"\#(idToken)"}"#, path: tenantPath)
        XCTAssertEqual(r.0, 200, "\(r.1)")
        let cookie = try XCTUnwrap(DecodedJWT(try XCTUnwrap(r.1["sessionCookie"]?.stringValue)))
        XCTAssertEqual(cookie.payload["firebase"]?["tenant"], "team-a")
        XCTAssertEqual(cookie.payload["iss"], "https://session.firebase.google.com/demo-phone")
        // Body tenantId works like the path's; a tenant token at the project (or another tenant) does not.
        XCTAssertEqual(create(#"{"idToken":"\#(idToken)","tenantId":"team-a"}"#).0, 200)
        XCTAssertEqual(message(create(#"{"idToken":"\#(idToken)"}"#)), "TENANT_ID_MISMATCH")
        XCTAssertEqual(message(create(#"{"idToken":"\#(idToken)"}"#, path: "/identitytoolkit.googleapis.com/v1/projects/demo-phone/tenants/team-b:createSessionCookie")),
                       "TENANT_ID_MISMATCH")
        let projectToken = try XCTUnwrap(try phoneSignIn()["idToken"]?.stringValue)
        XCTAssertEqual(message(create(#"{"idToken":"\#(projectToken)"}"#, path: tenantPath)), "TENANT_ID_MISMATCH")
    }

    func testSigningModeNoneGivesUnsignedCookies() throws {
        app = makeTestApp(clock: clock, seed: 12, signing: .none)
        let idToken = try XCTUnwrap(try phoneSignIn()["idToken"]?.stringValue)
        let r = create(#"{"idToken":"\#(idToken)","validDuration":3600}"#)
        XCTAssertEqual(r.0, 200, "\(r.1)")
        let cookie = try XCTUnwrap(r.1["sessionCookie"]?.stringValue)
        XCTAssertTrue(cookie.hasSuffix("."))
        let jwt = try XCTUnwrap(DecodedJWT(cookie))
        XCTAssertEqual(jwt.algorithm, "none")
        XCTAssertEqual(jwt.payload["exp"], .int(now + 3600))
        XCTAssertEqual(jwt.payload["iss"], "https://session.firebase.google.com/demo-phone")
    }
}
