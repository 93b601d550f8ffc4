import EmulatorSupport
import JWT
@testable import PhoneAuthAPI
import PhoneAuthCore
import PhoneAuthTestSupport
import XCTest

/// What porting firebase-tools' own Auth-emulator specs (Tests/Interop/test_spec_*.py) found and fixed, at the
/// handler level: a disabled tenant answers PROJECT_DISABLED to admin calls too, tenant PATCH without a mask replaces
/// every field, `emailPrivacyConfig` in the v2 config and tenants, batch paging and codes, sign-up answers.
final class SpecParityTests: XCTestCase, AppCalling {
    var clock: EmulatorClock!
    var app: PhoneAuthApp!
    let adminHeaders = [("Authorization", "Bearer owner")]

    override func setUp() {
        clock = EmulatorClock(fixedAtMillis: testEpochMillis)
        app = makeTestApp(clock: clock, seed: 27)
    }

    func tenant(_ body: String) throws -> String {
        try XCTUnwrap(call("POST", "/identitytoolkit.googleapis.com/v2/projects/demo-phone/tenants", body, headers: adminHeaders).1["tenantId"]?.stringValue)
    }

    func admin(_ path: String, _ body: String, method: String = "POST") -> (Int, JSON) {
        call(method, "/identitytoolkit.googleapis.com/v1/projects/demo-phone/\(path)", body, headers: adminHeaders)
    }

