import Dispatch
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

    func testOneReaderRendersAndTheOthersCopyItsBytesInOrder() throws {
        let hub = EventHub(clock: clock)
        let a = try hub.subscribe(p, since: nil, filter: EventFilter(), follow: true)
        let b = try hub.subscribe(p, since: nil, filter: EventFilter(), follow: true)
        let jsonl = try hub.subscribe(p, since: nil, filter: EventFilter(), follow: true)
        for i in 1...3 { hub.emit(p, .userDeleted(uid: "u\(i)")) }
        /// Reads everything: bytes others kept come in `out`, the rest is "rendered" as `tag` + uid and kept.
        func drain(_ s: EventSubscription, _ format: EventWireFormat, tag: String) -> String {
            var out: [UInt8] = []
            while true {
                let batch = s.read(max: 100, format: format, into: &out)
                let start = out.count
                var ends: [Int] = []
                for e in batch.events {
                    out += Array("\(tag)\(uid(e)!) ".utf8)
                    ends.append(out.count - start)
                }
                s.keep(batch.events, sequence: batch.sequence, format: format, bytes: Array(out[start...]), ends: ends)
                if batch.status != .more { return String(decoding: out, as: UTF8.self) }
            }
        }
        XCTAssertEqual(drain(a, .sse, tag: "a:"), "a:u1 a:u2 a:u3 ")
        XCTAssertEqual(drain(b, .sse, tag: "b:"), "a:u1 a:u2 a:u3 ", "rendered once, copied by the second reader")
        XCTAssertEqual(drain(jsonl, .jsonl, tag: "j:"), "j:u1 j:u2 j:u3 ", "each format renders its own bytes")
        // Order holds when only a later event was rendered: the earlier one is rendered first, then the copy follows.
        hub.emit(p, .userDeleted(uid: "u4"))
        hub.emit(p, .userDeleted(uid: "u5"))
        let late = try hub.subscribe(p, since: 3, filter: EventFilter(), follow: true)
        var skipped: [UInt8] = []
        let first = late.read(max: 1, format: .sse, into: &skipped)  // u4, not kept
        XCTAssertEqual(first.events.compactMap(uid), ["u4"])
        let fifth = b.read(max: 100, format: .sse, into: &skipped)
        XCTAssertEqual(fifth.events.compactMap(uid), ["u4", "u5"])
        b.keep([fifth.events[1]], sequence: [fifth.sequence[1]], format: .sse, bytes: Array("b:u5 ".utf8), ends: [5])
        XCTAssertEqual(drain(a, .sse, tag: "a:"), "a:u4 b:u5 ")
    }

    /// While streams follow a store in a format, its events are rendered once as they are published, and every
    /// reader copies the same bytes (no reader renders); with nobody following, nothing is rendered.
    func testFollowedFormatsAreRenderedOnceAtPublish() throws {
        let hub = EventHub(clock: clock, capacity: 64)
        hub.emit(p, .userDeleted(uid: "before"))
        let log = hub.log(p, pinned: false)
        XCTAssertEqual(log.chunksMade, 0, "nobody follows: nothing rendered")
        let a = try hub.subscribe(p, since: 0, filter: EventFilter(), follow: true, format: .sse)
        let b = try hub.subscribe(p, since: nil, filter: EventFilter(), follow: true, format: .sse)
        let codes = try hub.subscribe(p, since: nil, filter: EventFilter(parsing: ["code.*"]), follow: true, format: .sse)
        let sid = SessionID(bytes: Array(repeating: 7, count: 16))
        hub.emit(p, .userDeleted(uid: "u1"))
        hub.emit(p, .codeSent(phoneNumber: "+15550001111", kind: .signIn, session: sid, fictional: true, code: "1"))
        hub.emit(p, .userDeleted(uid: "u2"))
        let published = log.retained
        func wire(_ events: ArraySlice<EmulatorEvent>) -> String {
            var out: [UInt8] = []
            for e in events { e.render(p, format: .sse, into: &out) }
            return String(decoding: out, as: UTF8.self)
        }
        var outA: [UInt8] = []
        let first = a.read(max: 100, format: .sse, into: &outA)
        XCTAssertEqual(first.events.map(\.id), [published[0].id], "only the event from before anyone followed is left to render")
        var outB: [UInt8] = []
        let batchB = b.read(max: 100, format: .sse, into: &outB)
        XCTAssertTrue(batchB.events.isEmpty, "rendered at publish: the reader renders nothing")
        XCTAssertEqual(String(decoding: outB, as: UTF8.self), wire(published[1...]))
        var outCodes: [UInt8] = []
        XCTAssertTrue(codes.read(max: 100, format: .sse, into: &outCodes).events.isEmpty)
        XCTAssertEqual(String(decoding: outCodes, as: UTF8.self), wire(published[2...2]), "a filtered reader copies its events only")
        var jsonl: [UInt8] = []
        let other = try hub.subscribe(p, since: 0, filter: EventFilter(), follow: false, format: .jsonl)
        XCTAssertEqual(other.read(max: 100, format: .jsonl, into: &jsonl).events.count, 4, "a format nobody follows is rendered by its reader")
        for s in [a, b, codes, other] { s.cancel() }
        let made = log.chunksMade
        for i in 0..<5 { hub.emit(p, .userDeleted(uid: "after\(i)")) }
        XCTAssertEqual(log.chunksMade, made, "nobody follows any more: publishes render nothing")
        // Following, publishing one event and leaving, over and over, fills the open chunk: one chunk per format, not
        // one per follow (each would pin 128 KiB from its ring slot).
        for i in 0..<200 {
            let s = try hub.subscribe(p, since: nil, filter: EventFilter(), follow: true, format: .sse)
            hub.emit(p, .userDeleted(uid: "cycle\(i)"))
            var out: [UInt8] = []
            XCTAssertTrue(s.read(max: 10, format: .sse, into: &out).events.isEmpty)
            XCTAssertTrue(String(decoding: out, as: UTF8.self).contains("cycle\(i)"))
            s.cancel()
        }
        XCTAssertLessThan(log.chunksMade - made, 8, "the open chunk is reused across follows (a chunk per follow: 200)")
        // A replay in between (events published while nobody followed, rendered by its reader) gets a chunk of its
        // own and leaves the open chunk open: the next follow still appends to it.
        let beforeReplays = log.chunksMade
        for i in 0..<50 {
            hub.emit(p, .userDeleted(uid: "unfollowed\(i)"))
            let replay = try hub.subscribe(p, since: 0, filter: EventFilter(), follow: false, format: .sse)
            var out: [UInt8] = []
            let batch = replay.read(max: 100, format: .sse, into: &out)
            XCTAssertFalse(batch.events.isEmpty)
            var rendered: [UInt8] = [], ends: [Int] = []
            for e in batch.events { e.render(p, format: .sse, into: &rendered); ends.append(rendered.count) }
            replay.keep(batch.events, sequence: batch.sequence, format: .sse, bytes: rendered, ends: ends)
            replay.cancel()
            let s = try hub.subscribe(p, since: nil, filter: EventFilter(), follow: true, format: .sse)
            hub.emit(p, .userDeleted(uid: "followed\(i)"))
            s.cancel()
        }
        // 50 chunks for the replays; the follows' 50 events (~150 bytes each) fill the open chunk, or one more.
        XCTAssertGreaterThanOrEqual(log.chunksMade - beforeReplays, 50)
        XCTAssertLessThanOrEqual(log.chunksMade - beforeReplays, 51, "one exact-size chunk per replay, none per follow")
    }

    /// Events rendered together are kept as one run: a reader copies any part of it, a filtered reader only its
    /// events (never the bytes between them), and a run outlives none of its events' slots.
    func testReadersCopyTheirPartsOfARun() throws {
        let hub = EventHub(clock: clock, capacity: 8)
        let renderer = try hub.subscribe(p, since: nil, filter: EventFilter(), follow: true)
        let slow = try hub.subscribe(p, since: nil, filter: EventFilter(), follow: true)
        let deletes = try hub.subscribe(p, since: nil, filter: EventFilter(parsing: ["user.deleted"]), follow: true)
        for i in 1...6 { hub.emit(p, i % 2 == 0 ? .userDeleted(uid: "d\(i)") : .userDisabled(uid: "x\(i)")) }
        var out: [UInt8] = []
        let batch = renderer.read(max: 100, format: .jsonl, into: &out)
        XCTAssertEqual(batch.events.count, 6)
        var ends: [Int] = []
        for e in batch.events {
            out += Array("[\(uid(e)!)]".utf8)
            ends.append(out.count)
        }
        renderer.keep(batch.events, sequence: batch.sequence, format: .jsonl, bytes: out, ends: ends)
        var part: [UInt8] = []
        let two = slow.read(max: 2, format: .jsonl, into: &part)
        XCTAssertTrue(two.events.isEmpty, "all rendered: bytes only")
        XCTAssertEqual(String(decoding: part, as: UTF8.self), "[x1][d2]")
        part.removeAll()
        _ = slow.read(max: 100, format: .jsonl, into: &part)
        XCTAssertEqual(String(decoding: part, as: UTF8.self), "[x3][d4][x5][d6]")
        var filtered: [UInt8] = []
        _ = deletes.read(max: 100, format: .jsonl, into: &filtered)
        XCTAssertEqual(String(decoding: filtered, as: UTF8.self), "[d2][d4][d6]")
        // The ring (8) overwrites the first run's events one by one; a new reader from the start sees only what is
        // retained, rendered where the run still covers it and not rendered where new events took the slots.
        for i in 7...12 { hub.emit(p, .userDeleted(uid: "n\(i)")) }
        let replay = try hub.subscribe(p, since: 0, filter: EventFilter(), follow: false)
        var got: [UInt8] = []
        let r = replay.read(max: 100, format: .jsonl, into: &got)
        XCTAssertEqual(String(decoding: got, as: UTF8.self), "[x5][d6]")
        XCTAssertEqual(r.events.compactMap(uid), ["n7", "n8", "n9", "n10", "n11", "n12"])
    }

    /// The stream writes events member by member: every type's bytes, written out here by hand (the contract's
    /// members, order, escaping and optional fields), and the object `json(key)` gives is the same.
    func testWrittenEventsAreTheContractsObjects() throws {
        let sid = SessionID(bytes: Array(0..<16))
        let cases: [(EventPayload, String)] = [
            (.codeSent(phoneNumber: "+15550001111", kind: .signIn, session: sid, fictional: false, code: "123456"),
             #""phoneNumber":"+15550001111","kind":"signIn","sessionInfo":"AAECAwQFBgcICQoLDA0ODw","fictional":false,"code":"123456""#),
            (.codeSent(phoneNumber: "+15550001111", kind: .mfaEnrollment, session: sid, fictional: true, code: "654321"),
             #""phoneNumber":"+15550001111","kind":"mfaEnrollment","sessionInfo":"AAECAwQFBgcICQoLDA0ODw","fictional":true"#),
            (.codeVerified(phoneNumber: "+1555", kind: .mfaSignIn, session: sid),
             #""phoneNumber":"+1555","kind":"mfaSignIn","sessionInfo":"AAECAwQFBgcICQoLDA0ODw""#),
            (.codeRejected(phoneNumber: "+1555", kind: .signIn, session: sid, reason: .invalidCode, attemptsLeft: 2),
             #""phoneNumber":"+1555","kind":"signIn","sessionInfo":"AAECAwQFBgcICQoLDA0ODw","reason":"INVALID_CODE","attemptsLeft":2"#),
            (.codeRejected(phoneNumber: "+1555", kind: .signIn, session: sid, reason: .sessionExpired, attemptsLeft: nil),
             #""phoneNumber":"+1555","kind":"signIn","sessionInfo":"AAECAwQFBgcICQoLDA0ODw","reason":"SESSION_EXPIRED""#),
            (.sessionExpired(phoneNumber: "+1555", session: sid), #""phoneNumber":"+1555","sessionInfo":"AAECAwQFBgcICQoLDA0ODw""#),
            (.userCreated(uid: "u\"1", phoneNumber: "+15550001111", email: nil, provider: "phone"),
             #""uid":"u\"1","phoneNumber":"+15550001111","provider":"phone""#),
            (.userCreated(uid: "u1", phoneNumber: nil, email: "a@b.c", provider: "password"), #""uid":"u1","email":"a@b.c","provider":"password""#),
            (.userUpdated(uid: "u1", fields: ["email", "mfaInfo"]), #""uid":"u1","fields":["email","mfaInfo"]"#),
            (.userLinked(uid: "u1", provider: "google.com"), #""uid":"u1","provider":"google.com""#),
            (.userDisabled(uid: "u1"), #""uid":"u1""#), (.userEnabled(uid: "u1"), #""uid":"u1""#),
            (.userDeleted(uid: "u1"), #""uid":"u1""#), (.tokensRefreshed(uid: "u1"), #""uid":"u1""#),
            (.tokensRevoked(uid: "u1"), #""uid":"u1""#),
            (.tokensIssued(uid: "u1", provider: "password", secondFactor: "phone"), #""uid":"u1","provider":"password","secondFactor":"phone""#),
            (.tokensIssued(uid: "u1", provider: "phone", secondFactor: nil), #""uid":"u1","provider":"phone""#),
            (.limitHit(limit: .tooManyAttemptsTryLater, phoneNumber: nil, ip: "127.0.0.1"), #""limit":"TOO_MANY_ATTEMPTS_TRY_LATER","ip":"127.0.0.1""#),
            (.limitHit(limit: .quotaExceeded, phoneNumber: "+1555", ip: nil), #""limit":"QUOTA_EXCEEDED","phoneNumber":"+1555""#),
            (.appVerificationFailed(reason: .missingAppCredential, phoneNumber: "+1555"), #""reason":"MISSING_APP_CREDENTIAL","phoneNumber":"+1555""#),
            (.recaptchaAssessed(phoneNumber: "+1555", action: "sendVerificationCode", state: "ENFORCE", verdict: "BLOCKED", reason: "BOT_SCORE",
                                botScore: 0.25, tollFraudScore: nil),
             #""phoneNumber":"+1555","action":"sendVerificationCode","enforcementState":"ENFORCE","verdict":"BLOCKED","reason":"BOT_SCORE","botScore":0.25"#),
            (.smsDelivery(phoneNumber: "+1555", outcome: "DELAYED", deliverAt: 1_796_000_000_000),
             #""phoneNumber":"+1555","outcome":"DELAYED","deliverAt":"2026-11-30T00:53:20.000Z""#),
            (.smsDelivery(phoneNumber: "+1555", outcome: "LOST", deliverAt: nil), #""phoneNumber":"+1555","outcome":"LOST""#),
            (.configChanged(fields: []), #""fields":[]"#),
            (.keysRotated(kid: "k2", retiredKids: ["k0", "k1"]), #""kid":"k2","retiredKids":["k0","k1"]"#),
            (.clockChanged(offsetMillis: -3_600_000, now: 1_796_000_000_000), #""offsetMillis":-3600000,"now":"2026-11-30T00:53:20.000Z""#),
            (.mfaEnrolled(uid: "u1", mfaEnrollmentId: "e1", phoneNumber: "+1555"), #""uid":"u1","mfaEnrollmentId":"e1","phoneNumber":"+1555","factorId":"phone""#),
            (.mfaWithdrawn(uid: "u1", mfaEnrollmentId: "e1"), #""uid":"u1","mfaEnrollmentId":"e1""#),
            (.oobSent(email: "a@b.c", requestType: "VERIFY_EMAIL", oobCode: "c<o>de\n"), #""email":"a@b.c","requestType":"VERIFY_EMAIL","oobCode":"c<o>de\n""#),
            (.idpTokenRevoked(uid: "u1", providerId: "apple.com", tokenType: "ACCESS_TOKEN"),
             #""uid":"u1","providerId":"apple.com","tokenType":"ACCESS_TOKEN""#),
            (.blockingFunctionCalled(event: "beforeSignIn", uri: "http://h/f", durationMs: 12, outcome: "ok"),
             #""event":"beforeSignIn","uri":"http://h/f","durationMs":12,"outcome":"ok""#),
            (.sessionCookieCreated(uid: "u1", expiresIn: 300), #""uid":"u1","expiresIn":300"#),
            (.projectReset(snapshot: "seeded"), #""snapshot":"seeded""#),
            (.appCheckChecked(outcome: "verified", appId: "1:12345:web:ab", refused: false, method: "accounts:signUp"),
             #""outcome":"verified","appId":"1:12345:web:ab","refused":false,"method":"accounts:signUp""#),
            (.appCheckChecked(outcome: "missing", appId: nil, refused: true, method: "token"), #""outcome":"missing","refused":true,"method":"token""#),
        ]
        var seen = Set<String>()
        for (n, (payload, fields)) in cases.enumerated() {
            seen.insert(payload.type)
            let e = EmulatorEvent(id: UInt64(n + 41), time: 1_700_000_000_123, payload: payload)
            for (key, scope) in [(StoreKey(projectId: "p"), #""project":"p""#), (StoreKey(projectId: "p", tenantId: "t-1"), #""project":"p","tenant":"t-1""#)] {
                var out: [UInt8] = []
                e.writeJSON(key, into: &out)
                let expected = #"{"id":\#(n + 41),"type":"\#(payload.type)","time":"2023-11-14T22:13:20.123Z",\#(scope),\#(fields)}"#
                XCTAssertEqual(String(decoding: out, as: UTF8.self), expected)
                XCTAssertEqual(e.json(key), try JSONParser.parse(expected))
            }
        }
        XCTAssertEqual(seen, Set(EventPayload.types).subtracting(["dropped"]), "every type is written out above")
        var reset: [UInt8] = []
        EmulatorEvent(id: 7, time: 1_700_000_000_123, payload: .projectReset(snapshot: nil)).writeJSON(p, into: &reset)
        XCTAssertEqual(String(decoding: reset, as: UTF8.self), #"{"id":7,"type":"project.reset","time":"2023-11-14T22:13:20.123Z","project":"p"}"#)
        var dropped: [UInt8] = []
        EmulatorEvent(id: 0, time: 1_700_000_000_123, payload: .dropped(count: 3)).writeJSON(p, withId: false, into: &dropped)
        XCTAssertEqual(String(decoding: dropped, as: UTF8.self), #"{"type":"dropped","time":"2023-11-14T22:13:20.123Z","project":"p","count":3}"#)
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

    /// Readers that keep up are skipped by publishes; one that falls behind again later is still told what it
    /// missed (the lower bound of the cursors is refreshed, not trusted blindly), and waiting readers are woken
    /// exactly once per wait.
    func testKeepingUpThenFallingBehindAgainAndWakesPerWait() throws {
        let hub = EventHub(clock: clock, capacity: 4)
        let fast = try hub.subscribe(p, since: nil, filter: EventFilter(), follow: true)
        let slow = try hub.subscribe(p, since: nil, filter: EventFilter(), follow: true)
        let wakes = Locked(0)
        fast.setWake { wakes.withLock { $0 += 1 } }
        for round in 0..<3 {
            XCTAssertEqual(fast.read(max: 100).status, .waiting)  // caught up: waits
            for i in 0..<6 { hub.emit(p, .userDeleted(uid: "r\(round)-\(i)")) }
            XCTAssertEqual(wakes.withLock { $0 }, round + 1, "one wake per wait, not one per event")
            let got = fast.read(max: 100)
            XCTAssertEqual(got.dropped, 2, "6 events into a ring of 4 while it did not read")
            XCTAssertEqual(got.events.count, 4)
        }
        let s = slow.read(max: 100)
        XCTAssertEqual(s.dropped, 14)
        XCTAssertEqual(s.events.count, 4)
        slow.cancel()
        fast.cancel()
        hub.emit(p, .userDeleted(uid: "nobody listens"))
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

    /// A log nobody uses (a subscription to a name never written) goes away with its last subscriber; a store's log
    /// outlives its store while it has history, then goes too (a tenant reclaimed or deleted leaves nothing behind).
    func testSubscribingToAnUnusedStoreLeavesNothingBehind() throws {
        let hub = EventHub(clock: clock)
        let store = hub.log(q, pinned: true)  // a store's log, empty: the store holds it, so pruning keeps it
        weak var unused: EventLog?
        for i in 0..<1000 {
            let s = try hub.subscribe(StoreKey(projectId: "never-used-\(i)"), since: nil, filter: EventFilter(), follow: true)
            if i == 0 { unused = s.log }
            s.cancel()
        }
        XCTAssertNil(unused, "nothing holds a log without history or subscribers: the table let it go")
        XCTAssertLessThanOrEqual(hub.tableEntries, 64, "pruned as the table grows")
        hub.prune()
        XCTAssertEqual(hub.tableEntries, 1, "the store's log stays")
        let follower = try hub.subscribe(q, since: nil, filter: EventFilter(), follow: true)
        store.publish(CollectionOfOne(.userDeleted(uid: "seen")))
        XCTAssertEqual(follower.read(max: 10).events.compactMap(uid), ["seen"], "a stream of the store still gets its events")
        follower.cancel()

        weak var stored: EventLog?
        do {
            let log = hub.log(p, pinned: true)  // as a store holds it
            stored = log
            log.publish(CollectionOfOne(.userDeleted(uid: "a")))
        }
        // The store is gone: its history stays (a replay of a deleted tenant's stream still shows it) until it ages out.
        XCTAssertNotNil(stored)
        XCTAssertEqual(hub.log(p, pinned: false).retained.compactMap(uid), ["a"])
        XCTAssertTrue(clock.advance(millis: hub.maxAgeMillis + 1))
        XCTAssertEqual(stored?.retained.count, 0)
        hub.prune()
        XCTAssertNil(stored, "without history or a holder it leaves")
        XCTAssertEqual(hub.retainedBytes, store.bytes)
        withExtendedLifetime(store) {}
    }

    // MARK: bounds on history

    /// A long uid: each event keeps 64 bytes of string outside the ring.
    func longUid(_ i: Int) -> String { "user-\(i)-" + String(repeating: "x", count: 24) }

    /// A store's history holds at most `bytesPerStore`: its ring, its strings and the chunks of rendered bytes, whole.
    /// Rendered in both formats an event costs about six times as much, so fewer are kept; the newest always are, and
    /// a live reader that fell behind is told how many it missed, as when the ring overwrites events.
    func testAStoresHistoryIsBoundedByBytes() throws {
        let budget = 16 * 1024
        let hub = EventHub(clock: clock, bytesPerStore: budget)
        let log = hub.log(p, pinned: true)
        let behind = try hub.subscribe(p, since: nil, filter: EventFilter(), follow: true)
        /// Publishes events `r`; the most bytes the history held meanwhile.
        func publish(_ r: Range<Int>) -> Int {
            var most = 0
            for i in r {
                hub.emit(p, .userDeleted(uid: longUid(i)))
                most = max(most, log.bytes)
            }
            return most
        }
        XCTAssertLessThanOrEqual(publish(0..<2000), budget)
        let plain = log.retained
        XCTAssertGreaterThan(plain.count, 50)
        XCTAssertEqual(plain.map(\.id), Array(UInt64(2001 - plain.count)...2000), "the newest, in order")
        XCTAssertEqual(log.bytes, hub.retainedBytes, "the hub's total is the sum of its logs'")
        let missed = behind.read(max: 10_000)
        XCTAssertEqual(missed.dropped, 2000 - plain.count)
        XCTAssertEqual(missed.events.count, plain.count)

        // Followed in both formats: each event is rendered twice as it is published, into chunks counted whole.
        let sse = try hub.subscribe(p, since: nil, filter: EventFilter(), follow: true, format: .sse)
        let jsonl = try hub.subscribe(p, since: nil, filter: EventFilter(), follow: true, format: .jsonl)
        XCTAssertLessThanOrEqual(publish(2000..<4000), budget)
        let rendered = log.retained
        XCTAssertGreaterThan(rendered.count, 10)
        XCTAssertLessThan(rendered.count, plain.count / 3, "rendered bytes count")
        XCTAssertEqual(rendered.last?.id, 4000)
        var out: [UInt8] = []
        let got = sse.read(max: 10_000, format: .sse, into: &out)
        XCTAssertEqual(got.dropped, 2000 - rendered.count)
        // A replay in a followed format copies what was rendered as it was published.
        let replay = try hub.subscribe(p, since: 0, filter: EventFilter(), follow: false, format: .jsonl)
        var bytes: [UInt8] = []
        _ = replay.read(max: 10_000, format: .jsonl, into: &bytes)
        XCTAssertEqual(bytes.split(separator: 0x0A).count, rendered.count, "every retained event, rendered by its follower")
        for s in [behind, sse, jsonl, replay] { s.cancel() }
        XCTAssertLessThanOrEqual(log.bytes, budget)
    }

    /// The stores' histories together hold at most `bytesInAll`: past it the oldest events server-wide go first,
    /// whichever stores they are in, and emptied logs of stores that are gone leave. A replay that had not read them
    /// is told how many it missed.
    func testAllStoresTogetherStayWithinTheGlobalBudgetOldestFirst() throws {
        let all = 64 * 1024
        let hub = EventHub(clock: clock, bytesPerStore: 8 * 1024, bytesInAll: all)
        var most = 0
        var published: UInt64 = 0
        var replay: EventSubscription?
        for t in 0..<200 {
            if t == 1 { replay = try hub.subscribe(StoreKey(projectId: "p", tenantId: "t0"), since: 0, filter: EventFilter(), follow: false) }
            for i in 0..<20 {
                hub.emit(StoreKey(projectId: "p", tenantId: "t\(t)"), .userDeleted(uid: longUid(i)))
                published += 1
                most = max(most, hub.retainedBytes)
            }
        }
        XCTAssertLessThanOrEqual(most, all, "never past the global budget")
        var ids: [UInt64] = []
        var sum = 0
        for t in 0..<200 {
            let log = hub.log(StoreKey(projectId: "p", tenantId: "t\(t)"), pinned: false)
            ids += log.retained.map(\.id)
            sum += log.bytes
        }
        XCTAssertEqual(sum, hub.retainedBytes)
        ids.sort()
        XCTAssertGreaterThan(ids.count, 100)
        XCTAssertEqual(ids, Array((published - UInt64(ids.count) + 1)...published), "the newest events server-wide, the oldest gone first")
        hub.prune()
        XCTAssertLessThan(hub.tableEntries, 100, "the emptied logs of stores nobody holds leave")
        let missed = try XCTUnwrap(replay).read(max: 100)
        XCTAssertEqual(missed.dropped, 20, "the replay had read none of t0's events")
        XCTAssertEqual(missed.events.count, 0)
        XCTAssertEqual(missed.status, .finished)
    }

    /// Publishes from several threads into many stores, with followers, replays and the global bound evicting across
    /// stores meanwhile: every log's count of its bytes and the hub's total agree afterwards, and the total is within
    /// the bound once a publish settles it.
    func testConcurrentPublishersAndEvictionsKeepTheCountsExact() throws {
        let hub = EventHub(clock: clock, bytesPerStore: 8 * 1024, bytesInAll: 64 * 1024)
        let keys = (0..<50).map { StoreKey(projectId: "p", tenantId: "t\($0)") }
        let followers = try keys.prefix(4).map { try hub.subscribe($0, since: 0, filter: EventFilter(), follow: true, format: .sse) }
        let uids = (0..<2000).map(longUid)
        DispatchQueue.concurrentPerform(iterations: 4) { worker in
            for i in 0..<2000 {
                hub.emit(keys[(i * 7 + worker) % keys.count], .userDeleted(uid: uids[i]))
                if i % 100 == 0, let replay = try? hub.subscribe(keys[worker], since: 0, filter: EventFilter(), follow: false, format: .jsonl) {
                    var out: [UInt8] = []
                    let batch = replay.read(max: 50, format: .jsonl, into: &out)
                    var bytes: [UInt8] = [], ends: [Int] = []
                    for e in batch.events { e.render(keys[worker], format: .jsonl, into: &bytes); ends.append(bytes.count) }
                    replay.keep(batch.events, sequence: batch.sequence, format: .jsonl, bytes: bytes, ends: ends)
                    replay.cancel()
                }
                if i % 10 == 0 {
                    var out: [UInt8] = []
                    _ = followers[worker].read(max: 1000, format: .sse, into: &out)
                }
            }
        }
        hub.emit(keys[0], .userDeleted(uid: "last"))
        XCTAssertLessThanOrEqual(hub.retainedBytes, hub.bytesInAll)
        XCTAssertEqual(keys.reduce(0) { $0 + hub.log($1, pinned: false).bytes }, hub.retainedBytes)
        for f in followers { f.cancel() }
        XCTAssertEqual(keys.reduce(0) { $0 + hub.log($1, pinned: false).bytes }, hub.retainedBytes)
    }

    /// Events older than `maxAgeMillis` on the emulator clock leave history, on the next publish, subscription or
    /// sweep (a store nobody writes to gives them back when another store publishes) — but none a connected reader
    /// has not read: a clock advance takes nothing from a stream.
    func testEventsOlderThanTheMaximumAgeLeaveOnTheEmulatorClock() throws {
        let hub = EventHub(clock: clock)
        let maxAge = EventHub.maxAgeMillis
        for i in 0..<3 { hub.emit(p, .userDeleted(uid: "old\(i)")) }
        let reader = try hub.subscribe(p, since: 0, filter: EventFilter(), follow: true)
        XCTAssertTrue(clock.advance(millis: maxAge - 1))
        hub.emit(p, .userDeleted(uid: "new"))
        XCTAssertEqual(hub.log(p, pinned: false).retained.count, 4, "not older than the maximum yet")
        XCTAssertTrue(clock.advance(millis: 2))
        hub.emit(p, .userDeleted(uid: "newer"))
        let read = reader.read(max: 100)
        XCTAssertEqual(read.dropped, 0, "the reader had not read them: they waited for it")
        XCTAssertEqual(read.events.compactMap(uid), ["old0", "old1", "old2", "new", "newer"])
        let log = hub.log(p, pinned: false)
        hub.emit(p, .userDeleted(uid: "newest"))
        XCTAssertEqual(log.oldestId, read.events[3].id, "read, and older than the maximum: gone at the next publish")
        XCTAssertEqual(log.retained.compactMap(uid), ["new", "newer", "newest"])
        let replay = try hub.subscribe(p, since: 0, filter: EventFilter(), follow: false)
        XCTAssertEqual(replay.read(max: 100).events.compactMap(uid), ["new", "newer", "newest"])
        reader.cancel()
        replay.cancel()

        // A store nobody writes to: its events leave when another store publishes after the sweep interval.
        XCTAssertTrue(clock.advance(millis: maxAge + 1))
        let idleBytes = log.bytes
        XCTAssertGreaterThan(idleBytes, 0, "nothing touched it yet")
        hub.emit(q, .userDeleted(uid: "elsewhere"))
        XCTAssertEqual(log.bytes, 0, "swept: no ring, nothing held")
        XCTAssertEqual(log.ringSlots, 0)
        XCTAssertEqual(hub.retainedBytes, hub.log(q, pinned: false).bytes)
    }

    /// An empty log holds nothing; its ring starts at a few slots and grows with the events, and nothing is rendered
    /// (no references, no chunks) while nobody follows: a tenant with a few events costs a few hundred bytes.
    func testHistoryIsAllocatedAsItGrowsAndGivenBack() throws {
        let hub = EventHub(clock: clock)
        let log = hub.log(p, pinned: true)
        XCTAssertEqual(log.bytes, 0)
        XCTAssertEqual(log.ringSlots, 0)
        for i in 0..<3 { hub.emit(p, .userDeleted(uid: "u\(i)")) }
        XCTAssertEqual(log.ringSlots, EventLog.minSlots)
        XCTAssertEqual(log.bytes, EventLog.minSlots * EventLog.slotBytes, "short uids are inline: the ring is all")
        XCTAssertLessThan(log.bytes, 512)
        for i in 3..<100 { hub.emit(p, .userDeleted(uid: longUid(i))) }
        XCTAssertEqual(log.ringSlots, 128)
        XCTAssertEqual(log.chunksMade, 0)
        let s = try hub.subscribe(p, since: 0, filter: EventFilter(), follow: false)
        _ = s.read(max: 1000)
        s.cancel()
        XCTAssertTrue(clock.advance(millis: EventHub.maxAgeMillis + 1))
        XCTAssertEqual(log.retained.count, 0)
        XCTAssertEqual(log.ringSlots, 0)
        XCTAssertEqual(log.bytes, 0)
        XCTAssertEqual(hub.retainedBytes, 0)
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

    // MARK: MFA, other sign-ins, imports, out-of-band codes, the expiry sweep

    /// The `type`s after the first `from` events, and each event's JSON.
    func tail(_ e: Emulator, _ key: StoreKey, from: Int) -> [EmulatorEvent] { Array(events(e, key).dropFirst(from)) }

    func testMFAEnrollmentSignInAndWithdrawEmitTheirEvents() throws {
        let e = makeTestEmulator(seed: 5) { $0.phoneAuth.sessionTtlSeconds = 60 }
        let key = StoreKey(projectId: "p")
        var c = UserChanges()
        c.email = .set("m@example.com")
        c.emailVerified = true
        _ = try e.createUser(key, localId: "m", changes: c)
        let now = e.clock.nowSeconds()
        let identity = TokenIdentity(projectId: "p", tenantId: nil, localId: "m", issuedAt: now, authTime: now, signInProvider: "password")

        // Enrollment with a real (non-fictional) number: the code is in code.sent.
        var mark = events(e, key).count
        let enrollSession = try e.startMFAEnrollment(key, identity: identity, hasEnrollmentInfo: true, phoneNumber: "+15551230000")
        var got = tail(e, key, from: mark)
        XCTAssertEqual(got.map(\.type), ["code.sent"])
        guard case .codeSent("+15551230000", .mfaEnrollment, let sid, false, let code) = got[0].payload else { return XCTFail("\(got)") }
        XCTAssertEqual(sid.text, enrollSession)
        XCTAssertEqual(got[0].json(key)["kind"], "mfaEnrollment")
        XCTAssertEqual(got[0].json(key)["code"]?.stringValue, code)

        mark = events(e, key).count
        XCTAssertThrowsError(try e.finalizeMFAEnrollment(key, identity: identity, sessionInfo: enrollSession, code: code == "000000" ? "111111" : "000000",
                                                         displayName: nil))
        let enrolled = try e.finalizeMFAEnrollment(key, identity: identity, sessionInfo: enrollSession, code: code, displayName: "work")
        let enrollmentId = try XCTUnwrap(enrolled.secondFactorId)
        got = tail(e, key, from: mark)
        XCTAssertEqual(got.map(\.type), ["code.rejected", "code.verified", "mfa.enrolled", "user.updated", "tokens.revoked", "tokens.issued"])
        XCTAssertEqual(got[0].json(key)["reason"], "INVALID_CODE")
        XCTAssertEqual(got[0].json(key)["kind"], "mfaEnrollment")
        XCTAssertNotNil(got[0].json(key)["attemptsLeft"])
        XCTAssertEqual(got[1].json(key)["kind"], "mfaEnrollment")
        XCTAssertEqual(got[2].payload, .mfaEnrolled(uid: "m", mfaEnrollmentId: enrollmentId, phoneNumber: "+15551230000"))
        XCTAssertEqual(got[3].json(key)["fields"], ["validSince", "mfaInfo"])
        XCTAssertEqual(got[5].payload, .tokensIssued(uid: "m", provider: "password", secondFactor: "phone"))

        // Sign-in: the first factor asks for the second; the MFA code goes out and is verified; tokens carry it.
        guard case .mfaRequired(let credential, _) = try e.passFirstFactor(key, localId: "m", signInProvider: "password") else { return XCTFail() }
        mark = events(e, key).count
        let signInSession = try e.startMFASignIn(key, pendingCredential: credential, mfaEnrollmentId: enrollmentId)
        got = tail(e, key, from: mark)
        guard got.count == 1, case .codeSent("+15551230000", .mfaSignIn, let sid2, false, let code2) = got[0].payload else { return XCTFail("\(got)") }
        XCTAssertEqual(sid2.text, signInSession)
        mark = events(e, key).count
        _ = try e.finalizeMFASignIn(key, pendingCredential: credential, sessionInfo: signInSession, code: code2)
        got = tail(e, key, from: mark)
        XCTAssertEqual(got.map(\.type), ["code.verified", "tokens.issued"])
        XCTAssertEqual(got[0].json(key)["kind"], "mfaSignIn")
        XCTAssertEqual(got[1].json(key)["secondFactor"], "phone")
        XCTAssertEqual(got[1].json(key)["provider"], "password")

        // An expired MFA code: session.expired and code.rejected (SESSION_EXPIRED).
        guard case .mfaRequired(let credential2, _) = try e.passFirstFactor(key, localId: "m", signInProvider: "password") else { return XCTFail() }
        let late = try e.startMFASignIn(key, pendingCredential: credential2, mfaEnrollmentId: enrollmentId)
        XCTAssertTrue(e.clock.advance(millis: 61_000))  // the code's 60 s, not the pending credential's 10 minutes
        mark = events(e, key).count
        XCTAssertThrowsError(try e.finalizeMFASignIn(key, pendingCredential: credential2, sessionInfo: late, code: "123456"))
        got = tail(e, key, from: mark)
        XCTAssertEqual(got.map(\.type), ["session.expired", "code.rejected"])
        XCTAssertEqual(got.last?.json(key)["reason"], "SESSION_EXPIRED")
        XCTAssertEqual(got.last?.json(key)["kind"], "mfaSignIn")

        mark = events(e, key).count
        _ = try e.withdrawMFA(key, identity: identity, mfaEnrollmentId: enrollmentId)
        got = tail(e, key, from: mark)
        XCTAssertEqual(got.map(\.type), ["mfa.withdrawn", "user.updated", "tokens.issued"])
        XCTAssertEqual(got[0].payload, .mfaWithdrawn(uid: "m", mfaEnrollmentId: enrollmentId))
        XCTAssertEqual(got[1].json(key)["fields"], ["mfaInfo"])
        XCTAssertNil(got[2].json(key)["secondFactor"])
    }

    func testAFictionalMFANumbersCodeStaysOutOfTheEvent() throws {
        let e = makeTestEmulator(seed: 6)
        let key = StoreKey(projectId: "p")
        var c = UserChanges()
        c.mfaInfo = [MFAEnrollment(mfaEnrollmentId: "enr1", phoneInfo: "+16505554567", displayName: nil, enrolledAt: 1)]
        _ = try e.createUser(key, localId: "m", changes: c)
        guard case .mfaRequired(let credential, _) = try e.passFirstFactor(key, localId: "m", signInProvider: "password") else { return XCTFail() }
        _ = try e.startMFASignIn(key, pendingCredential: credential, mfaEnrollmentId: "enr1")
        let masked = try e.sendMaskedMFACode(key, maskedPhone: "+*******4567")
        let sent = events(e, key).filter { $0.type == "code.sent" }
        XCTAssertEqual(sent.count, 2)
        XCTAssertEqual(sent.map { $0.json(key)["kind"] }, ["mfaSignIn", "mfaSignIn"])
        XCTAssertEqual(sent.map { $0.json(key)["fictional"] }, [true, true])
        XCTAssertEqual(sent.map { $0.json(key)["code"] }, [nil, nil])
        XCTAssertEqual(sent[1].json(key)["sessionInfo"]?.stringValue, masked)
        XCTAssertEqual(sent[1].json(key)["phoneNumber"], "+16505554567", "the masked send is a code for the enrolled number")
    }

    func testCustomTokenPasswordLinkAndSplitSignInsEmitWhatTheyDo() throws {
        let e = makeTestEmulator(seed: 7)
        let key = StoreKey(projectId: "p")
        // Custom token: created, then signed in again.
        _ = try e.completeCustomTokenSignIn(key, grant: CustomTokenGrant(uid: "c1", developerClaims: nil))
        _ = try e.completeCustomTokenSignIn(key, grant: CustomTokenGrant(uid: "c1", developerClaims: nil))
        var got = events(e, key)
        XCTAssertEqual(got.map(\.type), ["user.created", "tokens.issued", "tokens.issued"])
        XCTAssertEqual(got[0].payload, .userCreated(uid: "c1", phoneNumber: nil, email: nil, provider: "custom"))
        XCTAssertEqual(got[1].payload, .tokensIssued(uid: "c1", provider: "custom", secondFactor: nil))

        // Password sign-in.
        var pw = UserChanges()
        pw.email = .set("pw@example.com")
        pw.passwordHash = "hash"
        pw.salt = "salt"
        _ = try e.createUser(key, localId: "pw", changes: pw)
        var mark = events(e, key).count
        guard case .signedIn = try e.signInWithPassword(key, localId: "pw", verifiedHash: "hash") else { return XCTFail() }
        XCTAssertEqual(tail(e, key, from: mark).map(\.payload), [.tokensIssued(uid: "pw", provider: "password", secondFactor: nil)])

        // Linking a number to the signed-in user with an ID token: user.updated (phoneNumber).
        let now = e.clock.nowSeconds()
        let session = try e.sendVerificationCode(key, phoneNumber: "+16505554567")
        mark = events(e, key).count
        _ = try e.signInWithPhoneNumber(key, sessionInfo: session, code: "123456", temporaryProof: nil, phoneNumber: nil,
                                        tokenUser: TokenIdentity(projectId: "p", tenantId: nil, localId: "pw", issuedAt: now, authTime: now,
                                                                 signInProvider: "password"),
                                        operation: nil)
        got = tail(e, key, from: mark)
        XCTAssertEqual(got.map(\.type), ["code.verified", "user.updated", "tokens.issued"])
        XCTAssertEqual(got[1].payload, .userUpdated(uid: "pw", fields: ["phoneNumber"]))

        // The split phone sign-in (a blocking function between the halves) emits what the one transaction does, plus
        // what the function changed.
        let s2 = try e.sendVerificationCode(key, phoneNumber: "+15551234567")
        let code2 = try XCTUnwrap(e.verificationCodes(key, phone: "+15551234567").first?.code)
        mark = events(e, key).count
        var named = BlockingFunctions.Outcome()
        named.displayName = .some("Ada")
        let phone2 = SignInRequest.Phone(sessionInfo: s2, code: code2, temporaryProof: nil, phoneNumber: nil, tokenUser: nil, operation: nil)
        guard case .signedIn(let signedIn) = try e.signIn(key, .phone(phone2), hook: { _ in named }), signedIn.isNewUser else { return XCTFail() }
        let created = signedIn.user
        got = tail(e, key, from: mark)
        XCTAssertEqual(got.map(\.type), ["code.verified", "user.created", "tokens.issued"])
        XCTAssertEqual(got[1].payload, .userCreated(uid: created.localId, phoneNumber: "+15551234567", email: nil, provider: "phone"))
        // The same number again, an existing user whom the function renames.
        let s3 = try e.sendVerificationCode(key, phoneNumber: "+15551234567")
        let code3 = try XCTUnwrap(e.verificationCodes(key, phone: "+15551234567").first?.code)
        mark = events(e, key).count
        let phone3 = SignInRequest.Phone(sessionInfo: s3, code: code3, temporaryProof: nil, phoneNumber: nil, tokenUser: nil, operation: nil)
        named.displayName = .some("Grace")
        _ = try e.signIn(key, .phone(phone3), hook: { _ in named })
        got = tail(e, key, from: mark)
        XCTAssertEqual(got.map(\.type), ["code.verified", "user.updated", "tokens.issued"])
        XCTAssertEqual(got[1].payload, .userUpdated(uid: created.localId, fields: ["displayName"]))

        // The split sign-up: created and signed in; one its function disabled is created (no tokens). The hook runs
        // between the plan's transaction and the commit's: what it sees is the user as planned.
        var anon = UserChanges()
        anon.email = .set("new@example.com")
        anon.passwordHash = "h2"
        var planned = UserRecord(localId: "", createdAt: 0)
        _ = try e.signIn(key, .signUp(.init(changes: anon)), hook: { candidate in
            planned = candidate.user
            mark = self.events(e, key).count
            return BlockingFunctions.Outcome()
        })
        got = tail(e, key, from: mark)
        XCTAssertEqual(got.map(\.payload), [.userCreated(uid: planned.localId, phoneNumber: nil, email: "new@example.com", provider: "password"),
                                             .tokensIssued(uid: planned.localId, provider: "password", secondFactor: nil)])
        var planned2 = UserRecord(localId: "", createdAt: 0)
        var disable = BlockingFunctions.Outcome()
        disable.disabled = true
        XCTAssertThrowsError(try e.signIn(key, .signUp(.init(changes: UserChanges())), hook: { candidate in
            planned2 = candidate.user
            mark = self.events(e, key).count
            return disable
        }))
        XCTAssertEqual(tail(e, key, from: mark).map(\.payload), [.userCreated(uid: planned2.localId, phoneNumber: nil, email: nil, provider: "anonymous")])
    }

    func testOobCodesImportsWipesAndTheExpirySweepEmit() throws {
        let e = makeTestEmulator(seed: 8) { $0.phoneAuth.sessionTtlSeconds = 60 }
        let key = StoreKey(projectId: "p")
        var c = UserChanges()
        c.email = .set("a@example.com")
        _ = try e.createUser(key, localId: "a", changes: c)
        var mark = events(e, key).count
        let oob = try e.createOobCode(key, email: "A@example.com", newEmail: nil, type: .verifyEmail, link: { "http://localhost/\($0)" })
        _ = try e.applyOobCode(key, code: oob.code)
        var got = tail(e, key, from: mark)
        XCTAssertEqual(got.map(\.payload), [.oobSent(email: "a@example.com", requestType: "VERIFY_EMAIL", oobCode: oob.code),
                                             .userUpdated(uid: "a", fields: ["emailVerified"])])

        // batchCreate: one event per user: created (provider admin), or what replacing an existing one changed.
        var named = UserChanges()
        named.displayName = .set("Ada")
        var bad = UserChanges()
        bad.email = .set("not an email")
        mark = events(e, key).count
        let problems = try e.importUsers(key, [(0, "i1", UserChanges()), (1, "a", named), (2, "i2", bad)], allowOverwrite: true)
        XCTAssertEqual(problems.map(\.index), [2])
        got = tail(e, key, from: mark)
        XCTAssertEqual(got.map(\.type), ["user.created", "user.updated"])
        XCTAssertEqual(got[0].json(key)["provider"], "admin")
        XCTAssertEqual(got[1].json(key)["uid"], "a")

        // A wipe emits no event per user (the contract has no type for it).
        mark = events(e, key).count
        try e.wipeAccounts(key)
        XCTAssertEqual(tail(e, key, from: mark).count, 0)

        // The expiry sweep: every swept session is a session.expired.
        let expiring = try e.sendVerificationCode(key, phoneNumber: "+15551230042")
        XCTAssertTrue(e.clock.advance(millis: 61_000))
        mark = events(e, key).count
        try e.transaction(key) { tx throws(AuthError) in
            tx.nextSequence = (tx.nextSequence | 255) + 1  // a sweep turn
            for _ in 0..<SessionTable.shardCount { tx.sweepExpiredSessions(now: e.clock.nowMillis()) }
        }
        got = tail(e, key, from: mark)
        XCTAssertEqual(got.map(\.type), ["session.expired"])
        XCTAssertEqual(got.first?.json(key)["sessionInfo"]?.stringValue, expiring)
        XCTAssertEqual(got.first?.json(key)["phoneNumber"], "+15551230042")
    }
}
