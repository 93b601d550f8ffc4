import Dispatch
import EmulatorSupport
import HTTPServer
import JWT
@testable import PhoneAuthAPI
@testable import PhoneAuthCore
import PhoneAuthTestSupport
import XCTest

/// A blocking function on a real loopback socket: records what it receives and answers by path.
final class FunctionServer: HTTPResponder, @unchecked Sendable {
    struct Received { let path: String; let contentType: String?; let jwt: String; let payload: JSONObject; let header: JSONObject }
    let received = Locked<[Received]>([])
    let hanging = Locked<[ResponseContext]>([])

    func respond(to request: HTTPRequest, context: ResponseContext) -> HTTPResponse? {
        let body = (try? JSONParser.parse(request.body)) ?? .null
        let jwt = body["data"]?["jwt"]?.stringValue ?? ""
        if let d = DecodedJWT(jwt) {
            received.withLock { $0.append(Received(path: String(request.path), contentType: request.headers["content-type"], jwt: jwt,
                                                   payload: d.payload, header: d.header)) }
        }
        func json(_ s: String, _ status: Int = 200) -> HTTPResponse {
            HTTPResponse(status: status, headers: [("Content-Type", "application/json")], body: Array(s.utf8))
        }
        switch request.path {
        case "/create": return json(#"{"userRecord":{"updateMask":"displayName,customClaims,somethingNew","displayName":"Ada","customClaims":{"role":"admin"},"somethingNew":1}}"#)
        case "/signin": return json(#"{"userRecord":{"updateMask":"sessionClaims,photoUrl","sessionClaims":{"session":"s1"},"photoUrl":"https://example.com/a.png"}}"#)
        case "/block": return json(#"{"error":{"message":"No sign-ups today","status":"INVALID_ARGUMENT"}}"#, 400)
        case "/allow": return json(#"{"recaptchaActionOverride":"ALLOW"}"#)
        case "/deny": return json(#"{"recaptchaActionOverride":"BLOCK"}"#)
        case "/garbage": return HTTPResponse(status: 200, body: Array("<html>not json".utf8))
        case "/nomask": return json(#"{"userRecord":{"displayName":"x"}}"#)
        case "/disable": return json(#"{"userRecord":{"updateMask":"disabled","disabled":true}}"#)
        case "/reserved": return json(#"{"userRecord":{"updateMask":"customClaims","customClaims":{"sub":"evil"}}}"#)
        case "/hang":
            hanging.withLock { $0.append(context) }
            return nil
        default: return json("{}")
        }
    }

    var paths: [String] { received.withLock { $0.map(\.path) } }
    func release() {
        for c in hanging.withLock({ h -> [ResponseContext] in let all = h; h = []; return all }) { c.complete(HTTPResponse(status: 200, body: Array("{}".utf8))) }
    }
}

final class BlockingFunctionsTests: XCTestCase, AppCalling {
    var clock: EmulatorClock!
    var app: PhoneAuthApp!
    var functions: FunctionServer!
    var server: HTTPServer!
    var base = ""
    let fictional = "+16505554567"

    override func setUpWithError() throws {
        clock = EmulatorClock(fixedAtMillis: testEpochMillis)
        let emulator = makeTestEmulator(projectId: "demo-phone", clock: clock, seed: 11, logger: .quiet)
        app = PhoneAuthApp(emulator: emulator, tokens: TokenService(mode: .rs256, initialKey: TestKeys.signingKey), signingPool: nil,
                           logger: .quiet, blocking: BlockingCalls(timeoutMillis: 300, threads: 2, maxInFlight: 8))
        functions = FunctionServer()
        server = HTTPServer(configuration: .init(host: "127.0.0.1", port: 0, eventLoops: 1, policy: ConnectionPolicy()),
                            responder: functions, logger: Logger(label: "fn", level: .critical))
        base = "http://127.0.0.1:\(try server.start())"
    }

    override func tearDown() {
        functions.release()
        app.blocking.shutdown()
        server.shutdown()
    }

    /// A call whose answer may come later (deferred): waits for it (a guard against a hang, not a timing assertion).
    func wait(_ method: String, _ target: String, _ body: String? = nil, headers: [(String, String)] = []) -> (Int, JSON) {
        var h = HTTPHeaders()
        for (k, v) in headers { h.add(k, v) }
        let req = HTTPRequest(method: method, target: target, headers: h, body: Array((body ?? "").utf8), remoteAddress: "127.0.0.9")
        let box = Locked<HTTPResponse?>(nil)
        let done = DispatchSemaphore(value: 0)
        if let now = app.respond(to: req, deliver: { r in box.withLock { $0 = r }; done.signal() }) { return Self.decode(now) }
        XCTAssertEqual(done.wait(timeout: .now() + 60), .success, "no answer")
        return box.withLock { $0 }.map(Self.decode) ?? (0, .null)
    }

    static func decode(_ r: HTTPResponse) -> (Int, JSON) {
        (r.status, r.body.isEmpty ? .null : ((try? JSONParser.parse(r.body)) ?? .string(String(decoding: r.body, as: UTF8.self))))
    }

    func configure(_ triggers: [String: String], tenant: String? = nil) -> (Int, JSON) {
        var t = JSONObject()
        for (k, v) in triggers { t[k] = ["functionUri": .string(v.hasPrefix("http") ? v : base + v)] }
        let body = JSON.object(["blockingFunctions": ["triggers": .object(t)]]).serializedString
        let path = tenant.map { "/identitytoolkit.googleapis.com/v2/projects/demo-phone/tenants/\($0)?updateMask=blockingFunctions" }
            ?? "/identitytoolkit.googleapis.com/v2/projects/demo-phone/config?updateMask=blockingFunctions"
        return call("PATCH", path, body, headers: [("Authorization", "Bearer owner")])
    }

    func phoneSignIn(_ phone: String? = nil) -> (Int, JSON) {
        let send = wait("POST", "/identitytoolkit.googleapis.com/v1/accounts:sendVerificationCode?key=k", #"{"phoneNumber":"\#(phone ?? fictional)"}"#)
        guard send.0 == 200, let info = send.1["sessionInfo"]?.stringValue else { return send }
        return wait("POST", "/identitytoolkit.googleapis.com/v1/accounts:signInWithPhoneNumber?key=k", #"{"sessionInfo":"\#(info)","code":"123456"}"#,
                    headers: [("User-Agent", "test-agent/1"), ("Accept-Language", "fr-CA,fr;q=0.8")])
    }

    func idClaims(_ r: (Int, JSON)) -> JSONObject? { r.1["idToken"]?.stringValue.flatMap { DecodedJWT($0)?.payload } }

    // MARK: configuration

    func testConfigValidationAndEcho() {
        var r = configure(["beforeDelete": "/x"])
        XCTAssertEqual(r.0, 400)
        XCTAssertEqual(message(r), "INVALID_BLOCKING_FUNCTION : ((Event type is invalid.))")
        r = configure(["beforeCreate": "not a uri"])
        XCTAssertEqual(message(r), "INVALID_BLOCKING_FUNCTION : ((Expected an absolute URI with valid scheme and host.))")
        r = configure(["beforeCreate": "http://:80/x"])
        XCTAssertEqual(message(r), "INVALID_BLOCKING_FUNCTION : ((Expected an absolute URI with valid scheme and host.))")
        r = configure(["beforeCreate": "https://example.com/f"])
        XCTAssertTrue(message(r)?.hasPrefix("INVALID_BLOCKING_FUNCTION : ((Only http://") == true, "\(r)")
        r = configure(["beforeCreate": "/create", "beforeSendSms": "/ok"])
        XCTAssertEqual(r.0, 200, "\(r)")
        XCTAssertEqual(r.1["blockingFunctions"]?["triggers"]?["beforeCreate"]?["functionUri"]?.stringValue, base + "/create")
        let g = call("GET", "/identitytoolkit.googleapis.com/v2/projects/demo-phone/config", headers: [("Authorization", "Bearer owner")])
        XCTAssertEqual(g.1["blockingFunctions"]?["triggers"]?["beforeSendSms"]?["functionUri"]?.stringValue, base + "/ok")
        // The emulator config (journal, export, config file) carries it too, and parses back.
        var copy = ProjectConfig()
        XCTAssertNoThrow(try copy.apply(app.emulator.config(StoreKey(projectId: "demo-phone")).toJSON()))
        XCTAssertEqual(copy.blockingFunctions.triggers[.beforeCreate], base + "/create")
        // Cleared with an empty mask body.
        r = call("PATCH", "/identitytoolkit.googleapis.com/v2/projects/demo-phone/config?updateMask=blockingFunctions", "{}",
                 headers: [("Authorization", "Bearer owner")])
        XCTAssertEqual(r.0, 200)
        XCTAssertTrue(app.emulator.config(StoreKey(projectId: "demo-phone")).blockingFunctions.isEmpty)
    }

    func testConfigFileKeyIsValidated() {
        var c = ProjectConfig()
        XCTAssertThrowsError(try c.apply(["blockingFunctions": ["triggers": ["beforeCreate": ["functionUri": "ftp://x/y"]]]]))
        XCTAssertNoThrow(try c.apply(["blockingFunctions": ["triggers": ["beforeSignIn": ["functionUri": "http://127.0.0.1:5001/p/f"]],
                                                             "forwardInboundCredentials": ["idToken": true]]]))
        XCTAssertEqual(c.blockingFunctions.triggers[.beforeSignIn], "http://127.0.0.1:5001/p/f")
        XCTAssertTrue(c.blockingFunctions.forwardIdToken)
    }

    // MARK: the phone flow

    func testPhoneSignUpCallsCreateThenSignInAndAppliesTheirReplies() throws {
        XCTAssertEqual(configure(["beforeCreate": "/create", "beforeSignIn": "/signin", "beforeSendSms": "/ok"]).0, 200)
        let r = phoneSignIn()
        XCTAssertEqual(r.0, 200, "\(r)")
        XCTAssertEqual(functions.paths, ["/ok", "/create", "/signin"])
        let claims = try XCTUnwrap(idClaims(r))
        XCTAssertEqual(claims["role"], "admin")
        XCTAssertEqual(claims["session"], "s1")
        XCTAssertEqual(claims["name"], "Ada")
        XCTAssertEqual(claims["picture"], "https://example.com/a.png")
        // Stored: the user fields and custom claims; never the session claims.
        let uid = try XCTUnwrap(r.1["localId"]?.stringValue)
        let stored = try XCTUnwrap(app.emulator.existingStore(StoreKey(projectId: "demo-phone"))?.read { $0.users[uid] })
        XCTAssertEqual(stored.displayName, "Ada")
        XCTAssertEqual(stored.photoUrl, "https://example.com/a.png")
        XCTAssertEqual(stored.customClaims["role"], "admin")
        XCTAssertNil(stored.customClaims["session"])

        let got = functions.received.withLock { $0 }
        XCTAssertEqual(got.map { $0.payload["event_type"]?.stringValue ?? "" }, ["beforeSendSms", "beforeCreate", "beforeSignIn"])
        XCTAssertTrue(got.allSatisfy { $0.contentType == "application/json" })
        let sms = got[0].payload
        XCTAssertEqual(sms["phone_number"], .string(fictional))
        XCTAssertEqual(sms["sms_type"], "SIGNIN")
        let create = got[1].payload
        XCTAssertEqual(create["iss"], "https://securetoken.google.com/demo-phone")
        XCTAssertEqual(create["aud"], .string(base + "/create"))
        XCTAssertEqual(create["sign_in_method"], "phone")
        XCTAssertEqual(create["ip_address"], "127.0.0.9")
        XCTAssertEqual(create["user_agent"], "test-agent/1")
        XCTAssertEqual(create["locale"], "fr-CA")
        XCTAssertEqual(create["iat"], .int(testEpochMillis / 1000))
        XCTAssertEqual(create["sub"], .string(uid))
        XCTAssertEqual(create["user_record"]?["uid"], .string(uid))
        XCTAssertEqual(create["user_record"]?["phone_number"], .string(fictional))
        XCTAssertEqual(create["user_record"]?["metadata"]?["creation_time"], .int(testEpochMillis / 1000))
        XCTAssertEqual(create["user_record"]?["provider_data"]?.arrayValue?.first?["provider_id"], "phone")
        XCTAssertFalse((create["event_id"]?.stringValue ?? "").isEmpty)
        // beforeSignIn sees beforeCreate's changes.
        XCTAssertEqual(got[2].payload["user_record"]?["display_name"], "Ada")
        XCTAssertEqual(got[2].payload["user_record"]?["custom_claims"]?["role"], "admin")
        // Signed with our current key, its kid published.
        XCTAssertEqual(got[1].header["alg"], "RS256")
        XCTAssertEqual(got[1].header["kid"]?.stringValue, TestKeys.signingKey.kid)
        XCTAssertTrue(TestKeys.signingKey.verify(try XCTUnwrap(DecodedJWT(got[1].jwt))))

        // A returning user: beforeSignIn only.
        let again = phoneSignIn()
        XCTAssertEqual(again.0, 200)
        XCTAssertEqual(functions.paths.suffix(2), ["/ok", "/signin"])
        XCTAssertEqual(again.1["isNewUser"], false)
    }

    func testUnsignedJWTWithTokenSigningNone() throws {
        let emulator = makeTestEmulator(projectId: "demo-phone", clock: clock, seed: 12, logger: .quiet)
        app = PhoneAuthApp(emulator: emulator, tokens: TokenService(mode: .none, initialKey: nil), signingPool: nil, logger: .quiet,
                           blocking: BlockingCalls(timeoutMillis: 300, threads: 1, maxInFlight: 4))
        XCTAssertEqual(configure(["beforeSignIn": "/signin"]).0, 200)
        XCTAssertEqual(phoneSignIn().0, 200)
        let got = try XCTUnwrap(functions.received.withLock { $0.first })
        XCTAssertEqual(got.header["alg"], "none")
        XCTAssertTrue(got.jwt.hasSuffix("."))
    }

    func testHttpsErrorBlocksTheSignUpAndNothingIsSaved() {
        XCTAssertEqual(configure(["beforeCreate": "/block", "beforeSignIn": "/signin"]).0, 200)
        let r = phoneSignIn()
        XCTAssertEqual(r.0, 400)
        XCTAssertEqual(message(r), #"BLOCKING_FUNCTION_ERROR_RESPONSE : ((HTTP request to \#(base)/block returned HTTP error 400: {"error":{"message":"No sign-ups today","status":"INVALID_ARGUMENT"}}))"#)
        XCTAssertEqual(functions.paths, ["/block"])
        XCTAssertEqual(app.emulator.existingStore(StoreKey(projectId: "demo-phone"))?.read { $0.users.count }, 0)
    }

    func testGarbageMissingMaskHangAndReservedClaimsAreErrors() {
        XCTAssertEqual(configure(["beforeSignIn": "/garbage"]).0, 200)
        var r = phoneSignIn()
        XCTAssertEqual(r.0, 500)
        XCTAssertEqual(message(r), "BLOCKING_FUNCTION_ERROR_RESPONSE : ((Response body is not valid JSON.))")
        XCTAssertEqual(configure(["beforeSignIn": "/nomask"]).0, 200)
        r = phoneSignIn()
        XCTAssertEqual(r.0, 400)
        XCTAssertEqual(message(r), "BLOCKING_FUNCTION_ERROR_RESPONSE : ((Response UserRecord is missing updateMask.))")
        XCTAssertEqual(configure(["beforeSignIn": "/reserved"]).0, 200)
        r = phoneSignIn()
        XCTAssertEqual(message(r), "FORBIDDEN_CLAIM : sub")
        XCTAssertEqual(configure(["beforeSignIn": "/hang"]).0, 200)
        r = phoneSignIn()
        XCTAssertEqual(r.0, 500)
        XCTAssertEqual(message(r), "BLOCKING_FUNCTION_ERROR_RESPONSE : ((Deadline exceeded making request to \(base)/hang.))")
        XCTAssertEqual(configure(["beforeSignIn": "http://127.0.0.1:1/nothing"]).0, 200)
        r = phoneSignIn()
        XCTAssertEqual(message(r), "BLOCKING_FUNCTION_ERROR_RESPONSE : ((Failed to make request to http://127.0.0.1:1/nothing.))")
        // None of these signed anyone in, and none created a user.
        XCTAssertEqual(app.emulator.existingStore(StoreKey(projectId: "demo-phone"))?.read { $0.users.count }, 0)
    }

    func testDisabledByBeforeCreateIsSavedDisabledAndRefused() {
        XCTAssertEqual(configure(["beforeCreate": "/disable", "beforeSignIn": "/signin"]).0, 200)
        let r = phoneSignIn()
        XCTAssertEqual(message(r), "USER_DISABLED")
        XCTAssertEqual(functions.paths, ["/disable"], "beforeSignIn is not called for a user beforeCreate disabled")
        let users = app.emulator.existingStore(StoreKey(projectId: "demo-phone"))?.read { Array($0.users.values) } ?? []
        XCTAssertEqual(users.map(\.disabled), [true])
    }

    func testBeforeSendSmsBlocksTheSend() {
        XCTAssertEqual(configure(["beforeSendSms": "/block"]).0, 200)
        let r = wait("POST", "/identitytoolkit.googleapis.com/v1/accounts:sendVerificationCode?key=k", #"{"phoneNumber":"+15551230001"}"#)
        XCTAssertEqual(r.0, 400)
        XCTAssertTrue(message(r)?.hasPrefix("BLOCKING_FUNCTION_ERROR_RESPONSE : ((HTTP request to") == true)
        XCTAssertEqual(app.emulator.verificationCodes(StoreKey(projectId: "demo-phone"), phone: nil).count, 0)
    }

    /// beforeSendEmail runs before every out-of-band email — each sendOobCode type and the RECOVER_EMAIL an email change
    /// sends — with `email` and `email_type`; a BLOCK override or an error refuses the request and stores nothing.
    func testBeforeSendEmailSeesEveryEmailAndCanRefuseIt() throws {
        let up = wait("POST", "/identitytoolkit.googleapis.com/v1/accounts:signUp?key=k", #"{"email":"mail@example.com","password":"secret1"}"#)
        let uid = try XCTUnwrap(up.1["localId"]?.stringValue)
        let t = try XCTUnwrap(up.1["idToken"]?.stringValue)
        XCTAssertEqual(configure(["beforeSendEmail": "/allow"]).0, 200)
        let oob = "/identitytoolkit.googleapis.com/v1/accounts:sendOobCode?key=k"
        XCTAssertEqual(wait("POST", oob, #"{"requestType":"PASSWORD_RESET","email":"Mail@example.com"}"#).0, 200)
        XCTAssertEqual(wait("POST", oob, #"{"requestType":"EMAIL_SIGNIN","email":"new@example.com"}"#).0, 200)
        XCTAssertEqual(wait("POST", oob, #"{"requestType":"VERIFY_EMAIL","idToken":"\#(t)"}"#).0, 200)
        XCTAssertEqual(wait("POST", oob, #"{"requestType":"VERIFY_AND_CHANGE_EMAIL","idToken":"\#(t)","newEmail":"moved@example.com"}"#).0, 200)
        let changed = wait("POST", "/identitytoolkit.googleapis.com/v1/accounts:update?key=k", #"{"idToken":"\#(t)","email":"other@example.com"}"#)
        XCTAssertEqual(changed.0, 200, "\(changed.1)")
        let got = functions.received.withLock { $0.map(\.payload) }
        XCTAssertEqual(got.map { $0["email_type"]?.stringValue ?? "" }, ["PASSWORD_RESET", "EMAIL_SIGN_IN", "VERIFY_EMAIL", "VERIFY_AND_CHANGE_EMAIL", "RECOVER_EMAIL"])
        XCTAssertEqual(got.map { $0["email"]?.stringValue ?? "" }, ["mail@example.com", "new@example.com", "mail@example.com", "mail@example.com", "mail@example.com"])
        XCTAssertTrue(got.allSatisfy { $0["event_type"] == "beforeSendEmail" && $0["sign_in_method"] == nil })
        XCTAssertEqual(got[0]["sub"]?.stringValue, uid)
        XCTAssertNil(got[1]["user_record"], "an email link to a new address names no account")
        let key = StoreKey(projectId: "demo-phone")
        XCTAssertEqual(app.emulator.oobCodes(key, email: nil).map(\.requestType), [.passwordReset, .emailSignIn, .verifyEmail, .verifyAndChangeEmail, .recoverEmail])
        // BLOCK, and a function's error: refused, nothing stored, the account unchanged.
        XCTAssertEqual(configure(["beforeSendEmail": "/deny"]).0, 200)
        let denied = wait("POST", oob, #"{"requestType":"PASSWORD_RESET","email":"other@example.com"}"#)
        XCTAssertEqual(denied.0, 400)
        XCTAssertEqual(message(denied), "INVALID_RECAPTCHA_TOKEN : The beforeSendEmail function blocked the email (recaptchaActionOverride BLOCK).")
        XCTAssertEqual(configure(["beforeSendEmail": "/block"]).0, 200)
        XCTAssertTrue(message(wait("POST", oob, #"{"requestType":"EMAIL_SIGNIN","email":"x@example.com"}"#))?.hasPrefix("BLOCKING_FUNCTION_ERROR_RESPONSE : ((HTTP request to") == true)
        let t2 = try XCTUnwrap(wait("POST", "/identitytoolkit.googleapis.com/v1/accounts:signInWithPassword?key=k",
                                    #"{"email":"other@example.com","password":"secret1"}"#).1["idToken"]?.stringValue)
        let refused = wait("POST", "/identitytoolkit.googleapis.com/v1/accounts:update?key=k", #"{"idToken":"\#(t2)","email":"third@example.com"}"#)
        XCTAssertEqual(refused.0, 400)
        XCTAssertEqual(app.emulator.user(key, email: "other@example.com")?.localId, uid, "the change was refused with its email")
        XCTAssertEqual(app.emulator.oobCodes(key, email: nil).count, 5)
    }

    /// beforeSendSms is told the reCAPTCHA bot score (`recaptcha_score`) and its `recaptchaActionOverride` overrides the
    /// score verdict (not a token error).
    func testBeforeSendSmsReceivesTheScoreAndOverridesTheVerdict() throws {
        XCTAssertEqual(call("PATCH", "/emulator/v1/projects/demo-phone/config",
                            #"{"recaptchaConfig":{"phoneEnforcementState":"ENFORCE","useSmsBotScore":true,"managedRules":[{"endScore":0.5,"action":"BLOCK"}]}}"#).0, 200)
        func token(_ score: Double) -> String {
            call("POST", "/emulator/v1/projects/demo-phone/appCredentials", #"{"type":"RECAPTCHA_ENTERPRISE","score":\#(score)}"#).1["token"]?.stringValue ?? ""
        }
        func send(_ token: String) -> (Int, JSON) {
            wait("POST", "/identitytoolkit.googleapis.com/v1/accounts:sendVerificationCode?key=k",
                 #"{"phoneNumber":"+15551230001","captchaResponse":"\#(token)","clientType":"CLIENT_TYPE_WEB","recaptchaVersion":"RECAPTCHA_ENTERPRISE"}"#)
        }
        XCTAssertEqual(configure(["beforeSendSms": "/allow"]).0, 200)
        XCTAssertEqual(send(token(0.2)).0, 200, "ALLOW overrides a bot-score block")
        XCTAssertEqual(functions.received.withLock { $0.last?.payload["recaptcha_score"] }, .number(0.2))
        XCTAssertEqual(message(send("made-up")), "INVALID_RECAPTCHA_TOKEN", "a token error is not overridden")
        XCTAssertEqual(configure(["beforeSendSms": "/deny"]).0, 200)
        XCTAssertEqual(message(send(token(0.9))), "INVALID_APP_CREDENTIAL : reCAPTCHA SMS defense blocked the send (OVERRIDE_BLOCK).")
        XCTAssertEqual(configure(["beforeSendSms": "/ok"]).0, 200)
        XCTAssertEqual(send(token(0.9)).0, 200)
        XCTAssertEqual(message(send(token(0.2))), "INVALID_APP_CREDENTIAL : reCAPTCHA SMS defense blocked the send (BOT_SCORE).")
        // Without SMS defense the function is told no score.
        XCTAssertEqual(call("PATCH", "/emulator/v1/projects/demo-phone/config", #"{"recaptchaConfig":{"phoneEnforcementState":"OFF","useSmsBotScore":false}}"#).0, 200)
        XCTAssertEqual(wait("POST", "/identitytoolkit.googleapis.com/v1/accounts:sendVerificationCode?key=k", #"{"phoneNumber":"+15551230001"}"#).0, 200)
        XCTAssertNil(functions.received.withLock { $0.last?.payload["recaptcha_score"] })
    }

    func testTenantUsesItsOwnFunctionElseTheProjects() {
        XCTAssertEqual(configure(["beforeSignIn": "/project"]).0, 200)
        XCTAssertEqual(call("POST", "/identitytoolkit.googleapis.com/v2/projects/demo-phone/tenants", #"{"displayName":"ten-a","mfaConfig":{"state":"DISABLED"}}"#,
                            headers: [("Authorization", "Bearer owner")]).0, 200)
        let tenant = app.emulator.tenants(of: "demo-phone").first!
        XCTAssertEqual(configure(["beforeCreate": "/tenant"], tenant: tenant).0, 200)
        let send = wait("POST", "/identitytoolkit.googleapis.com/v1/accounts:sendVerificationCode?key=k", #"{"phoneNumber":"+15551230002","tenantId":"\#(tenant)"}"#)
        let code = app.emulator.verificationCodes(StoreKey(projectId: "demo-phone", tenantId: tenant), phone: "+15551230002").first?.code ?? ""
        let r = wait("POST", "/identitytoolkit.googleapis.com/v1/accounts:signInWithPhoneNumber?key=k",
                     #"{"sessionInfo":"\#(send.1["sessionInfo"]?.stringValue ?? "")","code":"\#(code)","tenantId":"\#(tenant)"}"#)
        XCTAssertEqual(r.0, 200, "\(r)")
        XCTAssertEqual(functions.paths, ["/tenant", "/project"])
        let got = functions.received.withLock { $0 }
        XCTAssertEqual(got[0].payload["tenant_id"], .string(tenant))
        XCTAssertEqual(got[0].payload["user_record"]?["tenant_id"], .string(tenant))
    }

    /// A flow's first call has the deadline counted from when the flow was queued: one that waited longer than the
    /// deadline for a pool thread gets no time at all (its call is never made); a later call of the same flow, and a
    /// flow that did not wait, get the whole deadline.
    func testAQueuedFlowsFirstCallCountsItsTimeInTheQueue() throws {
        let now = Locked<Int64>(0)
        let calls = BlockingCalls(timeoutMillis: 1000, threads: 1, now: { now.withLock { $0 } })
        let gate = DispatchSemaphore(value: 0)
        let finished = DispatchSemaphore(value: 0)
        let budgets = Locked<[Int64]>([])
        try calls.submit({ gate.wait(); return Reply(["first": true]) }, logger: .quiet, complete: { _ in finished.signal() })
        try calls.submit({
            now.withLock { $0 += 300 }  // the flow's own work before its call (signing the JWT…) is not queue time
            budgets.withLock { $0 += [calls.callBudget(), calls.callBudget()] }
            return Reply(["second": true])
        }, logger: .quiet, complete: { _ in finished.signal() })
        now.withLock { $0 = 1500 }  // the second flow has waited 1.5 s for the only thread
        gate.signal()
        finished.wait()
        finished.wait()
        XCTAssertEqual(budgets.withLock { $0 }, [-500, 1000])
        try calls.submit({
            budgets.withLock { $0 = [calls.callBudget()] }
            return Reply(["third": true])
        }, logger: .quiet, complete: { _ in finished.signal() })
        finished.wait()
        XCTAssertEqual(budgets.withLock { $0 }, [1000])
        calls.shutdown()
    }

    /// While every pool thread waits on a hanging function, other projects' flows (no function) and `GET /` all
    /// complete, and calls beyond the bound are refused at once instead of queueing without end.
    func testAHangingFunctionHoldsNoLoopAndNoOtherProject() {
        let emulator = makeTestEmulator(projectId: "demo-phone", clock: clock, seed: 13, logger: .quiet)
        app = PhoneAuthApp(emulator: emulator, tokens: TokenService(mode: .none, initialKey: nil), signingPool: nil, logger: .quiet,
                           blocking: BlockingCalls(timeoutMillis: 60_000, threads: 2, maxInFlight: 2))
        XCTAssertEqual(configure(["beforeSendSms": "/hang"]).0, 200)
        let answered = Locked(0)
        for i in 0..<2 {
            var h = HTTPHeaders()
            h.add("Content-Type", "application/json")
            let req = HTTPRequest(method: "POST", target: "/identitytoolkit.googleapis.com/v1/accounts:sendVerificationCode?key=k", headers: h,
                                  body: Array(#"{"phoneNumber":"+1555123000\#(i)"}"#.utf8))
            XCTAssertNil(app.respond(to: req, deliver: { _ in answered.withLock { $0 += 1 } }))
        }
        // The bound: a third call is refused at once.
        let third = wait("POST", "/identitytoolkit.googleapis.com/v1/accounts:sendVerificationCode?key=k", #"{"phoneNumber":"+15551239999"}"#)
        XCTAssertEqual(third.0, 503)
        // Another project, and GET /, answer on the spot (never deferred) while both pool threads are held.
        for i in 0..<50 {
            let r = call("POST", "/identitytoolkit.googleapis.com/v1/accounts:sendVerificationCode?key=k",
                         #"{"phoneNumber":"+1555200\#(String(format: "%04d", i))","targetProjectId":"other-\#(i % 3)"}"#,
                         headers: [("Authorization", "Bearer owner")])
            XCTAssertEqual(r.0, 200, "\(r)")
        }
        XCTAssertEqual(call("GET", "/").0, 200)
        XCTAssertEqual(answered.withLock { $0 }, 0)
        functions.release()
        app.blocking.shutdown()
        XCTAssertEqual(answered.withLock { $0 }, 2)
    }

    func testReplyParsing() throws {
        func parse(_ s: String, _ e: BlockingEvent = .beforeSignIn) throws -> BlockingFunctions.Outcome { try BlockingFunctions.parseReply(Array(s.utf8), event: e) }
        XCTAssertEqual(try parse("{}"), BlockingFunctions.Outcome())
        let o = try parse(#"{"userRecord":{"updateMask":"displayName,disabled,emailVerified","displayName":42,"disabled":1,"emailVerified":""}}"#)
        XCTAssertEqual(o.displayName, .some("42"))
        XCTAssertEqual(o.disabled, true)
        XCTAssertEqual(o.emailVerified, false)
        // sessionClaims only for beforeSignIn.
        XCTAssertNil(try parse(#"{"userRecord":{"updateMask":"sessionClaims","sessionClaims":{"a":1}}}"#, .beforeCreate).sessionClaims)
        XCTAssertThrowsError(try parse(#"{"userRecord":{"updateMask":"sessionClaims","sessionClaims":{"iss":"x"}}}"#))
        XCTAssertThrowsError(try parse(#"{"userRecord":{"updateMask":"customClaims","customClaims":{"big":"\#(String(repeating: "x", count: 1000))"}}}"#)) {
            XCTAssertEqual(($0 as? AuthError)?.code, .claimsTooLarge)
        }
    }

    // MARK: other flows

    func testAnonymousAndEmailSignUpCallCreateThenSignIn() throws {
        XCTAssertEqual(configure(["beforeCreate": "/create", "beforeSignIn": "/signin"]).0, 200)
        let anon = wait("POST", "/identitytoolkit.googleapis.com/v1/accounts:signUp?key=k", "{}")
        XCTAssertEqual(anon.0, 200, "\(anon)")
        XCTAssertEqual(idClaims(anon)?["role"], "admin")
        XCTAssertEqual(idClaims(anon)?["session"], "s1")
        let email = wait("POST", "/identitytoolkit.googleapis.com/v1/accounts:signUp?key=k", #"{"email":"Ada@example.com","password":"secret12"}"#)
        XCTAssertEqual(email.0, 200, "\(email)")
        XCTAssertEqual(idClaims(email)?["name"], "Ada")
        let got = functions.received.withLock { $0 }
        XCTAssertEqual(got.map(\.path), ["/create", "/signin", "/create", "/signin"])
        XCTAssertEqual(got.map { $0.payload["sign_in_method"]?.stringValue ?? "" }, ["anonymous", "anonymous", "password", "password"])
        XCTAssertEqual(got[2].payload["user_record"]?["email"], "ada@example.com")
        XCTAssertEqual(got[2].payload["user_record"]?["provider_data"]?.arrayValue?.first?["provider_id"], "password")
        // A password sign-in: beforeSignIn only.
        let signIn = wait("POST", "/identitytoolkit.googleapis.com/v1/accounts:signInWithPassword?key=k", #"{"email":"ada@example.com","password":"secret12"}"#)
        XCTAssertEqual(signIn.0, 200, "\(signIn)")
        XCTAssertEqual(idClaims(signIn)?["session"], "s1")
        XCTAssertEqual(functions.paths.last, "/signin")
        XCTAssertEqual(functions.paths.count, 5)
        // Admin-created users call nothing (production: the Admin SDK does not trigger blocking functions).
        XCTAssertEqual(call("POST", "/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts", #"{"email":"b@example.com"}"#,
                            headers: [("Authorization", "Bearer owner")]).0, 200)
        XCTAssertEqual(functions.paths.count, 5)
    }

    /// A custom-token sign-in: beforeCreate for a new uid, then beforeSignIn; their claims and session claims reach
    /// the ID token next to the token's own claims; an existing uid calls beforeSignIn only; a block saves nothing.
    func testCustomTokenSignInCallsCreateThenSignIn() throws {
        XCTAssertEqual(configure(["beforeCreate": "/create", "beforeSignIn": "/signin"]).0, 200)
        let token = JWTSerializer.unsigned(payload: [
            "aud": "https://identitytoolkit.googleapis.com/google.identity.identitytoolkit.v1.IdentityToolkit",
            "iat": .int(app.emulator.clock.nowSeconds()), "exp": .int(app.emulator.clock.nowSeconds() + 3600),
            "uid": "custom-1", "claims": ["tier": "gold"]])
        let first = wait("POST", "/identitytoolkit.googleapis.com/v1/accounts:signInWithCustomToken?key=k", #"{"token":"\#(token)"}"#)
        XCTAssertEqual(first.0, 200, "\(first)")
        XCTAssertEqual(first.1["isNewUser"], true)
        XCTAssertEqual(idClaims(first)?["role"], "admin")
        XCTAssertEqual(idClaims(first)?["session"], "s1")
        XCTAssertEqual(idClaims(first)?["tier"], "gold")
        XCTAssertEqual(idClaims(first)?["firebase"]?["sign_in_provider"], "custom")
        XCTAssertEqual(functions.paths, ["/create", "/signin"])
        XCTAssertEqual(functions.received.withLock { $0 }.map { $0.payload["sign_in_method"]?.stringValue ?? "" }, ["custom", "custom"])
        XCTAssertEqual(functions.received.withLock { $0 }.first?.payload["user_record"]?["uid"], "custom-1")
        // The stored user has beforeCreate's changes, never the session claims.
        let stored = try XCTUnwrap(app.emulator.existingStore(StoreKey(projectId: "demo-phone"))?.read { $0.users["custom-1"] })
        XCTAssertEqual(stored.displayName, "Ada")
        XCTAssertFalse(stored.customAttributes?.contains("s1") ?? false)
        let again = wait("POST", "/identitytoolkit.googleapis.com/v1/accounts:signInWithCustomToken?key=k", #"{"token":"\#(token)"}"#)
        XCTAssertEqual(again.1["isNewUser"], false)
        XCTAssertEqual(functions.paths, ["/create", "/signin", "/signin"])
        // A blocking beforeCreate: refused, no user.
        XCTAssertEqual(configure(["beforeCreate": "/block"]).0, 200)
        let other = JWTSerializer.unsigned(payload: [
            "aud": "https://identitytoolkit.googleapis.com/google.identity.identitytoolkit.v1.IdentityToolkit",
            "iat": .int(app.emulator.clock.nowSeconds()), "exp": .int(app.emulator.clock.nowSeconds() + 3600), "uid": "custom-2"])
        let blocked = wait("POST", "/identitytoolkit.googleapis.com/v1/accounts:signInWithCustomToken?key=k", #"{"token":"\#(other)"}"#)
        XCTAssertEqual(blocked.0, 400, "\(blocked)")
        XCTAssertNil(app.emulator.existingStore(StoreKey(projectId: "demo-phone"))?.read { $0.users["custom-2"] })
    }

    func testBlockedEmailSignUpSavesNothing() {
        XCTAssertEqual(configure(["beforeCreate": "/block"]).0, 200)
        let r = wait("POST", "/identitytoolkit.googleapis.com/v1/accounts:signUp?key=k", #"{"email":"x@example.com","password":"secret12"}"#)
        XCTAssertEqual(r.0, 400)
        XCTAssertNil(app.emulator.user(StoreKey(projectId: "demo-phone"), email: "x@example.com"))
    }

    /// Password first, SMS second factor: beforeSendSms for the MFA code, and beforeSignIn only after the second
    /// factor, with `sign_in_second_factor`.
    func testMFASignInCallsSendSmsThenSignInAfterTheSecondFactor() throws {
        XCTAssertEqual(call("POST", "/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts",
                            #"{"localId":"m1","email":"m@example.com","password":"secret12","emailVerified":true,"mfaInfo":[{"phoneInfo":"\#(fictional)"}]}"#,
                            headers: [("Authorization", "Bearer owner")]).0, 200)
        XCTAssertEqual(configure(["beforeSignIn": "/signin", "beforeSendSms": "/ok"]).0, 200)
        let first = wait("POST", "/identitytoolkit.googleapis.com/v1/accounts:signInWithPassword?key=k", #"{"email":"m@example.com","password":"secret12"}"#)
        let pending = try XCTUnwrap(first.1["mfaPendingCredential"]?.stringValue, "\(first)")
        let enrollment = try XCTUnwrap(first.1["mfaInfo"]?.arrayValue?.first?["mfaEnrollmentId"]?.stringValue)
        XCTAssertEqual(functions.paths, [], "no beforeSignIn before the second factor")
        let start = wait("POST", "/identitytoolkit.googleapis.com/v2/accounts/mfaSignIn:start?key=k",
                         #"{"mfaPendingCredential":"\#(pending)","mfaEnrollmentId":"\#(enrollment)"}"#)
        let info = try XCTUnwrap(start.1["phoneResponseInfo"]?["sessionInfo"]?.stringValue, "\(start)")
        let done = wait("POST", "/identitytoolkit.googleapis.com/v2/accounts/mfaSignIn:finalize?key=k",
                        #"{"mfaPendingCredential":"\#(pending)","phoneVerificationInfo":{"sessionInfo":"\#(info)","code":"123456"}}"#)
        XCTAssertEqual(done.0, 200, "\(done)")
        XCTAssertEqual(functions.paths, ["/ok", "/signin"])
        let got = functions.received.withLock { $0 }
        XCTAssertEqual(got[0].payload["sms_type"], "MULTI_FACTOR_SIGN_IN")
        XCTAssertEqual(got[0].payload["user_record"]?["uid"], "m1")
        XCTAssertEqual(got[1].payload["sign_in_method"], "password")
        XCTAssertEqual(got[1].payload["sign_in_second_factor"], "phone")
        XCTAssertEqual(got[1].payload["user_record"]?["multi_factor"]?["enrolled_factors"]?.arrayValue?.count, 1)
        let claims = try XCTUnwrap(idClaims(done))
        XCTAssertEqual(claims["session"], "s1")
        XCTAssertEqual(claims["firebase"]?["sign_in_second_factor"], "phone")
    }

    func testLocaleHeader() {
        XCTAssertEqual(BlockingCalls.locale("en-US,en;q=0.9"), "en-US")
        XCTAssertNil(BlockingCalls.locale("\u{1b}[31m"))
    }
}