    func testDisabledTenantRefusesAdminCallsToo() throws {
        let t = try tenant(#"{"displayName":"off-t","disableAuth":true}"#)
        XCTAssertEqual(message(admin("tenants/\(t)/accounts:lookup", #"{"localId":["x"]}"#)), "PROJECT_DISABLED")
        XCTAssertEqual(message(admin("tenants/\(t)/accounts:query", "{}")), "PROJECT_DISABLED")
        XCTAssertEqual(message(admin("tenants/\(t)/accounts:batchCreate", "{}")), "PROJECT_DISABLED")
        XCTAssertEqual(message(admin("tenants/\(t)/accounts:batchGet", "", method: "GET")), "PROJECT_DISABLED")
        XCTAssertEqual(message(itk("delete", #"{"tenantId":"\#(t)"}"#)), "PROJECT_DISABLED")
        XCTAssertEqual(message(itk("signInWithCustomToken", #"{"tenantId":"\#(t)"}"#)), "PROJECT_DISABLED")
        XCTAssertEqual(message(call("POST", "/identitytoolkit.googleapis.com/v2/accounts/mfaEnrollment:withdraw?key=k", #"{"tenantId":"\#(t)"}"#)),
                       "PROJECT_DISABLED")
        // The project and an enabled tenant are unaffected.
        XCTAssertEqual(admin("accounts:query", "{}").0, 200)
        let on = try tenant(#"{"displayName":"on-t"}"#)
        XCTAssertEqual(admin("tenants/\(on)/accounts:query", "{}").0, 200)
    }

    func testTenantPatchWithoutMaskReplacesEveryField() throws {
        let t = try tenant(#"{"displayName":"full-t","allowPasswordSignup":true,"mfaConfig":{"state":"ENABLED","enabledProviders":["PROVIDER_UNSPECIFIED","PHONE_SMS"]}}"#)
        let path = "/identitytoolkit.googleapis.com/v2/projects/demo-phone/tenants/\(t)"
        let masked = call("PATCH", path + "?updateMask=displayName.0,mfaConfig.enabledProviders.x", #"{"displayName":"unused","mfaConfig":{"enabledProviders":[]}}"#,
                          headers: adminHeaders)
        XCTAssertEqual(masked.1["displayName"], "full-t")
        XCTAssertEqual(masked.1["mfaConfig"]?["enabledProviders"], ["PROVIDER_UNSPECIFIED", "PHONE_SMS"])
        let full = call("PATCH", path, "{}", headers: adminHeaders)
        XCTAssertEqual(full.0, 200, "\(full.1)")
        XCTAssertEqual(full.1["allowPasswordSignup"], false)
        XCTAssertEqual(full.1["enableAnonymousUser"], false)
        XCTAssertNil(full.1["displayName"])
        XCTAssertEqual(full.1["mfaConfig"], ["state": "DISABLED", "enabledProviders": []])
    }

    func testEmailPrivacyInV2ConfigAndTenants() throws {
        let cfg = "/identitytoolkit.googleapis.com/v2/projects/demo-phone/config"
        XCTAssertEqual(call("GET", cfg, "", headers: adminHeaders).1["emailPrivacyConfig"], ["enableImprovedEmailPrivacy": true])
        XCTAssertEqual(itk("signUp", #"{"email":"a@example.com","password":"secret12"}"#).0, 200)
        XCTAssertEqual(message(itk("signInWithPassword", #"{"email":"a@example.com","password":"wrong-one"}"#)), "INVALID_LOGIN_CREDENTIALS")
        let off = call("PATCH", cfg + "?updateMask=emailPrivacyConfig", #"{"emailPrivacyConfig":{"enableImprovedEmailPrivacy":false}}"#, headers: adminHeaders)
        XCTAssertEqual(off.1["emailPrivacyConfig"], ["enableImprovedEmailPrivacy": false])
        XCTAssertEqual(message(itk("signInWithPassword", #"{"email":"a@example.com","password":"wrong-one"}"#)), "INVALID_PASSWORD")
        XCTAssertEqual(message(itk("signInWithPassword", #"{"email":"b@example.com","password":"wrong-one"}"#)), "EMAIL_NOT_FOUND")
        XCTAssertEqual(call("GET", "/emulator/v1/projects/demo-phone/config", "").1["emailPrivacyConfig"], ["enableImprovedEmailPrivacy": false])
        // A tenant has its own switch, on unless the resource says otherwise.
        let t = try tenant(#"{"displayName":"legacy-t","emailPrivacyConfig":{"enableImprovedEmailPrivacy":false}}"#)
        XCTAssertEqual(app.emulator.config(StoreKey(projectId: "demo-phone", tenantId: t)).enableImprovedEmailPrivacy, false)
        let t2 = try tenant(#"{"displayName":"private-t"}"#)
        XCTAssertEqual(app.emulator.config(StoreKey(projectId: "demo-phone", tenantId: t2)).enableImprovedEmailPrivacy, true)
    }

    func testBatchCodesAndFullPages() throws {
        XCTAssertEqual(message(admin("accounts:batchDelete", #"{"localIds":[]}"#)), "LOCAL_ID_LIST_EXCEEDS_LIMIT")
        let many = (0...1000).map { "\"id\($0)\"" }.joined(separator: ",")
        XCTAssertEqual(message(admin("accounts:batchDelete", #"{"localIds":[\#(many)],"force":true}"#)), "LOCAL_ID_LIST_EXCEEDS_LIMIT")
        for i in 1...2 { XCTAssertEqual(admin("accounts", #"{"localId":"u\#(i)"}"#).0, 200) }
        let full = admin("accounts:batchGet?maxResults=2", "", method: "GET").1
        XCTAssertEqual(full["nextPageToken"], "u2")
        let rest = admin("accounts:batchGet?nextPageToken=u2", "", method: "GET").1
        XCTAssertEqual(rest["users"]?.arrayValue?.count ?? 0, 0)
        XCTAssertNil(rest["nextPageToken"])
        let dup = admin("accounts:batchCreate", #"{"sanityCheck":true,"users":[{"localId":"a","email":"x@example.com"},{"localId":"b","email":"X@example.com"}]}"#)
        XCTAssertEqual(message(dup), "DUPLICATE_EMAIL : X@example.com")
        let raw = admin("accounts:batchCreate", #"{"sanityCheck":true,"users":[{"localId":"a","providerUserInfo":[{"providerId":"google.com","rawId":"r"}]},{"localId":"b","providerUserInfo":[{"providerId":"google.com","rawId":"r"}]}]}"#)
        XCTAssertEqual(message(raw), "DUPLICATE_RAW_ID : Provider id(google.com), Raw id(r)")
    }

    func testSignUpAnswersDisplayNameAndLinkReplacesEmail() throws {
        let up = itk("signUp", #"{"email":"alice@example.com","password":"secret12","displayName":"Alice"}"#)
        XCTAssertEqual(up.1["displayName"], "Alice")
        let idToken = try XCTUnwrap(up.1["idToken"]?.stringValue)
        let relinked = itk("signUp", #"{"idToken":"\#(idToken)","email":"bob@example.com","password":"secret13"}"#)
        XCTAssertEqual(relinked.0, 200, "\(relinked.1)")
        XCTAssertEqual(relinked.1["email"], "bob@example.com")
        XCTAssertEqual(relinked.1["displayName"], "Alice")
        XCTAssertEqual(relinked.1["localId"], up.1["localId"])
    }

    func testAdminDeleteNeedsLocalIdAndMFAEnrollmentsNullIsRefused() {
        XCTAssertEqual(message(call("POST", "/identitytoolkit.googleapis.com/v1/accounts:delete", #"{"idToken":"x"}"#, headers: adminHeaders)), "MISSING_LOCAL_ID")
        XCTAssertEqual(message(call("POST", "/identitytoolkit.googleapis.com/v1/accounts:update", #"{"localId":"x","mfa":{"enrollments":null}}"#, headers: adminHeaders)),
                       "Invalid JSON payload received. /mfa/enrollments must be array")
    }
}
