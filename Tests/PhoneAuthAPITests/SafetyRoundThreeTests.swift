import EmulatorSupport
import HTTPServer
import JWT
@testable import PhoneAuthAPI
@testable import PhoneAuthCore
import PhoneAuthTestSupport
import XCTest

/// The findings of the third outside attack (issue 23), each as it was reported, through the responder: a second
/// factor passed with a public preset code, masked sends outside every send policy, unbounded guessing, a read that
/// created projects, unbounded pending sessions, identity claims a custom claim could replace.
final class SafetyRoundThreeTests: XCTestCase, AppCalling {
    var clock: EmulatorClock!
    var app: PhoneAuthApp!
    let key = StoreKey(projectId: "demo-phone")
    /// The shipped default fictional number (code 123456) and a real number with the same masked form.
    let fictional = "+16505554567"
    let real = "+15551234567"
    let mask = "+*******4567"

    override func setUp() {
        clock = EmulatorClock(fixedAtMillis: testEpochMillis)
        app = makeTestApp(clock: clock, seed: 23)
    }

    func admin(_ op: String, _ body: String) -> (Int, JSON) {
        call("POST", "/identitytoolkit.googleapis.com/v1/projects/demo-phone/" + op, body, headers: [("Authorization", "Bearer owner")])
    }

    func v2(_ op: String, _ body: String, ip: String = "127.0.0.1", origin: String? = nil) -> (Int, JSON) {
        post("/identitytoolkit.googleapis.com/v2/accounts/\(op)", body, ip: ip, origin: origin)
    }

    func client(_ op: String, _ body: String, ip: String = "127.0.0.1", origin: String? = nil) -> (Int, JSON) {
        post("/identitytoolkit.googleapis.com/v1/accounts:\(op)", body, ip: ip, origin: origin)
    }

    /// A client call from `ip` (and a web page on `origin`).
    func post(_ path: String, _ body: String, ip: String, origin: String?) -> (Int, JSON) {
        var h = HTTPHeaders()
        if let origin { h.add("Origin", origin) }
        let req = HTTPRequest(method: "POST", target: path + "?key=fake-api-key", headers: h, body: Array(body.utf8), remoteAddress: ip)
        guard let resp = app.respond(to: req, context: .detached) else { return (0, .null) }
        return (resp.status, resp.body.isEmpty ? .null : ((try? JSONParser.parse(resp.body)) ?? .null))
    }

    func patch(_ json: String) {
        XCTAssertEqual(call("PATCH", "/emulator/v1/projects/demo-phone/config", json).0, 200, json)
    }

