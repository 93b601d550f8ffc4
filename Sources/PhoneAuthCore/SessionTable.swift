import EmulatorSupport

/// A verification session id: 256 random bits, shown to clients as 43 base64url characters. Fixed size, so a
/// million pending sessions cost no heap allocation for their keys.
public struct SessionID: Hashable, Sendable {
    let a: UInt64, b: UInt64, c: UInt64, d: UInt64

    public init(bytes: [UInt8]) {
        precondition(bytes.count == 32)
        func word(_ i: Int) -> UInt64 {
            var w: UInt64 = 0
            for k in 0..<8 { w = w << 8 | UInt64(bytes[i * 8 + k]) }
            return w
        }
        a = word(0); b = word(1); c = word(2); d = word(3)
    }

    /// Parses a client's `sessionInfo`; nil for anything that is not one of ours.
    public init?(_ text: String) {
        guard text.utf8.count == 43, let bytes = Base64URL.decode(text), bytes.count == 32 else { return nil }
        self.init(bytes: bytes)
    }

    public var bytes: [UInt8] {
        [UInt8](unsafeUninitializedCapacity: 32) { buf, n in
            var i = 0
            func put(_ w: UInt64) { for k in 0..<8 { buf[i] = UInt8(truncatingIfNeeded: w >> UInt64(56 - 8 * k)); i += 1 } }
            put(a); put(b); put(c); put(d)
            n = 32
        }
    }

    public var text: String { Base64URL.encode(bytes) }

    var shard: Int { Int(truncatingIfNeeded: a & 63) }
}

/// Pending sessions in 64 shards: growing or compacting one shard never copies more than 1/64 of the table while
/// the store lock is held, and expired sessions are swept one shard at a time.
public struct SessionTable: Sendable {
    static let shardCount = 64
    private var shards: [[SessionID: VerificationSession]] = Array(repeating: [:], count: shardCount)
    private var cursor = 0
    public private(set) var count = 0

    public init() {}

    public subscript(id: SessionID) -> VerificationSession? {
        get { shards[id.shard][id] }
        set {
            let had = shards[id.shard][id] != nil
            shards[id.shard][id] = newValue
            count += (newValue != nil ? 1 : 0) - (had ? 1 : 0)
        }
    }

    /// By the client's text form (nil for malformed ids).
    public subscript(text: String) -> VerificationSession? {
        get { SessionID(text).flatMap { self[$0] } }
        set { if let id = SessionID(text) { self[id] = newValue } }
    }

    public var values: [VerificationSession] { shards.flatMap(\.values) }

    public mutating func removeAll() {
        shards = Array(repeating: [:], count: Self.shardCount)
        count = 0
    }

    public mutating func remove(where shouldRemove: (VerificationSession) -> Bool) -> [VerificationSession] {
        var removed: [VerificationSession] = []
        for i in shards.indices {
            let gone = shards[i].values.filter(shouldRemove)
            guard !gone.isEmpty else { continue }
            for g in gone { shards[i][g.id] = nil }
            removed += gone
        }
        count -= removed.count
        return removed
    }

    /// Drops the expired sessions of the next shard, and rebuilds it when mostly empty so memory is returned.
    /// Returns the ids removed.
    @discardableResult
    public mutating func sweepNextShard(now: Int64) -> [SessionID] {
        let i = cursor
        cursor = (cursor + 1) % Self.shardCount
        let expired = shards[i].values.filter { ($0.expiresAt ?? .max) <= now }.map(\.id)
        for id in expired { shards[i][id] = nil }
        count -= expired.count
        if shards[i].capacity > 64 && shards[i].count * 4 < shards[i].capacity {
            shards[i] = Dictionary(uniqueKeysWithValues: shards[i].map { ($0.key, $0.value) })
        }
        return expired
    }
}
