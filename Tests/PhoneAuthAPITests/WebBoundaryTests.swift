import EmulatorSupport
import HTTPServer
import JWT
@testable import PhoneAuthAPI
import PhoneAuthCore
import XCTest

/// The browser boundary (issue 11): the pure Host/Origin decision, route classes, and the app refusing before any
/// handler runs.
final class WebBoundaryTests: XCTestCase {
    // MARK: the pure decision

    func testTheHostFastPathAgreesWithTheParser() {
        // The byte-level check for `a.b.c.d[:port]` / `localhost[:port]` must never accept what the general parser
        // refuses, nor call something an IP literal or localhost that it is not.
        var values = ["127.0.0.1", "127.0.0.1:9099", "LOCALHOST:80", "localhost", "localhost:", "localhostx", "localhost.:1",
                      "0.0.0.0:0", "255.255.255.255:65535", "256.1.1.1", "1.2.3", "1.2.3.4.5", "1..2.3", "01.2.3.4",
                      "1.2.3.4:65536", "1.2.3.4:", "1.2.3.4:123456", "1.2.3.4:+1", "1.2.3.4 ", " 1.2.3.4", "0001.2.3.4",
                      "1.2.3.4:-1", "[::1]:9099", "10.0.2.2:9099", "auth:9099", ""]
        // A fixed pseudo-random sample (SplitMix64, seed 42) of short strings over the characters that matter.
        var state: UInt64 = 42
        func next() -> Int {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return Int(truncatingIfNeeded: (z ^ (z >> 31)) >> 1)
        }
        let alphabet = Array("0123456789.:l")
        for _ in 0..<20_000 {
            values.append(String((0..<(1 + next() % 16)).map { _ in alphabet[next() % alphabet.count] }))
        }
        for v in values where WebBoundary.isLoopbackOrIPv4Authority(v) {
            guard let (name, _, isIP) = WebBoundary.parseAuthority(v) else { return XCTFail("fast path accepted \(v), the parser refuses it") }
            XCTAssertTrue(isIP || name == "localhost", v)
        }
        XCTAssertTrue(WebBoundary.isLoopbackOrIPv4Authority("127.0.0.1:9099"))
        XCTAssertTrue(WebBoundary.isLoopbackOrIPv4Authority("LocalHost:3000"))
        XCTAssertFalse(WebBoundary.isLoopbackOrIPv4Authority("256.0.0.1"))
        XCTAssertFalse(WebBoundary.isLoopbackOrIPv4Authority("evil.example"))
    }

    func testHostTable() throws {
        let loopback = WebBoundary()
        let wildcard = try WebBoundary(bindHost: "0.0.0.0")
        let wildcard6 = try WebBoundary(bindHost: "::")
        let extra = try WebBoundary(bindHost: "127.0.0.1", allowHosts: ["dev.example.test", "Pinned.Example:8443", "*.ngrok.test"])
        let any = try WebBoundary(bindHost: "127.0.0.1", allowHosts: ["*"])
        // (Host, loopback bind, wildcard bind, with --allow-host)
        let cases: [(String, Bool, Bool, Bool)] = [
            ("localhost", true, true, true),
            ("localhost:9099", true, true, true),
            ("LOCALHOST:9099", true, true, true),
            ("localhost.:9099", true, true, true),
            ("127.0.0.1:9099", true, true, true),
            ("127.42.0.7:1", true, true, true),
            ("[::1]:9099", true, true, true),
            ("[::1]", true, true, true),
            ("10.0.2.2:9099", true, true, true),           // the Android emulator's address for the host
            ("192.168.1.20:9099", true, true, true),       // a phone on the LAN uses the machine's IP
            ("[fe80::1]:9099", true, true, true),
            ("evil.example", false, false, false),         // DNS rebinding: a name the attacker controls
            ("evil.example:9099", false, false, false),
            ("localhost.evil.example:9099", false, false, false),
            ("127.0.0.1.evil.example", false, false, false),
            ("auth:9099", false, true, false),             // single label (Compose service): only on a wildcard bind
            ("dev.example.test:9099", false, false, true),
            ("DEV.example.test", false, false, true),
            ("pinned.example:8443", false, false, true),
            ("pinned.example:9099", false, false, false),  // allowed only on its port
            ("a.ngrok.test", false, false, true),
            ("ngrok.test", false, false, false),
            ("", false, false, false),
            ("localhost:", false, false, false),
            ("localhost:99999", false, false, false),
            ("localhost:abc", false, false, false),
            ("local host", false, false, false),
            ("[::1", false, false, false),
            ("[evil.example]", false, false, false),
            ("localhost\u{0}.evil.example", false, false, false),
            ("user@localhost", false, false, false),
        ]
        for (host, l, w, e) in cases {
            XCTAssertEqual(loopback.hostAllowed(host), l, "loopback bind, Host \(host)")
            XCTAssertEqual(wildcard.hostAllowed(host), w, "0.0.0.0 bind, Host \(host)")
            XCTAssertEqual(wildcard6.hostAllowed(host), w, ":: bind, Host \(host)")
            XCTAssertEqual(extra.hostAllowed(host), e, "--allow-host, Host \(host)")
            XCTAssertEqual(any.hostAllowed(host), WebBoundary.parseAuthority(host) != nil, "--allow-host *, Host \(host)")
        }
    }

