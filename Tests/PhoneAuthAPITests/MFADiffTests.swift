import EmulatorSupport
import JWT
@testable import PhoneAuthAPI
import PhoneAuthCore
import PhoneAuthTestSupport
import XCTest

/// What the second differential run against the official emulator (tenants, v3 paths, MFA edges) found and fixed:
/// `PROJECT_DISABLED` first on a disabled tenant's email endpoints, the token's tenant for `sendOobCode` without a
/// `tenantId`, `TENANT_ID_MISMATCH` before the MFA state, a batch-imported user of another tenant refused.
final class MFADiffTests: XCTestCase, AppCalling {
    var clock: EmulatorClock!
    var app: PhoneAuthApp!
    let adminHeaders = [("Authorization", "Bearer owner")]

    override func setUp() {
        clock = EmulatorClock(fixedAtMillis: testEpochMillis)
        app = makeTestApp(clock: clock, seed: 11)
    }

    func tenant(_ body: String) throws -> String {
        let r = call("POST", "/identitytoolkit.googleapis.com/v2/projects/demo-phone/tenants", body, headers: adminHeaders)
        XCTAssertEqual(r.0, 200, "\(r.1)")
        return try XCTUnwrap(r.1["tenantId"]?.stringValue)
    }

    func admin(_ op: String, _ body: String, tenant: String) -> (Int, JSON) {
        call("POST", "/identitytoolkit.googleapis.com/v1/projects/demo-phone/tenants/\(tenant)/\(op)", body, headers: adminHeaders)
    }

    func v2(_ op: String, _ body: String) -> (Int, JSON) {
        call("POST", "/identitytoolkit.googleapis.com/v2/accounts/\(op)?key=fake-api-key", body)
    }

