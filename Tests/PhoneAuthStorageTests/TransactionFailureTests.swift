import Dispatch
import EmulatorSupport
import HTTPServer
@testable import PhoneAuthAPI
import PhoneAuthCore
import PhoneAuthStorage
import Synchronization
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// A journal that fails chosen commits: wraps a real `DataDirectory`; commit number `n` (1-based) throws when `n` is
/// in `failing`. With `hold`, each commit waits for `release()` first, so a test can queue several transactions behind
/// one commit (group commit, and the cascade of a failure to transactions that read what it rolls back).
final class FlakyJournal: StateJournal, @unchecked Sendable {
    struct Injected: Error {}
    let inner: DataDirectory
    private let state = Locked<(calls: Int, failing: Set<Int>, batches: [Int])>((0, [], []))
    private let gate = DispatchSemaphore(value: 0)
    private let entered = DispatchSemaphore(value: 0)
    let hold = Atomic<Bool>(false)

    init(_ inner: DataDirectory) { self.inner = inner }

    func fail(_ numbers: Set<Int>) { state.withLock { $0.failing = numbers } }
    var calls: Int { state.withLock { $0.calls } }
    /// Changes per commit so far.
    var batches: [Int] { state.withLock { $0.batches } }

    func record(_ changes: [StateChange]) throws {
        let fails = state.withLock { s -> Bool in
            s.calls += 1
            s.batches.append(changes.count)
            return s.failing.contains(s.calls)
        }
        if hold.load(ordering: .acquiring) {
            entered.signal()
            gate.wait()
        }
        if fails { throw Injected() }
        try inner.record(changes)
    }

    /// Waits until a held commit has started (its batch is taken).
    func waitUntilHeld() { entered.wait() }
    func release() { gate.signal() }
}

/// Store transactions against injected journal failures: after every request — whether its commit failed or not —
/// a fresh emulator restored from what the journal holds durably equals the running one.
final class TransactionFailureTests: XCTestCase {
    var dir = ""

    override func setUp() {
        var template = Array("/tmp/phone-auth-txn-XXXXXX".utf8CString)
        dir = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
    }

    override func tearDown() {
        _ = dir.withCString { p in system("rm -rf '\(String(cString: p))'") }
    }

    static var configs: [String: ProjectConfig] {
        var config = ProjectConfig()
        config.testPhoneNumbers = ["+16505554567": "123456"]
        return ["p": config]
    }

    func makeApp(_ journal: (any StateJournal)?, clock: EmulatorClock, maxTenants: Int = Emulator.defaultMaxTenantsPerProject) -> PhoneAuthApp {
        let emulator = Emulator(defaultProjectId: "p", projectConfigs: Self.configs, clock: clock, random: SeededRandom(seed: 7),
                                logger: Logger(label: "t", level: .critical), journal: journal, maxTenantsPerProject: maxTenants)
        return PhoneAuthApp(emulator: emulator, tokens: TokenService(mode: .none, initialKey: nil), signingPool: nil,
                            logger: Logger(label: "t", level: .critical))
    }

    // MARK: calling the app

    /// Starts a request; `wait()` returns its answer (delivered at once or later, when its commit is decided).
    final class Pending: @unchecked Sendable {
        let done = DispatchSemaphore(value: 0)
        let answer = Locked<HTTPResponse?>(nil)
        func wait() -> (Int, JSON) {
            guard done.wait(timeout: .now() + 60) == .success else { XCTFail("no answer"); return (0, .null) }
            let r = answer.withLock { $0 }!
            return (r.status, r.body.isEmpty ? .null : ((try? JSONParser.parse(r.body)) ?? .null))
        }
    }

    func start(_ app: PhoneAuthApp, _ method: String, _ target: String, _ body: String = "", admin: Bool = false) -> Pending {
        var h = HTTPHeaders()
        h.add("Host", "127.0.0.1")
        h.add("Content-Type", "application/json")
        if admin { h.add("Authorization", "Bearer owner") }
        let p = Pending()
        let req = HTTPRequest(method: method, target: target, headers: h, body: Array(body.utf8))
        if let r = app.respond(to: req, deliver: { r in
            p.answer.withLock { $0 = r }
            p.done.signal()
        }) {
            p.answer.withLock { $0 = r }
            p.done.signal()
        }
        return p
    }

    func call(_ app: PhoneAuthApp, _ method: String, _ target: String, _ body: String = "", admin: Bool = false) -> (Int, JSON) {
        start(app, method, target, body, admin: admin).wait()
    }

