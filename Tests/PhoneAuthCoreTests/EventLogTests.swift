import EmulatorSupport
@testable import PhoneAuthCore
import PhoneAuthTestSupport
import Synchronization
import XCTest

private final class FailOnceJournal: StateJournal, @unchecked Sendable {
    let failNext = Locked(false)
    func record(_ batch: [StateChange]) throws {
        if failNext.withLock({ f in defer { f = false }; return f }) { throw Injected() }
    }
    struct Injected: Error {}
}

final class EventLogTests: XCTestCase {
    let clock = EmulatorClock(fixedAtMillis: testEpochMillis)
    let p = StoreKey(projectId: "p")
    let q = StoreKey(projectId: "q")

    func uid(_ e: EmulatorEvent) -> String? {
        switch e.payload {
        case .userDeleted(let u), .userDisabled(let u): u
        default: nil
        }
    }

    func testIdsIncreaseAcrossStoresAndTheRingKeepsTheLastEvents() {
        let hub = EventHub(clock: clock, capacity: 5)
        for i in 0..<8 { hub.emit(i % 2 == 0 ? p : q, .userDeleted(uid: "u\(i)")) }
        let logP = hub.log(p, pinned: false), logQ = hub.log(q, pinned: false)
        XCTAssertEqual(logP.retained.map(\.id), [1, 3, 5, 7])
        XCTAssertEqual(logQ.retained.map(\.id), [2, 4, 6, 8])
        XCTAssertEqual(logP.retained.first?.time, testEpochMillis)
        for i in 8..<20 { hub.emit(p, .userDeleted(uid: "u\(i)")) }
        XCTAssertEqual(logP.retained.count, 5, "the ring is bounded")
        XCTAssertEqual(logP.retained.map(\.id), [16, 17, 18, 19, 20])
        XCTAssertEqual(logP.retained.compactMap(uid), ["u15", "u16", "u17", "u18", "u19"])
    }

    func testReplayStartsAfterTheGivenIdAndLiveStartsAtTheEnd() throws {
        let hub = EventHub(clock: clock)
        for i in 0..<6 { hub.emit(p, .userDeleted(uid: "u\(i)")) }
        let after3 = try hub.subscribe(p, since: 3, filter: EventFilter(), follow: true)
        XCTAssertEqual(after3.read(max: 100).events.map(\.id), [4, 5, 6])
        let all = try hub.subscribe(p, since: 0, filter: EventFilter(), follow: false)
        let batch = all.read(max: 100)
        XCTAssertEqual(batch.events.map(\.id), [1, 2, 3, 4, 5, 6])
        XCTAssertEqual(batch.status, .finished, "follow=false ends after the replay")
        let live = try hub.subscribe(p, since: nil, filter: EventFilter(), follow: true)
        XCTAssertEqual(live.read(max: 100).status, .waiting)
        hub.emit(p, .userDeleted(uid: "new"))
        hub.emit(q, .userDeleted(uid: "other store"))
        XCTAssertEqual(live.read(max: 100).events.compactMap(uid), ["new"])
        XCTAssertEqual(after3.read(max: 100).events.map(\.id), [7])
    }

    func testFiltersTakeTypesListsAndPrefixes() throws {
        let f = try EventFilter(parsing: ["code.sent,user.*", "limit.hit"])
        XCTAssertTrue(f.matches("code.sent"))
        XCTAssertTrue(f.matches("user.created"))
        XCTAssertTrue(f.matches("limit.hit"))
        XCTAssertFalse(f.matches("code.verified"))
        XCTAssertTrue(try EventFilter(parsing: ["*"]).isAll)
        XCTAssertThrowsError(try EventFilter(parsing: ["nope"])) { XCTAssertTrue($0 is AuthError) }
        XCTAssertThrowsError(try EventFilter(parsing: ["us<er*"]))
        XCTAssertThrowsError(try EventFilter(parsing: [Array(repeating: "code.sent", count: 40).joined(separator: ",")]))

        let hub = EventHub(clock: clock)
        let s = try hub.subscribe(p, since: nil, filter: try EventFilter(parsing: ["user.d*"]), follow: true)
        hub.emit(p, .userDeleted(uid: "a"))
        hub.emit(p, .tokensRevoked(uid: "b"))
        hub.emit(p, .userDisabled(uid: "c"))
        XCTAssertEqual(s.read(max: 10).events.compactMap(uid), ["a", "c"])
    }

