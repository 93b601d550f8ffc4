import EmulatorSupport
@testable import PhoneAuthCore
import Synchronization
import XCTest

/// Issue 11 follow-up (red team F1, F2): reads never create projects or tenants; tenants created on first use that
/// hold nothing do not use up the per-project cap.
final class ReclaimTests: XCTestCase {
    let clock = EmulatorClock(fixedAtMillis: 1_800_000_000_000)

    func emulator(maxProjects: Int = 3, maxTenants: Int = 3) -> Emulator {
        Emulator(defaultProjectId: "p", clock: clock, random: SeededRandom(seed: 4), logger: Logger(label: "t", level: .critical),
                 maxProjects: maxProjects, maxTenantsPerProject: maxTenants)
    }

    /// F1: what `<img src>` GETs reach (inbox, pages, pushes, user listings, tenant settings, `:wait`) allocates nothing,
    /// so thousands of them cannot exhaust `--max-projects` or the tenant cap.
    func testReadsOfUnknownProjectsAndTenantsCreateNothing() throws {
        let e = emulator()
        for i in 0..<200 {
            for key in [StoreKey(projectId: "img-\(i)"), StoreKey(projectId: "p", tenantId: "t\(i)"), StoreKey(projectId: "img-\(i)", tenantId: "t")] {
                XCTAssertEqual(e.verificationCodes(key, phone: nil), [])
                XCTAssertEqual(e.verificationCodes(key, phone: nil, after: nil, limit: 10).sessions, [])
                XCTAssertEqual(e.pushNotifications(key), [])
                XCTAssertEqual(e.listUsers(key, after: nil, limit: 10), [])
                XCTAssertNil(e.tenantSettings(key))
                let answered = Mutex(false)
                XCTAssertNil(try e.waitForCode(key, phone: "+15550001111", timeoutSeconds: 0) { s in answered.withLock { $0 = s == nil } })
                XCTAssertTrue(answered.withLock { $0 })
            }
        }
        XCTAssertEqual(e.storeKeys, [StoreKey(projectId: "p")])
        XCTAssertEqual(e.projectCount, 1)
        XCTAssertEqual(e.tenants(of: "p"), [])
        // Legitimate clients still get their projects and tenants.
        try e.admit(StoreKey(projectId: "real"), create: true)
        for t in ["a", "b", "c"] { try e.admit(StoreKey(projectId: "p", tenantId: t), create: true, explicit: true) }
        XCTAssertEqual(e.tenants(of: "p"), ["a", "b", "c"])
    }

    /// F1: a long poll on a project or tenant that does not exist waits without creating it; the send that creates it
    /// answers the poll (the long-poll contract holds for a store's first code).
    func testWaitOnAMissingStoreIsAnsweredByTheSendThatCreatesIt() throws {
        let e = emulator()
        let got = Mutex<[String]>([])
        let tenant = StoreKey(projectId: "p", tenantId: "later")
        let waiter = try e.waitForCode(tenant, phone: "+15550001111", timeoutSeconds: 60) { s in got.withLock { $0.append(s?.code ?? "timeout") } }
        XCTAssertNotNil(waiter)
        let other = try e.waitForCode(tenant, phone: "+15550002222", timeoutSeconds: 60) { s in got.withLock { $0.append(s?.code ?? "timeout") } }
        XCTAssertEqual(e.pendingWaiterCount, 2)
        XCTAssertEqual(e.tenants(of: "p"), [], "waiting created nothing")
        try e.admit(tenant, create: true)
        _ = try e.sendVerificationCode(tenant, phoneNumber: "+15550001111")
        let code = e.verificationCodes(tenant, phone: "+15550001111").first?.code
        XCTAssertNotNil(code)
        XCTAssertEqual(got.withLock { $0 }, [code!])
        XCTAssertEqual(e.pendingWaiterCount, 1)
        other?.cancel()
        XCTAssertEqual(e.pendingWaiterCount, 0)
        XCTAssertEqual(got.withLock { $0 }.count, 1, "a cancelled poll is not answered")
    }

    /// The side table for polls on missing stores is bounded like a store's waiters.
    func testWaitsOnMissingStoresAreCapped() throws {
        let e = emulator()
        var waiters: [CodeWaiter] = []
        for i in 0..<Emulator.maxWaitersPerStore {
            if let w = try e.waitForCode(StoreKey(projectId: "w\(i % 7)"), phone: "+1555000\(1000 + i % 9000)", timeoutSeconds: 300, callback: { _ in }) {
                waiters.append(w)
            }
        }
        XCTAssertEqual(waiters.count, Emulator.maxWaitersPerStore)
        XCTAssertThrowsError(try e.waitForCode(StoreKey(projectId: "w-extra"), phone: "+15550001111", timeoutSeconds: 300) { _ in }) {
            XCTAssertEqual(($0 as? AuthError)?.code, .resourceExhausted)  // 429 on the wire (ErrorWireTests)
        }
        XCTAssertEqual(e.projectCount, 1)
        for w in waiters { w.cancel() }
        XCTAssertEqual(e.pendingWaiterCount, 0)
        XCTAssertNotNil(try e.waitForCode(StoreKey(projectId: "w-extra"), phone: "+15550001111", timeoutSeconds: 300) { _ in })
    }

