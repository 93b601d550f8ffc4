import EmulatorSupport
import HTTPServer
import JWT
@testable import PhoneAuthAPI
import PhoneAuthCore
import PhoneAuthTestSupport
import XCTest

/// SMS second factors through the responder: the admin side (`mfaInfo`), phone first factor of an MFA user, the v2
/// enrollment and sign-in endpoints, the first-factor seam, the inbox kinds, tenants' `mfaConfig`.
final class MultiFactorTests: XCTestCase, AppCalling {
    var clock: EmulatorClock!
    var app: PhoneAuthApp!
    let key = StoreKey(projectId: "demo-phone")
    /// Fictional number of the test app (code 123456).
    let fictional = "+16505554567"

    override func setUp() {
        clock = EmulatorClock(fixedAtMillis: testEpochMillis)
        app = makeTestApp(clock: clock, seed: 7)
    }

    func admin(_ op: String, _ body: String, tenant: String? = nil) -> (Int, JSON) {
        let base = "/identitytoolkit.googleapis.com/v1/projects/demo-phone" + (tenant.map { "/tenants/\($0)" } ?? "")
        return call("POST", base + "/" + op, body, headers: [("Authorization", "Bearer owner")])
    }

    func v2(_ op: String, _ body: String) -> (Int, JSON) {
        call("POST", "/identitytoolkit.googleapis.com/v2/accounts/\(op)?key=fake-api-key", body)
    }