    /// A verified password user `id` with one second factor on `phone` (admin-created); its password is `secret12`.
    func mfaUser(_ id: String, _ phone: String) {
        let r = admin("accounts", #"{"localId":"\#(id)","email":"\#(id)@example.com","emailVerified":true,"password":"secret12","mfaInfo":[{"phoneInfo":"\#(phone)","mfaEnrollmentId":"enr-\#(id)"}]}"#)
        XCTAssertEqual(r.0, 200, "\(r.1)")
    }

    /// A password sign-in of `id`: the pending credential and the first hint.
    func passwordSignIn(_ id: String, ip: String = "127.0.0.1") throws -> (credential: String, hint: JSON) {
        let r = client("signInWithPassword", #"{"email":"\#(id)@example.com","password":"secret12","returnSecureToken":true}"#, ip: ip)
        XCTAssertEqual(r.0, 200, "\(r.1)")
        return (try XCTUnwrap(r.1["mfaPendingCredential"]?.stringValue), try XCTUnwrap(r.1["mfaInfo"]?.arrayValue?.first))
    }

    func finalize(_ credential: String, _ session: String, _ code: String, ip: String = "127.0.0.1") -> (Int, JSON) {
        v2("mfaSignIn:finalize", #"{"mfaPendingCredential":"\#(credential)","phoneVerificationInfo":{"sessionInfo":"\#(session)","code":"\#(code)"}}"#, ip: ip)
    }

    // MARK: 1. the second factor

    /// The report's exploit: a password, then the masked hint sent through `sendVerificationCode` (the iOS testing
    /// path), then the public preset code of the fictional number with the same masked form. The code is now sent for
    /// the enrolled number (not fictional: a random code in the inbox), so the preset code fails — also from a web page.
    func testAPublicPresetCodeDoesNotPassAnotherNumbersSecondFactor() throws {
        mfaUser("victim", real)
        for origin in [nil, "https://evil.example"] {
            let (credential, hint) = try passwordSignIn("victim")
            XCTAssertEqual(hint["phoneInfo"]?.stringValue, mask)
            let send = client("sendVerificationCode", #"{"phoneNumber":"\#(mask)"}"#, origin: origin)
            XCTAssertEqual(send.0, 200, "\(send.1)")
            let session = try XCTUnwrap(send.1["sessionInfo"]?.stringValue)
            let stored = try XCTUnwrap(app.emulator.verificationCodes(key, phone: real).first { $0.sessionInfo == session })
            XCTAssertFalse(stored.fictional, "a code for the enrolled number, not the fictional one of the same mask")
            XCTAssertNotEqual(stored.code, "123456")
            let attack = v2("mfaSignIn:finalize", #"{"mfaPendingCredential":"\#(credential)","phoneVerificationInfo":{"sessionInfo":"\#(session)","code":"123456"}}"#,
                            origin: origin)
            XCTAssertEqual(message(attack), "INVALID_CODE")
            XCTAssertNil(attack.1["idToken"])
            // The enrolled number's own code (from the inbox) does pass.
            let ok = finalize(credential, session, stored.code)
            XCTAssertEqual(ok.0, 200, "\(ok.1)")
            let claims = try XCTUnwrap(DecodedJWT(try XCTUnwrap(ok.1["idToken"]?.stringValue))).payload
            XCTAssertEqual(claims["firebase"]?["sign_in_second_factor"], "phone")
        }
    }

    /// An enrolled fictional number still signs in with its preset code on the iOS path.
    func testTheIOSMaskedSendOfAFictionalFactorUsesItsPresetCode() throws {
        mfaUser("ios", fictional)
        let (credential, _) = try passwordSignIn("ios")
        let send = client("sendVerificationCode", #"{"phoneNumber":"\#(mask)"}"#)
        let session = try XCTUnwrap(send.1["sessionInfo"]?.stringValue, "\(send.1)")
        XCTAssertEqual(finalize(credential, session, "123456").0, 200)
    }

    /// A code sent to one pending sign-in never finalizes another, even of the same user, and a first-factor code or a
    /// masked send without a pending sign-in never passes a second factor.
    func testACodePassesOnlyThePendingSignInItWasSentTo() throws {
        mfaUser("u", real)
        let (first, hint) = try passwordSignIn("u")
        let (second, _) = try passwordSignIn("u")
        let enrollment = try XCTUnwrap(hint["mfaEnrollmentId"]?.stringValue)
        let start = v2("mfaSignIn:start", #"{"mfaPendingCredential":"\#(first)","mfaEnrollmentId":"\#(enrollment)"}"#)
        let session = try XCTUnwrap(start.1["phoneResponseInfo"]?["sessionInfo"]?.stringValue, "\(start.1)")
        let code = try XCTUnwrap(app.emulator.verificationCodes(key, phone: real).first?.code)
        XCTAssertEqual(message(finalize(second, session, code)), "INVALID_SESSION_INFO")
        // A first-factor session for the enrolled number, even with the right code, is not a second factor.
        let firstFactor = try XCTUnwrap(client("sendVerificationCode", #"{"phoneNumber":"\#(real)"}"#).1["sessionInfo"]?.stringValue)
        let firstCode = try XCTUnwrap(app.emulator.verificationCodes(key, phone: real).first { $0.sessionInfo == firstFactor }?.code)
        XCTAssertEqual(message(finalize(first, firstFactor, firstCode)), "INVALID_SESSION_INFO")
        XCTAssertEqual(finalize(first, session, code).0, 200)
        // No pending sign-in of that masked form left: a masked send is refused as production refuses a masked number.
        XCTAssertEqual(message(finalize(second, session, code)), "INVALID_SESSION_INFO", "single use")
        _ = try app.emulator.store(key).withLock { (s: inout AuthStore) in s.mfaPending.removeAll() }
        XCTAssertEqual(message(client("sendVerificationCode", #"{"phoneNumber":"\#(mask)"}"#)), "INVALID_PHONE_NUMBER : Invalid format.")
    }

    /// Two users whose factors share a masked form: the masked send binds to the newest pending sign-in, for that user's
    /// own number; the other user's pending credential cannot use it.
    func testMaskCollisionsBetweenUsersStayApart() throws {
        mfaUser("fict", fictional)
        mfaUser("realu", real)
        let (fictCredential, _) = try passwordSignIn("fict")
        let (realCredential, _) = try passwordSignIn("realu")
        let send = client("sendVerificationCode", #"{"phoneNumber":"\#(mask)"}"#)
        let session = try XCTUnwrap(send.1["sessionInfo"]?.stringValue)
        XCTAssertEqual(app.emulator.verificationCodes(key, phone: real).first?.sessionInfo, session, "the newest pending sign-in: realu's")
        XCTAssertEqual(message(finalize(fictCredential, session, "123456")), "INVALID_SESSION_INFO")
        XCTAssertEqual(message(finalize(realCredential, session, "123456")), "INVALID_CODE")
    }

    // MARK: 2. masked sends and the send policy

    func testAMaskedSendGoesThroughEverySendPolicy() throws {
        mfaUser("p", real)
        _ = try passwordSignIn("p")
        // Scenario numbers apply to the enrolled number.
        patch(#"{"phoneAuth":{"scenarioNumbers":{"\#(real)":{"onSend":"QUOTA_EXCEEDED"}}}}"#)
        XCTAssertEqual(message(client("sendVerificationCode", #"{"phoneNumber":"\#(mask)"}"#)), "QUOTA_EXCEEDED")
        patch(#"{"phoneAuth":{"scenarioNumbers":{}}}"#)
        // Regions.
        patch(#"{"smsRegionConfig":{"allowlistOnly":{"allowedRegions":["GB"]}}}"#)
        XCTAssertEqual(message(client("sendVerificationCode", #"{"phoneNumber":"\#(mask)"}"#)),
                       "OPERATION_NOT_ALLOWED : SMS unable to be sent until this region enabled by the app developer")
        patch(#"{"smsRegionConfig":{"allowByDefault":{"disallowedRegions":[]}}}"#)
        // Per-number and per-IP limits.
        patch(#"{"phoneAuth":{"sendRateLimits":{"perPhoneNumber":{"max":1}}}}"#)
        XCTAssertEqual(client("sendVerificationCode", #"{"phoneNumber":"\#(mask)"}"#).0, 200)
        XCTAssertEqual(message(client("sendVerificationCode", #"{"phoneNumber":"\#(mask)"}"#)), "TOO_MANY_ATTEMPTS_TRY_LATER")
        patch(#"{"phoneAuth":{"sendRateLimits":{"perPhoneNumber":{"max":0},"perIp":{"max":1}}}}"#)
        XCTAssertEqual(client("sendVerificationCode", #"{"phoneNumber":"\#(mask)"}"#, ip: "10.0.0.1").0, 200)
        XCTAssertEqual(message(client("sendVerificationCode", #"{"phoneNumber":"\#(mask)"}"#, ip: "10.0.0.1")), "TOO_MANY_ATTEMPTS_TRY_LATER")
        // App verification.
        patch(#"{"phoneAuth":{"sendRateLimits":{"perIp":{"max":0}},"appVerification":"ENFORCE"}}"#)
        XCTAssertEqual(message(client("sendVerificationCode", #"{"phoneNumber":"\#(mask)"}"#)), "MISSING_APP_CREDENTIAL")
    }

    // MARK: 3. guessing

    func testAPendingSignInSendsAndGuessesABoundedNumberOfTimesWithTheLimitsOn() throws {
        patch(#"{"protection":{"mode":"ON"},"phoneAuth":{"maxCodeAttempts":0}}"#)
        mfaUser("g", real)
        let (credential, hint) = try passwordSignIn("g")
        let enrollment = try XCTUnwrap(hint["mfaEnrollmentId"]?.stringValue)
        var sessions: [String] = []
        for _ in 0..<5 {
            let s = v2("mfaSignIn:start", #"{"mfaPendingCredential":"\#(credential)","mfaEnrollmentId":"\#(enrollment)"}"#)
            sessions.append(try XCTUnwrap(s.1["phoneResponseInfo"]?["sessionInfo"]?.stringValue, "\(s.1)"))
        }
        XCTAssertEqual(message(v2("mfaSignIn:start", #"{"mfaPendingCredential":"\#(credential)","mfaEnrollmentId":"\#(enrollment)"}"#)),
                       "TOO_MANY_ATTEMPTS_TRY_LATER", "sessionsPerMfaSignIn")
        // Ten wrong codes across its sessions (unlimited attempts per session here), then the credential is revoked.
        for i in 0..<10 { XCTAssertEqual(message(finalize(credential, sessions[i % 5], "000000")), "INVALID_CODE", "attempt \(i)") }
        let code = try XCTUnwrap(app.emulator.verificationCodes(key, phone: real).first { $0.sessionInfo == sessions[0] }?.code)
        XCTAssertEqual(message(finalize(credential, sessions[0], code)), "TOO_MANY_ATTEMPTS_TRY_LATER")
        XCTAssertEqual(message(finalize(credential, sessions[0], code)), "INVALID_MFA_PENDING_CREDENTIAL", "revoked")
    }

    func testWrongFirstFactorCodesAreBoundedPerNumberAndPerAddressWithTheLimitsOn() throws {
        patch(#"{"protection":{"mode":"ON","failedCodesPerPhoneNumber":{"max":3},"failedCodesPerIp":{"max":5}},"phoneAuth":{"maxCodeAttempts":0}}"#)
        func send(_ phone: String) throws -> String {
            try XCTUnwrap(client("sendVerificationCode", #"{"phoneNumber":"\#(phone)"}"#).1["sessionInfo"]?.stringValue)
        }
        func verify(_ session: String, _ code: String, ip: String) -> String? {
            message(client("signInWithPhoneNumber", #"{"sessionInfo":"\#(session)","code":"\#(code)"}"#, ip: ip))
        }
        let s = try send("+15550001111")
        for i in 0..<3 { XCTAssertEqual(verify(s, "000000", ip: "10.0.0.\(i)"), "INVALID_CODE") }
        let right = try XCTUnwrap(app.emulator.verificationCodes(key, phone: "+15550001111").first?.code)
        XCTAssertEqual(verify(s, right, ip: "10.0.0.9"), "TOO_MANY_ATTEMPTS_TRY_LATER", "the number failed three times this hour")
        // One address guessing across numbers.
        for i in 0..<5 { XCTAssertEqual(verify(try send("+1555000200\(i)"), "000000", ip: "10.9.9.9"), "INVALID_CODE") }
        let other = try send("+15550003000")
        let otherCode = try XCTUnwrap(app.emulator.verificationCodes(key, phone: "+15550003000").first?.code)
        XCTAssertEqual(verify(other, otherCode, ip: "10.9.9.9"), "TOO_MANY_ATTEMPTS_TRY_LATER")
        XCTAssertNil(verify(other, otherCode, ip: "10.9.9.8"), "another address is not held back")
        // The window ends.
        clock.advance(millis: 3_600_000)
        let again = try send("+15550001111")
        let againCode = try XCTUnwrap(app.emulator.verificationCodes(key, phone: "+15550001111").first { $0.sessionInfo == again }?.code)
        XCTAssertNil(verify(again, againCode, ip: "10.0.0.9"))
        // Fictional numbers are exempt, as from every limit.
        let f = try send(fictional)
        for _ in 0..<10 { XCTAssertEqual(verify(f, "000000", ip: "10.9.9.9"), "INVALID_CODE") }
    }

    func testTooManyWrongPasswordsLockTheAccountWithTheLimitsOn() throws {
        patch(#"{"protection":{"mode":"ON","failedPasswordsPerAccount":{"max":3,"perSeconds":600}}}"#)
        XCTAssertEqual(client("signUp", #"{"email":"lock@example.com","password":"secret12"}"#).0, 200)
        func signIn(_ password: String) -> String? {
            message(client("signInWithPassword", #"{"email":"lock@example.com","password":"\#(password)"}"#))
        }
        for _ in 0..<3 { XCTAssertEqual(signIn("wrong-one"), "INVALID_LOGIN_CREDENTIALS") }
        XCTAssertEqual(signIn("secret12"), Emulator.accountLocked.description, "the right password too")
        clock.advance(millis: 600_000)
        XCTAssertNil(signIn("secret12"))
    }

    /// Off on loopback without an admin token (`AUTO`), so a suite's wrong-code tests never trip them; on for a
    /// server others can reach.
    func testTheLimitsFollowTheServersExposureByDefault() throws {
        XCTAssertEqual(app.emulator.config(key).protection.mode, .auto)
        XCTAssertFalse(app.emulator.exposed)
        XCTAssertEqual(client("signUp", #"{"email":"free@example.com","password":"secret12"}"#).0, 200)
        for _ in 0..<20 {
            XCTAssertEqual(message(client("signInWithPassword", #"{"email":"free@example.com","password":"nope-nope"}"#)), "INVALID_LOGIN_CREDENTIALS")
        }
        XCTAssertEqual(client("signInWithPassword", #"{"email":"free@example.com","password":"secret12"}"#).0, 200)
        let exposed = Emulator(defaultProjectId: "p", exposed: true)
        XCTAssertTrue(exposed.config(StoreKey(projectId: "p")).protection.isOn(exposed: exposed.exposed))
        var s = ServerSettings()
        XCTAssertFalse(s.isExposed)
        s.host = "0.0.0.0"
        XCTAssertTrue(s.isExposed)
        s.host = "127.0.0.1"
        s.adminToken = "secret-token"
        XCTAssertTrue(s.isExposed)
    }

    // MARK: 4. reads never create projects

    func testAnOobWaitOnAnUnknownProjectCreatesNothingAndIsAnsweredByItsFirstCode() throws {
        let before = app.emulator.projectCount
        for i in 0..<20 {
            // The long poll answers later (404 after its timeout); what matters here is that it made no project.
            _ = call("GET", "/emulator/v1/projects/blind-\(i)/oobCodes:wait?email=a@example.com&timeoutSeconds=0")
        }
        XCTAssertEqual(app.emulator.projectCount, before, "a read created projects")
        // A poll on a project that does not exist yet is answered by the first code made there.
        let got = Locked<OobCode?>(nil)
        let waiter = try app.emulator.waitForOobCode(StoreKey(projectId: "later"), email: "L@example.com", timeoutSeconds: 60) { c in
            got.withLock { $0 = c }
        }
        XCTAssertNotNil(waiter)
        XCTAssertEqual(app.emulator.projectCount, before)
        _ = try app.emulator.createUser(StoreKey(projectId: "later"), localId: "l1", changes: { var c = UserChanges(); c.email = .set("l@example.com"); return c }())
        let code = try app.emulator.createOobCode(StoreKey(projectId: "later"), email: "l@example.com", newEmail: nil, type: .verifyEmail,
                                                  link: { "http://localhost/" + $0 })
        XCTAssertEqual(got.withLock { $0 }?.code, code.code)
    }

    // MARK: 5. bounded sessions

    func testPendingSessionsAreBoundedAcrossEveryStore() throws {
        let e = Emulator(defaultProjectId: "p", clock: clock, random: SeededRandom(seed: 5), maxSessions: 10)
        for i in 0..<6 { _ = try e.sendVerificationCode(StoreKey(projectId: "p"), phoneNumber: "+1555000100\(i)") }
        for i in 0..<4 { _ = try e.sendVerificationCode(StoreKey(projectId: "q", tenantId: "t\(i)"), phoneNumber: "+15550002000") }
        XCTAssertEqual(e.pendingSessionTotal, 10)
        XCTAssertThrowsError(try e.sendVerificationCode(StoreKey(projectId: "r"), phoneNumber: "+15550003000")) { err in
            XCTAssertEqual((err as? AuthError)?.code, .quotaExceeded)
        }
        // Used, cleared and expired sessions give room back.
        let first = try XCTUnwrap(e.verificationCodes(StoreKey(projectId: "p"), phone: "+15550001000").first)
        _ = try e.signInWithPhoneNumber(StoreKey(projectId: "p"), sessionInfo: first.sessionInfo, code: first.code, temporaryProof: nil,
                                        phoneNumber: nil, tokenUser: nil, operation: nil)
        XCTAssertEqual(e.pendingSessionTotal, 9)
        try e.clearVerificationCodes(StoreKey(projectId: "q", tenantId: "t0"))
        XCTAssertEqual(e.pendingSessionTotal, 8)
        _ = try e.sendVerificationCode(StoreKey(projectId: "r"), phoneNumber: "+15550003000")
        _ = try e.sendVerificationCode(StoreKey(projectId: "r"), phoneNumber: "+15550003001")
        XCTAssertThrowsError(try e.sendVerificationCode(StoreKey(projectId: "r"), phoneNumber: "+15550003002"))
        clock.advance(millis: 601_000)
        XCTAssertNoThrow(try e.sendVerificationCode(StoreKey(projectId: "r"), phoneNumber: "+15550003002"), "an expired session makes room")
        XCTAssertLessThanOrEqual(e.pendingSessionTotal, 10)
    }

    // MARK: 6. identity claims

    func testCustomAndSessionClaimsNeverReplaceTheUsersIdentity() throws {
        let up = client("sendVerificationCode", #"{"phoneNumber":"\#(fictional)"}"#)
        let session = try XCTUnwrap(up.1["sessionInfo"]?.stringValue)
        let signedIn = client("signInWithPhoneNumber", #"{"sessionInfo":"\#(session)","code":"123456"}"#)
        let uid = try XCTUnwrap(signedIn.1["localId"]?.stringValue)
        let forged = #"{\"email\":\"admin@evil.example\",\"email_verified\":true,\"user_id\":\"root\",\"phone_number\":\"+19999999999\",\"provider_id\":\"anonymous\",\"role\":\"x\"}"#
        XCTAssertEqual(admin("accounts:update", #"{"localId":"\#(uid)","customAttributes":"\#(forged)"}"#).0, 200)
        let user = try XCTUnwrap(app.emulator.existingStore(key)?.read { $0.users[uid] })
        for sessionClaims in [nil, ["email": JSON.string("s@evil.example"), "phone_number": "+18888888888", "tier": "gold"] as JSONObject] {
            let token = try app.idToken(for: user, key: key, signInProvider: "phone", authTime: clock.nowSeconds(), sessionClaims: sessionClaims)
            let c = try XCTUnwrap(DecodedJWT(token)).payload
            XCTAssertNil(c["email"])
            XCTAssertNil(c["email_verified"])
            XCTAssertNil(c["provider_id"])
            XCTAssertEqual(c["user_id"], .string(uid))
            XCTAssertEqual(c["phone_number"], .string(fictional))
            XCTAssertEqual(c["role"], "x")
            if sessionClaims != nil { XCTAssertEqual(c["tier"], "gold") }
        }
    }

    // MARK: the second attack pass (after the fixes)

    /// A lockout is not undone by flooding the counters with other accounts: a counter that reached its limit is kept
    /// as tripped until its window ends (only counts below the limit can be pushed out).
    func testATrippedLimitSurvivesAFloodOfOtherKeys() {
        var p = ProtectionState()
        let limit = RateLimit(max: 3, perSeconds: 3600)
        for _ in 0..<3 { p.count(.passwords, "victim", limit, now: 0) }
        XCTAssertTrue(p.reached(.passwords, "victim", limit, now: 1))
        for i in 0..<(ProtectionState.capacity * 2) { p.count(.passwords, "other-\(i)", limit, now: 2) }
        XCTAssertTrue(p.reached(.passwords, "victim", limit, now: 3), "the lockout was flushed out")
        XCTAssertFalse(p.reached(.passwords, "victim", limit, now: 3_600_001), "the window ends")
        XCTAssertLessThanOrEqual(p.counters.map(\.count).max() ?? 0, ProtectionState.capacity)
    }

    /// Addresses are counted as the connection cap counts peers: IPv4 addresses, IPv6 /64s.
    func testAddressesAreCountedPerIPv6Slash64() {
        XCTAssertEqual(ProtectionState.addressKey("10.1.2.3"), "10.1.2.3")
        XCTAssertEqual(ProtectionState.addressKey("2001:db8:1:2:aaaa::1"), "2001:db8:1:2::/64")
        XCTAssertEqual(ProtectionState.addressKey("2001:db8:1:2:ffff:ffff:ffff:ffff"), "2001:db8:1:2::/64")
        XCTAssertEqual(ProtectionState.addressKey("::ffff:192.0.2.7"), "192.0.2.7")
        XCTAssertEqual(ProtectionState.addressKey("fe80::1%eth0"), "fe80:0:0:0::/64")
        XCTAssertEqual(ProtectionState.addressKey("not an address"), "not an address")
    }

    /// The custom-token chain: a session keeps its sign-in provider when a password is set (a custom-token session
    /// stays ineligible for MFA), and the iOS enrollment finalize checks the verified email as start does.
    func testSettingAPasswordKeepsTheSessionsProviderAndEnrollmentNeedsAVerifiedEmail() throws {
        XCTAssertEqual(admin("accounts", #"{"localId":"ct","email":"ct@example.com","emailVerified":true}"#).0, 200)
        let user = try XCTUnwrap(app.emulator.existingStore(key)?.read { $0.users["ct"] })
        let custom = try app.idToken(for: user, key: key, signInProvider: "custom", authTime: clock.nowSeconds())
        let updated = client("update", #"{"idToken":"\#(custom)","password":"secret12","returnSecureToken":true}"#)
        let token = try XCTUnwrap(updated.1["idToken"]?.stringValue, "\(updated.1)")
        XCTAssertEqual(try XCTUnwrap(DecodedJWT(token)).payload["firebase"]?["sign_in_provider"], "custom")
        let session = try XCTUnwrap(client("sendVerificationCode", #"{"phoneNumber":"\#(fictional)"}"#).1["sessionInfo"]?.stringValue)
        XCTAssertEqual(message(v2("mfaEnrollment:finalize", #"{"idToken":"\#(token)","phoneVerificationInfo":{"sessionInfo":"\#(session)","code":"123456"}}"#)),
                       "UNSUPPORTED_FIRST_FACTOR : MFA is not available for the given first factor.")
        // A password user whose email is not verified cannot finalize through the iOS path either.
        XCTAssertEqual(admin("accounts", #"{"localId":"nv","email":"nv@example.com","password":"secret12"}"#).0, 200)
        let nv = try XCTUnwrap(client("signInWithPassword", #"{"email":"nv@example.com","password":"secret12","returnSecureToken":true}"#).1["idToken"]?.stringValue)
        let s2 = try XCTUnwrap(client("sendVerificationCode", #"{"phoneNumber":"\#(fictional)"}"#).1["sessionInfo"]?.stringValue)
        XCTAssertEqual(message(v2("mfaEnrollment:finalize", #"{"idToken":"\#(nv)","phoneVerificationInfo":{"sessionInfo":"\#(s2)","code":"123456"}}"#)),
                       "UNVERIFIED_EMAIL : Need to verify email first before enrolling second factors.")
    }

    /// With --admin-token (others can reach the server), another machine exchanges a custom token only with the token.
    func testCustomTokensFromAnotherMachineNeedTheAdminTokenWhenOneIsSet() throws {
        app = PhoneAuthApp(emulator: app.emulator, tokens: app.tokens, signingPool: nil, logger: .quiet, adminToken: "a-long-admin-token")
        let header = #"{"alg":"none","typ":"JWT"}"#, iat = clock.nowSeconds()
        let payload = #"{"aud":"https://identitytoolkit.googleapis.com/google.identity.identitytoolkit.v1.IdentityToolkit","iat":\#(iat),"exp":\#(iat + 3600),"uid":"lan-user"}"#
        let jwt = Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(payload.utf8)) + "."
        func exchange(from ip: String, bearer: Bool) -> (Int, JSON) {
            var h = HTTPHeaders()
            if bearer { h.add("Authorization", "Bearer a-long-admin-token") }
            let req = HTTPRequest(method: "POST", target: "/identitytoolkit.googleapis.com/v1/accounts:signInWithCustomToken?key=k", headers: h,
                                  body: Array(#"{"token":"\#(jwt)","returnSecureToken":true}"#.utf8), remoteAddress: ip)
            guard let resp = app.respond(to: req, context: .detached) else { return (0, .null) }
            return (resp.status, (try? JSONParser.parse(resp.body)) ?? .null)
        }
        XCTAssertEqual(exchange(from: "192.168.1.50", bearer: false).0, 403)
        XCTAssertEqual(exchange(from: "192.168.1.50", bearer: true).0, 200)
        XCTAssertEqual(exchange(from: "127.0.0.1", bearer: false).0, 200)
    }

    /// One account signing in again and again keeps at most five pending sign-ins of its own, and cannot push another
    /// user's out.
    func testPendingSignInsAreCappedPerUser() throws {
        mfaUser("busy", real)
        mfaUser("other", "+15557654321")
        let (otherCredential, otherHint) = try passwordSignIn("other")
        for _ in 0..<(Emulator.maxMFAPending + 50) { _ = try app.emulator.passFirstFactor(key, localId: "busy", signInProvider: "password") }
        let busy = try XCTUnwrap(app.emulator.existingStore(key)?.read { s in s.mfaPending.keys(now: clock.nowMillis()) { $0.localId == "busy" }.count })
        XCTAssertEqual(busy, Emulator.maxMFAPendingPerUser)
        let start = v2("mfaSignIn:start", #"{"mfaPendingCredential":"\#(otherCredential)","mfaEnrollmentId":"\#(otherHint["mfaEnrollmentId"]!.stringValue!)"}"#)
        XCTAssertEqual(start.0, 200, "\(start.1)")
    }

    /// With the limits on, a masked send is refused as production refuses a masked number: it carries no credential,
    /// so anyone could spend another user's pending sign-in with it.
    func testMaskedSendsAreRefusedWithTheLimitsOn() throws {
        mfaUser("m", fictional)
        _ = try passwordSignIn("m")
        patch(#"{"protection":{"mode":"ON"}}"#)
        XCTAssertEqual(message(client("sendVerificationCode", #"{"phoneNumber":"\#(mask)"}"#)), "INVALID_PHONE_NUMBER : Invalid format.")
        patch(#"{"protection":{"mode":"OFF"}}"#)
        XCTAssertEqual(client("sendVerificationCode", #"{"phoneNumber":"\#(mask)"}"#).0, 200)
    }

    /// With the limits on, one address has at most `sendsPerIp` codes sent to numbers that are not fictional.
    func testSendsPerAddressAreBoundedWithTheLimitsOn() throws {
        patch(#"{"protection":{"mode":"ON","sendsPerIp":{"max":3,"perSeconds":60}}}"#)
        for i in 0..<3 { XCTAssertEqual(client("sendVerificationCode", #"{"phoneNumber":"+1555000900\#(i)"}"#, ip: "10.2.0.1").0, 200) }
        XCTAssertEqual(message(client("sendVerificationCode", #"{"phoneNumber":"+15550009009"}"#, ip: "10.2.0.1")), "TOO_MANY_ATTEMPTS_TRY_LATER")
        XCTAssertEqual(client("sendVerificationCode", #"{"phoneNumber":"+15550009009"}"#, ip: "10.2.0.2").0, 200)
        XCTAssertEqual(client("sendVerificationCode", #"{"phoneNumber":"\#(fictional)"}"#, ip: "10.2.0.1").0, 200, "fictional numbers are exempt")
        clock.advance(millis: 60_000)
        XCTAssertEqual(client("sendVerificationCode", #"{"phoneNumber":"+15550009009"}"#, ip: "10.2.0.1").0, 200)
    }

    /// The opt-in per-number window keeps a bounded table, and a refused send stores nothing.
    func testSendWindowsAreBounded() {
        var w = SendWindows.KeyedWindows()
        for i in 0..<(SendWindows.capacity + 1000) { w.record("+1\(i)", now: 0, windowMillis: 60_000) }
        XCTAssertLessThanOrEqual(w.table.count, SendWindows.capacity)
        XCTAssertEqual(w.count("+1\(SendWindows.capacity + 999)", now: 1, windowMillis: 60_000), 1)
        XCTAssertEqual(w.count("+1\(SendWindows.capacity + 999)", now: 60_001, windowMillis: 60_000), 0)
    }

    /// Users in all projects and tenants together are bounded (`--max-users-total`), and deletes give room back.
    func testUsersAreBoundedAcrossEveryStore() throws {
        let e = Emulator(defaultProjectId: "p", clock: clock, random: SeededRandom(seed: 9), maxUsersTotal: 4)
        for i in 0..<2 { _ = try e.createUser(StoreKey(projectId: "p"), localId: "a\(i)", changes: UserChanges()) }
        for i in 0..<2 { _ = try e.createUser(StoreKey(projectId: "q", tenantId: "t\(i)"), localId: "b\(i)", changes: UserChanges()) }
        XCTAssertThrowsError(try e.createUser(StoreKey(projectId: "r"), localId: "c", changes: UserChanges())) { err in
            XCTAssertEqual((err as? AuthError)?.code, .quotaExceeded)
        }
        try e.deleteUser(StoreKey(projectId: "p"), localId: "a0")
        XCTAssertNoThrow(try e.createUser(StoreKey(projectId: "r"), localId: "c", changes: UserChanges()))
    }

    /// With the limits on, one address creates at most `accountsPerIp` accounts per window (production's quota page:
    /// 100 an hour), whatever the sign-in: anonymous and email sign-ups and first phone sign-ins alike.
    func testAccountsPerAddressAreBoundedWithTheLimitsOn() throws {
        patch(#"{"protection":{"mode":"ON","accountsPerIp":{"max":3,"perSeconds":3600}}}"#)
        XCTAssertEqual(client("signUp", #"{}"#, ip: "10.3.0.1").0, 200)
        XCTAssertEqual(client("signUp", #"{"email":"a@example.com","password":"secret12"}"#, ip: "10.3.0.1").0, 200)
        let s = try XCTUnwrap(client("sendVerificationCode", #"{"phoneNumber":"\#(fictional)"}"#, ip: "10.3.0.1").1["sessionInfo"]?.stringValue)
        XCTAssertEqual(client("signInWithPhoneNumber", #"{"sessionInfo":"\#(s)","code":"123456"}"#, ip: "10.3.0.1").0, 200)
        XCTAssertEqual(message(client("signUp", #"{}"#, ip: "10.3.0.1")), "QUOTA_EXCEEDED : Too many accounts created from this address; try again later.")
        XCTAssertEqual(client("signUp", #"{}"#, ip: "10.3.0.2").0, 200, "another address")
        // Signing in to an existing account is not account creation.
        let again = try XCTUnwrap(client("sendVerificationCode", #"{"phoneNumber":"\#(fictional)"}"#, ip: "10.3.0.1").1["sessionInfo"]?.stringValue)
        XCTAssertEqual(client("signInWithPhoneNumber", #"{"sessionInfo":"\#(again)","code":"123456"}"#, ip: "10.3.0.1").0, 200)
    }
}
