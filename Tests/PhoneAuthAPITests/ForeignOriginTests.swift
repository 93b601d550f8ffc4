import EmulatorSupport
import HTTPServer
import JWT
@testable import PhoneAuthAPI
import PhoneAuthCore
import XCTest

/// Issue 11 follow-up (red team F1, F2, F4) through the app: reads allocate nothing, a foreign web page creates no
/// tenants, and with `--token-signing none` it cannot present a (forgeable) ID token; every token needs `sub`.
final class ForeignOriginTests: XCTestCase {
    static let signingKey: SigningKey = { try! SigningKey(key: RSAKey.generate(bits: 2048), createdAt: 1_800_000_000) }()
    static let now: Int64 = 1_800_000_000
    var app: PhoneAuthApp!

    func makeApp(signing: TokenSigningMode = .none, maxProjects: Int = 5000, maxTenants: Int = 1000) -> PhoneAuthApp {
        let logger = Logger(label: "t", level: .critical)
        let emulator = Emulator(defaultProjectId: "demo-phone", clock: EmulatorClock(fixedAtMillis: Self.now * 1000), random: SeededRandom(seed: 3),
                                logger: logger, maxProjects: maxProjects, maxTenantsPerProject: maxTenants)
        return PhoneAuthApp(emulator: emulator, tokens: TokenService(mode: signing, initialKey: signing == .rs256 ? Self.signingKey : nil),
                            signingPool: nil, logger: logger)
    }

    override func setUp() { app = makeApp() }

    @discardableResult
    func send(_ method: String, _ target: String, _ body: String = "", _ headers: [(String, String)] = []) -> HTTPResponse {
        var h = HTTPHeaders()
        h.add("Host", "127.0.0.1:9099")
        for (k, v) in headers { h.add(k, v) }
        return app.respond(to: HTTPRequest(method: method, target: target, headers: h, body: Array(body.utf8)), context: .detached)
            ?? HTTPResponse(status: 0)
    }

    func itk(_ op: String, _ body: String, origin: String? = nil) -> HTTPResponse {
        var h = [("Content-Type", "text/plain")]
        if let origin { h.append(("Origin", origin)) }
        return send("POST", "/identitytoolkit.googleapis.com/v1/accounts:\(op)?key=x", body, h)
    }

    func json(_ r: HTTPResponse) -> JSON { (try? JSONParser.parse(r.body)) ?? .null }
    func message(_ r: HTTPResponse) -> String? { json(r)["error"]?["message"]?.stringValue }
    func header(_ r: HTTPResponse, _ name: String) -> String? { r.headers.first { HTTPHeaders.equalsIgnoringASCIICase($0.0, name) }?.1 }

    func token(_ claims: JSONObject) -> String { JWTSerializer.unsigned(payload: claims) }
    func claims(uid: String, tenant: String? = nil) -> JSONObject {
        var c: JSONObject = ["iss": "https://securetoken.google.com/demo-phone", "aud": "demo-phone", "iat": .int(Self.now), "exp": .int(Self.now + 3600),
                             "auth_time": .int(Self.now), "sub": .string(uid), "user_id": .string(uid)]
        if let tenant { c["firebase"] = ["tenant": .string(tenant)] }
        return c
    }

    // MARK: F1