    func testOriginTable() throws {
        let b = try WebBoundary(bindHost: "127.0.0.1", allowOrigins: ["https://admin.example.test", "http://192.168.1.20:3000/",
                                                                      "chrome-extension://abcdef", "HTTP://Upper.Example.Test:80"])
        // (Origin, Host of the request, allowed)
        let cases: [(String, String?, Bool)] = [
            ("http://localhost:3000", "127.0.0.1:9099", true),        // the JS SDK page
            ("http://localhost", nil, true),
            ("https://localhost:8443", nil, true),
            ("http://127.0.0.1:5173", nil, true),
            ("http://[::1]:4000", nil, true),
            ("HTTP://LOCALHOST:3000", nil, true),
            ("null", nil, false),                                     // sandboxed frames, file:, redirects
            ("", nil, false),
            ("http://evil.example", "127.0.0.1:9099", false),
            ("https://evil.example:443", nil, false),
            ("http://localhost.evil.example", nil, false),
            ("http://127.0.0.2:3000", nil, false),
            ("ftp://localhost", nil, false),
            ("http://localhost:3000/path", nil, false),
            ("http://user@localhost:3000", nil, false),
            ("file://", nil, false),
            ("https://admin.example.test", nil, true),
            ("https://admin.example.test:443", nil, true),
            ("https://ADMIN.example.test", nil, true),
            ("http://admin.example.test", nil, false),                // scheme matters
            ("https://admin.example.test:8443", nil, false),          // port matters
            ("http://192.168.1.20:3000", nil, true),
            ("http://192.168.1.20:3001", nil, false),
            ("http://upper.example.test", nil, true),
            ("chrome-extension://abcdef", nil, true),
            ("chrome-extension://other", nil, false),
            // The server's own origin: a page it served, addressed by its IP (bound to 0.0.0.0, reached from the LAN).
            ("http://192.168.1.5:9099", "192.168.1.5:9099", true),
            ("http://192.168.1.5:9098", "192.168.1.5:9099", false),
            ("http://192.168.1.5", "192.168.1.5", true),
            ("http://192.168.1.6:9099", "192.168.1.5:9099", false),
        ]
        for (origin, host, allowed) in cases {
            XCTAssertEqual(b.originAllowed(origin, host: host), allowed, "Origin \(origin) Host \(host ?? "-")")
        }
        XCTAssertFalse(WebBoundary().originAllowed("https://admin.example.test", host: nil), "--allow-origin is not a default")
    }

