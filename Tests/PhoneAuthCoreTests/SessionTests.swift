import EmulatorSupport
@testable import PhoneAuthCore
import PhoneAuthTestSupport
import XCTest

/// Verification sessions with a manual clock: single use, attempts, expiry, fictional numbers.
final class SessionTests: XCTestCase {
    let key = StoreKey(projectId: "p")
    var clock: EmulatorClock!
    var emulator: Emulator!

    override func setUp() {
        clock = EmulatorClock(fixedAtMillis: 1_800_000_000_000)
        emulator = makeTestEmulator(clock: clock, seed: 7) { config in
            config.phoneAuth.maxCodeAttempts = 3
            config.phoneAuth.sessionTtlSeconds = 600
        }
    }

    func signIn(_ session: String, _ code: String, operation: String? = nil) throws -> PhoneSignInOutcome {
        try emulator.signInWithPhoneNumber(key, sessionInfo: session, code: code, temporaryProof: nil, phoneNumber: nil, tokenUser: nil, operation: operation)
    }

    func code(for session: String) -> String { emulator.verificationCodes(key, phone: nil).first { $0.sessionInfo == session }!.code }

    /// A rollback re-inserts a consumed session while its lazily removed index entries are still there (other sessions
    /// of its chunk and of its number are pending): it is listed once, not twice (TransactionFailureTests found it when
    /// an MFA finalize's commit failed).
    func testASessionRemovedThenRestoredIsIndexedOnce() throws {
        var table = SessionTable()
        func session(_ n: UInt8, _ phone: String) -> VerificationSession {
            VerificationSession(id: SessionID(bytes: Array(repeating: n, count: 16)), phoneNumber: phone, code: "1", createdAt: 0, expiresAt: nil,
                                attemptsLeft: nil, fictional: false, kind: .signIn, appSignatureHash: nil, sequence: UInt64(n))
        }
        let all = (1...4).map { session($0, "+15550001000") } + [session(5, "+15550002000")]
        for s in all { table[s.id] = s }
        for restored in [all[1], all[3], all[4]] {  // the middle of the list, the number's newest, the table's newest
            table[restored.id] = nil
            table[restored.id] = restored
            XCTAssertEqual(table.page(limit: 100).sessions.map(\.sequence), [1, 2, 3, 4, 5])
            XCTAssertEqual(table.page(phone: "+15550001000", limit: 100).sessions.map(\.sequence), [1, 2, 3, 4])
            XCTAssertEqual(table.count(phone: "+15550001000"), 4)
            XCTAssertEqual(table.count, 5)
        }
        // Removing them all again leaves nothing behind.
        for s in all { table[s.id] = nil }
        XCTAssertTrue(table.page(limit: 100).sessions.isEmpty)
        XCTAssertNil(table.newest(phone: "+15550001000"))
    }

    /// `remove` (one lookup, what a consumed code does) leaves the table as setting the session to nil does: counts,
    /// the number's list, the owner and app-hash side tables; false for a session that is not there.
    func testRemoveIsSettingToNil() {
        func session(_ n: UInt8, sideTables: Bool = true) -> VerificationSession {
            var s = VerificationSession(id: SessionID(bytes: Array(repeating: n, count: 16)), phoneNumber: "+15550001000", code: "1", createdAt: 0,
                                        expiresAt: nil, attemptsLeft: nil, fictional: false, kind: .signIn,
                                        appSignatureHash: n == 2 && sideTables ? "hash" : nil, sequence: UInt64(n))
            if n == 3 && sideTables { s.owner = "uid" }
            return s
        }
        var removed = SessionTable(), niled = SessionTable()
        for n in UInt8(1)...4 { removed[session(n).id] = session(n); niled[session(n).id] = session(n) }
        for n in UInt8(2)...3 {
            XCTAssertTrue(removed.remove(session(n).id))
            niled[session(n).id] = nil
        }
        XCTAssertFalse(removed.remove(session(2).id), "already gone")
        for t in [removed, niled] {
            XCTAssertEqual(t.count, 2)
            XCTAssertEqual(t.count(phone: "+15550001000"), 2)
            XCTAssertEqual(t.page(phone: "+15550001000", limit: 10).sessions.map(\.sequence), [1, 4])
            XCTAssertNil(t[session(2).id])
            XCTAssertFalse(t.contains(session(3).id))
        }
        // Put back without an owner or a hash: nothing of the removed ones' side tables comes back with them.
        let plain2 = session(2, sideTables: false), plain3 = session(3, sideTables: false)
        removed[plain2.id] = plain2
        removed[plain3.id] = plain3
        XCTAssertNil(removed[plain2.id]?.appSignatureHash)
        XCTAssertNil(removed[plain3.id]?.owner)
    }

