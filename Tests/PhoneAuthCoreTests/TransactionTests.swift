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

final class TransactionTests: XCTestCase {
    func emulator(_ journal: (any StateJournal)?) -> Emulator {
        Emulator(defaultProjectId: "p", clock: EmulatorClock(fixedAtMillis: 1_800_000_000_000), random: SeededRandom(seed: 3),
                 logger: Logger(label: "t", level: .critical), journal: journal)
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
}
