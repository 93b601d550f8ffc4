import EmulatorSupport
@testable import PhoneAuthAPI
import PhoneAuthCore
import PhoneAuthTestSupport
import XCTest

/// The password policy (issue 27 item 3): `passwordPolicyConfig` in the v2 config and tenants, `GET /v2/passwordPolicy`,
/// and its enforcement on sign-up, password change, reset and (with `forceUpgradeOnSignin`) sign-in.
final class PasswordPolicyTests: XCTestCase, AppCalling {
    var app: PhoneAuthApp!
    let clock = EmulatorClock(fixedAtMillis: testEpochMillis)
    let owner = [("Authorization", "Bearer owner")]
    let configPath = "/identitytoolkit.googleapis.com/v2/projects/demo-phone/config"
    let policyPath = "/identitytoolkit.googleapis.com/v2/passwordPolicy?key=fake-api-key"

    override func setUp() { app = makeTestApp(clock: clock, seed: 27, signing: .none) }

    /// firebase-admin's `updateProjectConfig({passwordPolicyConfig})` request (its mask and its defaults).
    func adminPolicy(_ state: String = "ENFORCE", force: Bool = false, min: Int = 8, max: Int = 16,
                     lower: Bool = true, upper: Bool = true, numeric: Bool = true, other: Bool = true) -> String {
        #"{"passwordPolicyConfig":{"passwordPolicyEnforcementState":"\#(state)","forceUpgradeOnSignin":\#(force),"#
            + #""passwordPolicyVersions":[{"customStrengthOptions":{"containsUppercaseCharacter":\#(upper),"#
            + #""containsLowercaseCharacter":\#(lower),"containsNonAlphanumericCharacter":\#(other),"#
            + #""containsNumericCharacter":\#(numeric),"minPasswordLength":\#(min),"maxPasswordLength":\#(max)}}]}}"#
    }

    static let mask = "passwordPolicyConfig.passwordPolicyEnforcementState,passwordPolicyConfig.forceUpgradeOnSignin,passwordPolicyConfig.passwordPolicyVersions"

    @discardableResult
    func setPolicy(_ body: String, tenant: String? = nil) -> (Int, JSON) {
        let path = tenant.map { "/identitytoolkit.googleapis.com/v2/projects/demo-phone/tenants/\($0)" } ?? configPath
        let r = call("PATCH", path + "?updateMask=" + Self.mask, body, headers: owner)
        XCTAssertEqual(r.0, 200, "\(r.1)")
        return r
    }

