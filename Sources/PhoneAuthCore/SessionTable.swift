import EmulatorSupport
import Synchronization

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
        // 22 characters of the URL-safe alphabet carry 132 bits: the 128 of the id, then 4 that must be zero (any
        // other alphabet or trailing bits is a different spelling of some id, which `text` would not produce).
        var t = text
        guard let value = t.withUTF8({ u -> UInt128? in
            guard u.count == 22 else { return nil }
            var acc: UInt128 = 0
            for k in 0..<21 {
                guard let v = Self.sextet(u[k]) else { return nil }
                acc = acc << 6 | UInt128(v)
            }
            guard let last = Self.sextet(u[21]), last & 0x0F == 0 else { return nil }
            return acc << 2 | UInt128(last >> 4)
        }) else { return nil }
        hi = UInt64(truncatingIfNeeded: value >> 64)
        lo = UInt64(truncatingIfNeeded: value)
    }

    /// A base64url character's value; nil outside the URL-safe alphabet.
    @inline(__always) static func sextet(_ c: UInt8) -> UInt8? {
        switch c {
        case 0x41...0x5A: c - 0x41
        case 0x61...0x7A: c - 0x61 + 26
        case 0x30...0x39: c - 0x30 + 52
        case 0x2D: 62
        case 0x5F: 63
        default: nil
        }
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

    public var text: String {
        var out: [UInt8] = []
        appendText(to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends `text`'s 22 bytes to `out` (no array, no string: events carry it).
    public func appendText(to out: inout [UInt8]) {
        var raw = (hi.bigEndian, lo.bigEndian)
        withUnsafeBytes(of: &raw) { Base64URL.append($0, to: &out) }
    }

    var shard: Int { Int(truncatingIfNeeded: hi & 63) }
}

/// What the table stores per session: the session without its id (the id is the key) and without the rare Android
/// app hash (kept aside), 64 bytes.
struct SessionRecord: Sendable {
    let phoneNumber: String
    let code: String
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
        createdAt = s.createdAt
        expiresAt = s.expiresAt ?? 0
        sequence = s.sequence
        attemptsLeft = s.attemptsLeft ?? -1
        fictional = s.fictional
        kind = s.kind
    }

    func session(_ id: SessionID, appSignatureHash: String?) -> VerificationSession {
        VerificationSession(id: id, phoneNumber: phoneNumber, code: code, createdAt: createdAt, expiresAt: expiresAt == 0 ? nil : expiresAt,
                            attemptsLeft: attemptsLeft < 0 ? nil : Int(attemptsLeft), fictional: fictional, kind: kind,
                            appSignatureHash: appSignatureHash, sequence: sequence)
    }
}

/// One number's pending sessions in creation order. Ids of removed sessions stay until more than half the entries
/// are stale, then the list is compacted, so every operation is O(1) amortised and a read is O(result).
enum PhoneSessions: Sendable {
    /// The common case, inline (no allocation): one pending session.
    case one(SessionID)
    /// Several, oldest first; `live` of them still pending.
    case many([SessionID], live: Int32)

    var total: Int {
        switch self {
        case .one: 1
        case .many(let ids, _): ids.count
        }
    }

    var live: Int {
        switch self {
        case .one: 1
        case .many(_, let live): Int(live)
        }
    }

    subscript(i: Int) -> SessionID {
        switch self {
        case .one(let id): id
        case .many(let ids, _): ids[i]
        }
    }

    var ids: [SessionID] {
        switch self {
        case .one(let id): [id]
        case .many(let ids, _): ids
        }
    }
}

/// Number → its pending sessions. E.164 numbers (all that sends create) are keyed by their digits packed in a
/// UInt64: 8-byte keys that hash fast and allocate nothing; anything else falls back to a String key.
struct PhoneIndex: Sendable {
    private var packed: [UInt64: PhoneSessions] = [:]
    private var other: [String: PhoneSessions] = [:]

    /// `+` and 1–15 digits, the first not 0: the digits' value identifies the number.
    static func pack(_ phone: String) -> UInt64? {
        var s = phone
        return s.withUTF8 { b -> UInt64? in
            guard b.count >= 2, b.count <= 16, b[0] == UInt8(ascii: "+"), b[1] >= UInt8(ascii: "1"), b[1] <= UInt8(ascii: "9") else { return nil }
            var v: UInt64 = 0
            for k in 1..<b.count {
                let d = b[k] &- UInt8(ascii: "0")
                guard d <= 9 else { return nil }
                v = v * 10 + UInt64(d)
            }
            return v
        }
    }

    subscript(phone: String) -> PhoneSessions? {
        get { if let k = Self.pack(phone) { packed[k] } else { other[phone] } }
        set { if let k = Self.pack(phone) { packed[k] = newValue } else { other[phone] = newValue } }
    }

    /// Removes and returns a number's list (so it can be changed without copying).
    mutating func take(_ phone: String) -> PhoneSessions? {
        if let k = Self.pack(phone) { return packed.removeValue(forKey: k) }
        return other.removeValue(forKey: phone)
    }
}

/// A run of the creation order: (sequence, id) pairs sorted by sequence; removed ones stay until compacted.
struct OrderChunk: Sendable {
    static let capacity = 4096
    var entries: [(sequence: UInt64, id: SessionID)]
    var live: Int
    var firstSequence: UInt64 { entries[0].sequence }
    var lastSequence: UInt64 { entries[entries.count - 1].sequence }
}

/// A page of pending sessions, in creation order.
public struct SessionPage: Sendable {
    public var sessions: [VerificationSession]
    /// Set when more sessions follow: pass it back as `after` for the next page.
    public let nextAfter: UInt64?
}

/// Pending sessions in 64 shards: growing or compacting one shard never copies more than 1/64 of the table while
/// the store lock is held, and expired sessions are swept one shard at a time.
///
/// Two indexes keep every read O(result): the creation order (chunks of (sequence, id), for the unfiltered inbox and
/// its paging) and each number's sessions (for `?phoneNumber=`, `:wait` and deletes by number). Both are updated on
/// every insert and removal (sign-in, expiry, sweep, clear); removals are lazy and compacted in amortised O(1).
public struct SessionTable: Sendable {
    static let shardCount = 64
    private var shards: [[SessionID: SessionRecord]] = Array(repeating: [:], count: shardCount)
    private var cursor = 0
    public private(set) var count = 0
    private var order: [OrderChunk] = []
    private var phones = PhoneIndex()
    /// Android SMS Retriever hashes, for the few sessions that have one.
    private var appHashes: [SessionID: String] = [:]
    /// The users MFA sessions were sent for (`VerificationSession.owner`), for the sessions that have one.
    private var owners: [SessionID: String] = [:]
    /// How SMS travel, for the sessions whose SMS is late, lost or not in English.
    private var deliveries: [SessionID: SMSDelivery] = [:]

    /// The session stored as `r` under `id`, with its side-table fields.
    private func full(_ id: SessionID, _ r: SessionRecord) -> VerificationSession {
        var s = r.session(id, appSignatureHash: appHashes.isEmpty ? nil : appHashes[id])
        if !owners.isEmpty { s.owner = owners[id] }
        if !deliveries.isEmpty { s.delivery = deliveries[id] }
        return s
    }

    public init() {}

    public subscript(id: SessionID) -> VerificationSession? {
        get { shards[id.shard][id].map { full(id, $0) } }
        set {
            if let s = newValue {
                let record = SessionRecord(s)
                if let old = shards[id.shard].updateValue(record, forKey: id) {
                    // An update (attempts left). A changed number or sequence would be a new session: re-index it.
                    if old.phoneNumber != record.phoneNumber || old.sequence != record.sequence {
                        unindex(id, old)
                        index(id, record)
                    }
                } else {
                    count += 1
                    index(id, record)
                }
                if let h = s.appSignatureHash { appHashes[id] = h } else if !appHashes.isEmpty { appHashes[id] = nil }
                if let o = s.owner { owners[id] = o } else if !owners.isEmpty { owners[id] = nil }
                if let d = s.delivery { deliveries[id] = d } else if !deliveries.isEmpty { deliveries[id] = nil }
            } else {
                remove(id)
            }
        }
    }

    public func contains(_ id: SessionID) -> Bool { shards[id.shard][id] != nil }

    /// Removes one session, as setting it to nil, in one lookup; false if there was none.
    @discardableResult
    public mutating func remove(_ id: SessionID) -> Bool {
        guard let old = shards[id.shard].removeValue(forKey: id) else { return false }
        count -= 1
        unindex(id, old)
        if !appHashes.isEmpty { appHashes[id] = nil }
        if !owners.isEmpty { owners[id] = nil }
        if !deliveries.isEmpty { deliveries[id] = nil }
        return true
    }

    /// Every pending session, in no particular order.
    public var values: [VerificationSession] {
        shards.flatMap { $0.map { full($0.key, $0.value) } }
    }

    public mutating func removeAll() {
        shards = Array(repeating: [:], count: Self.shardCount)
        order = []
        phones = PhoneIndex()
        appHashes = [:]
        owners = [:]
        deliveries = [:]
        count = 0
    }

    // MARK: reads

    /// Pending sessions in creation order with a sequence above `after`, at most `limit`; O(result).
    public func page(after: UInt64? = nil, limit: Int) -> SessionPage {
        var out: [VerificationSession] = []
        var c = after.map { chunkIndex(containing: $0) } ?? 0
        var visits = 0
        defer { noteVisits(visits) }
        while c < order.count {
            let chunk = order[c]
            var i = 0
            if let after, chunk.firstSequence <= after {
                i = firstIndex(in: chunk.entries, after: after)
            }
            while i < chunk.entries.count {
                let e = chunk.entries[i]
                i += 1
                visits += 1
                guard let r = shards[e.id.shard][e.id], r.sequence == e.sequence else { continue }
                if out.count == limit { return SessionPage(sessions: out, nextAfter: out.last?.sequence) }
                out.append(full(e.id, r))
            }
            c += 1
        }
        return SessionPage(sessions: out, nextAfter: nil)
    }

    /// One number's pending sessions in creation order with a sequence above `after`, at most `limit`; O(result).
    public func page(phone: String, after: UInt64? = nil, limit: Int) -> SessionPage {
        guard let list = phones[phone] else { return SessionPage(sessions: [], nextAfter: nil) }
        var out: [VerificationSession] = []
        var visits = 0
        defer { noteVisits(visits) }
        for i in 0..<list.total {
            let id = list[i]
            visits += 1
            guard let r = shards[id.shard][id], r.phoneNumber == phone else { continue }
            if let after, r.sequence <= after { continue }
            if out.count == limit { return SessionPage(sessions: out, nextAfter: out.last?.sequence) }
            out.append(full(id, r))
        }
        return SessionPage(sessions: out, nextAfter: nil)
    }

    /// The newest pending session of a number; O(1) amortised.
    /// `deliveredBy`: only a session whose SMS has arrived by then (the inbox's view).
    public func newest(phone: String, deliveredBy now: Int64? = nil) -> VerificationSession? {
        guard let list = phones[phone] else { return nil }
        var visits = 0
        defer { noteVisits(visits) }
        for i in stride(from: list.total - 1, through: 0, by: -1) {
            let id = list[i]
            visits += 1
            if let r = shards[id.shard][id], r.phoneNumber == phone {
                let s = full(id, r)
                if let now, !s.isDelivered(now: now) { continue }
                return s
            }
        }
        return nil
    }

    /// How many sessions a number has pending.
    public func count(phone: String) -> Int { phones[phone]?.live ?? 0 }

    // MARK: removal

    /// Removes every session matching `shouldRemove` (a full scan: not for request paths) and returns them.
    public mutating func remove(where shouldRemove: (VerificationSession) -> Bool) -> [VerificationSession] {
        let gone = values.filter(shouldRemove)
        for g in gone { self[g.id] = nil }
        return gone
    }

    /// Removes one number's pending sessions and returns them (creation order); O(result).
    public mutating func removeAll(phone: String) -> [VerificationSession] {
        let gone = page(phone: phone, limit: .max).sessions
        for s in gone { self[s.id] = nil }
        return gone
    }

    /// Removes expired sessions from the oldest on, and returns them: sessions expire in about the order they were
    /// made (one TTL per store), so this stops at the first one still live that expires; sessions that never expire
    /// are stepped over. At most `maxVisits` index entries are looked at, so its cost is O(what it removes) and
    /// bounded — what the session cap needs on every refused send.
    public mutating func sweepExpiredOldest(now: Int64, maxVisits: Int) -> [VerificationSession] {
        var gone: [VerificationSession] = []
        var visits = 0
        var c = 0, i = 0
        scan: while c < order.count, visits < maxVisits {
            let entries = order[c].entries
            while i < entries.count {
                guard visits < maxVisits else { break scan }
                let e = entries[i]
                i += 1
                visits += 1
                guard let r = shards[e.id.shard][e.id], r.sequence == e.sequence else { continue }
                if r.expiresAt == 0 { continue }
                if r.expiresAt > now { break scan }
                gone.append(full(e.id, r))
            }
            c += 1
            i = 0
        }
        noteVisits(visits)
        for s in gone { remove(s.id) }
        return gone
    }

    /// Drops the expired sessions of the next shard, and rebuilds it when mostly empty so memory is returned.
    /// Returns the ids removed.
    @discardableResult
    public mutating func sweepNextShard(now: Int64) -> [SessionID] { sweepNextShardSessions(now: now).map(\.id) }

    /// `sweepNextShard`, returning the sessions removed (a transaction keeps them to undo the sweep).
    public mutating func sweepNextShardSessions(now: Int64) -> [VerificationSession] {
        let i = cursor
        cursor = (cursor + 1) % Self.shardCount
        let expired = shards[i].filter { $0.value.expiresAt != 0 && $0.value.expiresAt <= now }.map(\.key)
        let gone = expired.compactMap { self[$0] }
        for id in expired { self[id] = nil }
        if shards[i].capacity > 64 && shards[i].count * 4 < shards[i].capacity {
            shards[i] = Dictionary(uniqueKeysWithValues: shards[i].map { ($0.key, $0.value) })
        }
        return gone
    }

    // MARK: indexes

    private mutating func index(_ id: SessionID, _ r: SessionRecord) {
        // Creation order: sends append; only sessions restored from disk (or by a rollback) can arrive out of order.
        let seq = r.sequence
        // A rolled-back removal re-inserts a session whose index entries may still be there (removals are lazy): they
        // are live again, never added twice. Only a session that is not newer than every other can have them.
        let fresh = order.last.map { $0.lastSequence < seq } ?? true
        if !fresh, let c = chunk(holding: seq, id) {
            order[c].live += 1
        } else if let last = order.last, last.lastSequence > seq {
            let c = chunkIndex(containing: seq)
            order[c].entries.insert((seq, id), at: firstIndex(in: order[c].entries, after: seq))
            order[c].live += 1
            if order[c].entries.count > 2 * OrderChunk.capacity { splitChunk(c) }
        } else if let last = order.last, last.entries.count < OrderChunk.capacity {
            order[order.count - 1].entries.append((seq, id))
            order[order.count - 1].live += 1
        } else {
            var entries: [(sequence: UInt64, id: SessionID)] = []
            entries.reserveCapacity(OrderChunk.capacity)
            entries.append((seq, id))
            order.append(OrderChunk(entries: entries, live: 1))
        }
        // The number's list.
        guard var list = phones.take(r.phoneNumber) else {
            phones[r.phoneNumber] = .one(id)
            return
        }
        var ids = list.ids
        let live = list.live
        list = .one(id)  // drops the enum's reference: `ids` is unique, so appending does not copy it
        if !fresh, ids.contains(id) {
            phones[r.phoneNumber] = .many(ids, live: Int32(clamping: live + 1))
            return
        }
        let lastID = ids[ids.count - 1]
        if let last = shards[lastID.shard][lastID], last.sequence > seq {
            // Out of order (never from sends; restores insert in creation order): before the first later entry.
            let shards = self.shards
            ids.insert(id, at: ids.firstIndex { $0 != id && (shards[$0.shard][$0]?.sequence ?? 0) > seq } ?? ids.count)
        } else {
            ids.append(id)
        }
        phones[r.phoneNumber] = .many(ids, live: Int32(clamping: live + 1))
    }

    /// Called after `id` left the shards.
    private mutating func unindex(_ id: SessionID, _ r: SessionRecord) {
        if let c = chunk(holding: r.sequence, id) {
            order[c].live -= 1
            if order[c].live <= 0 {
                order.remove(at: c)
            } else if order[c].entries.count > 64 && order[c].live * 2 < order[c].entries.count {
                let shards = self.shards
                noteVisits(order[c].entries.count)
                order[c].entries.removeAll { e in shards[e.id.shard][e.id]?.sequence != e.sequence }
                order[c].live = order[c].entries.count
            }
        }
        guard var list = phones.take(r.phoneNumber) else { return }
        let live = list.live - 1
        guard live > 0, case .many(var ids, _) = list else { return }
        list = .one(id)  // drops the enum's reference to `ids`
        if ids.count > 8 && live * 2 < ids.count {
            noteVisits(ids.count)
            ids.removeAll { shards[$0.shard][$0]?.phoneNumber != r.phoneNumber }
            guard !ids.isEmpty else { return }
            phones[r.phoneNumber] = ids.count == 1 ? .one(ids[0]) : .many(ids, live: Int32(clamping: ids.count))
        } else {
            phones[r.phoneNumber] = .many(ids, live: Int32(clamping: live))
        }
    }

    /// The chunk whose entries hold (sequence, id), if any.
    private func chunk(holding sequence: UInt64, _ id: SessionID) -> Int? {
        guard !order.isEmpty else { return nil }
        var c = chunkIndex(containing: sequence)
        // Equal sequences (never from sends) could straddle a chunk boundary: look back while they might.
        while c >= 0 {
            let entries = order[c].entries
            var i = firstIndex(in: entries, after: sequence) - 1
            while i >= 0 && entries[i].sequence == sequence {
                if entries[i].id == id { return c }
                i -= 1
            }
            guard c > 0, order[c].firstSequence == sequence else { return nil }
            c -= 1
        }
        return nil
    }

    /// The chunk whose range holds `sequence` (the last chunk starting at or before it; the first chunk if none).
    private func chunkIndex(containing sequence: UInt64) -> Int {
        var lo = 0, hi = order.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if order[mid].firstSequence <= sequence { lo = mid + 1 } else { hi = mid }
        }
        return max(0, lo - 1)
    }

    /// The first position in sorted `entries` whose sequence is above `sequence`.
    private func firstIndex(in entries: [(sequence: UInt64, id: SessionID)], after sequence: UInt64) -> Int {
        var lo = 0, hi = entries.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if entries[mid].sequence <= sequence { lo = mid + 1 } else { hi = mid }
        }
        return lo
    }

    private mutating func splitChunk(_ c: Int) {
        let entries = order[c].entries
        let half = entries.count / 2
        let shards = self.shards
        func live(_ part: ArraySlice<(sequence: UInt64, id: SessionID)>) -> Int {
            part.reduce(0) { $0 + (shards[$1.id.shard][$1.id]?.sequence == $1.sequence ? 1 : 0) }
        }
        let a = entries[..<half], b = entries[half...]
        order[c] = OrderChunk(entries: Array(a), live: live(a))
        order.insert(OrderChunk(entries: Array(b), live: live(b)), at: c + 1)
    }

    @inline(__always) private func noteVisits(_ n: Int) {
        #if DEBUG
        SessionTable.visitCounter.wrappingAdd(n, ordering: .relaxed)
        #endif
    }

    #if DEBUG
    /// Index entries visited by reads and compactions, counted in debug builds so tests can check the work.
    public static let visitCounter = Atomic<Int>(0)
    #endif
}
