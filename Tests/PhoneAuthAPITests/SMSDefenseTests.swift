import EmulatorSupport
@testable import PhoneAuthAPI
@testable import PhoneAuthCore
import PhoneAuthTestSupport
import XCTest

/// reCAPTCHA SMS defense (`recaptchaConfig`) and the carriers' failures (`phoneAuth.delivery`), through the responder.
final class SMSDefenseTests: EmulatorAPITestCase {
    let real = "+15551230001"
    let fictional = "+16505554567"

    func patch(_ body: String) {
        XCTAssertEqual(call("PATCH", base + "/config", body).0, 200, body)
    }

    func enterprise(score: Double = 0.9, action: String? = "sendVerificationCode", tollFraud: Double? = nil) -> String {
        var body = #"{"type":"RECAPTCHA_ENTERPRISE","score":\#(score)"#
        if let action { body += #","action":"\#(action)""# }
        if let tollFraud { body += #","tollFraudScore":\#(tollFraud)"# }
        let r = call("POST", base + "/appCredentials", body + "}")
        XCTAssertEqual(r.0, 200)
        return r.1["token"]?.stringValue ?? ""
    }

    func send(_ phone: String, token: String?, clientType: String? = "CLIENT_TYPE_WEB", version: String? = "RECAPTCHA_ENTERPRISE",
              headers: [(String, String)] = []) -> (Int, JSON) {
        var body = #"{"phoneNumber":"\#(phone)""#
        if let token { body += #","captchaResponse":"\#(token)""# }
        if let clientType { body += #","clientType":"\#(clientType)""# }
        if let version { body += #","recaptchaVersion":"\#(version)""# }
        return call("POST", "/identitytoolkit.googleapis.com/v1/accounts:sendVerificationCode?key=k", body + "}", headers: headers)
    }

    func events(_ type: String) throws -> [EventPayload] {
        let look = try app.emulator.events.subscribe(StoreKey(projectId: "demo-phone"), since: 0, filter: EventFilter(), follow: false)
        defer { look.cancel() }
        return look.log.retained.map(\.payload).filter { $0.type == type }
    }

    /// What `verificationCodes:wait` answers at once.
    func waitNow(_ phone: String) -> VerificationSession? {
        let got = Locked<VerificationSession?>(nil)
        _ = try? app.emulator.waitForCode(StoreKey(projectId: "demo-phone"), phone: phone, timeoutSeconds: 0) { s in got.withLock { $0 = s } }
        return got.withLock { $0 }
    }

    func q(_ phone: String) -> String { "%2B" + phone.dropFirst() }

    func inbox(_ phone: String) -> [JSON] {
        let r = call("GET", base + "/verificationCodes?phoneNumber=\(q(phone))")
        XCTAssertEqual(r.0, 200)
        return r.1["verificationCodes"]?.arrayValue ?? []
    }

    // MARK: config and GET /v2/recaptchaConfig

    func testRecaptchaConfigServedAsTheSDKsReadIt() {
        var r = call("GET", "/identitytoolkit.googleapis.com/v2/recaptchaConfig?key=k&clientType=CLIENT_TYPE_WEB&version=RECAPTCHA_ENTERPRISE")
        XCTAssertEqual(r.0, 200)
        XCTAssertEqual(r.1["recaptchaEnforcementState"]?.arrayValue?.last?["enforcementState"], "OFF")
        patch(#"{"recaptchaConfig":{"phoneEnforcementState":"AUDIT","useSmsBotScore":true,"useSmsTollFraudProtection":true}}"#)
        r = call("GET", "/identitytoolkit.googleapis.com/v2/recaptchaConfig?key=k&clientType=CLIENT_TYPE_WEB&version=RECAPTCHA_ENTERPRISE")
        XCTAssertEqual(r.1["recaptchaEnforcementState"]?.arrayValue?.last?["provider"], "PHONE_PROVIDER")
        XCTAssertEqual(r.1["recaptchaEnforcementState"]?.arrayValue?.last?["enforcementState"], "AUDIT")
        XCTAssertEqual(r.1["useSmsBotScore"], true)
        XCTAssertEqual(r.1["useSmsTollFraudProtection"], true)
        XCTAssertNotNil(r.1["recaptchaKey"]?.stringValue)
        XCTAssertEqual(message(call("GET", "/identitytoolkit.googleapis.com/v2/recaptchaConfig?key=k&version=RECAPTCHA_V2")), "INVALID_RECAPTCHA_VERSION")
        XCTAssertEqual(message(call("GET", "/identitytoolkit.googleapis.com/v2/recaptchaConfig?key=k&clientType=CLIENT_TYPE_TV")), "INVALID_REQ_TYPE")
    }

    func testConfigIsValidatedAndStoredInTheAdminConfigAndTenants() {
        XCTAssertEqual(call("PATCH", base + "/config", #"{"recaptchaConfig":{"phoneEnforcementState":"MAYBE"}}"#).0, 400)
        XCTAssertEqual(call("PATCH", base + "/config", #"{"recaptchaConfig":{"useSmsBotScore":true}}"#).0, 400, "needs AUDIT or ENFORCE")
        XCTAssertEqual(call("PATCH", base + "/config", #"{"recaptchaConfig":{"phoneEnforcementState":"ENFORCE","managedRules":[{"endScore":0.35,"action":"BLOCK"}]}}"#).0, 400,
                       "scores at 11 discrete values")
        XCTAssertEqual(call("PATCH", base + "/config", #"{"recaptchaConfig":{"phoneEnforcementState":"ENFORCE","tollFraudScores":{"1555":0.5}}}"#).0, 400)
        XCTAssertEqual(call("PATCH", base + "/config", #"{"phoneAuth":{"delivery":{"+1555":{"delaySeconds":0}}}}"#).0, 400)
        // Production's admin resource: PATCH v2 config, then the tenant resource.
        let admin = [("Authorization", "Bearer owner")]
        var r = call("PATCH", "/identitytoolkit.googleapis.com/v2/projects/demo-phone/config?updateMask=recaptchaConfig",
                     #"{"recaptchaConfig":{"phoneEnforcementState":"ENFORCE","useSmsTollFraudProtection":true,"tollFraudManagedRules":[{"startScore":0.8,"action":"BLOCK"}]}}"#,
                     headers: admin)
        XCTAssertEqual(r.0, 200, "\(r.1)")
        XCTAssertEqual(r.1["recaptchaConfig"]?["phoneEnforcementState"], "ENFORCE")
        XCTAssertEqual(r.1["recaptchaConfig"]?["tollFraudManagedRules"]?.arrayValue?.first?["startScore"], .number(0.8))
        XCTAssertEqual(app.emulator.config(StoreKey(projectId: "demo-phone")).recaptcha.phoneEnforcementState, .enforce)
        r = call("POST", "/identitytoolkit.googleapis.com/v2/projects/demo-phone/tenants",
                 #"{"displayName":"shop","recaptchaConfig":{"phoneEnforcementState":"AUDIT"}}"#, headers: admin)
        XCTAssertEqual(r.0, 200, "\(r.1)")
        XCTAssertEqual(r.1["recaptchaConfig"]?["phoneEnforcementState"], "AUDIT")
        let tenant = r.1["tenantId"]?.stringValue ?? ""
        r = call("GET", "/identitytoolkit.googleapis.com/v2/recaptchaConfig?key=k&tenantId=\(tenant)")
        XCTAssertEqual(r.1["recaptchaEnforcementState"]?.arrayValue?.last?["enforcementState"], "AUDIT")
    }

    // MARK: ENFORCE

    func testEnforceRefusesMissingAndInvalidTokensWithProductionsCodes() throws {
        patch(#"{"recaptchaConfig":{"phoneEnforcementState":"ENFORCE"}}"#)
        XCTAssertEqual(message(send(real, token: nil)), "MISSING_RECAPTCHA_TOKEN")
        XCTAssertEqual(message(send(real, token: "NO_RECAPTCHA")), "MISSING_RECAPTCHA_TOKEN")
        XCTAssertEqual(message(send(real, token: "made-up")), "INVALID_RECAPTCHA_TOKEN")
        XCTAssertEqual(message(send(real, token: enterprise(), clientType: nil)), "MISSING_CLIENT_TYPE")
        XCTAssertEqual(message(send(real, token: enterprise(), clientType: "CLIENT_TYPE_TV")), "INVALID_REQ_TYPE")
        XCTAssertEqual(message(send(real, token: enterprise(), version: nil)), "MISSING_RECAPTCHA_VERSION")
        XCTAssertEqual(message(send(real, token: enterprise(), version: "RECAPTCHA_V2")), "INVALID_RECAPTCHA_VERSION")
        XCTAssertEqual(message(send(real, token: enterprise(action: "mfaSmsSignIn"))), "INVALID_RECAPTCHA_ACTION")
        let token = enterprise()
        XCTAssertEqual(send(real, token: token).0, 200)
        XCTAssertEqual(message(send(real, token: token)), "INVALID_RECAPTCHA_TOKEN", "single use")
        XCTAssertEqual(send(fictional, token: nil).0, 200, "fictional numbers are exempt")
        let verdicts = try events("recaptcha.assessed")
        XCTAssertEqual(verdicts.count, 10)
        guard case .recaptchaAssessed(_, let action, let state, let verdict, let reason, let bot, _) = verdicts[8] else { return XCTFail() }
        XCTAssertEqual([action, state, verdict, reason], ["sendVerificationCode", "ENFORCE", "ALLOWED", "PASSED"])
        XCTAssertEqual(bot, 0.9)
        guard case .recaptchaAssessed(_, _, _, let v0, let r0, _, _) = verdicts[0] else { return XCTFail() }
        XCTAssertEqual([v0, r0], ["BLOCKED", "MISSING_RECAPTCHA_TOKEN"])
    }

    func testFictionalNumbersAreAssessedWhenATestOptsThemIn() {
        patch(#"{"recaptchaConfig":{"phoneEnforcementState":"ENFORCE","includeFictionalNumbers":true}}"#)
        XCTAssertEqual(message(send(fictional, token: nil)), "MISSING_RECAPTCHA_TOKEN")
        XCTAssertEqual(send(fictional, token: enterprise()).0, 200)
    }

    func testBotScoreRulesBlockAtOrBelowTheirEndScore() {
        patch(#"{"recaptchaConfig":{"phoneEnforcementState":"ENFORCE","useSmsBotScore":true,"managedRules":[{"endScore":0.3,"action":"BLOCK"}]}}"#)
        let r = send(real, token: enterprise(score: 0.3))
        XCTAssertEqual(r.0, 400)
        XCTAssertEqual(message(r), "INVALID_APP_CREDENTIAL : reCAPTCHA SMS defense blocked the send (BOT_SCORE).")
        XCTAssertEqual(send(real, token: enterprise(score: 0.4)).0, 200)
        // Without useSmsBotScore the rules do not apply.
        patch(#"{"recaptchaConfig":{"useSmsBotScore":false}}"#)
        XCTAssertEqual(send(real, token: enterprise(score: 0.1)).0, 200)
    }

    func testTollFraudScoresComeFromTheConfigByNumberOrPrefixElseTheToken() {
        patch(#"{"recaptchaConfig":{"phoneEnforcementState":"ENFORCE","useSmsTollFraudProtection":true,"tollFraudManagedRules":[{"startScore":0.8,"action":"BLOCK"}],"tollFraudScores":{"+1555":0.9,"+15551230002":0.1}}}"#)
        XCTAssertEqual(message(send(real, token: enterprise())), "INVALID_APP_CREDENTIAL : reCAPTCHA SMS defense blocked the send (TOLL_FRAUD_SCORE).")
        XCTAssertEqual(send("+15551230002", token: enterprise()).0, 200, "the longest prefix wins")
        XCTAssertEqual(message(send("+4915112345678", token: enterprise(tollFraud: 0.8))), "INVALID_APP_CREDENTIAL : reCAPTCHA SMS defense blocked the send (TOLL_FRAUD_SCORE).")
        XCTAssertEqual(send("+4915112345678", token: enterprise(tollFraud: 0.7)).0, 200)
    }

    // MARK: AUDIT

    func testAuditNeverBlocksAndRecordsWhatEnforceWouldHaveDone() throws {
        patch(#"{"recaptchaConfig":{"phoneEnforcementState":"AUDIT","useSmsBotScore":true,"managedRules":[{"endScore":0.5,"action":"BLOCK"}]}}"#)
        XCTAssertEqual(send(real, token: nil).0, 200)
        XCTAssertEqual(send(real, token: "made-up").0, 200)
        XCTAssertEqual(send(real, token: enterprise(score: 0.2)).0, 200)
        XCTAssertEqual(send(real, token: enterprise(score: 0.9)).0, 200)
        let verdicts = try events("recaptcha.assessed").compactMap { p -> [String]? in
            guard case .recaptchaAssessed(_, _, let state, let verdict, let reason, _, _) = p else { return nil }
            return [state, verdict, reason]
        }
        XCTAssertEqual(verdicts, [["AUDIT", "WOULD_BLOCK", "MISSING_RECAPTCHA_TOKEN"], ["AUDIT", "WOULD_BLOCK", "INVALID_RECAPTCHA_TOKEN"],
                                  ["AUDIT", "WOULD_BLOCK", "BOT_SCORE"], ["AUDIT", "ALLOWED", "PASSED"]])
    }

    func testAuditFallsBackToAppVerificationAndAPassingTokenNeedsNoOther() {
        patch(#"{"phoneAuth":{"appVerification":"ENFORCE"},"recaptchaConfig":{"phoneEnforcementState":"AUDIT"}}"#)
        XCTAssertEqual(message(send(real, token: nil)), "MISSING_APP_CREDENTIAL", "a failed assessment falls back to v2 verification")
        XCTAssertEqual(send(real, token: enterprise()).0, 200, "an Enterprise token that passed is the app credential")
        let v2 = call("POST", base + "/appCredentials", #"{"type":"RECAPTCHA"}"#).1["token"]?.stringValue ?? ""
        let r = call("POST", "/identitytoolkit.googleapis.com/v1/accounts:sendVerificationCode?key=k",
                     #"{"phoneNumber":"\#(real)","captchaResponse":"NO_RECAPTCHA","clientType":"CLIENT_TYPE_WEB","recaptchaVersion":"RECAPTCHA_ENTERPRISE","recaptchaToken":"\#(v2)"}"#)
        XCTAssertEqual(r.0, 200, "the SDK's v2 fallback request")
    }

    // MARK: MFA starts

    func testMFAStartsAreAssessedWithTheirActions() throws {
        let (idToken, _) = try emailUser()
        patch(#"{"recaptchaConfig":{"phoneEnforcementState":"ENFORCE"}}"#)
        var r = call("POST", "/identitytoolkit.googleapis.com/v2/accounts/mfaEnrollment:start?key=k",
                     #"{"idToken":"\#(idToken)","phoneEnrollmentInfo":{"phoneNumber":"\#(real)","clientType":"CLIENT_TYPE_WEB"}}"#)
        XCTAssertEqual(message(r), "MISSING_RECAPTCHA_TOKEN")
        r = call("POST", "/identitytoolkit.googleapis.com/v2/accounts/mfaEnrollment:start?key=k",
                 #"{"idToken":"\#(idToken)","phoneEnrollmentInfo":{"phoneNumber":"\#(real)","captchaResponse":"\#(enterprise(action: "sendVerificationCode"))","clientType":"CLIENT_TYPE_WEB","recaptchaVersion":"RECAPTCHA_ENTERPRISE"}}"#)
        XCTAssertEqual(message(r), "INVALID_RECAPTCHA_ACTION")
        r = call("POST", "/identitytoolkit.googleapis.com/v2/accounts/mfaEnrollment:start?key=k",
                 #"{"idToken":"\#(idToken)","phoneEnrollmentInfo":{"phoneNumber":"\#(real)","captchaResponse":"\#(enterprise(action: "mfaSmsEnrollment"))","clientType":"CLIENT_TYPE_WEB","recaptchaVersion":"RECAPTCHA_ENTERPRISE"}}"#)
        XCTAssertEqual(r.0, 200, "\(r.1)")
    }

    /// A user with a verified email, signed in by password: `(idToken, localId)`.
    func emailUser() throws -> (String, String) {
        let r = itk("signUp", #"{"email":"mfa@example.com","password":"secret123"}"#)
        let uid = try XCTUnwrap(r.1["localId"]?.stringValue)
        XCTAssertEqual(call("POST", "/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts:update", #"{"localId":"\#(uid)","emailVerified":true}"#,
                            headers: [("Authorization", "Bearer owner")]).0, 200)
        let s = itk("signInWithPassword", #"{"email":"mfa@example.com","password":"secret123","returnSecureToken":true}"#)
        return (try XCTUnwrap(s.1["idToken"]?.stringValue), uid)
    }

    // MARK: delivery

    func testALateCodeArrivesOnlyWhenTheClockReachesIt() throws {
        patch(#"{"phoneAuth":{"delivery":{"+1555":{"delaySeconds":30}}}}"#)
        let r = send(real, token: nil)
        XCTAssertEqual(r.0, 200)
        XCTAssertTrue(inbox(real).isEmpty)
        XCTAssertNil(waitNow(real), ":wait does not see it")
        XCTAssertTrue(try events("code.sent").isEmpty)
        XCTAssertEqual(try events("sms.delivery").count, 1)
        XCTAssertEqual(call("POST", "/emulator/v1/clock:advance", #"{"seconds":29}"#).0, 200)
        XCTAssertTrue(inbox(real).isEmpty)
        XCTAssertEqual(call("POST", "/emulator/v1/clock:advance", #"{"seconds":1}"#).0, 200)
        XCTAssertEqual(inbox(real).count, 1)
        XCTAssertEqual(inbox(real).first?["sessionInfo"], r.1["sessionInfo"])
        XCTAssertEqual(waitNow(real)?.sessionInfo, r.1["sessionInfo"]?.stringValue)
        XCTAssertEqual(try events("code.sent").count, 1)
    }

    func testAWaitingLongPollIsAnsweredWhenTheLateCodeArrives() {
        patch(#"{"phoneAuth":{"delivery":{"+15551230001":{"delaySeconds":60}}}}"#)
        XCTAssertEqual(send(real, token: nil).0, 200)
        let answered = Locked<JSON?>(nil)
        let waiter = try? app.emulator.waitForCode(StoreKey(projectId: "demo-phone"), phone: real, timeoutSeconds: 60) { s in
            answered.withLock { $0 = s.map { .string($0.code) } ?? .null }
        }
        XCTAssertNotNil(waiter, "still waiting: the code has not arrived")
        XCTAssertNil(answered.withLock { $0 })
        XCTAssertEqual(call("POST", "/emulator/v1/clock:advance", #"{"seconds":60}"#).0, 200)
        XCTAssertEqual(answered.withLock { $0 }?.stringValue?.count, 6)
    }

    func testALostCodeNeverArrivesThoughTheSendAnswered200() throws {
        patch(#"{"phoneAuth":{"delivery":{"+1555":{"outcome":"LOST"}}}}"#)
        XCTAssertEqual(send(real, token: nil).0, 200)
        XCTAssertEqual(call("POST", "/emulator/v1/clock:advance", #"{"seconds":86400}"#).0, 200)
        XCTAssertTrue(inbox(real).isEmpty)
        XCTAssertTrue(try events("code.sent").isEmpty)
        guard case .smsDelivery(_, let outcome, _)? = try events("sms.delivery").first else { return XCTFail() }
        XCTAssertEqual(outcome, "LOST")
    }

    /// Late SMS hold one timer: a later due time arms none, an earlier one replaces the armed timer (the replaced one
    /// stops when it fires), and a fired timer re-arms for the soonest left.
    func testLateDeliveriesArmOneTimerAtATime() {
        let late = LateDeliveries()
        let s = VerificationSession(id: SessionID(bytes: Array(0..<16)), phoneNumber: real, code: "1", createdAt: 0, expiresAt: nil, attemptsLeft: nil,
                                    fictional: false, kind: .signIn, appSignatureHash: nil, sequence: 0)
        let key = StoreKey(projectId: "demo-phone")
        let first = late.add(100, key, s)
        XCTAssertNotNil(first)
        XCTAssertNil(late.add(200, key, s))
        let second = late.add(50, key, s)
        XCTAssertNotNil(second)
        XCTAssertNil(late.rearm(first!), "the replaced timer stops")
        XCTAssertEqual(late.takeDue(60).count, 1)
        XCTAssertEqual(late.rearm(second!)?.at, 100)
        XCTAssertEqual(late.takeDue(1000).count, 2)
        XCTAssertTrue(late.isEmpty)
    }

    func testACarrierRejectionIsProductionsError39() {
        patch(#"{"phoneAuth":{"delivery":{"+1555":{"outcome":"REJECTED"}}}}"#)
        let r = send(real, token: nil)
        XCTAssertEqual(r.0, 503)
        XCTAssertEqual(r.1["error"]?["message"], "Error code: 39")
        XCTAssertEqual(r.1["error"]?["errors"]?.arrayValue?.first?["reason"], "backendError")
        XCTAssertEqual(r.1["error"]?["status"], "UNAVAILABLE")
        XCTAssertEqual(send(fictional, token: nil).0, 200, "fictional numbers are never sent")
        XCTAssertEqual(send("+4915112345678", token: nil).0, 200, "other numbers arrive")
    }

    func testTheSMSTextFollowsTheRequestsLanguageWithTheAppHashKept() {
        XCTAssertEqual(send(real, token: nil, headers: [("X-Firebase-Locale", "fr-FR")]).0, 200)
        let m = inbox(real).last?["message"]?.stringValue ?? ""
        XCTAssertTrue(m.hasSuffix(" est votre code de validation."), m)
        XCTAssertEqual(inbox(real).last?["language"], "fr")
        let r = call("POST", "/identitytoolkit.googleapis.com/v1/accounts:sendVerificationCode?key=k",
                     #"{"phoneNumber":"+4915112345678","autoRetrievalInfo":{"appSignatureHash":"FA+9qCX9VSu"}}"#, headers: [("X-Firebase-Locale", "de")])
        XCTAssertEqual(r.0, 200)
        let de = inbox("+4915112345678").last?["message"]?.stringValue ?? ""
        XCTAssertTrue(de.hasPrefix("<#> ") && de.hasSuffix(" ist Ihr Bestätigungscode.\nFA+9qCX9VSu"), de)
        XCTAssertEqual(send("+4915112345679", token: nil, headers: [("X-Firebase-Locale", "xx-YY")]).0, 200)
        XCTAssertTrue(inbox("+4915112345679").last?["message"]?.stringValue?.hasSuffix(" is your verification code.") ?? false, "unknown: English")
        XCTAssertEqual(SMSText.text(code: "1", language: SMSText.language(forLocale: "pt_BR")), "1 é seu código de verificação.")
    }
}
