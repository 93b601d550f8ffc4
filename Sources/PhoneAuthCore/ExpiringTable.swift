/// A map whose entries expire at a deadline and whose size is capped, the oldest evicted first. For state that a
/// client creates without credentials (minted app credentials, iOS receipts and pushes, temporary proofs): memory stays
/// bounded whatever the traffic, and nothing is ever scanned on the hot path.
///
/// Entries sit in a dictionary plus an insertion-order queue. Each insert first pops expired (or already removed)
/// entries off the front of the queue, then evicts from the front while over capacity; every queued item is popped at
/// most once, so upkeep is amortized O(1) per insert. Lookups check the deadline themselves, so an entry the sweep has
/// not reached yet (the clock can be reset backwards) is still refused once expired.
public struct ExpiringTable<Value: Sendable>: Sendable {
    struct Entry: Sendable {
        var value: Value
        var expiresAt: Int64
        var sequence: UInt64
    }

    public let capacity: Int
    private var entries: [String: Entry] = [:]
    /// Insertion order; an item is stale when its key was removed or re-inserted since (sequence mismatch).
    private var order: [(key: String, sequence: UInt64)] = []
    private var head = 0
    private var nextSequence: UInt64 = 0

    public init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    /// Entries held, expired ones the sweep has not reached included.
    public var count: Int { entries.count }
    public var isEmpty: Bool { entries.isEmpty }

    /// Length of the insertion-order queue (for tests: it stays within a constant factor of `capacity`).
    var queueLength: Int { order.count - head }

    /// Adds (or replaces) `key`, sweeping expired entries and evicting the oldest past `capacity`.
    public mutating func insert(_ key: String, _ value: Value, expiresAt: Int64, now: Int64) {
        sweep(now: now)
        nextSequence &+= 1
        entries[key] = Entry(value: value, expiresAt: expiresAt, sequence: nextSequence)
        order.append((key, nextSequence))
        while entries.count > capacity, popFront() {}
        compact()
    }

    /// The live value for `key` (nil when absent or expired).
    public func peek(_ key: String, now: Int64) -> Value? {
        guard let e = entries[key], now < e.expiresAt else { return nil }
        return e.value
    }

    /// Changes the live value for `key` in place (its deadline and its place in the eviction order stay); false when
    /// absent or expired.
    @discardableResult
    public mutating func update(_ key: String, now: Int64, _ body: (inout Value) -> Void) -> Bool {
        guard let i = entries.index(forKey: key), now < entries.values[i].expiresAt else { return false }
        body(&entries.values[i].value)
        return true
    }

    /// The newest live entry `matches` accepts, scanning from the newest: O(count) at worst (bounded by
    /// `capacity`), for rare paths only.
    public func newest(now: Int64, where matches: (String, Value) -> Bool) -> (key: String, value: Value)? {
        var i = order.count
        while i > head {
            i -= 1
            let item = order[i]
            if let e = entries[item.key], e.sequence == item.sequence, now < e.expiresAt, matches(item.key, e.value) {
                return (item.key, e.value)
            }
        }
        return nil
    }

    /// When the live entry for `key` expires (nil when absent or expired).
    public func expiry(_ key: String, now: Int64) -> Int64? {
        guard let e = entries[key], now < e.expiresAt else { return nil }
        return e.expiresAt
    }

    /// Removes `key` and returns its value if it was still live (single-use credentials).
    public mutating func take(_ key: String, now: Int64) -> Value? {
        guard let e = entries.removeValue(forKey: key) else { return nil }
        compact()
        return now < e.expiresAt ? e.value : nil
    }

    /// Keys of the live entries `matches` accepts, oldest first. O(count): rare paths only.
    public func keys(now: Int64, where matches: (Value) -> Bool) -> [String] {
        var out: [String] = []
        for i in head..<order.count {
            let item = order[i]
            if let e = entries[item.key], e.sequence == item.sequence, now < e.expiresAt, matches(e.value) { out.append(item.key) }
        }
        return out
    }

    /// Live values, oldest first. O(count) (bounded by `capacity`): for the emulator API, never the hot path.
    public func values(now: Int64) -> [Value] {
        var out: [Value] = []
        for i in head..<order.count {
            let item = order[i]
            if let e = entries[item.key], e.sequence == item.sequence, now < e.expiresAt { out.append(e.value) }
        }
        return out
    }

    public mutating func removeAll() {
        entries.removeAll()
        order.removeAll()
        head = 0
    }

    /// Drops expired and stale items from the front of the queue.
    mutating func sweep(now: Int64) {
        while head < order.count {
            let item = order[head]
            if let e = entries[item.key], e.sequence == item.sequence, now < e.expiresAt { break }
            _ = popFront()
        }
    }

    /// Removes the oldest queued item (and its entry, unless stale). False when the queue is empty.
    private mutating func popFront() -> Bool {
        guard head < order.count else { return false }
        let item = order[head]
        head += 1
        if let e = entries[item.key], e.sequence == item.sequence { entries[item.key] = nil }
        return true
    }

    /// Keeps the queue within a constant factor of the live entries (amortized O(1)).
    private mutating func compact() {
        let queued = order.count - head
        if queued > 2 * entries.count + 32 {
            order = order[head...].filter { entries[$0.key]?.sequence == $0.sequence }
            head = 0
        } else if head > 64, head * 2 > order.count {
            order.removeFirst(head)
            head = 0
        }
    }
}