    func signUp(_ email: String, _ password: String, tenant: String? = nil) -> (Int, JSON) {
        let t = tenant.map { #","tenantId":"\#($0)""# } ?? ""
        return itk("signUp", #"{"email":"\#(email)","password":"\#(password)","returnSecureToken":true\#(t)}"#)
    }

    static let refused = "PASSWORD_DOES_NOT_MEET_REQUIREMENTS : Missing password requirements: "

    // MARK: GET /v2/passwordPolicy

    func testUnconfiguredProjectServesOffWithSchemaVersionOne() {
        let r = call("GET", policyPath)
        XCTAssertEqual(r.0, 200)
        XCTAssertEqual(r.1["enforcementState"], "OFF")
        XCTAssertEqual(r.1["schemaVersion"], 1)
        XCTAssertEqual(r.1["customStrengthOptions"], .object([:]))
        XCTAssertEqual(r.1["forceUpgradeOnSignin"], false)
        XCTAssertEqual(r.1["allowedNonAlphanumericCharacters"]?.arrayValue?.count, PasswordPolicy.allowedNonAlphanumeric.count)
        XCTAssertEqual(r.1["allowedNonAlphanumericCharacters"]?.arrayValue?.contains("+"), false)
        // No passwordPolicyConfig in the admin config until one is set (firebase-admin asserts on one without a state).
        XCTAssertNil(call("GET", configPath, headers: owner).1["passwordPolicyConfig"])
        // An OFF project: any 6-character password.
        XCTAssertEqual(signUp("a@example.com", "aaaaaa").0, 200)
    }

    func testConfiguredPolicyRoundTripsAndIsServed() {
        let patched = setPolicy(adminPolicy(force: true)).1["passwordPolicyConfig"]
        XCTAssertEqual(patched?["passwordPolicyEnforcementState"], "ENFORCE")
        XCTAssertEqual(patched?["forceUpgradeOnSignin"], true)
        XCTAssertEqual(patched?["passwordPolicyVersions"]?.arrayValue?.first?["customStrengthOptions"]?["minPasswordLength"], 8)
        XCTAssertEqual(patched?["passwordPolicyVersions"]?.arrayValue?.first?["schemaVersion"], 1)
        XCTAssertEqual(patched?["lastUpdateTime"]?.stringValue, Timestamp.protobufJSON(millis: testEpochMillis))
        XCTAssertEqual(call("GET", configPath, headers: owner).1["passwordPolicyConfig"], patched)
        let served = call("GET", policyPath).1
        XCTAssertEqual(served["enforcementState"], "ENFORCE")
        XCTAssertEqual(served["forceUpgradeOnSignin"], true)
        XCTAssertEqual(served["schemaVersion"], 1)
        XCTAssertEqual(served["customStrengthOptions"], ["minPasswordLength": 8, "maxPasswordLength": 16,
                                                          "containsLowercaseCharacter": true, "containsUppercaseCharacter": true,
                                                          "containsNumericCharacter": true, "containsNonAlphanumericCharacter": true])
        // The same rules again leave lastUpdateTime alone; new rules move it.
        _ = clock.advance(millis: 5000)
        XCTAssertEqual(setPolicy(adminPolicy(force: true)).1["passwordPolicyConfig"]?["lastUpdateTime"], patched?["lastUpdateTime"])
        XCTAssertEqual(setPolicy(adminPolicy(force: false)).1["passwordPolicyConfig"]?["lastUpdateTime"]?.stringValue,
                       Timestamp.protobufJSON(millis: testEpochMillis + 5000))
        // Through the emulator's own config too (the config file's block).
        XCTAssertEqual(call("GET", "/emulator/v1/projects/demo-phone/config").1["passwordPolicyConfig"]?["passwordPolicyEnforcementState"], "ENFORCE")
    }

    func testInvalidPolicyConfigIsRefused() {
        for bad in [adminPolicy(min: 5), adminPolicy(min: 31), adminPolicy(min: 10, max: 9), adminPolicy(max: 4097), adminPolicy("SOMETIMES"),
                    #"{"passwordPolicyConfig":{"passwordPolicyVersions":[{},{}]}}"#,
                    #"{"passwordPolicyConfig":{"passwordPolicyVersions":[{"customStrengthOptions":{"containsEmoji":true}}]}}"#] {
            let r = call("PATCH", configPath + "?updateMask=passwordPolicyConfig", bad, headers: owner)
            XCTAssertEqual(r.0, 400, bad)
            XCTAssertEqual(r.1["error"]?["status"], "INVALID_ARGUMENT")
            XCTAssertEqual(message(r)?.hasPrefix("Invalid config: passwordPolicyConfig"), true, "\(r.1)")
        }
        XCTAssertNil(call("GET", configPath, headers: owner).1["passwordPolicyConfig"], "nothing stored")
        // The emulator's config block says which key is wrong.
        let r = call("PATCH", "/emulator/v1/projects/demo-phone/config", adminPolicy(min: 3))
        XCTAssertEqual(r.0, 400)
        XCTAssertTrue("\(r.1)".contains("minPasswordLength"), "\(r.1)")
    }

    func testTenantPolicyIsItsOwn() {
        let created = call("POST", "/identitytoolkit.googleapis.com/v2/projects/demo-phone/tenants",
                           #"{"displayName":"policy-tenant","allowPasswordSignup":true}"#, headers: owner)
        guard let tenant = created.1["tenantId"]?.stringValue else { return XCTFail("\(created)") }
        XCTAssertNil(created.1["passwordPolicyConfig"])
        let patched = setPolicy(adminPolicy(min: 10, lower: false, upper: true, numeric: false, other: false), tenant: tenant)
        XCTAssertEqual(patched.1["passwordPolicyConfig"]?["passwordPolicyEnforcementState"], "ENFORCE")
        let served = call("GET", policyPath + "&tenantId=\(tenant)").1
        XCTAssertEqual(served["customStrengthOptions"], ["minPasswordLength": 10, "maxPasswordLength": 16, "containsUppercaseCharacter": true,
                                                          "containsLowercaseCharacter": false, "containsNumericCharacter": false,
                                                          "containsNonAlphanumericCharacter": false])
        XCTAssertEqual(call("GET", policyPath).1["enforcementState"], "OFF", "the project keeps its own")
        XCTAssertEqual(message(signUp("t@example.com", "short1", tenant: tenant)),
                       Self.refused + "[Password must contain at least 10 characters, Password must contain an upper case character]")
        XCTAssertEqual(signUp("t@example.com", "LongEnough", tenant: tenant).0, 200)
        XCTAssertEqual(signUp("p@example.com", "short1").0, 200, "the project is OFF")
        XCTAssertEqual(message(call("GET", policyPath + "&tenantId=bad_tenant!")).map { $0.hasPrefix("INVALID_TENANT_ID") }, true)
    }

    // MARK: enforcement

    func testEachRequirementAnswersProductionsMessage() {
        setPolicy(adminPolicy())
        let cases: [(String, String)] = [
            ("Ab1!", "[Password must contain at least 8 characters]"),
            ("Abcdefgh1!Abcdefgh", "[Password may contain at most 16 characters]"),
            ("ABCDEFG1!", "[Password must contain a lower case character]"),
            ("abcdefg1!", "[Password must contain an upper case character]"),
            ("Abcdefgh!", "[Password must contain a numeric character]"),
            ("Abcdefgh1", "[Password must contain a non-alphanumeric character]"),
            ("Abcdefgh1+", "[Password must contain a non-alphanumeric character]"),  // `+` is not in production's list
            ("111", "[Password must contain at least 8 characters, Password must contain a lower case character, "
                + "Password must contain an upper case character, Password must contain a non-alphanumeric character]"),
        ]
        for (i, (pw, missing)) in cases.enumerated() {
            let r = signUp("u\(i)@example.com", pw)
            XCTAssertEqual(r.0, 400)
            XCTAssertEqual(message(r), Self.refused + missing, pw)
            XCTAssertEqual(r.1["error"]?["status"], "INVALID_ARGUMENT")
        }
        XCTAssertEqual(signUp("ok@example.com", "Abcdefg1!").0, 200)
        // Admin createUser too (production refuses firebase-admin's createUser the same way).
        let admin = call("POST", "/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts",
                         #"{"email":"adm@example.com","password":"weakpass"}"#, headers: owner)
        XCTAssertEqual(message(admin), Self.refused + "[Password must contain an upper case character, Password must contain a numeric character, "
                       + "Password must contain a non-alphanumeric character]")
    }

    func testOffEnforcementChecksNothingButTheMinimum() {
        setPolicy(adminPolicy("OFF"))
        XCTAssertEqual(call("GET", policyPath).1["enforcementState"], "OFF")
        XCTAssertEqual(signUp("a@example.com", "aaaaaa").0, 200)
        XCTAssertEqual(message(signUp("b@example.com", "aaaaa")), "WEAK_PASSWORD : Password should be at least 6 characters")
        // ENFORCE with no length given still requires production's 6.
        setPolicy(#"{"passwordPolicyConfig":{"passwordPolicyEnforcementState":"ENFORCE","passwordPolicyVersions":[{"customStrengthOptions":{}}]}}"#)
        XCTAssertEqual(message(signUp("c@example.com", "aaaaa")), Self.refused + "[Password must contain at least 6 characters]")
    }

    func testPasswordChangeAndResetAreChecked() {
        let up = signUp("u@example.com", "weakpass1").1
        setPolicy(adminPolicy(numeric: false, other: false))
        let idToken = up["idToken"]?.stringValue ?? ""
        XCTAssertEqual(message(itk("update", #"{"idToken":"\#(idToken)","password":"alllower1","returnSecureToken":true}"#)),
                       Self.refused + "[Password must contain an upper case character]")
        XCTAssertEqual(itk("update", #"{"idToken":"\#(idToken)","password":"NowMixed","returnSecureToken":true}"#).0, 200)
        // Admin update too.
        let admin = call("POST", "/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts:update",
                         #"{"localId":"\#(up["localId"]?.stringValue ?? "")","password":"short"}"#, headers: owner)
        XCTAssertEqual(message(admin), Self.refused + "[Password must contain at least 8 characters, Password must contain an upper case character]")
        // A reset with a new password.
        XCTAssertEqual(itk("sendOobCode", #"{"requestType":"PASSWORD_RESET","email":"u@example.com"}"#).0, 200)
        let codes = call("GET", "/emulator/v1/projects/demo-phone/oobCodes").1["oobCodes"]?.arrayValue ?? []
        guard let code = codes.last?["oobCode"]?.stringValue else { return XCTFail("no code") }
        XCTAssertEqual(message(itk("resetPassword", #"{"oobCode":"\#(code)","newPassword":"nouppercase"}"#)),
                       Self.refused + "[Password must contain an upper case character]")
        XCTAssertEqual(itk("resetPassword", #"{"oobCode":"\#(code)","newPassword":"HasUpperNow"}"#).0, 200, "the refused try kept the code")
    }

    func testSignInNotifiesOrRefusesANonCompliantPassword() {
        XCTAssertEqual(signUp("old@example.com", "oldpass").0, 200)
        func signIn(_ pw: String) -> (Int, JSON) {
            itk("signInWithPassword", #"{"email":"old@example.com","password":"\#(pw)","returnSecureToken":true}"#)
        }
        // Enforced, no forced upgrade: production's notify mode.
        setPolicy(adminPolicy(numeric: false, other: false))
        let notified = signIn("oldpass")
        XCTAssertEqual(notified.0, 200)
        XCTAssertEqual(notified.1["userNotifications"], [
            ["notificationCode": "MINIMUM_PASSWORD_LENGTH", "notificationMessage": "Password must contain at least 8 characters"],
            ["notificationCode": "MISSING_UPPERCASE_CHARACTER", "notificationMessage": "Password must contain an upper case character"],
        ])
        // forceUpgradeOnSignin: the sign-in is refused (a wrong password is still a wrong password).
        setPolicy(adminPolicy(force: true, numeric: false, other: false))
        XCTAssertEqual(message(signIn("oldpass")), Self.refused + "[Password must contain at least 8 characters, Password must contain an upper case character]")
        XCTAssertEqual(message(signIn("Wrongpassword")), "INVALID_LOGIN_CREDENTIALS")
        // OFF: signs in, nothing to say.
        setPolicy(adminPolicy("OFF", force: true))
        let off = signIn("oldpass")
        XCTAssertEqual(off.0, 200)
        XCTAssertNil(off.1["userNotifications"])
    }

    func testPolicyCountsAsTheJSSDKDoes() {
        var p = PasswordPolicy()
        p.enforcement = .enforce
        p.minLength = 8
        XCTAssertEqual(p.missing("ééééééé"), [.minLength(8)], "7 code units")
        XCTAssertEqual(p.missing("😀😀😀😀"), [], "4 emoji are 8 UTF-16 code units, as JavaScript's length")
        p.requireNonAlphanumeric = true
        XCTAssertEqual(p.missing("abcdefgh "), [.nonAlphanumeric], "a space is not in the list")
        XCTAssertEqual(p.missing("abcdefgh`"), [])
        // One pass over the bytes: a body-sized password costs milliseconds.
        p.maxLength = 4096
        p.requireUppercase = true
        let huge = String(repeating: "a", count: 1_000_000)
        let start = ContinuousClock.now
        XCTAssertEqual(p.missing(huge), [.maxLength(4096), .uppercase, .nonAlphanumeric])
        XCTAssertLessThan(ContinuousClock.now - start, .milliseconds(500))
    }
}