    func testVerdictTable() {
        let b = WebBoundary()
        let evil = "http://evil.example", local = "http://localhost:3000"
        // (hosts, origins, protected, verdict)
        let cases: [([String], [String], Bool, WebBoundary.Verdict)] = [
            ([], [], true, .allow(reflect: nil, trusted: false)),                  // curl, SDKs, HTTP/1.0 without Host
            (["127.0.0.1:9099"], [], true, .allow(reflect: nil, trusted: false)),
            (["127.0.0.1:9099"], [local], true, .allow(reflect: local, trusted: true)),
            (["127.0.0.1:9099"], [evil], true, .refuseOrigin),
            (["127.0.0.1:9099"], ["null"], true, .refuseOrigin),
            (["127.0.0.1:9099"], [local, evil], true, .refuseOrigin),             // two Origin headers: not trusted
            (["127.0.0.1:9099"], [local, local], true, .refuseOrigin),
            (["127.0.0.1:9099"], [evil], false, .allow(reflect: evil, trusted: false)),   // client endpoints: any origin
            (["127.0.0.1:9099"], ["null"], false, .allow(reflect: "null", trusted: false)),
            (["127.0.0.1:9099"], [local, evil], false, .allow(reflect: nil, trusted: false)),
            (["evil.example:9099"], [], false, .refuseHost),
            (["evil.example:9099"], ["http://evil.example:9099"], true, .refuseHost),   // rebinding: same-origin page
            (["localhost:9099", "evil.example"], [], false, .refuseHost),
            (["localhost:9099", "localhost:9099"], [], false, .refuseHost),
        ]
        for (hosts, origins, protected, expected) in cases {
            XCTAssertEqual(b.verdict(hosts: hosts, origins: origins, protected: protected), expected, "\(hosts) \(origins) \(protected)")
        }
    }

    func testSettingsValuesAreValidated() {
        for bad in ["null", "*", "localhost:3000", "http://", "http://x/y", "http://a b", "://x", "http://x:70000"] {
            XCTAssertThrowsError(try WebBoundary(bindHost: "127.0.0.1", allowOrigins: [bad]), bad)
        }
        for bad in ["", "a b", "x:y", "*.", "http://x", "[::1", "x/y", "**"] {
            XCTAssertThrowsError(try WebBoundary(bindHost: "127.0.0.1", allowHosts: [bad]), bad)
        }
        XCTAssertEqual(WebBoundary.normalizeOrigin("HTTPS://Admin.Example:443/"), "https://admin.example")
        XCTAssertEqual(WebBoundary.normalizeOrigin("http://[::1]:80"), "http://[::1]")
        XCTAssertEqual(WebBoundary.normalizeHost("*.Example.Test"), "*.example.test")
        XCTAssertEqual(WebBoundary.normalizeHost("My-Box.local:9099"), "my-box.local:9099")
    }

    // MARK: through the app

    static let signingKey: SigningKey = { try! SigningKey(key: RSAKey.generate(bits: 2048), createdAt: 1_800_000_000) }()
    var app: PhoneAuthApp!

    func makeApp(adminToken: String? = nil, boundary: WebBoundary = WebBoundary()) -> PhoneAuthApp {
        var config = ProjectConfig()
        config.testPhoneNumbers = ["+16505554567": "123456"]
        let emulator = Emulator(defaultProjectId: "demo-phone", projectConfigs: ["demo-phone": config],
                                clock: EmulatorClock(fixedAtMillis: 1_800_000_000_000), random: SeededRandom(seed: 7),
                                logger: Logger(label: "t", level: .critical))
        return PhoneAuthApp(emulator: emulator, tokens: TokenService(mode: .rs256, initialKey: Self.signingKey), signingPool: nil,
                            logger: Logger(label: "t", level: .critical), adminToken: adminToken, boundary: boundary)
    }

    override func setUp() { app = makeApp() }

    @discardableResult
    func send(_ method: String, _ target: String, _ body: String = "", _ headers: [(String, String)] = []) -> HTTPResponse {
        var h = HTTPHeaders()
        for (k, v) in headers { h.add(k, v) }
        // nil: the handler answers later (a long poll), so it did run: status 0 stands for that.
        return app.respond(to: HTTPRequest(method: method, target: target, headers: h, body: Array(body.utf8)), context: .detached)
            ?? HTTPResponse(status: 0)
    }

