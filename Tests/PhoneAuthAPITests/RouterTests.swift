import EmulatorSupport
import HTTPServer
@testable import PhoneAuthAPI
import PhoneAuthCore
import XCTest

/// The route table: validity, reachability of every row, 404/405 derivation, typed path parameters, and docs/endpoints.md's
/// Endpoints table (generated from the rows; `scripts/readme-endpoints` rewrites it).
final class RouterTests: XCTestCase {
    static let methods = ["GET", "HEAD", "POST", "PATCH", "DELETE", "PUT", "OPTIONS"]

    /// A concrete path for a compiled pattern: `{project}` → `proj-1`, `{tenant}` → `tenant-1` (or empty).
    func concrete(_ pattern: RouteTable.Pattern, emptyParams: Bool = false) -> (String, PathParams) {
        var path = ""
        var params = PathParams()
        for s in pattern.segments {
            switch s {
            case .literal(let l): path += "/" + l
            case .param(let name, let allowEmpty, let suffix):
                let value = emptyParams && allowEmpty ? "" : (name == .project ? "proj-1" : "tenant-1")
                if !value.isEmpty { params[name] = value }
                path += "/" + value + suffix
            }
        }
        return (path, params)
    }

    func route(_ method: String, _ path: String) -> Route? {
        if case .route(let r) = Router.match(method: method, path: path) { return r }
        return nil
    }

    func status(_ method: String, _ path: String) -> Int {
        switch Router.match(method: method, path: path) {
        case .route: 200
        case .methodNotAllowed: 405
        case .notFound: 404
        }
    }

    // MARK: the table

    func testTableIsValid() {
        XCTAssertEqual(Router.table.validate(), [])
        XCTAssertGreaterThanOrEqual(Router.rows.count, 40)
    }

    /// Which routes may create a project or tenant is one column of the table (`readOnly`): every GET, and the POST
    /// lookups, queries, session cookies and snapshot saves (and a snapshot delete), never create (red team F1); every
    /// other write does.
    func testReadOnlyRowsAreTheGETsLookupsAndQueries() {
        XCTAssertTrue(Router.rows.filter { $0.method == "GET" }.allSatisfy(\.readOnly))
        let postReads = Set(Router.rows.filter { $0.readOnly && $0.method != "GET" }.map { $0.method + " " + $0.template })
        XCTAssertEqual(postReads, [
            "POST /identitytoolkit.googleapis.com/v1/accounts:lookup",
            "POST /identitytoolkit.googleapis.com/v1/projects/{project}[/tenants/{tenant?}]/accounts:lookup",
            "POST /identitytoolkit.googleapis.com/v1/projects/{project}:queryAccounts",
            "POST /www.googleapis.com/identitytoolkit/v3/relyingparty/downloadAccount",
            "POST /identitytoolkit.googleapis.com/v1/projects/{project}[/tenants/{tenant?}]/accounts:query",
            "POST /identitytoolkit.googleapis.com/v1/projects/{project}[/tenants/{tenant}]:createSessionCookie",
            "POST /emulator/v1/projects/{project}:snapshot",
            "DELETE /emulator/v1/projects/{project}/snapshots/{snapshot}",
        ])
        guard case .route(let query) = Router.match(method: "POST", path: "/identitytoolkit.googleapis.com/v1/projects/p/tenants/t/accounts:query") else {
            return XCTFail("no route")
        }
        XCTAssertTrue(query.readOnly)
        guard case .route(let create) = Router.match(method: "POST", path: "/identitytoolkit.googleapis.com/v1/projects/p/tenants/t/accounts") else {
            return XCTFail("no route")
        }
        XCTAssertFalse(create.readOnly)
    }

