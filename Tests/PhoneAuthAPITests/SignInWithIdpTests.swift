import EmulatorSupport
import JWT
@testable import PhoneAuthAPI
import PhoneAuthCore
import PhoneAuthTestSupport
import XCTest

/// accounts:signInWithIdp pieces the interop tests (Tests/Interop/test_idp.py) reach only through the whole server:
/// the credential parameters' merge, the nonce check, a SAML sign-in's `firebase.sign_in_attributes`, and
/// batchCreate's `sanityCheck`.
final class SignInWithIdpTests: EmulatorAPITestCase {
    override var seed: UInt64 { 2525 }

    func idp(_ postBody: String, requestUri: String = "http://localhost") -> (Int, JSON) {
        itk("signInWithIdp", JSON.object(["postBody": .string(postBody), "requestUri": .string(requestUri), "returnSecureToken": true]).serializedString)
    }

    func firebase(_ r: (Int, JSON)) throws -> JSONObject {
        let payload = try XCTUnwrap(DecodedJWT(try XCTUnwrap(r.1["idToken"]?.stringValue))).payload
        return try XCTUnwrap(payload["firebase"]?.objectValue)
    }

    static func encoded(_ s: String) -> String { IdpCredential.formEncode(s) }

    // MARK: parameters

    func testParametersMergeAsTheOfficialEmulatorsURLSearchParams() {
        // The query's repeats collapse into the first when postBody sets the name; within postBody (and the fragment)
        // the first value of a name is the one set, at the name's first place.
        let (pairs, url) = IdpCredential.parameters(requestUri: "http://h:1/p?a=1&b=2&a=3#c=f1&c=f2&d=4",
                                                    postBody: "&a=p1&c=p2&a=p3&e=5")
        XCTAssertEqual(pairs.map { "\($0.0)=\($0.1)" }, ["a=p1", "b=2", "c=f1", "e=5", "d=4"])
        XCTAssertEqual(url, "http://h:1/p?a=p1&b=2&c=f1&e=5&d=4")
        XCTAssertEqual(IdpCredential.parameters(requestUri: "http://localhost", postBody: nil).url, "http://localhost/")
        // URLSearchParams' serializer: `*-._` and alphanumerics kept, a space as `+`, the rest (UTF-8) as %XX.
        XCTAssertEqual(Self.encoded(#"a~b* c/é{"x"}"#), "a%7Eb*+c%2F%C3%A9%7B%22x%22%7D")
    }

    func testManyRepeatsOfOneNameAreOneParameter() {
        let (pairs, _) = IdpCredential.parameters(requestUri: "http://localhost/?" + String(repeating: "a=1&", count: 50_000),
                                                  postBody: String(repeating: "a=2&", count: 50_000) + "b=3")
        XCTAssertEqual(pairs.map { "\($0.0)=\($0.1)" }, ["a=2", "b=3"])
    }

    func testTheProviderComesFromTheFirstValueInPostBody() {
        let claims = Self.encoded(#"{"sub":"first-wins"}"#)
        let r = idp("providerId=github.com&id_token=\(claims)&providerId=facebook.com")
        XCTAssertEqual(r.0, 200, "\(r.1)")
        XCTAssertEqual(r.1["providerId"], "github.com")
    }

    // MARK: nonce (production's check)

    func testTheNonceClaimMustBeTheSHA256OfTheRawNonce() {
        let hashed = sha256(Array("raw-1".utf8)).map { String(format: "%02x", $0) }.joined()
        let claims = Self.encoded(#"{"sub":"apple-1","nonce":"\#(hashed)"}"#)
        XCTAssertEqual(idp("providerId=apple.com&id_token=\(claims)&nonce=raw-1").0, 200)
        let wrong = idp("providerId=apple.com&id_token=\(claims)&nonce=raw-2")
        XCTAssertEqual(message(wrong),
                       #"MISSING_OR_INVALID_NONCE : The nonce in ID Token "\#(hashed)" does not match the SHA256 hash of the raw nonce "raw-2" in the request."#)
        XCTAssertEqual(message(idp("providerId=apple.com&id_token=\(claims)")), "MISSING_OR_INVALID_NONCE : Nonce is missing in the request.")
    }

    // MARK: SAML attributes

    func testASamlSignInsTokenCarriesItsAttributeStatementsOnlyInThatToken() throws {
        let response = #"{"assertion":{"subject":{"nameId":"jane@example.com"},"attributeStatements":{"role":"admin","groups":["a","b"]}}}"#
        let claims = Self.encoded(#"{"sub":"saml-1"}"#)
        let first = idp("providerId=saml.corp&id_token=\(claims)&SAMLResponse=\(Self.encoded(response))")
        XCTAssertEqual(first.0, 200, "\(first.1)")
        XCTAssertEqual(try firebase(first)["sign_in_attributes"], ["role": "admin", "groups": ["a", "b"]])
        XCTAssertEqual(try firebase(first)["sign_in_provider"], "saml.corp")
        // Another sign-in of the same user without statements, and a refresh: none.
        let again = idp("providerId=saml.corp&id_token=\(claims)")
        XCTAssertEqual(again.1["localId"], first.1["localId"])
        XCTAssertNil(try firebase(again)["sign_in_attributes"])
        let refresh = call("POST", "/securetoken.googleapis.com/v1/token?key=k",
                           #"{"grant_type":"refresh_token","refresh_token":"\#(first.1["refreshToken"]?.stringValue ?? "")"}"#)
        XCTAssertEqual(refresh.0, 200, "\(refresh.1)")
        let refreshed = try XCTUnwrap(DecodedJWT(try XCTUnwrap(refresh.1["id_token"]?.stringValue))).payload
        XCTAssertNil(refreshed["firebase"]?["sign_in_attributes"])
        // A Google sign-in has none either.
        XCTAssertNil(try firebase(idp("providerId=google.com&id_token=\(claims)"))["sign_in_attributes"])
    }

    // MARK: batchCreate sanityCheck

    func batchCreate(_ users: String, sanityCheck: Bool = true) -> (Int, JSON) {
        call("POST", "/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts:batchCreate",
             #"{"sanityCheck":\#(sanityCheck),"users":\#(users)}"#, headers: Self.admin)
    }

    func testSanityCheckRefusesTheBatchForAnIdentityOrAnEmailGivenTwice() {
        let twoIdentities = #"[{"localId":"d1","providerUserInfo":[{"providerId":"google.com","rawId":"dup"}]},"# +
            #"{"localId":"d2","providerUserInfo":[{"providerId":"apple.com","rawId":"dup"},{"providerId":"google.com","rawId":"dup"}]}]"#
        XCTAssertEqual(message(batchCreate(twoIdentities)), "DUPLICATE_RAW_ID : Provider id(google.com), Raw id(dup)")
        let twoEmails = #"[{"localId":"e1","email":"same@example.com"},{"localId":"e2","email":"Same@example.com"}]"#
        XCTAssertEqual(message(batchCreate(twoEmails)), "DUPLICATE_EMAIL : Same@example.com")
        XCTAssertEqual(app.emulator.existingStore(StoreKey(projectId: "demo-phone", tenantId: nil))?.read { $0.users.count } ?? 0, 0,
                       "the whole batch is refused")
        // Without sanityCheck each user is checked on its own: the second of each pair fails.
        let r = batchCreate(twoIdentities, sanityCheck: false)
        XCTAssertEqual(r.1["error"], [["index": 1, "message": "raw id exists in other account in database"]])
        // Entries that are not identities or emails are left to the per-user checks; the same raw id under two
        // providers is no repeat.
        let fine = #"[{"localId":"f1","email":"not-an-email","providerUserInfo":[{"providerId":"google.com"}]},"# +
            #"{"localId":"f2","email":"not-an-email","providerUserInfo":[{"providerId":"google.com"},{"providerId":"github.com","rawId":"x"}]},"# +
            #"{"localId":"f3","providerUserInfo":[{"providerId":"apple.com","rawId":"x"}]}]"#
        XCTAssertEqual(batchCreate(fine).0, 200)
    }

    func testSanityCheckAllowsARepeatedEmailWhereDuplicatesAreAllowed() {
        XCTAssertEqual(call("PATCH", base + "/config", #"{"signIn":{"allowDuplicateEmails":true}}"#).0, 200)
        let r = batchCreate(#"[{"localId":"e1","email":"same@example.com"},{"localId":"e2","email":"same@example.com"}]"#)
        XCTAssertNotEqual(message(r)?.hasPrefix("DUPLICATE_EMAIL"), true, "\(r.1)")
    }
}
