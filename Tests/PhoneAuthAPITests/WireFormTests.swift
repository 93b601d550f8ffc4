import EmulatorSupport
@testable import PhoneAuthAPI
import PhoneAuthCore
import PhoneAuthTestSupport
import XCTest

/// Wire forms the differential run (issue 13) found: the `password` provider of a user without a password, an
/// `enrolledAt` with more than three fraction digits, and `enrolledAt`/`lastRefreshAt` in production's Timestamp JSON
/// (no `.000` for whole seconds).
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

    /// createAuthUri with email enumeration protection off (`enableImprovedEmailPrivacy: false`), where it tells.
    func authUri(_ email: String) -> JSON {
        _ = call("PATCH", "/emulator/v1/projects/demo-phone/config", #"{"emailPrivacyConfig":{"enableImprovedEmailPrivacy":false}}"#)
        return itk("createAuthUri", #"{"identifier":"\#(email)","continueUri":"http://localhost/"}"#).1
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

    // MARK: Timestamp JSON

    func testTimestampProtobufJSONDropsAZeroFraction() {
        XCTAssertEqual(Timestamp.protobufJSON(millis: 1_704_164_645_000), "2024-01-02T03:04:05Z")
        XCTAssertEqual(Timestamp.protobufJSON(millis: 1_704_164_645_120), "2024-01-02T03:04:05.120Z")
        XCTAssertEqual(Timestamp.protobufJSON(millis: 1_704_164_645_001), "2024-01-02T03:04:05.001Z")
        XCTAssertEqual(Timestamp.protobufJSON(millis: 0), "1970-01-01T00:00:00Z")
        XCTAssertEqual(Timestamp.protobufJSON(millis: -1), "1969-12-31T23:59:59.999Z")
        XCTAssertEqual(Timestamp.protobufJSON(millis: .max), "9999-12-31T23:59:59.999Z")
        XCTAssertEqual(Timestamp.protobufJSON(millis: .min), "0001-01-01T00:00:00Z")
    }

    func testEnrolledAtIsProductionsCanonicalForm() throws {
        // Admin-given times (update, signUp, batchCreate) and the clock's whole second come back without `.000`;
        // a fraction keeps three digits; a 6- or 9-digit fraction is kept to the millisecond.
        XCTAssertEqual(admin("accounts", #"{"localId":"m","email":"m@example.com","emailVerified":true}"#).0, 200)
        let up = admin("accounts:update", #"""
        {"localId":"m","mfa":{"enrollments":[
          {"phoneInfo":"+16505550101","mfaEnrollmentId":"e1","enrolledAt":"2024-01-02T03:04:05Z"},
          {"phoneInfo":"+16505550102","mfaEnrollmentId":"e2","enrolledAt":"2024-01-02T03:04:05.5Z"},
          {"phoneInfo":"+16505550103","mfaEnrollmentId":"e3","enrolledAt":"2024-01-02T03:04:05.000000Z"},
          {"phoneInfo":"+16505550104","mfaEnrollmentId":"e4","enrolledAt":"2024-01-02T03:04:05.123456789Z"},
          {"phoneInfo":"+16505550105","mfaEnrollmentId":"e5"}]}}
        """#)
        XCTAssertEqual(up.0, 200, "\(up.1)")
        let info = try XCTUnwrap(lookup("m")["mfaInfo"]?.arrayValue)
        XCTAssertEqual(info.map { $0["enrolledAt"]?.stringValue ?? "" }, [
            "2024-01-02T03:04:05Z", "2024-01-02T03:04:05.500Z", "2024-01-02T03:04:05Z", "2024-01-02T03:04:05.123Z",
            Timestamp.protobufJSON(millis: testEpochMillis),
        ])
        XCTAssertEqual(info[4]["enrolledAt"], "2027-01-15T08:00:00Z", "the clock's time (a whole second here)")
        let r = admin("accounts:batchCreate", #"""
        {"users":[{"localId":"b","email":"b@example.com","emailVerified":true,
                   "mfaInfo":[{"phoneInfo":"+16505550106","mfaEnrollmentId":"b1","enrolledAt":"2023-05-06T07:08:09Z"}]},
                  {"localId":"n","email":"n@example.com","emailVerified":true,
                   "mfaInfo":[{"phoneInfo":"+16505550108","mfaEnrollmentId":"n1","enrolledAt":"2023-05-06T07:08:09.987654321Z"}]}]}
        """#)
        XCTAssertNil(r.1["error"], "\(r.1)")
        XCTAssertEqual(lookup("b")["mfaInfo"]?.arrayValue?.first?["enrolledAt"], "2023-05-06T07:08:09Z")
        // Production writes 6 or 9 digits: an import of its form no longer traps (a 4+ digit fraction did).
        XCTAssertEqual(lookup("n")["mfaInfo"]?.arrayValue?.first?["enrolledAt"], "2023-05-06T07:08:09.987Z")
        // The export file carries the same form.
        let dir = TemporaryDirectory.make("wire-form")
        defer { TemporaryDirectory.remove(dir) }
        try ExportImport.export(app, projectId: "demo-phone", to: dir)
        let exported = try ExportImport.readJSON(dir + "/auth_export/accounts.json")
        let b = exported["users"]?.arrayValue?.first { $0["localId"] == "b" }
        XCTAssertEqual(b?["mfaInfo"]?.arrayValue?.first?["enrolledAt"], "2023-05-06T07:08:09Z")
    }

    func testHintsAndLastRefreshAtUseTheSameForm() throws {
        let r = admin("accounts", #"""
        {"localId":"h","email":"h@example.com","password":"secret12","emailVerified":true,
         "mfaInfo":[{"phoneInfo":"+16505550107","enrolledAt":"2024-01-02T03:04:05Z"}]}
        """#)
        XCTAssertEqual(r.0, 200, "\(r.1)")
        let signIn = itk("signInWithPassword", #"{"email":"h@example.com","password":"secret12","returnSecureToken":true}"#)
        XCTAssertEqual(signIn.0, 200, "\(signIn.1)")
        XCTAssertEqual(signIn.1["mfaInfo"]?.arrayValue?.first?["enrolledAt"], "2024-01-02T03:04:05Z", "the hint of the MFA-required reply")
        // A plain password user signs in at the clock's whole second: lastRefreshAt has no `.000` either.
        XCTAssertEqual(admin("accounts", #"{"localId":"p","email":"p@example.com","password":"secret12"}"#).0, 200)
        XCTAssertEqual(itk("signInWithPassword", #"{"email":"p@example.com","password":"secret12","returnSecureToken":true}"#).0, 200)
        XCTAssertEqual(lookup("p")["lastRefreshAt"], .string(Timestamp.protobufJSON(millis: testEpochMillis)))
        XCTAssertEqual(lookup("p")["lastRefreshAt"], "2027-01-15T08:00:00Z")
        XCTAssertTrue(clock.advance(millis: 250))
        XCTAssertEqual(itk("signInWithPassword", #"{"email":"p@example.com","password":"secret12","returnSecureToken":true}"#).0, 200)
        XCTAssertEqual(lookup("p")["lastRefreshAt"], "2027-01-15T08:00:00.250Z")
    }
}