    func lookup(_ id: String) -> JSON { admin("accounts:lookup", #"{"localId":["\#(id)"]}"#).1["users"]?.arrayValue?.first ?? .null }

    /// An email/password user (created by the admin API) and an ID token as a password sign-in would issue it.
    func passwordUser(_ id: String = "pw1", verified: Bool = true, tenant: String? = nil) throws -> String {
        let r = admin("accounts", #"{"localId":"\#(id)","email":"\#(id)@example.com","emailVerified":\#(verified)}"#, tenant: tenant)
        XCTAssertEqual(r.0, 200, "\(r.1)")
        return try token(id, provider: "password", tenant: tenant)
    }

    func token(_ id: String, provider: String, tenant: String? = nil) throws -> String {
        let k = StoreKey(projectId: "demo-phone", tenantId: tenant)
        let user = try XCTUnwrap(app.emulator.existingStore(k)?.read { $0.users[id] })
        return try app.idToken(for: user, key: k, signInProvider: provider, authTime: clock.nowSeconds())
    }

    func claims(_ token: JSON?) throws -> JSONObject { try XCTUnwrap(DecodedJWT(try XCTUnwrap(token?.stringValue))).payload }

    /// Enrolls `phone` for the user of `idToken` with the inbox's code; returns the finalize answer.
    func enroll(_ idToken: String, _ phone: String, name: String = "phone") throws -> JSON {
        let start = v2("mfaEnrollment:start", #"{"idToken":"\#(idToken)","phoneEnrollmentInfo":{"phoneNumber":"\#(phone)"}}"#)
        XCTAssertEqual(start.0, 200, "\(start.1)")
        let session = try XCTUnwrap(start.1["phoneSessionInfo"]?["sessionInfo"]?.stringValue)
        let code = try XCTUnwrap(app.emulator.verificationCodes(key, phone: phone).first { $0.sessionInfo == session }?.code)
        let fin = v2("mfaEnrollment:finalize", #"{"idToken":"\#(idToken)","displayName":"\#(name)","phoneVerificationInfo":{"sessionInfo":"\#(session)","code":"\#(code)"}}"#)
        XCTAssertEqual(fin.0, 200, "\(fin.1)")
        return fin.1
    }

    func pending(_ id: String, tenant: String? = nil) throws -> (String, [MFAEnrollment]) {
        let outcome = try app.emulator.passFirstFactor(StoreKey(projectId: "demo-phone", tenantId: tenant), localId: id, signInProvider: "password")
        guard case .mfaRequired(let credential, let enrollments) = outcome else { XCTFail("no MFA required"); return ("", []) }
        return (credential, enrollments)
    }

    // MARK: admin side

    func testMaskKeepsTheLastFourDigits() {
        XCTAssertEqual(MultiFactor.mask("+16505554567"), "+*******4567")
        XCTAssertEqual(MultiFactor.mask("+44 20 7946 0958"), "+** ** **** 0958")
        XCTAssertEqual(MultiFactor.mask("+123"), "+123")
        XCTAssertEqual(MultiFactor.mask("+１２３４５６7"), "+１２３４５６7")  // only ASCII digits are digits here
        XCTAssertEqual(MultiFactor.mask(""), "")
    }

    func testAdminSignUpStoresEnrollmentsAndLookupReturnsThem() throws {
        let r = admin("accounts", #"{"localId":"a1","email":"a@example.com","emailVerified":true,"mfaInfo":[{"phoneInfo":"+1 650 555 0100","displayName":"work"},{"phoneInfo":"+16505550101"}]}"#)
        XCTAssertEqual(r.0, 200, "\(r.1)")
        let info = try XCTUnwrap(lookup("a1")["mfaInfo"]?.arrayValue)
        XCTAssertEqual(info.count, 2)
        XCTAssertEqual(info[0]["phoneInfo"], "+16505550100")
        XCTAssertEqual(info[0]["unobfuscatedPhoneInfo"], "+16505550100")
        XCTAssertEqual(info[0]["displayName"], "work")
        XCTAssertEqual(info[0]["enrolledAt"], .string(Timestamp.protobufJSON(millis: testEpochMillis)))
        let id = try XCTUnwrap(info[0]["mfaEnrollmentId"]?.stringValue)
        XCTAssertEqual(id.count, 28)
        XCTAssertTrue(id.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) })
        XCTAssertNotEqual(info[0]["mfaEnrollmentId"], info[1]["mfaEnrollmentId"])
        // batchGet and query carry them too.
        let all = call("GET", "/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts:batchGet?maxResults=10", headers: [("Authorization", "Bearer owner")])
        XCTAssertEqual(all.1["users"]?.arrayValue?.first?["mfaInfo"]?.arrayValue?.count, 2)
        XCTAssertEqual(admin("accounts:query", "{}").1["userInfo"]?.arrayValue?.first?["mfaInfo"]?.arrayValue?.count, 2)
        XCTAssertEqual(message(admin("accounts", #"{"mfaInfo":[{"phoneInfo":"12"}]}"#)), "INVALID_MFA_PHONE_NUMBER : Invalid format.")
        XCTAssertEqual(message(admin("accounts", #"{"mfaInfo":[{"displayName":"x"}]}"#)), "INVALID_MFA_PHONE_NUMBER : Invalid format.")
        XCTAssertEqual(message(admin("accounts", #"{"mfaInfo":{"phoneInfo":"+16505550100"}}"#))?.hasPrefix("Invalid JSON payload"), true)
        XCTAssertEqual(message(admin("accounts", #"{"mfaInfo":[{"phoneInfo":"+16505550100"},{"phoneInfo":"+16505550102"},{"phoneInfo":"+16505550103"},{"phoneInfo":"+16505550104"},{"phoneInfo":"+16505550105"},{"phoneInfo":"+16505550106"}]}"#)),
                       "SECOND_FACTOR_LIMIT_EXCEEDED")
    }

    func testAdminUpdateReplacesAndClearsEnrollments() throws {
        XCTAssertEqual(admin("accounts", #"{"localId":"u","email":"u@example.com","emailVerified":true}"#).0, 200)
        var r = admin("accounts:update", #"{"localId":"u","mfa":{"enrollments":[{"phoneInfo":"+16505550100","mfaEnrollmentId":"enr1","displayName":"a"},{"phoneInfo":"+16505550101","mfaEnrollmentId":"enr2"}]}}"#)
        XCTAssertEqual(r.0, 200, "\(r.1)")
        XCTAssertEqual(lookup("u")["mfaInfo"]?.arrayValue?.compactMap { $0["mfaEnrollmentId"]?.stringValue }, ["enr1", "enr2"])
        // Without `mfa` the list stays.
        XCTAssertEqual(admin("accounts:update", #"{"localId":"u","displayName":"U"}"#).0, 200)
        XCTAssertEqual(lookup("u")["mfaInfo"]?.arrayValue?.count, 2)
        // Replaced whole.
        r = admin("accounts:update", #"{"localId":"u","mfa":{"enrollments":[{"phoneInfo":"+16505550109","mfaEnrollmentId":"enr9"}]}}"#)
        XCTAssertEqual(lookup("u")["mfaInfo"]?.arrayValue?.compactMap { $0["mfaEnrollmentId"]?.stringValue }, ["enr9"])
        XCTAssertEqual(message(admin("accounts:update", #"{"localId":"u","mfa":{"enrollments":[{"phoneInfo":"+16505550100"}]}}"#)),
                       "INVALID_MFA_ENROLLMENT_ID : mfaEnrollmentId must be defined.")
        XCTAssertEqual(message(admin("accounts:update", #"{"localId":"u","mfa":{"enrollments":[{"phoneInfo":"+16505550100","mfaEnrollmentId":"x"},{"phoneInfo":"+16505550101","mfaEnrollmentId":"x"}]}}"#)),
                       "DUPLICATE_MFA_ENROLLMENT_ID")
        XCTAssertEqual(message(admin("accounts:update", #"{"localId":"u","mfa":{"enrollments":[{"phoneInfo":"nope","mfaEnrollmentId":"x"}]}}"#)),
                       "INVALID_MFA_PHONE_NUMBER : Invalid format.")
        XCTAssertEqual(message(admin("accounts:update", #"{"localId":"u","mfa":{"enrollments":[{"phoneInfo":"+16505550100","mfaEnrollmentId":"a\nb"}]}}"#)),
                       "INVALID_MFA_ENROLLMENT_ID")
        XCTAssertEqual(lookup("u")["mfaInfo"]?.arrayValue?.count, 1, "a refused update changes nothing")
        XCTAssertEqual(admin("accounts:update", #"{"localId":"u","mfa":{"enrollments":[]}}"#).0, 200)
        XCTAssertNil(lookup("u")["mfaInfo"])
        _ = admin("accounts:update", #"{"localId":"u","mfa":{"enrollments":[{"phoneInfo":"+16505550109","mfaEnrollmentId":"enr9"}]}}"#)
        XCTAssertEqual(admin("accounts:update", #"{"localId":"u","mfa":{}}"#).0, 200)
        XCTAssertNil(lookup("u")["mfaInfo"])
    }

    func testBatchCreateImportsEnrollmentsWithPerUserErrors() throws {
        let body = #"""
        {"users":[
          {"localId":"ok","email":"ok@example.com","emailVerified":true,"mfaInfo":[{"phoneInfo":"+16505550100","mfaEnrollmentId":"keep","enrolledAt":"2025-01-02T03:04:05.678Z"},{"phoneInfo":"+16505550101"}]},
          {"localId":"noemail","mfaInfo":[{"phoneInfo":"+16505550100"}]},
          {"localId":"unverified","email":"u@example.com","mfaInfo":[{"phoneInfo":"+16505550100"}]},
          {"localId":"badphone","email":"b@example.com","emailVerified":true,"mfaInfo":[{"phoneInfo":"12"}]},
          {"localId":"dup","email":"d@example.com","emailVerified":true,"mfaInfo":[{"phoneInfo":"+16505550100","mfaEnrollmentId":"x"},{"phoneInfo":"+16505550101","mfaEnrollmentId":"x"}]}
        ]}
        """#
        let r = admin("accounts:batchCreate", body)
        XCTAssertEqual(r.0, 200)
        let errors = try XCTUnwrap(r.1["error"]?.arrayValue)
        XCTAssertEqual(errors.map { $0["index"] }, [1, 2, 3, 4])
        XCTAssertEqual(errors.map { $0["message"]?.stringValue ?? "" }, [
            "Second factor account requires email to be presented.", "Second factor account requires email to be verified.",
            "Phone number format is invalid", "Enrollment id already exists.",
        ])
        let info = try XCTUnwrap(lookup("ok")["mfaInfo"]?.arrayValue)
        XCTAssertEqual(info[0]["mfaEnrollmentId"], "keep")
        XCTAssertEqual(info[0]["enrolledAt"], "2025-01-02T03:04:05.678Z")
        XCTAssertEqual(info[1]["mfaEnrollmentId"]?.stringValue?.count, 28)
        XCTAssertEqual(lookup("noemail"), .null)
    }

    // MARK: phone first factor of an MFA user

    func testPhoneFirstFactorOfAnMFAUserIsRefusedAtSendAndAtSignIn() throws {
        XCTAssertEqual(admin("accounts", #"{"localId":"m","phoneNumber":"+15550001111","email":"m@example.com","emailVerified":true}"#).0, 200)
        let session = try XCTUnwrap(itk("sendVerificationCode", #"{"phoneNumber":"+15550001111"}"#).1["sessionInfo"]?.stringValue)
        let code = app.emulator.verificationCodes(key, phone: "+15550001111")[0].code
        XCTAssertEqual(admin("accounts:update", #"{"localId":"m","mfa":{"enrollments":[{"phoneInfo":"+16505550100","mfaEnrollmentId":"e1"}]}}"#).0, 200)
        let unsupported = "UNSUPPORTED_FIRST_FACTOR : A phone number cannot be set as a first factor on an SMS based MFA user."
        XCTAssertEqual(message(itk("sendVerificationCode", #"{"phoneNumber":"+1 555 000 1111"}"#)), unsupported)
        XCTAssertEqual(message(itk("signInWithPhoneNumber", #"{"sessionInfo":"\#(session)","code":"\#(code)"}"#)), unsupported)
        // Linking a phone to a signed-in MFA user is refused the same way.
        let s2 = try XCTUnwrap(itk("sendVerificationCode", #"{"phoneNumber":"+15550002222"}"#).1["sessionInfo"]?.stringValue)
        let c2 = app.emulator.verificationCodes(key, phone: "+15550002222")[0].code
        let idToken = try token("m", provider: "password")
        XCTAssertEqual(message(itk("signInWithPhoneNumber", #"{"idToken":"\#(idToken)","sessionInfo":"\#(s2)","code":"\#(c2)"}"#)), unsupported)
        // Cleared: the phone signs in again.
        XCTAssertEqual(admin("accounts:update", #"{"localId":"m","mfa":{}}"#).0, 200)
        XCTAssertEqual(itk("sendVerificationCode", #"{"phoneNumber":"+15550001111"}"#).0, 200)
    }

    // MARK: enrollment

    func testEnrollmentWithAFictionalNumber() throws {
        let idToken = try passwordUser()
        let start = v2("mfaEnrollment:start", #"{"idToken":"\#(idToken)","phoneEnrollmentInfo":{"phoneNumber":"+1 650-555-4567"}}"#)
        XCTAssertEqual(start.0, 200, "\(start.1)")
        let session = try XCTUnwrap(start.1["phoneSessionInfo"]?["sessionInfo"]?.stringValue)
        // The inbox shows it, with its kind; a first-factor sign-in cannot consume it.
        let inbox = call("GET", "/emulator/v1/projects/demo-phone/verificationCodes").1["verificationCodes"]?.arrayValue ?? []
        XCTAssertEqual(inbox.map { $0["kind"] }, ["mfaEnrollment"])
        XCTAssertEqual(inbox.first?["code"], "123456")
        XCTAssertEqual(message(itk("signInWithPhoneNumber", #"{"sessionInfo":"\#(session)","code":"123456"}"#)), "INVALID_SESSION_INFO")
        // Another user cannot finalize it.
        let other = try passwordUser("pw2")
        XCTAssertEqual(message(v2("mfaEnrollment:finalize", #"{"idToken":"\#(other)","phoneVerificationInfo":{"sessionInfo":"\#(session)","code":"123456"}}"#)),
                       "INVALID_SESSION_INFO")
        XCTAssertEqual(message(v2("mfaEnrollment:finalize", #"{"idToken":"\#(idToken)","phoneVerificationInfo":{"sessionInfo":"\#(session)","code":"000000"}}"#)),
                       "INVALID_CODE")
        let fin = v2("mfaEnrollment:finalize", #"{"idToken":"\#(idToken)","displayName":"my phone","phoneVerificationInfo":{"sessionInfo":"\#(session)","code":"123456"}}"#)
        XCTAssertEqual(fin.0, 200, "\(fin.1)")
        XCTAssertEqual(Set(fin.1.objectValue?.keys ?? []), ["idToken", "refreshToken"])
        let info = try XCTUnwrap(lookup("pw1")["mfaInfo"]?.arrayValue)
        XCTAssertEqual(info.count, 1)
        XCTAssertEqual(info[0]["phoneInfo"], .string(fictional))
        XCTAssertEqual(info[0]["displayName"], "my phone")
        let id = try XCTUnwrap(info[0]["mfaEnrollmentId"]?.stringValue)
        let fb = try claims(fin.1["idToken"])["firebase"]
        XCTAssertEqual(fb?["sign_in_provider"], "password")
        XCTAssertEqual(fb?["sign_in_second_factor"], "phone")
        XCTAssertEqual(fb?["second_factor_identifier"], .string(id))
        // The refresh token keeps the second factor.
        let refresh = try XCTUnwrap(fin.1["refreshToken"]?.stringValue)
        let r = call("POST", "/securetoken.googleapis.com/v1/token?key=k", "grant_type=refresh_token&refresh_token=\(refresh)",
                     headers: [("Content-Type", "application/x-www-form-urlencoded")])
        XCTAssertEqual(try claims(r.1["access_token"])["firebase"]?["second_factor_identifier"], .string(id))
        // The same number again.
        let again = try XCTUnwrap(fin.1["idToken"]?.stringValue)
        XCTAssertEqual(message(v2("mfaEnrollment:start", #"{"idToken":"\#(again)","phoneEnrollmentInfo":{"phoneNumber":"\#(fictional)"}}"#)),
                       "SECOND_FACTOR_EXISTS : Phone number already enrolled as second factor for this account.")
        XCTAssertTrue(app.emulator.verificationCodes(key, phone: fictional).isEmpty, "the code was used up")
    }

    func testEnrollmentErrorsInProductionOrder() throws {
        let unverified = try passwordUser("nv", verified: false)
        let verified = try passwordUser("v")
        XCTAssertEqual(message(v2("mfaEnrollment:start", #"{"phoneEnrollmentInfo":{"phoneNumber":"+16505550100"}}"#)), "MISSING_ID_TOKEN")
        XCTAssertEqual(message(v2("mfaEnrollment:start", #"{"idToken":"garbage"}"#)), "INVALID_ID_TOKEN")
        let phoneToken = try token("v", provider: "phone")
        XCTAssertEqual(message(v2("mfaEnrollment:start", #"{"idToken":"\#(phoneToken)"}"#)),
                       "UNSUPPORTED_FIRST_FACTOR : MFA is not available for the given first factor.")
        XCTAssertEqual(message(v2("mfaEnrollment:start", #"{"idToken":"\#(unverified)"}"#)),
                       "UNVERIFIED_EMAIL : Need to verify email first before enrolling second factors.")
        XCTAssertEqual(message(v2("mfaEnrollment:start", #"{"idToken":"\#(verified)"}"#)), "INVALID_ARGUMENT : ((Missing phoneEnrollmentInfo.))")
        XCTAssertEqual(message(v2("mfaEnrollment:start", #"{"idToken":"\#(verified)","phoneEnrollmentInfo":{"phoneNumber":"12"}}"#))?.hasPrefix("INVALID_PHONE_NUMBER"), true)
        XCTAssertEqual(message(v2("mfaEnrollment:finalize", #"{"idToken":"\#(verified)"}"#)), "INVALID_ARGUMENT : ((Missing phoneVerificationInfo.))")
        XCTAssertEqual(message(v2("mfaEnrollment:finalize", #"{"idToken":"\#(verified)","phoneVerificationInfo":{"sessionInfo":"x"}}"#)), "MISSING_CODE")
        XCTAssertEqual(message(v2("mfaEnrollment:finalize", #"{"idToken":"\#(verified)","phoneVerificationInfo":{"code":"1"}}"#)), "MISSING_SESSION_INFO")
        XCTAssertEqual(message(v2("mfaEnrollment:finalize", #"{"idToken":"\#(verified)","phoneVerificationInfo":{"code":"1","sessionInfo":"nope"}}"#)), "INVALID_SESSION_INFO")
        let android = v2("mfaEnrollment:finalize", #"{"idToken":"\#(verified)","phoneVerificationInfo":{"androidVerificationProof":"p","phoneNumber":"+16505550100"}}"#)
        XCTAssertEqual(android.0, 501)
        // Production's limit on second factors.
        var current = verified
        for i in 0..<MultiFactor.maxEnrollments {
            current = try XCTUnwrap(try enroll(current, "+1650555010\(i)")["idToken"]?.stringValue)
        }
        XCTAssertEqual(message(v2("mfaEnrollment:start", #"{"idToken":"\#(current)","phoneEnrollmentInfo":{"phoneNumber":"+16505550109"}}"#)),
                       "SECOND_FACTOR_LIMIT_EXCEEDED")
        // SMS MFA off for the project.
        _ = try app.emulator.patchConfig(key, ["mfa": ["state": "DISABLED"]])
        XCTAssertEqual(message(v2("mfaEnrollment:start", #"{"idToken":"\#(current)","phoneEnrollmentInfo":{"phoneNumber":"+16505550109"}}"#)),
                       "OPERATION_NOT_ALLOWED : SMS based MFA not enabled.")
    }

    func testEnrollmentRevokesOlderTokensAndWithdrawRemovesTheFactor() throws {
        let first = try passwordUser()
        clock.advance(millis: 5_000)
        let fin = try enroll(first, "+16505550100")
        XCTAssertEqual(message(itk("lookup", #"{"idToken":"\#(first)"}"#)), "TOKEN_EXPIRED", "production revokes sessions on enrollment")
        let current = try XCTUnwrap(fin["idToken"]?.stringValue)
        XCTAssertEqual(itk("lookup", #"{"idToken":"\#(current)"}"#).0, 200)
        XCTAssertEqual(message(v2("mfaEnrollment:withdraw", #"{"idToken":"\#(current)","mfaEnrollmentId":"nope"}"#)), "MFA_ENROLLMENT_NOT_FOUND")
        let id = try XCTUnwrap(lookup("pw1")["mfaInfo"]?.arrayValue?.first?["mfaEnrollmentId"]?.stringValue)
        let w = v2("mfaEnrollment:withdraw", #"{"idToken":"\#(current)","mfaEnrollmentId":"\#(id)"}"#)
        XCTAssertEqual(w.0, 200, "\(w.1)")
        XCTAssertNil(try claims(w.1["idToken"])["firebase"]?["sign_in_second_factor"])
        XCTAssertNil(lookup("pw1")["mfaInfo"])
        XCTAssertEqual(try app.emulator.passFirstFactor(key, localId: "pw1", signInProvider: "password"), .issueTokens)
    }

    // MARK: sign-in

    func testSignInWithTheSecondFactor() throws {
        _ = try enroll(try passwordUser(), fictional, name: "fictional")
        let (credential, enrollments) = try pending("pw1")
        let reply = try XCTUnwrap(MFAJSON.pendingReply(.mfaRequired(pendingCredential: credential, enrollments: enrollments)))
        XCTAssertEqual(reply["mfaInfo"]?.arrayValue?.first?["phoneInfo"], "+*******4567")
        XCTAssertNil(reply["mfaInfo"]?.arrayValue?.first?["unobfuscatedPhoneInfo"])
        let enrollmentId = enrollments[0].mfaEnrollmentId
        XCTAssertEqual(message(v2("mfaSignIn:start", #"{"mfaEnrollmentId":"\#(enrollmentId)"}"#)),
                       "MISSING_MFA_PENDING_CREDENTIAL : Request does not have MFA pending credential.")
        XCTAssertEqual(message(v2("mfaSignIn:start", #"{"mfaPendingCredential":"\#(credential)"}"#)),
                       "MISSING_MFA_ENROLLMENT_ID : No second factor identifier is provided.")
        XCTAssertEqual(message(v2("mfaSignIn:start", #"{"mfaPendingCredential":"forged","mfaEnrollmentId":"\#(enrollmentId)"}"#)),
                       "INVALID_MFA_PENDING_CREDENTIAL")
        XCTAssertEqual(message(v2("mfaSignIn:start", #"{"mfaPendingCredential":"\#(credential)","mfaEnrollmentId":"other"}"#)), "MFA_ENROLLMENT_NOT_FOUND")
        let start = v2("mfaSignIn:start", #"{"mfaPendingCredential":"\#(credential)","mfaEnrollmentId":"\#(enrollmentId)","phoneSignInInfo":{"recaptchaToken":"x"}}"#)
        XCTAssertEqual(start.0, 200, "\(start.1)")
        let session = try XCTUnwrap(start.1["phoneResponseInfo"]?["sessionInfo"]?.stringValue)
        XCTAssertEqual(app.emulator.verificationCodes(key, phone: fictional).map(\.kind.inboxName), ["mfaSignIn"])
        XCTAssertEqual(message(itk("signInWithPhoneNumber", #"{"sessionInfo":"\#(session)","code":"123456"}"#)), "INVALID_SESSION_INFO")
        XCTAssertEqual(message(v2("mfaSignIn:finalize", #"{"phoneVerificationInfo":{"sessionInfo":"\#(session)","code":"123456"}}"#)),
                       "MISSING_CREDENTIAL : Please set MFA Pending Credential.")
        XCTAssertEqual(message(v2("mfaSignIn:finalize", #"{"mfaPendingCredential":"\#(credential)"}"#)), "INVALID_ARGUMENT : MFA provider not supported!")
        XCTAssertEqual(message(v2("mfaSignIn:finalize", #"{"mfaPendingCredential":"\#(credential)","phoneVerificationInfo":{"sessionInfo":"\#(session)","code":"999999"}}"#)),
                       "INVALID_CODE")
        clock.advance(millis: 1_000)
        let fin = v2("mfaSignIn:finalize", #"{"mfaPendingCredential":"\#(credential)","phoneVerificationInfo":{"sessionInfo":"\#(session)","code":"123456"}}"#)
        XCTAssertEqual(fin.0, 200, "\(fin.1)")
        let c = try claims(fin.1["idToken"])
        XCTAssertEqual(c["firebase"]?["sign_in_provider"], "password")
        XCTAssertEqual(c["firebase"]?["sign_in_second_factor"], "phone")
        XCTAssertEqual(c["firebase"]?["second_factor_identifier"], .string(enrollmentId))
        XCTAssertEqual(c["auth_time"], .int(clock.nowSeconds()))
        XCTAssertEqual(lookup("pw1")["lastLoginAt"], .string(String(clock.nowMillis())))
        // The pending credential is single use.
        let again = v2("mfaSignIn:start", #"{"mfaPendingCredential":"\#(credential)","mfaEnrollmentId":"\#(enrollmentId)"}"#)
        XCTAssertEqual(message(again), "INVALID_MFA_PENDING_CREDENTIAL")
    }

    func testTheWholeFlowOverHTTPWithAPasswordFirstFactor() throws {
        // signUp with a password → verify the email through the oob inbox → enroll → a password sign-in answers the
        // MFA-required shape (no tokens) → mfaSignIn → tokens with the second factor; refresh keeps it.
        let up = itk("signUp", #"{"email":"mia@example.com","password":"secret1","returnSecureToken":true}"#)
        XCTAssertEqual(up.0, 200, "\(up.1)")
        let first = try XCTUnwrap(up.1["idToken"]?.stringValue)
        XCTAssertEqual(message(v2("mfaEnrollment:start", #"{"idToken":"\#(first)","phoneEnrollmentInfo":{"phoneNumber":"\#(fictional)"}}"#)),
                       "UNVERIFIED_EMAIL : Need to verify email first before enrolling second factors.")
        XCTAssertEqual(itk("sendOobCode", #"{"requestType":"VERIFY_EMAIL","idToken":"\#(first)"}"#).0, 200)
        let code = try XCTUnwrap(app.emulator.oobCodes(key, email: "mia@example.com").first?.code)
        XCTAssertEqual(itk("update", #"{"oobCode":"\#(code)"}"#).0, 200)
        let verified = itk("signInWithPassword", #"{"email":"mia@example.com","password":"secret1","returnSecureToken":true}"#)
        let idToken = try XCTUnwrap(verified.1["idToken"]?.stringValue, "\(verified.1)")
        let enrolled = try enroll(idToken, fictional, name: "work phone")
        XCTAssertEqual(try claims(enrolled["idToken"])["firebase"]?["sign_in_second_factor"], "phone")

        let signIn = itk("signInWithPassword", #"{"email":"mia@example.com","password":"secret1","returnSecureToken":true}"#)
        XCTAssertEqual(signIn.0, 200, "\(signIn.1)")
        XCTAssertNil(signIn.1["idToken"], "no token before the second factor")
        XCTAssertNil(signIn.1["refreshToken"])
        let credential = try XCTUnwrap(signIn.1["mfaPendingCredential"]?.stringValue)
        let hint = try XCTUnwrap(signIn.1["mfaInfo"]?.arrayValue?.first)
        XCTAssertEqual(hint["phoneInfo"], "+*******4567")
        XCTAssertEqual(hint["displayName"], "work phone")
        let enrollmentId = try XCTUnwrap(hint["mfaEnrollmentId"]?.stringValue)
        XCTAssertEqual(message(itk("signInWithPassword", #"{"email":"mia@example.com","password":"wrong!","returnSecureToken":true}"#)),
                       "INVALID_LOGIN_CREDENTIALS", "the password is checked before the second factor is asked for")

        let start = v2("mfaSignIn:start", #"{"mfaPendingCredential":"\#(credential)","mfaEnrollmentId":"\#(enrollmentId)"}"#)
        let session = try XCTUnwrap(start.1["phoneResponseInfo"]?["sessionInfo"]?.stringValue, "\(start.1)")
        let fin = v2("mfaSignIn:finalize", #"{"mfaPendingCredential":"\#(credential)","phoneVerificationInfo":{"sessionInfo":"\#(session)","code":"123456"}}"#)
        XCTAssertEqual(fin.0, 200, "\(fin.1)")
        XCTAssertEqual(try claims(fin.1["idToken"])["firebase"]?["sign_in_provider"], "password")
        XCTAssertEqual(try claims(fin.1["idToken"])["firebase"]?["second_factor_identifier"], .string(enrollmentId))
        let uid = try XCTUnwrap(signIn.1["localId"]?.stringValue)
        XCTAssertNotNil(lookup(uid)["lastRefreshAt"], "a token was minted: lookup says when (as the official emulator)")
        let refresh = try XCTUnwrap(fin.1["refreshToken"]?.stringValue)
        let refreshed = call("POST", "/securetoken.googleapis.com/v1/token?key=fake-api-key", #"{"grant_type":"refresh_token","refresh_token":"\#(refresh)"}"#)
        XCTAssertEqual(refreshed.0, 200, "\(refreshed.1)")
        XCTAssertEqual(try claims(refreshed.1["id_token"])["firebase"]?["sign_in_second_factor"], "phone", "refresh keeps the second factor")
    }

    func testPendingCredentialExpiresAndIsBoundToItsStoreAndUser() throws {
        _ = try enroll(try passwordUser(), "+16505550100")
        _ = try enroll(try passwordUser("pw2"), "+16505550200")
        let (c1, e1) = try pending("pw1")
        let (c2, _) = try pending("pw2")
        // pw2's pending credential cannot finalize with a code sent for pw1.
        let s1 = try XCTUnwrap(v2("mfaSignIn:start", #"{"mfaPendingCredential":"\#(c1)","mfaEnrollmentId":"\#(e1[0].mfaEnrollmentId)"}"#).1["phoneResponseInfo"]?["sessionInfo"]?.stringValue)
        let code = app.emulator.verificationCodes(key, phone: "+16505550100")[0].code
        XCTAssertEqual(message(v2("mfaSignIn:finalize", #"{"mfaPendingCredential":"\#(c2)","phoneVerificationInfo":{"sessionInfo":"\#(s1)","code":"\#(code)"}}"#)),
                       "INVALID_SESSION_INFO")
        // Another tenant does not know it.
        XCTAssertEqual(message(v2("mfaSignIn:start", #"{"tenantId":"other-t","mfaPendingCredential":"\#(c1)","mfaEnrollmentId":"\#(e1[0].mfaEnrollmentId)"}"#)),
                       "INVALID_MFA_PENDING_CREDENTIAL")
        // Ten minutes on the emulator clock.
        clock.advance(millis: Emulator.mfaPendingLifetimeMillis)
        XCTAssertEqual(message(v2("mfaSignIn:start", #"{"mfaPendingCredential":"\#(c1)","mfaEnrollmentId":"\#(e1[0].mfaEnrollmentId)"}"#)),
                       "INVALID_MFA_PENDING_CREDENTIAL")
        // Bounded: the oldest pending credentials make room.
        for _ in 0..<(Emulator.maxMFAPending + 10) { _ = try pending("pw2") }
        XCTAssertLessThanOrEqual(app.emulator.store(key).read { $0.mfaPending.count }, Emulator.maxMFAPending)
    }

    func testIOSTestingModeMaskedNumberFinalizesTheSignIn() throws {
        _ = try enroll(try passwordUser(), fictional)
        let (credential, _) = try pending("pw1")
        // What the iOS SDK sends with app verification disabled for testing: the masked hint, to sendVerificationCode.
        let send = itk("sendVerificationCode", #"{"phoneNumber":"+*******4567"}"#)
        XCTAssertEqual(send.0, 200, "\(send.1)")
        let session = try XCTUnwrap(send.1["sessionInfo"]?.stringValue)
        XCTAssertEqual(message(itk("signInWithPhoneNumber", #"{"sessionInfo":"\#(session)","code":"123456"}"#)), "INVALID_SESSION_INFO")
        let fin = v2("mfaSignIn:finalize", #"{"mfaPendingCredential":"\#(credential)","phoneVerificationInfo":{"sessionInfo":"\#(session)","code":"123456"}}"#)
        XCTAssertEqual(fin.0, 200, "\(fin.1)")
        XCTAssertEqual(try claims(fin.1["idToken"])["firebase"]?["sign_in_second_factor"], "phone")
    }

    func testAppVerificationLimitsAndScenarioNumbersApplyToMFACodes() throws {
        let idToken = try passwordUser()
        _ = try app.emulator.patchConfig(key, ["phoneAuth": ["appVerification": "ENFORCE", "sendRateLimits": ["perPhoneNumber": ["max": 1]],
                                                            "scenarioNumbers": ["+15550000001": ["onSend": "QUOTA_EXCEEDED"]]]])
        func start(_ phone: String, _ extra: String = "") -> (Int, JSON) {
            v2("mfaEnrollment:start", #"{"idToken":"\#(idToken)","phoneEnrollmentInfo":{"phoneNumber":"\#(phone)"\#(extra)}}"#)
        }
        XCTAssertEqual(message(start("+15557770001")), "MISSING_APP_CREDENTIAL")
        let minted = app.emulator.mintAppCredential(key, type: .recaptcha).token
        XCTAssertEqual(start("+15557770001", #","recaptchaToken":"\#(minted)""#).0, 200)
        XCTAssertEqual(message(start("+15557770001", #","recaptchaToken":"\#(minted)""#)), "CAPTCHA_CHECK_FAILED : Recaptcha verification failed - MALFORMED", "single use")
        let again = app.emulator.mintAppCredential(key, type: .recaptcha).token
        XCTAssertEqual(message(start("+15557770001", #","recaptchaToken":"\#(again)""#)), "TOO_MANY_ATTEMPTS_TRY_LATER")
        XCTAssertEqual(message(start("+15550000001")), "QUOTA_EXCEEDED")
        // Fictional numbers skip app verification and limits, as for the first factor.
        XCTAssertEqual(start(fictional).0, 200)
        XCTAssertEqual(start(fictional).0, 200)
    }

    // MARK: config and tenants

    func testMFAConfigInTheConfigsAndTenants() throws {
        var cfg = call("GET", "/emulator/v1/projects/demo-phone/config").1
        XCTAssertEqual(cfg["mfa"], ["state": "ENABLED", "enabledProviders": ["PHONE_SMS"]])
        // The official emulator's keys are accepted and returned next to ours.
        let patched = call("PATCH", "/emulator/v1/projects/demo-phone/config", #"{"signIn":{"allowDuplicateEmails":true},"emailPrivacyConfig":{"enableImprovedEmailPrivacy":true}}"#)
        XCTAssertEqual(patched.0, 200, "\(patched.1)")
        cfg = call("GET", "/emulator/v1/projects/demo-phone/config").1
        XCTAssertEqual(cfg["signIn"]?["allowDuplicateEmails"], true)
        XCTAssertEqual(cfg["emailPrivacyConfig"], ["enableImprovedEmailPrivacy": true])
        XCTAssertNotNil(cfg["signIn"]?["phoneNumber"])
        XCTAssertEqual(call("PATCH", "/emulator/v1/projects/demo-phone/config", #"{"mfa":{"state":"SOMETIMES"}}"#).0, 400)
        // The v2 config's `mfa`.
        let adminHeaders = [("Authorization", "Bearer owner")]
        let v2cfg = call("PATCH", "/identitytoolkit.googleapis.com/v2/projects/demo-phone/config?updateMask=mfa.state", #"{"mfa":{"state":"DISABLED"}}"#, headers: adminHeaders)
        XCTAssertEqual(v2cfg.0, 200, "\(v2cfg.1)")
        XCTAssertEqual(v2cfg.1["mfa"]?["state"], "DISABLED")
        XCTAssertEqual(app.emulator.config(key).mfa.state, .disabled)
        XCTAssertEqual(call("GET", "/identitytoolkit.googleapis.com/v2/projects/demo-phone/config", headers: adminHeaders).1["mfa"]?["state"], "DISABLED")
        // Tenants: production's fields; MFA off unless configured.
        let created = call("POST", "/identitytoolkit.googleapis.com/v2/projects/demo-phone/tenants", #"{"displayName":"acme"}"#, headers: adminHeaders)
        XCTAssertEqual(created.0, 200, "\(created.1)")
        let tenantId = try XCTUnwrap(created.1["tenantId"]?.stringValue)
        XCTAssertEqual(created.1["name"], .string("projects/demo-phone/tenants/\(tenantId)"))
        XCTAssertEqual(created.1["mfaConfig"], ["state": "DISABLED", "enabledProviders": []])
        for k in ["allowPasswordSignup", "enableEmailLinkSignin", "disableAuth"] { XCTAssertNotNil(created.1[k], k) }
        let idToken = try passwordUser("t1", tenant: tenantId)
        XCTAssertEqual(message(v2("mfaEnrollment:start", #"{"tenantId":"\#(tenantId)","idToken":"\#(idToken)","phoneEnrollmentInfo":{"phoneNumber":"+16505550100"}}"#)),
                       "OPERATION_NOT_ALLOWED : SMS based MFA not enabled.")
        let on = call("PATCH", "/identitytoolkit.googleapis.com/v2/projects/demo-phone/tenants/\(tenantId)", #"{"mfaConfig":{"state":"ENABLED","enabledProviders":["PHONE_SMS"]}}"#, headers: adminHeaders)
        XCTAssertEqual(on.1["mfaConfig"]?["state"], "ENABLED")
        let start = v2("mfaEnrollment:start", #"{"tenantId":"\#(tenantId)","idToken":"\#(idToken)","phoneEnrollmentInfo":{"phoneNumber":"+16505550100"}}"#)
        XCTAssertEqual(start.0, 200, "\(start.1)")
        XCTAssertEqual(call("GET", "/emulator/v1/projects/demo-phone/tenants/\(tenantId)/verificationCodes").1["verificationCodes"]?.arrayValue?.first?["kind"], "mfaEnrollment")
        XCTAssertEqual(call("PATCH", "/identitytoolkit.googleapis.com/v2/projects/demo-phone/tenants/\(tenantId)", #"{"mfaConfig":{"state":7}}"#, headers: adminHeaders).0, 400)
    }
}