    /// F2: at the cap, tenants created on first use that hold nothing (no users, no live codes, no waiters, no live app
    /// credentials) make room; tenants with data and explicitly created or configured tenants are kept.
    func testEmptyTenantsCreatedOnFirstUseAreReclaimedAtTheCap() throws {
        let e = emulator(maxTenants: 3)
        func key(_ t: String) -> StoreKey { StoreKey(projectId: "p", tenantId: t) }
        try e.admit(key("with-user"), create: true)
        _ = try e.createUser(key("with-user"), localId: "u1", changes: UserChanges())
        try e.admit(key("explicit"), create: true, explicit: true)
        try e.admit(key("empty"), create: true)
        // 1,000 empty tenants from first use never fill the cap: each replaces the previous empty one.
        for i in 0..<1000 { try e.admit(key("spam-\(i)"), create: true) }
        XCTAssertEqual(e.tenants(of: "p"), ["explicit", "spam-999", "with-user"])
        // Configured through the emulator API: kept like an explicit tenant.
        _ = try e.patchConfig(key("spam-999"), ["phoneAuth": ["codeLength": 6]])
        XCTAssertThrowsError(try e.admit(key("one-more"), create: true)) {
            XCTAssertEqual(($0 as? AuthError)?.description, "QUOTA_EXCEEDED : Too many tenants: a project holds at most 3 tenants.")
        }
        try e.deleteTenant(key("spam-999"))

        // A pending code keeps its tenant until it expires; then the tenant is reclaimable.
        try e.admit(key("with-code"), create: true)
        _ = try e.sendVerificationCode(key("with-code"), phoneNumber: "+15550001111")
        XCTAssertThrowsError(try e.admit(key("blocked"), create: true))
        XCTAssertTrue(clock.advance(millis: 3_600_000))
        try e.admit(key("after-expiry"), create: true)
        XCTAssertEqual(e.tenants(of: "p"), ["after-expiry", "explicit", "with-user"])

        // A live long poll keeps its tenant too.
        let w = try e.waitForCode(key("after-expiry"), phone: "+15550001111", timeoutSeconds: 300) { _ in }
        XCTAssertThrowsError(try e.admit(key("blocked"), create: true))
        w?.cancel()
        try e.admit(key("unblocked"), create: true)
        XCTAssertEqual(e.tenants(of: "p"), ["explicit", "unblocked", "with-user"])
    }

    /// A writer holding a store that was reclaimed meanwhile never writes into the detached store: its transaction
    /// starts over with a fresh registered store, and the write lands there.
    func testAWriteAfterReclaimLandsInTheRegisteredStore() throws {
        let e = emulator(maxTenants: 1)
        let a = StoreKey(projectId: "p", tenantId: "a")
        try e.admit(a, create: true)
        let stale = try XCTUnwrap(e.existingStore(a))
        try e.admit(StoreKey(projectId: "p", tenantId: "b"), create: true)  // reclaims the empty "a"
        XCTAssertNil(e.existingStore(a))
        XCTAssertTrue(stale.state.withLock { $0.removed })
        // The writer looked "a" up before the reclaim and runs its transaction now.
        let saved = try e.transaction(a, startingWith: stale) { tx throws(AuthError) -> String in
            tx.save(UserRecord(localId: "u1", createdAt: 1))
            return tx.key.description
        }
        XCTAssertEqual(saved, a.description)
        let fresh = try XCTUnwrap(e.existingStore(a))
        XCTAssertFalse(fresh === stale)
        XCTAssertEqual(fresh.read { Array($0.users.keys) }, ["u1"])
        XCTAssertEqual(stale.read { $0.users.count }, 0, "nothing landed in the detached store")
        XCTAssertEqual(e.tenants(of: "p"), ["a", "b"])
    }

    /// A tenant made with the tenants API and deleted while a writer held it is not brought back by that writer.
    func testAWriteAfterAnExplicitDeleteFails() throws {
        let e = emulator()
        let a = StoreKey(projectId: "p", tenantId: "a")
        try e.admit(a, create: true, explicit: true)
        let stale = try XCTUnwrap(e.existingStore(a))
        try e.deleteTenant(a)
        XCTAssertThrowsError(try e.transaction(a, startingWith: stale) { tx throws(AuthError) in tx.save(UserRecord(localId: "u1", createdAt: 1)) }) {
            XCTAssertEqual(($0 as? AuthError)?.code, .tenantNotFound)
        }
        XCTAssertNil(e.existingStore(a))
        XCTAssertEqual(stale.read { $0.users.count }, 0)
    }

    /// Non-durable writes (minted credentials, iOS receipts) never land in a reclaimed store either.
    func testCredentialsAfterReclaimLandInTheRegisteredStore() throws {
        let e = emulator(maxTenants: 1)
        let a = StoreKey(projectId: "p", tenantId: "a")
        try e.admit(a, create: true)
        try e.admit(StoreKey(projectId: "p", tenantId: "b"), create: true)  // reclaims the empty "a"
        XCTAssertEqual(e.tenants(of: "p"), ["b"])
        _ = e.mintAppCredential(a, type: .recaptcha)
        XCTAssertEqual(e.existingStore(a)?.read { $0.credentials.minted.isEmpty }, false)
        // Holding a live credential, "a" is not reclaimable: once "b" is gone, the cap is full with "a" alone.
        try e.deleteTenant(StoreKey(projectId: "p", tenantId: "b"))
        XCTAssertThrowsError(try e.admit(StoreKey(projectId: "p", tenantId: "c"), create: true))
        XCTAssertEqual(e.tenants(of: "p"), ["a"])
    }
}