    func testFictionalNumberUsesPresetCodeAndIsSingleUse() throws {
        let s = try emulator.sendVerificationCode(key, phoneNumber: "+1 650-555-4567")
        XCTAssertEqual(code(for: s), "123456")
        XCTAssertTrue(emulator.verificationCodes(key, phone: "+16505554567")[0].fictional)
        XCTAssertThrowsError(try signIn(s, "654321")) { XCTAssertEqual(($0 as? AuthError)?.code, .invalidCode) }
        guard case .signedIn(let user, let isNew, _, _) = try signIn(s, "123456") else { return XCTFail() }
        XCTAssertTrue(isNew)
        XCTAssertEqual(user.phoneNumber, "+16505554567")
        XCTAssertEqual(user.createdAt, 1_800_000_000_000)
        XCTAssertThrowsError(try signIn(s, "123456")) { XCTAssertEqual(($0 as? AuthError)?.code, .invalidSessionInfo) }
        let s2 = try emulator.sendVerificationCode(key, phoneNumber: "+16505554567")
        guard case .signedIn(let again, let isNew2, _, _) = try signIn(s2, "123456") else { return XCTFail() }
        XCTAssertFalse(isNew2)
        XCTAssertEqual(again.localId, user.localId)
    }

    func testRandomCodesAreDigitsOfConfiguredLength() throws {
        _ = try emulator.patchConfig(key, ["phoneAuth": ["codeLength": 8]])
        let s = try emulator.sendVerificationCode(key, phoneNumber: "+15551234567")
        let c = code(for: s)
        XCTAssertEqual(c.count, 8)
        XCTAssertTrue(c.allSatisfy(\.isNumber))
        let entry = emulator.verificationCodes(key, phone: nil)[0]
        XCTAssertFalse(entry.fictional)
        XCTAssertEqual(entry.message, "\(c) is your verification code.")
    }

    func testAttemptsRunOutThenSessionIsGone() throws {
        let s = try emulator.sendVerificationCode(key, phoneNumber: "+15551234567")
        let right = code(for: s)
        for left in [2, 1, 0] {
            XCTAssertThrowsError(try signIn(s, "x")) { XCTAssertEqual(($0 as? AuthError)?.code, .invalidCode) }
            XCTAssertEqual(emulator.verificationCodes(key, phone: nil).first?.attemptsLeft, Int32(left))
        }
        XCTAssertThrowsError(try signIn(s, right)) { XCTAssertEqual(($0 as? AuthError)?.code, .tooManyAttemptsTryLater) }
        XCTAssertThrowsError(try signIn(s, right)) { XCTAssertEqual(($0 as? AuthError)?.code, .invalidSessionInfo) }
    }

    func testSessionExpiresOnTheEmulatorClock() throws {
        let s = try emulator.sendVerificationCode(key, phoneNumber: "+16505554567")
        clock.advance(millis: 599_999)
        let s2 = try emulator.sendVerificationCode(key, phoneNumber: "+16505554567")
        clock.advance(millis: 1)
        XCTAssertThrowsError(try signIn(s, "123456")) { XCTAssertEqual(($0 as? AuthError)?.code, .sessionExpired) }
        XCTAssertThrowsError(try signIn(s, "123456")) { XCTAssertEqual(($0 as? AuthError)?.code, .invalidSessionInfo) }
        XCTAssertNoThrow(try signIn(s2, "123456"))
    }

    func testZeroMeansNoLimit() throws {
        _ = try emulator.patchConfig(key, ["phoneAuth": ["maxCodeAttempts": 0, "sessionTtlSeconds": 0]])
        let s = try emulator.sendVerificationCode(key, phoneNumber: "+16505554567")
        for _ in 0..<20 { XCTAssertThrowsError(try signIn(s, "0")) }
        clock.advance(millis: 100 * 86_400_000)
        XCTAssertNoThrow(try signIn(s, "123456"))
    }

    func testReauthForUnknownNumberIsUserNotFound() throws {
        let s = try emulator.sendVerificationCode(key, phoneNumber: "+15550001111")
        XCTAssertThrowsError(try signIn(s, code(for: s), operation: "REAUTH")) { XCTAssertEqual(($0 as? AuthError)?.code, .userNotFound) }
    }

    func testMissingFields() {
        XCTAssertThrowsError(try signIn("", "1")) { XCTAssertEqual(($0 as? AuthError)?.code, .missingSessionInfo) }
        XCTAssertThrowsError(try signIn("s", "")) { XCTAssertEqual(($0 as? AuthError)?.code, .missingCode) }
    }