    func testDisabledTenantAnswersProjectDisabledBeforeCredentialsOnEmailEndpoints() throws {
        let t = try tenant(#"{"displayName":"off-t","allowPasswordSignup":true}"#)
        XCTAssertEqual(admin("accounts", #"{"localId":"u1","email":"u1@example.com","password":"secret12"}"#, tenant: t).0, 200)
        let off = call("PATCH", "/identitytoolkit.googleapis.com/v2/projects/demo-phone/tenants/\(t)?updateMask=disableAuth", #"{"disableAuth":true}"#, headers: adminHeaders)
        XCTAssertEqual(off.0, 200, "\(off.1)")
        // The right password, a wrong one and an unknown email all answer PROJECT_DISABLED (was INVALID_LOGIN_CREDENTIALS).
        for body in [#"{"tenantId":"\#(t)","email":"u1@example.com","password":"secret12"}"#,
                     #"{"tenantId":"\#(t)","email":"u1@example.com","password":"wrong-one"}"#,
                     #"{"tenantId":"\#(t)","email":"nobody@example.com","password":"secret12"}"#] {
            XCTAssertEqual(message(itk("signInWithPassword", body)), "PROJECT_DISABLED")
            XCTAssertEqual(message(call("POST", "/www.googleapis.com/identitytoolkit/v3/relyingparty/verifyPassword?key=fake-api-key", body)), "PROJECT_DISABLED")
        }
        XCTAssertEqual(message(itk("createAuthUri", #"{"tenantId":"\#(t)","identifier":"u1@example.com","continueUri":"http://localhost/"}"#)), "PROJECT_DISABLED")
        XCTAssertEqual(message(itk("sendOobCode", #"{"tenantId":"\#(t)","requestType":"PASSWORD_RESET","email":"u1@example.com"}"#)), "PROJECT_DISABLED")
        XCTAssertEqual(message(itk("sendOobCode", #"{"tenantId":"\#(t)","requestType":"VERIFY_EMAIL","idToken":"x"}"#)), "PROJECT_DISABLED")
        XCTAssertTrue(app.emulator.oobCodes(StoreKey(projectId: "demo-phone", tenantId: t), email: nil).isEmpty)
        // Enabled again: the same requests work.
        XCTAssertEqual(call("PATCH", "/identitytoolkit.googleapis.com/v2/projects/demo-phone/tenants/\(t)?updateMask=disableAuth", #"{"disableAuth":false}"#, headers: adminHeaders).0, 200)
        XCTAssertEqual(itk("signInWithPassword", #"{"tenantId":"\#(t)","email":"u1@example.com","password":"secret12"}"#).0, 200)
        XCTAssertEqual(itk("createAuthUri", #"{"tenantId":"\#(t)","identifier":"u1@example.com","continueUri":"http://localhost/"}"#).0, 200)
    }

    func testSendOobCodeWithATenantTokenAndNoTenantIdUsesTheTokensTenant() throws {
        let t = try tenant(#"{"displayName":"oob-t","allowPasswordSignup":true}"#)
        let signUp = itk("signUp", #"{"tenantId":"\#(t)","email":"ada@example.com","password":"secret12","returnSecureToken":true}"#)
        let idToken = try XCTUnwrap(signUp.1["idToken"]?.stringValue)
        let sent = itk("sendOobCode", #"{"requestType":"VERIFY_EMAIL","idToken":"\#(idToken)"}"#)
        XCTAssertEqual(sent.0, 200, "\(sent.1)")  // was USER_NOT_FOUND (looked in the project)
        XCTAssertEqual(sent.1["email"], "ada@example.com")
        let inTenant = call("GET", "/emulator/v1/projects/demo-phone/tenants/\(t)/oobCodes").1["oobCodes"]?.arrayValue ?? []
        XCTAssertEqual(inTenant.count, 1)
        let first = try XCTUnwrap(inTenant.first)
        XCTAssertTrue(first["oobLink"]?.stringValue?.contains("tenantId=\(t)") == true)
        XCTAssertEqual(call("GET", "/emulator/v1/projects/demo-phone/oobCodes").1["oobCodes"]?.arrayValue?.count, 0)
        // The code verifies the tenant user's email.
        let code = try XCTUnwrap(first["oobCode"]?.stringValue)
        XCTAssertEqual(itk("update", #"{"tenantId":"\#(t)","oobCode":"\#(code)"}"#).1["emailVerified"], true)
        // Another tenant named in the body is still TENANT_ID_MISMATCH.
        let other = try tenant(#"{"displayName":"oob-u"}"#)
        XCTAssertEqual(message(itk("sendOobCode", #"{"tenantId":"\#(other)","requestType":"VERIFY_EMAIL","idToken":"\#(idToken)"}"#)), "TENANT_ID_MISMATCH")
    }

    func testMFAEnrollmentWithAnotherTenantsTokenIsTenantMismatchBeforeTheMFAState() throws {
        let on = try tenant(#"{"displayName":"mfa-on","allowPasswordSignup":true,"mfaConfig":{"state":"ENABLED","enabledProviders":["PHONE_SMS"]}}"#)
        let off = try tenant(#"{"displayName":"mfa-off","allowPasswordSignup":true}"#)
        let signUp = itk("signUp", #"{"tenantId":"\#(on)","email":"bo@example.com","password":"secret12","returnSecureToken":true}"#)
        let idToken = try XCTUnwrap(signUp.1["idToken"]?.stringValue)
        for op in ["mfaEnrollment:start", "mfaEnrollment:finalize"] {
            // Was OPERATION_NOT_ALLOWED (the MFA-off tenant's state looked at first).
            XCTAssertEqual(message(v2(op, #"{"tenantId":"\#(off)","idToken":"\#(idToken)","phoneEnrollmentInfo":{"phoneNumber":"+15555550111"}}"#)), "TENANT_ID_MISMATCH")
        }
        // A token of the top-level project in a tenant's call: the same.
        let proj = itk("signUp", #"{"email":"cy@example.com","password":"secret12","returnSecureToken":true}"#)
        let projToken = try XCTUnwrap(proj.1["idToken"]?.stringValue)
        XCTAssertEqual(message(v2("mfaEnrollment:start", #"{"tenantId":"\#(off)","idToken":"\#(projToken)","phoneEnrollmentInfo":{"phoneNumber":"+15555550111"}}"#)), "TENANT_ID_MISMATCH")
        // Unchanged: a bad token where MFA is off is still OPERATION_NOT_ALLOWED first; the right tenant gets to the email check.
        XCTAssertEqual(message(v2("mfaEnrollment:start", #"{"tenantId":"\#(off)","idToken":"garbage","phoneEnrollmentInfo":{"phoneNumber":"+15555550111"}}"#)),
                       "OPERATION_NOT_ALLOWED : SMS based MFA not enabled.")
        XCTAssertEqual(message(v2("mfaEnrollment:start", #"{"tenantId":"\#(on)","idToken":"\#(idToken)","phoneEnrollmentInfo":{"phoneNumber":"+15555550111"}}"#)),
                       "UNVERIFIED_EMAIL : Need to verify email first before enrolling second factors.")
        XCTAssertEqual(message(v2("mfaEnrollment:start", #"{"tenantId":"\#(on)","idToken":"garbage","phoneEnrollmentInfo":{"phoneNumber":"+15555550111"}}"#)), "INVALID_ID_TOKEN")
    }

    func testBatchCreateRefusesAUserOfAnotherTenant() throws {
        let t = try tenant(#"{"displayName":"imp-t"}"#)
        let r = admin("accounts:batchCreate", #"""
            {"users":[{"localId":"a1","email":"a1@example.com","emailVerified":true,"tenantId":"someone-else",
                       "mfaInfo":[{"phoneInfo":"+15555550111","mfaEnrollmentId":"e1"}]},
                      {"localId":"a2","email":"a2@example.com","emailVerified":true,"tenantId":"\#(t)",
                       "mfaInfo":[{"phoneInfo":"+15555550111","mfaEnrollmentId":"e2"}]}]}
            """#, tenant: t)
        XCTAssertEqual(r.0, 200, "\(r.1)")
        XCTAssertEqual(r.1["error"], [["index": 0, "message": "Tenant id in userInfo does not match the tenant id in request."]])
        let k = StoreKey(projectId: "demo-phone", tenantId: t)
        XCTAssertNil(app.emulator.existingStore(k)?.read { $0.users["a1"] })
        XCTAssertEqual(app.emulator.existingStore(k)?.read { $0.users["a2"]?.mfaInfo.map(\.mfaEnrollmentId) }, ["e2"])
        // The top-level project refuses a record that names a tenant.
        let top = call("POST", "/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts:batchCreate",
                       #"{"users":[{"localId":"a3","tenantId":"\#(t)"}]}"#, headers: adminHeaders)
        XCTAssertEqual(top.1["error"], [["index": 0, "message": "Tenant id in userInfo does not match the tenant id in request."]])
    }
}
