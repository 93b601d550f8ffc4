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
    private var slots: [String: Int] = [:]
    private var order = SortedIDs()
    public private(set) var count = 0

    public init() {}

    /// A table of `chunks` as they are, copying no record (a restart's decoded chunks, `AuthStore.restoreUsers`):
    /// nil unless every chunk but the last holds `chunkSize` records and no uid appears twice.
    public init?(adopting chunks: [ContiguousArray<UserRecord>]) {
        guard let last = chunks.last, !last.isEmpty, last.count <= Self.chunkSize,
              chunks.dropLast().allSatisfy({ $0.count == Self.chunkSize }) else { return nil }
        let n = (chunks.count - 1) * Self.chunkSize + last.count
        var slots = [String: Int](minimumCapacity: n)
        var order = SortedIDs()
        order.reserveCapacity(n)
        var slot = 0
        for chunk in chunks {
            // The uids only, read in place (a record copied out of its chunk would retain each of its strings).
            let distinct = chunk.withUnsafeBufferPointer { records -> Bool in
                for i in records.indices {
                    let id = records[i].localId
                    guard slots.updateValue(slot, forKey: id) == nil else { return false }
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
        guard let i = slots[id] else { return nil }
        return record(i)
    }

    public func contains(_ id: String) -> Bool { slots[id] != nil }

    /// Reads the user with this uid in place (nil: none).
    public func withUser<R>(_ id: String, _ body: (borrowing UserRecord) -> R) -> R? {
        guard let i = slots[id] else { return nil }
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
        if let i = slots[id] {
            var old = user
            swap(&old, &chunks[i / Self.chunkSize][i % Self.chunkSize])
            return old
        }
        slots[id] = count
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
        if order.dead > Swift.max(SortedIDs.mergeAt, order.stored / 8) { order.compact { slots[$0] != nil } }
        return nil
    }

    /// Removes and returns the user with this uid (the last record takes its slot).
    @discardableResult
    public mutating func removeValue(forKey id: String) -> UserRecord? {
        guard let i = slots.removeValue(forKey: id) else { return nil }
        let last = count - 1
        var removed = chunks[chunks.count - 1].removeLast()
        if i != last {
            swap(&removed, &chunks[i / Self.chunkSize][i % Self.chunkSize])
            slots[record(i).localId] = i
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
