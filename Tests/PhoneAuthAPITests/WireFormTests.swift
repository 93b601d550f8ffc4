import EmulatorSupport
@testable import PhoneAuthAPI
import PhoneAuthCore
import PhoneAuthTestSupport
import XCTest

/// Wire forms the differential run (issue 13) found: the `password` provider of a user without a password, and an
/// `enrolledAt` with more than three fraction digits.
final class WireFormTests: XCTestCase, AppCalling {
    var clock: EmulatorClock!
    var app: PhoneAuthApp!

    override func setUp() {
        clock = EmulatorClock(fixedAtMillis: testEpochMillis)
        app = makeTestApp(clock: clock, seed: 13)
    }

    func admin(_ op: String, _ body: String) -> (Int, JSON) {
        call("POST", "/identitytoolkit.googleapis.com/v1/projects/demo-phone/" + op, body, headers: [("Authorization", "Bearer owner")])
    }

    func lookup(_ id: String) -> JSON { admin("accounts:lookup", #"{"localId":["\#(id)"]}"#).1["users"]?.arrayValue?.first ?? .null }

    func providerIds(_ user: JSON) -> [String] { user["providerUserInfo"]?.arrayValue?.compactMap { $0["providerId"]?.stringValue } ?? [] }

    func authUri(_ email: String) -> JSON {
        itk("createAuthUri", #"{"identifier":"\#(email)","continueUri":"http://localhost/"}"#).1
    }

    // MARK: the password provider

    func testImportedEmailUserWithoutPasswordHasNoPasswordProvider() throws {
        let r = admin("accounts:batchCreate", #"""
        {"users":[{"localId":"nopw","email":"nopw@example.com","emailVerified":true},
                  {"localId":"both","email":"both@example.com","phoneNumber":"+16505550177"},
                  {"localId":"raw","email":"raw@example.com","rawPassword":"secret12"}]}
        """#)
        XCTAssertEqual(r.0, 200, "\(r.1)")
        XCTAssertNil(r.1["error"], "\(r.1)")
        let nopw = lookup("nopw")
        XCTAssertEqual(nopw["email"], "nopw@example.com")
        XCTAssertEqual(nopw["providerUserInfo"], [], "no password hash: no password provider (was one)")
        XCTAssertEqual(providerIds(lookup("both")), ["phone"])
        XCTAssertEqual(providerIds(lookup("raw")), ["password"], "an imported password keeps its provider")
        // batchGet renders the same record.
        let page = call("GET", "/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts:batchGet?maxResults=10",
                        headers: [("Authorization", "Bearer owner")]).1["users"]?.arrayValue ?? []
        XCTAssertEqual(page.first { $0["localId"] == "nopw" }?["providerUserInfo"], [])
        // createAuthUri: registered, but no provider and no sign-in method (was allProviders ["password"]).
        let uri = authUri("nopw@example.com")
        XCTAssertEqual(uri["registered"], true)
        XCTAssertNil(uri["allProviders"])
        XCTAssertNil(uri["signinMethods"])
        XCTAssertEqual(authUri("raw@example.com")["allProviders"], ["password"])
        XCTAssertEqual(authUri("raw@example.com")["signinMethods"], ["password"])
    }

    func testPasswordProviderFollowsThePassword() throws {
        // An admin-created email user without a password has none; setting one adds it; deleting it removes it.
        XCTAssertEqual(admin("accounts", #"{"localId":"adm","email":"adm@example.com"}"#).0, 200)
        XCTAssertEqual(providerIds(lookup("adm")), [])
        XCTAssertNil(authUri("adm@example.com")["allProviders"])
        let set = admin("accounts:update", #"{"localId":"adm","password":"secret12"}"#)
        XCTAssertEqual(set.0, 200, "\(set.1)")
        XCTAssertEqual(providerIds(set.1), ["password"], "the update reply's providerUserInfo")
        XCTAssertEqual(providerIds(lookup("adm")), ["password"])
        XCTAssertEqual(authUri("adm@example.com")["allProviders"], ["password"])
        let del = admin("accounts:update", #"{"localId":"adm","deleteProvider":["password"]}"#)
        XCTAssertEqual(del.0, 200, "\(del.1)")
        XCTAssertEqual(providerIds(lookup("adm")), [])
        XCTAssertEqual(lookup("adm")["email"], "adm@example.com")
    }

    // MARK: enrolledAt parsing

    func testAFractionOfMoreThanThreeDigitsIsCutToMillisecondsNotATrap() throws {
        // Production writes 6 or 9 digits; `accounts:update`, signUp and batchCreate (import_users, firebase-tools
        // import) parse `enrolledAt`: a 4+ digit fraction built an inverted range and trapped the server.
        XCTAssertEqual(MultiFactor.parseRFC3339("2024-01-02T03:04:05.123456789Z"), 1_704_164_645_123)
        XCTAssertEqual(MultiFactor.parseRFC3339("2024-01-02T03:04:05.9999Z"), 1_704_164_645_999)
        XCTAssertEqual(MultiFactor.parseRFC3339("2024-01-02T03:04:05.5Z"), 1_704_164_645_500)
        XCTAssertEqual(admin("accounts", #"{"localId":"f","email":"f@example.com","emailVerified":true}"#).0, 200)
        let r = admin("accounts:update", #"{"localId":"f","mfa":{"enrollments":[{"phoneInfo":"+16505550109","mfaEnrollmentId":"f1","enrolledAt":"2024-01-02T03:04:05.000001Z"}]}}"#)
        XCTAssertEqual(r.0, 200, "\(r.1)")
        XCTAssertNotNil(lookup("f")["mfaInfo"]?.arrayValue?.first?["enrolledAt"])
    }
}
