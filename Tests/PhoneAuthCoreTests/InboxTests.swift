import Dispatch
import EmulatorSupport
@testable import PhoneAuthCore
import PhoneAuthTestSupport
import XCTest

/// The code inbox's indexes (by number, by creation order) and its long-poll waiters (issue 11: with 1.1 M pending
/// sessions every inbox read scanned them all under the project lock; waiters were scanned by every send and stayed
/// registered after their client left). Costs are checked by counting visited index entries, never by timing.
final class InboxIndexTests: XCTestCase {
    func session(_ n: Int, phone: String, expires: Int64? = nil, sequence: UInt64? = nil) -> VerificationSession {
        var bytes = [UInt8](repeating: 0, count: 16)
        let v = UInt64(n) &* 0x9E37_79B9_7F4A_7C15 | 1
        for k in 0..<8 { bytes[k] = UInt8(truncatingIfNeeded: v >> UInt64(8 * k)); bytes[8 + k] = UInt8(truncatingIfNeeded: UInt64(n) >> UInt64(8 * k)) }
        return VerificationSession(id: SessionID(bytes: bytes), phoneNumber: phone, code: String(100_000 + n % 900_000), createdAt: 0,
                                   expiresAt: expires, attemptsLeft: 5, fictional: false, kind: .signIn, appSignatureHash: n % 7 == 0 ? "hash\(n)" : nil,
                                   sequence: sequence ?? UInt64(n))
    }

    func visits(_ body: () -> Void) -> Int {
        let before = SessionTable.visitCounter.load(ordering: .relaxed)
        body()
        return SessionTable.visitCounter.load(ordering: .relaxed) - before
    }

    /// Every read agrees with a plain model after random sends, sign-ins, attempts, sweeps and clears.
    func testIndexesMatchAModelUnderRandomOperations() {
        var rng = SplitMix(seed: 3)
        var t = SessionTable()
        var model: [SessionID: VerificationSession] = [:]
        // Seven E.164 numbers (packed keys) and two that are not (String keys).
        let phones = (0..<7).map { "+1555000000\($0)" } + ["+0123456", "+12345678901234567"]
        var n = 0
        var now: Int64 = 0
        func check() {
            let all = model.values.sorted { $0.sequence < $1.sequence }
            XCTAssertEqual(t.count, all.count)
            XCTAssertEqual(t.page(limit: .max).sessions, all)
            for p in phones {
                let mine = all.filter { $0.phoneNumber == p }
                XCTAssertEqual(t.page(phone: p, limit: .max).sessions, mine, p)
                XCTAssertEqual(t.newest(phone: p), mine.last)
                XCTAssertEqual(t.count(phone: p), mine.count)
            }
            // Paging in small pages gives the same sequence.
            var paged: [VerificationSession] = []
            var after: UInt64? = nil
            repeat {
                let page = t.page(after: after, limit: 7)
                paged += page.sessions
                after = page.nextAfter
            } while after != nil
            XCTAssertEqual(paged, all)
        }
        for step in 0..<3000 {
            switch rng.next() % 10 {
            case 0...4:
                let s = session(n, phone: phones[Int(rng.next() % 9)], expires: rng.next() % 2 == 0 ? now + 1 + Int64(rng.next() % 50) : nil)
                n += 1
                t[s.id] = s
                model[s.id] = s
            case 5, 6:
                if let victim = model.keys.randomElement(using: &rng) {
                    t[victim] = nil
                    model[victim] = nil
                }
            case 7:
                if let id = model.keys.randomElement(using: &rng), var s = model[id] {
                    s.attemptsLeft = (s.attemptsLeft ?? 5) - 1
                    t[id] = s
                    model[id] = s
                }
            case 8:
                now += Int64(rng.next() % 10)
                for id in t.sweepNextShard(now: now) { XCTAssertNotNil(model.removeValue(forKey: id)) }
            default:
                if rng.next() % 20 == 0 {
                    t.removeAll()
                    model.removeAll()
                } else {
                    let p = phones[Int(rng.next() % 9)]
                    let gone = t.removeAll(phone: p)
                    XCTAssertEqual(gone, model.values.filter { $0.phoneNumber == p }.sorted { $0.sequence < $1.sequence })
                    for g in gone { model[g.id] = nil }
                }
            }
            if step % 50 == 0 { check() }
        }
        check()
    }