    func header(_ r: HTTPResponse, _ name: String) -> String? {
        r.headers.first { HTTPHeaders.equalsIgnoringASCIICase($0.0, name) }?.1
    }

    func errorMessage(_ r: HTTPResponse) -> String? { (try? JSONParser.parse(r.body))?["error"]?["message"]?.stringValue }

    /// Concrete requests for every row of the route table: its template with `{project}` = demo-phone, `{tenant}` =
    /// t1, `{file}` = app.js (handler.js for the provider page's), `{snapshot}` = s1 and `{config}` = oidc.one, with
    /// and without its optional group, and at its v3 name; client routes with `?key=k`.
    /// Each is checked to route to its own row, so the table and this list cannot drift apart.
    func requestsForEveryRow() -> [(row: RouteRow, method: String, target: String)] {
        var out: [(RouteRow, String, String)] = []
        for row in Router.rows {
            var paths: [String] = [row.template]
            if let open = row.template.firstIndex(of: "["), let close = row.template.firstIndex(of: "]") {
                let before = row.template[..<open], after = row.template[row.template.index(after: close)...]
                let inner = row.template[row.template.index(after: open)..<close]
                paths = [String(before + after), String(before + inner + after)]
            }
            if let v3 = row.v3 { paths.append(RouteRow.legacyPrefix + v3) }
            let key = row.access == .client || row.access == .apiKey ? "?key=k" : ""
            for path in paths {
                let concrete = path.replacing("{project}", with: "demo-phone").replacing("{tenant?}", with: "t1")
                    .replacing("{tenant}", with: "t1").replacing("{file?}", with: "app.js")
                    .replacing("{file}", with: "handler.js").replacing("{snapshot}", with: "s1").replacing("{config}", with: "oidc.one")
                guard case .route(let r) = Router.match(method: row.method, path: concrete), r.row.template == row.template else {
                    XCTFail("\(row.method) \(concrete) does not route to its row \(row.template)")
                    continue
                }
                out.append((row, row.method, concrete + key))
            }
        }
        return out
    }