    func testDuplicateRowsAndBadTemplatesFailValidation() {
        let a = RouteRow("POST", "/x/v1/projects/{project}/things", .admin, .json, .loop, "things", Status.root)
        let sameShape = RouteRow("POST", "/x/v1/projects/{tenant}/things", .admin, .none, .bulk, "other", Status.root)
        let otherMethod = RouteRow("GET", "/x/v1/projects/{project}/things", .admin, .none, .loop, "list", Status.root)
        XCTAssertEqual(RouteTable([a, otherMethod]).validate(), [])
        XCTAssertEqual(RouteTable([a, a]).validate().count, 1)
        XCTAssertTrue(RouteTable([a, a]).validate()[0].hasPrefix("duplicate route POST /x/v1/projects/{project}/things"))
        XCTAssertEqual(RouteTable([a, sameShape]).validate().count, 1, "parameter names do not make two paths different")
        // An optional group expands to two paths, each of which can collide; so can a v3 alias.
        let optional = RouteRow("POST", "/x/v1/projects/{project}[/tenants/{tenant}]/things", .admin, .json, .loop, "t", Status.root)
        XCTAssertEqual(RouteTable([a, optional]).validate().count, 1)
        let v3 = RouteRow("POST", "/x/v1/a", .client, .json, .loop, v3: "lookup", "a", Status.root)
        let v3Again = RouteRow("POST", "/x/v1/b", .client, .json, .loop, v3: "lookup", "b", Status.root)
        XCTAssertEqual(RouteTable([v3, v3Again]).validate().count, 1)
        // Templates that do not compile, and rows missing what the README needs.
        for bad in ["/x/{nope}", "/x/a{project}", "/x/{project}{tenant}", "/x/[/a]/[/b]", "/x/[a]", "x/y", "/x/{project}/{project}", "/x/%3A"] {
            XCTAssertFalse(RouteTable([RouteRow("GET", bad, .open, .none, .loop, "d", Status.root)]).validate().isEmpty, bad)
        }
        XCTAssertFalse(RouteTable([RouteRow("HEAD", "/x", .open, .none, .loop, "d", Status.root)]).validate().isEmpty)
        XCTAssertFalse(RouteTable([RouteRow("GET", "/x", .open, .none, .loop, "", Status.root)]).validate().isEmpty)
        XCTAssertFalse(RouteTable([RouteRow("GET", "/x", .open, .none, .loop, v3: "x", "d", Status.root)]).validate().isEmpty)
    }

    func testEveryRowIsReachable() {
        var reached = Set<Int>()
        for pattern in Router.table.patterns {
            let row = Router.rows[pattern.row]
            for empty in [false, true] {
                let (path, params) = concrete(pattern, emptyParams: empty)
                guard let r = route(row.method, path) else { XCTFail("\(row.method) \(path) unreachable"); continue }
                XCTAssertEqual(r.row.template, row.template, path)
                XCTAssertEqual(r.row.method, row.method, path)
                XCTAssertEqual(r.params, params, path)
                XCTAssertEqual(r.legacy, pattern.legacy, path)
                if row.method == "GET" { XCTAssertEqual(route("HEAD", path)?.row.template, row.template, "HEAD is GET: \(path)") }
            }
            reached.insert(pattern.row)
        }
        XCTAssertEqual(reached.count, Router.rows.count)
    }

    func testNotFoundAndMethodNotAllowedComeFromTheTable() {
        for pattern in Router.table.patterns {
            let (path, _) = concrete(pattern)
            XCTAssertFalse(Router.table.rowsMatching(path: path).isEmpty)
            for variant in [path, path + "/x", path + "x", String(path.dropLast()), path.uppercased()] {
                let methods = Set(Router.table.rowsMatching(path: variant).map { Router.rows[$0].method })
                for m in Self.methods {
                    let expected = methods.isEmpty ? 404 : methods.contains(m == "HEAD" ? "GET" : m) ? 200 : 405
                    XCTAssertEqual(status(m, variant), expected, "\(m) \(variant)")
                }
            }
        }
        XCTAssertEqual(status("POST", "/identitytoolkit.googleapis.com/v1/accounts:nope"), 404)
        XCTAssertEqual(status("POST", "/www.googleapis.com/identitytoolkit/v3/relyingparty/nope"), 404)
        XCTAssertEqual(status("GET", ""), 404)
        XCTAssertEqual(status("GET", "//"), 404)
        XCTAssertEqual(status("GET", "/emulator/v1/projects/p/tenants/team-a/nope"), 404)
        // The hot paths answer 405 to other methods; `/` answers GET and HEAD only.
        XCTAssertEqual(status("GET", "/identitytoolkit.googleapis.com/v1/accounts:sendVerificationCode"), 405)
        XCTAssertEqual(status("HEAD", "/securetoken.googleapis.com/v1/token"), 405)
        XCTAssertEqual(status("HEAD", "/"), 200)
        XCTAssertEqual(status("POST", "/"), 405)
        XCTAssertEqual(status("POST", "/identitytoolkit.googleapis.com/v1/projects/p/accounts:batchGet"), 405)
    }