    func testPhoneKeysPackOnlyE164() {
        XCTAssertEqual(PhoneIndex.pack("+16505554567"), 16_505_554_567)
        XCTAssertEqual(PhoneIndex.pack("+999999999999999"), 999_999_999_999_999)
        for odd in ["", "+", "16505554567", "+06505554567", "+1650555456x", "+1234567890123456", "+1 650"] {
            XCTAssertNil(PhoneIndex.pack(odd), odd)
        }
    }

    /// Sessions inserted out of creation order (the journal restores in order, but nothing relies on it) still
    /// read back in creation order.
    func testOutOfOrderInsertsKeepCreationOrder() {
        var t = SessionTable()
        var rng = SplitMix(seed: 5)
        let sessions = (0..<3000).map { session($0, phone: "+1555000000\($0 % 3)") }
        var shuffled = sessions
        shuffled.shuffle(using: &rng)
        for s in shuffled { t[s.id] = s }
        XCTAssertEqual(t.page(limit: .max).sessions, sessions)
        XCTAssertEqual(t.page(phone: "+15550000001", limit: .max).sessions, sessions.filter { $0.phoneNumber == "+15550000001" })
        XCTAssertEqual(t.newest(phone: "+15550000002"), sessions.last { $0.phoneNumber == "+15550000002" })
    }

    /// Out-of-order inserts into full chunks move entries (and split chunks past twice their size): every session is
    /// still found by its id, read back whole, and removed cleanly.
    func testOutOfOrderInsertsIntoFullChunksKeepEveryIdFound() {
        var t = SessionTable()
        var rng = SplitMix(seed: 11)
        let sessions = (0..<20_000).map { session($0, phone: "+1555000000\($0 % 5)") }
        // In order but every 10th held back, then the held-back ones (older than everything) go in.
        for s in sessions where s.sequence % 10 != 0 { t[s.id] = s }
        var late = sessions.filter { $0.sequence % 10 == 0 }
        late.shuffle(using: &rng)
        for s in late { t[s.id] = s }
        XCTAssertEqual(t.page(limit: .max).sessions, sessions)
        for s in sessions { XCTAssertEqual(t[s.id], s) }
        for s in sessions where s.sequence % 3 == 0 { t[s.id] = nil }
        let left = sessions.filter { $0.sequence % 3 != 0 }
        XCTAssertEqual(t.count, left.count)
        XCTAssertEqual(t.page(limit: .max).sessions, left)
        for s in left { XCTAssertEqual(t[s.id], s) }
        XCTAssertEqual(t.page(phone: "+15550000003", limit: .max).sessions, left.filter { $0.phoneNumber == "+15550000003" })
    }

    /// What a session is stored as (digits packed) reads back exactly: codes with leading zeros, codes and numbers
    /// that do not pack (kept aside), every kind, fictional, attempts and expiry.
    func testStoredSessionsReadBackExactly() {
        var t = SessionTable()
        let codes = ["123456", "000000", "012345", "9", "999999999", "1234567890", "", "abc123", "12 34", "٣٤٥"]
        let phones = ["+16505554567", "+1", "+999999999999999", "+0123456", "+12345678901234567", "", "16505554567", "+1650555456x"]
        let kinds: [VerificationSession.Kind] = [.signIn, .mfaEnrollment, .mfaSignIn]
        var all: [VerificationSession] = []
        var n = 0
        for code in codes {
            for phone in phones {
                var bytes = [UInt8](repeating: 0, count: 16)
                bytes[0] = UInt8(n & 0xFF)
                bytes[15] = UInt8(n >> 8)
                var s = VerificationSession(id: SessionID(bytes: bytes), phoneNumber: phone, code: code, createdAt: Int64(n) * 1000 - 5,
                                            expiresAt: n % 3 == 0 ? nil : Int64(n) * 7, attemptsLeft: n % 4 == 0 ? nil : n % 4,
                                            fictional: n % 2 == 0, kind: kinds[n % 3], appSignatureHash: nil, sequence: UInt64(n))
                if n % 5 == 0 { s.owner = "user\(n)" }
                all.append(s)
                t[s.id] = s
                n += 1
            }
        }
        for s in all { XCTAssertEqual(t[s.id], s, "\(s.phoneNumber) \(s.code)") }
        XCTAssertEqual(t.page(limit: .max).sessions, all)
        for p in phones { XCTAssertEqual(t.page(phone: p, limit: .max).sessions, all.filter { $0.phoneNumber == p }, p) }
        // An update keeps what it does not change; a new number or code for the same id replaces it.
        var s = all[3]
        s.attemptsLeft = 0
        t[s.id] = s
        XCTAssertEqual(t[s.id], s)
        let moved = VerificationSession(id: s.id, phoneNumber: "+15550009999", code: "x", createdAt: 1, expiresAt: nil, attemptsLeft: nil,
                                        fictional: false, kind: .signIn, appSignatureHash: "h", sequence: s.sequence)
        t[s.id] = moved
        XCTAssertEqual(t[s.id], moved)
        XCTAssertEqual(t.page(phone: s.phoneNumber, limit: .max).sessions, all.filter { $0.phoneNumber == s.phoneNumber && $0.id != s.id })
        XCTAssertEqual(t.page(phone: "+15550009999", limit: .max).sessions, [moved])
        XCTAssertEqual(t.count, all.count)
        for s in all { t[s.id] = nil }
        XCTAssertEqual(t.count, 0)
        XCTAssertTrue(t.page(limit: .max).sessions.isEmpty)
    }

