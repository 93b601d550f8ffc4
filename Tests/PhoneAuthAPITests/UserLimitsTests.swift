import EmulatorSupport
import HTTPServer
@testable import PhoneAuthAPI
import PhoneAuthCore
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Red-team F3 (issue 11 follow-up): free-text user fields are bounded on every path that sets them, a project
/// (and each tenant) holds a bounded number of users, and a `batchGet` page stays bounded.
final class UserLimitsTests: XCTestCase {
    var app: PhoneAuthApp!

    override func setUp() { makeApp() }

    func makeApp(maxUsers: Int = Emulator.defaultMaxUsersPerProject) {
        var config = ProjectConfig()
        config.testPhoneNumbers = ["+16505554567": "123456", "+16505554568": "123456"]
        let emulator = Emulator(defaultProjectId: "demo-phone", projectConfigs: ["demo-phone": config],
                                clock: EmulatorClock(fixedAtMillis: 1_800_000_000_000), random: SeededRandom(seed: 3),
                                logger: Logger(label: "t", level: .critical), maxUsersPerProject: maxUsers)
        app = PhoneAuthApp(emulator: emulator, tokens: TokenService(mode: .none, initialKey: nil), signingPool: nil,
                           logger: Logger(label: "t", level: .critical))
    }

    func call(_ target: String, _ body: JSON, admin: Bool = false, method: String = "POST") -> (Int, JSON) {
        var h = HTTPHeaders()
        if admin { h.add("Authorization", "Bearer owner") }
        let bytes = method == "GET" ? [] : body.serialized()
        let resp = app.respond(to: HTTPRequest(method: method, target: target, headers: h, body: bytes), context: .detached)!
        return (resp.status, (try? JSONParser.parse(resp.body)) ?? .null)
    }
    func client(_ op: String, _ body: JSON) -> (Int, JSON) { call("/identitytoolkit.googleapis.com/v1/accounts:\(op)?key=x", body) }
    func admin(_ op: String, _ body: JSON, tenant: String? = nil) -> (Int, JSON) {
        call("/identitytoolkit.googleapis.com/v1/projects/demo-phone" + (tenant.map { "/tenants/\($0)" } ?? "") + "/" + op, body, admin: true)
    }
    func message(_ r: (Int, JSON)) -> String? { r.1["error"]?["message"]?.stringValue }
    func userCount(_ key: StoreKey = StoreKey(projectId: "demo-phone")) -> Int { app.emulator.store(key).read { $0.users.count } }

    static let longName = String(repeating: "N", count: UserFieldLimits.displayName + 1)
    static let longURL = "https://example.test/" + String(repeating: "p", count: UserFieldLimits.photoUrl)
    static let nameError = "INVALID_DISPLAY_NAME : displayName must be at most 1024 characters (got 1025)."

    func testDisplayNameAndPhotoURLAreBoundedOnEveryPath() throws {
        let okName = String(repeating: "N", count: UserFieldLimits.displayName)
        let okURL = "https://example.test/" + String(repeating: "p", count: UserFieldLimits.photoUrl - 21)
        // Client signUp (what any web page can send): refused, and no user is created.
        var r = client("signUp", ["displayName": .string(Self.longName)])
        XCTAssertEqual(r.0, 400)
        XCTAssertEqual(message(r), Self.nameError)
        XCTAssertEqual(r.1["error"]?["status"], "INVALID_ARGUMENT")
        XCTAssertEqual(message(client("signUp", ["photoUrl": .string(Self.longURL)]))?.hasPrefix("INVALID_PHOTO_URL : photoUrl must be at most 2048"), true)
        XCTAssertEqual(userCount(), 0)
        r = client("signUp", ["displayName": .string(okName), "photoUrl": .string(okURL)])
        XCTAssertEqual(r.0, 200, "\(r.1)")
        let idToken = try XCTUnwrap(r.1["idToken"]?.stringValue)
        // Client accounts:update with the user's own ID token.
        XCTAssertEqual(message(client("update", ["idToken": .string(idToken), "displayName": .string(Self.longName)])), Self.nameError)
        XCTAssertEqual(client("update", ["idToken": .string(idToken), "photoUrl": .string(Self.longURL)]).0, 400)
        XCTAssertEqual(client("update", ["idToken": .string(idToken), "displayName": "short"]).0, 200)
        // Admin create and update.
        XCTAssertEqual(message(admin("accounts", ["localId": "a1", "displayName": .string(Self.longName)])), Self.nameError)
        XCTAssertEqual(admin("accounts", ["localId": "a1", "photoUrl": .string(Self.longURL)]).0, 400)
        XCTAssertEqual(admin("accounts", ["localId": "a1", "displayName": .string(okName)]).0, 200)
        XCTAssertEqual(message(admin("accounts:update", ["localId": "a1", "displayName": .string(Self.longName)])), Self.nameError)
        XCTAssertEqual(admin("accounts:update", ["localId": "a1", "photoUrl": .string(Self.longURL)]).0, 400)
        // Nothing over-long was stored anywhere.
        let stored = app.emulator.store(StoreKey(projectId: "demo-phone")).read { Array($0.users.values) }
        XCTAssertEqual(stored.count, 2)
        for u in stored {
            XCTAssertLessThanOrEqual(u.displayName?.utf16.count ?? 0, UserFieldLimits.displayName)
            XCTAssertLessThanOrEqual(u.photoUrl?.utf16.count ?? 0, UserFieldLimits.photoUrl)
        }
    }