    func testDisabledUserCannotSignIn() throws {
        let s = try emulator.sendVerificationCode(key, phoneNumber: "+16505554567")
        guard case .signedIn(var user, _, _, _) = try signIn(s, "123456") else { return XCTFail() }
        user.disabled = true
        try emulator.testSave(user, in: key)
        let s2 = try emulator.sendVerificationCode(key, phoneNumber: "+16505554567")
        XCTAssertThrowsError(try signIn(s2, "123456")) { XCTAssertEqual(($0 as? AuthError)?.code, .userDisabled) }
    }

    func testRefreshTokensFollowRevocationAndDeletion() throws {
        let s = try emulator.sendVerificationCode(key, phoneNumber: "+16505554567")
        guard case .signedIn(var user, _, _, _) = try signIn(s, "123456") else { return XCTFail() }
        let token = try emulator.issueRefreshToken(key, localId: user.localId, authTime: clock.nowSeconds(), signInProvider: "phone")
        XCTAssertEqual(try emulator.redeemRefreshToken(token).0.localId, user.localId)
        clock.advance(millis: 5000)
        user.validSince = clock.nowSeconds()
        try emulator.testSave(user, in: key)
        XCTAssertThrowsError(try emulator.redeemRefreshToken(token)) { XCTAssertEqual(($0 as? AuthError)?.code, .tokenExpired) }
        let fresh = try emulator.issueRefreshToken(key, localId: user.localId, authTime: clock.nowSeconds(), signInProvider: "phone")
        XCTAssertNoThrow(try emulator.redeemRefreshToken(fresh))
        try emulator.wipeAccounts(key)
        XCTAssertThrowsError(try emulator.redeemRefreshToken(fresh)) { XCTAssertEqual(($0 as? AuthError)?.code, .invalidRefreshToken) }
        XCTAssertThrowsError(try emulator.redeemRefreshToken("nope")) { XCTAssertEqual(($0 as? AuthError)?.code, .invalidRefreshToken) }
    }

    /// Refresh tokens sort in issue order (a journal appends them to its B-trees) and still carry 48 random bytes.
    func testRefreshTokensSortInIssueOrderAndStayUnguessable() throws {
        var tokens: [String] = []
        for i in 0..<300 {
            tokens.append(try emulator.issueRefreshToken(key, localId: "u\(i % 7)", authTime: clock.nowSeconds(), signInProvider: "phone"))
        }
        // Byte order: what SQLite's BINARY collation uses for TEXT keys.
        XCTAssertEqual(tokens, tokens.sorted(by: { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }))
        XCTAssertEqual(Set(tokens).count, tokens.count)
        for t in tokens {
            XCTAssertTrue(t.hasPrefix("AMf-"))
            XCTAssertEqual(t.utf8.count, 4 + 11 + 64)  // prefix, issue sequence, base64url of 48 random bytes
        }
        // The random parts differ even between consecutive tokens.
        XCTAssertEqual(Set(tokens.map { $0.dropFirst(15) }).count, tokens.count)
        // The sequence's 11 characters order as the numbers do, across digit boundaries.
        let ns: [UInt64] = [0, 1, 63, 64, 4095, 4096, 1_796_000_000_000_000, UInt64.max - 1, UInt64.max]
        let encoded = ns.map(Emulator.sortable)
        XCTAssertEqual(encoded, encoded.sorted(by: { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }))
        XCTAssertEqual(Set(encoded).count, ns.count)
        // A token is written into one buffer: the same text as its three parts joined.
        for (n, bytes) in zip(ns, [[], [0], [0xFF, 0x00, 0x7F], Array(0..<48), Array(repeating: 0xFB, count: 48)] as [[UInt8]]) {
            XCTAssertEqual(Emulator.refreshTokenText(sequence: n, random: bytes), "AMf-" + Emulator.sortable(n) + Base64URL.encode(bytes))
        }
    }

    func testScenarioNumbers() throws {
        _ = try emulator.patchConfig(key, ["phoneAuth": ["scenarioNumbers": ["+15005550006": ["onSend": "QUOTA_EXCEEDED"], "+15005550007": ["onSignIn": "SESSION_EXPIRED"]]]])
        XCTAssertThrowsError(try emulator.sendVerificationCode(key, phoneNumber: "+15005550006")) { XCTAssertEqual(($0 as? AuthError)?.code, .quotaExceeded) }
        let s = try emulator.sendVerificationCode(key, phoneNumber: "+15005550007")
        XCTAssertThrowsError(try signIn(s, code(for: s))) { XCTAssertEqual(($0 as? AuthError)?.code, .sessionExpired) }
    }