    /// With 200,000 pending sessions, one number's codes, a page, the newest code and a delete by number visit only
    /// about as many index entries as they return.
    func testReadsVisitOnlyWhatTheyReturn() {
        var t = SessionTable()
        for n in 0..<200_000 { let s = session(n, phone: "+1444\(sevenDigits(n))"); t[s.id] = s }
        for n in 0..<3 { let s = session(300_000 + n, phone: "+15550001111"); t[s.id] = s }
        XCTAssertEqual(t.count, 200_003)
        XCTAssertLessThanOrEqual(visits { XCTAssertEqual(t.page(phone: "+15550001111", limit: .max).sessions.count, 3) }, 3)
        XCTAssertLessThanOrEqual(visits { XCTAssertEqual(t.page(phone: "+19999999999", limit: .max).sessions.count, 0) }, 0)
        XCTAssertLessThanOrEqual(visits { XCTAssertEqual(t.newest(phone: "+15550001111")?.sequence, 300_002) }, 1)
        XCTAssertLessThanOrEqual(visits { XCTAssertEqual(t.page(limit: 1000).sessions.count, 1000) }, 1001)
        let middle = t.page(after: 150_000, limit: 10)
        XCTAssertEqual(middle.sessions.map(\.sequence), Array(150_001...150_010))
        XCTAssertLessThanOrEqual(visits { _ = t.page(after: 150_000, limit: 10) }, 11)
        XCTAssertLessThanOrEqual(visits { XCTAssertEqual(t.removeAll(phone: "+15550001111").count, 3) }, 3)

        // After most sessions are consumed, stale index entries are compacted: reads stay proportional to results.
        for n in 0..<200_000 where n % 100 != 0 { t[session(n, phone: "+1444\(sevenDigits(n))").id] = nil }
        XCTAssertEqual(t.count, 2000)
        let all = visits { XCTAssertEqual(t.page(limit: .max).sessions.count, 2000) }
        XCTAssertLessThanOrEqual(all, 2000 * 2 + 64 * 50, "visited \(all) entries for 2000 sessions")
    }

    /// One number with many pending codes (the bench sends a million to the fictional number): consuming them one
    /// by one stays linear overall (lazy removal with compaction), and the newest is found at once.
    func testManyCodesForOneNumberStayLinear() {
        var t = SessionTable()
        let sessions = (0..<50_000).map { session($0, phone: "+16505554567") }
        for s in sessions { t[s.id] = s }
        let work = visits { for s in sessions.prefix(49_990) { t[s.id] = nil } }
        // Compactions visit each entry a bounded number of times (removing from the array each time: ~1.25 billion).
        XCTAssertLessThanOrEqual(work, 50_000 * 4, "removal visited \(work) index entries")
        XCTAssertLessThanOrEqual(visits { XCTAssertEqual(t.page(phone: "+16505554567", limit: .max).sessions.count, 10) }, 40)
        XCTAssertLessThanOrEqual(visits { XCTAssertEqual(t.newest(phone: "+16505554567")?.sequence, 49_999) }, 1)
    }
}

