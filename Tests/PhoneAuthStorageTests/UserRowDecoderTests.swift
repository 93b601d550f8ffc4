import EmulatorSupport
import PhoneAuthCore
@testable import PhoneAuthStorage
import PhoneAuthTestSupport
import XCTest

/// The data directory's user row reader (`UserRowDecoder`) gives the record the generic way
/// (`Codecs.decodeUser`: `JSONParser`, then `record(fromJournal:)`) gives, for every document: the ones this version
/// writes (read directly: every field kind, hostile text, times at the edges) and odd ones it leaves to the generic
/// way (duplicate keys, nulls, other types, fractions, surrogate escapes, unknown keys, broken text).
final class UserRowDecoderTests: XCTestCase {
    let decoder = UserRowDecoder(.standard)!

    func fast(_ doc: String) -> UserRecord? {
        var d = doc
        return d.withUTF8 { decoder.decode($0) }
    }

    /// What loadSnapshot gives for the row: the fast reading, or the generic one when it declines.
    func loaded(_ doc: String) -> UserRecord? { fast(doc) ?? Codecs.decodeUser(doc) }

    func assertDirect(_ u: UserRecord, _ what: String, file: StaticString = #filePath, line: UInt = #line) {
        let doc = Codecs.encode(u)
        XCTAssertEqual(Codecs.decodeUser(doc), u, "the generic way round-trips: \(what)", file: file, line: line)
        XCTAssertEqual(fast(doc), u, "read directly: \(what) \(doc)", file: file, line: line)
    }

    static let hostile = ["plain", "quote \" and backslash \\", "line\nfeed\ttab\rreturn", "control \u{01}\u{1F}\u{7F}", "nul \u{0}x",
                          "unicode é ü 名前", "emoji 👩‍💻 🇫🇷", "slash / </script>", "", "  spaces  "]

    func testEveryFieldKindIsReadDirectly() {
        assertDirect(UserRecord(localId: "min", createdAt: 0), "id and creation time only")
        var u = UserRecord(localId: "u0000000001LoadTestUserXyz", createdAt: 1_732_950_000_001)
        u.phoneNumber = "+15550000001"
        u.displayName = "Test User 1"
        u.customAttributes = #"{"role":"tester","tier":1}"#
        assertDirect(u, "the bench's record")
        u.email = "pw@example.com"
        u.emailVerified = true
        u.photoUrl = "https://example.com/p.png"
        u.disabled = true
        u.validSince = 1_700_000_000
        u.lastLoginAt = 1_700_000_500_000
        u.lastRefreshAt = 1_700_000_600_000
        u.tenantId = "tenant-1"
        u.passwordHash = "aGFzaA=="
        u.salt = "c2FsdA=="
        u.passwordUpdatedAt = 1_700_000_000_123
        u.passwordHashAlgorithm = ["algorithm": "SCRYPT", "rounds": 8, "memoryCost": 14, "signerKey": "a2V5"]
        u.emailLinkSignin = true
        u.screenName = "pat"
        u.initialEmail = "first@example.com"
        u.providerUserInfo = [ProviderUserInfo(providerId: "google.com", rawId: "g-1"),
                              ProviderUserInfo(providerId: "github.com", rawId: "gh", federatedId: "gh", displayName: "P \"GH\"",
                                               photoUrl: "https://x", email: "p@x", screenName: "p", phoneNumber: "+16505550102")]
        u.mfaInfo = [MFAEnrollment(mfaEnrollmentId: "m1", phoneInfo: "+16505550103", displayName: "work", enrolledAt: 1_700_000_000_000),
                     MFAEnrollment(mfaEnrollmentId: "t1", totp: TOTPFactor(secret: Array("12345678901234567890".utf8), lastUsedStep: 5),
                                   displayName: nil, enrolledAt: 7)]
        assertDirect(u, "every field")

        var edges = UserRecord(localId: "edges", createdAt: Int64.max)
        edges.validSince = Int64.min + 1
        edges.lastLoginAt = -1
        edges.lastRefreshAt = 1 << 53
        edges.passwordUpdatedAt = (1 << 53) + 1
        assertDirect(edges, "times past 2^53 (decimal strings) and negative ones")

        for (n, s) in Self.hostile.enumerated() {
            var h = UserRecord(localId: "h\(n)" + s, createdAt: Int64(n))
            h.email = s
            h.displayName = s
            h.photoUrl = s
            h.phoneNumber = s
            h.customAttributes = s
            h.tenantId = s
            h.passwordHash = s
            h.salt = s
            h.screenName = s
            h.initialEmail = s
            h.providerUserInfo = [ProviderUserInfo(providerId: "p.com", rawId: "r" + s, displayName: s)]
            assertDirect(h, "hostile text \(s.debugDescription)")
        }
    }