    /// Lengths are code units, not characters: one "character" of combining marks cannot carry kilobytes.
    func testCombiningMarksCountTowardsTheLimits() {
        let zalgo = "e" + String(repeating: "\u{301}", count: 5000)
        XCTAssertEqual(zalgo.count, 1)
        XCTAssertEqual(message(admin("accounts", ["localId": "z", "displayName": .string(zalgo)]))?.hasPrefix("INVALID_DISPLAY_NAME"), true)
        XCTAssertEqual(admin("accounts", ["localId": "z"]).0, 200)
        // Custom claims: production's 1000, counted the same way (it was counting characters).
        let claims = JSON.object(["k": .string(zalgo)]).serializedString
        XCTAssertEqual(message(admin("accounts:update", ["localId": "z", "customAttributes": .string(claims)])), "CLAIMS_TOO_LARGE")
        XCTAssertNil(app.emulator.store(StoreKey(projectId: "demo-phone")).read { $0.users["z"]?.customAttributes })
    }

    func testImportsReportOverLongFieldsPerUser() throws {
        let zalgo = JSON.object(["k": .string("e" + String(repeating: "\u{301}", count: 2000))]).serializedString
        let users: [JSON] = [
            ["localId": "ok", "displayName": "Fine"],
            ["localId": "n", "displayName": .string(Self.longName)],
            ["localId": "p", "photoUrl": .string(Self.longURL)],
            ["localId": "h", "passwordHash": .string(String(repeating: "A", count: UserFieldLimits.passwordHash + 1))],
            ["localId": "c", "customAttributes": .string(zalgo)],
        ]
        let r = admin("accounts:batchCreate", ["users": .array(users)])
        XCTAssertEqual(r.0, 200)
        let errors = r.1["error"]?.arrayValue ?? []
        XCTAssertEqual(errors.compactMap { $0["index"]?.int64Value }, [1, 2, 3, 4])
        XCTAssertEqual(errors.first?["message"]?.stringValue, Self.nameError)
        XCTAssertEqual(errors.last?["message"]?.stringValue, "Custom claims provided are too large.")
        XCTAssertEqual(userCount(), 1)

        // firebase-tools import (--import, accounts.json): the same per-user problems.
        var template = Array("/tmp/phone-auth-limits-XXXXXX".utf8CString)
        let dir = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
        defer { _ = system("rm -rf '\(dir)'") }
        mkdir(dir + "/auth_export", 0o755)
        try Files.writeAtomically(dir + "/auth_export/accounts.json", JSON.object(["users": .array(users)]).serialized())
        // The first bad record stops the import, named by index, byte offset and line, whichever thread checks it.
        for checking in [ExportImport.ImportChecking.reader, .writer, .balanced] {
            makeApp()
            XCTAssertThrowsError(try ExportImport.importDirectory(app, projectId: "demo-phone", from: dir, checking: checking)) { e in
                let m = String(describing: e)
                XCTAssertTrue(m.contains("accounts.json: record 1 (byte "), m)
                XCTAssertTrue(m.contains("line 1): INVALID_DISPLAY_NAME"), m)
            }
        }
    }