    func testHotPathsAreOneHashLookup() {
        for op in ["sendVerificationCode", "signInWithPhoneNumber", "lookup", "signUp", "update", "delete", "verifyClient"] {
            XCTAssertNotNil(Router.table.exact["/identitytoolkit.googleapis.com/v1/accounts:" + op], op)
        }
        XCTAssertNotNil(Router.table.exact["/securetoken.googleapis.com/v1/token"])
        XCTAssertNotNil(Router.table.exact["/"])
    }

    // MARK: parameters

    func testPathParametersAreTypedAndPercentDecoded() {
        let r = route("GET", "/emulator/v1/projects/demo%2Dphone/tenants/team%2Da/verificationCodes%3Await")
        XCTAssertEqual(r?.row.template, "/emulator/v1/projects/{project}[/tenants/{tenant}]/verificationCodes:wait")
        XCTAssertEqual(r?.params, PathParams(project: "demo-phone", tenant: "team-a"))
        // A `%2F` stays inside its segment (and is refused later as an identifier).
        XCTAssertEqual(route("GET", "/emulator/v1/projects/a%2Fb/config")?.params.project, "a/b")
        // `+` is not a space in paths.
        XCTAssertEqual(route("GET", "/emulator/v1/projects/a+b/config")?.params.project, "a+b")
        // Percent-encoded spellings of the hot paths route like the plain ones.
        XCTAssertEqual(route("POST", "/identitytoolkit.googleapis.com/v1/accounts%3AsendVerificationCode")?.row.template,
                       "/identitytoolkit.googleapis.com/v1/accounts:sendVerificationCode")
        // A parameter with a suffix.
        XCTAssertEqual(route("POST", "/emulator/v1/projects/demo-phone:export")?.params, PathParams(project: "demo-phone"))
        XCTAssertEqual(status("POST", "/emulator/v1/projects/:export"), 404)
        // Empty segments: `tenants//` is the top-level project where the template says `{tenant?}`, 404 elsewhere.
        XCTAssertEqual(route("POST", "/identitytoolkit.googleapis.com/v1/projects/demo-phone/tenants//accounts:batchCreate")?.params,
                       PathParams(project: "demo-phone"))
        XCTAssertEqual(status("POST", "/identitytoolkit.googleapis.com/v1/projects//accounts:batchCreate"), 404)
        XCTAssertEqual(status("GET", "/emulator/v1/projects/p/tenants//config"), 404)
        XCTAssertEqual(status("GET", "/identitytoolkit.googleapis.com/v2/projects/p/tenants/"), 404)
        XCTAssertEqual(status("GET", "/securetoken.google.com//.well-known/openid-configuration"), 404)
        XCTAssertEqual(route("GET", "/securetoken.google.com/p1/.well-known/openid-configuration")?.params.project, "p1")
    }

    func testLegacyPathsAreTypedRows() {
        let v3 = route("POST", "/www.googleapis.com/identitytoolkit/v3/relyingparty/verifyPhoneNumber")
        XCTAssertEqual(v3?.legacy, true)
        XCTAssertEqual(v3?.row.template, "/identitytoolkit.googleapis.com/v1/accounts:signInWithPhoneNumber")
        XCTAssertEqual(route("POST", "/identitytoolkit.googleapis.com/v1/accounts:signInWithPhoneNumber")?.legacy, false)
        XCTAssertEqual(status("GET", "/www.googleapis.com/identitytoolkit/v3/relyingparty/verifyPhoneNumber"), 405)
        // Only the v3 names: the v1 `accounts:` names are not legacy paths.
        XCTAssertEqual(status("POST", "/www.googleapis.com/identitytoolkit/v3/relyingparty/accounts:lookup"), 404)
    }

