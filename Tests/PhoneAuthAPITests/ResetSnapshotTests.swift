import EmulatorSupport
import HTTPServer
@testable import PhoneAuthAPI
@testable import PhoneAuthCore
import PhoneAuthTestSupport
import XCTest

/// `:reset`, `v1:reset`, `:snapshot`, `:restore`, `GET …/snapshots` and `DELETE …/snapshots/{name}` through the
/// responder (durability with a journal: PhoneAuthStorageTests/ResetDurabilityTests.swift).
final class ResetSnapshotTests: EmulatorAPITestCase {
    override var seed: UInt64 { 21 }

    func post(_ path: String, _ body: String = "") -> (Int, JSON) { call("POST", path, body) }

    func principal(_ uid: String, tenant: String? = nil) -> JSON {
        let r = mint(#"{"uid":"\#(uid)"}"#, tenant: tenant)
        XCTAssertEqual(r.0, 200, "\(r.1)")
        return r.1
    }

    func users(_ tenant: String? = nil) -> [String] {
        (app.emulator.existingStore(StoreKey(projectId: "demo-phone", tenantId: tenant))?.read { Array($0.users.keys) } ?? []).sorted()
    }

    func events(_ type: String) -> [JSON] {
        let resp = app.respond(to: HTTPRequest(method: "GET", target: base + "/events?format=jsonl&follow=false&since=0&type=\(type)", headers: HTTPHeaders()),
                               context: .detached)
        guard let source = resp?.stream?.source else { return [] }
        source.attach {}
        var out: [UInt8] = []
        while source.pull(into: &out, limit: 1 << 20) == .more {}
        return String(decoding: out, as: UTF8.self).split(separator: "\n").compactMap { try? JSONParser.parse(String($0)) }
    }

    /// A reset puts back the starting state (here: one seeded user, the config the project started with, no tenants),
    /// ends every session made since, clears codes and non-durable state, and keeps the event history with a
    /// `project.reset`.
    func testResetReturnsToTheStartingState() throws {
        _ = try app.emulator.createUser(StoreKey(projectId: "demo-phone"), localId: "seed", changes: UserChanges())
        try app.emulator.captureBaseline()
        let alice = principal("alice")
        _ = principal("tu", tenant: "team-a")
        XCTAssertEqual(call("PATCH", base + "/config", #"{"phoneAuth":{"codeLength":8},"signIn":{"phoneNumber":{"testPhoneNumbers":{}}}}"#).0, 200)
        XCTAssertEqual(itk("sendVerificationCode", #"{"phoneNumber":"+15551112222"}"#).0, 200)
        XCTAssertEqual(post("/emulator/v1/projects/demo-phone/appCredentials", #"{"type":"RECAPTCHA"}"#).0, 200)
        XCTAssertEqual(call("POST", "/identitytoolkit.googleapis.com/v2/projects/demo-phone/tenants", #"{"displayName":"Made"}"#, headers: Self.admin).0, 200)
        XCTAssertEqual(app.emulator.tenants(of: "demo-phone").count, 2)

        let r = post(base + ":reset")
        XCTAssertEqual(r.0, 200, "\(r.1)")
        XCTAssertEqual(r.1, ["projectId": "demo-phone", "users": 1, "tenants": []])
        XCTAssertEqual(users(), ["seed"])
        XCTAssertEqual(app.emulator.tenants(of: "demo-phone"), [])
        XCTAssertEqual(call("GET", base + "/verificationCodes").1["verificationCodes"], [])
        let config = call("GET", base + "/config").1
        XCTAssertEqual(config["phoneAuth"]?["codeLength"], 6)
        XCTAssertEqual(config["signIn"]?["phoneNumber"]?["testPhoneNumbers"], ["+16505554567": "123456"])
        XCTAssertEqual(app.emulator.refreshTokenCount, 0)
        XCTAssertEqual(app.emulator.store(StoreKey(projectId: "demo-phone")).read { $0.credentials.minted.isEmpty }, true)
        XCTAssertEqual(message(itk("lookup", #"{"idToken":"\#(alice["idToken"]!.stringValue!)"}"#)), "USER_NOT_FOUND")
        XCTAssertEqual(message(call("POST", "/securetoken.googleapis.com/v1/token?key=k", #"{"grant_type":"refresh_token","refresh_token":"\#(alice["refreshToken"]!.stringValue!)"}"#)),
                       "INVALID_REFRESH_TOKEN")
        // The history stays; the reset is one event.
        XCTAssertEqual(events("user.created").map { $0["uid"] }, ["seed", "alice"])
        XCTAssertEqual(events("project.reset").map { $0["snapshot"] }, [nil])
        // It works again after a reset.
        XCTAssertEqual(itk("sendVerificationCode", #"{"phoneNumber":"+16505554567"}"#).0, 200)
        XCTAssertEqual(post(base + ":reset").1["users"], 1)
    }

    /// Tenants that existed at the start come back (with their users), whatever happened to them since.
    func testStartingTenantsComeBack() throws {
        XCTAssertEqual(call("POST", "/identitytoolkit.googleapis.com/v2/projects/demo-phone/tenants", #"{"displayName":"Seeded"}"#, headers: Self.admin).0, 200)
        let tid = try XCTUnwrap(app.emulator.tenants(of: "demo-phone").first)
        _ = try app.emulator.createUser(StoreKey(projectId: "demo-phone", tenantId: tid), localId: "t-seed", changes: UserChanges())
        try app.emulator.captureBaseline()
        _ = principal("extra", tenant: tid)
        XCTAssertEqual(call("DELETE", "/identitytoolkit.googleapis.com/v2/projects/demo-phone/tenants/\(tid)", headers: Self.admin).0, 200)
        XCTAssertEqual(app.emulator.tenants(of: "demo-phone"), [])
        let r = post(base + ":reset")
        XCTAssertEqual(r.1["tenants"], [.string(tid)])
        XCTAssertEqual(users(tid), ["t-seed"])
        XCTAssertEqual(app.emulator.tenantSettings(StoreKey(projectId: "demo-phone", tenantId: tid))?.displayName, "Seeded")
    }

    /// Save, change, restore: the same users, tenants, codes and sessions (a refresh token from before the snapshot
    /// works again); list, overwrite, delete; unknown and invalid names.
    func testSnapshotAndRestore() throws {
        for i in 0..<20 { _ = principal("user-\(i)") }
        let kept = principal("kept")
        _ = principal("tu", tenant: "team-a")
        XCTAssertEqual(itk("sendVerificationCode", #"{"phoneNumber":"+15551112222"}"#).0, 200)
        let saved = post(base + ":snapshot", #"{"name":"seeded"}"#)
        XCTAssertEqual(saved.0, 200, "\(saved.1)")
        XCTAssertEqual(saved.1["name"], "seeded")
        XCTAssertEqual(saved.1["users"], 22)
        XCTAssertEqual(saved.1["tenants"], ["team-a"])
        XCTAssertEqual(saved.1["records"], .int(45), "users, their refresh tokens, the pending code")

        XCTAssertEqual(post(base + ":reset").0, 200)
        _ = principal("after")
        XCTAssertEqual(users(), ["after"])
        let restored = post(base + ":restore", #"{"name":"seeded"}"#)
        XCTAssertEqual(restored.0, 200, "\(restored.1)")
        XCTAssertEqual(restored.1, ["projectId": "demo-phone", "users": 21, "tenants": ["team-a"], "snapshot": "seeded"])
        XCTAssertEqual(users(), (["kept"] + (0..<20).map { "user-\($0)" }).sorted())
        XCTAssertEqual(users("team-a"), ["tu"])
        XCTAssertEqual(call("GET", base + "/verificationCodes").1["verificationCodes"]?.arrayValue?.count, 1)
        XCTAssertEqual(call("POST", "/securetoken.googleapis.com/v1/token?key=k", #"{"grant_type":"refresh_token","refresh_token":"\#(kept["refreshToken"]!.stringValue!)"}"#).0,
                       200, "the snapshot's sessions are back")
        XCTAssertEqual(events("project.reset").map { $0["snapshot"] }, [nil, "seeded"])
        // Restoring twice is the same state.
        XCTAssertEqual(post(base + ":restore", #"{"name":"seeded"}"#).1["users"], 21)

        XCTAssertEqual(post(base + ":snapshot", #"{"name":"second"}"#).0, 200)
        XCTAssertEqual(post(base + ":snapshot", #"{"name":"seeded"}"#).0, 200, "a name is overwritten")
        let list = call("GET", base + "/snapshots").1["snapshots"]?.arrayValue ?? []
        XCTAssertEqual(list.map { $0["name"] }, ["second", "seeded"])
        XCTAssertEqual(list.first?["createdAt"], .string(Timestamp.rfc3339(millis: testEpochMillis)))
        XCTAssertEqual(call("DELETE", base + "/snapshots/second").0, 200)
        XCTAssertEqual(call("GET", base + "/snapshots").1["snapshots"]?.arrayValue?.map { $0["name"] }, ["seeded"])
        XCTAssertEqual(app.emulator.snapshots.records, 45)

        let unknown = post(base + ":restore", #"{"name":"second"}"#)
        XCTAssertEqual(unknown.0, 404)
        XCTAssertEqual(unknown.1["error"]?["status"], "NOT_FOUND")
        XCTAssertEqual(call("DELETE", base + "/snapshots/second").0, 404)
        for bad in [#"{}"#, #"{"name":""}"#, #"{"name":"a/b"}"#, #"{"name":"\#(String(repeating: "n", count: 65))"}"#, #"{"name":7.5}"#] {
            XCTAssertEqual(post(base + ":snapshot", bad).0, 400, bad)
            XCTAssertEqual(post(base + ":restore", bad).0, 400, bad)
        }
        XCTAssertEqual(call("DELETE", base + "/snapshots/a%2Fb").0, 400)
        // Snapshots are per project.
        XCTAssertEqual(call("GET", "/emulator/v1/projects/other/snapshots").1["snapshots"], [])
        XCTAssertEqual(post("/emulator/v1/projects/other:restore", #"{"name":"seeded"}"#).0, 404)
    }

    /// A restore and a reset put back the users' federated identities with them: an IdP sign-in finds the restored
    /// user (not a new account), and one a reset removed is a new account again (its old index entry is gone).
    func testFederatedIdentitiesComeBackWithTheirUsers() throws {
        func idpSignIn(_ sub: String) -> (Int, JSON) {
            itk("signInWithIdp", #"{"requestUri":"http://localhost","returnSecureToken":true,"postBody":"providerId=google.com&id_token=%7B%22sub%22%3A%22\#(sub)%22%7D"}"#)
        }
        let first = idpSignIn("sub-1")
        XCTAssertEqual(first.0, 200, "\(first.1)")
        let uid = try XCTUnwrap(first.1["localId"]?.stringValue)
        XCTAssertEqual(post(base + ":snapshot", #"{"name":"idp"}"#).0, 200)
        XCTAssertEqual(post(base + ":reset").0, 200)
        XCTAssertEqual(users(), [])
        XCTAssertEqual(app.emulator.store(StoreKey(projectId: "demo-phone")).read { $0.user(providerId: "google.com", rawId: "sub-1") }?.localId, nil)
        let fresh = idpSignIn("sub-1")
        XCTAssertEqual(fresh.1["isNewUser"], true)
        XCTAssertNotEqual(fresh.1["localId"]?.stringValue, uid)

        XCTAssertEqual(post(base + ":restore", #"{"name":"idp"}"#).0, 200)
        XCTAssertEqual(users(), [uid])
        XCTAssertEqual(app.emulator.store(StoreKey(projectId: "demo-phone")).read { $0.user(providerId: "google.com", rawId: "sub-1") }?.localId, uid)
        let again = idpSignIn("sub-1")
        XCTAssertEqual(again.0, 200, "\(again.1)")
        XCTAssertEqual(again.1["localId"]?.stringValue, uid)
        XCTAssertNotEqual(again.1["isNewUser"], true, "the restored user signs in")
        XCTAssertEqual(users(), [uid])
    }

    /// At most 32 snapshots per project: the 33rd is `RESOURCE_EXHAUSTED` until one is deleted.
    func testTheNumberOfSnapshotsIsBounded() {
        for i in 0..<SnapshotRegistry.maxPerProject { XCTAssertEqual(post(base + ":snapshot", #"{"name":"s\#(i)"}"#).0, 200) }
        let over = post(base + ":snapshot", #"{"name":"one-more"}"#)
        XCTAssertEqual(over.0, 429)
        XCTAssertTrue(message(over)?.hasPrefix("RESOURCE_EXHAUSTED : A project keeps at most 32 snapshots") == true, message(over) ?? "")
        XCTAssertEqual(post(base + ":snapshot", #"{"name":"s3"}"#).0, 200, "overwriting one is fine")
        XCTAssertEqual(post("/emulator/v1/projects/other:snapshot", #"{"name":"s0"}"#).0, 200, "another project has its own")
        XCTAssertEqual(call("DELETE", base + "/snapshots/s0").0, 200)
        XCTAssertEqual(post(base + ":snapshot", #"{"name":"one-more"}"#).0, 200)
    }

    /// `POST /emulator/v1:reset`: every project, and the clock back to the real time.
    func testResetEverything() throws {
        _ = principal("a")
        XCTAssertEqual(post("/emulator/v1/projects/other/idTokens", #"{"uid":"b"}"#).0, 200)
        XCTAssertEqual(post("/emulator/v1/clock:advance", #"{"seconds":3600}"#).0, 200)
        let r = post("/emulator/v1:reset")
        XCTAssertEqual(r.0, 200, "\(r.1)")
        XCTAssertEqual(r.1["projects"]?.arrayValue?.map { $0["projectId"] }, ["demo-phone", "other"])
        XCTAssertEqual(r.1["clock"]?["offsetSeconds"], 0)
        XCTAssertEqual(clock.offsetMillis, 0)
        XCTAssertEqual(users(), [])
        XCTAssertEqual(app.emulator.existingStore(StoreKey(projectId: "other"))?.read { $0.users.count }, 0)
    }

    /// The registry's record budget (users, sessions, codes, refresh tokens across snapshots), checked directly.
    func testTheRecordBudget() throws {
        let registry = SnapshotRegistry(maxPerProject: 32, maxRecords: 10)
        let key = StoreKey(projectId: "demo-phone")
        for i in 0..<6 { try app.emulator.testSave(UserRecord(localId: "u\(i)", createdAt: 0), in: key) }
        let state = app.emulator.store(key).read { StoreState($0, refreshTokens: []) }
        let six = SnapshotRegistry.Saved(name: "a", createdAt: 0, stores: [StoreKey(projectId: "p"): state])
        try registry.save("p", six)
        XCTAssertThrowsError(try registry.save("q", SnapshotRegistry.Saved(name: "b", createdAt: 0, stores: six.stores))) {
            XCTAssertEqual(($0 as? AuthError)?.code, .resourceExhausted)
        }
        try registry.save("p", six)  // replacing frees what it held
        XCTAssertEqual(registry.records, 6)
        XCTAssertTrue(registry.delete("p", "a"))
        try registry.save("q", SnapshotRegistry.Saved(name: "b", createdAt: 0, stores: six.stores))
        XCTAssertEqual(registry.records, 6)
    }

    /// Guarded like the emulator API: foreign origins refused; with `--admin-token`, only that token.
    func testGuarded() {
        for path in [base + ":reset", "/emulator/v1:reset", base + ":snapshot", base + ":restore"] {
            XCTAssertEqual(call("POST", path, #"{"name":"x"}"#, headers: [("Origin", "https://evil.example")]).0, 403, path)
        }
        XCTAssertEqual(statusBehindAnAdminToken("POST", base + ":reset", headers: []), 401)
        XCTAssertEqual(statusBehindAnAdminToken("POST", base + ":reset", headers: [("Authorization", "Bearer s3cret")]), 200)
    }
}
