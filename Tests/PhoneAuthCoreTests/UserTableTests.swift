import PhoneAuthTestSupport
import XCTest

@testable import PhoneAuthCore

/// `UserTable` against a plain dictionary: random inserts (in order and out of it), replacements and deletes, with
/// enough of each to cross the recent-uid merges and the dead-uid compactions; every page and lookup must agree.
final class UserTableTests: XCTestCase {
    private func user(_ id: String, _ n: Int) -> UserRecord {
        var u = UserRecord(localId: id, createdAt: Int64(n))
        u.displayName = "user \(n)"
        if n % 3 == 0 { u.phoneNumber = "+1555\(n)" }
        if n % 5 == 0 { u.photoUrl = "https://example.com/\(n).png" }
        return u
    }

    private func assertSame(_ t: UserTable, _ model: [String: UserRecord], _ rng: inout SplitMix, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(t.count, model.count, file: file, line: line)
        let sorted = model.keys.sorted()
        XCTAssertEqual(t.ids(after: nil, limit: .max), sorted, file: file, line: line)
        // A few pages from random places, and from uids that are not (or no longer) in the table.
        for _ in 0..<5 {
            let after: String? = sorted.isEmpty ? nil : (rng.next() % 2 == 0 ? sorted[Int(rng.next() % UInt64(sorted.count))] : "u\(rng.next() % 100_000)")
            let limit = Int(rng.next() % 50) + 1
            let expected = Array(sorted.filter { after == nil || $0 > after! }.prefix(limit))
            XCTAssertEqual(t.ids(after: after, limit: limit), expected, "after \(after ?? "nil")", file: file, line: line)
        }
        var seen = 0
        for (id, u) in t {
            XCTAssertEqual(model[id], u, file: file, line: line)
            seen += 1
        }
        XCTAssertEqual(seen, model.count, file: file, line: line)
        XCTAssertEqual(Set(t.keys), Set(model.keys), file: file, line: line)
    }

    func testRandomOperationsMatchADictionary() {
        var rng = SplitMix(seed: 29)
        var t = UserTable()
        var model: [String: UserRecord] = [:]
        var n = 0
        // Phase 1: in order (the append path), phase 2: random uids (merges), phase 3: deletes and re-inserts of deleted
        // uids (dead uids, compactions), phase 4: everything mixed.
        for _ in 0..<6000 {
            n += 1
            let id = String(format: "a%07d", n)
            XCTAssertNil(t.updateValue(user(id, n), forKey: id))
            model[id] = user(id, n)
        }
        assertSame(t, model, &rng)
        for _ in 0..<9000 {
            n += 1
            let id = "r\(rng.next() % 1_000_000)"
            let old = t.updateValue(user(id, n), forKey: id)
            XCTAssertEqual(old, model[id])
            model[id] = user(id, n)
        }
        assertSame(t, model, &rng)
        var deleted: [String] = []
        for _ in 0..<7000 {
            let keys = Array(model.keys)
            let id = keys[Int(rng.next() % UInt64(keys.count))]
            XCTAssertEqual(t.removeValue(forKey: id), model.removeValue(forKey: id))
            deleted.append(id)
        }
        assertSame(t, model, &rng)
        for id in deleted.prefix(3000) {
            n += 1
            XCTAssertNil(t.updateValue(user(id, n), forKey: id))
            model[id] = user(id, n)
        }
        assertSame(t, model, &rng)
        for _ in 0..<20000 {
            n += 1
            switch rng.next() % 4 {
            case 0, 1:
                let id = rng.next() % 2 == 0 ? "r\(rng.next() % 1_000_000)" : String(format: "z%07d", n)
                XCTAssertEqual(t.updateValue(user(id, n), forKey: id), model[id])
                model[id] = user(id, n)
            case 2:
                guard !model.isEmpty else { continue }
                let keys = Array(model.keys)
                let id = keys[Int(rng.next() % UInt64(keys.count))]
                XCTAssertEqual(t.removeValue(forKey: id), model.removeValue(forKey: id))
            default:
                let id = "r\(rng.next() % 1_000_000)"
                XCTAssertEqual(t[id], model[id])
                XCTAssertEqual(t.contains(id), model[id] != nil)
                XCTAssertNil(t.removeValue(forKey: "missing\(n)"))
            }
            if n % 5000 == 0 { assertSame(t, model, &rng) }
        }
        assertSame(t, model, &rng)
        for id in Array(model.keys) { XCTAssertNotNil(t.removeValue(forKey: id)) }
        XCTAssertTrue(t.isEmpty)
        XCTAssertEqual(t.ids(after: nil, limit: 10), [])
    }

