import EmulatorSupport
@testable import PhoneAuthCore
import PhoneAuthTestSupport
import XCTest

/// Issue 11: client-driven time and state stay bounded — the clock cannot overflow, credentials and proofs expire and
/// are capped, and deleting a user visits only that user's refresh tokens.
final class BoundsTests: XCTestCase {
    let key = StoreKey(projectId: "p")
    var clock: EmulatorClock!
    var emulator: Emulator!

    override func setUp() {
        clock = EmulatorClock(fixedAtMillis: 1_800_000_000_000)
        emulator = makeTestEmulator(clock: clock, seed: 11)
    }

    func code(_ f: () throws -> Any) -> String? {
        do { _ = try f(); return nil } catch let e as AuthError { return e.description } catch { return "\(error)" }
    }

    // MARK: clock

    func testRepeatedAdvancesStopAtTheOffsetBoundInsteadOfOverflowing() {
        var accepted = 0
        for _ in 0..<1000 where clock.advance(millis: EmulatorClock.maxAdvanceMillis) { accepted += 1 }
        XCTAssertEqual(accepted, 10, "ten advances of ten years reach the hundred-year bound")
        XCTAssertEqual(clock.offsetMillis, EmulatorClock.maxOffsetMillis)
        XCTAssertFalse(clock.advance(millis: 1))
        XCTAssertFalse(clock.advance(millis: -1))
        XCTAssertFalse(clock.advance(millis: Int64.max))
        XCTAssertEqual(clock.nowMillis(), 1_800_000_000_000 + EmulatorClock.maxOffsetMillis)
        clock.reset()
        XCTAssertTrue(clock.advance(millis: 1))
    }

    func testReadsSaturateNearTheEndOfTime() {
        let c = EmulatorClock(fixedAtMillis: Int64.max - 5)
        XCTAssertTrue(c.advance(millis: 1000))
        XCTAssertEqual(c.nowMillis(), Int64.max)
        XCTAssertEqual(c.nowSeconds(), Int64.max / 1000)
    }

    // MARK: ExpiringTable

    func testExpiringTableEvictsTheOldestAndRefusesExpiredEntries() {
        var t = ExpiringTable<Int>(capacity: 3)
        for i in 0..<5 { t.insert("k\(i)", i, expiresAt: 1000 + Int64(i), now: 0) }
        XCTAssertEqual(t.count, 3)
        XCTAssertNil(t.peek("k0", now: 0))
        XCTAssertNil(t.peek("k1", now: 0))
        XCTAssertEqual(t.values(now: 0), [2, 3, 4])
        XCTAssertNil(t.peek("k2", now: 1002), "expired at its deadline")
        XCTAssertEqual(t.peek("k4", now: 1002), 4)
        XCTAssertEqual(t.take("k3", now: 1002), 3)
        XCTAssertNil(t.take("k3", now: 1002), "single use")
        t.insert("k9", 9, expiresAt: 5000, now: 1004)
        XCTAssertEqual(t.count, 1, "an insert sweeps what expired")
        // Re-inserting a key replaces it; its old queue item must not evict the new value.
        t.insert("k9", 10, expiresAt: 6000, now: 1004)
        t.insert("a", 1, expiresAt: 6000, now: 1004)
        t.insert("b", 2, expiresAt: 6000, now: 1004)
        XCTAssertEqual(t.values(now: 1004), [10, 1, 2])
    }

    func testExpiringTableQueueStaysBoundedUnderChurn() {
        var t = ExpiringTable<Int>(capacity: 8)
        // One long-lived entry at the front, and a million inserted-and-taken credentials behind it.
        t.insert("front", 0, expiresAt: Int64.max, now: 0)
        var maxQueue = 0
        for i in 0..<100_000 {
            t.insert("c\(i)", i, expiresAt: Int64.max, now: 0)
            _ = t.take("c\(i)", now: 0)
            maxQueue = max(maxQueue, t.queueLength)
        }
        XCTAssertEqual(t.count, 1)
        XCTAssertLessThanOrEqual(maxQueue, 2 * 8 + 34, "stale queue items are compacted away")
        XCTAssertEqual(t.peek("front", now: 0), 0)
    }

    // MARK: credentials

