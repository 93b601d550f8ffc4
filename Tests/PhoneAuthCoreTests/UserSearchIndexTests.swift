import PhoneAuthTestSupport
import XCTest

@testable import PhoneAuthCore

/// The console search's index against two references: a plain definition of a match (a word of a field starts with
/// the query, ASCII case folded) for which users match, and the table's scan for the order of the pages. Random
/// inserts, replacements (searchable fields changed and not) and deletes (the last record taking a deleted one's slot)
/// between the searches, enough of them to split blocks and empty them.
final class UserSearchIndexTests: XCTestCase {
    private static let names = ["Ann Annabel", "ann-marie Smith", "Bob", "BOBBY tables", "Zoë Ünal", "x", "Ann", "  lead space",
                                "Dr. Who (2005)", "O'Brien", "annabel.lee@poe", ""]
    private static let domains = ["Example.com", "example.test", "annex.org", "b.co"]

    private func user(_ id: String, _ rng: inout SplitMix) -> UserRecord {
        var u = UserRecord(localId: id, createdAt: 1)
        let r = rng.next()
        if r % 4 != 0 { u.displayName = Self.names[Int(r / 4 % UInt64(Self.names.count))] }
        if r % 3 == 0 { u.email = "\(["ann", "Bob", "zed", "anna.b"][Int(r / 16 % 4)])\(r % 50)@\(Self.domains[Int(r / 64 % 4)])" }
        if r % 5 != 0 { u.phoneNumber = "+\(["1555", "44207", "1650", "33"][Int(r / 32 % 4)])\(1_000_000 + r % 9_000_000)" }
        return u
    }

