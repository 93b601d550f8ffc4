import EmulatorSupport
import HTTPServer
import JWT
@testable import PhoneAuthAPI
import PhoneAuthCore
import XCTest

/// Account endpoints through the responder: admin create/update/delete, claims rules, batch operations.
final class AccountTests: XCTestCase {
    var app: PhoneAuthApp!

    override func setUp() {
        let emulator = Emulator(defaultProjectId: "demo-phone", clock: EmulatorClock(fixedAtMillis: 1_800_000_000_000),
                                random: SeededRandom(seed: 9), logger: Logger(label: "t", level: .critical))
        app = PhoneAuthApp(emulator: emulator, tokens: TokenService(mode: .none, initialKey: nil), signingPool: nil,
                           logger: Logger(label: "t", level: .critical))
    }

    func admin(_ op: String, _ body: String, method: String = "POST", tenant: String? = nil) -> (Int, JSON) {
        var h = HTTPHeaders()
        h.add("Authorization", "Bearer owner")
        let base = "/identitytoolkit.googleapis.com/v1/projects/demo-phone" + (tenant.map { "/tenants/\($0)" } ?? "")
        let resp = app.respond(to: HTTPRequest(method: method, target: base + "/" + op, headers: h, body: Array(body.utf8)), context: .detached)!
        return (resp.status, resp.body.isEmpty ? .null : (try? JSONParser.parse(resp.body)) ?? .null)
    }

    func message(_ r: (Int, JSON)) -> String? { r.1["error"]?["message"]?.stringValue }

