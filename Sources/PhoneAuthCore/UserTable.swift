// # A store's users
//
// `AuthStore.users`: every user record of one project or tenant, by uid, with the uids in order for pages
// (`list_users`, `batchGet`, the console). Built for a million users (issue 29):
//
// - records are dense, in chunks of 4096 (a deleted record's slot takes the last one), and a dictionary maps a uid to
//   its slot. A `[String: UserRecord]` kept each ~300-byte record inline in a hash table that is between 3/8
//   and 3/4 full: up to 2.7× the records' own size, ~800 bytes a user at 200k. Here the table holds a slot number;
// - the uids in order are a sorted array plus a small sorted array of recent insertions, merged into it in bulk when
//   it fills (`SortedIDs`). A page is two binary searches and a merge walk of what it returns: O(page), where sorting
//   every uid for each page cost O(n log n) (a second per page at 1M users). A uid that arrives in order (an import
//   of an export, which is sorted by uid) appends in O(1). A deleted uid stays in the sorted array, skipped by pages,
//   until enough have gone that a compaction pays for itself.

/// The users of one store: dense records by uid, and their uids in order.
public struct UserTable: Sendable, Sequence {
    /// Records per chunk: the records live in chunks of this many, so the table never holds more than one chunk of
    /// room it does not use (an array doubling its way to a million records held up to twice their size) and growing
    /// never copies the records already stored.
    public static let chunkSize = 4096
    private var chunks: [ContiguousArray<UserRecord>] = []
    /// uid → slot, 4 bytes a value (a million uids take 2^21 buckets: 8 bytes a user saved against `Int`).
    private var slots: [String: UInt32] = [:]
    private var order = SortedIDs()
    public private(set) var count = 0
    /// The console search's index (UserSearchIndex.swift): nil until the first search, kept by every change after.
    private var search: UserSearchIndex?

    public init() {}

    /// A table of `chunks` as they are, copying no record (a restart's decoded chunks, `AuthStore.restoreUsers`):
    /// nil unless every chunk but the last holds `chunkSize` records and no uid appears twice.
    public init?(adopting chunks: [ContiguousArray<UserRecord>]) {
        guard let last = chunks.last, !last.isEmpty, last.count <= Self.chunkSize,
              chunks.dropLast().allSatisfy({ $0.count == Self.chunkSize }) else { return nil }
        let n = (chunks.count - 1) * Self.chunkSize + last.count
        var slots = [String: UInt32](minimumCapacity: n)
        var order = SortedIDs()
        order.reserveCapacity(n)
        var slot = 0
        for chunk in chunks {
            // The uids only, read in place (a record copied out of its chunk would retain each of its strings).
            let distinct = chunk.withUnsafeBufferPointer { records -> Bool in
                for i in records.indices {
                    let id = records[i].localId
                    guard slots.updateValue(UInt32(slot), forKey: id) == nil else { return false }
                    order.insert(id)
                    slot += 1
                }
                return true
            }
            guard distinct else { return nil }
        }
        self.chunks = chunks
        self.slots = slots
        self.order = order
        count = n
    }

    public var isEmpty: Bool { count == 0 }

    @inline(__always) private func record(_ slot: Int) -> UserRecord { chunks[slot / Self.chunkSize][slot % Self.chunkSize] }

    /// The user with this uid (a copy; `withUser` reads one in place).
    public subscript(id: String) -> UserRecord? {
        guard let i = slots[id].map(Int.init) else { return nil }
        return record(i)
    }

    public func contains(_ id: String) -> Bool { slots[id] != nil }

    /// Reads the user with this uid in place (nil: none).
    public func withUser<R>(_ id: String, _ body: (borrowing UserRecord) -> R) -> R? {
        guard let i = slots[id].map(Int.init) else { return nil }
        return body(chunks[i / Self.chunkSize][i % Self.chunkSize])
    }

    /// Every record, in slot order (not uid order: `ids(after:limit:)` pages in uid order).
    public var values: FlattenSequence<[ContiguousArray<UserRecord>]> { chunks.joined() }
    /// Every uid, in slot order.
    public var keys: LazyMapSequence<FlattenSequence<[ContiguousArray<UserRecord>]>, String> { chunks.joined().lazy.map(\.localId) }

    /// Room for `n` users in the uid tables (the records grow a chunk at a time).
    public mutating func reserveCapacity(_ n: Int) {
        slots.reserveCapacity(n)
        order.reserveCapacity(n)
        chunks.reserveCapacity((n + Self.chunkSize - 1) / Self.chunkSize)
    }

