import EmulatorSupport
import PhoneAuthCore
import PhoneAuthStorage
import PhoneAuthTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

final class DataDirectoryTests: XCTestCase {
    var dir = ""

    override func setUp() {
        dir = TemporaryDirectory.make("phone-auth-storage")
    }

    override func tearDown() { TemporaryDirectory.remove(dir) }

    func emulator(_ journal: DataDirectory) -> Emulator { makeTestEmulator(seed: 5, journal: journal) }

    func testEverythingSurvivesAReopen() throws {
        let key = StoreKey(projectId: "p")
        let tenant = StoreKey(projectId: "p", tenantId: "t1")
        var uid = ""
        var refresh = ""
        do {
            let d = try DataDirectory(path: dir)
            let e = emulator(d)
            let s = try e.sendVerificationCode(key, phoneNumber: "+16505554567")
            guard case .signedIn(let user, _, _, _) = try e.signInWithPhoneNumber(key, sessionInfo: s, code: "123456", temporaryProof: nil,
                                                                             phoneNumber: nil, tokenUser: nil, operation: nil) else { return XCTFail() }
            uid = user.localId
            var c = UserChanges()
            c.customAttributes = #"{"role":"admin"}"#
            _ = try e.updateUser(key, localId: uid, changes: c)
            refresh = try e.issueRefreshToken(key, localId: uid, authTime: 1, signInProvider: "phone")
            _ = try e.patchConfig(key, ["phoneAuth": ["maxCodeAttempts": 2]])
            _ = try e.createUser(tenant, localId: "tenant-user", changes: UserChanges())
            _ = try e.sendVerificationCode(key, phoneNumber: "+15551234567")
            _ = try e.createUser(key, localId: "gone", changes: UserChanges())
            try e.deleteUser(key, localId: "gone")
            try d.saveSigningKey(kid: "k1", pem: "PEM", created: 1)
            d.close()
        }
        let d = try DataDirectory(path: dir)
        let e = emulator(d)
        let snap = try d.loadSnapshot()
        e.restore(snap.stores, refreshTokens: snap.refreshTokens)
        let user = try XCTUnwrap(e.store(key).read { $0.users[uid] })
        XCTAssertEqual(user.phoneNumber, "+16505554567")
        XCTAssertEqual(user.customAttributes, #"{"role":"admin"}"#)
        XCTAssertNil(e.store(key).read { $0.users["gone"] })
        XCTAssertEqual(e.store(key).read { $0.user(phone: "+16505554567")?.localId }, uid)
        XCTAssertEqual(e.config(key).phoneAuth.maxCodeAttempts, 2)
        XCTAssertEqual(e.config(key).testPhoneNumbers, ["+16505554567": "123456"])
        XCTAssertNotNil(e.store(tenant).read { $0.users["tenant-user"] })
        XCTAssertEqual(e.verificationCodes(key, phone: "+15551234567").count, 1)
        XCTAssertEqual(try e.redeemRefreshToken(refresh).1.localId, uid)
        XCTAssertEqual(try d.signingKeys().map(\.kid), ["k1"])
        // A session restored keeps counting attempts from where it was.
        let s2 = try e.sendVerificationCode(key, phoneNumber: "+15551234568")
        XCTAssertGreaterThan(e.verificationCodes(key, phone: "+15551234568")[0].sequence, e.verificationCodes(key, phone: "+15551234567")[0].sequence)
        _ = s2
        d.close()
    }

    func testEnrollmentsSessionOwnersAndSecondFactorRefreshTokensSurviveAReopen() throws {
        let key = StoreKey(projectId: "p")
        var refresh = ""
        var session = ""
        do {
            let d = try DataDirectory(path: dir)
            let e = emulator(d)
            var c = UserChanges()
            c.email = .set("m@example.com")
            c.emailVerified = true
            c.mfaInfo = [MFAEnrollment(mfaEnrollmentId: "enr1", phoneInfo: "+16505554567", displayName: "work", enrolledAt: 1_700_000_000_123)]
            _ = try e.createUser(key, localId: "m", changes: c)
            guard case .mfaRequired(let credential, _) = try e.passFirstFactor(key, localId: "m", signInProvider: "password") else { return XCTFail() }
            session = try e.startMFASignIn(key, pendingCredential: credential, mfaEnrollmentId: "enr1")
            let t = try e.finalizeMFASignIn(key, pendingCredential: credential, sessionInfo: session, code: "123456")
            refresh = t.refreshToken
            // A pending sign-in code survives with its owner.
            guard case .mfaRequired(let c2, _) = try e.passFirstFactor(key, localId: "m", signInProvider: "password") else { return XCTFail() }
            session = try e.startMFASignIn(key, pendingCredential: c2, mfaEnrollmentId: "enr1")
            d.close()
        }
        let d = try DataDirectory(path: dir)
        let e = emulator(d)
        let snap = try d.loadSnapshot()
        e.restore(snap.stores, refreshTokens: snap.refreshTokens)
        let user = try XCTUnwrap(e.store(key).read { $0.users["m"] })
        XCTAssertEqual(user.mfaInfo, [MFAEnrollment(mfaEnrollmentId: "enr1", phoneInfo: "+16505554567", displayName: "work", enrolledAt: 1_700_000_000_123)])
        XCTAssertEqual(try e.redeemRefreshToken(refresh).0.secondFactorId, "enr1")
        let pending = try XCTUnwrap(e.verificationCodes(key, phone: "+16505554567").first)
        XCTAssertEqual(pending.sessionInfo, session)
        XCTAssertEqual(pending.kind, .mfaSignIn)
        XCTAssertEqual(pending.owner, "m")
        // Pending credentials are not durable (like temporary proofs): after a restart the first factor is passed again.
        XCTAssertThrowsError(try e.finalizeMFASignIn(key, pendingCredential: "gone", sessionInfo: session, code: "123456"))
        d.close()
    }

    func testASecondOpenIsRefused() throws {
        let d = try DataDirectory(path: dir)
        XCTAssertThrowsError(try DataDirectory(path: dir)) { XCTAssertTrue("\($0)".contains("in use"), "\($0)") }
        d.close()
        XCTAssertNoThrow(try DataDirectory(path: dir).close())
    }

    func testNotADirectoryOrUnreadable() {
        let file = dir + "/plain-file"
        _ = try? Files.writeAtomically(file, [1])
        XCTAssertThrowsError(try DataDirectory(path: file)) { XCTAssertTrue("\($0)".contains("not a directory")) }
        XCTAssertThrowsError(try DataDirectory(path: "/proc/nope/deeper"))
    }

    func testCorruptDatabaseIsAClearError() throws {
        try Files.writeAtomically(dir + "/emulator.sqlite3", Array("this is not a database, just text that is long enough".utf8))
        XCTAssertThrowsError(try DataDirectory(path: dir)) { XCTAssertTrue("\($0)".contains("cannot open the database"), "\($0)") }
    }

    func testConcurrentWritersAllLand() throws {
        let d = try DataDirectory(path: dir)
        let e = emulator(d)
        DispatchQueue.concurrentPerform(iterations: 8) { t in
            for i in 0..<50 {
                _ = try? e.createUser(StoreKey(projectId: "p", tenantId: t % 2 == 0 ? nil : "t\(t)"), localId: "u-\(t)-\(i)", changes: UserChanges())
            }
        }
        d.close()
        let again = try DataDirectory(path: dir)
        let total = try again.loadSnapshot().stores.reduce(0) { $0 + $1.userCount }
        XCTAssertEqual(total, 400)
        again.close()
    }
    /// Issue 11: text was bound with length -1, so a NUL ended it: `victim` and `victim\u{0}x` became one row and
    /// merged after a restart. Keys and documents now keep every byte.
    func testTextWithNULIsNotTruncated() throws {
        let key = StoreKey(projectId: "p")
        do {
            let d = try DataDirectory(path: dir)
            var victim = UserRecord(localId: "victim", createdAt: 1)
            victim.displayName = "the victim"
            var other = UserRecord(localId: "victim\u{0}x", createdAt: 2)
            other.displayName = "attacker\u{0}tail"
            try d.record([.userSaved(key, victim)])
            try d.record([.userSaved(key, other)])
            try d.record([.refreshTokenSaved("tok\u{0}en", RefreshTokenRecord(projectId: "p", tenantId: nil, localId: "victim\u{0}x", authTime: 1,
                                                                               signInProvider: "phone", issuedAt: 1))])
            d.close()
        }
        let d = try DataDirectory(path: dir)
        defer { d.close() }
        let snap = try d.loadSnapshot()
        let users = snap.stores.first { $0.key == key }?.allUsers ?? []
        XCTAssertEqual(Set(users.map(\.localId)), ["victim", "victim\u{0}x"])
        XCTAssertEqual(users.first { $0.localId == "victim" }?.displayName, "the victim")
        XCTAssertEqual(users.first { $0.localId == "victim\u{0}x" }?.displayName, "attacker\u{0}tail")
        XCTAssertEqual(snap.refreshTokens.map(\.0), ["tok\u{0}en"])
        XCTAssertEqual(snap.refreshTokens.first?.1.localId, "victim\u{0}x")
    }

    /// Issue 11: a used `sessionInfo` in a non-canonical spelling (other trailing bits) was accepted, and the
    /// journal delete was keyed by that spelling, so the session came back after a restart and signed in again.
    func testANonCanonicalSessionInfoNeitherSignsInNorSurvivesARestart() throws {
        let key = StoreKey(projectId: "p")
        var session = ""
        do {
            let d = try DataDirectory(path: dir)
            let e = emulator(d)
            session = try e.sendVerificationCode(key, phoneNumber: "+16505554567")
            let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
            let i = alphabet.firstIndex(of: session.last!)!
            let variant = String(session.dropLast()) + String(alphabet[i ^ 1])
            XCTAssertThrowsError(try e.signInWithPhoneNumber(key, sessionInfo: variant, code: "123456", temporaryProof: nil, phoneNumber: nil,
                                                             tokenUser: nil, operation: nil)) { XCTAssertEqual(($0 as? AuthError)?.code, .invalidSessionInfo) }
            _ = try e.signInWithPhoneNumber(key, sessionInfo: session, code: "123456", temporaryProof: nil, phoneNumber: nil, tokenUser: nil, operation: nil)
            d.close()
        }
        let d = try DataDirectory(path: dir)
        defer { d.close() }
        let e = emulator(d)
        let snap = try d.loadSnapshot()
        e.restore(snap.stores, refreshTokens: snap.refreshTokens)
        XCTAssertEqual(e.verificationCodes(key, phone: nil).count, 0, "the used session stays used after a restart")
        XCTAssertThrowsError(try e.signInWithPhoneNumber(key, sessionInfo: session, code: "123456", temporaryProof: nil, phoneNumber: nil,
                                                         tokenUser: nil, operation: nil)) { XCTAssertEqual(($0 as? AuthError)?.code, .invalidSessionInfo) }
    }
}