    func testRandomRecordsAreReadDirectly() {
        var rng = SplitMix(seed: 1029)
        func maybe(_ p: Int = 2) -> Bool { Int.random(in: 0..<p, using: &rng) == 0 }
        func text() -> String { Self.hostile.randomElement(using: &rng)! + String(Int.random(in: 0..<100, using: &rng)) }
        func time() -> Int64 { maybe(6) ? Int64.random(in: Int64.min...Int64.max, using: &rng) : Int64.random(in: 0...4_102_444_800_000, using: &rng) }
        for i in 0..<2000 {
            var u = UserRecord(localId: "r\(i)" + (maybe(4) ? text() : ""), createdAt: time())
            if maybe() { u.email = text() }
            u.emailVerified = maybe()
            if maybe() { u.displayName = text() }
            if maybe(3) { u.photoUrl = text() }
            if maybe() { u.phoneNumber = "+1555" + String(Int.random(in: 1_000_000...9_999_999, using: &rng)) }
            u.disabled = maybe(4)
            if maybe() { u.customAttributes = #"{"r":"\#(i)"}"# }
            if maybe(3) { u.validSince = time() }
            if maybe() { u.lastLoginAt = time() }
            if maybe(3) { u.lastRefreshAt = time() }
            if maybe(4) { u.tenantId = "t\(i)" }
            if maybe() { u.passwordHash = text(); u.salt = maybe() ? text() : nil; u.passwordUpdatedAt = maybe() ? time() : nil }
            if maybe(4) { u.passwordHashAlgorithm = ["algorithm": "BCRYPT"] }
            u.emailLinkSignin = maybe(4)
            if maybe(4) { u.screenName = text() }
            if maybe(4) { u.initialEmail = text() }
            if maybe(3) { u.providerUserInfo = [ProviderUserInfo(providerId: "google.com", rawId: "g\(i)", email: maybe() ? text() : nil)] }
            if maybe(4) { u.mfaInfo = [MFAEnrollment(mfaEnrollmentId: "m\(i)", phoneInfo: "+16505550100", displayName: maybe() ? text() : nil, enrolledAt: time())] }
            assertDirect(u, "random record \(i)")
        }
    }

    /// Documents this version does not write: declined by the fast reader (nil) or read the same; loadSnapshot's
    /// result is the generic one in every case.
    func testOddDocumentsDecodeAsTheGenericWayDoes() {
        let docs = [
            #"{"localId":"a","createdAt":1,"email":"x","email":null}"#,          // a key twice, the last null
            #"{"localId":"a","createdAt":1,"email":"x","email":"y"}"#,           // a key twice
            #"{"localId":"a","createdAt":1,"displayName":null}"#,                // null: absent
            #"{"localId":null,"createdAt":1}"#,                                  // no id: unreadable
            #"{"localId":"a"}"#,                                                 // no creation time: unreadable
            #"{"localId":"a","createdAt":null}"#,
            #"{"localId":"a","createdAt":"123"}"#,                               // a decimal string
            #"{"localId":"a","createdAt":"+123"}"#,                              // Int64("+123")
            #"{"localId":"a","createdAt":"007"}"#,
            #"{"localId":"a","createdAt":"12a"}"#,
            #"{"localId":"a","createdAt":1.5}"#,                                 // a fraction
            #"{"localId":"a","createdAt":1e3}"#,
            #"{"localId":"a","createdAt":-0}"#,
            #"{"localId":"a","createdAt":007}"#,                                 // not JSON
            #"{"localId":"a","createdAt":12345678901234567890123}"#,             // past Int64: saturates
            #"{"localId":"a","createdAt":9007199254740993}"#,                    // past 2^53 as a number
            #"{"localId":"a","createdAt":1,"emailVerified":"yes"}"#,             // another type
            #"{"localId":"a","createdAt":1,"email":5}"#,
            #"{"localId":"a","createdAt":1,"disabled":truex}"#,
            #"{"localId":"a","createdAt":1,"unknownField":{"x":[1,2]}}"#,        // a key the table does not have
            #"{"localId":"\ud83d\ude00","createdAt":1}"#,                        // a surrogate pair
            #"{"localId":"\ud83d","createdAt":1}"#,                              // a lone surrogate
            #"{"localId":"\u00e9\u0000\/","createdAt":1}"#,                      // escapes
            #"{"localId":"a\x","createdAt":1}"#,                                 // a bad escape
            #" { "localId" : "a" , "createdAt" : 1 } "#,                         // spaces
            #"{"localId":"a","createdAt":1}x"#,                                  // trailing text
            #"{"localId":"a","createdAt":1"#,                                    // cut short
            #"{"localId":"a","createdAt":1,"providerUserInfo":"google"}"#,
            #"{"localId":"a","createdAt":1,"providerUserInfo":{"providerId":"g.com","rawId":"r"}}"#,
            #"{"localId":"a","createdAt":1,"providerUserInfo":[{"providerId":"g.com","rawId":"r]}\""}]}"#,
            #"{"localId":"a","createdAt":1,"mfaInfo":[{"mfaEnrollmentId":"m","phoneInfo":"+1"}],"passwordHashAlgorithm":{"algorithm":"MD5"}}"#,
            #"{"localId":"a","createdAt":1,"passwordHashAlgorithm":"MD5"}"#,
            #"{"localId":"a","createdAt":1,"mfaInfo":[{"mfaEnrollmentId":"m","phoneInfo":"+1"}"#,
            "{\"localId\":\"a\u{1}\",\"createdAt\":1}",                          // a raw control character
            #"{}"#, #"[]"#, "", "null", #"{"localId":"a","createdAt":1,}"#,
        ]
        for doc in docs {
            XCTAssertEqual(loaded(doc), Codecs.decodeUser(doc), doc)
            if let f = fast(doc) { XCTAssertEqual(f, Codecs.decodeUser(doc), "read directly: \(doc)") }
        }
        // Deep nesting: the generic parse of the whole document sets the limit.
        for depth in [120, 126, 127, 128, 130] {
            let deep = String(repeating: "[", count: depth) + String(repeating: "]", count: depth)
            let doc = #"{"localId":"a","createdAt":1,"passwordHashAlgorithm":{"x":"# + deep + "}}"
            XCTAssertEqual(loaded(doc), Codecs.decodeUser(doc), "depth \(depth)")
        }
        XCTAssertNil(UserRowDecoder(UserFieldTable.standard.adding(UserField("extra", value: { $0.extensions["extra"] },
                                                                               assign: { $0.extensions["extra"] = $1 }))),
                     "another table: the generic way")
    }

    /// Every truncation of a real document: never a crash, always the generic answer.
    func testTruncationsDecodeAsTheGenericWayDoes() {
        var u = UserRecord(localId: "t\"é", createdAt: 1_700_000_000_000)
        u.phoneNumber = "+15550000001"
        u.customAttributes = #"{"role":"tester"}"#
        u.providerUserInfo = [ProviderUserInfo(providerId: "google.com", rawId: "g")]
        u.lastLoginAt = 1 << 60
        let doc = Array(Codecs.encode(u).utf8)
        for n in 0...doc.count {
            let cut = Array(doc.prefix(n))
            let fastResult = cut.withUnsafeBufferPointer { decoder.decode($0) }
            let generic = Codecs.decodeUser(String(decoding: cut, as: UTF8.self))
            XCTAssertEqual(fastResult ?? generic, generic, "cut at \(n)")
        }
    }

    /// An unreadable document anywhere in the table (here in a later chunk, decoded by a worker) fails the load,
    /// naming the store; a document this version did not write but that parses loads the generic way.
    func testAnUnreadableRowFailsTheLoadAndAForeignOneLoads() throws {
        let dir = TemporaryDirectory.make("row-decoder-bad")
        defer { TemporaryDirectory.remove(dir) }
        let key = StoreKey(projectId: "p")
        let n = UserRowChunk.rows * 2 + 17
        do {
            let d = try DataDirectory(path: dir)
            try d.record((0..<n).map { i in .userSaved(key, UserRecord(localId: "u" + String(100_000 + i), createdAt: Int64(i))) })
            d.close()
        }
        func setDoc(_ id: String, _ doc: String) throws {
            let c = try SQLiteConnection(path: dir + "/emulator.sqlite3")
            try c.run("UPDATE users SET doc = ? WHERE local_id = ?", [.text(doc), .text(id)])
        }
        // Foreign but readable: a duplicate key, spaces, a fraction (the generic way rounds it toward zero).
        try setDoc("u" + String(100_000 + n - 5), #" {"localId":"u\#(100_000 + n - 5)","createdAt":7.9,"displayName":"a","displayName":"b"} "#)
        do {
            let d = try DataDirectory(path: dir)
            let users = try d.loadSnapshot().stores.first { $0.key == key }?.allUsers ?? []
            d.close()
            XCTAssertEqual(users.count, n)
            XCTAssertEqual(users.map(\.localId), (0..<n).map { "u" + String(100_000 + $0) }, "row order")
            let foreign = users[n - 5]
            XCTAssertEqual(foreign.displayName, "b")
            XCTAssertEqual(foreign.createdAt, 7)
        }
        try setDoc("u" + String(100_000 + n - 3), #"{"localId":"x","createdAt":"#)
        let d = try DataDirectory(path: dir)
        defer { d.close() }
        XCTAssertThrowsError(try d.loadSnapshot()) { error in
            XCTAssertTrue("\(error)".contains("unreadable user in p"), "\(error)")
        }
    }

    /// The streamed load keeps each store's users apart (rows of several projects and tenants, in key order).
    func testUsersOfSeveralStoresLoadIntoTheirStores() throws {
        let dir = TemporaryDirectory.make("row-decoder")
        defer { TemporaryDirectory.remove(dir) }
        let keys = [StoreKey(projectId: "a"), StoreKey(projectId: "a", tenantId: "t1"), StoreKey(projectId: "b"), StoreKey(projectId: "a", tenantId: "t2")]
        do {
            let d = try DataDirectory(path: dir)
            var changes: [StateChange] = []
            for (n, k) in keys.enumerated() {
                for i in 0..<(50 * (n + 1)) {
                    var u = UserRecord(localId: "\(k)-\(i)", createdAt: Int64(i))
                    u.displayName = "user \(i) of \(k)"
                    if i % 7 == 0 { u.passwordHashAlgorithm = ["algorithm": "MD5"]; u.passwordHash = "h" }
                    changes.append(.userSaved(k, u))
                }
            }
            try d.record(changes)
            d.close()
        }
        let d = try DataDirectory(path: dir)
        defer { d.close() }
        let stores = try d.loadSnapshot().stores
        XCTAssertEqual(Set(stores.map(\.key)), Set(keys))
        for (n, k) in keys.enumerated() {
            let users = stores.first { $0.key == k }?.allUsers ?? []
            XCTAssertEqual(users.count, 50 * (n + 1), "\(k)")
            XCTAssertTrue(users.allSatisfy { $0.localId.hasPrefix("\(k)-") && $0.displayName?.hasSuffix(" of \(k)") == true }, "\(k)")
        }
    }
}