    /// Stores `user` under its uid; returns the record it replaced (moved out, not copied).
    @discardableResult
    public mutating func updateValue(_ user: UserRecord, forKey id: String) -> UserRecord? {
        if let i = slots[id].map(Int.init) {
            let reindex = search != nil && !chunks[i / Self.chunkSize].withUnsafeBufferPointer {
                UserSearchIndex.sameEntries($0[i % Self.chunkSize], user)
            }
            if reindex { indexRemove(slot: i) }
            var old = user
            swap(&old, &chunks[i / Self.chunkSize][i % Self.chunkSize])
            if reindex { indexInsert(slot: i) }
            return old
        }
        slots[id] = UInt32(count)
        if count % Self.chunkSize == 0 {
            var chunk = ContiguousArray<UserRecord>()
            chunk.reserveCapacity(Self.chunkSize)
            chunks.append(chunk)
        }
        let last = chunks.count - 1
        // An adopted short chunk (`init(adopting:)`) holds no room: it grows by doubling up to a chunk, not past it.
        if chunks[last].count == chunks[last].capacity {
            chunks[last].reserveCapacity(Swift.min(Self.chunkSize, Swift.max(16, 2 * chunks[last].count)))
        }
        chunks[last].append(user)
        count += 1
        order.insert(id)
        if search != nil { count <= UserSearchIndex.maxSlots ? indexInsert(slot: count - 1) : (search = nil) }
        if order.dead > Swift.max(SortedIDs.mergeAt, order.stored / 8) { order.compact { slots[$0] != nil } }
        return nil
    }

    /// Removes and returns the user with this uid (the last record takes its slot).
    @discardableResult
    public mutating func removeValue(forKey id: String) -> UserRecord? {
        guard let i = slots.removeValue(forKey: id).map(Int.init) else { return nil }
        let last = count - 1
        var moved: [(UserSearchIndex.Position, UInt32)] = []
        if search != nil {
            indexRemove(slot: i)
            if i != last { moved = indexLocate(slot: last) }
        }
        var removed = chunks[chunks.count - 1].removeLast()
        if i != last {
            swap(&removed, &chunks[i / Self.chunkSize][i % Self.chunkSize])
            slots[record(i).localId] = UInt32(i)
            // The moved record's entries name its new slot (found above, by their text, before it moved).
            if search != nil { for (p, e) in moved { search!.replace(at: p, with: UserSearchIndex.moved(e, to: i)) } }
        }
        if chunks[chunks.count - 1].isEmpty { chunks.removeLast() }
        count -= 1
        order.remove(id)
        if order.dead > Swift.max(SortedIDs.mergeAt, order.stored / 8) { order.compact { slots[$0] != nil } }
        return removed
    }

    /// Up to `limit` uids greater than `after` (nil or empty: from the first), in order: O(limit) plus the deleted uids
    /// it steps over (bounded: a compaction runs once they are an eighth of the array).
    public func ids(after: String?, limit: Int) -> [String] {
        var out: [String] = []
        guard limit > 0 else { return out }
        order.walk(after: after.flatMap { $0.isEmpty ? nil : $0 }) { id in
            guard slots[id] != nil else { return true }
            out.append(id)
            return out.count < limit
        }
        return out
    }

    public func makeIterator() -> Iterator { Iterator(chunks: chunks) }

    public struct Iterator: IteratorProtocol {
        let chunks: [ContiguousArray<UserRecord>]
        var c = 0, i = 0
        init(chunks: [ContiguousArray<UserRecord>]) { self.chunks = chunks }
        public mutating func next() -> (key: String, value: UserRecord)? {
            while c < chunks.count {
                if i < chunks[c].count {
                    defer { i += 1 }
                    return (chunks[c][i].localId, chunks[c][i])
                }
                c += 1
                i = 0
            }
            return nil
        }
    }
}

extension UserTable: Equatable {
    /// Same users (slot order and deleted uids in the order are not state).
    public static func == (a: UserTable, b: UserTable) -> Bool {
        a.count == b.count && a.values.allSatisfy { b[$0.localId] == $0 }
    }
}

/// The console search (UserSearchIndex.swift): the index's upkeep and its pages.
extension UserTable {
    /// A match of a search: the user and its entry's place in the order (the next page's cursor).
    public struct SearchMatch {
        public let user: UserRecord
        public let key: SearchKey
    }

    public struct SearchPage {
        /// Up to `limit` matches after the cursor, in index order, each user once.
        public var matches: [SearchMatch] = []
        /// Another match follows the last one.
        public var more = false
        /// Users that match: exact unless `estimated` (then the matching entries, an upper bound).
        public var matched = 0
        public var estimated = false
    }