    /// `<img src>` GETs (no Origin, no CORS needed) on new projects and tenants: none is created, the caps stay free.
    func testGETsOfTheEmulatorAPIAllocateNoProjectsOrTenants() {
        app = makeApp(maxProjects: 3, maxTenants: 2)
        for i in 0..<100 {
            for path in ["/emulator/v1/projects/img-p\(i)/verificationCodes", "/emulator/v1/projects/img-q\(i)/pushNotifications",
                         "/emulator/v1/projects/img-w\(i)/verificationCodes:wait?phoneNumber=%2B15550001111&timeoutSeconds=0",
                         "/emulator/v1/projects/demo-phone/tenants/img-t\(i)/verificationCodes",
                         "/emulator/v1/projects/demo-phone/tenants/img-u\(i)/pushNotifications",
                         "/emulator/v1/projects/demo-phone/tenants/img-v\(i)/verificationCodes:wait?phoneNumber=%2B15550001111&timeoutSeconds=0",
                         "/identitytoolkit.googleapis.com/v2/recaptchaConfig?key=x&tenantId=img-r\(i)"] {
                let r = send("GET", path)
                XCTAssertTrue([0, 200].contains(r.status), "\(path): \(r.status)")  // 0: answered through the deferred path (:wait)
            }
        }
        XCTAssertEqual(send("GET", "/emulator/v1/projects/img-p1/verificationCodes").body, Array(#"{"verificationCodes":[]}"#.utf8))
        XCTAssertEqual(send("GET", "/emulator/v1/projects/img-p1/pushNotifications").body, Array(#"{"pushNotifications":[]}"#.utf8))
        XCTAssertEqual(app.emulator.projectCount, 1)
        XCTAssertEqual(app.emulator.tenants(of: "demo-phone"), [])
        // Admin reads (firebase-admin's get_user / list_users) on new tenants allocate nothing either.
        let owner = [("Authorization", "Bearer owner")]
        XCTAssertEqual(send("POST", "/identitytoolkit.googleapis.com/v1/projects/demo-phone/tenants/adm-t/accounts:lookup", #"{"localId":["x"]}"#, owner).status, 200)
        XCTAssertEqual(send("GET", "/identitytoolkit.googleapis.com/v1/projects/demo-phone/tenants/adm-u/accounts:batchGet", "", owner).status, 200)
        XCTAssertEqual(send("POST", "/identitytoolkit.googleapis.com/v1/projects/demo-phone/tenants/adm-v/accounts:query", "{}", owner).status, 200)
        XCTAssertEqual(app.emulator.tenants(of: "demo-phone"), [])
        // The legitimate client is not locked out.
        XCTAssertEqual(send("POST", "/identitytoolkit.googleapis.com/v1/projects/my-app/accounts", "{}", owner).status, 200)
        XCTAssertEqual(itk("signUp", #"{"tenantId":"tenant-abc12"}"#).status, 200)
    }

    // MARK: F2

    /// A foreign page's client POSTs cannot create tenants (so cannot fill the cap, in memory or on disk); no-Origin
    /// clients and allowed origins still create on first use, and the foreign page may use existing tenants.
    func testAForeignOriginCreatesNoTenants() {
        app = makeApp(maxTenants: 3)
        for i in 0..<50 {
            let r = itk("signUp", #"{"tenantId":"spam-\#(i)"}"#, origin: "http://evil.example")
            XCTAssertEqual(r.status, 404)
            XCTAssertEqual(json(r)["error"]?["status"], "NOT_FOUND")
            XCTAssertEqual(message(r)?.hasPrefix("TENANT_NOT_FOUND : "), true)
        }
        XCTAssertEqual(itk("sendVerificationCode", #"{"phoneNumber":"+15550001111","tenantId":"spam-x"}"#, origin: "http://evil.example").status, 404)
        XCTAssertEqual(app.emulator.tenants(of: "demo-phone"), [])
        XCTAssertEqual(itk("signUp", #"{"tenantId":"from-sdk"}"#).status, 200)
        XCTAssertEqual(itk("signUp", #"{"tenantId":"from-localhost"}"#, origin: "http://localhost:3000").status, 200)
        XCTAssertEqual(itk("signUp", #"{"tenantId":"from-sdk"}"#, origin: "http://evil.example").status, 200, "existing tenants stay usable")
        XCTAssertEqual(app.emulator.tenants(of: "demo-phone"), ["from-localhost", "from-sdk"])
        // createOnFirstUse false still answers TENANT_NOT_FOUND for everyone.
        XCTAssertEqual(send("PATCH", "/emulator/v1/projects/demo-phone/config", #"{"tenants":{"createOnFirstUse":false}}"#).status, 200)
        XCTAssertEqual(message(itk("signUp", #"{"tenantId":"another"}"#)), "TENANT_NOT_FOUND")
    }

    /// No-Origin clients whose requests fail leave empty tenants behind: they do not lock legitimate tenants out.
    func testEmptyTenantsLeftByFailedRequestsDoNotFillTheCap() {
        app = makeApp(maxTenants: 3)
        for i in 0..<200 { XCTAssertEqual(itk("sendVerificationCode", #"{"phoneNumber":"bad","tenantId":"junk-\#(i)"}"#).status, 400) }
        XCTAssertEqual(itk("signUp", #"{"tenantId":"real-1"}"#).status, 200)
        XCTAssertEqual(itk("signUp", #"{"tenantId":"real-2"}"#).status, 200)
        XCTAssertEqual(itk("signUp", #"{"tenantId":"real-3"}"#).status, 200)
        XCTAssertEqual(app.emulator.tenants(of: "demo-phone"), ["real-1", "real-2", "real-3"])
        XCTAssertEqual(message(itk("signUp", #"{"tenantId":"real-4"}"#)), "QUOTA_EXCEEDED : Too many tenants: a project holds at most 3 tenants.")
    }

    // MARK: F4

    /// `none` mode: a foreign page forging an unsigned token for any uid is refused before anything runs (403, no CORS
    /// headers); SDKs (no Origin) and allowed origins keep working.
    func testUnsignedTokensFromAForeignOriginAreRefused() {
        XCTAssertEqual(send("POST", "/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts",
                            #"{"localId":"victim","phoneNumber":"+15550001111"}"#, [("Authorization", "Bearer owner")]).status, 200)
        let forged = token(claims(uid: "victim"))
        for (op, body) in [("lookup", #"{"idToken":"\#(forged)"}"#), ("update", #"{"idToken":"\#(forged)","displayName":"owned"}"#),
                           ("delete", #"{"idToken":"\#(forged)"}"#), ("signUp", #"{"idToken":"\#(forged)","email":"a@evil.example","password":"secret12"}"#),
                           ("signInWithPhoneNumber", #"{"idToken":"\#(forged)","sessionInfo":"x","code":"1"}"#),
                           ("lookup", #"{"idToken":123}"#)] {
            let r = itk(op, body, origin: "http://evil.example")
            XCTAssertEqual(r.status, 403, op)
            XCTAssertEqual(json(r)["error"]?["status"], "PERMISSION_DENIED", op)
            XCTAssertNil(header(r, "Access-Control-Allow-Origin"), op)
        }
        let legacy = send("POST", "/www.googleapis.com/identitytoolkit/v3/relyingparty/getAccountInfo?key=x", #"{"idToken":"\#(forged)"}"#,
                          [("Origin", "https://evil.example")])
        XCTAssertEqual(legacy.status, 403)
        XCTAssertEqual(app.emulator.existingStore(StoreKey(projectId: "demo-phone"))?.read { $0.users["victim"]?.displayName }, .some(nil))
        // Without an Origin (SDKs, curl) and from allowed origins: as before.
        XCTAssertEqual(json(itk("lookup", #"{"idToken":"\#(forged)"}"#))["users"]?.arrayValue?.first?["localId"], "victim")
        XCTAssertEqual(itk("lookup", #"{"idToken":"\#(forged)"}"#, origin: "http://localhost:3000").status, 200)
        // A foreign origin without a token keeps the open client endpoints (as production).
        XCTAssertEqual(itk("signUp", "{}", origin: "http://evil.example").status, 200)
        // RS256 tokens cannot be forged: a foreign origin may present them (the JS SDK on any origin does).
        app = makeApp(signing: .rs256)
        let signed = json(itk("signUp", "{}"))["idToken"]!.stringValue!
        XCTAssertEqual(itk("lookup", #"{"idToken":"\#(signed)"}"#, origin: "http://evil.example").status, 200)
    }

    /// Every accepted token names its user in `sub` (non-empty string, ≤ 128 characters, equal to `user_id` when that is
    /// present), in every signing mode: a token without `sub` is not accepted through `user_id`.
    func testTokensNeedASubject() throws {
        for mode in [TokenSigningMode.none, .rs256] {
            let service = TokenService(mode: mode, initialKey: Self.signingKey)
            func verify(_ c: JSONObject) -> String? {
                let t = mode == .none ? token(c) : try! Self.signingKey.sign(payload: c)
                return try? service.verify(t, projectId: "demo-phone", nowSeconds: Self.now).localId
            }
            XCTAssertEqual(verify(claims(uid: "victim")), "victim", "\(mode)")
            var c = claims(uid: "victim")
            c["user_id"] = nil
            XCTAssertEqual(verify(c), "victim", "\(mode): sub alone")
            c = claims(uid: "victim")
            c["sub"] = nil
            XCTAssertNil(verify(c), "\(mode): user_id without sub")
            for bad: JSON in ["", .int(7), ["victim"], .null, .string(String(repeating: "v", count: 129))] {
                c = claims(uid: "victim")
                c["sub"] = bad
                XCTAssertNil(verify(c), "\(mode): sub \(bad)")
            }
            c = claims(uid: "victim")
            c["sub"] = .string(String(repeating: "v", count: 128))
            c["user_id"] = nil
            XCTAssertNotNil(verify(c), "\(mode): 128 characters")
            c = claims(uid: "victim")
            c["user_id"] = "someone-else"
            XCTAssertNil(verify(c), "\(mode): sub and user_id differ")
            c["user_id"] = .int(1)
            XCTAssertNil(verify(c), "\(mode): user_id not a string")
        }
    }
}
