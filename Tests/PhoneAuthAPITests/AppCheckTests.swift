import EmulatorSupport
import HTTPServer
import JWT
@testable import PhoneAuthAPI
import PhoneAuthCore
import PhoneAuthTestSupport
import XCTest

/// App Check for Authentication and Phone Number Verification test tokens through the responder.
final class AppCheckTests: XCTestCase, AppCalling {
    var clock: EmulatorClock!
    var app: PhoneAuthApp!
    let base = "/emulator/v1/projects/demo-phone"
    let webApp = "1:12345:web:0123456789abcdef"

    override func setUp() {
        clock = EmulatorClock(fixedAtMillis: testEpochMillis)
        app = makeTestApp(clock: clock, seed: 11)
    }

    func mint(_ body: String, tenant: String? = nil) -> (Int, JSON) {
        call("POST", base + (tenant.map { "/tenants/\($0)" } ?? "") + "/appCredentials", body)
    }

    func appCheckToken(_ extra: String = "") throws -> String {
        let r = mint(#"{"type":"APP_CHECK","appId":"\#(webApp)"\#(extra)}"#)
        XCTAssertEqual(r.0, 200, "\(r.1)")
        return try XCTUnwrap(r.1["token"]?.stringValue)
    }

    func configure(_ json: String) {
        let r = call("PATCH", base + "/config", json)
        XCTAssertEqual(r.0, 200, "\(r.1)")
    }

    func signUp(appCheck: String?) -> (Int, JSON) {
        call("POST", "/identitytoolkit.googleapis.com/v1/accounts:signUp?key=k", #"{"returnSecureToken":true}"#,
             headers: appCheck.map { [("X-Firebase-AppCheck", $0)] } ?? [])
    }

    func metrics() -> JSON? { call("GET", base + "/appCheck").1["metrics"] }

    func events(_ type: String) -> [JSON] { eventLines(base + "/events?format=jsonl&follow=false&since=0&type=\(type)") }

    // MARK: tokens in production's form

    func testAppCheckTokenHasProductionsShapeAndItsOwnKey() throws {
        let token = try appCheckToken()
        let jwt = try XCTUnwrap(DecodedJWT(token))
        XCTAssertEqual(jwt.header["alg"], "RS256")
        XCTAssertEqual(jwt.header["typ"], "JWT")
        XCTAssertEqual(jwt.keyID, TestKeys.appCheckKey.kid)
        XCTAssertNotEqual(jwt.keyID, TestKeys.signingKey.kid, "App Check has a key set of its own")
        XCTAssertTrue(TestKeys.appCheckKey.verify(jwt))
        XCTAssertEqual(jwt.payload["iss"], "https://firebaseappcheck.googleapis.com/12345")
        XCTAssertEqual(jwt.payload["aud"], ["projects/12345", "projects/demo-phone"])
        XCTAssertEqual(jwt.payload["sub"], .string(webApp))
        let iat = try XCTUnwrap(jwt.payload["iat"]?.int64Value)
        XCTAssertEqual(iat, clock.nowSeconds())
        XCTAssertEqual(jwt.payload["exp"]?.int64Value, iat + 3600)
        let jwks = call("GET", "/firebaseappcheck.googleapis.com/v1/jwks")
        XCTAssertEqual(jwks.0, 200)
        XCTAssertEqual(jwks.1["keys"]?.arrayValue?.compactMap { $0["kid"]?.stringValue }, [TestKeys.appCheckKey.kid])
    }

    func testTTLsAreBounded() throws {
        let jwt = try XCTUnwrap(DecodedJWT(try appCheckToken(#","ttlSeconds":1800"#)))
        XCTAssertEqual(jwt.payload["exp"]?.int64Value, (jwt.payload["iat"]?.int64Value ?? 0) + 1800)
        for bad in ["1799", "604801", "\"x\"", "1.5"] {
            XCTAssertEqual(mint(#"{"type":"APP_CHECK","ttlSeconds":\#(bad)}"#).0, 400, bad)
        }
        XCTAssertEqual(call("PATCH", base + "/config", #"{"appCheck":{"tokenTtlSeconds":60}}"#).0, 400)
        configure(#"{"appCheck":{"tokenTtlSeconds":7200}}"#)
        let t = try XCTUnwrap(DecodedJWT(try appCheckToken()))
        XCTAssertEqual(t.payload["exp"]?.int64Value, (t.payload["iat"]?.int64Value ?? 0) + 7200)
    }

    func testAppIdsAreValidatedAtTheBoundary() {
        for bad in ["x", "1:12345:web:XYZ", "2:12345:web:ab", "1:12345:desktop:ab", "1:12345:web:", String(repeating: "a", count: 200)] {
            let r = mint(#"{"type":"APP_CHECK","appId":\#(JSON.string(bad).serializedString)}"#)
            XCTAssertEqual(r.0, 400, bad)
        }
        // Another project number's app is not this project's.
        XCTAssertEqual(mint(#"{"type":"APP_CHECK","appId":"1:999:android:ab"}"#).0, 403)
        configure(#"{"appCheck":{"apps":["1:12345:ios:abc"]}}"#)
        XCTAssertEqual(mint(#"{"type":"APP_CHECK","appId":"\#(webApp)"}"#).0, 403)
        let r = mint(#"{"type":"APP_CHECK"}"#)
        XCTAssertEqual(r.1["appId"], "1:12345:ios:abc", "the first registered app by default")
        XCTAssertEqual(call("PATCH", base + "/config", #"{"appCheck":{"apps":["nope"]}}"#).0, 400)
    }

    func testDebugTokenExchangeAtProductionsPath() throws {
        let path = "/firebaseappcheck.googleapis.com/v1/projects/demo-phone/apps/\(webApp):exchangeDebugToken?key=k"
        let debug = "3b7a2f1e-5c3d-4e8f-9a0b-1c2d3e4f5a6b"
        let r = call("POST", path, #"{"debug_token":"\#(debug)"}"#)
        XCTAssertEqual(r.0, 200, "\(r.1)")
        XCTAssertEqual(r.1["ttl"], "3600s")
        let jwt = try XCTUnwrap(DecodedJWT(try XCTUnwrap(r.1["token"]?.stringValue)))
        XCTAssertEqual(jwt.payload["sub"], .string(webApp))
        XCTAssertEqual(jwt.payload["provider"], "debug")
        XCTAssertEqual(call("POST", path, #"{}"#).0, 400)
        XCTAssertEqual(call("POST", path, #"{"debugToken":"no spaces allowed"}"#).0, 403)
        XCTAssertEqual(call("POST", path.replacingOccurrences(of: "?key=k", with: ""), #"{"debugToken":"\#(debug)"}"#).0, 403, "an API key is needed")
        configure(#"{"appCheck":{"debugTokens":["registered-token-1"]}}"#)
        XCTAssertEqual(call("POST", path, #"{"debugToken":"\#(debug)"}"#).0, 403)
        XCTAssertEqual(call("POST", path, #"{"debugToken":"registered-token-1"}"#).0, 200)
        let wrong = call("POST", "/firebaseappcheck.googleapis.com/v1/projects/demo-phone/apps/1:1:web:ab:exchangeDebugToken?key=k",
                         #"{"debugToken":"registered-token-1"}"#)
        XCTAssertEqual(wrong.0, 403)
        XCTAssertEqual(wrong.1["error"]?["status"], "PERMISSION_DENIED")
    }

    func testRecaptchaExchangesTakeMintedTokensOnce() throws {
        for (method, field) in [("exchangeRecaptchaEnterpriseToken", "recaptcha_enterprise_token"), ("exchangeRecaptchaV3Token", "recaptcha_v3_token")] {
            let path = "/firebaseappcheck.googleapis.com/v1/projects/demo-phone/apps/\(webApp):\(method)?key=k"
            let minted = try XCTUnwrap(mint(#"{"type":"RECAPTCHA"}"#).1["token"]?.stringValue)
            let r = call("POST", path, #"{"\#(field)":"\#(minted)"}"#)
            XCTAssertEqual(r.0, 200, "\(r.1)")
            XCTAssertEqual(DecodedJWT(try XCTUnwrap(r.1["token"]?.stringValue))?.payload["sub"], .string(webApp))
            XCTAssertEqual(call("POST", path, #"{"\#(field)":"\#(minted)"}"#).0, 403, "single use")
            XCTAssertEqual(call("POST", path, #"{"\#(field)":"not-minted"}"#).0, 403)
            XCTAssertEqual(call("POST", path, #"{}"#).0, 400)
        }
    }

    // MARK: enforcement

    func testOffIgnoresTheHeader() {
        XCTAssertEqual(signUp(appCheck: nil).0, 200)
        XCTAssertEqual(signUp(appCheck: "garbage").0, 200)
        XCTAssertEqual(metrics(), ["verified": 0, "missing": 0, "invalid": 0, "refused": 0])
        XCTAssertEqual(events("appCheck.checked").count, 0)
    }

    func testUnenforcedVerifiesCountsAndRecordsButNeverRefuses() throws {
        configure(#"{"appCheck":{"enforcement":"UNENFORCED"}}"#)
        let token = try appCheckToken()
        XCTAssertEqual(signUp(appCheck: token).0, 200)
        XCTAssertEqual(signUp(appCheck: nil).0, 200)
        XCTAssertEqual(signUp(appCheck: token + "x").0, 200)
        XCTAssertEqual(metrics(), ["verified": 1, "missing": 1, "invalid": 1, "refused": 0])
        let seen = events("appCheck.checked")
        XCTAssertEqual(seen.compactMap { $0["data"]?["outcome"]?.stringValue ?? $0["outcome"]?.stringValue }, ["verified", "missing", "invalid"], "\(seen)")
    }

    func testEnforcedRefusesAsProductionDoes() throws {
        configure(#"{"appCheck":{"enforcement":"ENFORCED"}}"#)
        let token = try appCheckToken()
        let missing = signUp(appCheck: nil)
        XCTAssertEqual(missing.0, 401)
        XCTAssertEqual(missing.1["error"]?["status"], "UNAUTHENTICATED")
        XCTAssertEqual(message(missing), "Firebase App Check token is invalid")
        XCTAssertEqual(signUp(appCheck: token + "x").0, 401)
        // An ID token is no App Check token (other key, other issuer).
        let idToken = try XCTUnwrap(signUp(appCheck: token).1["idToken"]?.stringValue)
        XCTAssertEqual(signUp(appCheck: idToken).0, 401)
        // Phone sign-in, refresh: every client call.
        XCTAssertEqual(itk("sendVerificationCode", #"{"phoneNumber":"+16505554567"}"#).0, 401)
        XCTAssertEqual(call("POST", "/securetoken.googleapis.com/v1/token?key=k", #"{"grant_type":"refresh_token","refresh_token":"x"}"#).0, 401)
        // Admin calls are not App Check's.
        XCTAssertEqual(call("POST", "/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts:lookup", #"{"localId":["a"]}"#,
                            headers: [("Authorization", "Bearer owner")]).0, 200)
        XCTAssertEqual(metrics()?["refused"], 5)
        XCTAssertEqual(metrics()?["verified"], 1)
    }

    func testEnforcedChecksExpiryOnTheEmulatorClockAndTheProject() throws {
        configure(#"{"appCheck":{"enforcement":"ENFORCED"}}"#)
        let token = try appCheckToken(#","ttlSeconds":1800"#)
        XCTAssertEqual(signUp(appCheck: token).0, 200)
        _ = clock.advance(millis: 1_801_000)
        XCTAssertEqual(signUp(appCheck: token).0, 401, "expired")
        // A token of another project (same number, other id) is refused.
        let other = call("POST", "/emulator/v1/projects/other-proj/appCredentials", #"{"type":"APP_CHECK"}"#).1["token"]?.stringValue ?? ""
        XCTAssertEqual(signUp(appCheck: other).0, 401)
        // Only registered apps, once `apps` is set.
        let fresh = try appCheckToken()
        configure(#"{"appCheck":{"apps":["1:12345:android:ff"]}}"#)
        XCTAssertEqual(signUp(appCheck: fresh).0, 401)
    }

    func testTenantsHaveTheirOwnEnforcement() throws {
        XCTAssertEqual(call("PATCH", base + "/tenants/t-1/config", #"{"appCheck":{"enforcement":"ENFORCED"}}"#).0, 200)
        XCTAssertEqual(signUp(appCheck: nil).0, 200)
        let r = call("POST", "/identitytoolkit.googleapis.com/v1/accounts:signUp?key=k", #"{"tenantId":"t-1","returnSecureToken":true}"#)
        XCTAssertEqual(r.0, 401)
    }

    // MARK: Phone Number Verification

    func testPNVTokensForTestNumbersOnly() throws {
        let r = mint(#"{"type":"PNV","phoneNumber":"+1 650-555-4567"}"#)
        XCTAssertEqual(r.0, 200, "\(r.1)")
        let jwt = try XCTUnwrap(DecodedJWT(try XCTUnwrap(r.1["token"]?.stringValue)))
        XCTAssertEqual(jwt.header["alg"], "ES256")
        XCTAssertEqual(jwt.header["typ"], "JWT")
        XCTAssertEqual(jwt.signature.count, 64)
        XCTAssertTrue(try app.attestation.currentPNV().verify(jwt))
        XCTAssertEqual(jwt.keyID, try app.attestation.currentPNV().kid)
        XCTAssertEqual(jwt.payload["iss"], "https://fpnv.googleapis.com/projects/12345")
        XCTAssertEqual(jwt.payload["aud"], ["https://fpnv.googleapis.com/projects/12345", "https://fpnv.googleapis.com/projects/demo-phone"])
        XCTAssertEqual(jwt.payload["sub"], "+16505554567")
        XCTAssertEqual(jwt.payload["exp"]?.int64Value, (jwt.payload["iat"]?.int64Value ?? 0) + 3600)
        let jwks = call("GET", "/fpnv.googleapis.com/v1beta/jwks").1["keys"]?.arrayValue?.first
        XCTAssertEqual(jwks?["kty"], "EC")
        XCTAssertEqual(jwks?["crv"], "P-256")
        XCTAssertEqual(jwks?["kid"]?.stringValue, jwt.keyID)
        XCTAssertEqual(Base64URL.decode(jwks?["x"]?.stringValue ?? "")?.count, 32)

        XCTAssertEqual(mint(#"{"type":"PNV","phoneNumber":"+15551234567"}"#).0, 400, "not a test number")
        XCTAssertEqual(mint(#"{"type":"PNV"}"#).0, 400)
        XCTAssertEqual(mint(#"{"type":"PNV","phoneNumber":"not a number"}"#).0, 400)
        XCTAssertEqual(mint(#"{"type":"PNV","phoneNumber":"+16505554567","ttlSeconds":59}"#).0, 400)
        configure(#"{"phoneNumberVerification":{"testNumbers":["+44 7700 900123"]}}"#)
        XCTAssertEqual(call("GET", base + "/config").1["phoneNumberVerification"]?["testNumbers"], ["+447700900123"])
        XCTAssertEqual(mint(#"{"type":"PNV","phoneNumber":"+447700900123"}"#).0, 200)
        XCTAssertEqual(call("PATCH", base + "/config", #"{"phoneNumberVerification":{"testNumbers":["12"]}}"#).0, 400)
    }

    func testES256SignaturesVerifyAndTamperingFails() throws {
        let key = try ES256SigningKey(key: ECKey.generate())
        let token = try key.sign(payload: ["sub": "+16505554567"])
        let jwt = try XCTUnwrap(DecodedJWT(token))
        XCTAssertTrue(key.verify(jwt))
        var parts = token.split(separator: ".").map(String.init)
        parts[1] = Base64URL.encode(Array(#"{"sub":"+16505550000"}"#.utf8))
        XCTAssertFalse(key.verify(try XCTUnwrap(DecodedJWT(parts.joined(separator: ".")))))
        XCTAssertFalse(try ES256SigningKey(key: ECKey.generate()).verify(jwt), "another key")
        let reloaded = try ES256SigningKey(key: ECKey.privateKey(pem: Array(try key.key.privateKeyPEM().utf8)))
        XCTAssertEqual(reloaded.kid, key.kid)
        XCTAssertTrue(reloaded.verify(jwt))
        XCTAssertThrowsError(try ECKey.privateKey(pem: Array(try TestKeys.signingKey.key.privateKeyPEM().utf8)), "an RSA key is no P-256 key")
    }

    func testRotationKeepsPreviousKeysPublished() throws {
        _ = mint(#"{"type":"PNV","phoneNumber":"+16505554567"}"#)
        let before = try app.attestation.currentPNV().kid
        let r = call("POST", "/emulator/v1/keys:rotate", #"{"keySet":"phoneNumberVerification"}"#)
        XCTAssertEqual(r.0, 200, "\(r.1)")
        XCTAssertNotEqual(r.1["kid"]?.stringValue, before)
        XCTAssertEqual(r.1["publishedKids"]?.arrayValue?.count, 2)
        let kids = call("GET", "/fpnv.googleapis.com/v1beta/jwks").1["keys"]?.arrayValue?.compactMap { $0["kid"]?.stringValue }
        XCTAssertEqual(kids, [r.1["kid"]?.stringValue ?? "", before])
        XCTAssertEqual(call("POST", "/emulator/v1/keys:rotate", #"{"keySet":"nope"}"#).0, 400)
    }
}