    func testLegacyRepliesCarryKind() throws {
        var config = ProjectConfig()
        config.testPhoneNumbers = ["+16505554567": "123456"]
        let emulator = Emulator(defaultProjectId: "demo-phone", projectConfigs: ["demo-phone": config],
                                clock: EmulatorClock(fixedAtMillis: 1_800_000_000_000), random: SeededRandom(seed: 1),
                                logger: Logger(label: "t", level: .critical))
        let app = PhoneAuthApp(emulator: emulator, tokens: TokenService(mode: .rs256, initialKey: HandlerTests.signingKey), signingPool: nil,
                               logger: Logger(label: "t", level: .critical))
        func send(_ target: String) throws -> JSON {
            let resp = app.respond(to: HTTPRequest(method: "POST", target: target, body: Array(#"{"phoneNumber":"+16505554567"}"#.utf8)), context: .detached)!
            XCTAssertEqual(resp.status, 200)
            return try JSONParser.parse(resp.body)
        }
        XCTAssertEqual(try send("/www.googleapis.com/identitytoolkit/v3/relyingparty/sendVerificationCode?key=k")["kind"],
                       "identitytoolkit#SendVerificationCodeResponse")
        XCTAssertNil(try send("/identitytoolkit.googleapis.com/v1/accounts:sendVerificationCode?key=k")["kind"])
    }

    func testProtectedPathsForPreflights() {
        XCTAssertTrue(Router.isProtected(path: "/emulator/v1/projects/p/config"))
        XCTAssertTrue(Router.isProtected(path: "/identitytoolkit.googleapis.com/v1/projects/p/accounts:lookup"))
        XCTAssertTrue(Router.isProtected(path: "/identitytoolkit.googleapis.com/v2/projects/p/tenants/t"))
        XCTAssertFalse(Router.isProtected(path: "/identitytoolkit.googleapis.com/v1/accounts:lookup"))
        XCTAssertFalse(Router.isProtected(path: "/"))
        XCTAssertFalse(Router.isProtected(path: "/nope"))
        for pattern in Router.table.patterns {
            let (path, _) = concrete(pattern)
            let protected = Router.table.rowsMatching(path: path).contains { Router.rows[$0].access.isProtected }
            XCTAssertEqual(Router.isProtected(path: path), protected, path)
        }
    }

    // MARK: README

    static var readmePath: String {
        "/" + #filePath.split(separator: "/").dropLast(3).joined(separator: "/") + "/docs/endpoints.md"
    }

    /// docs/endpoints.md's lines and the range of the table under `## Endpoints`.
    static func endpointsTable(_ readme: String) -> (lines: [Substring], range: Range<Int>)? {
        let lines = readme.split(separator: "\n", omittingEmptySubsequences: false)
        guard let heading = lines.firstIndex(of: "## Endpoints"),
              let start = lines[heading...].firstIndex(where: { $0.hasPrefix("|") }),
              !lines[heading..<start].contains(where: { $0.hasPrefix("#") && $0 != "## Endpoints" })
        else { return nil }
        let end = lines[start...].firstIndex(where: { !$0.hasPrefix("|") }) ?? lines.count
        return (lines, start..<end)
    }

    /// docs/endpoints.md's Endpoints table is `Router.table.markdown()`: every row documented, nothing documented that is not
    /// routed. `UPDATE_README_ENDPOINTS=1` (see `scripts/readme-endpoints`) rewrites it instead of failing.
    func testReadmeEndpointsTableMatchesTheRouteTable() throws {
        let readme = String(decoding: try Files.read(Self.readmePath), as: UTF8.self)
        let (lines, range) = try XCTUnwrap(Self.endpointsTable(readme), "docs/endpoints.md has no table under ## Endpoints")
        let current = lines[range].joined(separator: "\n") + "\n"
        let expected = Router.table.markdown()
        if current != expected, getenv("UPDATE_README_ENDPOINTS") != nil {
            var out = lines
            out.replaceSubrange(range, with: expected.dropLast().split(separator: "\n", omittingEmptySubsequences: false))
            try Files.writeAtomically(Self.readmePath, Array(out.joined(separator: "\n").utf8))
            return
        }
        XCTAssertEqual(current, expected, "docs/endpoints.md's Endpoints table is out of date: run scripts/readme-endpoints")
    }

    func testMarkdownNamesEveryPathAndMethod() {
        let md = Router.table.markdown()
        for row in Router.rows {
            XCTAssertTrue(md.contains("`\(row.template)`"), row.template)
            if let v3 = row.v3 { XCTAssertTrue(md.contains("`\(RouteRow.legacyPrefix + v3)`"), v3) }
        }
        let lines = md.split(separator: "\n").dropFirst(2)
        XCTAssertEqual(lines.map { $0.split(separator: "|")[0].split(separator: "/").count }.reduce(0, +), Router.rows.count,
                       "one method per row")
    }
}