    func testALocalIdRepeatedInTheFileIsNamedInAnyBatch() throws {
        var template = Array("/tmp/phone-auth-dup-XXXXXX".utf8CString)
        let dir = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
        defer { _ = system("rm -rf '\(dir)'") }
        mkdir(dir + "/auth_export", 0o755)
        // Within one batch of a thousand, and across batches.
        for (repeatAt, original) in [(700, 5), (1_500, 5)] {
            var users: [JSON] = (0..<2_000).map { .object(["localId": .string("u\($0)")]) }
            users[repeatAt] = ["localId": .string("u\(original)")]
            try Files.writeAtomically(dir + "/auth_export/accounts.json", JSON.object(["users": .array(users)]).prettySerialized())
            for checking in [ExportImport.ImportChecking.reader, .writer, .balanced] {
                makeApp()
                XCTAssertThrowsError(try ExportImport.importDirectory(app, projectId: "demo-phone", from: dir, checking: checking)) { e in
                    let m = String(describing: e)
                    XCTAssertTrue(m.contains("accounts.json: record \(repeatAt) (byte "), m)
                    XCTAssertTrue(m.hasSuffix("localId u\(original) appears twice in the file"), "\(checking): \(m)")
                }
            }
        }
        // A repeat of an earlier batch's id, then two records of one new id in the same batch: the first is named.
        var users: [JSON] = (0..<2_000).map { .object(["localId": .string("u\($0)")]) }
        users[1_000] = ["localId": "u5"]
        users[1_001] = ["localId": "twice"]
        users[1_002] = ["localId": "twice"]
        try Files.writeAtomically(dir + "/auth_export/accounts.json", JSON.object(["users": .array(users)]).prettySerialized())
        for checking in [ExportImport.ImportChecking.reader, .writer, .balanced] {
            makeApp()
            XCTAssertThrowsError(try ExportImport.importDirectory(app, projectId: "demo-phone", from: dir, checking: checking)) { e in
                let m = String(describing: e)
                XCTAssertTrue(m.contains("accounts.json: record 1000 (byte "), "\(checking): \(m)")
                XCTAssertTrue(m.hasSuffix("localId u5 appears twice in the file"), "\(checking): \(m)")
            }
        }
    }

    /// Into an empty store, a batch's repeats of earlier batches' localIds are found by writing it: a problem of an
    /// earlier record of that batch (a phone number another user holds) is named first, by every thread, and the
    /// repeat when it comes first.
    func testTheFirstProblemOfABatchIsNamedBeforeALaterRepeat() throws {
        var template = Array("/tmp/phone-auth-rep-XXXXXX".utf8CString)
        let dir = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
        defer { _ = system("rm -rf '\(dir)'") }
        mkdir(dir + "/auth_export", 0o755)
        for (phoneAt, repeatAt, named, message) in [(1_200, 1_500, 1_200, "phone number already exists"),
                                                    (1_500, 1_200, 1_200, "localId u5 appears twice in the file")] {
            var users: [JSON] = (0..<2_000).map { .object(["localId": .string("u\($0)"), "phoneNumber": .string("+1650555\(String(format: "%04d", $0))")]) }
            users[phoneAt] = ["localId": .string("u\(phoneAt)"), "phoneNumber": "+16505550003"]
            users[repeatAt] = ["localId": "u5"]
            try Files.writeAtomically(dir + "/auth_export/accounts.json", JSON.object(["users": .array(users)]).prettySerialized())
            for checking in [ExportImport.ImportChecking.reader, .writer, .balanced] {
                makeApp()
                XCTAssertThrowsError(try ExportImport.importDirectory(app, projectId: "demo-phone", from: dir, checking: checking)) { e in
                    let m = String(describing: e)
                    XCTAssertTrue(m.contains("accounts.json: record \(named) (byte "), "\(checking): \(m)")
                    XCTAssertTrue(m.hasSuffix(message), "\(checking): \(m)")
                }
            }
        }
    }