    /// Every route class: protected routes refuse another site's Origin whatever the method; client routes do not,
    /// except the two whose handlers refuse web pages themselves. The routes come from the route table (every row),
    /// plus spellings of some of them (percent-encoded, with queries).
    func testEveryRouteIsClassified() {
        // Client routes whose handlers refuse foreign pages (checked below with their own messages).
        let refusePages: Set<String> = ["/identitytoolkit.googleapis.com/v1/accounts:verifyClient",
                                        "/identitytoolkit.googleapis.com/v1/accounts:signInWithCustomToken"]
        let table = requestsForEveryRow()
        XCTAssertEqual(Set(table.map(\.row.template)).count, Set(Router.rows.map(\.template)).count, "every row has a request")
        // The classes themselves: the emulator API and the admin API of a project are protected, whatever a new row says.
        // (The emulator's browser pages are not its API: the email action links and the provider page the SDKs open
        // in a popup or redirect, /emulator/action and /emulator/auth/…, are open as the official emulator's.)
        for row in Router.rows where row.template.hasPrefix("/emulator/v1") || row.template.hasPrefix("/identitytoolkit.googleapis.com/v1/projects/{project}")
            || row.template.hasPrefix("/identitytoolkit.googleapis.com/v2/projects/{project}") {
            XCTAssertTrue(row.access.isProtected, "\(row.method) \(row.template) must be protected")
        }
        let p = "/identitytoolkit.googleapis.com/v1/projects/demo-phone"
        let listedProtected: [(String, String)] = [
            ("GET", "/emulator/v1/projects/demo-phone/verificationCodes"),
            ("DELETE", "/emulator/v1/projects/demo-phone/verificationCodes"),
            ("GET", "/emulator/v1/projects/demo-phone/verificationCodes:wait?phoneNumber=%2B15555550100&timeoutSeconds=0"),
            ("DELETE", "/emulator/v1/projects/demo-phone/accounts"),
            ("GET", "/emulator/v1/projects/demo-phone/config"),
            ("PATCH", "/emulator/v1/projects/demo-phone/config"),
            ("GET", "/emulator/v1/projects/demo-phone/tenants/t1/config"),
            ("GET", "/emulator/v1/projects/demo-phone/pushNotifications"),
            ("POST", "/emulator/v1/projects/demo-phone/appCredentials"),
            ("POST", "/emulator/v1/projects/demo-phone:export"),
            ("GET", "/emulator/v1/clock"),
            ("POST", "/emulator/v1/clock:advance"),
            ("POST", "/emulator/v1/clock:reset"),
            ("POST", "/emulator/v1/keys:rotate"),
            ("GET", "/%65mulator/v1/clock"),                        // percent-encoded path segment: still the emulator API
            ("POST", p + "/accounts"),
            ("POST", p + "/accounts:lookup"),
            ("POST", p + "/accounts:update"),
            ("POST", p + "/accounts:delete"),
            ("POST", p + "/accounts:batchDelete"),
            ("GET", p + "/accounts:batchGet"),
            ("POST", p + "/accounts:query"),
            ("POST", p + "/accounts:batchCreate"),
            ("POST", p + "/tenants/t1/accounts:lookup"),
            ("GET", "/identitytoolkit.googleapis.com/v2/projects/demo-phone/config"),
            ("PATCH", "/identitytoolkit.googleapis.com/v2/projects/demo-phone/config"),
            ("GET", "/identitytoolkit.googleapis.com/v2/projects/demo-phone/tenants"),
            ("POST", "/identitytoolkit.googleapis.com/v2/projects/demo-phone/tenants"),
            ("GET", "/identitytoolkit.googleapis.com/v2/projects/demo-phone/tenants/t1"),
            ("PATCH", "/identitytoolkit.googleapis.com/v2/projects/demo-phone/tenants/t1"),
            ("DELETE", "/identitytoolkit.googleapis.com/v2/projects/demo-phone/tenants/t1"),
        ]
        let listedClient: [(String, String)] = [
            ("GET", "/"),
            ("POST", "/identitytoolkit.googleapis.com/v1/accounts:sendVerificationCode?key=k"),
            ("POST", "/identitytoolkit.googleapis.com/v1/accounts:signInWithPhoneNumber?key=k"),
            ("POST", "/identitytoolkit.googleapis.com/v1/accounts:signUp?key=k"),
            ("POST", "/identitytoolkit.googleapis.com/v1/accounts:lookup?key=k"),
            ("POST", "/identitytoolkit.googleapis.com/v1/accounts:update?key=k"),
            ("POST", "/identitytoolkit.googleapis.com/v1/accounts:delete?key=k"),
            ("GET", "/identitytoolkit.googleapis.com/v1/recaptchaParams?key=k"),
            ("GET", "/identitytoolkit.googleapis.com/v1/projects?key=k"),
            ("GET", "/identitytoolkit.googleapis.com/v2/recaptchaConfig?key=k"),
            ("POST", "/www.googleapis.com/identitytoolkit/v3/relyingparty/sendVerificationCode?key=k"),
            ("POST", "/www.googleapis.com/identitytoolkit/v3/relyingparty/verifyPhoneNumber?key=k"),
            ("POST", "/securetoken.googleapis.com/v1/token?key=k"),
            ("GET", "/www.googleapis.com/robot/v1/metadata/x509/securetoken@system.gserviceaccount.com"),
            ("GET", "/www.googleapis.com/service_accounts/v1/jwk/securetoken@system.gserviceaccount.com"),
            ("GET", "/securetoken.google.com/demo-phone/.well-known/openid-configuration"),
        ]
        let protected = listedProtected + table.filter { $0.row.access.isProtected }.map { ($0.method, $0.target) }
        let client = listedClient + table.filter { !$0.row.access.isProtected && !refusePages.contains($0.row.template) }.map { ($0.method, $0.target) }
        for evil in ["http://evil.example", "null"] {
            for (m, path) in protected {
                for ct in ["text/plain", "application/json", "application/x-www-form-urlencoded"] {
                    let r = send(m, path, "{}", [("Origin", evil), ("Content-Type", ct)])
                    XCTAssertEqual(r.status, 403, "\(m) \(path) from \(evil)")
                    XCTAssertTrue(errorMessage(r)?.hasPrefix("PERMISSION_DENIED : Origin not allowed") ?? false, "\(m) \(path)")
                    XCTAssertNil(header(r, "Access-Control-Allow-Origin"), "\(m) \(path)")
                }
            }
            for (m, path) in client {
                let r = send(m, path, "{}", [("Origin", evil), ("Content-Type", "text/plain")])
                XCTAssertNotEqual(r.status, 403, "\(m) \(path) from \(evil): \(errorMessage(r) ?? "")")
                XCTAssertEqual(header(r, "Access-Control-Allow-Origin"), evil, "\(m) \(path)")
                // Credentials make any route protected: a page may not use an admin Bearer it happens to know.
                let a = send(m, path, "{}", [("Origin", evil), ("Content-Type", "text/plain"), ("Authorization", "Bearer owner")])
                XCTAssertEqual(a.status, 403, "\(m) \(path) with Bearer from \(evil)")
            }
        }
        // verifyClient is the iOS SDK's, which sends no Origin: a web page may not mint receipts (or push out a suite's
        // recorded pushes); the SDK and a localhost page still may.
        for evil in ["http://evil.example", "null"] {
            let r = send("POST", "/identitytoolkit.googleapis.com/v1/accounts:verifyClient?key=k", #"{"appToken":"aa"}"#, [("Origin", evil)])
            XCTAssertEqual(r.status, 403)
            XCTAssertNil(header(r, "Access-Control-Allow-Origin"))
        }
        XCTAssertEqual(send("POST", "/identitytoolkit.googleapis.com/v1/accounts:verifyClient?key=k", #"{"appToken":"aa"}"#, []).status, 200)
        for (row, m, path) in table where refusePages.contains(row.template) {
            for evil in ["http://evil.example", "null"] {
                let r = send(m, path, "{}", [("Origin", evil), ("Content-Type", "application/json")])
                XCTAssertEqual(r.status, 403, "\(m) \(path) from \(evil)")
                XCTAssertTrue(errorMessage(r)?.hasPrefix("PERMISSION_DENIED : Origin not allowed") ?? false, "\(m) \(path): \(errorMessage(r) ?? "")")
                XCTAssertNil(header(r, "Access-Control-Allow-Origin"), "\(m) \(path)")
            }
        }
        // The same protected requests from the JS SDK's page on localhost, and with no Origin at all, get through.
        for origin in ["http://localhost:3000", nil] {
            for (m, path) in protected where !path.hasSuffix(":export") {
                var h: [(String, String)] = [("Authorization", "Bearer owner"), ("Content-Type", "application/json")]
                if let origin { h.append(("Origin", origin)) }
                let r = send(m, path, m == "GET" || m == "DELETE" ? "" : "{}", h)
                XCTAssertNotEqual(r.status, 403, "\(m) \(path) from \(origin ?? "no origin"): \(errorMessage(r) ?? "")")
                if r.status != 0 { XCTAssertEqual(header(r, "Access-Control-Allow-Origin"), origin, "\(m) \(path)") }
            }
        }
    }

    /// The issue's attack: the refused request has no effect.
    func testRefusedRequestsHaveNoEffect() {
        let evil: [(String, String)] = [("Origin", "https://evil.example"), ("Content-Type", "text/plain")]
        // Config PATCH making a victim's number fictional with the attacker's code.
        send("PATCH", "/emulator/v1/projects/demo-phone/config", #"{"signIn":{"phoneNumber":{"testPhoneNumbers":{"+15555550199":"111111"}}}}"#, evil)
        XCTAssertNil(app.emulator.config(StoreKey(projectId: "demo-phone")).testPhoneNumbers["+15555550199"])
        // Admin sign-up with a known Bearer.
        let r = send("POST", "/identitytoolkit.googleapis.com/v1/accounts:signUp?key=k", #"{"displayName":"$(id)"}"#,
                     evil + [("Authorization", "Bearer owner")])
        XCTAssertEqual(r.status, 403)
        XCTAssertEqual(app.emulator.store(StoreKey(projectId: "demo-phone")).read { $0.users.count }, 0)
        // Clock.
        send("POST", "/emulator/v1/clock:advance", #"{"seconds":1000}"#, evil)
        XCTAssertEqual(app.emulator.clock.offsetMillis, 0)
        // A rebinding page (Host: its own DNS name) cannot use even a client endpoint.
        let h = send("POST", "/identitytoolkit.googleapis.com/v1/accounts:signUp?key=k", "{}", [("Host", "evil.example:9099")])
        XCTAssertEqual(h.status, 403)
        XCTAssertTrue(errorMessage(h)?.hasPrefix("PERMISSION_DENIED : Host not allowed") ?? false)
        XCTAssertEqual(app.emulator.store(StoreKey(projectId: "demo-phone")).read { $0.users.count }, 0)
        // The same sign-up without an Origin (curl, an SDK) works as before.
        XCTAssertEqual(send("POST", "/identitytoolkit.googleapis.com/v1/accounts:signUp?key=k", "{}", [("Host", "localhost:9099")]).status, 200)
    }

    func testPreflights() {
        func preflight(_ path: String, origin: String, method: String = "POST", headers: String? = nil, pna: Bool = true) -> HTTPResponse {
            var h: [(String, String)] = [("Origin", origin), ("Access-Control-Request-Method", method)]
            if let headers { h.append(("Access-Control-Request-Headers", headers)) }
            if pna { h.append(("Access-Control-Request-Private-Network", "true")) }
            return send("OPTIONS", path, "", h)
        }
        let client = "/identitytoolkit.googleapis.com/v1/accounts:sendVerificationCode?key=k"
        let emulatorPath = "/emulator/v1/projects/demo-phone/config"
        // Allowed origin: everything reflected, PNA granted.
        var r = preflight(client, origin: "http://localhost:3000", headers: "content-type,x-client-version")
        XCTAssertEqual(r.status, 204)
        XCTAssertEqual(header(r, "Access-Control-Allow-Origin"), "http://localhost:3000")
        XCTAssertEqual(header(r, "Access-Control-Allow-Headers"), "content-type,x-client-version")
        XCTAssertEqual(header(r, "Access-Control-Allow-Private-Network"), "true")
        r = preflight(emulatorPath, origin: "http://127.0.0.1:4000", method: "PATCH", headers: "Content-Type")
        XCTAssertEqual(r.status, 204)
        XCTAssertEqual(header(r, "Access-Control-Allow-Origin"), "http://127.0.0.1:4000")
        XCTAssertEqual(header(r, "Access-Control-Allow-Private-Network"), "true")
        // Other origin, client endpoint: CORS as in production, but no Private Network Access.
        r = preflight(client, origin: "https://app.example", headers: "content-type, x-client-version")
        XCTAssertEqual(r.status, 204)
        XCTAssertEqual(header(r, "Access-Control-Allow-Origin"), "https://app.example")
        XCTAssertEqual(header(r, "Access-Control-Allow-Headers"), "content-type,x-client-version")
        XCTAssertNil(header(r, "Access-Control-Allow-Private-Network"))
        // Other origin, protected route (or a request that will carry Authorization): refused, nothing reflected.
        for (path, method, headers) in [(emulatorPath, "PATCH", "content-type"), (emulatorPath, "GET", nil),
                                         ("/emulator/v1/projects/demo-phone:export", "POST", "content-type"),
                                         ("/identitytoolkit.googleapis.com/v2/projects/demo-phone/config", "PATCH", "authorization,content-type"),
                                         (client, "POST", "Authorization")] as [(String, String, String?)] {
            for origin in ["https://evil.example", "null"] {
                r = preflight(path, origin: origin, method: method, headers: headers)
                XCTAssertEqual(r.status, 403, "\(path) \(origin)")
                XCTAssertNil(header(r, "Access-Control-Allow-Origin"), path)
                XCTAssertNil(header(r, "Access-Control-Allow-Headers"), path)
                XCTAssertNil(header(r, "Access-Control-Allow-Private-Network"), path)
            }
        }
        // Requested header lists are never echoed raw.
        r = preflight(client, origin: "http://localhost:3000", headers: "x-ok, bad header, x\u{7F}y, ,x-two")
        XCTAssertEqual(header(r, "Access-Control-Allow-Headers"), "x-ok,x-two")
        // A rebinding page's preflight.
        var h = HTTPHeaders()
        h.add("Host", "evil.example:9099")
        h.add("Origin", "http://evil.example:9099")
        XCTAssertEqual(app.respond(to: HTTPRequest(method: "OPTIONS", target: client, headers: h), context: .detached)?.status, 403)
    }

    func testAllowOriginAndAllowHostReachTheApp() throws {
        app = makeApp(boundary: try WebBoundary(bindHost: "127.0.0.1", allowOrigins: ["https://admin.example.test"], allowHosts: ["emu.example.test"]))
        var r = send("GET", "/emulator/v1/clock", "", [("Origin", "https://admin.example.test"), ("Host", "emu.example.test:9099")])
        XCTAssertEqual(r.status, 200)
        XCTAssertEqual(header(r, "Access-Control-Allow-Origin"), "https://admin.example.test")
        r = send("GET", "/emulator/v1/clock", "", [("Origin", "https://other.example.test")])
        XCTAssertEqual(r.status, 403)
        r = send("GET", "/emulator/v1/clock", "", [("Host", "other.example.test")])
        XCTAssertEqual(r.status, 403)
    }

    func testAdminTokenProtectsTheEmulatorAPI() {
        app = makeApp(adminToken: "s3cret-admin-token")
        let paths: [(String, String)] = [
            ("GET", "/emulator/v1/projects/demo-phone/verificationCodes"), ("DELETE", "/emulator/v1/projects/demo-phone/accounts"),
            ("PATCH", "/emulator/v1/projects/demo-phone/config"), ("POST", "/emulator/v1/projects/demo-phone:export"),
            ("POST", "/emulator/v1/clock:advance"), ("POST", "/emulator/v1/keys:rotate"), ("GET", "/emulator/v1/clock"),
            ("POST", "/emulator/v1/projects/demo-phone/appCredentials"), ("GET", "/emulator/v1/projects/demo-phone/pushNotifications"),
        ]
        for (m, path) in paths {
            XCTAssertEqual(send(m, path, #"{"seconds":5}"#).status, 401, "\(m) \(path) without a token")
            XCTAssertEqual(send(m, path, #"{"seconds":5}"#, [("Authorization", "Bearer owner")]).status, 401, "\(m) \(path) with owner")
            XCTAssertEqual(send(m, path, #"{"seconds":5}"#, [("Authorization", "Bearer wrong-token")]).status, 401, "\(m) \(path)")
        }
        XCTAssertEqual(app.emulator.clock.offsetMillis, 0)
        let ok = send("POST", "/emulator/v1/clock:advance", #"{"seconds":5}"#, [("Authorization", "Bearer s3cret-admin-token")])
        XCTAssertEqual(ok.status, 200)
        XCTAssertEqual(app.emulator.clock.offsetMillis, 5000)
        XCTAssertEqual(send("GET", "/emulator/v1/projects/demo-phone/config", "", [("Authorization", "bearer s3cret-admin-token")]).status, 200)
        // Client endpoints and public documents stay open.
        XCTAssertEqual(send("GET", "/").status, 200)
        XCTAssertEqual(send("GET", "/www.googleapis.com/service_accounts/v1/jwk/securetoken@system.gserviceaccount.com").status, 200)
        XCTAssertEqual(send("POST", "/identitytoolkit.googleapis.com/v1/accounts:sendVerificationCode?key=k", #"{"phoneNumber":"+16505554567"}"#).status, 200)
        // Without a token the emulator API is open (the official clients send none), and a stray Bearer is ignored there.
        app = makeApp()
        XCTAssertEqual(send("GET", "/emulator/v1/clock").status, 200)
        XCTAssertEqual(send("GET", "/emulator/v1/clock", "", [("Authorization", "Bearer whatever")]).status, 200)
    }
}
