import EmulatorSupport
@testable import PhoneAuthAPI
import PhoneAuthCore
import PhoneAuthTestSupport
import XCTest

/// The export's byte writer (`ExportRecordWriter`) writes what the generic path (`exportRecord` then
/// `prettySerialized`) writes, byte for byte: every field kind (MFA, providers, claims, hashes and their algorithm,
/// times at the edges, unicode and escapes), random mixes of them, and whole `accounts.json` files.
final class ExportRecordWriterTests: XCTestCase {
    var app: PhoneAuthApp!

    override func setUp() {
        app = makeTestApp(seed: 29, signing: .none)
    }

    func generic(_ u: UserRecord) -> [UInt8] {
        var out: [UInt8] = []
        ExportImport.exportRecord(app, u).prettySerialized(into: &out, level: 2)
        return out
    }

    func direct(_ u: UserRecord) -> [UInt8] {
        var out: [UInt8] = []
        ExportRecordWriter.write(u, into: &out)
        return out
    }

    func assertSame(_ u: UserRecord, _ what: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertTrue(ExportRecordWriter.canWrite(u), what, file: file, line: line)
        let a = generic(u), b = direct(u)
        XCTAssertEqual(String(decoding: b, as: UTF8.self), String(decoding: a, as: UTF8.self), what, file: file, line: line)
        XCTAssertEqual(a, b, what, file: file, line: line)
    }

    /// Text with every kind of character the writer must escape or keep.
    static let hostile = ["plain", "quote \" and backslash \\", "line\nfeed\ttab\rreturn", "control \u{01}\u{1F}\u{7F}", "nul \u{0}x",
                          "unicode é ü 名前", "emoji 👩‍💻 🇫🇷", "slash / </script>", "", "  spaces  "]