    func testASubscriberThatFallsBehindIsToldHowManyItMissedThenGoesOn() throws {
        let hub = EventHub(clock: clock, capacity: 5)
        let all = try hub.subscribe(p, since: nil, filter: EventFilter(), follow: true)
        let deletions = try hub.subscribe(p, since: nil, filter: EventFilter(parsing: ["user.deleted"]), follow: true)
        for i in 0..<8 { hub.emit(p, i % 2 == 0 ? .userDeleted(uid: "u\(i)") : .tokensRevoked(uid: "u\(i)")) }
        let a = all.read(max: 100)
        XCTAssertEqual(a.dropped, 3)
        XCTAssertEqual(a.events.map(\.id), [4, 5, 6, 7, 8])
        let d = deletions.read(max: 100)
        XCTAssertEqual(d.dropped, 2, "only the missed events it asked for count (u0, u2)")
        XCTAssertEqual(d.events.compactMap(uid), ["u4", "u6"])
        hub.emit(p, .userDeleted(uid: "later"))
        let next = all.read(max: 100)
        XCTAssertEqual(next.dropped, 0)
        XCTAssertEqual(next.events.map(\.id), [9])
    }

    func testSubscribersAreCappedAndCancellingFreesASlot() throws {
        let hub = EventHub(clock: clock, maxSubscribers: 2)
        let a = try hub.subscribe(p, since: nil, filter: EventFilter(), follow: true)
        let b = try hub.subscribe(q, since: nil, filter: EventFilter(), follow: true)
        var third: EventSubscription?
        XCTAssertThrowsError(third = try hub.subscribe(p, since: nil, filter: EventFilter(), follow: true)) {
            XCTAssertEqual(($0 as? AuthError)?.code, .resourceExhausted)
        }
        XCTAssertNil(third)
        a.cancel()
        a.cancel()
        XCTAssertEqual(hub.subscribers, 1)
        XCTAssertNoThrow(try hub.subscribe(p, since: nil, filter: EventFilter(), follow: true))
        withExtendedLifetime(b) {}
    }

    func testAWaitingSubscriberIsWokenOnceForAMatchingEvent() throws {
        let hub = EventHub(clock: clock)
        let s = try hub.subscribe(p, since: nil, filter: EventFilter(parsing: ["user.deleted"]), follow: true)
        let wakes = Atomic<Int>(0)
        s.setWake { wakes.wrappingAdd(1, ordering: .relaxed) }
        hub.emit(p, .userDeleted(uid: "before the first read"))
        XCTAssertEqual(wakes.load(ordering: .relaxed), 0, "a reader that never waited is not woken")
        _ = s.read(max: 10)
        XCTAssertEqual(s.read(max: 10).status, .waiting)
        hub.emit(p, .tokensRevoked(uid: "not asked for"))
        XCTAssertEqual(wakes.load(ordering: .relaxed), 0)
        hub.emit(p, .userDeleted(uid: "x"))
        hub.emit(p, .userDeleted(uid: "y"))
        XCTAssertEqual(wakes.load(ordering: .relaxed), 1)
    }

    /// A log nobody uses (a subscription to a name never written) goes away with its last subscriber.
    func testSubscribingToAnUnusedStoreLeavesNothingBehind() throws {
        let hub = EventHub(clock: clock)
        let s = try hub.subscribe(StoreKey(projectId: "never-used"), since: nil, filter: EventFilter(), follow: true)
        let log = s.log
        s.cancel()
        XCTAssertFalse(hub.log(StoreKey(projectId: "never-used"), pinned: false) === log)
    }

    // MARK: the domain emits

    func events(_ e: Emulator, _ key: StoreKey) -> [EmulatorEvent] { e.store(key).events.retained }

