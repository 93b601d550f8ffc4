import EmulatorSupport
import HTTPServer
import JWT
@testable import PhoneAuthAPI
import PhoneAuthCore
import PhoneAuthTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// The web console (issue 15): the embedded files match `Console/`, how they are served (negotiation at `/`,
/// security headers, ETags), what the page may never do, and the user search behind the Users view.
final class ConsoleTests: XCTestCase, AppCalling {
    static let owner = [("Authorization", "Bearer owner")]
    var app: PhoneAuthApp!

    override func setUp() {
        app = makeTestApp(seed: 15)
    }

    static var consoleDir: String {
        "/" + #filePath.split(separator: "/").dropLast(3).joined(separator: "/") + "/Console"
    }

    static func listDir(_ path: String) -> [String] {
        guard let dir = opendir(path) else { return [] }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafePointer(to: entry.pointee.d_name) { $0.withMemoryRebound(to: CChar.self, capacity: 256) { String(cString: $0) } }
            if !name.hasPrefix(".") { names.append(name) }
        }
        return names.sorted()
    }

    static func pad(_ n: Int, _ width: Int) -> String {
        let s = String(n)
        return String(repeating: "0", count: max(0, width - s.count)) + s
    }

    static func count(_ text: String, _ needle: String) -> Int {
        let h = Array(text.utf8), n = Array(needle.utf8)
        guard !n.isEmpty, h.count >= n.count else { return 0 }
        return (0...(h.count - n.count)).filter { h[$0..<($0 + n.count)].elementsEqual(n) }.count
    }

    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef")
        return String(bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 15)]] })
    }

    func raw(_ method: String, _ target: String, headers: [(String, String)] = []) -> HTTPResponse {
        var h = HTTPHeaders()
        for (k, v) in headers { h.add(k, v) }
        return app.respond(to: HTTPRequest(method: method, target: target, headers: h, body: []), context: .detached)!
    }

    func header(_ r: HTTPResponse, _ name: String) -> String? {
        r.headers.first { $0.0.lowercased() == name.lowercased() }?.1
    }

    // MARK: the embedded files

    /// `Sources/PhoneAuthAPI/ConsoleAssets.swift` is what `scripts/embed-console` makes of `Console/` today.
    func testEmbeddedConsoleIsCurrent() throws {
        let names = Self.listDir(Self.consoleDir)
        XCTAssertFalse(names.isEmpty, "no Console/ directory at \(Self.consoleDir)")
        XCTAssertEqual(names, ConsoleAssets.files.keys.sorted(), "Console/ and the embedded files differ: run scripts/embed-console")
        for name in names {
            let bytes = try Files.read(Self.consoleDir + "/" + name)
            guard let file = ConsoleAssets.files[name] else { continue }
            XCTAssertTrue(file.bytes == bytes, "Console/\(name) changed: run scripts/embed-console")
            XCTAssertEqual(file.etag, "\"" + Self.hex(sha256(bytes)).prefix(32) + "\"", name)
        }
        XCTAssertEqual(ConsoleAssets.files["index.html"]?.contentType, "text/html; charset=utf-8")
        XCTAssertEqual(ConsoleAssets.files["app.js"]?.contentType, "text/javascript; charset=utf-8")
        XCTAssertEqual(ConsoleAssets.files["console.css"]?.contentType, "text/css; charset=utf-8")
    }

    /// The console's EventSource listens for every event type the server emits (an unnamed type would never reach it).
    func testTheConsoleListensForEveryEventType() throws {
        let js = String(decoding: try XCTUnwrap(ConsoleAssets.files["stream.js"]).bytes, as: UTF8.self)
        for type in EventPayload.types {
            XCTAssertTrue(js.contains("'\(type)'"), "Console/stream.js EVENT_TYPES lacks \(type)")
        }
    }

    /// Server text reaches the page only as text, and the page needs nothing the CSP forbids.
    func testThePageNeverParsesServerTextAsHTML() {
        for (name, file) in ConsoleAssets.files {
            let text = String(decoding: file.bytes, as: UTF8.self)
            for banned in ["innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "srcdoc"] {
                XCTAssertFalse(text.contains(banned), "\(name) uses \(banned)")
            }
            // `requestUri: 'http://localhost'` is what the SDKs send to signInWithIdp (idp.js), not something loaded.
            let code = text.replacingOccurrences(of: "requestUri: 'http://localhost'", with: "")
            for external in ["http://", "https://", "//cdn", "fonts.googleapis"] where name.hasSuffix(".js") || name.hasSuffix(".css") {
                XCTAssertFalse(code.contains(external), "\(name) loads something from elsewhere (\(external))")
            }
        }
        let html = String(decoding: ConsoleAssets.files["index.html"]!.bytes, as: UTF8.self)
        // Every script is a file (no inline script under `script-src 'self'`), no inline styles or handlers.
        XCTAssertEqual(Self.count(html, "<script"), Self.count(html, "<script type=\"module\" src=\"/console/"))
        XCTAssertEqual(Self.count(html, "<script"), 1)
        XCTAssertFalse(html.contains(" style="))
        for handler in ["onclick=", "onload=", "onerror=", "onsubmit=", "onchange=", "oninput=", "javascript:"] {
            XCTAssertFalse(html.contains(handler), handler)
        }
    }

    // MARK: serving

    func testRootNegotiatesBetweenReadinessAndTheConsole() {
        let cases: [(String?, Bool)] = [
            (nil, false), ("*/*", false), ("application/json", false), ("application/json, text/html", false),
            ("text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8", true),  // Chrome
            ("text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", true),                       // Firefox
            ("text/html", true), ("TEXT/HTML", true), ("text/html;q=0", false), ("text/html;q=0.5, application/json", false),
            ("application/json;q=0.5, text/html", true), ("text/*", false), ("text/html;q=abc", false),
        ]
        for (accept, html) in cases {
            XCTAssertEqual(Console.prefersHTML(accept), html, accept ?? "no Accept")
            let r = raw("GET", "/", headers: accept.map { [("Accept", $0)] } ?? [])
            XCTAssertEqual(r.status, 200)
            XCTAssertEqual(header(r, "Content-Type")?.hasPrefix(html ? "text/html" : "application/json"), true, accept ?? "no Accept")
            XCTAssertEqual(header(r, "Vary"), "Accept")
        }
        let json = try? JSONParser.parse(raw("GET", "/").body)
        XCTAssertEqual(json?["authEmulator"]?["ready"], true)
        XCTAssertEqual(json?["phoneAuthEmulator"]?["adminTokenRequired"], false)
        XCTAssertEqual(json?["phoneAuthEmulator"]?["console"], "/console/")
    }

    func testConsoleFilesCarrySecurityHeadersAndStrongETags() throws {
        for path in ["/console/", "/console", "/console/index.html", "/console/app.js", "/console/console.css"] {
            let r = raw("GET", path)
            XCTAssertEqual(r.status, 200, path)
            let csp = try XCTUnwrap(header(r, "Content-Security-Policy"), path)
            for part in ["default-src 'self'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'", "object-src 'none'"] {
                XCTAssertTrue(csp.contains(part), "\(path): \(part)")
            }
            XCTAssertFalse(csp.contains("unsafe"), path)
            XCTAssertEqual(header(r, "X-Frame-Options"), "DENY")
            XCTAssertEqual(header(r, "X-Content-Type-Options"), "nosniff")
            XCTAssertEqual(header(r, "Referrer-Policy"), "no-referrer")
            let etag = try XCTUnwrap(header(r, "ETag"))
            XCTAssertTrue(etag.hasPrefix("\"") && !etag.hasPrefix("W/"), etag)
            XCTAssertEqual(raw("GET", path, headers: [("If-None-Match", etag)]).status, 304)
            XCTAssertEqual(raw("GET", path, headers: [("If-None-Match", "\"other\", W/\(etag)")]).status, 304)
            XCTAssertEqual(raw("GET", path, headers: [("If-None-Match", "\"other\"")]).status, 200)
        }
        XCTAssertEqual(raw("GET", "/console/").body, ConsoleAssets.files["index.html"]!.bytes)
        XCTAssertEqual(raw("GET", "/console/nope.js").status, 404)
        XCTAssertEqual(raw("GET", "/console/app.js/x").status, 404)
        XCTAssertEqual(raw("POST", "/console/app.js").status, 405)
        // The route's parameters are what the handler serves: a file name the router decoded is served, not split again.
        XCTAssertEqual(raw("GET", "/console/app%2Ejs").body, ConsoleAssets.files["app.js"]!.bytes)
        XCTAssertEqual(raw("GET", "/%63onsole/console.css").body, ConsoleAssets.files["console.css"]!.bytes)
        // Static files are no secret: served without credentials even with --admin-token (the API behind them is not).
        let guarded = PhoneAuthApp(emulator: app.emulator, tokens: app.tokens, signingPool: nil, logger: .quiet, adminToken: "s3cret")
        app = guarded
        XCTAssertEqual(raw("GET", "/console/").status, 200)
        XCTAssertEqual(raw("GET", "/emulator/v1/projects/demo-phone/users").status, 401)
        XCTAssertEqual(raw("GET", "/emulator/v1/projects/demo-phone/users", headers: [("Authorization", "Bearer s3cret")]).status, 200)
        XCTAssertEqual((try? JSONParser.parse(raw("GET", "/").body))?["phoneAuthEmulator"]?["adminTokenRequired"], true)
    }

    // MARK: user search

    func makeUsers(_ n: Int, tenant: String? = nil) {
        let path = "/identitytoolkit.googleapis.com/v1/projects/demo-phone" + (tenant.map { "/tenants/\($0)" } ?? "") + "/accounts"
        for i in 0..<n {
            let body = #"{"localId":"uid-\#(Self.pad(i, 3))","phoneNumber":"+1555000\#(Self.pad(i, 4))","# +
                #""email":"Person\#(i)@Example.test","displayName":"Person \#(i % 7 == 0 ? "Seven" : "Other")"}"#
            XCTAssertEqual(call("POST", path, body, headers: Self.owner).0, 200)
        }
    }

    func search(_ query: String, tenant: String? = nil) -> (Int, JSON) {
        call("GET", "/emulator/v1/projects/demo-phone" + (tenant.map { "/tenants/\($0)" } ?? "") + "/users?" + query)
    }

    func uids(_ r: (Int, JSON)) -> [String] { r.1["users"]?.arrayValue?.compactMap { $0["localId"]?.stringValue } ?? [] }

    func testSearchMatchesUidEmailPhoneAndName() {
        makeUsers(40)
        XCTAssertEqual(search("q=uid-017").1["matched"], 1)
        XCTAssertEqual(uids(search("q=UID-017")), ["uid-017"])                       // case-insensitive
        XCTAssertEqual(uids(search("q=person12%40example")), ["uid-012"])            // email, any case
        XCTAssertEqual(uids(search("q=%2B1%20555%20000-0033")), ["uid-033"])         // a phone number as people write it
        XCTAssertEqual(search("q=seven").1["matched"], 6)                            // display name: 0, 7, …, 35
        XCTAssertEqual(search("q=nobody").1["matched"], 0)
        let all = search("")
        XCTAssertEqual(all.1["matched"], 40)
        XCTAssertEqual(all.1["total"], 40)
        XCTAssertEqual(uids(all).count, UserSearch.defaultPageSize > 40 ? 40 : UserSearch.defaultPageSize)
        // The listing never carries password hashes or salts.
        XCTAssertNil(all.1["users"]?.arrayValue?.first?["salt"])
    }

    func testPagingWalksEveryMatchOnceInIndexOrder() {
        makeUsers(53)
        var first: [String]?
        for size in [1, 7, 10, 53, 1000] {
            var seen: [String] = [], token = ""
            var pages = 0
            while pages < 100 {
                let r = search("q=person&pageSize=\(size)&pageToken=\(token)")
                XCTAssertEqual(r.0, 200)
                XCTAssertEqual(r.1["matched"], 53)
                seen += uids(r)
                pages += 1
                guard let next = r.1["nextPageToken"]?.stringValue else { break }
                token = next
            }
            // Each user once (its name and its email both start with "person"), in the index's order: by the matching
            // text ("person other", "person seven", then emails), then uid; the same order whatever the page size.
            XCTAssertEqual(seen.count, 53, "pageSize \(size)")
            XCTAssertEqual(Set(seen), Set((0..<53).map { "uid-" + Self.pad($0, 3) }), "pageSize \(size)")
            XCTAssertEqual(seen, first ?? seen, "pageSize \(size)")
            first = seen
            XCTAssertEqual(pages, (53 + size - 1) / size, "pageSize \(size)")
        }
        let sevens = (0..<53).filter { $0 % 7 == 0 }.map { "uid-" + Self.pad($0, 3) }
        XCTAssertEqual(first.map { Array($0.prefix(53 - sevens.count)) }, (0..<53).filter { $0 % 7 != 0 }.map { "uid-" + Self.pad($0, 3) })
        XCTAssertEqual(first.map { Array($0.suffix(sevens.count)) }, sevens)
        // A token of another kind (a uid, an empty search's) is refused with a non-empty q.
        XCTAssertEqual(search("q=person&pageToken=uid-003").1["error"]?["status"], "INVALID_ARGUMENT")
    }

    func testWordsDomainsAndNumbersWithoutTheirCountryCode() {
        makeUsers(40)
        XCTAssertEqual(search("q=other").1["matched"], 34)                           // a later word of the name
        XCTAssertEqual(search("q=example.TEST").1["matched"], 40)                    // the email's domain
        XCTAssertEqual(uids(search("q=555%20000%200033")), ["uid-033"])              // no country code, no +
        XCTAssertEqual(uids(search("q=15550000033")), ["uid-033"])                   // no +
        XCTAssertEqual(search("q=erson").1["matched"], 0)                            // not a substring search
        XCTAssertEqual(search("q=0000033").1["matched"], 0)
    }

    func testSearchIsScopedAndBounded() {
        makeUsers(3)
        makeUsers(2, tenant: "team-a")
        XCTAssertEqual(search("", tenant: "team-a").1["total"], 2)
        XCTAssertEqual(search("").1["total"], 3)
        XCTAssertEqual(call("GET", "/emulator/v1/projects/other-project/users").1["total"], 0)
        XCTAssertNil(app.emulator.existingStore(StoreKey(projectId: "other-project")), "a search creates no project")
        for bad in ["pageSize=0", "pageSize=1001", "pageSize=x", "q=" + String(repeating: "a", count: 257)] {
            let r = search(bad)
            XCTAssertEqual(r.0, 400, bad)
            XCTAssertEqual(r.1["error"]?["status"], "INVALID_ARGUMENT", bad)
        }
        XCTAssertEqual(search("pageSize=1").0, 200)
    }

    func testSearchReportsItsServerTime() throws {
        makeUsers(5)
        var h = HTTPHeaders()
        h.add("Accept", "application/json")
        let r = app.respond(to: HTTPRequest(method: "GET", target: "/emulator/v1/projects/demo-phone/users?q=uid", headers: h, body: []), context: .detached)!
        let timing = try XCTUnwrap(header(r, "Server-Timing"))
        XCTAssertTrue(timing.hasPrefix("search;dur="), timing)
        XCTAssertNotNil(Double(timing.dropFirst("search;dur=".count)), timing)
    }
}