/// Long-poll waiters: per number, capped per project, gone as soon as they finish or are cancelled.
final class InboxWaiterTests: XCTestCase {
    let key = StoreKey(projectId: "p")
    var emulator: Emulator!

    override func setUp() {
        emulator = makeTestEmulator(clock: EmulatorClock(fixedAtMillis: 1_800_000_000_000), seed: 9)
    }

    func testASendFiresOnlyItsOwnNumbersWaiters() throws {
        let fired = Locked<[String]>([])
        var waiters: [CodeWaiter] = []
        for p in ["+15550000001", "+15550000002", "+15550000002"] {
            let w = try emulator.waitForCode(key, phone: p, timeoutSeconds: 60) { s in fired.withLock { $0.append(s?.phoneNumber ?? "timeout") } }
            waiters.append(try XCTUnwrap(w))
        }
        XCTAssertEqual(emulator.pendingWaiterCount, 3)
        _ = try emulator.sendVerificationCode(key, phoneNumber: "+15550000002")
        XCTAssertEqual(fired.withLock { $0 }, ["+15550000002", "+15550000002"])
        XCTAssertEqual(emulator.pendingWaiterCount, 1)
        XCTAssertTrue(waiters[1].isFinished && waiters[2].isFinished && !waiters[0].isFinished)
        waiters[0].cancel()
        waiters[0].cancel()
        XCTAssertEqual(emulator.pendingWaiterCount, 0)
        _ = try emulator.sendVerificationCode(key, phoneNumber: "+15550000001")
        XCTAssertEqual(fired.withLock { $0 }.count, 2, "a cancelled waiter is never answered")
        XCTAssertEqual(emulator.store(key).read { $0.waiters.count }, 0)
    }

    func testAPendingCodeAnswersAtOnceWithoutRegistering() throws {
        _ = try emulator.sendVerificationCode(key, phoneNumber: "+15550000003")
        let got = Locked<VerificationSession?>(nil)
        let w = try emulator.waitForCode(key, phone: "+15550000003", timeoutSeconds: 60) { s in got.withLock { $0 = s } }
        XCTAssertNil(w)
        XCTAssertEqual(got.withLock { $0 }?.phoneNumber, "+15550000003")
        XCTAssertEqual(emulator.pendingWaiterCount, 0)
    }

    func testWaitersAreCappedPerProject() throws {
        var waiters: [CodeWaiter] = []
        for n in 0..<Emulator.maxWaitersPerStore {
            waiters.append(try XCTUnwrap(try emulator.waitForCode(key, phone: "+1555\(sevenDigits(n))", timeoutSeconds: 300) { _ in }))
        }
        XCTAssertThrowsError(try emulator.waitForCode(key, phone: "+15559999999", timeoutSeconds: 300) { _ in }) { e in
            let err = e as? AuthError
            XCTAssertEqual(err?.code, .resourceExhausted)
        }
        // Another project has its own allowance.
        let other = try emulator.waitForCode(StoreKey(projectId: "q"), phone: "+15559999999", timeoutSeconds: 300) { _ in }
        XCTAssertNotNil(other)
        other?.cancel()
        for w in waiters { w.cancel() }
        XCTAssertEqual(emulator.pendingWaiterCount, 0)
        XCTAssertEqual(emulator.store(key).read { $0.waiterCount }, 0)
        XCTAssertNotNil(try emulator.waitForCode(key, phone: "+15559999999", timeoutSeconds: 300) { _ in }, "room again after cancelling")
    }

    func testTimeoutAnswersNilAndUnregisters() throws {
        let done = expectation(description: "timed out")
        let w = try emulator.waitForCode(key, phone: "+15550000004", timeoutSeconds: 0.05) { s in
            XCTAssertNil(s)
            done.fulfill()
        }
        XCTAssertNotNil(w)
        wait(for: [done], timeout: 5)
        XCTAssertEqual(emulator.pendingWaiterCount, 0)
        XCTAssertEqual(emulator.store(key).read { $0.waiters.count }, 0)
    }

