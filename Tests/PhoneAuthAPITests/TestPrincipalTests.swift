import EmulatorSupport
import JWT
@testable import PhoneAuthAPI
import PhoneAuthCore
import PhoneAuthTestSupport
import XCTest

/// `POST /emulator/v1/projects/{p}[/tenants/{t}]/idTokens` through the responder: the token is a sign-in's, the user
/// is created or updated through the field table, the session is real (refresh, revocation, deletion), bad input is
/// refused with the Google envelope, and the route is guarded like the rest of the emulator API.
final class TestPrincipalTests: EmulatorAPITestCase {
    override var seed: UInt64 { 11 }

    func jwt(_ r: (Int, JSON), file: StaticString = #filePath, line: UInt = #line) throws -> DecodedJWT {
        XCTAssertEqual(r.0, 200, "\(r.1)", file: file, line: line)
        return try XCTUnwrap(DecodedJWT(try XCTUnwrap(r.1["idToken"]?.stringValue, file: file, line: line)), file: file, line: line)
    }

    func lookup(_ uid: String) -> JSON? {
        call("POST", "/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts:lookup", #"{"localId":["\#(uid)"]}"#, headers: Self.admin)
            .1["users"]?.arrayValue?.first
    }

    func refresh(_ token: String?) -> (Int, JSON) {
        call("POST", "/securetoken.googleapis.com/v1/token?key=k", #"{"grant_type":"refresh_token","refresh_token":"\#(token ?? "")"}"#)
    }

    /// A new user with claims and profile fields: the ID token is signed with the sign-ins' key and header, carries the
    /// claims a sign-in of that user carries (in the same order), and the session refreshes like any other.
    func testANewPrincipalsTokenIsASignInsToken() throws {
        let r = mint(#"{"uid":"alice","claims":{"role":"admin","level":3},"email":"Alice@Example.com","emailVerified":true,"displayName":"Alice"}"#)
        let token = try jwt(r)
        XCTAssertEqual(r.1["localId"], "alice")
        XCTAssertEqual(r.1["isNewUser"], true)
        XCTAssertEqual(r.1["expiresIn"], "3600")
        XCTAssertEqual(r.1["refreshToken"]?.stringValue?.hasPrefix("AMf-"), true)
        XCTAssertTrue(TestKeys.signingKey.verify(token))
        let signedIn = try XCTUnwrap(DecodedJWT(try XCTUnwrap(itk("signUp", "{}").1["idToken"]?.stringValue)))
        XCTAssertEqual(token.header, signedIn.header, "alg, kid and typ of every sign-in")
        let c = token.payload
        XCTAssertEqual(Array(c.keys), ["name", "role", "level", "iss", "aud", "auth_time", "user_id", "sub", "iat", "exp", "email", "email_verified", "firebase"])
        XCTAssertEqual(c["iss"], "https://securetoken.google.com/demo-phone")
        XCTAssertEqual(c["aud"], "demo-phone")
        XCTAssertEqual(c["sub"], "alice")
        XCTAssertEqual(c["iat"], .int(testEpochMillis / 1000))
        XCTAssertEqual(c["exp"], .int(testEpochMillis / 1000 + 3600))
        XCTAssertEqual(c["auth_time"], .int(testEpochMillis / 1000))
        XCTAssertEqual(c["email"], "alice@example.com", "stored canonical, as every email")
        XCTAssertEqual(c["firebase"], ["identities": ["email": ["alice@example.com"]], "sign_in_provider": "custom"])
        // The same claims as the refreshed token of the session (which a sign-in's refresh mints).
        let refreshed = refresh(r.1["refreshToken"]?.stringValue)
        XCTAssertEqual(refreshed.0, 200)
        let again = try XCTUnwrap(DecodedJWT(try XCTUnwrap(refreshed.1["id_token"]?.stringValue)))
        XCTAssertEqual(again.payload, c)
        // The user is stored with what was asked.
        let u = try XCTUnwrap(lookup("alice"))
        XCTAssertEqual(u["customAttributes"], #"{"role":"admin","level":3}"#)
        XCTAssertEqual(u["emailVerified"], true)
        XCTAssertEqual(u["displayName"], "Alice")
        // The token is accepted where ID tokens are.
        XCTAssertEqual(itk("lookup", #"{"idToken":"\#(r.1["idToken"]!.stringValue!)"}"#).1["users"]?.arrayValue?.first?["localId"], "alice")
    }

    /// An existing user keeps every field the call does not name; claims given replace the old ones, `{}` clears them.
    func testAnExistingUserChangesOnlyInTheGivenFields() throws {
        XCTAssertEqual(call("POST", "/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts",
                            #"{"localId":"bob","phoneNumber":"+15551234567","displayName":"Bob","customAttributes":"{\"a\":1}"}"#, headers: Self.admin).0, 200)
        let r = mint(#"{"uid":"bob","displayName":"Robert","signInProvider":"phone"}"#)
        let c = try jwt(r).payload
        XCTAssertEqual(r.1["isNewUser"], false)
        XCTAssertEqual(c["phone_number"], "+15551234567")
        XCTAssertEqual(c["name"], "Robert")
        XCTAssertEqual(c["a"], 1)
        XCTAssertEqual(c["firebase"]?["sign_in_provider"], "phone")
        XCTAssertEqual(lookup("bob")?["phoneNumber"], "+15551234567")
        let cleared = try jwt(mint(#"{"uid":"bob","claims":{}}"#)).payload
        XCTAssertNil(cleared["a"])
        XCTAssertNil(lookup("bob")?["customAttributes"])
    }

    /// `authTime`, `expiresIn`, the provider and a second factor: an enrolled factor's id for `phone`, a generated one
    /// for `totp`; a refresh keeps the session's provider, auth time and second factor, with production's lifetime.
    func testProviderSecondFactorAuthTimeAndLifetime() throws {
        let now = testEpochMillis / 1000
        XCTAssertEqual(call("POST", "/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts",
                            #"{"localId":"mfa","email":"m@example.com","emailVerified":true,"mfaInfo":[{"phoneInfo":"+16505550100"}]}"#,
                            headers: Self.admin).0, 200)
        let enrolled = try XCTUnwrap(lookup("mfa")?["mfaInfo"]?.arrayValue?.first?["mfaEnrollmentId"]?.stringValue)
        let phone = mint(#"{"uid":"mfa","signInProvider":"password","secondFactor":"phone","authTime":\#(now - 100),"expiresIn":60}"#)
        let p = try jwt(phone).payload
        XCTAssertEqual(phone.1["expiresIn"], "60")
        XCTAssertEqual(p["auth_time"], .int(now - 100))
        XCTAssertEqual(p["exp"], .int(now + 60))
        XCTAssertEqual(p["firebase"], ["identities": ["email": ["m@example.com"]], "sign_in_provider": "password",
                                       "second_factor_identifier": .string(enrolled), "sign_in_second_factor": "phone"])
        let totp = mint(#"{"uid":"t","email":"t@example.com","signInProvider":"google.com","secondFactor":"totp"}"#)
        let t = try jwt(totp).payload
        XCTAssertEqual(t["firebase"]?["sign_in_second_factor"], "totp")
        let id = try XCTUnwrap(t["firebase"]?["second_factor_identifier"]?.stringValue)
        XCTAssertEqual(id.count, 28)
        clock.advance(millis: 5000)
        let refreshed = try XCTUnwrap(DecodedJWT(try XCTUnwrap(refresh(totp.1["refreshToken"]?.stringValue).1["id_token"]?.stringValue))).payload
        XCTAssertEqual(refreshed["firebase"]?["sign_in_second_factor"], "totp")
        XCTAssertEqual(refreshed["firebase"]?["second_factor_identifier"]?.stringValue, id)
        XCTAssertEqual(refreshed["firebase"]?["sign_in_provider"], "google.com")
        XCTAssertEqual(refreshed["exp"], .int(now + 5 + 3600))
        let anon = try jwt(mint(#"{"uid":"anon","signInProvider":"anonymous"}"#)).payload
        XCTAssertEqual(anon["provider_id"], "anonymous")
        XCTAssertEqual(try jwt(mint(#"{"uid":"o","sign_in_provider":"oidc.my-idp"}"#)).payload["firebase"]?["sign_in_provider"], "oidc.my-idp")
    }

    /// In a tenant: the tenant's user and `firebase.tenant`; the tenant's own token checks accept it.
    func testATenantsPrincipal() throws {
        let r = mint(#"{"uid":"tu","phoneNumber":"+15550001111","signInProvider":"phone"}"#, tenant: "team-a")
        let c = try jwt(r).payload
        XCTAssertEqual(c["firebase"]?["tenant"], "team-a")
        XCTAssertEqual(app.emulator.existingStore(StoreKey(projectId: "demo-phone", tenantId: "team-a"))?.read { $0.users["tu"]?.tenantId }, "team-a")
        XCTAssertNil(app.emulator.existingStore(StoreKey(projectId: "demo-phone"))?.read { $0.users["tu"] })
        let looked = itk("lookup", #"{"idToken":"\#(r.1["idToken"]!.stringValue!)","tenantId":"team-a"}"#)
        XCTAssertEqual(looked.1["users"]?.arrayValue?.first?["localId"], "tu")
    }

    /// A principal's session ends like any other: revoked (`validSince`), disabled, deleted.
    func testRevokedDisabledAndDeletedPrincipalsAreRefused() throws {
        let r = mint(#"{"uid":"carol"}"#)
        let idToken = r.1["idToken"]!.stringValue!, refreshToken = r.1["refreshToken"]!.stringValue!
        clock.advance(millis: 2000)
        XCTAssertEqual(call("POST", "/identitytoolkit.googleapis.com/v1/accounts:update?key=k", #"{"localId":"carol","validSince":"\#(clock.nowSeconds())"}"#,
                            headers: Self.admin).0, 200)
        XCTAssertEqual(message(itk("lookup", #"{"idToken":"\#(idToken)"}"#)), "TOKEN_EXPIRED")
        XCTAssertEqual(message(refresh(refreshToken)), "TOKEN_EXPIRED")
        // Minting again gives a working session; disabling or deleting the user ends it.
        let fresh = mint(#"{"uid":"carol"}"#)
        XCTAssertEqual(refresh(fresh.1["refreshToken"]?.stringValue).0, 200)
        XCTAssertEqual(call("POST", "/identitytoolkit.googleapis.com/v1/accounts:update?key=k", #"{"localId":"carol","disableUser":true}"#, headers: Self.admin).0, 200)
        XCTAssertEqual(message(itk("lookup", #"{"idToken":"\#(fresh.1["idToken"]!.stringValue!)"}"#)), "USER_DISABLED")
        XCTAssertEqual(message(mint(#"{"uid":"carol"}"#)), "USER_DISABLED", "a disabled user cannot sign in")
        XCTAssertEqual(call("POST", "/identitytoolkit.googleapis.com/v1/accounts:delete?key=k", #"{"localId":"carol"}"#, headers: Self.admin).0, 200)
        XCTAssertEqual(message(itk("lookup", #"{"idToken":"\#(fresh.1["idToken"]!.stringValue!)"}"#)), "USER_NOT_FOUND")
        XCTAssertEqual(message(refresh(fresh.1["refreshToken"]?.stringValue)), "INVALID_REFRESH_TOKEN")
    }

    /// Every refusal is the Google envelope with its code, and changes nothing.
    func testBadRequestsAreRefused() throws {
        XCTAssertEqual(call("POST", "/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts",
                            #"{"localId":"owner","phoneNumber":"+15559990000","email":"taken@example.com"}"#, headers: Self.admin).0, 200)
        let cases: [(String, Int, String)] = [
            ("{}", 400, "uid is required."),
            (#"{"uid":""}"#, 400, "uid is required."),
            (#"{"uid":"\#(String(repeating: "x", count: 129))"}"#, 400, "INVALID_LOCAL_ID : UID must be a non-empty string with at most 128 characters."),
            (#"{"uid":"u","phone":"+15550000000"}"#, 400, "Unknown field"),
            (#"{"uid":"u","claims":{"sub":"x"}}"#, 400, "FORBIDDEN_CLAIM : sub"),
            (#"{"uid":"u","claims":{"big":"\#(String(repeating: "a", count: 1000))"}}"#, 400, "CLAIMS_TOO_LARGE"),
            (#"{"uid":"u","claims":"{}"}"#, 400, "Invalid JSON payload received."),
            (#"{"uid":"u","expiresIn":0}"#, 400, "expiresIn must be from 1 to 3600 seconds"),
            (#"{"uid":"u","expiresIn":3601}"#, 400, "expiresIn must be from 1 to 3600 seconds"),
            (#"{"uid":"u","authTime":\#(testEpochMillis / 1000 + 1)}"#, 400, "authTime must be seconds since the epoch"),
            (#"{"uid":"u","authTime":-1}"#, 400, "authTime must be seconds since the epoch"),
            (#"{"uid":"u","signInProvider":"evil.com"}"#, 400, "signInProvider must be one of"),
            (#"{"uid":"u","signInProvider":"oidc."}"#, 400, "signInProvider must be one of"),
            (#"{"uid":"u","secondFactor":"sms","signInProvider":"password","email":"u@example.com"}"#, 400, "secondFactor must be"),
            (#"{"uid":"u","secondFactor":"phone"}"#, 400, "secondFactor needs a first factor"),
            (#"{"uid":"u","signInProvider":"phone"}"#, 400, "signInProvider phone needs a user with a phone number"),
            (#"{"uid":"u","signInProvider":"password"}"#, 400, "signInProvider password needs a user with an email"),
            (#"{"uid":"u","signInProvider":"anonymous","email":"a@example.com"}"#, 400, "signInProvider anonymous is for a user"),
            (#"{"uid":"u","phoneNumber":"+15559990000"}"#, 400, "PHONE_NUMBER_EXISTS"),
            (#"{"uid":"u","phoneNumber":"12"}"#, 400, "INVALID_PHONE_NUMBER"),
            (#"{"uid":"u","email":"Taken@example.com"}"#, 400, "EMAIL_EXISTS"),
            (#"{"uid":"u","email":"nope"}"#, 400, "INVALID_EMAIL"),
            (#"{"uid":"u","displayName":"\#(String(repeating: "n", count: 1025))"}"#, 400, "INVALID_DISPLAY_NAME"),
            (#"{"uid":"u","emailVerified":"yes"}"#, 400, "Invalid JSON payload received."),
            (#"["uid"]"#, 400, "Invalid JSON payload received."),
        ]
        for (body, status, text) in cases {
            let r = mint(body)
            XCTAssertEqual(r.0, status, body)
            XCTAssertEqual(r.1["error"]?["code"], .int(status), body)
            XCTAssertTrue(message(r)?.hasPrefix(text) == true, "\(body): \(message(r) ?? "-")")
        }
        XCTAssertNil(lookup("u"), "no refused call created the user")
        XCTAssertEqual(app.emulator.refreshTokenCount, 0)
    }

    /// The route's guard is the emulator API's: a foreign web page is refused; with `--admin-token` only that token.
    func testGuardedLikeTheEmulatorAPI() throws {
        XCTAssertEqual(mint(#"{"uid":"u"}"#, headers: [("Origin", "https://evil.example")]).0, 403)
        XCTAssertEqual(mint(#"{"uid":"u"}"#, headers: [("Origin", "http://localhost:3000")]).0, 200)
        XCTAssertEqual(statusBehindAnAdminToken("POST", base + "/idTokens", #"{"uid":"u"}"#, headers: []), 401)
        XCTAssertEqual(statusBehindAnAdminToken("POST", base + "/idTokens", #"{"uid":"u"}"#, headers: [("Authorization", "Bearer owner")]), 401)
        XCTAssertEqual(statusBehindAnAdminToken("POST", base + "/idTokens", #"{"uid":"u"}"#, headers: [("Authorization", "Bearer s3cret")]), 200)
    }

    /// Unsigned mode mints unsigned tokens, like every sign-in there.
    func testUnsignedMode() throws {
        app = makeTestApp(clock: clock, seed: 5, signing: .none)
        let token = try jwt(mint(#"{"uid":"u"}"#))
        XCTAssertEqual(token.algorithm, "none")
        XCTAssertTrue(token.signature.isEmpty)
    }
}
