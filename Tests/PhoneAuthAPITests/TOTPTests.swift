import EmulatorSupport
import HTTPServer
import JWT
@testable import PhoneAuthAPI
@testable import PhoneAuthCore
import PhoneAuthTestSupport
import XCTest

/// TOTP second factors through the responder: RFC 6238 codes, the config (`mfa.providerConfigs`), enrollment and
/// sign-in in production's shapes, windows and replays on the emulator clock, attempts, the current-code helper,
/// phone and TOTP side by side, admin keep/import/export and the journal form.
final class TOTPTests: XCTestCase, AppCalling {
    var clock: EmulatorClock!
    var app: PhoneAuthApp!
    let key = StoreKey(projectId: "demo-phone")
    let adminHeaders = [("Authorization", "Bearer owner")]

    override func setUp() {
        clock = EmulatorClock(fixedAtMillis: testEpochMillis)
        app = makeTestApp(clock: clock, seed: 11)
    }

    func admin(_ op: String, _ body: String) -> (Int, JSON) {
        call("POST", "/identitytoolkit.googleapis.com/v1/projects/demo-phone/" + op, body, headers: adminHeaders)
    }

    func v2(_ op: String, _ body: String) -> (Int, JSON) {
        call("POST", "/identitytoolkit.googleapis.com/v2/accounts/\(op)?key=fake-api-key", body)
    }