    /// The table has its search index (`buildSearchIndex`).
    public var hasSearchIndex: Bool { search != nil }

    /// Builds the search index (nothing when there is one, or when the table has more users than it can name).
    public mutating func buildSearchIndex() {
        guard search == nil, count <= UserSearchIndex.maxSlots else { return }
        search = Self.makeSearchIndex(chunks)
    }

    /// Sorts every entry of `chunks`: by a 16-byte folded prefix of the text first (integer comparisons), the full
    /// order only for entries whose first 16 bytes are the same.
    private static func makeSearchIndex(_ chunks: [ContiguousArray<UserRecord>]) -> UserSearchIndex {
        struct Sortable { var k1: UInt64, k2: UInt64, e: UInt32 }
        var all: [Sortable] = []
        var n = 0
        for c in chunks { n += c.count }
        all.reserveCapacity(n * 3)
        for f in SearchField.allCases {
            var slot = 0
            for chunk in chunks {
                chunk.withUnsafeBufferPointer { records in
                    for r in records.indices {
                        if var v = UserSearchIndex.value(records[r], f) {
                            v.withUTF8 { b in
                                UserSearchIndex.forEachWord(f, b) { off in
                                    var k1: UInt64 = 0, k2: UInt64 = 0
                                    for i in 0..<16 {
                                        let byte = off + i < b.count ? UInt64(UserSearchIndex.lower(b[off + i])) : 0
                                        if i < 8 { k1 = k1 << 8 | byte } else { k2 = k2 << 8 | byte }
                                    }
                                    all.append(Sortable(k1: k1, k2: k2, e: UserSearchIndex.entry(slot: slot, field: f, offset: off)))
                                }
                            }
                        }
                        slot += 1
                    }
                }
            }
        }
        let t = SearchText(chunks: chunks, chunkSize: chunkSize)
        all.sort { a, b in
            if a.k1 != b.k1 { return a.k1 < b.k1 }
            if a.k2 != b.k2 { return a.k2 < b.k2 }
            return t.compare(a.e, t.key(b.e)) < 0
        }
        return UserSearchIndex(sorted: all.map(\.e))
    }

    private var searchText: SearchText { SearchText(chunks: chunks, chunkSize: Self.chunkSize) }

    private func entries(slot: Int) -> [UInt32] {
        chunks[slot / Self.chunkSize].withUnsafeBufferPointer { UserSearchIndex.entries(of: $0[slot % Self.chunkSize], slot: slot) }
    }

    /// Where `e` goes in the index, by its text as the record in its slot reads now (nil: no index). `search!` in
    /// place each time, here and in the callers: a copy of the index held across a change would copy its blocks.
    private func place(_ e: UInt32, _ t: SearchText) -> UserSearchIndex.Position? {
        guard search != nil else { return nil }
        let k = t.key(e)
        return search!.partition { t.compare($0, k) < 0 }
    }

    /// Where `e` is. An entry not where its text says drops the index (the next search builds it again), never the
    /// server.
    private mutating func find(_ e: UInt32, _ t: SearchText) -> UserSearchIndex.Position? {
        guard let p = place(e, t) else { return nil }
        guard p < search!.end, search![p] == e else { search = nil; return nil }
        return p
    }

    /// Adds the entries of the record in `slot`.
    private mutating func indexInsert(slot: Int) {
        let t = searchText
        for e in entries(slot: slot) {
            guard let p = place(e, t) else { return }
            search!.insert(e, at: p)
        }
    }

    /// Removes the entries of the record in `slot` (still there).
    private mutating func indexRemove(slot: Int) {
        let t = searchText
        for e in entries(slot: slot) {
            guard let p = find(e, t) else { return }
            search!.remove(at: p)
        }
    }

    /// Where the entries of the record in `slot` are.
    private mutating func indexLocate(slot: Int) -> [(UserSearchIndex.Position, UInt32)] {
        let t = searchText
        var out: [(UserSearchIndex.Position, UInt32)] = []
        for e in entries(slot: slot) {
            guard let p = find(e, t) else { return [] }
            out.append((p, e))
        }
        return out
    }