    func testMintedCredentialsAreCappedAndExpire() throws {
        _ = try emulator.patchConfig(key, ["phoneAuth": ["appVerification": "ENFORCE"]])
        var tokens: [String] = []
        for _ in 0..<(CredentialState.maxMinted + 44) { tokens.append(emulator.mintAppCredential(key, type: .recaptcha).token) }
        XCTAssertEqual(emulator.store(key).read { $0.credentials.minted.count }, CredentialState.maxMinted)
        var oldest = AppCredentials()
        oldest.recaptchaToken = tokens[0]
        XCTAssertEqual(code { try self.emulator.sendVerificationCode(self.key, phoneNumber: "+15551234567", credentials: oldest) },
                       "CAPTCHA_CHECK_FAILED : Recaptcha verification failed - MALFORMED", "the oldest was evicted")
        var newest = AppCredentials()
        newest.recaptchaToken = tokens.last
        XCTAssertNil(code { try self.emulator.sendVerificationCode(self.key, phoneNumber: "+15551234567", credentials: newest) })

        var late = AppCredentials()
        late.recaptchaToken = tokens[tokens.count - 2]
        clock.advance(millis: Emulator.credentialLifetimeMillis)
        XCTAssertEqual(code { try self.emulator.sendVerificationCode(self.key, phoneNumber: "+15551234567", credentials: late) },
                       "CAPTCHA_CHECK_FAILED : Recaptcha verification failed - MALFORMED", "expired after two minutes")
        _ = emulator.mintAppCredential(key, type: .playIntegrity)
        XCTAssertEqual(emulator.store(key).read { $0.credentials.minted.count }, 1, "the next mint swept the expired ones")
    }

    func testReceiptsAndPushesAreCappedAndExpire() throws {
        var receipts: [String] = []
        for _ in 0..<(CredentialState.maxReceipts + 10) { receipts.append(try emulator.verifyClient(key, appToken: String(repeating: "ab", count: 32))) }
        XCTAssertEqual(emulator.store(key).read { $0.credentials.receipts.count }, CredentialState.maxReceipts)
        let pushes = emulator.pushNotifications(key)
        XCTAssertEqual(pushes.count, CredentialState.maxPushes)
        XCTAssertEqual(pushes.last?.receipt, receipts.last)
        XCTAssertEqual(pushes.first?.receipt, receipts[receipts.count - CredentialState.maxPushes], "oldest first, newest kept")

        _ = try emulator.patchConfig(key, ["phoneAuth": ["appVerification": "ENFORCE"]])
        var evicted = AppCredentials()
        evicted.iosReceipt = receipts[0]
        evicted.iosSecret = "anything"
        XCTAssertEqual(code { try self.emulator.sendVerificationCode(self.key, phoneNumber: "+15551234567", credentials: evicted) }, "INVALID_APP_CREDENTIAL")

        let push = pushes.last!
        var ios = AppCredentials()
        ios.iosReceipt = push.receipt
        ios.iosSecret = push.secret
        clock.advance(millis: Emulator.credentialLifetimeMillis)
        XCTAssertEqual(code { try self.emulator.sendVerificationCode(self.key, phoneNumber: "+15551234567", credentials: ios) },
                       "INVALID_APP_CREDENTIAL", "the receipt expired")
        XCTAssertEqual(emulator.pushNotifications(key).count, 0, "expired pushes are no longer listed")
    }

    func testAppTokensAreBoundedLikeAPNsTokens() throws {
        XCTAssertNoThrow(try emulator.verifyClient(key, appToken: String(repeating: "f", count: Emulator.maxAppTokenLength)))
        XCTAssertEqual(code { try self.emulator.verifyClient(self.key, appToken: String(repeating: "f", count: Emulator.maxAppTokenLength + 1)) },
                       "INVALID_APP_CREDENTIAL")
        XCTAssertEqual(code { try self.emulator.verifyClient(self.key, appToken: String(repeating: "f", count: 1 << 20)) }, "INVALID_APP_CREDENTIAL")
        XCTAssertEqual(code { try self.emulator.verifyClient(self.key, appToken: "abc\u{0}def") }, "INVALID_APP_CREDENTIAL")
        XCTAssertEqual(code { try self.emulator.verifyClient(self.key, appToken: "abc\ndef") }, "INVALID_APP_CREDENTIAL")
        XCTAssertEqual(code { try self.emulator.verifyClient(self.key, appToken: "") }, "MISSING_IOS_APP_TOKEN")
    }

    // MARK: temporary proofs

    /// A user signed in with another number links a number someone else owns: production answers with a proof.
    func conflictProof(_ n: Int, phone: String) throws -> String {
        let owner = try emulator.createUser(key, localId: "owner\(n)", changes: { var c = UserChanges(); c.phoneNumber = .set(phone); return c }())
        let linker = try emulator.createUser(key, localId: "linker\(n)", changes: UserChanges())
        let info = try emulator.sendVerificationCode(key, phoneNumber: owner.phoneNumber)
        let code = emulator.verificationCodes(key, phone: owner.phoneNumber).last!.code
        let identity = TokenIdentity(projectId: "p", tenantId: nil, localId: linker.localId, issuedAt: clock.nowSeconds(),
                                     authTime: clock.nowSeconds(), signInProvider: "anonymous")
        guard case .conflict(_, let proof) = try emulator.signInWithPhoneNumber(key, sessionInfo: info, code: code, temporaryProof: nil,
                                                                              phoneNumber: nil, tokenUser: identity, operation: nil)
        else { XCTFail("expected a conflict"); return "" }
        return proof
    }