    /// A restart's decoded chunks become the table's own: the same table as saving the records one at a time, then
    /// it takes replacements, new users (into the short last chunk, then new chunks) and deletes like any other;
    /// chunks not as decoded, or a uid twice, are refused.
    func testAdoptedChunksMakeTheSameTableAsSaving() {
        let n = 2 * UserTable.chunkSize + 100
        // Not in uid order: a data directory's rows may come in any order.
        let ids = (0..<n).map { "u\(($0 * 7919) % n)" }
        let chunks = stride(from: 0, to: n, by: UserTable.chunkSize).map { start in
            ContiguousArray(ids[start..<min(n, start + UserTable.chunkSize)].enumerated().map { user($0.element, start + $0.offset) })
        }
        guard var t = UserTable(adopting: chunks) else { return XCTFail("refused") }
        var model: [String: UserRecord] = [:]
        for c in chunks { for u in c { model[u.localId] = u } }
        var rng = SplitMix(seed: 7)
        assertSame(t, model, &rng)
        XCTAssertEqual(t.updateValue(user("u5", 99), forKey: "u5")?.localId, "u5")
        model["u5"] = user("u5", 99)
        for k in 0..<(UserTable.chunkSize + 10) { t.updateValue(user("new\(k)", k), forKey: "new\(k)"); model["new\(k)"] = user("new\(k)", k) }
        for k in stride(from: 0, to: n, by: 3) { t.removeValue(forKey: "u\(k)"); model["u\(k)"] = nil }
        assertSame(t, model, &rng)
        XCTAssertTrue(UserTable(adopting: []) == nil)
        XCTAssertTrue(UserTable(adopting: [ContiguousArray(chunks[0].prefix(10)), chunks[1]]) == nil, "a short chunk before the last")
        XCTAssertTrue(UserTable(adopting: [chunks[0], [user(chunks[0][7].localId, 1)]]) == nil, "a uid twice")
        XCTAssertTrue(UserTable(adopting: [chunks[0], [user("other", 1)]]) != nil)
    }

    func testReplacingKeepsTheSlotAndReturnsTheOldRecord() {
        var t = UserTable()
        t.updateValue(user("b", 1), forKey: "b")
        t.updateValue(user("a", 2), forKey: "a")
        XCTAssertEqual(t.updateValue(user("b", 3), forKey: "b")?.createdAt, 1)
        XCTAssertEqual(t["b"]?.createdAt, 3)
        XCTAssertEqual(t.count, 2)
        XCTAssertEqual(t.ids(after: "", limit: 5), ["a", "b"])
        XCTAssertEqual(t.withUser("a") { $0.displayName } ?? nil, "user 2")
        XCTAssertNil(t.withUser("c") { $0.localId })
    }

    /// The rarely set fields live in a shared box: writing one on a copy never changes the original, clearing them
    /// all drops the box, and equality compares values.
    func testRareFieldsAreValues() {
        var a = UserRecord(localId: "u", createdAt: 1)
        a.photoUrl = "https://example.com/p.png"
        var b = a
        b.screenName = "sn"
        b.providerUserInfo = [ProviderUserInfo(providerId: "google.com", rawId: "g1")]
        XCTAssertNil(a.screenName)
        XCTAssertTrue(a.providerUserInfo.isEmpty)
        XCTAssertEqual(b.photoUrl, "https://example.com/p.png")
        XCTAssertNotEqual(a, b)
        b.screenName = nil
        b.providerUserInfo = []
        XCTAssertEqual(a, b)
        b.photoUrl = nil
        XCTAssertEqual(b, UserRecord(localId: "u", createdAt: 1))
        var c = UserRecord(localId: "u", createdAt: 1)
        c.lastLoginAt = 0
        XCTAssertEqual(c.lastLoginAt, 0)
        c.lastLoginAt = nil
        XCTAssertNil(c.lastLoginAt)
        c.validSince = -5
        XCTAssertEqual(c.validSince, -5)
        XCTAssertLessThanOrEqual(MemoryLayout<UserRecord>.size, 184)
    }

