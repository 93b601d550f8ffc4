import EmulatorSupport
@testable import PhoneAuthAPI
import PhoneAuthCore
import PhoneAuthTestSupport
import XCTest

/// `POST /v2/accounts:revokeToken` (the JS SDK's `revokeAccessToken`): production's request, its refusals, `{}` and an
/// `idpToken.revoked` event.
final class RevokeTokenTests: XCTestCase, AppCalling {
    var app: PhoneAuthApp!
    override func setUp() { app = makeTestApp(clock: EmulatorClock(fixedAtMillis: testEpochMillis), seed: 27, signing: .none) }

    func revoke(_ body: String) -> (Int, JSON) {
        call("POST", "/identitytoolkit.googleapis.com/v2/accounts:revokeToken?key=fake-api-key", body)
    }

    func testRevokesAnAppleTokenOfTheSignedInUser() throws {
        let up = itk("signUp", #"{"email":"ada@example.com","password":"secret1","returnSecureToken":true}"#)
        let idToken = try XCTUnwrap(up.1["idToken"]?.stringValue)
        let uid = try XCTUnwrap(up.1["localId"]?.stringValue)
        // What the JS SDK's revokeAccessToken sends.
        let r = revoke(#"{"providerId":"apple.com","tokenType":"ACCESS_TOKEN","token":"apple-access","idToken":"\#(idToken)"}"#)
        XCTAssertEqual(r.0, 200, "\(r.1)")
        XCTAssertEqual(r.1, .object([:]))
        // A code with its redirect URI; the proto enum's number is the same type.
        XCTAssertEqual(revoke(#"{"providerId":"apple.com","tokenType":"CODE","token":"c","redirectUri":"https://app.example.com/cb","idToken":"\#(idToken)"}"#).0, 200)
        XCTAssertEqual(revoke(#"{"providerId":"apple.com","tokenType":1,"token":"r","idToken":"\#(idToken)"}"#).0, 200)
        let events = eventLines("/emulator/v1/projects/demo-phone/events?format=jsonl&follow=false&since=0&type=idpToken.revoked")
        XCTAssertEqual(events.map { $0["tokenType"]?.stringValue }, ["ACCESS_TOKEN", "CODE", "REFRESH_TOKEN"])
        XCTAssertEqual(events.first?["uid"]?.stringValue, uid)
        XCTAssertEqual(events.first?["providerId"], "apple.com")
        XCTAssertNil(events.first?["token"], "the token itself is never kept")
        // v1 has no such method (production's is v2 only).
        XCTAssertEqual(call("POST", "/identitytoolkit.googleapis.com/v1/accounts:revokeToken?key=fake-api-key", "{}").0, 404)
    }

    func testRefusals() throws {
        let up = itk("signUp", #"{"email":"bob@example.com","password":"secret1","returnSecureToken":true}"#)
        let t = try XCTUnwrap(up.1["idToken"]?.stringValue)
        let cases: [(String, String)] = [
            (#"{"tokenType":"ACCESS_TOKEN","token":"x","idToken":"\#(t)"}"#, "MISSING_PROVIDER_ID"),
            (#"{"providerId":"google.com","tokenType":"ACCESS_TOKEN","token":"x","idToken":"\#(t)"}"#, "INVALID_PROVIDER_ID : Only apple.com tokens can be revoked."),
            (#"{"providerId":"apple.com","token":"x","idToken":"\#(t)"}"#, "tokenType is required: REFRESH_TOKEN, ACCESS_TOKEN or CODE."),
            (#"{"providerId":"apple.com","tokenType":"TOKEN_TYPE_UNSPECIFIED","token":"x","idToken":"\#(t)"}"#, "tokenType is required: REFRESH_TOKEN, ACCESS_TOKEN or CODE."),
            (#"{"providerId":"apple.com","tokenType":"ACCESS_TOKEN","idToken":"\#(t)"}"#, "token is required."),
            (#"{"providerId":"apple.com","tokenType":"CODE","token":"c","idToken":"\#(t)"}"#, "redirectUri is required when tokenType is CODE."),
            (#"{"providerId":"apple.com","tokenType":"ACCESS_TOKEN","token":"x"}"#, "MISSING_ID_TOKEN"),
            (#"{"providerId":"apple.com","tokenType":"ACCESS_TOKEN","token":"x","idToken":"garbage"}"#, "INVALID_ID_TOKEN"),
            (#"{"providerId":"apple.com","tokenType":"ACCESS_TOKEN","token":"x","idToken":"\#(t)","tenantId":"other-tenant"}"#, "TENANT_ID_MISMATCH"),
        ]
        for (body, expected) in cases {
            let r = revoke(body)
            XCTAssertEqual(r.0, 400, body)
            XCTAssertEqual(message(r), expected, body)
        }
        XCTAssertTrue(message(revoke(#"{"providerId":"apple.com","tokenType":"BEARER","token":"x","idToken":"\#(t)"}"#))?.contains("token_type") == true)
        for uri in ["http://app.example.com/cb", "https://localhost/cb", "https://127.0.0.1/cb", "https://[::1]/cb", "https://nodots/cb"] {
            let r = revoke(#"{"providerId":"apple.com","tokenType":"CODE","token":"c","redirectUri":"\#(uri)","idToken":"\#(t)"}"#)
            XCTAssertEqual(r.0, 400, uri)
            XCTAssertTrue(message(r)?.hasPrefix("redirectUri must be an https URI") == true, uri)
        }
        // A deleted user's token names nobody.
        XCTAssertEqual(call("POST", "/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts:delete",
                            #"{"localId":"\#(up.1["localId"]?.stringValue ?? "")"}"#, headers: [("Authorization", "Bearer owner")]).0, 200)
        XCTAssertEqual(message(revoke(#"{"providerId":"apple.com","tokenType":"ACCESS_TOKEN","token":"x","idToken":"\#(t)"}"#)), "USER_NOT_FOUND")
        XCTAssertEqual(eventLines("/emulator/v1/projects/demo-phone/events?format=jsonl&follow=false&since=0&type=idpToken.revoked").count, 0)
    }
}