    /// The matches of `prefixes` (ASCII case folded) after `cursor`: at most `limit`, in index order, each user once
    /// (at its first matching entry), and how many users match (counted exactly up to `countUpTo` matching entries).
    /// With the index, O(prefixes · log n + what it returns); without (`buildSearchIndex` not run, or too many users
    /// for it), a scan of every user.
    public func search(prefixes raw: [[UInt8]], after cursor: SearchKey?, limit: Int, countUpTo: Int = 1000) -> SearchPage {
        let prefixes = Self.searchPrefixes(raw)
        guard !prefixes.isEmpty else { return SearchPage() }
        guard let idx = search else { return scan(prefixes, after: cursor, limit: limit) }
        let t = searchText
        // One range per prefix that starts an entry (a number typed without `+` is a few hundred prefixes, most
        // starting nothing: one binary search each).
        var ranges: [(lo: UserSearchIndex.Position, hi: UserSearchIndex.Position)] = []
        for p in prefixes {
            let lo = idx.partition { t.comparePrefix($0, p) < 0 }
            guard lo < idx.end, t.comparePrefix(idx[lo], p) == 0 else { continue }
            ranges.append((lo, idx.partition { t.comparePrefix($0, p) <= 0 }))
        }
        var page = SearchPage()
        let entriesMatching = ranges.reduce(0) { $0 + idx.distance($1.lo, $1.hi) }
        let from = cursor.map { c in idx.partition { t.compare($0, c) <= 0 } } ?? idx.start
        // The user of an entry matches first at it when no other of its matching entries comes before it: worked out
        // once per user a request meets (a user's words are many at most: 32 names' worth, not one pass each).
        var firstOf: [Int: UInt32] = [:]
        func first(_ e: UInt32) -> Bool {
            let slot = UserSearchIndex.slot(e)
            if let f = firstOf[slot] { return f == e }
            let matching = entries(slot: slot).filter { t.matchesAny($0, prefixes) }
            var f = matching.first ?? e
            if matching.count > 1 {
                var best = t.key(f)
                for x in matching.dropFirst() {
                    let k = t.key(x)
                    if k < best { (f, best) = (x, k) }
                }
            }
            firstOf[slot] = f
            return f == e
        }
        walk: for r in ranges {
            var p = Swift.max(r.lo, from)
            while p < r.hi {
                let e = idx[p]
                if first(e) {
                    if page.matches.count == limit { page.more = true; break walk }
                    let slot = UserSearchIndex.slot(e)
                    page.matches.append(SearchMatch(user: chunks[slot / Self.chunkSize][slot % Self.chunkSize], key: t.key(e)))
                }
                p = idx.after(p)
            }
        }
        if entriesMatching <= countUpTo {
            for r in ranges {
                var p = r.lo
                while p < r.hi {
                    if first(idx[p]) { page.matched += 1 }
                    p = idx.after(p)
                }
            }
        } else {
            page.matched = entriesMatching
            page.estimated = true
        }
        return page
    }

    /// The same matches by a pass over every user (a table without its index): each user's first matching entry,
    /// the `limit + 1` smallest after `cursor` kept in order.
    func searchScan(prefixes raw: [[UInt8]], after cursor: SearchKey?, limit: Int) -> SearchPage {
        scan(Self.searchPrefixes(raw), after: cursor, limit: limit)
    }

    /// `searchScan` of prefixes `searchPrefixes` made.
    private func scan(_ prefixes: [[UInt8]], after cursor: SearchKey?, limit: Int) -> SearchPage {
        var page = SearchPage()
        guard !prefixes.isEmpty else { return page }
        let t = searchText
        var best: [(SearchKey, Int)] = []
        var slot = 0
        for chunk in chunks {
            for r in chunk.indices {
                var first: SearchKey?
                UserSearchIndex.forEachEntry(of: chunk[r], slot: slot) { e in
                    guard t.matchesAny(e, prefixes) else { return }
                    let k = t.key(e)
                    if first.map({ k < $0 }) ?? true { first = k }
                }
                if let k = first {
                    page.matched += 1
                    if cursor.map({ $0 < k }) ?? true {
                        var lo = 0, hi = best.count
                        while lo < hi { let m = (lo + hi) / 2; if best[m].0 < k { lo = m + 1 } else { hi = m } }
                        if lo <= limit {
                            best.insert((k, slot), at: lo)
                            if best.count > limit + 1 { best.removeLast() }
                        }
                    }
                }
                slot += 1
            }
        }
        page.more = best.count > limit
        page.matches = best.prefix(limit).map { SearchMatch(user: record($0.1), key: $0.0) }
        return page
    }