    /// A restart's users (enough for the bulk path, whose indexes are built on a second thread): every uid, phone
    /// number and email finds its user, and the result is the one saving each user in turn gives.
    func testARestoredStoreFindsEveryUserByUidPhoneAndEmail() {
        let n = AuthStore.parallelRestoreMinimum + 1234
        var users: [UserRecord] = []
        for i in 0..<n {
            var u = UserRecord(localId: "u\((i &* 7919) % 1_000_003)x", createdAt: Int64(i))
            if i % 2 == 0 { u.phoneNumber = "+1555\(1_000_000 + i)" }
            if i % 3 == 0 { u.email = "User\(i)@Example.com" }
            if i % 500 == 0 { u.providerUserInfo = [ProviderUserInfo(providerId: "google.com", rawId: "g\(i)")] }
            users.append(u)
        }
        var small = users.prefix(100).map { $0 }
        small.reverse()
        // As a data directory's decoded chunks too (`StoreSnapshot.userChunks`: taken as the table's own).
        for (label, batch, chunked) in [("bulk", users, false), ("one at a time", small, false), ("chunks", users, true), ("one chunk", small, true)] {
            let e = makeTestEmulator(seed: 1)
            var snap = StoreSnapshot(key: StoreKey(projectId: "p"))
            if chunked { snap.userChunks = Self.chunks(batch) } else { snap.users = batch }
            e.restore([snap], refreshTokens: [])
            e.existingStore(StoreKey(projectId: "p"))!.read { s in
                XCTAssertEqual(s.users.count, batch.count, label)
                XCTAssertEqual(s.users.ids(after: nil, limit: .max), batch.map(\.localId).sorted(), label)
                for u in batch {
                    XCTAssertEqual(s.users[u.localId], u, label)
                    if let p = u.phoneNumber { XCTAssertEqual(s.user(phone: p)?.localId, u.localId, label) }
                    if let m = u.email { XCTAssertEqual(s.user(email: m)?.localId, u.localId, label) }
                }
                XCTAssertEqual(s.phoneIndex.count, batch.filter { $0.phoneNumber != nil }.count, label)
                XCTAssertEqual(s.emailIndex.count, batch.filter { $0.email != nil }.count, label)
                XCTAssertEqual(s.federatedIndex.count, batch.filter { !$0.providerUserInfo.isEmpty }.count, label)
            }
        }
    }

    private static func chunks(_ users: [UserRecord]) -> [ContiguousArray<UserRecord>] {
        stride(from: 0, to: users.count, by: UserTable.chunkSize).map { ContiguousArray(users[$0..<min(users.count, $0 + UserTable.chunkSize)]) }
    }

    /// Chunks that cannot be the table as they are restore one record at a time, as `save` keeps them: a uid twice
    /// (one `String` in two byte forms, as SQLite's byte-compared keys can hold), and a store that has users already.
    func testChunksThatCannotBeAdoptedRestoreAsSaved() {
        let n = AuthStore.parallelRestoreMinimum + 10
        var users = (0..<n).map { i -> UserRecord in
            var u = UserRecord(localId: "u\(i)", createdAt: Int64(i))
            u.phoneNumber = "+1555\(1_000_000 + i)"
            return u
        }
        users[10] = UserRecord(localId: "caf\u{E9}", createdAt: 1)
        users[n - 3] = UserRecord(localId: "cafe\u{301}", createdAt: 2)
        users[n - 3].phoneNumber = "+15550000001"
        let key = StoreKey(projectId: "p")
        let e = makeTestEmulator(seed: 1)
        var snap = StoreSnapshot(key: key)
        snap.userChunks = Self.chunks(users)
        e.restore([snap], refreshTokens: [])
        e.existingStore(key)!.read { s in
            XCTAssertEqual(s.users.count, n - 1)
            XCTAssertEqual(s.users["caf\u{E9}"]?.createdAt, 2, "the later row wins")
            XCTAssertEqual(s.user(phone: "+15550000001")?.createdAt, 2)
            XCTAssertEqual(s.user(phone: "+1555\(1_000_000 + n - 1)")?.localId, "u\(n - 1)")
        }
        // Into a store with a user already: both kept.
        let f = makeTestEmulator(seed: 1)
        var first = StoreSnapshot(key: key)
        first.users = [UserRecord(localId: "zz", createdAt: 9)]
        var more = StoreSnapshot(key: key)
        more.userChunks = Self.chunks(Array(users.prefix(100)))
        f.restore([first, more], refreshTokens: [])
        f.existingStore(key)!.read { s in
            XCTAssertEqual(s.users.count, 101)
            XCTAssertEqual(s.users["zz"]?.createdAt, 9)
            XCTAssertEqual(s.user(phone: "+15551000005")?.localId, "u5")
        }
    }
}
