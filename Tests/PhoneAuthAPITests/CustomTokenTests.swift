import EmulatorSupport
import HTTPServer
import JWT
@testable import PhoneAuthAPI
import PhoneAuthCore
import PhoneAuthTestSupport
import XCTest

/// `accounts:signInWithCustomToken` and the v3 `verifyCustomToken` through the responder.
final class CustomTokenTests: XCTestCase, AppCalling {
    var clock: EmulatorClock!
    var app: PhoneAuthApp!
    var logs: MemoryLogSink!
    let now: Int64 = 1_800_000_000
    static let admin = [("Authorization", "Bearer owner")]

    override func setUp() {
        clock = EmulatorClock(fixedAtMillis: testEpochMillis)
        logs = MemoryLogSink()
        app = makeTestApp(clock: clock, seed: 7, logger: Logger(label: "t", sink: logs))
    }

    /// What firebase-admin mints (`create_custom_token`), with `iat` on the test clock.
    func payload(_ uid: JSON? = "alice", claims: JSON? = nil, iat: Int64? = nil, lifetime: Int64 = 3600, tenant: String? = nil,
                 iss: String = "firebase-auth-emulator@example.com") -> JSONObject {
        let issued = iat ?? now
        var p: JSONObject = ["iss": .string(iss), "sub": .string(iss), "aud": .string(CustomTokens.audience)]
        p.set("uid", uid)
        p["iat"] = .int(issued)
        p["exp"] = .int(issued + lifetime)
        p.set("tenant_id", tenant.map(JSON.string))
        p.set("claims", claims)
        return p
    }

    func unsigned(_ p: JSONObject) -> String { JWTSerializer.unsigned(payload: p) }
    /// RS256 with a key of our own, standing in for a service account's (the signature cannot be checked offline).
    func signed(_ p: JSONObject) throws -> String { try TestKeys.signingKey.sign(payload: p) }