    func testASendAndASignInEmitTheirEvents() throws {
        let e = makeTestEmulator(seed: 1)
        let key = StoreKey(projectId: "p")
        let session = try e.sendVerificationCode(key, phoneNumber: "+15551230000")
        let fictional = try e.sendVerificationCode(key, phoneNumber: "+16505554567")
        let sent = events(e, key)
        XCTAssertEqual(sent.map(\.type), ["code.sent", "code.sent"])
        guard case .codeSent(let phone, .signIn, let sid, false, let code) = sent[0].payload else { return XCTFail("\(sent[0])") }
        XCTAssertEqual(phone, "+15551230000")
        XCTAssertEqual(sid.text, session)
        let json = sent[0].json(key)
        XCTAssertEqual(json["code"]?.stringValue, code)
        XCTAssertEqual(json["sessionInfo"]?.stringValue, session)
        XCTAssertEqual(json["kind"]?.stringValue, "signIn")
        XCTAssertEqual(json["tenant"], nil)
        XCTAssertNil(sent[1].json(key)["code"], "a fictional number's code is not in the event")
        XCTAssertEqual(sent[1].json(key)["fictional"], .bool(true))

        XCTAssertThrowsError(try e.signInWithPhoneNumber(key, sessionInfo: fictional, code: "000000", temporaryProof: nil,
                                                         phoneNumber: nil, tokenUser: nil, operation: nil))
        _ = try e.signInWithPhoneNumber(key, sessionInfo: fictional, code: "123456", temporaryProof: nil, phoneNumber: nil, tokenUser: nil, operation: nil)
        let after = events(e, key).dropFirst(2)
        XCTAssertEqual(after.map(\.type), ["code.rejected", "code.verified", "user.created", "tokens.issued"])
        XCTAssertEqual(after.first?.json(key)["reason"]?.stringValue, "INVALID_CODE")
        XCTAssertNotNil(after.first?.json(key)["attemptsLeft"])
        XCTAssertEqual(after.last?.json(key)["provider"]?.stringValue, "phone")
    }

    func testUserUpdatesConfigAndLimitsEmitTheirEvents() throws {
        let e = makeTestEmulator(seed: 2) { $0.phoneAuth.perPhoneNumber = RateLimit(max: 1, perSeconds: 3600) }
        let key = StoreKey(projectId: "p")
        _ = try e.createUser(key, localId: "u1", changes: UserChanges())
        var c = UserChanges()
        c.disabled = true
        c.displayName = .set("Ada")
        _ = try e.updateUser(key, localId: "u1", changes: c)
        try e.deleteUser(key, localId: "u1")
        _ = try e.patchConfig(key, ["phoneAuth": ["codeLength": 8]])
        _ = try e.sendVerificationCode(key, phoneNumber: "+15551230001")
        XCTAssertThrowsError(try e.sendVerificationCode(key, phoneNumber: "+15551230001"))
        let got = events(e, key)
        XCTAssertEqual(got.map(\.type), ["user.created", "user.updated", "user.disabled", "user.deleted", "config.changed", "code.sent", "limit.hit"])
        XCTAssertEqual(got[1].json(key)["fields"], ["displayName", "disabled"])
        XCTAssertEqual(got[4].json(key)["fields"], ["phoneAuth"])
        XCTAssertEqual(got[6].json(key)["limit"]?.stringValue, "TOO_MANY_ATTEMPTS_TRY_LATER")
    }

    /// An event is published only once its transaction is durable: a rolled-back one delivers nothing.
    func testARolledBackTransactionEmitsNothing() throws {
        let journal = FailOnceJournal()
        let e = makeTestEmulator(seed: 3, journal: journal)
        let key = StoreKey(projectId: "p")
        let live = try e.events.subscribe(key, since: nil, filter: EventFilter(), follow: true)
        journal.failNext.withLock { $0 = true }
        XCTAssertThrowsError(try e.createUser(key, localId: "gone", changes: UserChanges()))
        XCTAssertEqual(events(e, key).count, 0)
        XCTAssertEqual(live.read(max: 10).events.count, 0)
        _ = try e.createUser(key, localId: "kept", changes: UserChanges())
        let got = live.read(max: 10).events
        XCTAssertEqual(got.map(\.type), ["user.created"])
        XCTAssertEqual(got.first?.json(key)["uid"]?.stringValue, "kept")
    }

    func testATenantsEventsAreOnItsOwnStream() throws {
        let e = makeTestEmulator(seed: 4)
        let tenant = StoreKey(projectId: "p", tenantId: "t1")
        try e.admit(tenant, create: true, explicit: true)
        _ = try e.createUser(tenant, localId: "tu", changes: UserChanges())
        XCTAssertEqual(events(e, StoreKey(projectId: "p")).count, 0)
        let got = events(e, tenant)
        XCTAssertEqual(got.map(\.type), ["user.created"])
        XCTAssertEqual(got[0].json(tenant)["tenant"]?.stringValue, "t1")
        e.events.broadcast(.clockChanged(offsetMillis: 1000, now: testEpochMillis + 1000))
        XCTAssertEqual(events(e, StoreKey(projectId: "p")).map(\.type), ["clock.changed"])
        XCTAssertEqual(events(e, tenant).last?.type, "clock.changed")
    }
}
