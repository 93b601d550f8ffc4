import EmulatorSupport

/// A verification session id: 128 random bits from the system CSPRNG, shown to clients as 22 base64url
/// characters. Fixed size, so a million pending sessions cost no heap allocation for their keys.
public struct SessionID: Hashable, Sendable {
    public static let byteCount = 16
    let hi: UInt64, lo: UInt64

    public init(bytes: [UInt8]) {
        precondition(bytes.count == Self.byteCount)
        var h: UInt64 = 0, l: UInt64 = 0
        for k in 0..<8 { h = h << 8 | UInt64(bytes[k]); l = l << 8 | UInt64(bytes[8 + k]) }
        hi = h
        lo = l
    }

    /// Parses a client's `sessionInfo`; nil for anything that is not one of ours. Only the canonical spelling is
    /// accepted (the one `text` produces): the decoder would also take the standard alphabet's `+`/`/` and other
    /// trailing bits in the last character, and every such variant of a used session would be a different key for
    /// anything keyed by the client's text (the journal's delete was, so a used session signed in again after a
    /// restart).
    public init?(_ text: String) {
        guard text.utf8.count == 22, let bytes = Base64URL.decode(text), bytes.count == Self.byteCount else { return nil }
        self.init(bytes: bytes)
        guard self.text == text else { return nil }
    }

    public var bytes: [UInt8] {
        [UInt8](unsafeUninitializedCapacity: Self.byteCount) { buf, n in
            for k in 0..<8 {
                buf[k] = UInt8(truncatingIfNeeded: hi >> UInt64(56 - 8 * k))
                buf[8 + k] = UInt8(truncatingIfNeeded: lo >> UInt64(56 - 8 * k))
            }
            n = Self.byteCount
        }
    }

    public var text: String { Base64URL.encode(bytes) }

    var shard: Int { Int(truncatingIfNeeded: hi & 63) }
}

/// What the table stores per session: the session without its id (the id is the key), 80 bytes.
struct SessionRecord: Sendable {
    let phoneNumber: String
    let code: String
    let appSignatureHash: String?
    let createdAt: Int64
    /// 0: never.
    let expiresAt: Int64
    let sequence: UInt64
    /// -1: unlimited.
    var attemptsLeft: Int32
    let fictional: Bool
    let kind: VerificationSession.Kind

    init(_ s: VerificationSession) {
        phoneNumber = s.phoneNumber
        code = s.code
        appSignatureHash = s.appSignatureHash
        createdAt = s.createdAt
        expiresAt = s.expiresAt ?? 0
        sequence = s.sequence
        attemptsLeft = s.attemptsLeft ?? -1
        fictional = s.fictional
        kind = s.kind
    }

    func session(_ id: SessionID) -> VerificationSession {
        VerificationSession(id: id, phoneNumber: phoneNumber, code: code, createdAt: createdAt, expiresAt: expiresAt == 0 ? nil : expiresAt,
                            attemptsLeft: attemptsLeft < 0 ? nil : Int(attemptsLeft), fictional: fictional, kind: kind,
                            appSignatureHash: appSignatureHash, sequence: sequence)
    }
}

/// Pending sessions in 64 shards: growing or compacting one shard never copies more than 1/64 of the table while
/// the store lock is held, and expired sessions are swept one shard at a time.
public struct SessionTable: Sendable {
    static let shardCount = 64
    private var shards: [[SessionID: SessionRecord]] = Array(repeating: [:], count: shardCount)
    private var cursor = 0
    public private(set) var count = 0

    public init() {}

    public subscript(id: SessionID) -> VerificationSession? {
        get { shards[id.shard][id]?.session(id) }
        set {
            let had = shards[id.shard][id] != nil
            shards[id.shard][id] = newValue.map(SessionRecord.init)
            count += (newValue != nil ? 1 : 0) - (had ? 1 : 0)
        }
    }

    public func contains(_ id: SessionID) -> Bool { shards[id.shard][id] != nil }

    /// By the client's text form (nil for malformed ids).
    public subscript(text: String) -> VerificationSession? {
        get { SessionID(text).flatMap { self[$0] } }
        set { if let id = SessionID(text) { self[id] = newValue } }
    }

    public var values: [VerificationSession] { shards.flatMap { $0.map { $0.value.session($0.key) } } }

    public mutating func removeAll() {
        shards = Array(repeating: [:], count: Self.shardCount)
        count = 0
    }

    public mutating func remove(where shouldRemove: (VerificationSession) -> Bool) -> [VerificationSession] {
        var removed: [VerificationSession] = []
        for i in shards.indices {
            let gone = shards[i].map { $0.value.session($0.key) }.filter(shouldRemove)
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
        let expired = shards[i].filter { $0.value.expiresAt != 0 && $0.value.expiresAt <= now }.map(\.key)
        for id in expired { shards[i][id] = nil }
        count -= expired.count
        if shards[i].capacity > 64 && shards[i].count * 4 < shards[i].capacity {
            shards[i] = Dictionary(uniqueKeysWithValues: shards[i].map { ($0.key, $0.value) })
        }
        return expired
    }
}