    func signIn(_ token: String, extra: String = "") -> (Int, JSON) {
        itk("signInWithCustomToken", #"{"token":\#(JSON.string(token).serializedString),"returnSecureToken":true\#(extra)}"#)
    }

    func claims(_ r: (Int, JSON)) throws -> JSONObject {
        try XCTUnwrap(DecodedJWT(try XCTUnwrap(r.1["idToken"]?.stringValue))?.payload)
    }

    func lookup(_ uid: String) -> JSON? {
        call("POST", "/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts:lookup", #"{"localId":["\#(uid)"]}"#, headers: Self.admin).1["users"]?.arrayValue?.first
    }

    func testUnsignedTokenCreatesTheUserWithClaimsInTheIdToken() throws {
        let r = signIn(unsigned(payload(claims: ["role": "admin", "level": 3])))
        XCTAssertEqual(r.0, 200, "\(r.1)")
        XCTAssertEqual(r.1["isNewUser"], true)
        XCTAssertEqual(r.1["expiresIn"], "3600")
        XCTAssertNil(r.1["kind"])
        XCTAssertEqual(r.1["refreshToken"]?.stringValue?.hasPrefix("AMf-"), true)
        let c = try claims(r)
        XCTAssertEqual(c["sub"], "alice")
        XCTAssertEqual(c["user_id"], "alice")
        XCTAssertEqual(c["role"], "admin")
        XCTAssertEqual(c["level"], .int(3))
        XCTAssertEqual(c["auth_time"], .int(now))
        XCTAssertEqual(c["firebase"], ["identities": .object(JSONObject()), "sign_in_provider": "custom"])
        XCTAssertTrue(TestKeys.signingKey.verify(try XCTUnwrap(DecodedJWT(r.1["idToken"]!.stringValue!))))
        let user = try XCTUnwrap(lookup("alice"))
        XCTAssertEqual(user["createdAt"], .string(String(testEpochMillis)))
        XCTAssertEqual(user["lastLoginAt"], .string(String(testEpochMillis)))
        XCTAssertNil(user["customAttributes"], "token claims belong to the session, not the user")

        clock.advance(millis: 60_000)
        let again = signIn(unsigned(payload(iat: now + 60)))
        XCTAssertEqual(again.1["isNewUser"], false)
        XCTAssertNil(try claims(again)["role"], "a new session without claims has none")
        XCTAssertEqual(lookup("alice")?["createdAt"], .string(String(testEpochMillis)))
        XCTAssertEqual(lookup("alice")?["lastLoginAt"], .string(String(testEpochMillis + 60_000)))
    }

    func testClaimsStayOnRefresh() throws {
        let r = signIn(unsigned(payload(claims: ["role": "admin"])))
        let refresh = try XCTUnwrap(r.1["refreshToken"]?.stringValue)
        clock.advance(millis: 120_000)
        let g = call("POST", "/securetoken.googleapis.com/v1/token?key=fake-api-key", "grant_type=refresh_token&refresh_token=\(refresh)",
                     headers: [("Content-Type", "application/x-www-form-urlencoded")])
        XCTAssertEqual(g.0, 200, "\(g.1)")
        let c = try XCTUnwrap(DecodedJWT(try XCTUnwrap(g.1["id_token"]?.stringValue))?.payload)
        XCTAssertEqual(c["role"], "admin")
        XCTAssertEqual(c["iat"], .int(now + 120))
        XCTAssertEqual(c["auth_time"], .int(now))
        XCTAssertEqual(c["firebase"]?["sign_in_provider"], "custom")
    }

    func testTokenClaimsOverTheUsersCustomClaimsUnderReservedOnes() throws {
        _ = signIn(unsigned(payload()))
        let u = call("POST", "/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts:update",
                     #"{"localId":"alice","customAttributes":"{\"role\":\"user\",\"plan\":\"pro\"}"}"#, headers: Self.admin)
        XCTAssertEqual(u.0, 200, "\(u.1)")
        let c = try claims(signIn(unsigned(payload(claims: ["role": "admin"]))))
        XCTAssertEqual(c["role"], "admin")
        XCTAssertEqual(c["plan"], "pro")
    }

    func testRS256TokenAndTheLegacyPath() throws {
        let token = try signed(payload("bob", iss: "firebase-adminsdk-x@demo-phone.iam.gserviceaccount.com"))
        let r = call("POST", "/www.googleapis.com/identitytoolkit/v3/relyingparty/verifyCustomToken?key=fake-api-key",
                     #"{"token":"\#(token)","returnSecureToken":true}"#)
        XCTAssertEqual(r.0, 200, "\(r.1)")
        XCTAssertEqual(r.1["kind"], "identitytoolkit#VerifyCustomTokenResponse")
        XCTAssertEqual(r.1["isNewUser"], true)
        XCTAssertEqual(try claims(r)["sub"], "bob")
        XCTAssertTrue(logs.all.contains { $0.contains("custom token sign-in: new user") && $0.contains("uid=bob") && $0.contains("token=RS256") },
                      "\(logs.all)")
    }

    func testMalformedTokensAreInvalidCustomTokenNeverACrash() throws {
        XCTAssertEqual(message(itk("signInWithCustomToken", "{}")), "MISSING_CUSTOM_TOKEN")
        XCTAssertEqual(message(signIn("")), "MISSING_CUSTOM_TOKEN")
        let hostile = ["abc", "a.b.c", "..", "e30.e30", "e30.e30.e30.e30", "!!!.###.$$$", "W10.W10.", "bnVsbA.bnVsbA.",
                       "eyJhbGciOiJub25lIn0.eyJ1aWQiOiJ4In0", "{\"uid\":\"x\"}", "e30." + String(repeating: "A", count: 70_000) + "."]
        for t in hostile {
            let r = signIn(t)
            XCTAssertEqual(r.0, 400, t.prefix(40) + " \(r.1)")
            XCTAssertEqual(message(r)?.hasPrefix("INVALID_CUSTOM_TOKEN"), true, t.prefix(40) + " \(r.1)")
        }
        let r = itk("signInWithCustomToken", #"{"token":{"uid":"x"}}"#)
        XCTAssertEqual(r.0, 400)
        XCTAssertEqual(r.1["error"]?["status"], "INVALID_ARGUMENT")
    }

    func testAudienceAlgorithmAndSignatureChecks() throws {
        // An ID token is not a custom token.
        _ = signIn(unsigned(payload()))
        let idToken = try XCTUnwrap(signIn(unsigned(payload())).1["idToken"]?.stringValue)
        let m = try XCTUnwrap(message(signIn(idToken)))
        XCTAssertTrue(m.hasPrefix("INVALID_CUSTOM_TOKEN : ((Invalid aud (audience): demo-phone"), m)
        var p = payload()
        p["aud"] = "https://example.com"
        XCTAssertEqual(message(signIn(unsigned(p)))?.hasPrefix("INVALID_CUSTOM_TOKEN"), true)
        // HS256 and other algorithms; an unsigned token that carries a signature; an RS256 token without one.
        let body = Base64URL.encode(Array(JSON.object(payload()).serializedString.utf8))
        for header in [#"{"alg":"HS256"}"#, #"{"alg":"ES256"}"#, #"{}"#, #"{"alg":7}"#] {
            let t = Base64URL.encode(Array(header.utf8)) + "." + body + ".c2ln"
            XCTAssertEqual(message(signIn(t))?.hasPrefix("INVALID_CUSTOM_TOKEN : Unsupported algorithm"), true, header)
        }
        XCTAssertEqual(message(signIn(unsigned(payload()) + "c2ln")), "INVALID_CUSTOM_TOKEN : An unsigned token (alg none) has an empty signature.")
        let rs = try signed(payload())
        XCTAssertEqual(message(signIn(String(rs[..<rs.lastIndex(of: ".")!]) + ".")), "INVALID_CUSTOM_TOKEN : The RS256 token has no signature.")
    }

    func testTimesOnTheEmulatorClock() throws {
        XCTAssertEqual(signIn(unsigned(payload(iat: now - 3599))).0, 200)
        XCTAssertEqual(message(signIn(unsigned(payload(iat: now - 3600)))), "INVALID_CUSTOM_TOKEN : Token expired: exp is not after the emulator clock.")
        XCTAssertEqual(message(signIn(unsigned(payload(lifetime: 3601)))),
                       "INVALID_CUSTOM_TOKEN : The token lifetime (exp - iat) exceeds 3600 seconds.")
        XCTAssertEqual(message(signIn(unsigned(payload(lifetime: 0)))), "INVALID_CUSTOM_TOKEN : exp is not after iat.")
        XCTAssertEqual(signIn(unsigned(payload(iat: now + 300))).0, 200, "five minutes of skew")
        XCTAssertEqual(message(signIn(unsigned(payload(iat: now + 301)))),
                       "INVALID_CUSTOM_TOKEN : Token used too early: iat is in the future of the emulator clock.")
        var p = payload()
        p["iat"] = nil
        XCTAssertEqual(message(signIn(unsigned(p))), "INVALID_CUSTOM_TOKEN : The token has no iat (issued-at time).")
        p = payload()
        p["exp"] = nil
        XCTAssertEqual(message(signIn(unsigned(p))), "INVALID_CUSTOM_TOKEN : The token has no exp (expiration time).")
        for bad: JSON in ["1800000000", 1.5, -1, 1e300, true] {
            p = payload()
            p["iat"] = bad
            XCTAssertEqual(message(signIn(unsigned(p))), "INVALID_CUSTOM_TOKEN : iat must be whole seconds since the epoch.", "\(bad)")
        }
        // A token minted now expires when the emulator clock moves an hour on.
        let token = unsigned(payload())
        clock.advance(millis: 3_600_000)
        XCTAssertEqual(message(signIn(token))?.hasPrefix("INVALID_CUSTOM_TOKEN : Token expired"), true)
    }

    func testUIDRules() throws {
        XCTAssertEqual(signIn(unsigned(payload(.string(String(repeating: "u", count: 128))))).0, 200)
        XCTAssertEqual(signIn(unsigned(payload(.string(String(repeating: "é", count: 64))))).0, 200, "64 characters, 128 bytes")
        let tooLong = "INVALID_CUSTOM_TOKEN : uid must be a string of 1 to 128 characters (at most 128 bytes, no control characters)."
        XCTAssertEqual(message(signIn(unsigned(payload(.string(String(repeating: "u", count: 129)))))), tooLong)
        XCTAssertEqual(message(signIn(unsigned(payload(.string(String(repeating: "é", count: 65)))))), tooLong)
        XCTAssertEqual(message(signIn(unsigned(payload("a\u{0}b")))), tooLong)
        for bad: JSON in [42, ["x"]] {
            XCTAssertEqual(message(signIn(unsigned(payload(bad)))), "INVALID_CUSTOM_TOKEN : uid must be a non-empty string.", "\(bad)")
        }
        // No uid at all: production's and the official emulator's MISSING_IDENTIFIER.
        for missing: JSON? in [nil, "", .null] {
            XCTAssertEqual(message(signIn(unsigned(payload(missing)))), "MISSING_IDENTIFIER", "\(String(describing: missing))")
        }
    }

    func testClaimsRules() throws {
        XCTAssertEqual(message(signIn(unsigned(payload(claims: "admin")))), "INVALID_CLAIMS")
        XCTAssertEqual(message(signIn(unsigned(payload(claims: ["admin"])))), "INVALID_CLAIMS")
        XCTAssertEqual(message(signIn(unsigned(payload(claims: ["sub": "mallory"])))), "FORBIDDEN_CLAIM : sub")
        XCTAssertEqual(message(signIn(unsigned(payload(claims: ["firebase": ["tenant": "x"]])))), "FORBIDDEN_CLAIM : firebase")
        XCTAssertEqual(message(signIn(unsigned(payload(claims: ["blob": .string(String(repeating: "x", count: 1000))])))), "CLAIMS_TOO_LARGE")
        XCTAssertEqual(signIn(unsigned(payload(claims: ["blob": .string(String(repeating: "x", count: 980))]))).0, 200)
        // Non-reserved names that are ID token fields still never override them.
        let c = try claims(signIn(unsigned(payload(claims: ["user_id": "mallory", "phone_number": "+15550000000"]))))
        XCTAssertEqual(c["user_id"], "alice")
        XCTAssertNil(c["phone_number"])
    }

    func testTenantMustMatch() throws {
        let r = signIn(unsigned(payload(tenant: "team-a")), extra: #","tenantId":"team-a""#)
        XCTAssertEqual(r.0, 200, "\(r.1)")
        XCTAssertEqual(try claims(r)["firebase"]?["tenant"], "team-a")
        XCTAssertEqual(message(signIn(unsigned(payload(tenant: "team-a")))), "TENANT_ID_MISMATCH")
        XCTAssertEqual(message(signIn(unsigned(payload()), extra: #","tenantId":"team-a""#)), "TENANT_ID_MISMATCH")
        XCTAssertEqual(message(signIn(unsigned(payload(tenant: "team-b")), extra: #","tenantId":"team-a""#)), "TENANT_ID_MISMATCH")
        XCTAssertNil(app.emulator.existingStore(StoreKey(projectId: "demo-phone", tenantId: "team-b")), "a refused token creates no tenant")
        // The user is the tenant's, not the project's.
        XCTAssertNil(lookup("alice"))
    }

    func testServiceAccountOfAnotherProjectIsCredentialMismatch() throws {
        XCTAssertEqual(message(signIn(try signed(payload(iss: "firebase-adminsdk-x@other-project.iam.gserviceaccount.com")))),
                       "CREDENTIAL_MISMATCH : The custom token was signed by a service account of another project.")
        XCTAssertEqual(message(signIn(try signed(payload(iss: "other-project@appspot.gserviceaccount.com"))))?.hasPrefix("CREDENTIAL_MISMATCH"), true)
        XCTAssertEqual(signIn(try signed(payload(iss: "demo-phone@appspot.gserviceaccount.com"))).0, 200)
        XCTAssertEqual(signIn(try signed(payload(iss: "123-compute@developer.gserviceaccount.com"))).0, 200, "a project number is not compared")
    }

    func testDisabledUserAndDisabledTenant() throws {
        _ = signIn(unsigned(payload()))
        let u = call("POST", "/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts:update", #"{"localId":"alice","disableUser":true}"#,
                     headers: Self.admin)
        XCTAssertEqual(u.0, 200)
        XCTAssertEqual(message(signIn(unsigned(payload()))), "USER_DISABLED")
        XCTAssertTrue(logs.all.contains { $0.contains("custom token sign-in refused") && $0.contains("error=USER_DISABLED") }, "\(logs.all)")
        let t = call("POST", "/identitytoolkit.googleapis.com/v2/projects/demo-phone/tenants", #"{"displayName":"Closed","disableAuth":true}"#, headers: Self.admin)
        XCTAssertEqual(t.0, 200, "\(t.1)")
        let tenant = try XCTUnwrap(t.1["name"]?.stringValue?.split(separator: "/").last.map(String.init))
        XCTAssertEqual(message(signIn(unsigned(payload(tenant: tenant)), extra: #","tenantId":"\#(tenant)""#)), "PROJECT_DISABLED")
    }

    func testACustomTokenUserLinksAPhoneNumber() throws {
        let idToken = try XCTUnwrap(signIn(unsigned(payload(claims: ["role": "admin"]))).1["idToken"]?.stringValue)
        let session = try XCTUnwrap(itk("sendVerificationCode", #"{"phoneNumber":"+16505554567"}"#).1["sessionInfo"]?.stringValue)
        let r = itk("signInWithPhoneNumber", #"{"sessionInfo":"\#(session)","code":"123456","idToken":"\#(idToken)"}"#)
        XCTAssertEqual(r.0, 200, "\(r.1)")
        XCTAssertEqual(r.1["localId"], "alice")
        XCTAssertEqual(r.1["isNewUser"], false)
        XCTAssertEqual(r.1["phoneNumber"], "+16505554567")
        XCTAssertEqual(lookup("alice")?["phoneNumber"], "+16505554567")
        // Signing in with the custom token again lands on the same user, now with the phone identity.
        let c = try claims(signIn(unsigned(payload())))
        XCTAssertEqual(c["phone_number"], "+16505554567")
        XCTAssertEqual(c["firebase"]?["identities"], ["phone": ["+16505554567"]])
        XCTAssertEqual(c["firebase"]?["sign_in_provider"], "custom")
    }

    func testRefusalsAreLoggedEscaped() throws {
        var p = payload()
        p["aud"] = "evil\n2026-01-01 INFO forged line\u{1b}[31m"
        XCTAssertEqual(signIn(unsigned(p)).0, 400)
        let line = try XCTUnwrap(logs.all.first { $0.contains("custom token refused") })
        XCTAssertFalse(line.contains("\n"))
        XCTAssertFalse(line.contains("\u{1b}"))
        XCTAssertTrue(line.contains("INVALID_CUSTOM_TOKEN"))
    }

    /// Custom tokens are forgeable here, so a foreign web page may not exchange one (it could act as any user): 403
    /// before anything runs, no CORS headers; SDKs (no Origin) and allowed origins keep working.
    func testAForeignOriginCannotExchangeACustomToken() throws {
        let token = unsigned(payload("victim"))
        for path in ["/identitytoolkit.googleapis.com/v1/accounts:signInWithCustomToken", "/www.googleapis.com/identitytoolkit/v3/relyingparty/verifyCustomToken"] {
            var h = HTTPHeaders()
            h.add("Origin", "http://evil.example")
            h.add("Content-Type", "text/plain")
            let resp = try XCTUnwrap(app.respond(to: HTTPRequest(method: "POST", target: path + "?key=fake-api-key", headers: h,
                                                                 body: Array(#"{"token":"\#(token)"}"#.utf8)), context: .detached))
            XCTAssertEqual(resp.status, 403, path)
            XCTAssertFalse(resp.headers.contains { HTTPHeaders.equalsIgnoringASCIICase($0.0, "Access-Control-Allow-Origin") }, path)
            XCTAssertEqual((try? JSONParser.parse(resp.body))?["error"]?["status"], "PERMISSION_DENIED")
        }
        XCTAssertNil(lookup("victim"), "nothing was created")
        XCTAssertEqual(call("POST", "/identitytoolkit.googleapis.com/v1/accounts:signInWithCustomToken?key=fake-api-key", #"{"token":"\#(token)"}"#,
                            headers: [("Origin", "http://localhost:3000")]).0, 200)
    }

    func testSigningModeNoneIsAsLenientAsTheOfficialEmulator() throws {
        app = makeTestApp(clock: clock, seed: 8, signing: .none)
        // A fake JSON token, `user_id` for `uid`, a numeric uid, no iat/exp.
        var r = signIn(#"{"uid":"carol","claims":{"tier":"gold"}}"#)
        XCTAssertEqual(r.0, 200, "\(r.1)")
        XCTAssertEqual(try claims(r)["tier"], "gold")
        XCTAssertEqual(DecodedJWT(r.1["idToken"]!.stringValue!)?.algorithm, "none")
        r = signIn(unsigned(["aud": .string(CustomTokens.audience), "user_id": "dave"]))
        XCTAssertEqual(try claims(r)["sub"], "dave")
        r = signIn(unsigned(["aud": .string(CustomTokens.audience), "uid": 12345]))
        XCTAssertEqual(try claims(r)["sub"], "12345")
        XCTAssertEqual(message(signIn(unsigned(["aud": .string(CustomTokens.audience)]))), "MISSING_IDENTIFIER")
        XCTAssertEqual(message(signIn(#"{"uid":"#))?.hasPrefix("INVALID_CUSTOM_TOKEN : ((Auth Emulator only accepts strict JSON"), true)
        // Times that are present are still checked; RS256 tokens are still accepted.
        XCTAssertEqual(message(signIn(unsigned(payload(iat: now - 7200))))?.hasPrefix("INVALID_CUSTOM_TOKEN : Token expired"), true)
        XCTAssertEqual(signIn(try signed(payload("erin"))).0, 200)
    }
}