    // MARK: comparing memory with disk

    struct StoreView: Equatable, CustomStringConvertible {
        var users: [UserRecord]
        var sessions: [VerificationSession]
        var config: ProjectConfig
        var tenant: TenantSettings?
        /// Created on first use and never configured (reclaimable when empty): restored from what the journal holds.
        var implicit: Bool
        var description: String {
            "users \(users.map(\.localId)), sessions \(sessions.map(\.sessionInfo)), tenant \(String(describing: tenant?.displayName)), implicit \(implicit)"
        }
    }

    static func view(_ e: Emulator, _ key: StoreKey) -> StoreView {
        guard let box = e.existingStore(key) else {
            // What a first use would create.
            return StoreView(users: [], sessions: [], config: e.config(key), tenant: key.tenantId == nil ? nil : TenantSettings.createdOnFirstUse,
                             implicit: key.tenantId != nil)
        }
        return box.read { s in
            StoreView(users: s.users.values.sorted { $0.localId < $1.localId }, sessions: s.pendingSessions(), config: s.config, tenant: s.tenant,
                      implicit: s.implicitTenant)
        }
    }

    /// What the journal holds, replayed into a fresh emulator (a restart).
    func restarted(_ journal: FlakyJournal, clock: EmulatorClock) throws -> Emulator {
        let snap = try journal.inner.loadSnapshot()
        let e = Emulator(defaultProjectId: "p", projectConfigs: Self.configs, clock: clock, random: SeededRandom(seed: 1),
                         logger: Logger(label: "t", level: .critical))
        e.restore(snap.stores, refreshTokens: snap.refreshTokens)
        return e
    }

    func assertMemoryEqualsDisk(_ app: PhoneAuthApp, _ journal: FlakyJournal, clock: EmulatorClock, _ step: String,
                                file: StaticString = #filePath, line: UInt = #line) throws {
        let memory = app.emulator
        let disk = try restarted(journal, clock: clock)
        let keys = Set(memory.storeKeys).union(disk.storeKeys)
        for key in keys.sorted(by: { $0.description < $1.description }) {
            let m = Self.view(memory, key), d = Self.view(disk, key)
            XCTAssertEqual(m, d, "\(step): store \(key) differs from what a restart restores", file: file, line: line)
        }
        XCTAssertEqual(memory.allRefreshTokens, disk.allRefreshTokens, "\(step): refresh tokens differ", file: file, line: line)
    }

    // MARK: the scripted mix

