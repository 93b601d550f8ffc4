import EmulatorSupport
@testable import PhoneAuthAPI
import PhoneAuthCore
import PhoneAuthStorage
import XCTest

/// Reset and snapshot restore against injected journal failures (the harness of `TransactionFailureTests`): every
/// store a reset or restore rewrites, deletes or makes again is one journaled transaction, so after every request —
/// whichever commit failed — memory equals what a restart restores, and only the request whose commit failed
/// answers 500.
extension TransactionFailureTests {
    /// A project with an explicit tenant (config, a user, a pending code), principals and codes; a snapshot; the tenant
    /// deleted and more users; a reset (the project rewritten, the tenant gone), a restore (the tenant made again from
    /// the snapshot), a principal, and a reset of everything.
    func resetScript(_ app: PhoneAuthApp, check: (String, Int, JSON) throws -> Void) rethrows {
        let itk = "/identitytoolkit.googleapis.com/v1/accounts:"
        func step(_ name: String, _ method: String, _ target: String, _ body: String = "", admin: Bool = false) throws -> JSON {
            let (status, json) = call(app, method, target, body, admin: admin)
            try check(name, status, json)
            return json
        }
        _ = try step("config patch", "PATCH", "/emulator/v1/projects/p/config", #"{"phoneAuth":{"codeLength":8}}"#)
        let tenant = try step("tenant create", "POST", "/identitytoolkit.googleapis.com/v2/projects/p/tenants", #"{"displayName":"Team"}"#, admin: true)
        let tid = tenant["name"]?.stringValue?.split(separator: "/").last.map(String.init) ?? "none"
        _ = try step("tenant user", "POST", "/identitytoolkit.googleapis.com/v1/projects/p/tenants/\(tid)/accounts", #"{"localId":"t-user"}"#, admin: true)
        _ = try step("tenant send", "POST", itk + "sendVerificationCode?key=k", #"{"phoneNumber":"+15551230009","tenantId":"\#(tid)"}"#)
        _ = try step("principal", "POST", "/emulator/v1/projects/p/idTokens", #"{"uid":"u1","phoneNumber":"+15550004444","signInProvider":"phone"}"#)
        _ = try step("tenant principal", "POST", "/emulator/v1/projects/p/tenants/\(tid)/idTokens", #"{"uid":"tu1","claims":{"team":"a"}}"#)
        _ = try step("send", "POST", itk + "sendVerificationCode?key=k", #"{"phoneNumber":"+15551230008"}"#)
        _ = try step("snapshot", "POST", "/emulator/v1/projects/p:snapshot", #"{"name":"s1"}"#)
        _ = try step("tenant delete", "DELETE", "/identitytoolkit.googleapis.com/v2/projects/p/tenants/\(tid)", admin: true)
        _ = try step("another principal", "POST", "/emulator/v1/projects/p/idTokens", #"{"uid":"u2"}"#)
        _ = try step("reset", "POST", "/emulator/v1/projects/p:reset")
        _ = try step("restore", "POST", "/emulator/v1/projects/p:restore", #"{"name":"s1"}"#)
        _ = try step("principal after the restore", "POST", "/emulator/v1/projects/p/idTokens", #"{"uid":"u3"}"#)
        _ = try step("reset everything", "POST", "/emulator/v1:reset")
    }

    func testEveryInjectedFailureOfAResetOrRestoreLeavesMemoryEqualToDisk() throws {
        let clock = EmulatorClock(fixedAtMillis: 1_800_000_000_000)
        var expected: [String: Int] = [:]
        var commits = 0
        do {
            let journal = FlakyJournal(try DataDirectory(path: dir + "/clean"))
            let app = makeApp(journal, clock: clock)
            try resetScript(app) { name, status, body in
                expected[name] = status
                try assertMemoryEqualsDisk(app, journal, clock: clock, "clean: " + name)
                let project = app.emulator.store(StoreKey(projectId: "p"))
                switch name {
                case "reset":
                    XCTAssertEqual(body, ["projectId": "p", "users": 0, "tenants": []])
                    XCTAssertEqual(app.emulator.tenants(of: "p"), [])
                    XCTAssertEqual(project.read { $0.users.count }, 0)
                    XCTAssertEqual(project.read { $0.sessions.count }, 0)
                    XCTAssertEqual(project.read { $0.config.phoneAuth.codeLength }, 6, "the starting config")
                    XCTAssertEqual(app.emulator.refreshTokenCount, 0)
                case "restore":
                    let tid = app.emulator.tenants(of: "p")
                    XCTAssertEqual(tid.count, 1, "the snapshot's tenant is back")
                    XCTAssertEqual(body["users"], 1)
                    XCTAssertEqual(Set(project.read { Array($0.users.keys) }), ["u1"])
                    XCTAssertEqual(project.read { $0.config.phoneAuth.codeLength }, 8)
                    let t = app.emulator.store(StoreKey(projectId: "p", tenantId: tid.first))
                    XCTAssertEqual(Set(t.read { Array($0.users.keys) }), ["t-user", "tu1"])
                    XCTAssertEqual(t.read { $0.sessions.count }, 1)
                    XCTAssertEqual(t.read { $0.tenant?.displayName }, "Team")
                    XCTAssertEqual(app.emulator.refreshTokenCount, 2, "u1's and tu1's sessions")
                default: break
                }
            }
            commits = journal.calls
            journal.inner.close()
        }
        XCTAssertEqual(expected.filter { $0.value != 200 }, [:])
        XCTAssertGreaterThan(commits, 12)
        // A reset or restore's transactions may share a commit or not (the committer takes what is queued): a run can
        // have a commit fewer or more than the clean one.
        try withEachCommitFailing(1...commits + 1, clock: clock, { app, step in
            try resetScript(app) { name, status, _ in try step(name, status) }
        }) { n, failures, calls in
            XCTAssertEqual(failures.count, calls >= n ? 1 : 0, "commit \(n) failing: exactly one request answered 500: \(failures)")
        }
    }
}
