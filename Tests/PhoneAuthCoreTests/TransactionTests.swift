import Dispatch
import EmulatorSupport
@testable import PhoneAuthCore
import XCTest

/// A journal that keeps nothing (or fails): enough for the transaction machinery's own bookkeeping.
private final class CountingJournal: StateJournal, @unchecked Sendable {
    let changes = Locked<[Int]>([])
    let failNext = Locked(false)
    func record(_ batch: [StateChange]) throws {
        changes.withLock { $0.append(batch.count) }
        if failNext.withLock({ f in defer { f = false }; return f }) { throw Injected() }
    }
    struct Injected: Error {}
}

/// A journal whose commits wait for `gate` (one signal per commit) and fail while `fail` is set.
private final class GatedJournal: StateJournal, @unchecked Sendable {
    let gate = DispatchSemaphore(value: 0)
    let fail = Locked(false)
    func record(_ batch: [StateChange]) throws {
        gate.wait()
        if fail.withLock({ $0 }) { throw CountingJournal.Injected() }
    }
}

final class TransactionTests: XCTestCase {
    func emulator(_ journal: (any StateJournal)?) -> Emulator {
        Emulator(defaultProjectId: "p", clock: EmulatorClock(fixedAtMillis: 1_800_000_000_000), random: SeededRandom(seed: 3),
                 logger: Logger(label: "t", level: .critical), journal: journal)
    }

    /// An import absorbed into a journaled emulator (`--import` with `--data-dir`): every store's users and the
    /// tenants reach the journal in one commit, so a process killed while it is written keeps none of them; a failed
    /// commit leaves memory as before.
    func testAnAbsorbedImportIsOneCommitAcrossTenantsOrNothing() throws {
        func source() throws -> Emulator {
            let s = emulator(nil)
            for tenant in [nil, "t-1", "t-2"] as [String?] {
                let key = StoreKey(projectId: "p", tenantId: tenant)
                if tenant != nil { try s.admit(key, create: true, explicit: true) }
                for i in 0..<5 { _ = try s.createUser(key, localId: "\(tenant ?? "root")-\(i)", changes: UserChanges()) }
            }
            return s
        }
        let journal = CountingJournal()
        let e = emulator(journal)
        let before = journal.changes.withLock { $0.count }
        XCTAssertEqual(try e.absorbUsers(from: try source()), 15)
        let commits = journal.changes.withLock { Array($0[before...]) }
        XCTAssertEqual(commits.count, 1, "\(commits)")
        XCTAssertGreaterThanOrEqual(commits.first ?? 0, 15)
        for tenant in [nil, "t-1", "t-2"] as [String?] {
            XCTAssertEqual(e.existingStore(StoreKey(projectId: "p", tenantId: tenant))?.read { $0.users.count }, 5)
        }

        let failing = CountingJournal()
        let f = emulator(failing)
        failing.failNext.withLock { $0 = true }
        XCTAssertThrowsError(try f.absorbUsers(from: try source())) { XCTAssertEqual(($0 as? AuthError)?.code, .internalFailure) }
        for tenant in [nil, "t-1", "t-2"] as [String?] {
            XCTAssertEqual(f.existingStore(StoreKey(projectId: "p", tenantId: tenant))?.read { $0.users.count } ?? 0, 0, "\(tenant ?? "root")")
        }
        // And it works on: the next commit is written.
        XCTAssertEqual(try f.absorbUsers(from: try source()), 15)
        XCTAssertEqual(f.existingStore(StoreKey(projectId: "p", tenantId: "t-2"))?.read { $0.users.count }, 5)
    }

    /// Committed transactions leave no undo entries behind (a wipe's would hold every old user).
    func testCommittedUndoEntriesAreDropped() throws {
        let e = emulator(CountingJournal())
        let key = StoreKey(projectId: "p")
        for i in 0..<50 { _ = try e.createUser(key, localId: "u\(i)", changes: UserChanges()) }
        try e.wipeAccounts(key)
        XCTAssertEqual(e.store(key).state.withLock { $0.undo.count }, 0)
        XCTAssertEqual(e.store(key).read { $0.users.count }, 0)
    }