    func testEveryFieldKindWritesTheGenericBytes() {
        XCTAssertTrue(ExportRecordWriter.knows(app.emulator.userFields))
        assertSame(UserRecord(localId: "min", createdAt: 0), "a record with only its id and creation time")

        var phone = UserRecord(localId: "u0000000001LoadTestUserXyz", createdAt: 1_732_950_000_001)
        phone.phoneNumber = "+15550000001"
        phone.displayName = "Test User 1"
        phone.customAttributes = #"{"role":"tester","tier":1}"#
        assertSame(phone, "the bench's record: phone, name, claims")

        for claims in ["{}", "", #"{"a":"é\"\\\n","n":[1,2.5,null,true],"o":{"x":{}}}"#] {
            var u = phone
            u.customAttributes = claims
            assertSame(u, "claims \(claims)")
        }

        var pw = UserRecord(localId: "pw", createdAt: 1_700_000_000_000)
        pw.email = "pw@example.com"
        pw.emailVerified = true
        pw.passwordHash = "aGFzaA=="
        pw.salt = "c2FsdA=="
        pw.passwordUpdatedAt = 1_700_000_000_123
        pw.displayName = "Pat"
        pw.photoUrl = "https://example.com/p.png?a=1&b=\"2\""
        assertSame(pw, "email, password, salt, password time, the password provider with name and photo")

        var algo = pw
        algo.passwordHashAlgorithm = ["algorithm": "SCRYPT", "rounds": 8, "memoryCost": 14, "signerKey": "a2V5", "saltSeparator": "Bw=="]
        assertSame(algo, "an imported hash's algorithm")
        algo.passwordHashAlgorithm = ["algorithm": "BCRYPT"]
        algo.salt = nil
        assertSame(algo, "bcrypt, no salt")

        var noHash = pw
        noHash.passwordHash = nil
        assertSame(noHash, "salt and password time without a hash are left out")
        noHash.emailVerified = false
        noHash.emailLinkSignin = true
        assertSame(noHash, "email-link sign-in: the password provider without a password")

        var everything = pw
        everything.phoneNumber = "+16505550101"
        everything.disabled = true
        everything.validSince = 1_700_000_000
        everything.lastLoginAt = 1_700_000_500_000
        everything.lastRefreshAt = 1_700_000_600_000
        everything.tenantId = "tenant-1"
        everything.screenName = "pat_gh"
        everything.initialEmail = "first@example.com"
        everything.customAttributes = #"{"admin":true}"#
        everything.providerUserInfo = [
            ProviderUserInfo(providerId: "google.com", rawId: "g-123"),
            ProviderUserInfo(providerId: "github.com", rawId: "gh-9", federatedId: "gh-9", displayName: "Pat \"GH\"", photoUrl: "https://x/y",
                             email: "pat@github.example", screenName: "pat_gh", phoneNumber: "+16505550102"),
        ]
        everything.mfaInfo = [
            MFAEnrollment(mfaEnrollmentId: "m1", phoneInfo: "+16505550103", displayName: "work phone", enrolledAt: 1_700_000_000_000),
            MFAEnrollment(mfaEnrollmentId: "m2", phoneInfo: "+16505550104", displayName: nil, enrolledAt: 1_700_000_000_987),
            MFAEnrollment(mfaEnrollmentId: "t1", totp: TOTPFactor(secret: Array("12345678901234567890".utf8), lastUsedStep: 5),
                          displayName: "authenticator", enrolledAt: 1_700_000_001_000),
        ]
        everything.passwordHashAlgorithm = ["algorithm": "HMAC_SHA256", "signerKey": "a2V5"]
        assertSame(everything, "every field at once")

        var edges = UserRecord(localId: "edges", createdAt: Int64.max)
        edges.validSince = -1
        edges.lastLoginAt = Int64.min
        edges.lastRefreshAt = Int64.max
        edges.passwordHash = "h"
        edges.passwordUpdatedAt = Int64.max  // a double on the wire: 9.223372036854776e+18, as the generic path writes it
        assertSame(edges, "times at Int64's edges")
        edges.passwordUpdatedAt = (1 << 53) + 1
        assertSame(edges, "a password time past 2^53 (rounded as a double, as the generic path does)")
        edges.passwordUpdatedAt = -5
        assertSame(edges, "a negative password time")

        for (n, s) in Self.hostile.enumerated() {
            var u = UserRecord(localId: "h\(n)" + s, createdAt: Int64(n))
            u.email = s + "@example.com"
            u.displayName = s
            u.photoUrl = s
            u.phoneNumber = s
            u.passwordHash = s
            u.salt = s
            u.tenantId = s
            u.screenName = s
            u.initialEmail = s
            u.customAttributes = s
            u.providerUserInfo = [ProviderUserInfo(providerId: s, rawId: s, federatedId: s, displayName: s, photoUrl: s, email: s, screenName: s, phoneNumber: s)]
            u.mfaInfo = [MFAEnrollment(mfaEnrollmentId: s, phoneInfo: s, displayName: s, enrolledAt: 0)]
            assertSame(u, "hostile text \(s.debugDescription)")
        }
    }

