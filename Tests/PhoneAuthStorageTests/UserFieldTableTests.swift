import Dispatch
import EmulatorSupport
import HTTPServer
@testable import PhoneAuthAPI
@testable import PhoneAuthCore
import PhoneAuthStorage
import PhoneAuthTestSupport
import XCTest

/// The user field table is the one place a user field is declared: a field that exists only in this test (one row,
/// its value kept in `UserRecord.extensions`) is set by an admin update and by a user's own, shows in lookups, is
/// reported by `user.updated`, survives a restart from the data directory, and goes out in an export and back in
/// through an import — with no other code knowing it.
final class UserFieldTableTests: XCTestCase, AppCalling {
    var app: PhoneAuthApp!
    var dir = ""
    let clock = EmulatorClock(fixedAtMillis: testEpochMillis)
    let key = StoreKey(projectId: "demo-phone")

    /// The test's own field: anyone may set it, `deleteAttribute: NICKNAME` clears it, bounded to 16 characters.
    static let nickname = UserField(
        "nickname", event: "nickname", access: .everyone, deleteAttribute: "NICKNAME",
        value: { $0.extensions["nickname"] }, assign: { $0.extensions["nickname"] = $1 },
        admit: { c, _, _ throws(AuthError) in
            if case .set(let v) = c, (v.stringValue?.count ?? 99) > 16 { throw AuthError.invalidArgument("nickname is too long.") }
            return c
        })
    let table = UserFieldTable.standard.adding(UserFieldTableTests.nickname)

    override func setUp() { dir = TemporaryDirectory.make("phone-auth-fields") }
    override func tearDown() { TemporaryDirectory.remove(dir) }

    /// An app over `journal` with the extended table.
    func open(_ journalDir: String) throws -> (DataDirectory, PhoneAuthApp) {
        let d = try DataDirectory(path: journalDir, userFields: table)
        var config = ProjectConfig()
        config.testPhoneNumbers = ["+16505554567": "123456"]
        let e = Emulator(defaultProjectId: "demo-phone", projectConfigs: ["demo-phone": config], clock: clock, random: SeededRandom(seed: 24),
                         logger: .quiet, journal: d, userFields: table)
        let snap = try d.loadSnapshot()
        e.restore(snap.stores, refreshTokens: snap.refreshTokens)
        return (d, PhoneAuthApp(emulator: e, tokens: TokenService(mode: .none, initialKey: nil), signingPool: nil, logger: .quiet))
    }

    /// A call whose answer may wait for the journal (replies are held until what they wrote is durable).
    func durable(_ target: String, _ body: String, admin: Bool = false) -> (Int, JSON) {
        var h = HTTPHeaders()
        if admin { h.add("Authorization", "Bearer owner") }
        let req = HTTPRequest(method: "POST", target: target, headers: h, body: Array(body.utf8))
        let box = Locked<HTTPResponse?>(nil)
        let done = DispatchSemaphore(value: 0)
        let now = app.respond(to: req, deliver: { r in box.withLock { $0 = r }; done.signal() })
        if now == nil { XCTAssertEqual(done.wait(timeout: .now() + 30), .success, "no answer") }
        guard let r = now ?? box.withLock({ $0 }) else { return (0, .null) }
        return (r.status, r.body.isEmpty ? .null : ((try? JSONParser.parse(r.body)) ?? .null))
    }

    func admin(_ op: String, _ body: String) -> (Int, JSON) {
        durable("/identitytoolkit.googleapis.com/v1/projects/demo-phone/" + op, body, admin: true)
    }

