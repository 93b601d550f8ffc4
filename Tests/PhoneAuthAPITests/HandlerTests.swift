import EmulatorSupport
import HTTPServer
import JWT
@testable import PhoneAuthAPI
import PhoneAuthCore
import PhoneAuthTestSupport
import XCTest

/// Handlers driven through the app's responder with raw requests (no sockets; signing runs inline).
final class HandlerTests: XCTestCase, AppCalling {
    static let signingKey = TestKeys.signingKey
    var clock: EmulatorClock!
    var app: PhoneAuthApp!

    override func setUp() {
        clock = EmulatorClock(fixedAtMillis: testEpochMillis)
        app = makeTestApp(clock: clock, seed: 42)
    }

    func signIn() -> JSON {
        let session = itk("sendVerificationCode", #"{"phoneNumber":"+16505554567"}"#).1["sessionInfo"]!.stringValue!
        let (status, body) = itk("signInWithPhoneNumber", #"{"sessionInfo":"\#(session)","code":"123456"}"#)
        XCTAssertEqual(status, 200)
        return body
    }

    func testGoldenErrorEnvelope() {
        let (status, body) = itk("signInWithPhoneNumber", #"{"sessionInfo":"nope","code":"1"}"#)
        XCTAssertEqual(status, 400)
        XCTAssertEqual(body.serializedString,
                       #"{"error":{"code":400,"message":"INVALID_SESSION_INFO","errors":[{"message":"INVALID_SESSION_INFO","domain":"global","reason":"invalid"}],"status":"INVALID_ARGUMENT"}}"#)
        let (s2, b2) = call("POST", "/identitytoolkit.googleapis.com/v1/accounts:sendVerificationCode", "{}")
        XCTAssertEqual(s2, 403)
        XCTAssertEqual(b2.serializedString,
                       #"{"error":{"code":403,"message":"The request is missing a valid API key.","errors":[{"message":"The request is missing a valid API key.","domain":"global","reason":"forbidden"}],"status":"PERMISSION_DENIED"}}"#)
        let (s3, b3) = call("GET", "/nowhere")
        XCTAssertEqual(s3, 404)
        XCTAssertEqual(b3["error"]?["status"], "NOT_FOUND")
        let (s4, b4) = itk("sendVerificationCode", #"{"phoneNumber":"#)
        XCTAssertEqual(s4, 400)
        XCTAssertEqual(b4["error"]?["errors"]?.arrayValue?.first?["reason"], "parseError")
    }

    func testSignInIssuesProductionClaims() throws {
        let body = signIn()
        XCTAssertEqual(body["expiresIn"], "3600")
        XCTAssertEqual(body["isNewUser"], true)
        let token = try XCTUnwrap(body["idToken"]?.stringValue)
        let jwt = try XCTUnwrap(DecodedJWT(token))
        XCTAssertTrue(Self.signingKey.verify(jwt))
        XCTAssertEqual(jwt.payload["iat"], .int(1_800_000_000))
        XCTAssertEqual(jwt.payload["exp"], .int(1_800_003_600))
        XCTAssertEqual(jwt.payload["auth_time"], .int(1_800_000_000))
        XCTAssertEqual(jwt.payload["sub"], body["localId"])
        XCTAssertEqual(jwt.payload["firebase"], ["identities": ["phone": ["+16505554567"]], "sign_in_provider": "phone"])
        XCTAssertEqual(Array(jwt.payload.keys), ["iss", "aud", "auth_time", "user_id", "sub", "iat", "exp", "phone_number", "firebase"])
    }

    func testExpiredTokenOnTheEmulatorClock() throws {
        let token = signIn()["idToken"]!.stringValue!
        XCTAssertEqual(itk("lookup", #"{"idToken":"\#(token)"}"#).0, 200)
        clock.advance(millis: 3_600_000)
        let (status, body) = itk("lookup", #"{"idToken":"\#(token)"}"#)
        XCTAssertEqual(status, 400)
        XCTAssertEqual(body["error"]?["message"], "TOKEN_EXPIRED")
    }

    func testRefreshKeepsAuthTimeAndMovesIat() throws {
        let body = signIn()
        clock.advance(millis: 120_000)
        let rt = body["refreshToken"]!.stringValue!
        let (status, t) = call("POST", "/securetoken.googleapis.com/v1/token?key=k", "grant_type=refresh_token&refresh_token=\(rt)",
                               headers: [("Content-Type", "application/x-www-form-urlencoded")])
        XCTAssertEqual(status, 200)
        XCTAssertEqual(t["access_token"], t["id_token"])
        let jwt = try XCTUnwrap(DecodedJWT(t["access_token"]!.stringValue!))
        XCTAssertEqual(jwt.payload["auth_time"], .int(1_800_000_000))
        XCTAssertEqual(jwt.payload["iat"], .int(1_800_000_120))
    }

    func testRevocationViaValidSince() throws {
        let body = signIn()
        let token = body["idToken"]!.stringValue!
        let uid = body["localId"]!.stringValue!
        clock.advance(millis: 2000)
        try app.emulator.testUpdateUser(uid, in: StoreKey(projectId: "demo-phone")) { u in u.validSince = 1_800_000_001 }
        XCTAssertEqual(itk("lookup", #"{"idToken":"\#(token)"}"#).1["error"]?["message"], "TOKEN_EXPIRED")
        let (s, t) = call("POST", "/securetoken.googleapis.com/v1/token?key=k", #"{"grantType":"refresh_token","refreshToken":"\#(body["refreshToken"]!.stringValue!)"}"#)
        XCTAssertEqual(s, 400)
        XCTAssertEqual(t["error"]?["message"], "TOKEN_EXPIRED")
    }

    func testTokenFromAnotherProjectIsRejected() throws {
        let token = signIn()["idToken"]!.stringValue!
        let (status, body) = call("POST", "/identitytoolkit.googleapis.com/v1/projects/other/accounts:lookup", #"{"idToken":"\#(token)"}"#,
                                  headers: [("Authorization", "Bearer owner")])
        XCTAssertEqual(status, 400)
        XCTAssertEqual(body["error"]?["message"], "INVALID_ID_TOKEN")
    }

    func testAdminLookupAndTenantMismatch() {
        let uid = signIn()["localId"]!.stringValue!
        let (s, b) = call("POST", "/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts:lookup",
                          #"{"localId":["\#(uid)","missing"],"phoneNumber":["+1 650 555 4567"]}"#, headers: [("Authorization", "Bearer owner")])
        XCTAssertEqual(s, 200)
        XCTAssertEqual(b["users"]?.arrayValue?.count, 1)
        let (s2, b2) = call("POST", "/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts:lookup", #"{"localId":["missing"]}"#,
                            headers: [("Authorization", "Bearer owner")])
        XCTAssertEqual(s2, 200)
        XCTAssertNil(b2["users"])
        let (s3, b3) = call("POST", "/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts:lookup?key=k", #"{"localId":["x"]}"#)
        XCTAssertEqual(s3, 400)
        XCTAssertEqual(b3["error"]?["message"], "INSUFFICIENT_PERMISSION : Only authenticated requests can specify target_project_id.")
        let (s4, b4) = call("POST", "/identitytoolkit.googleapis.com/v1/projects/demo-phone/tenants/t1/accounts:lookup", #"{"tenantId":"t2"}"#,
                            headers: [("Authorization", "Bearer owner")])
        XCTAssertEqual(s4, 400)
        XCTAssertEqual(b4["error"]?["message"], "TENANT_ID_MISMATCH")
    }

    func testPhoneSignInInsideATenant() throws {
        let session = itk("sendVerificationCode", #"{"phoneNumber":"+16505554567","tenantId":"team-a"}"#).1["sessionInfo"]!.stringValue!
        let (status, body) = itk("signInWithPhoneNumber", #"{"sessionInfo":"\#(session)","code":"123456","tenantId":"team-a"}"#)
        XCTAssertEqual(status, 200)
        let jwt = try XCTUnwrap(DecodedJWT(body["idToken"]!.stringValue!))
        XCTAssertEqual(jwt.payload["firebase"]?["tenant"], "team-a")
        // The session belongs to the tenant: the project cannot use it.
        let s2 = itk("sendVerificationCode", #"{"phoneNumber":"+16505554567","tenantId":"team-a"}"#).1["sessionInfo"]!.stringValue!
        XCTAssertEqual(itk("signInWithPhoneNumber", #"{"sessionInfo":"\#(s2)","code":"123456"}"#).1["error"]?["message"], "INVALID_SESSION_INFO")
        // A tenant token used with another tenant.
        XCTAssertEqual(itk("lookup", #"{"idToken":"\#(body["idToken"]!.stringValue!)","tenantId":"team-b"}"#).1["error"]?["message"], "TENANT_ID_MISMATCH")
        XCTAssertEqual(itk("lookup", #"{"idToken":"\#(body["idToken"]!.stringValue!)"}"#).0, 200)
    }

    func testSnakeCaseAndNumericCodes() {
        let session = itk("sendVerificationCode", #"{"phone_number":"+16505554567"}"#).1["sessionInfo"]!.stringValue!
        let (status, _) = itk("signInWithPhoneNumber", #"{"session_info":"\#(session)","code":123456}"#)
        XCTAssertEqual(status, 200)
        let (s2, b2) = itk("signInWithPhoneNumber", #"{"sessionInfo":["x"],"code":"1"}"#)
        XCTAssertEqual(s2, 400)
        XCTAssertEqual(b2["error"]?["status"], "INVALID_ARGUMENT")
    }

    func testPreflightAndCORS() {
        var h = HTTPHeaders()
        h.add("Origin", "https://app.example")
        h.add("Access-Control-Request-Headers", "x-client-version")
        let r = app.respond(to: HTTPRequest(method: "OPTIONS", target: "/anything", headers: h), context: .detached)!
        XCTAssertEqual(r.status, 204)
        XCTAssertTrue(r.headers.contains { $0 == ("Access-Control-Allow-Origin", "https://app.example") })
        XCTAssertTrue(r.headers.contains { $0 == ("Access-Control-Allow-Headers", "x-client-version") })
    }

    func testKeysDocuments() {
        let (_, x509) = call("GET", "/www.googleapis.com/robot/v1/metadata/x509/securetoken@system.gserviceaccount.com")
        XCTAssertEqual(x509.objectValue?.keys, [Self.signingKey.kid])
        let (_, jwks) = call("GET", "/www.googleapis.com/service_accounts/v1/jwk/securetoken%40system.gserviceaccount.com")
        XCTAssertEqual(jwks["keys"]?.arrayValue?.first?["kid"], .string(Self.signingKey.kid))
    }

    func testUnsignedModeRoundTrip() throws {
        app = PhoneAuthApp(emulator: app.emulator, tokens: TokenService(mode: .none, initialKey: nil), signingPool: nil, logger: app.logger)
        let body = signIn()
        let token = body["idToken"]!.stringValue!
        XCTAssertTrue(token.hasSuffix("."))
        XCTAssertEqual(itk("lookup", #"{"idToken":"\#(token)"}"#).0, 200)
    }
}