    func lookup(_ id: String) -> JSON { admin("accounts:lookup", #"{"localId":["\#(id)"]}"#).1["users"]?.arrayValue?.first ?? .null }

    func enableTOTP(adjacentIntervals: Int? = nil, state: String = "ENABLED") {
        let t = adjacentIntervals.map { #"{"adjacentIntervals":\#($0)}"# } ?? "{}"
        let r = call("PATCH", "/identitytoolkit.googleapis.com/v2/projects/demo-phone/config?updateMask=mfa.providerConfigs",
                     #"{"mfa":{"providerConfigs":[{"state":"\#(state)","totpProviderConfig":\#(t)}]}}"#, headers: adminHeaders)
        XCTAssertEqual(r.0, 200, "\(r.1)")
    }

    func passwordUser(_ id: String = "u1") throws -> String {
        let r = admin("accounts", #"{"localId":"\#(id)","email":"\#(id)@example.com","emailVerified":true}"#)
        XCTAssertEqual(r.0, 200, "\(r.1)")
        let user = try XCTUnwrap(app.emulator.existingStore(key)?.read { $0.users[id] })
        return try app.idToken(for: user, key: key, signInProvider: "password", authTime: clock.nowSeconds())
    }

    func claims(_ token: JSON?) throws -> JSONObject { try XCTUnwrap(DecodedJWT(try XCTUnwrap(token?.stringValue))).payload }

    func code(_ secret: String, at millis: Int64? = nil) throws -> String {
        TOTP.code(secret: try XCTUnwrap(TOTP.base32Decode(secret)), step: TOTP.step(atMillis: millis ?? clock.nowMillis()), hmac: hmacSHA1)
    }

    /// Enrolls a TOTP factor for `id`; returns (secret, enrollment id, finalize answer).
    func enroll(_ idToken: String, name: String = "app") throws -> (String, String, JSON) {
        let start = v2("mfaEnrollment:start", #"{"idToken":"\#(idToken)","totpEnrollmentInfo":{}}"#)
        XCTAssertEqual(start.0, 200, "\(start.1)")
        let info = try XCTUnwrap(start.1["totpSessionInfo"])
        let secret = try XCTUnwrap(info["sharedSecretKey"]?.stringValue)
        let session = try XCTUnwrap(info["sessionInfo"]?.stringValue)
        let fin = v2("mfaEnrollment:finalize",
                     #"{"idToken":"\#(idToken)","displayName":"\#(name)","totpVerificationInfo":{"sessionInfo":"\#(session)","verificationCode":"\#(try code(secret))"}}"#)
        XCTAssertEqual(fin.0, 200, "\(fin.1)")
        let id = try XCTUnwrap(claims(fin.1["idToken"])["firebase"]?["second_factor_identifier"]?.stringValue)
        return (secret, id, fin.1)
    }

    func pending(_ id: String) throws -> String {
        let outcome = try app.emulator.passFirstFactor(key, localId: id, signInProvider: "password")
        guard case .mfaRequired(let credential, _) = outcome else { XCTFail("no MFA required"); return "" }
        return credential
    }

    func signIn(_ credential: String, _ enrollment: String, _ code: String) -> (Int, JSON) {
        v2("mfaSignIn:finalize", #"{"mfaPendingCredential":"\#(credential)","mfaEnrollmentId":"\#(enrollment)","totpVerificationInfo":{"verificationCode":"\#(code)"}}"#)
    }

    // MARK: the algorithm

    /// RFC 6238 Appendix B, SHA1 (8 digits, the ASCII secret "12345678901234567890").
    func testRFC6238TestVectors() {
        let secret = Array("12345678901234567890".utf8)
        let vectors: [(Int64, String)] = [(59, "94287082"), (1_111_111_109, "07081804"), (1_111_111_111, "14050471"),
                                          (1_234_567_890, "89005924"), (2_000_000_000, "69279037"), (20_000_000_000, "65353130")]
        for (t, expected) in vectors {
            XCTAssertEqual(TOTP.code(secret: secret, step: TOTP.step(atMillis: t * 1000), digits: 8, hmac: hmacSHA1), expected, "T=\(t)")
        }
        // Six digits are the last six of the same value.
        XCTAssertEqual(TOTP.code(secret: secret, step: 1, hmac: hmacSHA1), "287082")
    }

    func testBase32AsRFC4648() {
        for (raw, b32) in [("f", "MY"), ("fo", "MZXQ"), ("foo", "MZXW6"), ("foob", "MZXW6YQ"), ("fooba", "MZXW6YTB"), ("foobar", "MZXW6YTBOI")] {
            XCTAssertEqual(TOTP.base32(Array(raw.utf8)), b32)
            XCTAssertEqual(TOTP.base32Decode(b32), Array(raw.utf8))
            XCTAssertEqual(TOTP.base32Decode(b32.lowercased() + "===="), Array(raw.utf8))
        }
        XCTAssertNil(TOTP.base32Decode("MZ1W"))
        XCTAssertNil(TOTP.base32Decode(""))
    }

    // MARK: config

    func testDisabledUntilTheProviderConfigIsEnabled() throws {
        let idToken = try passwordUser()
        XCTAssertEqual(message(v2("mfaEnrollment:start", #"{"idToken":"\#(idToken)","totpEnrollmentInfo":{}}"#)),
                       "OPERATION_NOT_ALLOWED : TOTP based MFA not enabled.")
        enableTOTP(state: "DISABLED")
        XCTAssertEqual(message(v2("mfaEnrollment:start", #"{"idToken":"\#(idToken)","totpEnrollmentInfo":{}}"#)),
                       "OPERATION_NOT_ALLOWED : TOTP based MFA not enabled.")
        enableTOTP(adjacentIntervals: 3)
        let cfg = call("GET", "/identitytoolkit.googleapis.com/v2/projects/demo-phone/config", headers: adminHeaders).1
        XCTAssertEqual(cfg["mfa"]?["providerConfigs"], .array([.object(["state": "ENABLED", "totpProviderConfig": .object(["adjacentIntervals": .int(3)])])]))
        XCTAssertEqual(v2("mfaEnrollment:start", #"{"idToken":"\#(idToken)","totpEnrollmentInfo":{}}"#).0, 200)
        // SMS MFA off does not turn TOTP off (production: providerConfigs is TOTP's own switch).
        XCTAssertEqual(call("PATCH", "/emulator/v1/projects/demo-phone/config", #"{"mfa":{"state":"DISABLED"}}"#).0, 200)
        XCTAssertEqual(v2("mfaEnrollment:start", #"{"idToken":"\#(idToken)","totpEnrollmentInfo":{}}"#).0, 200)
        // Out of range and malformed.
        for bad in [#"[{"state":"ENABLED","totpProviderConfig":{"adjacentIntervals":11}}]"#, #"[{"state":"ENABLED"}]"#,
                    #"[{"state":"ON","totpProviderConfig":{}}]"#, #"{"state":"ENABLED"}"#,
                    #"[{"state":"ENABLED","totpProviderConfig":{"adjacentIntervals":-1}}]"#] {
            XCTAssertEqual(call("PATCH", "/emulator/v1/projects/demo-phone/config", #"{"mfa":{"providerConfigs":\#(bad)}}"#).0, 400, bad)
        }
    }

    func testTenantWithTheOfficialEmulatorsMfaConfig() throws {
        let body = #"{"displayName":"acme","mfaConfig":{"state":"ENABLED","enabledProviders":["PROVIDER_UNSPECIFIED"],"providerConfigs":[{"state":"ENABLED","totpProviderConfig":{"adjacentIntervals":2}}]}}"#
        let created = call("POST", "/identitytoolkit.googleapis.com/v2/projects/demo-phone/tenants", body, headers: adminHeaders)
        XCTAssertEqual(created.0, 200, "\(created.1)")
        let t = try XCTUnwrap(created.1["tenantId"]?.stringValue)
        XCTAssertEqual(created.1["mfaConfig"]?["providerConfigs"]?.arrayValue?.first?["totpProviderConfig"]?["adjacentIntervals"], .int(2))
        let k = StoreKey(projectId: "demo-phone", tenantId: t)
        XCTAssertTrue(app.emulator.config(k).mfa.totpEnabled)
        XCTAssertFalse(app.emulator.config(k).mfa.smsEnabled)
        XCTAssertEqual(app.emulator.config(k).mfa.totpAdjacentIntervals, 2)
    }

    // MARK: enrollment and sign-in

    func testEnrollmentAndSignInInProductionsShapes() throws {
        enableTOTP()
        let idToken = try passwordUser()
        let start = v2("mfaEnrollment:start", #"{"idToken":"\#(idToken)","totpEnrollmentInfo":{}}"#)
        XCTAssertEqual(start.0, 200, "\(start.1)")
        let info = try XCTUnwrap(start.1["totpSessionInfo"]?.objectValue)
        XCTAssertEqual(Set(info.keys), ["sharedSecretKey", "verificationCodeLength", "hashingAlgorithm", "periodSec", "sessionInfo", "finalizeEnrollmentTime"])
        let secret = try XCTUnwrap(info["sharedSecretKey"]?.stringValue)
        XCTAssertEqual(secret.count, 32)
        XCTAssertEqual(TOTP.base32Decode(secret)?.count, 20)
        XCTAssertEqual(info["verificationCodeLength"], .int(6))
        XCTAssertEqual(info["hashingAlgorithm"], "SHA1")
        XCTAssertEqual(info["periodSec"], .int(30))
        XCTAssertEqual(info["finalizeEnrollmentTime"], .string(Timestamp.protobufJSON(millis: testEpochMillis + 600_000)))
        let session = try XCTUnwrap(info["sessionInfo"]?.stringValue)
        // The helper knows the pending enrollment's code.
        let pendingCode = call("GET", "/emulator/v1/projects/demo-phone/totpCode?sessionInfo=\(session)")
        XCTAssertEqual(pendingCode.1["code"]?.stringValue, try code(secret))
        XCTAssertEqual(pendingCode.1["localId"], "u1")
        // A wrong code, a missing one, another session.
        let wrong = try code(secret) == "000000" ? "000001" : "000000"
        XCTAssertEqual(message(v2("mfaEnrollment:finalize", #"{"idToken":"\#(idToken)","totpVerificationInfo":{"sessionInfo":"\#(session)","verificationCode":"\#(wrong)"}}"#)), "INVALID_CODE")
        XCTAssertEqual(message(v2("mfaEnrollment:finalize", #"{"idToken":"\#(idToken)","totpVerificationInfo":{"sessionInfo":"\#(session)","verificationCode":"12ab56"}}"#)), "INVALID_CODE")
        XCTAssertEqual(message(v2("mfaEnrollment:finalize", #"{"idToken":"\#(idToken)","totpVerificationInfo":{"sessionInfo":"\#(session)"}}"#)), "MISSING_CODE")
        XCTAssertEqual(message(v2("mfaEnrollment:finalize", #"{"idToken":"\#(idToken)","totpVerificationInfo":{"sessionInfo":"nope","verificationCode":"123456"}}"#)), "INVALID_SESSION_INFO")
        let fin = v2("mfaEnrollment:finalize",
                     #"{"idToken":"\#(idToken)","displayName":"phone app","totpVerificationInfo":{"sessionInfo":"\#(session)","verificationCode":"\#(try code(secret))"}}"#)
        XCTAssertEqual(fin.0, 200, "\(fin.1)")
        let fb = try XCTUnwrap(claims(fin.1["idToken"])["firebase"])
        XCTAssertEqual(fb["sign_in_second_factor"], "totp")
        let enrollmentId = try XCTUnwrap(fb["second_factor_identifier"]?.stringValue)
        // Used once: the session is gone.
        XCTAssertEqual(message(v2("mfaEnrollment:finalize", #"{"idToken":"\#(idToken)","totpVerificationInfo":{"sessionInfo":"\#(session)","verificationCode":"\#(try code(secret))"}}"#)), "INVALID_SESSION_INFO")
        // Lookup (admin and the user's own): totpInfo {}, never the secret.
        let entry = try XCTUnwrap(lookup("u1")["mfaInfo"]?.arrayValue?.first)
        XCTAssertEqual(entry, .object(["displayName": "phone app", "mfaEnrollmentId": .string(enrollmentId),
                                       "enrolledAt": .string(Timestamp.protobufJSON(millis: testEpochMillis)), "totpInfo": .object(JSONObject())]))
        let own = call("POST", "/identitytoolkit.googleapis.com/v1/accounts:lookup?key=k", #"{"idToken":"\#(fin.1["idToken"]?.stringValue ?? "")"}"#)
        XCTAssertFalse(own.1.serializedString.contains(secret))
        XCTAssertFalse(lookup("u1").serializedString.contains(secret))

        // Sign-in: the hint, then the code of the next step (the enrollment's own: testTheEnrollmentCodeSignsInOnceThenIsSpent).
        let first = try app.emulator.passFirstFactor(key, localId: "u1", signInProvider: "password")
        guard case .mfaRequired(let credential, _) = first else { return XCTFail("no MFA required") }
        XCTAssertEqual(MFAJSON.pendingReply(first)?["mfaInfo"]?.arrayValue?.first?["totpInfo"], .object(JSONObject()))
        XCTAssertNil(MFAJSON.pendingReply(first)?["mfaInfo"]?.arrayValue?.first?["phoneInfo"])
        _ = clock.advance(millis: 30_000)
        let helper = call("GET", "/emulator/v1/projects/demo-phone/totpCode?localId=u1")
        XCTAssertEqual(helper.1["code"]?.stringValue, try code(secret))
        XCTAssertEqual(helper.1["mfaEnrollmentId"]?.stringValue, enrollmentId)
        XCTAssertEqual(helper.1["used"], false)
        XCTAssertNil(helper.1["sharedSecretKey"])
        XCTAssertEqual(message(signIn(credential, "other", try code(secret))), "MFA_ENROLLMENT_NOT_FOUND")
        XCTAssertEqual(message(v2("mfaSignIn:finalize", #"{"mfaPendingCredential":"\#(credential)","totpVerificationInfo":{"verificationCode":"1"}}"#)), "MISSING_MFA_ENROLLMENT_ID : No second factor identifier is provided.")
        XCTAssertEqual(message(signIn("nope", enrollmentId, try code(secret))), "INVALID_MFA_PENDING_CREDENTIAL")
        let done = signIn(credential, enrollmentId, try code(secret))
        XCTAssertEqual(done.0, 200, "\(done.1)")
        let c = try claims(done.1["idToken"])
        XCTAssertEqual(c["firebase"]?["sign_in_second_factor"], "totp")
        XCTAssertEqual(c["firebase"]?["second_factor_identifier"]?.stringValue, enrollmentId)
        XCTAssertEqual(c["firebase"]?["sign_in_provider"], "password")
        XCTAssertEqual(call("GET", "/emulator/v1/projects/demo-phone/totpCode?localId=u1").1["used"], true)
        // The refresh keeps the second factor's kind.
        let refreshed = call("POST", "/securetoken.googleapis.com/v1/token?key=k", #"{"grant_type":"refresh_token","refresh_token":"\#(done.1["refreshToken"]?.stringValue ?? "")"}"#)
        XCTAssertEqual(try claims(refreshed.1["id_token"])["firebase"]?["sign_in_second_factor"], "totp")
        // Replay: the same code for a new pending sign-in is refused; the next step's is accepted.
        let again = try pending("u1")
        XCTAssertEqual(message(signIn(again, enrollmentId, try code(secret))), "INVALID_CODE")
        _ = clock.advance(millis: 30_000)
        XCTAssertEqual(signIn(again, enrollmentId, try code(secret)).0, 200)
        // The secret is in no event; the enrollment's event names the kind.
        var rendered: [UInt8] = []
        for e in app.emulator.events.log(key, pinned: false).retained { e.render(key, format: .jsonl, into: &rendered) }
        let text = String(decoding: rendered, as: UTF8.self)
        XCTAssertFalse(text.contains(secret))
        XCTAssertTrue(text.contains(#""mfaEnrollmentId":"\#(enrollmentId)","factorId":"totp""#), text)
        XCTAssertTrue(text.contains(#""secondFactor":"totp""#))
    }

    /// The enrollment's code signs in once right after (what a suite does within one 30-s step), then it is spent.
    func testTheEnrollmentCodeSignsInOnceThenIsSpent() throws {
        enableTOTP(adjacentIntervals: 0)
        let (secret, id, _) = try enroll(try passwordUser())
        let first = signIn(try pending("u1"), id, try code(secret))
        XCTAssertEqual(first.0, 200, "\(first.1)")
        XCTAssertEqual(message(signIn(try pending("u1"), id, try code(secret))), "INVALID_CODE", "a sign-in's code is not replayed")
        // An older step than the enrollment's is never accepted, whatever the window.
        enableTOTP(adjacentIntervals: 5)
        XCTAssertEqual(message(signIn(try pending("u1"), id, try code(secret, at: clock.nowMillis() - 30_000))), "INVALID_CODE")
    }

    func testAdjacentIntervalsOnTheEmulatorClock() throws {
        enableTOTP(adjacentIntervals: 0)
        let (secret, id, _) = try enroll(try passwordUser())
        _ = clock.advance(millis: 300_000)  // step S
        let now = clock.nowMillis()
        // adjacentIntervals 0: only the current step.
        XCTAssertEqual(message(signIn(try pending("u1"), id, try code(secret, at: now - 30_000))), "INVALID_CODE")
        XCTAssertEqual(message(signIn(try pending("u1"), id, try code(secret, at: now + 30_000))), "INVALID_CODE")
        enableTOTP(adjacentIntervals: 1)
        XCTAssertEqual(message(signIn(try pending("u1"), id, try code(secret, at: now - 60_000))), "INVALID_CODE")
        XCTAssertEqual(signIn(try pending("u1"), id, try code(secret, at: now - 30_000)).0, 200)
        // Step S-1 is spent now, so S-1's code again is refused; S+1 is within the window.
        XCTAssertEqual(message(signIn(try pending("u1"), id, try code(secret, at: now - 30_000))), "INVALID_CODE")
        XCTAssertEqual(signIn(try pending("u1"), id, try code(secret, at: now + 30_000)).0, 200)
        // ...and once S+1 is spent, S (before it) is refused too.
        XCTAssertEqual(message(signIn(try pending("u1"), id, try code(secret, at: now))), "INVALID_CODE")
        // Production's default when unset: 5 steps either side.
        _ = clock.advance(millis: 3_000_000)
        let t = clock.nowMillis()
        XCTAssertEqual(call("PATCH", "/emulator/v1/projects/demo-phone/config", #"{"mfa":{"providerConfigs":[{"state":"ENABLED","totpProviderConfig":{}}]}}"#).0, 200)
        XCTAssertEqual(app.emulator.config(key).mfa.totpAdjacentIntervals, 5)
        XCTAssertEqual(message(signIn(try pending("u1"), id, try code(secret, at: t - 6 * 30_000))), "INVALID_CODE")
        XCTAssertEqual(signIn(try pending("u1"), id, try code(secret, at: t - 5 * 30_000)).0, 200)
    }

    func testWrongCodesAreBoundedPerPendingSignIn() throws {
        enableTOTP()
        let (secret, id, _) = try enroll(try passwordUser())
        _ = clock.advance(millis: 30_000)
        let credential = try pending("u1")
        let good = try code(secret)
        let wrong = good == "111111" ? "222222" : "111111"
        for _ in 0..<5 { XCTAssertEqual(message(signIn(credential, id, wrong)), "INVALID_CODE") }
        XCTAssertEqual(message(signIn(credential, id, good)), "TOO_MANY_ATTEMPTS_TRY_LATER", "maxCodeAttempts wrong codes spend the pending sign-in")
        XCTAssertEqual(message(signIn(credential, id, good)), "INVALID_MFA_PENDING_CREDENTIAL")
        XCTAssertEqual(signIn(try pending("u1"), id, good).0, 200)
        // Enrollment sessions count attempts as SMS sessions do.
        let start = v2("mfaEnrollment:start", #"{"idToken":"\#(try passwordUser("u2"))","totpEnrollmentInfo":{}}"#)
        let session = try XCTUnwrap(start.1["totpSessionInfo"]?["sessionInfo"]?.stringValue)
        let token2 = try passwordUser2()
        for _ in 0..<5 {
            XCTAssertEqual(message(v2("mfaEnrollment:finalize", #"{"idToken":"\#(token2)","totpVerificationInfo":{"sessionInfo":"\#(session)","verificationCode":"000000"}}"#)), "INVALID_CODE")
        }
        XCTAssertEqual(message(v2("mfaEnrollment:finalize", #"{"idToken":"\#(token2)","totpVerificationInfo":{"sessionInfo":"\#(session)","verificationCode":"000000"}}"#)), "TOO_MANY_ATTEMPTS_TRY_LATER")
        // Another user's session is not theirs.
        XCTAssertEqual(message(v2("mfaEnrollment:finalize", #"{"idToken":"\#(try token("u1"))","totpVerificationInfo":{"sessionInfo":"\#(session)","verificationCode":"000000"}}"#)), "INVALID_SESSION_INFO")
    }

    func token(_ id: String) throws -> String {
        let user = try XCTUnwrap(app.emulator.existingStore(key)?.read { $0.users[id] })
        return try app.idToken(for: user, key: key, signInProvider: "password", authTime: clock.nowSeconds())
    }

    func passwordUser2() throws -> String { try token("u2") }

    func testPhoneAndTOTPSideBySide() throws {
        enableTOTP()
        let idToken = try passwordUser()
        // An SMS factor first (the fictional number of the test app), then TOTP.
        let start = v2("mfaEnrollment:start", #"{"idToken":"\#(idToken)","phoneEnrollmentInfo":{"phoneNumber":"+16505554567"}}"#)
        let session = try XCTUnwrap(start.1["phoneSessionInfo"]?["sessionInfo"]?.stringValue)
        XCTAssertEqual(v2("mfaEnrollment:finalize", #"{"idToken":"\#(idToken)","phoneVerificationInfo":{"sessionInfo":"\#(session)","code":"123456"}}"#).0, 200)
        let (secret, totpId, _) = try enroll(try token("u1"))
        let info = try XCTUnwrap(lookup("u1")["mfaInfo"]?.arrayValue)
        XCTAssertEqual(info.count, 2)
        XCTAssertEqual(info[0]["phoneInfo"], "+16505554567")
        XCTAssertEqual(info[1]["totpInfo"], .object(JSONObject()))
        let phoneId = try XCTUnwrap(info[0]["mfaEnrollmentId"]?.stringValue)
        // SMS: start refuses the TOTP factor; the phone one signs in with sign_in_second_factor phone.
        let credential = try pending("u1")
        XCTAssertEqual(v2("mfaSignIn:start", #"{"mfaPendingCredential":"\#(credential)","mfaEnrollmentId":"\#(totpId)"}"#).0, 400)
        let smsStart = v2("mfaSignIn:start", #"{"mfaPendingCredential":"\#(credential)","mfaEnrollmentId":"\#(phoneId)"}"#)
        let smsSession = try XCTUnwrap(smsStart.1["phoneResponseInfo"]?["sessionInfo"]?.stringValue)
        let sms = v2("mfaSignIn:finalize", #"{"mfaPendingCredential":"\#(credential)","phoneVerificationInfo":{"sessionInfo":"\#(smsSession)","code":"123456"}}"#)
        XCTAssertEqual(try claims(sms.1["idToken"])["firebase"]?["sign_in_second_factor"], "phone")
        // A TOTP code for the phone factor's id is not found.
        _ = clock.advance(millis: 30_000)
        XCTAssertEqual(message(signIn(try pending("u1"), phoneId, try code(secret))), "MFA_ENROLLMENT_NOT_FOUND")
        XCTAssertEqual(try claims(signIn(try pending("u1"), totpId, try code(secret)).1["idToken"])["firebase"]?["sign_in_second_factor"], "totp")
        // With TOTP off, only the phone factor is owed; with SMS off too, none.
        enableTOTP(state: "DISABLED")
        XCTAssertEqual(message(signIn(try pending("u1"), totpId, try code(secret))), "OPERATION_NOT_ALLOWED : TOTP based MFA not enabled.")
        XCTAssertEqual(call("PATCH", "/emulator/v1/projects/demo-phone/config", #"{"mfa":{"state":"DISABLED"}}"#).0, 200)
        XCTAssertEqual(try app.emulator.passFirstFactor(key, localId: "u1", signInProvider: "password"), .issueTokens)
        // Withdraw removes the TOTP factor.
        enableTOTP()
        XCTAssertEqual(v2("mfaEnrollment:withdraw", #"{"idToken":"\#(try token("u1"))","mfaEnrollmentId":"\#(totpId)"}"#).0, 200)
        XCTAssertEqual(lookup("u1")["mfaInfo"]?.arrayValue?.count, 1)
    }

    // MARK: admin, import, export, journal

    func testAdminKeepsAFactorByIdAndImportExportCarryTheSecret() throws {
        enableTOTP()
        let (secret, totpId, _) = try enroll(try passwordUser())
        // The console's removal of another factor: the kept TOTP entry by id, without its secret.
        let keep = admin("accounts:update", #"{"localId":"u1","mfa":{"enrollments":[{"mfaEnrollmentId":"\#(totpId)","totpInfo":{},"displayName":"renamed"},{"phoneInfo":"+16505550100","mfaEnrollmentId":"p1"}]}}"#)
        XCTAssertEqual(keep.0, 200, "\(keep.1)")
        let user = try XCTUnwrap(app.emulator.existingStore(key)?.read { $0.users["u1"] })
        XCTAssertEqual(user.mfaInfo.map(\.mfaEnrollmentId), [totpId, "p1"])
        XCTAssertEqual(user.mfaInfo[0].totp?.secret, TOTP.base32Decode(secret))
        XCTAssertEqual(user.mfaInfo[0].displayName, "renamed")
        XCTAssertEqual(message(admin("accounts:update", #"{"localId":"u1","mfa":{"enrollments":[{"mfaEnrollmentId":"unknown","totpInfo":{}}]}}"#))?.hasPrefix("MFA_ENROLLMENT_NOT_FOUND"), true)
        XCTAssertEqual(message(admin("accounts:update", #"{"localId":"u1","mfa":{"enrollments":[{"mfaEnrollmentId":"x","totpInfo":{"sharedSecretKey":"!!"}}]}}"#)), "totpInfo.sharedSecretKey must be base32 of 10 to 64 bytes.")
        // The export carries the secret (only there).
        let exported = ExportImport.exportRecord(app, user)
        XCTAssertEqual(exported["mfaInfo"]?.arrayValue?.first?["totpInfo"]?["sharedSecretKey"]?.stringValue, secret)
        // Imported back (batchCreate, the firebase-tools import path), it signs in.
        var record = try XCTUnwrap(exported.objectValue)
        record["localId"] = "u9"
        record["email"] = "u9@example.com"
        let imported = admin("accounts:batchCreate", JSON.object(["users": .array([.object(record)])]).serializedString)
        XCTAssertEqual(imported.0, 200, "\(imported.1)")
        XCTAssertNil(imported.1["error"], "\(imported.1)")
        _ = clock.advance(millis: 30_000)
        XCTAssertEqual(signIn(try pending("u9"), totpId, try code(secret)).0, 200)
        // An import without the secret is refused for that user.
        let noSecret = admin("accounts:batchCreate", #"{"users":[{"localId":"u8","email":"u8@example.com","emailVerified":true,"mfaInfo":[{"mfaEnrollmentId":"t8","totpInfo":{}}]}]}"#)
        XCTAssertEqual(noSecret.1["error"]?.arrayValue?.first?["message"]?.stringValue?.contains("sharedSecretKey"), true, "\(noSecret.1)")
        // The journal form keeps the secret and the spent step.
        let journaled = try XCTUnwrap(app.emulator.existingStore(key)?.read { $0.users["u9"] })
        let back = try XCTUnwrap(app.emulator.userFields.record(fromJournal: app.emulator.userFields.journalObject(journaled)))
        XCTAssertEqual(back.mfaInfo, journaled.mfaInfo)
        XCTAssertNotNil(back.mfaInfo.first?.totp?.lastUsedStep)
    }
}