    /// Sorted, distinct, case folded, and none a prefix of another (its range holds the longer one's).
    static func searchPrefixes(_ raw: [[UInt8]]) -> [[UInt8]] {
        let folded = raw.map { $0.map(UserSearchIndex.lower) }.filter { !$0.isEmpty }
        let sorted = folded.sorted { a, b in a.lexicographicallyPrecedes(b) }
        var out: [[UInt8]] = []
        for p in sorted where !(out.last.map { p.starts(with: $0) } ?? false) { out.append(p) }
        return out
    }
}

/// The uids in order: `main`, sorted, may still hold deleted uids (`dead` of them; a page skips them); `recent`, sorted,
/// holds uids inserted out of order since the last merge. Every live uid is in exactly one of the two.
struct SortedIDs: Sendable {
    /// `recent` merges into `main` at this many (a binary insertion shifts at most this many; a merge moves `main`).
    static let mergeAt = 4096

    private(set) var main: [String] = []
    private(set) var recent: [String] = []
    /// Deleted uids still in `main`.
    private(set) var dead = 0

    /// uids held, deleted ones included.
    var stored: Int { main.count + recent.count }

    mutating func reserveCapacity(_ n: Int) { main.reserveCapacity(n) }

    /// A uid new to the table.
    mutating func insert(_ id: String) {
        if recent.isEmpty, main.last.map({ $0 < id }) ?? true {
            main.append(id)  // in order: an import of an export, a restore
            return
        }
        let m = Self.lowerBound(main, id)
        if m < main.count, main[m] == id {
            dead -= 1  // deleted earlier and back: its place is still there
            return
        }
        recent.insert(id, at: Self.lowerBound(recent, id))
        if recent.count >= Self.mergeAt { merge() }
    }

    /// A uid leaving the table.
    mutating func remove(_ id: String) {
        let r = Self.lowerBound(recent, id)
        if r < recent.count, recent[r] == id {
            recent.remove(at: r)
        } else {
            dead += 1
        }
    }

    /// Drops the deleted uids from `main` (`isLive` says which are not) and merges `recent` in.
    mutating func compact(isLive: (String) -> Bool) {
        main.removeAll { !isLive($0) }
        dead = 0
        merge()
    }

    /// Moves `recent` into `main`, keeping it sorted: one pass, each uid moved (not copied: no retain and release of
    /// a million strings per merge), found by binary search from where the previous one went.
    private mutating func merge() {
        guard !recent.isEmpty else { return }
        let m = main.count, r = recent.count
        let merged = [String](unsafeUninitializedCapacity: m + r) { out, n in
            main.withUnsafeMutableBufferPointer { src in
                recent.withUnsafeMutableBufferPointer { rec in
                    guard let o = out.baseAddress, let s = src.baseAddress, let q = rec.baseAddress else { return }
                    var from = 0, k = 0
                    for j in 0..<r {
                        // Only `src[from...]` is still initialized; the search looks nowhere else.
                        let to = Self.lowerBound(src, q[j], from: from)
                        (o + k).moveInitialize(from: s + from, count: to - from)
                        k += to - from
                        (o + k).moveInitialize(from: q + j, count: 1)
                        k += 1
                        from = to
                    }
                    (o + k).moveInitialize(from: s + from, count: m - from)
                    // The sources' strings moved out: empty strings back in (immortal: nothing to release later).
                    s.initialize(repeating: "", count: m)
                    q.initialize(repeating: "", count: r)
                }
            }
            n = m + r
        }
        main = merged
        recent.removeAll(keepingCapacity: true)
    }

    /// Calls `body` with each stored uid greater than `after`, in order, until it returns false.
    func walk(after: String?, _ body: (String) -> Bool) {
        var i = after.map { Self.upperBound(main, $0) } ?? 0
        var j = after.map { Self.upperBound(recent, $0) } ?? 0
        while i < main.count || j < recent.count {
            let id: String
            if j == recent.count || (i < main.count && main[i] < recent[j]) {
                id = main[i]; i += 1
            } else {
                id = recent[j]; j += 1
            }
            if !body(id) { return }
        }
    }

    /// The first position in `a[from...]` whose uid is not less than `id`.
    static func lowerBound<C: RandomAccessCollection<String>>(_ a: C, _ id: String, from: Int = 0) -> Int where C.Index == Int {
        var lo = from, hi = a.endIndex
        while lo < hi {
            let mid = (lo + hi) / 2
            if a[mid] < id { lo = mid + 1 } else { hi = mid }
        }
        return lo
    }

    /// The first position whose uid is greater than `id`.
    static func upperBound(_ a: [String], _ id: String) -> Int {
        var lo = 0, hi = a.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if a[mid] <= id { lo = mid + 1 } else { hi = mid }
        }
        return lo
    }
}