    /// The iOS SDK's masked MFA send (`+*******0001`) is a code for the enrolled number of the pending sign-in it
    /// stands for: it answers that number's long polls, not another number's, not even one of the same masked form.
    func testAMaskedMFASendIsACodeForTheEnrolledNumberItStandsFor() throws {
        var c = UserChanges()
        c.mfaInfo = [MFAEnrollment(mfaEnrollmentId: "e1", phoneInfo: "+15550000001", displayName: nil, enrolledAt: 1)]
        _ = try emulator.createUser(key, localId: "m", changes: c)
        XCTAssertThrowsError(try emulator.sendMaskedMFACode(key, maskedPhone: "+*******0001"), "no pending sign-in yet") { e in
            XCTAssertEqual((e as? AuthError)?.code, .invalidPhoneNumber)
        }
        guard case .mfaRequired = try emulator.passFirstFactor(key, localId: "m", signInProvider: "password") else { return XCTFail() }
        let fired = Locked<[String]>([])
        let waiting = try XCTUnwrap(try emulator.waitForCode(key, phone: "+15550000001", timeoutSeconds: 60) { s in
            fired.withLock { $0.append(s?.sessionInfo ?? "timeout") }
        })
        let sameMask = try XCTUnwrap(try emulator.waitForCode(key, phone: "+16660000001", timeoutSeconds: 60) { _ in
            fired.withLock { $0.append("same mask") }
        })
        let masked = try emulator.sendMaskedMFACode(key, maskedPhone: "+*******0001")
        XCTAssertEqual(fired.withLock { $0 }, [masked])
        XCTAssertTrue(waiting.isFinished && !sameMask.isFinished)
        let session = try XCTUnwrap(emulator.verificationCodes(key, phone: "+15550000001").first)
        XCTAssertEqual(session.sessionInfo, masked)
        XCTAssertEqual(session.kind, .mfaSignIn)
        XCTAssertEqual(session.owner, "m")
        XCTAssertTrue(emulator.verificationCodes(key, phone: "+*******0001").isEmpty, "nothing is stored under the mask")
        sameMask.cancel()
        XCTAssertEqual(emulator.pendingWaiterCount, 0)
    }

    /// A waiter cancelled before its cancel hook is set (its client left while it was being registered) runs the hook
    /// when it is set, so it does not stay registered; one set first runs at the cancel, once.
    func testACancelHookSetAfterTheCancelStillRuns() {
        let runs = Locked(0)
        let early = CodeWaiter(phone: "+15550000009") { _ in }
        early.cancel()
        early.setCancelHook { runs.withLock { $0 += 1 } }
        XCTAssertEqual(runs.withLock { $0 }, 1)
        let normal = CodeWaiter(phone: "+15550000009") { _ in }
        normal.setCancelHook { runs.withLock { $0 += 10 } }
        normal.cancel()
        normal.cancel()
        XCTAssertEqual(runs.withLock { $0 }, 11)
        let fired = CodeWaiter(phone: "+15550000009") { _ in }
        fired.setCancelHook { runs.withLock { $0 += 100 } }
        XCTAssertTrue(fired.fire(nil))
        fired.cancel()
        XCTAssertEqual(runs.withLock { $0 }, 11, "a fired waiter is not cancelled")
    }

    /// Sends and cancels racing from many threads leave no waiter behind and answer each waiter at most once.
    func testConcurrentSendsAndCancelsLeaveNothingBehind() {
        let answered = Locked(0)
        let emulator = self.emulator!, key = self.key
        DispatchQueue.concurrentPerform(iterations: 8) { t in
            for i in 0..<200 {
                let phone = "+1555\(sevenDigits(t * 1000 + i % 10))"
                let w = try? emulator.waitForCode(key, phone: phone, timeoutSeconds: 300) { _ in answered.withLock { $0 += 1 } }
                if i % 2 == 0 { _ = try? emulator.sendVerificationCode(key, phoneNumber: phone) }
                w?.cancel()
                do { try emulator.clearVerificationCodes(key, phone: phone) } catch { XCTFail("\(error)") }
            }
        }
        XCTAssertEqual(emulator.pendingWaiterCount, 0)
        XCTAssertEqual(emulator.store(key).read { $0.waiterCount }, 0)
        XCTAssertLessThanOrEqual(answered.withLock { $0 }, 8 * 100)
    }
}

/// Seven decimal digits, zero-padded.
func sevenDigits(_ n: Int) -> String {
    let digits = n.description
    return String(repeating: "0", count: max(0, 7 - digits.utf8.count)) + digits
}