    /// The definition: uid, phone, email (and after its `@`), each display name word (up to byte 63) start with a prefix.
    private func reference(_ users: [String: UserRecord], _ prefixes: [[UInt8]]) -> Set<String> {
        func fold(_ s: some Sequence<UInt8>) -> [UInt8] { s.map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 } }
        let folded = Set(prefixes.filter { !$0.isEmpty }.map(fold))
        func starts(_ s: String?, _ words: ([UInt8]) -> [Int]) -> Bool {
            guard let s else { return false }
            let b = fold(s.utf8)
            return words(b).contains { w in (w..<b.count).contains { folded.contains(Array(b[w...$0])) } }
        }
        let sep = Set(" \t\n\r-_.,()/@+&'\":;".utf8)
        return Set(users.values.filter { u in
            starts(u.localId) { $0.isEmpty ? [] : [0] } || starts(u.phoneNumber) { $0.isEmpty ? [] : [0] }
                || starts(u.email) { b in (b.isEmpty ? [] : [0]) + (b.firstIndex(of: 0x40).map { $0 + 1 < b.count && $0 + 1 <= 63 ? [$0 + 1] : [] } ?? []) }
                || starts(u.displayName) { b in b.indices.filter { $0 <= 63 && !sep.contains(b[$0]) && ($0 == 0 || sep.contains(b[$0 - 1])) } }
        }.map(\.localId))
    }

    private static let queries = ["Ann", "annabel", "a", "BOBBY T", "+1555", "555", "(650) 1", "EXAMPLE.COM", "ann1", "Ünal",
                                  "lead", "2005", "brien", "U", "nobody", "+", "dr. who"]

    /// Every page of each query through the index, against the scan's order and the definition's users.
    private func assertSearches(_ t: UserTable, _ users: [String: UserRecord], queries: [String] = queries,
                                file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertTrue(t.hasSearchIndex, file: file, line: line)
        for q in queries {
            let prefixes = UserTable.queryPrefixes(q)
            let expected = reference(users, prefixes)
            let all = t.searchScan(prefixes: prefixes, after: nil, limit: 100_000)
            XCTAssertEqual(all.matched, expected.count, "q \(q)", file: file, line: line)
            XCTAssertEqual(Set(all.matches.map(\.user.localId)), expected, "q \(q)", file: file, line: line)
            XCTAssertEqual(all.matches.map(\.key), all.matches.map(\.key).sorted(), file: file, line: line)
            if all.matches.count > 3 {
                // The scan's own cursor.
                let k = all.matches.count / 2
                let rest = t.searchScan(prefixes: prefixes, after: all.matches[k].key, limit: 2)
                XCTAssertEqual(rest.matches.map(\.key), all.matches[(k + 1)...].prefix(2).map(\.key), file: file, line: line)
                XCTAssertEqual(rest.more, all.matches.count > k + 3, file: file, line: line)
            }
            // Small pages through the first few only (each page looks a number up under every calling code).
            for (size, maxPages) in [(1, 25), (3, 25), (40, 10_000), (1000, 10_000)] {
                var seen: [SearchKey] = []
                var cursor: SearchKey?
                var pages = 0
                while pages < maxPages {
                    // Counted on the first page only (the count is the same on each; the reference's cost).
                    let page = t.search(prefixes: prefixes, after: cursor, limit: size, countUpTo: cursor == nil ? 1000 : 0)
                    if cursor == nil {
                        if page.estimated {
                            XCTAssertGreaterThan(page.matched, 1000, file: file, line: line)
                            XCTAssertGreaterThanOrEqual(page.matched, expected.count, file: file, line: line)
                        } else {
                            XCTAssertEqual(page.matched, expected.count, "q \(q)", file: file, line: line)
                        }
                    }
                    for m in page.matches { XCTAssertEqual(m.user, users[m.user.localId], file: file, line: line) }
                    seen += page.matches.map(\.key)
                    pages += 1
                    guard page.more, let last = page.matches.last else { break }
                    XCTAssertEqual(page.matches.count, size, file: file, line: line)
                    // Through the wire form, as the console sends it back.
                    cursor = SearchKey(token: last.key.token)
                    XCTAssertEqual(cursor, last.key, file: file, line: line)
                }
                XCTAssertEqual(seen, Array(all.matches.map(\.key).prefix(maxPages * size)), "q \(q) size \(size)", file: file, line: line)
            }
        }
    }

    func testRandomChangesKeepTheIndexEqualToTheDefinition() {
        var rng = SplitMix(seed: 2929)
        var t = UserTable()
        var users: [String: UserRecord] = [:]
        func put(_ id: String) {
            let u = user(id, &rng)
            t.updateValue(u, forKey: id)
            users[id] = u
        }
        for i in 0..<300 { put("u\(i)") }
        t.buildSearchIndex()
        assertSearches(t, users)
        // Inserts out of order (more than a block of entries: splits), replacements, deletes (moves).
        for _ in 0..<2500 {
            let r = rng.next() % 10
            if r < 5 {
                put(["u", "U", "ann", "b"][Int(rng.next() % 4)] + "\(rng.next() % 5000)")
            } else if r < 7, let id = users.keys.randomElement(using: &rng) {
                if rng.next() % 2 == 0 {
                    put(id)
                } else {
                    var u = users[id]!
                    u.lastLoginAt = Int64(rng.next() % 1000)  // a sign-in: no searchable field changes
                    t.updateValue(u, forKey: id)
                    users[id] = u
                }
            } else if let id = users.keys.randomElement(using: &rng) {
                XCTAssertEqual(t.removeValue(forKey: id), users.removeValue(forKey: id))
            }
        }
        XCTAssertTrue(t.hasSearchIndex)
        assertSearches(t, users)
        // Down to a few, then empty: blocks emptied and dropped.
        for id in users.keys.shuffled(using: &rng).dropFirst(5) { t.removeValue(forKey: id); users[id] = nil }
        assertSearches(t, users)
        for id in Array(users.keys) { t.removeValue(forKey: id); users[id] = nil }
        XCTAssertEqual(t.search(prefixes: [Array("a".utf8)], after: nil, limit: 10).matches.count, 0)
        put("again")
        assertSearches(t, users)
    }

    func testABuiltIndexMatchesOneKeptFromTheStart() {
        var rng = SplitMix(seed: 7)
        var kept = UserTable()
        kept.buildSearchIndex()
        var users: [String: UserRecord] = [:]
        for i in 0..<700 {
            let id = "k\(rng.next() % 100_000)-\(i)"
            let u = user(id, &rng)
            kept.updateValue(u, forKey: id)
            users[id] = u
        }
        var built = UserTable()
        for (id, u) in users { built.updateValue(u, forKey: id) }
        built.buildSearchIndex()
        assertSearches(kept, users)
        assertSearches(built, users)
        for q in ["a", "+1555", "ann"] {
            let p = UserTable.queryPrefixes(q)
            XCTAssertEqual(kept.search(prefixes: p, after: nil, limit: 1000).matches.map(\.key),
                           built.search(prefixes: p, after: nil, limit: 1000).matches.map(\.key))
        }
    }

    func testCanonicallyEquivalentFieldsAreReindexedByTheirBytes() {
        // "Zoë" precomposed (NFC) and decomposed (NFD) are one `String` to `==`, two texts to the index.
        var t = UserTable()
        t.buildSearchIndex()
        var users: [String: UserRecord] = [:]
        func name(_ i: Int, flipped: Bool) -> String { (i % 2 == 0) != flipped ? "Zo\u{EB} \(i)" : "Zoe\u{308} \(i)" }
        for i in 0..<60 {
            var u = UserRecord(localId: "n\(i)", createdAt: 1)
            u.displayName = name(i, flipped: false)
            u.email = i % 3 == 0 ? "zo\u{EB}\(i)@example.com" : nil
            t.updateValue(u, forKey: u.localId)
            users[u.localId] = u
        }
        for i in 0..<60 {
            var u = users["n\(i)"]!
            u.displayName = name(i, flipped: true)
            if let e = u.email { u.email = e.replacingOccurrences(of: "\u{EB}", with: "e\u{308}") }
            XCTAssertEqual(u, users["n\(i)"], "String's == sees no change")
            t.updateValue(u, forKey: u.localId)
            users[u.localId] = u
        }
        assertSearches(t, users, queries: ["zo", "Zoe", "zo\u{EB}", "zoe\u{308}", "zoe\u{308} 1", "n1"])
    }

    func testManyMatchesAreCountedAsAnUpperBound() {
        var t = UserTable()
        for i in 0..<1500 {
            var u = UserRecord(localId: "many\(i)", createdAt: 1)
            u.displayName = "Same Name"
            t.updateValue(u, forKey: u.localId)
        }
        t.buildSearchIndex()
        let page = t.search(prefixes: UserTable.queryPrefixes("same"), after: nil, limit: 10)
        XCTAssertTrue(page.estimated)
        XCTAssertEqual(page.matched, 1500)
        XCTAssertEqual(page.matches.count, 10)
        XCTAssertTrue(page.more)
        // "many" starts the uid (1,500) and no word: exact at 1,000 words or fewer, an upper bound past them.
        XCTAssertEqual(t.search(prefixes: UserTable.queryPrefixes("many1"), after: nil, limit: 10).matched, 611)
    }

    func testPhoneQueriesAsPeopleTypeThem() {
        let p = Set(UserTable.queryPrefixes("555 042 0017").map { String(decoding: $0, as: UTF8.self) })
        XCTAssertTrue(p.isSuperset(of: ["555 042 0017", "+5550420017", "+15550420017", "+445550420017"]))
        XCTAssertEqual(Set(UserTable.queryPrefixes("+1 (650) 555").map { String(decoding: $0, as: UTF8.self) }), ["+1 (650) 555", "+1650555"])
        XCTAssertEqual(UserTable.queryPrefixes("ann").count, 1)
        XCTAssertEqual(UserTable.queryPrefixes("1-800-FLOWERS").count, 1)
    }

    func testThePageAfterTheLongestNameHasAToken() {
        // A 128-byte uid and a display name of 1,024 UTF-16 units of 3 UTF-8 bytes each: the longest cursor.
        var t = UserTable()
        for i in 0..<2 {
            var u = UserRecord(localId: String(repeating: "\(i)", count: 128), createdAt: 1)
            u.displayName = String(repeating: "\u{20AC}", count: UserFieldLimits.displayName)
            t.updateValue(u, forKey: u.localId)
        }
        t.buildSearchIndex()
        let page = t.search(prefixes: UserTable.queryPrefixes("\u{20AC}"), after: nil, limit: 1)
        XCTAssertTrue(page.more)
        let token = try! XCTUnwrap(page.matches.last?.key.token)
        XCTAssertLessThanOrEqual(token.utf8.count, SearchKey.maxTokenLength)
        let next = t.search(prefixes: UserTable.queryPrefixes("\u{20AC}"), after: SearchKey(token: token), limit: 1)
        XCTAssertEqual(next.matches.map(\.user.localId), [String(repeating: "1", count: 128)])
        XCTAssertFalse(next.more)
    }

    func testTokensRoundTripAndAnythingElseIsRefused() {
        let k = SearchKey(text: Array("ann smith".utf8), uid: Array("uid\u{0}é".utf8), code: 0xC5)
        XCTAssertEqual(SearchKey(token: k.token), k)
        XCTAssertEqual(SearchKey(token: SearchKey(text: [], uid: [], code: 0).token), SearchKey(text: [], uid: [], code: 0))
        for bad in ["", "uid-017", "s1.", "s1.!!!", "s1.AAAA", "s1." + String(repeating: "A", count: SearchKey.maxTokenLength), "s2." + String(k.token.dropFirst(3)),
                    "s1.AP____8"] {
            XCTAssertNil(SearchKey(token: bad), bad)
        }
    }
}