    /// A failed commit restores exactly the values the transaction replaced: users, phone index, refresh tokens.
    func testAFailedWipeRestoresUsersPhonesAndTokens() throws {
        let journal = CountingJournal()
        let e = emulator(journal)
        let key = StoreKey(projectId: "p")
        var c = UserChanges()
        c.phoneNumber = .set("+15550001111")
        _ = try e.createUser(key, localId: "a", changes: c)
        _ = try e.issueRefreshToken(key, localId: "a", authTime: 1, signInProvider: "phone")
        journal.failNext.withLock { $0 = true }
        XCTAssertThrowsError(try e.wipeAccounts(key)) { XCTAssertEqual(($0 as? AuthError)?.code, .internalFailure) }
        XCTAssertEqual(e.store(key).read { $0.user(phone: "+15550001111")?.localId }, "a")
        XCTAssertEqual(e.refreshTokenCount, 1)
        XCTAssertEqual(e.store(key).state.withLock { $0.undo.count }, 0)
        // And the store works on: the next commit succeeds.
        try e.wipeAccounts(key)
        XCTAssertEqual(e.refreshTokenCount, 0)
    }

    /// Without a journal nothing is recorded: no changes, no undo entries, no tickets.
    func testInMemoryTransactionsRecordNothing() throws {
        let e = emulator(nil)
        let key = StoreKey(projectId: "p")
        _ = try e.createUser(key, localId: "x", changes: UserChanges())
        XCTAssertEqual(e.store(key).state.withLock { g in g.undo.count + Int(g.lastTicket) }, 0)
        XCTAssertEqual(e.journalCommits, 0)
    }

    /// A long poll that began before its tenant existed (an orphan waiter) is answered only with a durable code, as a
    /// store's own waiters: not while the send's commit is pending, never if it is rolled back; the next send answers it.
    func testAnOrphanWaiterIsAnsweredOnlyWithADurableCode() throws {
        let journal = GatedJournal()
        let e = emulator(journal)
        let key = StoreKey(projectId: "p", tenantId: "later")
        let got = Locked<[String]>([])
        let waiter = try e.waitForCode(key, phone: "+15550001111", timeoutSeconds: 300) { s in got.withLock { $0.append(s?.code ?? "timeout") } }
        XCTAssertNotNil(waiter)
        XCTAssertNil(e.existingStore(key), "waiting created nothing")
        journal.fail.withLock { $0 = true }
        // Inside a request: the send returns at once, its reply waits for the commit.
        let scope = DurabilityScope()
        _ = try DurabilityScope.$current.withValue(scope) { try e.sendVerificationCode(key, phoneNumber: "+15550001111") }
        XCTAssertEqual(got.withLock { $0 }, [], "not answered while the code is not durable")
        let decided = DispatchSemaphore(value: 0)
        let outcome = Locked<Bool?>(nil)
        e.whenDurable(scope) { ok in
            outcome.withLock { $0 = ok }
            decided.signal()
        }
        journal.gate.signal()
        XCTAssertEqual(decided.wait(timeout: .now() + 30), .success)
        XCTAssertEqual(outcome.withLock { $0 }, false)
        XCTAssertEqual(got.withLock { $0 }, [], "a rolled-back code is never revealed")
        XCTAssertEqual(e.pendingWaiterCount, 1)
        XCTAssertEqual(e.verificationCodes(key, phone: "+15550001111"), [])
        // The next send commits and answers it.
        journal.fail.withLock { $0 = false }
        journal.gate.signal()
        _ = try e.sendVerificationCode(key, phoneNumber: "+15550001111")
        let code = try XCTUnwrap(e.verificationCodes(key, phone: "+15550001111").first?.code)
        XCTAssertEqual(got.withLock { $0 }, [code])
        XCTAssertEqual(e.pendingWaiterCount, 0)
    }
}