    func testUsersPerProjectAndPerTenantAreCapped() throws {
        makeApp(maxUsers: 3)
        for _ in 0..<2 { XCTAssertEqual(client("signUp", [:]).0, 200) }
        XCTAssertEqual(admin("accounts", ["localId": "admin-made"]).0, 200)
        // Full: anonymous signUp, admin create, batchCreate and a new phone user are refused.
        let full = client("signUp", [:])
        XCTAssertEqual(full.0, 400)
        XCTAssertEqual(message(full), "QUOTA_EXCEEDED : Too many users: a project (or tenant) holds at most 3 users (--max-users).")
        XCTAssertEqual(message(admin("accounts", ["localId": "one-more"]))?.hasPrefix("QUOTA_EXCEEDED"), true)
        let batch = admin("accounts:batchCreate", ["users": [["localId": "b1"]]])
        XCTAssertEqual(batch.1["error"]?.arrayValue?.first?["message"]?.stringValue?.hasPrefix("QUOTA_EXCEEDED"), true)
        let session = try XCTUnwrap(client("sendVerificationCode", ["phoneNumber": "+16505554567"]).1["sessionInfo"]?.stringValue)
        XCTAssertEqual(message(client("signInWithPhoneNumber", ["sessionInfo": .string(session), "code": "123456"]))?.hasPrefix("QUOTA_EXCEEDED"), true)
        XCTAssertEqual(userCount(), 3)
        // Existing users keep working: updates, and an existing phone user signs in again.
        XCTAssertEqual(admin("accounts:update", ["localId": "admin-made", "phoneNumber": "+16505554568"]).0, 200)
        let again = try XCTUnwrap(client("sendVerificationCode", ["phoneNumber": "+16505554568"]).1["sessionInfo"]?.stringValue)
        let signedIn = client("signInWithPhoneNumber", ["sessionInfo": .string(again), "code": "123456"])
        XCTAssertEqual(signedIn.0, 200, "\(signedIn.1)")
        XCTAssertEqual(signedIn.1["localId"], "admin-made")
        // Deleting one frees a place; a tenant has its own cap.
        XCTAssertEqual(admin("accounts:delete", ["localId": "admin-made"]).0, 200)
        XCTAssertEqual(admin("accounts", ["localId": "one-more"]).0, 200)
        for i in 0..<3 { XCTAssertEqual(admin("accounts", ["localId": .string("t\(i)")], tenant: "team-a1").0, 200) }
        XCTAssertEqual(message(admin("accounts", ["localId": "t3"], tenant: "team-a1"))?.hasPrefix("QUOTA_EXCEEDED"), true)
    }

    func testMaxUsersSetting() throws {
        func resolve(_ args: [String], env: [String: String] = [:], file: String? = nil) throws -> ServerSettings {
            let outcome = try ServerSettings.resolve(arguments: args, environment: { env[$0] },
                                                     readFile: { _ in Array((file ?? "{}").utf8) }, fileExists: { $0 == "c.json" && file != nil })
            guard case .run(let s) = outcome else { throw SettingsError("not run") }
            return s
        }
        XCTAssertEqual(try resolve([]).maxUsers, 200_000)
        XCTAssertEqual(Emulator(defaultProjectId: "p").maxUsersPerProject, 200_000)
        XCTAssertEqual(try resolve(["--max-users", "7"]).maxUsers, 7)
        XCTAssertEqual(try resolve([], env: ["PHONE_AUTH_EMULATOR_MAX_USERS": "9"]).maxUsers, 9)
        XCTAssertEqual(try resolve(["--config", "c.json"], file: #"{"maxUsers":11}"#).maxUsers, 11)
        XCTAssertThrowsError(try resolve(["--max-users", "0"]))
        XCTAssertThrowsError(try resolve(["--max-users", "lots"]))
        XCTAssertThrowsError(try resolve(["--config", "c.json"], file: #"{"maxUsers":-1}"#))
        XCTAssertTrue(ServerSettings.usage.contains("--max-users N"))
    }

    /// 1000 users with every free-text field at its limit: one `batchGet` page (the most it returns) stays bounded.
    func testABatchGetPageIsBounded() throws {
        var c = UserChanges()
        c.displayName = .set(String(repeating: "N", count: UserFieldLimits.displayName))
        c.photoUrl = .set("https://example.test/" + String(repeating: "p", count: UserFieldLimits.photoUrl - 21))
        c.customAttributes = try CustomClaims.validate(JSON.object(["k": .string(String(repeating: "c", count: 990))]).serializedString)
        c.passwordHash = String(repeating: "h", count: UserFieldLimits.passwordHash)
        for i in 0..<1001 {
            c.email = .set("user\(i)@" + String(repeating: "d", count: 200) + ".test")
            _ = try app.emulator.createUser(StoreKey(projectId: "demo-phone"), localId: "u" + String(repeating: "0", count: 120) + String(i), changes: c)
        }
        let target = "/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts:batchGet?maxResults=1000"
        var h = HTTPHeaders()
        h.add("Authorization", "Bearer owner")
        let resp = app.respond(to: HTTPRequest(method: "GET", target: target, headers: h, body: []), context: .detached)!
        XCTAssertEqual(resp.status, 200)
        let page = try JSONParser.parse(resp.body)
        XCTAssertEqual(page["users"]?.arrayValue?.count, 1000)
        XCTAssertNotNil(page["nextPageToken"])
        // Every field is at its maximum, so the page is near the bound: about 7 KB a user, under 10 MB in all.
        XCTAssertGreaterThan(resp.body.count, 1000 * 5000)
        XCTAssertLessThan(resp.body.count, 10 << 20)
        XCTAssertEqual(call(target.dropLast(4) + "1001", .null, admin: true, method: "GET").0, 400, "1000 is the largest page")
    }
}