    /// Runs every kind of write once, in order, returning each step's name and status. `check` runs after each step.
    func script(_ app: PhoneAuthApp, check: (String, Int) throws -> Void) rethrows {
        let itk = "/identitytoolkit.googleapis.com/v1/accounts:"
        var sessionInfo: String? = nil
        func step(_ name: String, _ method: String, _ target: String, _ body: String = "", admin: Bool = false) throws -> JSON {
            let (status, json) = call(app, method, target, body, admin: admin)
            if status == 500 {
                XCTAssertEqual(json["error"]?["status"], "INTERNAL", name)
                XCTAssertEqual(json["error"]?["code"], 500, name)
            }
            try check(name, status)
            return json
        }
        sessionInfo = try step("send (fictional)", "POST", itk + "sendVerificationCode?key=k", #"{"phoneNumber":"+16505554567"}"#)["sessionInfo"]?.stringValue
        let signedIn = try step("sign-in", "POST", itk + "signInWithPhoneNumber?key=k", #"{"sessionInfo":"\#(sessionInfo ?? "x")","code":"123456"}"#)
        let phoneUser = signedIn["localId"]?.stringValue ?? "none"
        let refresh = signedIn["refreshToken"]?.stringValue ?? "none"
        let real = try step("send (real number)", "POST", itk + "sendVerificationCode?key=k", #"{"phoneNumber":"+15551230001"}"#)
        _ = try step("wrong code (an attempt consumed)", "POST", itk + "signInWithPhoneNumber?key=k",
                     #"{"sessionInfo":"\#(real["sessionInfo"]?.stringValue ?? "x")","code":"000000"}"#)
        _ = try step("refresh", "POST", "/securetoken.googleapis.com/v1/token?key=k", #"{"grant_type":"refresh_token","refresh_token":"\#(refresh)"}"#)
        let anon = try step("signUp (anonymous)", "POST", itk + "signUp?key=k", "{}")["localId"]?.stringValue ?? "none"
        let pw = try step("signUp (password)", "POST", itk + "signUp?key=k", #"{"email":"a@example.com","password":"secret1"}"#)
        let pwUser = pw["localId"]?.stringValue ?? "none"
        // SMS second factor: enrollment (a session, the user, a refresh token with its second factor), then a sign-in.
        _ = try step("verify email (admin)", "POST", itk + "update?key=k", #"{"localId":"\#(pwUser)","emailVerified":true}"#, admin: true)
        let v2 = "/identitytoolkit.googleapis.com/v2/accounts/"
        let enrollStart = try step("mfa enrollment start", "POST", v2 + "mfaEnrollment:start?key=k",
                                   #"{"idToken":"\#(pw["idToken"]?.stringValue ?? "x")","phoneEnrollmentInfo":{"phoneNumber":"+16505554567"}}"#)
        let enrolled = try step("mfa enrollment finalize", "POST", v2 + "mfaEnrollment:finalize?key=k",
                                #"{"idToken":"\#(pw["idToken"]?.stringValue ?? "x")","phoneVerificationInfo":{"sessionInfo":"\#(enrollStart["phoneSessionInfo"]?["sessionInfo"]?.stringValue ?? "x")","code":"123456"}}"#)
        _ = try step("refresh (second factor)", "POST", "/securetoken.googleapis.com/v1/token?key=k",
                     #"{"grant_type":"refresh_token","refresh_token":"\#(enrolled["refreshToken"]?.stringValue ?? "none")"}"#)
        let pendingOutcome = try? app.emulator.passFirstFactor(StoreKey(projectId: "p"), localId: pwUser, signInProvider: "password")
        var pendingCredential = "none", enrollmentId = "none"
        if case .mfaRequired(let c, let list)? = pendingOutcome { pendingCredential = c; enrollmentId = list.first?.mfaEnrollmentId ?? "none" }
        let mfaStart = try step("mfa sign-in start", "POST", v2 + "mfaSignIn:start?key=k",
                                #"{"mfaPendingCredential":"\#(pendingCredential)","mfaEnrollmentId":"\#(enrollmentId)"}"#)
        _ = try step("mfa sign-in finalize", "POST", v2 + "mfaSignIn:finalize?key=k",
                     #"{"mfaPendingCredential":"\#(pendingCredential)","phoneVerificationInfo":{"sessionInfo":"\#(mfaStart["phoneResponseInfo"]?["sessionInfo"]?.stringValue ?? "x")","code":"123456"}}"#)
        _ = try step("admin mfa replace", "POST", itk + "update?key=k",
                     #"{"localId":"\#(pwUser)","mfa":{"enrollments":[{"phoneInfo":"+15550009999","mfaEnrollmentId":"e9","displayName":"d"}]}}"#, admin: true)
        _ = try step("admin create", "POST", "/identitytoolkit.googleapis.com/v1/projects/p/accounts", #"{"localId":"admin1","displayName":"One"}"#, admin: true)
        _ = try step("update", "POST", itk + "update?key=k", #"{"localId":"\#(phoneUser)","displayName":"Phone"}"#, admin: true)
        _ = try step("disable", "POST", itk + "update?key=k", #"{"localId":"admin1","disableUser":true}"#, admin: true)
        _ = try step("delete", "POST", itk + "delete?key=k", #"{"localId":"\#(anon)"}"#, admin: true)
        _ = try step("import (overwrite + new)", "POST", "/identitytoolkit.googleapis.com/v1/projects/p/accounts:batchCreate",
                     #"{"allowOverwrite":true,"users":[{"localId":"admin1","displayName":"Replaced"},{"localId":"imp2","phoneNumber":"+15557770002"},{"localId":"imp3","email":"bad"}]}"#,
                     admin: true)
        _ = try step("batchDelete", "POST", "/identitytoolkit.googleapis.com/v1/projects/p/accounts:batchDelete",
                     #"{"localIds":["imp2","\#(phoneUser)"],"force":true}"#, admin: true)
        _ = try step("config patch (emulator API)", "PATCH", "/emulator/v1/projects/p/config", #"{"phoneAuth":{"maxCodeAttempts":3}}"#)
        _ = try step("config patch (admin v2)", "PATCH", "/identitytoolkit.googleapis.com/v2/projects/p/config?updateMask=signIn.phoneNumber.testPhoneNumbers",
                     #"{"signIn":{"phoneNumber":{"testPhoneNumbers":{"+16505554567":"123456","+16505550000":"654321"}}}}"#, admin: true)
        let tenant = try step("tenant create", "POST", "/identitytoolkit.googleapis.com/v2/projects/p/tenants", #"{"displayName":"Team-A"}"#, admin: true)
        let tid = tenant["name"]?.stringValue?.split(separator: "/").last.map(String.init) ?? "none"
        _ = try step("tenant patch", "PATCH", "/identitytoolkit.googleapis.com/v2/projects/p/tenants/\(tid)?updateMask=displayName,testPhoneNumbers",
                     #"{"displayName":"Team-B","testPhoneNumbers":{"+16505551111":"111111"}}"#, admin: true)
        let ts = try step("tenant send", "POST", itk + "sendVerificationCode?key=k", #"{"phoneNumber":"+16505551111","tenantId":"\#(tid)"}"#)
        _ = try step("tenant sign-in", "POST", itk + "signInWithPhoneNumber?key=k",
                     #"{"sessionInfo":"\#(ts["sessionInfo"]?.stringValue ?? "x")","code":"111111","tenantId":"\#(tid)"}"#)
        // A tenant created on first use fills the cap (2: see the test); once its code expired, a request naming a new
        // tenant reclaims it, through the journal (its expired session is on disk). A read does it here, so each
        // request makes one commit (a send would make two, the reclaim's and its own, sometimes batched as one).
        _ = try step("tenant created on first use", "POST", itk + "sendVerificationCode?key=k", #"{"phoneNumber":"+15551230002","tenantId":"first-use"}"#)
        _ = try step("clock advance", "POST", "/emulator/v1/clock:advance", #"{"seconds":601}"#)
        _ = try step("reclaim at the cap", "GET", "/emulator/v1/projects/p/tenants/second-use/verificationCodes")
        _ = try step("new tenant after the reclaim", "POST", itk + "sendVerificationCode?key=k", #"{"phoneNumber":"+15551230003","tenantId":"second-use"}"#)
        _ = try step("clear codes", "DELETE", "/emulator/v1/projects/p/verificationCodes")
        _ = try step("tenant delete", "DELETE", "/identitytoolkit.googleapis.com/v2/projects/p/tenants/\(tid)", admin: true)
        _ = try step("send again", "POST", itk + "sendVerificationCode?key=k", #"{"phoneNumber":"+16505554567"}"#)
        _ = try step("test principal", "POST", "/emulator/v1/projects/p/idTokens",
                     #"{"uid":"principal-1","claims":{"role":"admin"},"phoneNumber":"+15550004444","signInProvider":"phone"}"#)
        _ = try step("test principal (second factor)", "POST", "/emulator/v1/projects/p/idTokens",
                     #"{"uid":"principal-2","email":"p2@example.com","signInProvider":"password","secondFactor":"totp"}"#)
        _ = try step("wipe", "DELETE", "/emulator/v1/projects/p/accounts")
    }

    /// For every N, a run whose Nth journal commit fails: after each step, memory equals a restart from disk; the
    /// failed step answered 500 in the Google envelope; every other step answered as it would have.
    func testEveryInjectedFailureLeavesMemoryEqualToDisk() throws {
        let clock = EmulatorClock(fixedAtMillis: 1_800_000_000_000)
        // A clean run first: the statuses every step answers when nothing fails, and how many commits there are.
        var expected: [String: Int] = [:]
        var commits = 0
        do {
            let journal = FlakyJournal(try DataDirectory(path: dir + "/clean"))
            let app = makeApp(journal, clock: clock, maxTenants: 2)
            try script(app) { name, status in
                expected[name] = status
                try assertMemoryEqualsDisk(app, journal, clock: clock, "clean: " + name)
                if name == "tenant created on first use" { XCTAssertTrue(app.emulator.tenants(of: "p").contains("first-use")) }
                if name == "reclaim at the cap" {
                    XCTAssertFalse(app.emulator.tenants(of: "p").contains("first-use"), "reclaimed")
                    XCTAssertFalse(app.emulator.tenants(of: "p").contains("second-use"), "a read creates nothing")
                }
                if name == "new tenant after the reclaim" { XCTAssertEqual(app.emulator.tenants(of: "p").count, 2) }
            }
            commits = journal.calls
            journal.inner.close()
        }
        XCTAssertGreaterThan(commits, 15)
        XCTAssertEqual(expected.values.filter { $0 == 500 }.count, 0)
        XCTAssertEqual(expected["sign-in"], 200)
        XCTAssertEqual(expected["tenant sign-in"], 200)
        XCTAssertEqual(expected["reclaim at the cap"], 200)
        XCTAssertEqual(expected["new tenant after the reclaim"], 200)
        XCTAssertEqual(expected["wrong code (an attempt consumed)"], 400)
        for step in ["test principal", "test principal (second factor)"] { XCTAssertEqual(expected[step], 200, step) }
        for mfa in ["mfa enrollment start", "mfa enrollment finalize", "refresh (second factor)", "mfa sign-in start", "mfa sign-in finalize", "admin mfa replace"] {
            XCTAssertEqual(expected[mfa], 200, mfa)
        }
        try withEachCommitFailing(1...commits, clock: clock, maxTenants: 2, { app, step in try script(app, check: step) }) { n, failures, _ in
            XCTAssertEqual(failures.count, 1, "commit \(n) failing: exactly one request answered 500")
        }
    }

    /// For each `n` in `numbers`, a fresh app whose `n`th journal commit fails runs `script` (which calls `step` after
    /// each request with its name and status): after every step memory equals what a restart restores. `outcome`
    /// gets `n`, the steps answered 500 and the commits the run made.
    func withEachCommitFailing(_ numbers: ClosedRange<Int>, clock: EmulatorClock, maxTenants: Int = Emulator.defaultMaxTenantsPerProject,
                               _ script: (PhoneAuthApp, (String, Int) throws -> Void) throws -> Void,
                               outcome: (Int, [String], Int) -> Void) throws {
        for n in numbers {
            let journal = FlakyJournal(try DataDirectory(path: dir + "/fail-\(n)"))
            journal.fail([n])
            let app = makeApp(journal, clock: clock, maxTenants: maxTenants)
            var failures: [String] = []
            try script(app) { name, status in
                if status == 500 { failures.append(name) }
                try assertMemoryEqualsDisk(app, journal, clock: clock, "commit \(n) failing, after \(name)")
            }
            outcome(n, failures, journal.calls)
            journal.inner.close()
        }
    }

    /// Transactions queued behind a commit that fails: those of the same store (which may have read its state) are
    /// rolled back with it and answer 500; another store's commit normally. Memory equals disk afterwards.
    func testAFailedCommitRollsBackTheTransactionsThatFollowedItInTheSameStore() throws {
        let clock = EmulatorClock(fixedAtMillis: 1_800_000_000_000)
        let journal = FlakyJournal(try DataDirectory(path: dir + "/cascade"))
        let app = makeApp(journal, clock: clock)
        let itk = "/identitytoolkit.googleapis.com/v1/accounts:"
        let (s0, first) = call(app, "POST", itk + "sendVerificationCode?key=k", #"{"phoneNumber":"+16505554567"}"#)
        XCTAssertEqual(s0, 200)
        journal.hold.store(true, ordering: .releasing)
        journal.fail([2])
        // Commit 2 holds the sign-in alone; behind it queue a read of its state, a send in the same store and one in
        // another project.
        let signIn = start(app, "POST", itk + "signInWithPhoneNumber?key=k", #"{"sessionInfo":"\#(first["sessionInfo"]!.stringValue!)","code":"123456"}"#)
        journal.waitUntilHeld()
        let read = start(app, "POST", "/identitytoolkit.googleapis.com/v1/projects/p/accounts:query", "{}", admin: true)
        let sameStore = start(app, "POST", itk + "sendVerificationCode?key=k", #"{"phoneNumber":"+16505554567"}"#)
        let otherProject = start(app, "PATCH", "/emulator/v1/projects/other/config", #"{"phoneAuth":{"codeLength":8}}"#)
        journal.hold.store(false, ordering: .releasing)
        journal.release()
        XCTAssertEqual(signIn.wait().0, 500)
        XCTAssertEqual(read.wait().0, 500, "a read of rolled-back state is not answered with it")
        XCTAssertEqual(sameStore.wait().0, 500, "a later transaction of the same store is rolled back with the failed one")
        XCTAssertEqual(otherProject.wait().0, 200)
        XCTAssertEqual(journal.batches.count, 3, "the queued transactions were committed together: \(journal.batches)")
        try assertMemoryEqualsDisk(app, journal, clock: clock, "after the cascade")
        XCTAssertEqual(app.emulator.store(StoreKey(projectId: "p")).read { $0.users.count }, 0)
        XCTAssertEqual(app.emulator.config(StoreKey(projectId: "other")).phoneAuth.codeLength, 8)
        // The session was not consumed: signing in again works now that the journal does.
        let (s1, again) = call(app, "POST", itk + "signInWithPhoneNumber?key=k", #"{"sessionInfo":"\#(first["sessionInfo"]!.stringValue!)","code":"123456"}"#)
        XCTAssertEqual(s1, 200, again.serializedString)
        try assertMemoryEqualsDisk(app, journal, clock: clock, "after a retry")
    }

    /// Concurrent writes to one project share commits (the project lock is not held while the disk is written).
    func testGroupCommitBatchesWritesOfOneProject() throws {
        let clock = EmulatorClock(fixedAtMillis: 1_800_000_000_000)
        let journal = FlakyJournal(try DataDirectory(path: dir + "/group"))
        let app = makeApp(journal, clock: clock)
        journal.hold.store(true, ordering: .releasing)
        let itk = "/identitytoolkit.googleapis.com/v1/accounts:"
        let firstSend = start(app, "POST", itk + "sendVerificationCode?key=k", #"{"phoneNumber":"+16505554567"}"#)
        journal.waitUntilHeld()
        let queued = (0..<20).map { _ in start(app, "POST", itk + "sendVerificationCode?key=k", #"{"phoneNumber":"+16505554567"}"#) }
        journal.hold.store(false, ordering: .releasing)
        journal.release()
        XCTAssertEqual(firstSend.wait().0, 200)
        for q in queued { XCTAssertEqual(q.wait().0, 200) }
        XCTAssertEqual(journal.batches, [1, 20], "twenty sends of one project in one commit")
        try assertMemoryEqualsDisk(app, journal, clock: clock, "after the group commit")
    }

    /// A write naming a new tenant at the cap reclaims an empty tenant created on first use in its own transaction:
    /// the reclaim reaches the journal before the reply, and if its commit fails the reply is a 500 and memory is
    /// rolled back to what the journal holds (the reclaimed tenant is back).
    func testAReclaimByAWriteIsJournaledAndRolledBackWithItsCommit() throws {
        let itk = "/identitytoolkit.googleapis.com/v1/accounts:"
        for failing in [false, true] {
            let clock = EmulatorClock(fixedAtMillis: 1_800_000_000_000)
            let journal = FlakyJournal(try DataDirectory(path: dir + "/reclaim-\(failing)"))
            let app = makeApp(journal, clock: clock, maxTenants: 1)
            let (s0, _) = call(app, "POST", itk + "sendVerificationCode?key=k", #"{"phoneNumber":"+15551230002","tenantId":"a"}"#)
            XCTAssertEqual(s0, 200)
            XCTAssertTrue(clock.advance(millis: 601_000))
            if failing { journal.fail([journal.calls + 1]) }  // the reclaim's commit (the send's may share it)
            let (s1, body) = call(app, "POST", itk + "sendVerificationCode?key=k", #"{"phoneNumber":"+15551230003","tenantId":"b"}"#)
            XCTAssertEqual(s1, failing ? 500 : 200, body.serializedString)
            XCTAssertEqual(app.emulator.tenants(of: "p").contains("a"), failing, "reclaimed unless its commit failed")
            try assertMemoryEqualsDisk(app, journal, clock: clock, "after a reclaim (commit failing: \(failing))")
            journal.inner.close()
        }
    }

    /// Outside a request (start-up import, direct calls) a failed commit throws and leaves memory as it was.
    func testADirectCallThrowsAndRollsBack() throws {
        let journal = FlakyJournal(try DataDirectory(path: dir + "/direct"))
        let clock = EmulatorClock(fixedAtMillis: 1_800_000_000_000)
        let app = makeApp(journal, clock: clock)
        let key = StoreKey(projectId: "p")
        _ = try app.emulator.createUser(key, localId: "keep", changes: UserChanges())
        journal.fail([2])
        var c = UserChanges()
        c.displayName = .set("changed")
        XCTAssertThrowsError(try app.emulator.updateUser(key, localId: "keep", changes: c)) { XCTAssertEqual(($0 as? AuthError)?.code, .internalFailure) }
        XCTAssertNil(app.emulator.store(key).read { $0.users["keep"]?.displayName })
        try assertMemoryEqualsDisk(app, journal, clock: clock, "after a failed direct update")
    }
}
