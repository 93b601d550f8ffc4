import EmulatorSupport
import HTTPServer
import JWT
@testable import PhoneAuthAPI
import PhoneAuthCore
import PhoneAuthTestSupport
import XCTest

/// The provider page (issue 25, item 3): `GET /emulator/auth/handler`, `/emulator/auth/iframe` and their assets —
/// the embedded files match `ProviderPage/`, status, content type and headers, the official error body, and the
/// accounts listed (scope, order, bound, escaping; withheld behind `--admin-token` and from foreign origins).
final class ProviderPageTests: XCTestCase, AppCalling {
    static let owner = [("Authorization", "Bearer owner")]
    var app: PhoneAuthApp!

    override func setUp() {
        app = makeTestApp(seed: 25)
    }

    static var pageDir: String {
        "/" + #filePath.split(separator: "/").dropLast(3).joined(separator: "/") + "/ProviderPage"
    }

    func raw(_ target: String, headers: [(String, String)] = []) -> HTTPResponse {
        var h = HTTPHeaders()
        for (k, v) in headers { h.add(k, v) }
        return app.respond(to: HTTPRequest(method: "GET", target: target, headers: h, body: []), context: .detached)!
    }

    func header(_ r: HTTPResponse, _ name: String) -> String? {
        r.headers.first { $0.0.lowercased() == name.lowercased() }?.1
    }

    func text(_ r: HTTPResponse) -> String { String(decoding: r.body, as: UTF8.self) }

    /// The JSON data block of a chooser page.
    func data(_ r: HTTPResponse) throws -> JSON {
        let page = text(r)
        let open = try XCTUnwrap(page.firstRange(of: "<script type=\"application/json\" id=\"accounts-data\">"))
        let close = try XCTUnwrap(page[open.upperBound...].firstRange(of: "</script>"))
        return try JSONParser.parse(Array(page[open.upperBound..<close.lowerBound].utf8))
    }