    func testRandomRecordsWriteTheGenericBytes() {
        var rng = SplitMix(seed: 2929)
        func maybe(_ p: Int = 2) -> Bool { Int.random(in: 0..<p, using: &rng) == 0 }
        func text() -> String { Self.hostile.randomElement(using: &rng)! + String(Int.random(in: 0..<1000, using: &rng)) }
        func time() -> Int64 { maybe(8) ? Int64.random(in: Int64.min...Int64.max, using: &rng) : Int64.random(in: 0...4_102_444_800_000, using: &rng) }
        for i in 0..<2000 {
            var u = UserRecord(localId: "r\(i)" + (maybe(4) ? text() : ""), createdAt: time())
            if maybe() { u.email = text() + "@example.com" }
            u.emailVerified = maybe()
            if maybe() { u.displayName = text() }
            if maybe(3) { u.photoUrl = text() }
            if maybe() { u.phoneNumber = "+1555" + String(Int.random(in: 1_000_000...9_999_999, using: &rng)) }
            u.disabled = maybe(4)
            if maybe() { u.customAttributes = [#"{"r":1}"#, "{}", "", #"{"t":"\u00e9\n"}"#].randomElement(using: &rng)! }
            if maybe(3) { u.validSince = time() }
            if maybe() { u.lastLoginAt = time() }
            if maybe(3) { u.lastRefreshAt = time() }
            if maybe(4) { u.tenantId = "t-\(i)" }
            if maybe() { u.passwordHash = text() }
            if maybe() { u.salt = text() }
            if maybe() { u.passwordUpdatedAt = time() }
            if maybe(3) { u.passwordHashAlgorithm = ["algorithm": "SCRYPT", "rounds": .int(Int.random(in: 1...8, using: &rng))] }
            u.emailLinkSignin = maybe(4)
            if maybe(4) { u.screenName = text() }
            if maybe(4) { u.initialEmail = text() }
            for n in 0..<Int.random(in: 0...2, using: &rng) {
                u.providerUserInfo.append(ProviderUserInfo(providerId: "p\(n).com", rawId: text(), federatedId: maybe() ? text() : nil,
                                                           displayName: maybe() ? text() : nil, photoUrl: maybe() ? text() : nil,
                                                           email: maybe() ? text() : nil, screenName: maybe() ? text() : nil,
                                                           phoneNumber: maybe() ? text() : nil))
            }
            for n in 0..<Int.random(in: 0...2, using: &rng) {
                u.mfaInfo.append(maybe()
                    ? MFAEnrollment(mfaEnrollmentId: "m\(n)", phoneInfo: "+16505550100", displayName: maybe() ? text() : nil, enrolledAt: time())
                    : MFAEnrollment(mfaEnrollmentId: "t\(n)", totp: TOTPFactor(secret: [1, 2, 3, UInt8(n)]), displayName: maybe() ? text() : nil,
                                    enrolledAt: time()))
            }
            assertSame(u, "random record \(i)")
        }
    }

    /// A record with a value the writer does not know (an extension field) goes the generic way.
    func testExtensionValuesAreLeftToTheGenericPath() {
        var u = UserRecord(localId: "x", createdAt: 1)
        XCTAssertTrue(ExportRecordWriter.canWrite(u))
        u.passwordHashAlgorithm = ["algorithm": "MD5"]
        XCTAssertTrue(ExportRecordWriter.canWrite(u))
        u.extensions["favoriteColor"] = "blue"
        XCTAssertFalse(ExportRecordWriter.canWrite(u))
        XCTAssertFalse(ExportRecordWriter.knows(UserFieldTable.standard.adding(UserField("favoriteColor", value: { $0.extensions["favoriteColor"] },
                                                                                           assign: { $0.extensions["favoriteColor"] = $1 }))))
    }

    /// A whole `accounts.json` (and a tenant's, and an empty one) is the document the generic path builds: the users
    /// sorted by uid, pretty-printed.
    func testExportFilesAreTheGenericDocument() throws {
        var users: [UserRecord] = []
        for i in 0..<300 {
            var u = UserRecord(localId: "u" + String(100_000 + (i * 7919) % 300) + (i % 50 == 0 ? "é\"" : ""), createdAt: 1_700_000_000_000 + Int64(i))
            if i % 2 == 0 { u.phoneNumber = "+1555" + String(1_000_000 + i) }
            if i % 3 == 0 { u.email = "u\(i)@example.com"; u.passwordHash = "aGFzaA=="; u.salt = "c2FsdA=="; u.passwordUpdatedAt = 1_700_000_000_000 }
            if i % 5 == 0 { u.customAttributes = #"{"tier":\#(i % 7)}"# }
            if i % 7 == 0 {
                // A second factor needs a verified email (an import checks it).
                u.email = "u\(i)@example.com"
                u.emailVerified = true
                u.mfaInfo = [MFAEnrollment(mfaEnrollmentId: "m\(i)", phoneInfo: "+16505550100", displayName: nil, enrolledAt: 1_700_000_000_000)]
            }
            if i % 11 == 0 { u.providerUserInfo = [ProviderUserInfo(providerId: "google.com", rawId: "g\(i)", email: "g\(i)@example.com")] }
            if i % 13 == 0 { u.passwordHashAlgorithm = ["algorithm": "BCRYPT"] }
            users.append(u)
        }
        var snap = StoreSnapshot(key: StoreKey(projectId: "demo-phone"))
        snap.users = users
        app.emulator.restore([snap], refreshTokens: [])
        let dir = TemporaryDirectory.make("export-writer")
        defer { TemporaryDirectory.remove(dir) }
        let result = try ExportImport.export(app, projectId: "demo-phone", to: dir)
        XCTAssertEqual(result.users, users.count)
        let written = try Files.read(dir + "/auth_export/accounts.json")
        let sorted = users.sorted { $0.localId < $1.localId }
        let expected = JSON.object(["kind": "identitytoolkit#DownloadAccountResponse",
                                    "users": .array(sorted.map { ExportImport.exportRecord(app, $0) })]).prettySerialized()
        XCTAssertEqual(written, expected)
        // And it reads back, to the same users whichever thread of the import checks the records.
        var exports: [[UInt8]] = []
        for checking in [ExportImport.ImportChecking.reader, .writer, .balanced] {
            let again = makeTestApp(seed: 30, signing: .none)
            XCTAssertEqual(try ExportImport.importDirectory(again, projectId: "demo-phone", from: dir, checking: checking).users, users.count)
            let out = TemporaryDirectory.make("export-writer-again")
            defer { TemporaryDirectory.remove(out) }
            _ = try ExportImport.export(again, projectId: "demo-phone", to: out)
            exports.append(try Files.read(out + "/auth_export/accounts.json"))
        }
        XCTAssertFalse(exports[0].isEmpty)
        XCTAssertTrue(exports[0] == exports[1] && exports[1] == exports[2], "the imports differ by the thread that checked them")
    }

    /// Enough users for several chunks and several batches of chunks: still the generic document, in uid order.
    func testALargeExportIsTheGenericDocumentInOrder() throws {
        let n = ExportImport.renderChunk * 9 + 123
        var users: [UserRecord] = []
        users.reserveCapacity(n)
        for i in 0..<n {
            var u = UserRecord(localId: "u" + String((i &* 2_654_435_761) % 1_000_003) + "LoadTestUserXyz" + (i % 1000 == 0 ? "ü" : ""), createdAt: Int64(i))
            u.phoneNumber = "+1555" + String(1_000_000 + i)
            u.displayName = "Test User \(i)"
            if i % 3 == 0 { u.customAttributes = #"{"role":"tester","tier":\#(i % 7)}"# }
            users.append(u)
        }
        var snap = StoreSnapshot(key: StoreKey(projectId: "demo-phone"))
        snap.users = users
        app.emulator.restore([snap], refreshTokens: [])
        let dir = TemporaryDirectory.make("export-writer-large")
        defer { TemporaryDirectory.remove(dir) }
        XCTAssertEqual(try ExportImport.export(app, projectId: "demo-phone", to: dir).users, n)
        let sorted = users.sorted { $0.localId < $1.localId }
        let expected = JSON.object(["kind": "identitytoolkit#DownloadAccountResponse",
                                    "users": .array(sorted.map { ExportImport.exportRecord(app, $0) })]).prettySerialized()
        XCTAssertTrue(try Files.read(dir + "/auth_export/accounts.json") == expected)
    }

    func testAnEmptyStoreExportsTheGenericEmptyDocument() throws {
        let dir = TemporaryDirectory.make("export-writer-empty")
        defer { TemporaryDirectory.remove(dir) }
        try ExportImport.export(app, projectId: "demo-phone", to: dir)
        let expected = JSON.object(["kind": "identitytoolkit#DownloadAccountResponse", "users": .array([])]).prettySerialized()
        XCTAssertEqual(try Files.read(dir + "/auth_export/accounts.json"), expected)
    }
}