    func testCreateUpdateDeleteLifecycle() {
        let (s, created) = admin("accounts", #"{"localId":"u1","phoneNumber":"+1 650 555 0001","displayName":"A"}"#)
        XCTAssertEqual(s, 200)
        XCTAssertEqual(created["localId"], "u1")
        XCTAssertEqual(message(admin("accounts", #"{"localId":"u1"}"#)), "DUPLICATE_LOCAL_ID")
        XCTAssertEqual(message(admin("accounts", #"{"phoneNumber":"+16505550001"}"#)), "PHONE_NUMBER_EXISTS")
        XCTAssertEqual(message(admin("accounts", #"{"phoneNumber":"555-0100"}"#)), "INVALID_PHONE_NUMBER : Invalid format.")

        let (_, updated) = admin("accounts:update", #"{"localId":"u1","disableUser":true,"validSince":"1800000000","customAttributes":"{\"role\":\"x\"}"}"#)
        XCTAssertEqual(updated["localId"], "u1")
        let (_, looked) = admin("accounts:lookup", #"{"localId":["u1"]}"#)
        let user = looked["users"]?.arrayValue?.first
        XCTAssertEqual(user?["disabled"], true)
        XCTAssertEqual(user?["validSince"], "1800000000")
        XCTAssertEqual(user?["customAttributes"], #"{"role":"x"}"#)
        XCTAssertEqual(message(admin("accounts:update", #"{"disableUser":true}"#)), "MISSING_LOCAL_ID")
        XCTAssertEqual(message(admin("accounts:update", #"{"localId":"nobody"}"#)), "USER_NOT_FOUND")

        let (ds, deleted) = admin("accounts:delete", #"{"localId":"u1"}"#)
        XCTAssertEqual(ds, 200)
        XCTAssertEqual(deleted["kind"], "identitytoolkit#DeleteAccountResponse")
        XCTAssertEqual(message(admin("accounts:delete", #"{"localId":"u1"}"#)), "USER_NOT_FOUND")
    }

    func testClaimRules() {
        _ = admin("accounts", #"{"localId":"u2"}"#)
        XCTAssertEqual(message(admin("accounts:update", #"{"localId":"u2","customAttributes":"{\"iss\":1}"}"#)), "FORBIDDEN_CLAIM : iss")
        XCTAssertEqual(message(admin("accounts:update", #"{"localId":"u2","customAttributes":"42"}"#)), "INVALID_CLAIMS")
        let big = String(repeating: "x", count: 995)
        XCTAssertEqual(message(admin("accounts:update", #"{"localId":"u2","customAttributes":"{\"k\":\"\#(big)\"}"}"#)), "CLAIMS_TOO_LARGE")
        XCTAssertEqual(admin("accounts:update", #"{"localId":"u2","customAttributes":"{\"role\":\"ok\"}"}"#).0, 200)
    }

    func testBatchGetPagesInLocalIdOrder() {
        for i in [3, 1, 2, 5, 4] { _ = admin("accounts", #"{"localId":"u\#(i)"}"#) }
        let (_, p1) = admin("accounts:batchGet?maxResults=2", "", method: "GET")
        XCTAssertEqual(p1["users"]?.arrayValue?.map { $0["localId"]!.stringValue! }, ["u1", "u2"])
        XCTAssertEqual(p1["nextPageToken"], "u2")
        let (_, p3) = admin("accounts:batchGet?maxResults=2&nextPageToken=u4", "", method: "GET")
        XCTAssertEqual(p3["users"]?.arrayValue?.map { $0["localId"]!.stringValue! }, ["u5"])
        XCTAssertNil(p3["nextPageToken"])
        let (_, all) = admin("accounts:batchGet?maxResults=-1", "", method: "GET")
        XCTAssertEqual(all["users"]?.arrayValue?.count, 5)
        XCTAssertEqual(admin("accounts:batchGet?maxResults=5000", "", method: "GET").0, 400)
        XCTAssertEqual(admin("accounts:batchGet", "", method: "POST").0, 405)
    }

    func testBatchDeleteNeedsForceForEnabledUsers() {
        _ = admin("accounts", #"{"localId":"a"}"#)
        _ = admin("accounts", #"{"localId":"b","disabled":true}"#)
        let (_, r) = admin("accounts:batchDelete", #"{"localIds":["a","b"]}"#)
        XCTAssertEqual(r["errors"]?.arrayValue?.first?["localId"], "a")
        XCTAssertEqual(admin("accounts:lookup", #"{"localId":["a","b"]}"#).1["users"]?.arrayValue?.count, 1)
        XCTAssertNil(admin("accounts:batchDelete", #"{"localIds":["a"],"force":true}"#).1["errors"])
    }

    /// `accounts:query`'s `sortBy` options and `order` (ties and unknown options by uid).
    func testQuerySortsByEveryOption() {
        XCTAssertEqual(admin("accounts:batchCreate", #"""
            {"users":[{"localId":"b","displayName":"Zed","email":"a@x.test","createdAt":"3000","lastLoginAt":"1000"},
                      {"localId":"c","displayName":"Amy","email":"c@x.test","createdAt":"1000","lastLoginAt":"3000"},
                      {"localId":"a","displayName":"Max","email":"b@x.test","createdAt":"2000","lastLoginAt":"2000"}]}
            """#).0, 200)
        func order(_ sortBy: String, _ extra: String = "") -> [String] {
            admin("accounts:query", #"{"sortBy":"\#(sortBy)"\#(extra)}"#).1["userInfo"]?.arrayValue?.compactMap { $0["localId"]?.stringValue } ?? []
        }
        XCTAssertEqual(order("USER_ID"), ["a", "b", "c"])
        XCTAssertEqual(order("NAME"), ["c", "a", "b"])
        XCTAssertEqual(order("CREATED_AT"), ["c", "a", "b"])
        XCTAssertEqual(order("LAST_LOGIN_AT"), ["b", "a", "c"])
        XCTAssertEqual(order("USER_EMAIL"), ["b", "a", "c"])
        XCTAssertEqual(order("SORT_BY_FIELD_UNSPECIFIED"), ["a", "b", "c"])
        XCTAssertEqual(order("NAME", #","order":"DESC""#), ["b", "a", "c"])
        // Production's enums: an unknown option is refused, not read as the default.
        XCTAssertEqual(admin("accounts:query", #"{"sortBy":"NOT_AN_OPTION"}"#).0, 400)
        XCTAssertEqual(admin("accounts:query", #"{"order":"SIDEWAYS"}"#).0, 400)
    }

    /// `accounts:query` as production answers it: `recordsCount` counts what is returned, or (`returnUserInfo:
    /// false`) what matches; only the first expression is evaluated, all its fields must match; `limit` ≤ 500.
    func testQueryCountsAndExpressions() throws {
        let users = (0..<502).map { i in #"{"localId":"u\#(String(repeating: "0", count: 3 - String(i).count) + String(i))","email":"U\#(i)@x.test"\#(i == 7 ? #","phoneNumber":"+15550000007""# : "")}"# }
        XCTAssertEqual(admin("accounts:batchCreate", #"{"users":[\#(users.prefix(500).joined(separator: ","))]}"#).0, 200)
        XCTAssertEqual(admin("accounts:batchCreate", #"{"users":[\#(users.dropFirst(500).joined(separator: ","))]}"#).0, 200)
        XCTAssertEqual(admin("accounts:query", #"{"returnUserInfo":false}"#).1, ["recordsCount": "502"])
        XCTAssertEqual(admin("accounts:query", #"{"returnUserInfo":false,"limit":"3"}"#).1, ["recordsCount": "502"])
        let all = admin("accounts:query", "{}").1
        XCTAssertEqual(all["recordsCount"], "500")
        XCTAssertEqual(all["userInfo"]?.arrayValue?.count, 500)
        XCTAssertEqual(admin("accounts:query", #"{"limit":1000}"#).1["recordsCount"], "500")
        let page = admin("accounts:query", #"{"limit":"2","offset":"10","order":"DESC"}"#).1
        XCTAssertEqual(page["recordsCount"], "2")
        XCTAssertEqual(page["userInfo"]?.arrayValue?.compactMap { $0["localId"]?.stringValue }, ["u491", "u490"])
        func ids(_ expression: String) -> [String] {
            admin("accounts:query", #"{"expression":\#(expression)}"#).1["userInfo"]?.arrayValue?.compactMap { $0["localId"]?.stringValue } ?? []
        }
        XCTAssertEqual(ids(#"[{"email":"u7@X.TEST"}]"#), ["u007"])
        XCTAssertEqual(ids(#"[{"phoneNumber":"+1 555 000 0007"}]"#), ["u007"])
        XCTAssertEqual(ids(#"[{"userId":"u007","email":"u8@x.test"}]"#), [])
        XCTAssertEqual(ids(#"[{"userId":"u001"},{"userId":"u002"}]"#), ["u001"], "only the first expression")
        XCTAssertEqual(admin("accounts:query", #"{"expression":[{"userId":"u001"}],"returnUserInfo":false}"#).1, ["recordsCount": "1"])
        XCTAssertEqual(admin("accounts:query", #"{"expression":[7]}"#).0, 400)
        XCTAssertEqual(admin("accounts:query", #"{"expression":[{"userId":7}]}"#).0, 400)
        XCTAssertEqual(admin("accounts:query", #"{"limit":"-1"}"#).0, 400)
        // projects.queryAccounts: the same at the project's path, a tenant by the body's tenantId.
        var h = HTTPHeaders()
        h.add("Authorization", "Bearer owner")
        let resp = app.respond(to: HTTPRequest(method: "POST", target: "/identitytoolkit.googleapis.com/v1/projects/demo-phone:queryAccounts",
                                               headers: h, body: Array(#"{"returnUserInfo":false}"#.utf8)), context: .detached)!
        XCTAssertEqual(try JSONParser.parse(resp.body), ["recordsCount": "502"])
    }

    func testBatchCreateReportsPerUserErrors() {
        _ = admin("accounts", #"{"localId":"taken","phoneNumber":"+15550000001"}"#)
        let (s, r) = admin("accounts:batchCreate", #"""
            {"users":[{"localId":"ok","phoneNumber":"+15550000002","customAttributes":"{\"a\":1}","createdAt":"1700000000000"},
                      {"phoneNumber":"+15550000003"},
                      {"localId":"bad-phone","phoneNumber":"nope"},
                      {"localId":"taken"},
                      {"localId":"dup-phone","phoneNumber":"+15550000001"}]}
            """#)
        XCTAssertEqual(s, 200)
        XCTAssertEqual(r["error"]?.arrayValue?.compactMap { $0["index"]?.int64Value }, [1, 2, 3, 4])
        let user = admin("accounts:lookup", #"{"localId":["ok"]}"#).1["users"]?.arrayValue?.first
        XCTAssertEqual(user?["createdAt"], "1700000000000")
        XCTAssertEqual(message(admin("accounts:batchCreate", #"{"users":[]}"#)), "MISSING_USER_ACCOUNT")
        XCTAssertEqual(message(admin("accounts:batchCreate", #"{"users":[{"localId":"z"},{"localId":"z"}]}"#)), "DUPLICATE_LOCAL_ID : z")
    }

    func testTenantStoresAreSeparate() {
        _ = admin("accounts", #"{"localId":"t-user"}"#, tenant: "t1")
        XCTAssertNil(admin("accounts:lookup", #"{"localId":["t-user"]}"#).1["users"])
        XCTAssertEqual(admin("accounts:lookup", #"{"localId":["t-user"]}"#, tenant: "t1").1["users"]?.arrayValue?.first?["tenantId"], "t1")
    }
}