    func lookup(_ id: String) -> JSON { admin("accounts:lookup", #"{"localId":["\#(id)"]}"#).1["users"]?.arrayValue?.first ?? .null }

    func testAFieldDeclaredOnlyInTheTableRoundTripsEverywhere() throws {
        var (d, a) = try open(dir + "/data")
        app = a
        XCTAssertEqual(admin("accounts", #"{"localId":"u1","email":"u1@example.com","password":"secret12"}"#).0, 200)
        let mark = app.emulator.store(key).events.retained.count
        // An admin sets it; the checks of its row apply; lookups and the event diff see it.
        XCTAssertEqual(admin("accounts:update", #"{"localId":"u1","nickname":"Nicky"}"#).0, 200)
        XCTAssertEqual(message(admin("accounts:update", #"{"localId":"u1","nickname":"far too long for a nickname"}"#)), "nickname is too long.")
        XCTAssertEqual(lookup("u1")["nickname"], "Nicky")
        let updated = app.emulator.store(key).events.retained.dropFirst(mark).filter { $0.type == "user.updated" }
        XCTAssertEqual(updated.first?.json(key)["fields"], ["nickname"])
        // The user's own update, through `access: .everyone`, and its deleteAttribute.
        let signIn = durable("/identitytoolkit.googleapis.com/v1/accounts:signInWithPassword?key=k", #"{"email":"u1@example.com","password":"secret12","returnSecureToken":true}"#)
        let idToken = try XCTUnwrap(signIn.1["idToken"]?.stringValue, "\(signIn.1)")
        XCTAssertEqual(durable("/identitytoolkit.googleapis.com/v1/accounts:update?key=k", #"{"idToken":"\#(idToken)","nickname":"Nic"}"#).0, 200)
        XCTAssertEqual(lookup("u1")["nickname"], "Nic")
        // The journal: a restart from the data directory brings it back.
        d.close()
        (d, a) = try open(dir + "/data")
        app = a
        XCTAssertEqual(lookup("u1")["nickname"], "Nic")
        // Export, then import into a fresh emulator: the firebase-tools files carry it.
        let exported = try ExportImport.export(app, projectId: "demo-phone", to: dir + "/export")
        XCTAssertEqual(exported.users, 1)
        let accounts = try JSONParser.parse(try Files.read(dir + "/export/auth_export/accounts.json"))
        XCTAssertEqual(accounts["users"]?.arrayValue?.first?["nickname"], "Nic")
        d.close()
        (d, a) = try open(dir + "/fresh")
        app = a
        let imported = try ExportImport.importDirectory(app, projectId: "demo-phone", from: dir + "/export")
        XCTAssertEqual(imported.users, 1)
        XCTAssertEqual(lookup("u1")["nickname"], "Nic")
        // Cleared by its deleteAttribute.
        XCTAssertEqual(admin("accounts:update", #"{"localId":"u1","deleteAttribute":["NICKNAME"]}"#).0, 200)
        XCTAssertNil(lookup("u1")["nickname"])
        d.close()
    }

    /// A copy for another thread (an import's reader) is made of rows of its own — the standard ones; a row added by
    /// `adding` stays the one object — and maps a record as the original does.
    func testAnOwnCopyHasRowsOfItsOwnAndMapsTheSame() throws {
        let copy = table.ownCopy()
        XCTAssertEqual(copy.fields.map(\.name), table.fields.map(\.name))
        for (a, b) in zip(copy.fields, table.fields) where b !== Self.nickname { XCTAssertFalse(a === b, a.name) }
        XCTAssertTrue(copy.fields.last === Self.nickname)
        let item: JSONObject = ["localId": "u1", "displayName": "Ann", "phoneNumber": "+1 650-555-0101", "email": "Ann@Example.com",
                                "customAttributes": #"{"role":"a"}"#, "nickname": "nick", "createdAt": "1700000000000"]
        func made(_ t: UserFieldTable) throws -> JSON {
            let input = UserFieldInput(random: SeededRandom(seed: 1), now: testEpochMillis, claims: nil)
            let changes = try t.importChanges(item, input: input).get()
            var u = UserRecord(localId: "u1", createdAt: changes.createdAt ?? 0)
            try t.apply(changes, to: &u, in: AuthStore(config: ProjectConfig()), now: testEpochMillis)
            return t.render(u)
        }
        let mine = try made(copy), theirs = try made(table)
        XCTAssertEqual(mine, theirs)
        XCTAssertEqual(mine.objectValue?["phoneNumber"], "+16505550101")
        XCTAssertEqual(mine.objectValue?["email"], "ann@example.com")
        XCTAssertEqual(mine.objectValue?["nickname"], "nick")
        XCTAssertEqual(mine.objectValue?["createdAt"], "1700000000000")
    }

    /// The standard table renders what the hand-written mappings rendered (a record with every field set).
    func testTheStandardTableMapsEveryFieldOfARecord() throws {
        var u = UserRecord(localId: "full", createdAt: 1_700_000_000_123)
        u.email = "full@example.com"
        u.emailVerified = true
        u.displayName = "Full"
        u.photoUrl = "https://example.com/p.png"
        u.phoneNumber = "+15550001234"
        u.disabled = true
        u.customAttributes = #"{"role":"x"}"#
        u.validSince = 1_700_000_000
        u.lastLoginAt = 1_700_000_001_000
        u.lastRefreshAt = 1_700_000_002_500
        u.tenantId = "t1"
        u.passwordHash = "hash"
        u.salt = "salt"
        u.passwordUpdatedAt = 1_700_000_000_999
        u.mfaInfo = [MFAEnrollment(mfaEnrollmentId: "e1", phoneInfo: "+15550004321", displayName: "work", enrolledAt: 1_700_000_000_000)]
        u.providerUserInfo = [ProviderUserInfo(providerId: "google.com", rawId: "g-1", federatedId: "g-1", displayName: "G", email: "g@example.com")]
        u.emailLinkSignin = true
        u.screenName = "full_user"
        u.initialEmail = "first@example.com"
        let t = UserFieldTable.standard
        // The journal keeps every field exactly.
        XCTAssertEqual(t.record(fromJournal: t.journalObject(u)), u)
        // The wire: what lookups showed before the table, key by key.
        let wire = try XCTUnwrap(t.render(u).objectValue)
        XCTAssertEqual(wire.keys, ["localId", "email", "emailVerified", "displayName", "photoUrl", "phoneNumber", "disabled", "providerUserInfo",
                                   "customAttributes", "validSince", "lastLoginAt", "createdAt", "lastRefreshAt", "tenantId", "passwordHash", "salt",
                                   "passwordUpdatedAt", "emailLinkSignin", "screenName", "mfaInfo", "initialEmail"])
        XCTAssertEqual(wire["createdAt"], "1700000000123")
        XCTAssertEqual(wire["validSince"], "1700000000")
        XCTAssertEqual(wire["lastRefreshAt"], "2023-11-14T22:13:22.500Z")
        XCTAssertEqual(wire["passwordUpdatedAt"], .int(1_700_000_000_999))
        XCTAssertEqual(wire["providerUserInfo"]?.arrayValue?.compactMap { $0["providerId"]?.stringValue }, ["phone", "password", "google.com"])
        XCTAssertEqual(wire["mfaInfo"]?.arrayValue?.first?["unobfuscatedPhoneInfo"], "+15550004321")
        let client = try XCTUnwrap(t.render(u, forClient: true).objectValue)
        XCTAssertEqual(client["passwordHash"], .string(UserFields.redactedPasswordHash))
        XCTAssertNil(client["salt"])
        // An import of the wire form gives the same record (the password goes through the import's hash path).
        let input = UserFieldInput(random: SeededRandom(seed: 1), now: 0)
        var changes = try t.importChanges(wire, input: input).get()
        changes.password = PasswordChange(hash: "hash", salt: "salt", updatedAt: 1_700_000_000_999, revokesTokens: false)
        var back = UserRecord(localId: "full", createdAt: 0)
        back.tenantId = "t1"
        back.lastRefreshAt = u.lastRefreshAt
        try t.apply(changes, to: &back, in: AuthStore(config: ProjectConfig()), now: 0)
        XCTAssertEqual(back, u)
        // The blocking payload.
        let b = t.blockingRecord(u, tenantId: nil)
        XCTAssertEqual(b["uid"], "full")
        XCTAssertEqual(b["metadata"], ["last_sign_in_time": .int(1_700_000_001), "creation_time": .int(1_700_000_000)])
        XCTAssertEqual(b["custom_claims"], ["role": "x"])
        XCTAssertEqual(b["tokens_valid_after_time"], .int(1_700_000_000))
        XCTAssertEqual(b["tenant_id"], "t1")
        XCTAssertEqual(b["multi_factor"]?["enrolled_factors"]?.arrayValue?.count, 1)
        // Every field whose change is reported differs in one record only: the event diff names exactly it.
        for f in t.fields where f.event != nil {
            var other = u
            f.assign(&other, ["emailVerified", "disabled", "emailLinkSignin"].contains(f.name) ? .bool(false) : f.name == "createdAt" ? .exactInt(Int64(1)) : nil)
            XCTAssertEqual(t.changedFields(from: u, to: other), [f.event!], f.name)
        }
    }

    /// Each field that feeds an ID-token claim feeds it with its wire value (the claims are written by TokenService's
    /// fast path; this holds them to the table).
    func testClaimsComeFromTheFieldsThatNameThem() throws {
        var u = UserRecord(localId: "c", createdAt: 1)
        u.email = "c@example.com"
        u.emailVerified = true
        u.displayName = "C"
        u.photoUrl = "https://example.com/c.png"
        u.phoneNumber = "+15550001111"
        let claims = TokenService.claims(for: u, key: key, authTime: 1, signInProvider: "phone", issuedAt: 1)
        let named = UserFieldTable.standard.fields.filter { $0.claim != nil }
        XCTAssertEqual(Set(named.map(\.name)), ["email", "emailVerified", "displayName", "photoUrl", "phoneNumber"])
        for f in named { XCTAssertEqual(claims[f.claim!], f.wire(u, false), f.name) }
    }
}