    func testProjectsAndTenantsAreIsolated() throws {
        let other = StoreKey(projectId: "q")
        let tenant = StoreKey(projectId: "p", tenantId: "t1")
        _ = try emulator.sendVerificationCode(key, phoneNumber: "+15551234567")
        XCTAssertEqual(emulator.verificationCodes(other, phone: nil).count, 0)
        XCTAssertEqual(emulator.verificationCodes(tenant, phone: nil).count, 0)
        XCTAssertEqual(emulator.config(tenant).testPhoneNumbers, ["+16505554567": "123456"], "a tenant starts from its project's config")
        XCTAssertEqual(emulator.config(other).testPhoneNumbers, [:])
    }

    func testRandomHelpers() {
        let r = SystemRandom()
        XCTAssertNotEqual(r.token(), r.token())
        XCTAssertEqual(r.userID().count, 28)
        XCTAssertTrue(constantTimeEquals("123456", "123456"))
        XCTAssertFalse(constantTimeEquals("123456", "123457"))
        XCTAssertFalse(constantTimeEquals("123456", "1234567"))
        // Digits are uniform enough: every digit shows up in 2,000 draws.
        XCTAssertEqual(Set(SeededRandom(seed: 1).digits(2000)).count, 10)
    }
}

final class SessionTableTests: XCTestCase {
    func session(_ n: UInt8, expires: Int64?) -> VerificationSession {
        VerificationSession(id: SessionID(bytes: [UInt8](repeating: n, count: 15) + [n &+ 1]), phoneNumber: "+15550000000", code: "123456",
                            createdAt: 0, expiresAt: expires, attemptsLeft: 5, fictional: false, kind: .signIn, appSignatureHash: nil, sequence: UInt64(n))
    }

    func testIdsRoundTripThroughText() {
        let s = session(7, expires: nil)
        XCTAssertEqual(s.sessionInfo.count, 22)
        XCTAssertEqual(SessionID(s.sessionInfo), s.id)
        XCTAssertNil(SessionID("totally-invalid"))
        XCTAssertNil(SessionID(String(repeating: "A", count: 23)))
        // Every id spelled canonically parses back to itself; the other spellings the base64 decoder would take (the
        // standard alphabet, nonzero trailing bits, padding, other lengths) are not ids.
        var x: UInt64 = 0x2545_F491_4F6C_DD1D
        for _ in 0..<2000 {
            let bytes = (0..<16).map { _ -> UInt8 in
                x ^= x << 13; x ^= x >> 7; x ^= x << 17
                return UInt8(truncatingIfNeeded: x)
            }
            let id = SessionID(bytes: bytes)
            XCTAssertEqual(id.text, Base64URL.encode(bytes))
            XCTAssertEqual(SessionID(id.text), id)
            XCTAssertEqual(SessionID(id.text)?.bytes, bytes)
            var appended: [UInt8] = []
            id.appendText(to: &appended)
            XCTAssertEqual(String(decoding: appended, as: UTF8.self), id.text)
        }
        let canonical = SessionID(bytes: Array(0..<16)).text  // AAECAwQFBgcICQoLDA0ODw
        XCTAssertNotNil(SessionID(canonical))
        XCTAssertNil(SessionID(String(canonical.dropLast()) + "x"), "trailing bits set: the same bytes, another spelling")
        XCTAssertNil(SessionID(String(canonical.dropLast()) + "="))
        XCTAssertNil(SessionID("+" + canonical.dropFirst()), "the standard alphabet")
        XCTAssertNil(SessionID("/" + canonical.dropFirst()))
        XCTAssertNil(SessionID(canonical + "=="))
        XCTAssertNil(SessionID(String(canonical.dropLast())))
        XCTAssertNil(SessionID(String(canonical.dropLast()) + "é"))
        XCTAssertEqual(SessionID("_" + canonical.dropFirst())?.bytes.first, 0xFC, "the URL-safe alphabet's 63")
    }

    func testSweepRemovesOnlyExpiredAndCompacts() {
        var t = SessionTable()
        for n in 0..<200 { let s = session(UInt8(n), expires: n % 2 == 0 ? 1000 : nil); t[s.id] = s }
        XCTAssertEqual(t.count, 200)
        var removed = 0
        for _ in 0..<64 { removed += t.sweepNextShard(now: 999).count }
        XCTAssertEqual(removed, 0)
        for _ in 0..<64 { removed += t.sweepNextShard(now: 1000).count }
        XCTAssertEqual(removed, 100)
        XCTAssertEqual(t.count, 100)
        XCTAssertTrue(t.values.allSatisfy { $0.expiresAt == nil })
        XCTAssertEqual(t.remove { _ in true }.count, 100)
        XCTAssertEqual(t.count, 0)
    }
}