    func link(_ uid: String, _ info: String, tenant: String? = nil) {
        let base = "/identitytoolkit.googleapis.com/v1/projects/demo-phone" + (tenant.map { "/tenants/\($0)" } ?? "")
        XCTAssertEqual(call("POST", base + "/accounts", #"{"localId":"\#(uid)"}"#, headers: Self.owner).0, 200)
        let r = call("POST", base + "/accounts:update", #"{"localId":"\#(uid)","linkProviderUserInfo":\#(info)}"#, headers: Self.owner)
        XCTAssertEqual(r.0, 200, "\(r.1)")
    }

    static let chooser = "/emulator/auth/handler?apiKey=fake-api-key&appName=%5BDEFAULT%5D&authType=signInViaPopup&providerId=google.com"

    // MARK: the embedded files

    func testEmbeddedPageIsCurrent() throws {
        let names = ConsoleTests.listDir(Self.pageDir)
        XCTAssertEqual(names, ["handler.css", "handler.html", "handler.js", "iframe.html", "iframe.js"])
        XCTAssertEqual(names, ProviderPageAssets.files.keys.sorted(), "ProviderPage/ and the embedded files differ: run scripts/embed-console")
        for name in names {
            let bytes = try Files.read(Self.pageDir + "/" + name)
            XCTAssertTrue(ProviderPageAssets.files[name]?.bytes == bytes, "ProviderPage/\(name) changed: run scripts/embed-console")
            XCTAssertEqual(ProviderPageAssets.files[name]?.etag, "\"" + ConsoleTests.hex(sha256(bytes)).prefix(32) + "\"", name)
        }
    }

    /// Server text reaches the page only as text; the only script from elsewhere is the iframe's gapi loader.
    func testThePagesNeverParseTextAsHTML() throws {
        for (name, file) in ProviderPageAssets.files {
            let t = String(decoding: file.bytes, as: UTF8.self)
            for banned in ["innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "srcdoc", "javascript:"] {
                XCTAssertFalse(t.contains(banned), "\(name) uses \(banned)")
            }
            XCTAssertFalse(t.contains(" style="), "\(name): an inline style")
            for handler in ["onclick=", "onload=", "onerror=", "onsubmit=", "oninput="] { XCTAssertFalse(t.contains(handler), "\(name): \(handler)") }
            if name.hasSuffix(".js") || name.hasSuffix(".css") || name == "handler.html" {
                XCTAssertFalse(t.contains("https://") || t.contains("http://"), "\(name) loads something from elsewhere")
            }
        }
        let handler = String(decoding: try XCTUnwrap(ProviderPageAssets.files["handler.html"]).bytes, as: UTF8.self)
        XCTAssertEqual(ConsoleTests.count(handler, ProviderPage.placeholder), 1)
        // Scripts are files (no inline script under `script-src 'self'`); the data block is not a script.
        XCTAssertEqual(ConsoleTests.count(handler, "<script"), 2)
        XCTAssertEqual(ConsoleTests.count(handler, "<script src=\"assets/handler.js\" defer></script>"), 1)
        XCTAssertEqual(ConsoleTests.count(handler, "<script type=\"application/json\" id=\"accounts-data\">"), 1)
        let iframe = String(decoding: try XCTUnwrap(ProviderPageAssets.files["iframe.html"]).bytes, as: UTF8.self)
        XCTAssertEqual(ConsoleTests.count(iframe, "<script"), 2)
        XCTAssertEqual(ConsoleTests.count(iframe, "<script src=\"assets/iframe.js\"></script>\n<script src=\"https://apis.google.com/js/api.js\"></script>"), 1)
    }

    // MARK: serving

    func testMissingApiKeyOrProviderIdAnswersTheOfficialBody() {
        let official = "{\n  \"authEmulator\": {\n    \"error\": \"missing apiKey or providerId query parameters\"\n  }\n}"
        for target in ["/emulator/auth/handler", "/emulator/auth/handler?apiKey=k", "/emulator/auth/handler?providerId=google.com",
                       "/emulator/auth/handler?apiKey=&providerId=google.com", "/emulator/auth/handler?apiKey=k&providerId="] {
            let r = raw(target)
            XCTAssertEqual(r.status, 400, target)
            XCTAssertEqual(text(r), official, target)
            XCTAssertEqual(r.body.count, 88, "the official emulator's 88 bytes")
            XCTAssertEqual(header(r, "Content-Type"), "text/html; charset=utf-8")
            XCTAssertEqual(header(r, "X-Content-Type-Options"), "nosniff")
        }
        // Identifiers are checked once, here: a provider id or tenant a sign-in could not use.
        for target in ["/emulator/auth/handler?apiKey=k&providerId=Google.com", "/emulator/auth/handler?apiKey=k&providerId=phone",
                       "/emulator/auth/handler?apiKey=k&providerId=%3Cb%3E", "/emulator/auth/handler?apiKey=k&providerId=google.com&tid=a%2Fb",
                       "/emulator/auth/handler?apiKey=k&providerId=google.com&tenantId=" + String(repeating: "t", count: 129),
                       "/emulator/auth/handler?apiKey=k&providerId=" + String(repeating: "p", count: 129)] {
            let r = raw(target)
            XCTAssertEqual(r.status, 400, target)
            XCTAssertTrue(text(r).hasPrefix("{\n  \"authEmulator\": {\n    \"error\": \"invalid "), text(r))
            XCTAssertFalse(text(r).contains("<b>"))
        }
    }

    func testPagesAreFramableHTMLWithTheirOwnScriptsOnly() throws {
        let pages: [(String, String)] = [(Self.chooser, "handler.html"), ("/emulator/auth/iframe?apiKey=k&appName=%5BDEFAULT%5D", "iframe.html"),
                                         ("/emulator/auth/iframe", "iframe.html")]
        for (target, _) in pages {
            let r = raw(target, headers: [("Accept", "text/html")])
            XCTAssertEqual(r.status, 200, target)
            XCTAssertEqual(header(r, "Content-Type"), "text/html; charset=utf-8", target)
            // The SDK embeds the iframe in the app's page and opens the handler as its popup: neither may forbid it.
            XCTAssertNil(header(r, "X-Frame-Options"), target)
            XCTAssertNil(header(r, "Cross-Origin-Opener-Policy"), target)
            let csp = try XCTUnwrap(header(r, "Content-Security-Policy"), target)
            XCTAssertFalse(csp.contains("frame-ancestors"), target)
            XCTAssertFalse(csp.contains("unsafe-eval"), target)
            for part in ["default-src 'none'", "base-uri 'none'", "form-action 'none'", "object-src 'none'"] { XCTAssertTrue(csp.contains(part), "\(target): \(part)") }
            XCTAssertEqual(header(r, "X-Content-Type-Options"), "nosniff")
        }
        let handlerCSP = try XCTUnwrap(header(raw(Self.chooser), "Content-Security-Policy"))
        XCTAssertTrue(handlerCSP.contains("script-src 'self';"), handlerCSP)
        XCTAssertTrue(handlerCSP.contains("connect-src 'none'"), handlerCSP)
        XCTAssertFalse(handlerCSP.contains("unsafe"), handlerCSP)
        XCTAssertEqual(header(raw(Self.chooser), "Cache-Control"), "no-store")
        let iframeCSP = try XCTUnwrap(header(raw("/emulator/auth/iframe"), "Content-Security-Policy"))
        XCTAssertTrue(iframeCSP.contains("script-src 'self' https://apis.google.com"), iframeCSP)
        XCTAssertEqual(raw("/emulator/auth/iframe").body, ProviderPageAssets.files["iframe.html"]!.bytes)

        for (name, type) in [("handler.js", "text/javascript"), ("iframe.js", "text/javascript"), ("handler.css", "text/css")] {
            let r = raw("/emulator/auth/assets/" + name)
            XCTAssertEqual(r.status, 200, name)
            XCTAssertEqual(header(r, "Content-Type"), type + "; charset=utf-8")
            XCTAssertEqual(r.body, ProviderPageAssets.files[name]!.bytes)
            let etag = try XCTUnwrap(header(r, "ETag"))
            XCTAssertEqual(raw("/emulator/auth/assets/" + name, headers: [("If-None-Match", etag)]).status, 304)
        }
        for missing in ["/emulator/auth/assets/handler.html", "/emulator/auth/assets/nope.js", "/emulator/auth/assets/", "/emulator/auth/assets/a/b"] {
            XCTAssertEqual(raw(missing).status, 404, missing)
        }
        XCTAssertEqual(app.respond(to: HTTPRequest(method: "POST", target: Self.chooser, headers: HTTPHeaders(), body: []), context: .detached)!.status, 405)
    }

    // MARK: the accounts

    func testListsTheProvidersUsersOfTheProjectOrTenantEscaped() throws {
        let hostile = #"</script><img src=x onerror=alert(1)> & <!-- \u2028"#
        link("u-hostile", #"{"providerId":"google.com","rawId":"g-1","displayName":"\#(hostile)","email":"a@example.com","photoUrl":"javascript:alert(1)"}"#)
        link("u-plain", #"{"providerId":"google.com","rawId":"g-2"}"#)
        link("u-apple", #"{"providerId":"apple.com","rawId":"a-1","email":"apple@example.com"}"#)
        link("u-tenant", #"{"providerId":"google.com","rawId":"g-t","email":"t@example.com"}"#, tenant: "team-a")

        let r = raw(Self.chooser)
        XCTAssertEqual(r.status, 200)
        let page = text(r)
        // The hostile name is in the page only as escaped JSON: no tag, no comment, no end of the data block.
        XCTAssertFalse(page.contains("<img"))
        XCTAssertFalse(page.contains("<!--"))
        XCTAssertEqual(ConsoleTests.count(page, "</script>"), 2)
        XCTAssertTrue(page.contains(#"\u003c/script\u003e\u003cimg src=x onerror=alert(1)\u003e \u0026 \u003c!-- "#), page)
        let d = try data(r)
        XCTAssertEqual(d["total"], 2)
        XCTAssertEqual(d["limit"], 100)
        let accounts = try XCTUnwrap(d["accounts"]?.arrayValue)
        XCTAssertEqual(accounts.map { $0["rawId"]?.stringValue }, ["g-1", "g-2"])   // same age: by uid
        XCTAssertEqual(accounts[0]["displayName"]?.stringValue, hostile.replacingOccurrences(of: "\\u2028", with: "\u{2028}"))
        XCTAssertEqual(accounts[0]["photoUrl"], "javascript:alert(1)")   // the page's script shows only http(s) photos
        // Absent fields stay absent (the official page's JSON.stringify leaves out undefined).
        XCTAssertEqual(accounts[1], ["rawId": "g-2"])

        let apple = try data(raw("/emulator/auth/handler?apiKey=k&appName=x&providerId=apple.com"))
        XCTAssertEqual(apple["accounts"]?.arrayValue?.map { $0["email"] }, ["apple@example.com"])
        for t in ["tid=team-a", "tenantId=team-a"] {
            let tenant = try data(raw(Self.chooser + "&" + t))
            XCTAssertEqual(tenant["accounts"]?.arrayValue?.map { $0["rawId"] }, ["g-t"], t)
        }
        XCTAssertEqual(try data(raw("/emulator/auth/handler?apiKey=k&appName=x&providerId=github.com"))["total"], 0)
        // Reads create nothing: an unknown tenant lists nobody and does not come into being.
        XCTAssertEqual(try data(raw(Self.chooser + "&tid=nobody-here"))["accounts"], [])
        XCTAssertNil(app.emulator.existingStore(StoreKey(projectId: "demo-phone", tenantId: "nobody-here")))
    }

    func testListsTheNewestHundredAndSaysHowManyThereAre() throws {
        var users: [JSON] = []
        for i in 0..<250 {
            let id = "u" + String(1000 + i)
            users.append(["localId": .string(id), "createdAt": .string(String(1_700_000_000_000 + Int64(i) * 1000)),
                          "providerUserInfo": [["providerId": "google.com", "rawId": .string("g\(i)"), "email": .string("p\(i)@example.com")]]])
        }
        let r = call("POST", "/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts:batchCreate",
                     JSON.object(["users": .array(users)]).serializedString, headers: Self.owner)
        XCTAssertEqual(r.0, 200, "\(r.1)")
        XCTAssertNil(r.1["error"], "\(r.1)")
        let d = try data(raw(Self.chooser))
        XCTAssertEqual(d["total"], 250)
        let listed = try XCTUnwrap(d["accounts"]?.arrayValue).compactMap { $0["rawId"]?.stringValue }
        XCTAssertEqual(listed, (150..<250).reversed().map { "g\($0)" })
    }

    func testAccountsAreWithheldBehindAnAdminTokenAndFromForeignOrigins() throws {
        link("u1", #"{"providerId":"google.com","rawId":"g-1","email":"a@example.com"}"#)
        // A page on the developer's own origin, or no Origin at all (a navigation), sees them.
        XCTAssertEqual(try data(raw(Self.chooser))["total"], 1)
        XCTAssertEqual(try data(raw(Self.chooser, headers: [("Origin", "http://localhost:5173")]))["total"], 1)
        // A script on another site (which CORS would let read the answer) does not.
        let foreign = raw(Self.chooser, headers: [("Origin", "https://evil.example")])
        XCTAssertEqual(foreign.status, 200)
        XCTAssertEqual(try data(foreign), ["withheld": "foreign-origin"])
        XCTAssertFalse(text(foreign).contains("a@example.com"))
        // Behind --admin-token a browser cannot prove it holds the token: nobody is listed, the page still adds accounts.
        app = PhoneAuthApp(emulator: app.emulator, tokens: app.tokens, signingPool: nil, logger: .quiet, adminToken: "s3cret")
        let guarded = raw(Self.chooser)
        XCTAssertEqual(guarded.status, 200)
        XCTAssertEqual(try data(guarded), ["withheld": "admin-token"])
        // A client that holds the token (curl, a script) sees them; a wrong token is refused as everywhere.
        XCTAssertEqual(try data(raw(Self.chooser, headers: [("Authorization", "Bearer s3cret")]))["total"], 1)
        XCTAssertEqual(try data(raw(Self.chooser, headers: [("Authorization", "Bearer owner")])), ["withheld": "admin-token"])
        XCTAssertEqual(raw("/emulator/auth/iframe").status, 200)
        XCTAssertEqual(raw("/emulator/auth/assets/handler.js").status, 200)
    }

    func testTheApiKeysProjectIsListed() throws {
        app = PhoneAuthApp(emulator: app.emulator, tokens: app.tokens, signingPool: nil, apiKeyProjects: ["other-key": "other-project"], logger: .quiet)
        XCTAssertEqual(call("POST", "/identitytoolkit.googleapis.com/v1/projects/other-project/accounts", #"{"localId":"o1"}"#, headers: Self.owner).0, 200)
        XCTAssertEqual(call("POST", "/identitytoolkit.googleapis.com/v1/projects/other-project/accounts:update",
                            #"{"localId":"o1","linkProviderUserInfo":{"providerId":"google.com","rawId":"other"}}"#, headers: Self.owner).0, 200)
        XCTAssertEqual(try data(raw("/emulator/auth/handler?apiKey=other-key&appName=x&providerId=google.com"))["accounts"], [["rawId": "other"]])
        XCTAssertEqual(try data(raw(Self.chooser))["total"], 0)
    }

    func testScriptSafeEscapesOnlyWhatCouldEndTheBlock() throws {
        let json = JSON.object(["a": "</script><!--&>", "b": "plain ünï"])
        let safe = ProviderPage.scriptSafe(json.serialized())
        XCTAssertFalse(safe.contains(UInt8(ascii: "<")) || safe.contains(UInt8(ascii: ">")) || safe.contains(UInt8(ascii: "&")))
        XCTAssertEqual(try JSONParser.parse(safe), json)
        let parts = try XCTUnwrap(ProviderPage.split(Array("a__ACCOUNTS_JSON__b__ACCOUNTS_JSON__".utf8), at: ProviderPage.placeholder))
        XCTAssertEqual(parts.0, Array("a".utf8))
        XCTAssertEqual(parts.1, Array("b__ACCOUNTS_JSON__".utf8))
        XCTAssertNil(ProviderPage.split(Array("no marker".utf8), at: ProviderPage.placeholder))
        XCTAssertNotNil(ProviderPage.handlerTemplate)
    }
}