    func signIn(proof: String, phone: String) -> String? {
        code { try self.emulator.signInWithPhoneNumber(self.key, sessionInfo: nil, code: nil, temporaryProof: proof, phoneNumber: phone, tokenUser: nil, operation: nil) }
    }

    func testTemporaryProofsExpireAfterAnHour() throws {
        let proof = try conflictProof(1, phone: "+15550000001")
        clock.advance(millis: Emulator.temporaryProofLifetimeMillis - 1)
        XCTAssertNil(signIn(proof: proof, phone: "+15550000001"))
        let again = try conflictProof(2, phone: "+15550000002")
        clock.advance(millis: Emulator.temporaryProofLifetimeMillis)
        XCTAssertEqual(signIn(proof: again, phone: "+15550000002"), "INVALID_TEMPORARY_PROOF")
    }

    func testTemporaryProofsAreCappedPerStore() throws {
        var t = AuthStore(config: ProjectConfig()).temporaryProofs
        for i in 0..<(Emulator.maxTemporaryProofs * 2) { t.insert("proof\(i)", "+1", expiresAt: Int64.max, now: 0) }
        XCTAssertEqual(t.count, Emulator.maxTemporaryProofs)
        XCTAssertNil(t.peek("proof0", now: 0))
    }

    // MARK: refresh tokens

    func testDeletingAUserVisitsOnlyItsRefreshTokens() throws {
        // 200,000 refresh tokens of 20,000 other users.
        var others: [(String, RefreshTokenRecord)] = []
        others.reserveCapacity(200_000)
        for i in 0..<200_000 {
            others.append(("AMf-\(i)", RefreshTokenRecord(projectId: "p", tenantId: nil, localId: "u\(i % 20_000)", authTime: 1, signInProvider: "phone", issuedAt: 1)))
        }
        emulator.restoreRefreshTokens(others)
        let user = try emulator.createUser(key, localId: "victim", changes: UserChanges())
        for _ in 0..<3 { _ = try emulator.issueRefreshToken(key, localId: user.localId, authTime: 1, signInProvider: "phone") }
        XCTAssertEqual(emulator.refreshTokenCount, 200_003)

        let before = emulator.refreshTokenIndexVisits
        try emulator.deleteUser(key, localId: "victim")
        XCTAssertEqual(emulator.refreshTokenIndexVisits - before, 3, "only the victim's three tokens were visited")
        XCTAssertEqual(emulator.refreshTokenCount, 200_000)

        // A tenant's wipe visits only that tenant's tokens.
        let tenant = StoreKey(projectId: "p", tenantId: "t1")
        let tu = try emulator.createUser(tenant, localId: nil, changes: UserChanges())
        for _ in 0..<5 { _ = try emulator.issueRefreshToken(tenant, localId: tu.localId, authTime: 1, signInProvider: "phone") }
        let beforeWipe = emulator.refreshTokenIndexVisits
        try emulator.wipeAccounts(tenant)
        XCTAssertEqual(emulator.refreshTokenIndexVisits - beforeWipe, 5)
        XCTAssertEqual(emulator.refreshTokenCount, 200_000)
    }

    /// The index keeps each user's tokens in issue order, each once: a rolled-back issue takes out exactly its token
    /// (wherever it is), a token inserted again moves to its new owner, and removals return what is left.
    func testRefreshTokenIndexKeepsEachTokenOnceUnderItsOwner() {
        func rec(_ user: String, tenant: String? = nil) -> RefreshTokenRecord {
            RefreshTokenRecord(projectId: "p", tenantId: tenant, localId: user, authTime: 1, signInProvider: "phone", issuedAt: 1)
        }
        let p = StoreKey(projectId: "p"), t = StoreKey(projectId: "p", tenantId: "t")
        var index = RefreshTokenIndex()
        for i in 0..<5 { index.insert("a\(i)", rec("alice")) }
        index.insert("b0", rec("bob"))
        index.insert("t0", rec("alice", tenant: "t"))
        index.remove("a2")  // from the middle
        index.remove("a4")  // the newest (a rolled-back sign-in)
        index.remove("nope")
        index.insert("a0", rec("bob"))  // the same token again, now bob's
        index.insert("b0", rec("bob"))  // again for the same user: still once
        XCTAssertEqual(index.byToken.count, 5)
        XCTAssertEqual(index.byUser[p]?["alice"], ["a1", "a3"])
        XCTAssertEqual(index.byUser[p]?["bob"], ["a0", "b0"])
        XCTAssertEqual(index.removeUser(p, "alice").map(\.0), ["a1", "a3"])
        XCTAssertNil(index.byUser[p]?["alice"])
        XCTAssertEqual(Set(index.removeStore(p).map(\.0)), ["a0", "b0"])
        XCTAssertNil(index.byUser[p])
        XCTAssertEqual(index.byUser[t]?["alice"], ["t0"])
        index.remove("t0")
        XCTAssertNil(index.byUser[t], "a store whose last token left has no entry")
        XCTAssertTrue(index.byToken.isEmpty)
    }
}
