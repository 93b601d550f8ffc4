@testable import PhoneAuthCLI
import EmulatorSupport
import XCTest

/// `idp sign-in` and `users create --provider`: the requests they build, and their usage errors before any request
/// (the helpers and the unreachable emulator are AccountCommandsTests').
extension AccountCommandsTests {
    /// The claims inside a body's postBody `id_token`, and the postBody's other fields.
    func postBody(_ body: JSONObject) throws -> (claims: JSON, fields: [(String, String)]) {
        let text = try XCTUnwrap(body["postBody"]?.stringValue)
        let pairs = URLEncoding.parsePairs(text)
        let token = try XCTUnwrap(pairs.first { $0.0 == "id_token" }?.1)
        return (try JSONParser.parse(Array(token.utf8)), pairs)
    }

    func testIdpSignInBuildsWhatSignInWithCredentialSends() throws {
        let a = try parse(["idp", "sign-in"], ["google.com", "--sub", "1234567890", "--email", "ada@example.com", "--name", "Ada & Co",
                                               "--picture", "https://example.com/a.png?s=1"])
        let body = try Commands.idpSignInBody(provider: "google.com", a, subject: { XCTFail("--sub was given"); return "" })
        XCTAssertEqual(body.keys, ["requestUri", "returnSecureToken", "returnIdpCredential", "postBody"])
        XCTAssertEqual(body["requestUri"], "http://localhost")
        XCTAssertEqual(body["returnSecureToken"], true)
        XCTAssertEqual(body["returnIdpCredential"], true)
        // Exactly: the claims JSON, percent-encoded as encodeURIComponent would, then the provider.
        XCTAssertEqual(body["postBody"]?.stringValue,
                       "id_token=%7B%22sub%22%3A%221234567890%22%2C%22email%22%3A%22ada%40example.com%22%2C%22email_verified%22%3Atrue%2C"
                       + "%22name%22%3A%22Ada%20%26%20Co%22%2C%22picture%22%3A%22https%3A%2F%2Fexample.com%2Fa.png%3Fs%3D1%22%7D&providerId=google.com")
        let (claims, fields) = try postBody(body)
        XCTAssertEqual(claims, ["sub": "1234567890", "email": "ada@example.com", "email_verified": true, "name": "Ada & Co",
                                "picture": "https://example.com/a.png?s=1"])
        XCTAssertEqual(fields.map(\.0), ["id_token", "providerId"])
        XCTAssertEqual(fields.last?.1, "google.com")
    }

    func testIdpSignInWithoutSubMakesANewSubject() throws {
        let a = try parse(["idp", "sign-in"], ["apple.com"])
        let body = try Commands.idpSignInBody(provider: "apple.com", a, subject: { "00042" })
        XCTAssertEqual(try postBody(body).claims, ["sub": "00042"])
        let one = Commands.randomSubject(), two = Commands.randomSubject()
        XCTAssertEqual(one.count, 20)
        XCTAssertTrue(one.allSatisfy { $0.isASCII && $0.isNumber }, one)
        XCTAssertNotEqual(one, two)
    }

    func testIdpSignInUsageErrors() {
        for bad in [["idp", "sign-in"], ["idp", "sign-in", "Google.com"], ["idp", "sign-in", "phone"], ["idp", "sign-in", "google.com", "--sub", ""],
                    ["idp", "sign-in", "a/b"], ["idp", "sign-in", "google.com", "extra"], ["idp", "sign-in", "google.com", "--nonce", "x"]] {
            let (rc, _, err) = run(bad + nowhere)
            XCTAssertEqual(rc, 64, "\(bad): \(err)")
        }
        let (rc, _, err) = run(["idp", "sign-in", "oidc.my-idp", "--email", "a@b.co"] + nowhere)
        XCTAssertEqual(rc, 1)
        XCTAssertTrue(err.contains("cannot reach"), err)
        XCTAssertTrue(CLI.usage().contains("idp sign-in PROVIDER"))
    }

    func testProviderToLinkParsesProviderRawIdAndEmail() throws {
        XCTAssertEqual(try Commands.providerToLink("google.com:1234", displayName: nil), ["providerId": "google.com", "rawId": "1234"])
        XCTAssertEqual(try Commands.providerToLink("google.com:1234:ada@example.com", displayName: "Ada"),
                       ["providerId": "google.com", "rawId": "1234", "email": "ada@example.com", "displayName": "Ada"])
        // A raw id may contain ':' (only a last part with '@' is the email).
        XCTAssertEqual(try Commands.providerToLink("saml.corp:urn:x:42", displayName: nil), ["providerId": "saml.corp", "rawId": "urn:x:42"])
        XCTAssertEqual(try Commands.providerToLink("oidc.x:a:b:c@d", displayName: nil), ["providerId": "oidc.x", "rawId": "a:b", "email": "c@d"])
        for bad in ["google.com", "google.com:", "google.com::a@b.c", ":1234", "Google.com:1", "password:x"] {
            XCTAssertThrowsError(try Commands.providerToLink(bad, displayName: nil), bad)
        }
    }

    func testUsersCreateTakesProvidersAlone() throws {
        let a = try parse(["users", "create"], ["--provider", "google.com:1", "--provider", "github.com:2"])
        XCTAssertEqual(JSON.object(try Commands.userCreateBody(a)), [:])
        XCTAssertEqual(a.options["provider"], ["google.com:1", "github.com:2"])
        XCTAssertEqual(run(["users", "create", "--provider", "google.com"] + nowhere).0, 64)
        let (rc, _, err) = run(["users", "create", "--provider", "google.com:1:a@b.co", "--display-name", "A"] + nowhere)
        XCTAssertEqual(rc, 1, err)
        XCTAssertTrue(err.contains("cannot reach"), err)
    }
}
