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

/// What the table stores per session, 56 bytes with its id and no heap allocation: the number's digits and the
/// code's packed into integers (the rare number or code that does not pack is kept aside, as the Android app hash),
/// the flags in the bits above the number's.
struct SessionRecord: Sendable {
    let id: SessionID
    /// The low 50 bits: the number's digits (`PhoneIndex.pack`), 0 when it does not pack (it is in the extras);
    /// then fictional (bit 50), the kind (51–52), removed (53) and the code's length (54–57; 0: in the extras).
    private(set) var bits: UInt64
    let createdAt: Int64
    /// 0: never.
    let expiresAt: Int64
    let sequence: UInt64
    /// The code's digits (up to 9), when its length is in `bits`.
    let codeDigits: UInt32
    /// -1: unlimited.
    var attemptsLeft: Int32

    static let phoneMask: UInt64 = (1 << 50) - 1
    static let fictionalBit: UInt64 = 1 << 50
    static let kindShift: UInt64 = 51
    static let removedBit: UInt64 = 1 << 53
    static let codeLengthShift: UInt64 = 54

    /// `packedPhone`: `PhoneIndex.pack(s.phoneNumber)` (0: it does not pack); the code packs when it is 1–9 ASCII digits.
    init(_ s: VerificationSession, packedPhone: UInt64) {
        id = s.id
        var code = s.code
        let (digits, length) = code.withUTF8 { u -> (UInt32, UInt64) in
            guard u.count >= 1, u.count <= 9 else { return (0, 0) }
            var v: UInt32 = 0
            for c in u {
                let d = c &- UInt8(ascii: "0")
                guard d <= 9 else { return (0, 0) }
                v = v * 10 + UInt32(d)
            }
            return (v, UInt64(u.count))
        }
        codeDigits = digits
        let kind: UInt64 = switch s.kind {
        case .signIn: 0
        case .mfaEnrollment: 1
        case .mfaSignIn: 2
        }
        bits = packedPhone | (s.fictional ? Self.fictionalBit : 0) | kind << Self.kindShift | length << Self.codeLengthShift
        createdAt = s.createdAt
        expiresAt = s.expiresAt ?? 0
        sequence = s.sequence
        attemptsLeft = s.attemptsLeft ?? -1
    }

    /// 0: the number did not pack.
    var packedPhone: UInt64 { bits & Self.phoneMask }
    var codePacked: Bool { bits >> Self.codeLengthShift & 0xF != 0 }
    var removed: Bool { bits & Self.removedBit != 0 }
    mutating func markRemoved() { bits |= Self.removedBit }

    var kind: VerificationSession.Kind {
        switch bits >> Self.kindShift & 3 {
        case 0: .signIn
        case 1: .mfaEnrollment
        default: .mfaSignIn
        }
    }

    /// The number, when it packed: `+` and its digits.
    var phoneText: String {
        var v = packedPhone
        var digits = 1
        var t = v / 10
        while t > 0 { digits += 1; t /= 10 }
        return Self.ascii(count: digits + 1) { p in
            p[0] = UInt8(ascii: "+")
            for k in stride(from: digits, through: 1, by: -1) {
                p[k] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: v % 10)
                v /= 10
            }
        }
    }

    /// The code, when it packed: its digits, leading zeros included.
    var codeText: String {
        let length = Int(bits >> Self.codeLengthShift & 0xF)
        var v = codeDigits
        return Self.ascii(count: length) { p in
            for k in stride(from: length - 1, through: 0, by: -1) {
                p[k] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: v % 10)
                v /= 10
            }
        }
    }

    /// A string of at most 16 ASCII bytes written by `fill`, made from a stack buffer (a small string: no heap for up
    /// to 15 bytes; cheaper than `String(unsafeUninitializedCapacity:)`).
    @inline(__always) private static func ascii(count: Int, _ fill: (UnsafeMutablePointer<UInt8>) -> Void) -> String {
        var raw: (UInt64, UInt64) = (0, 0)
        return withUnsafeMutableBytes(of: &raw) { b in
            let p = b.baseAddress!.assumingMemoryBound(to: UInt8.self)
            fill(p)
            return String(decoding: UnsafeBufferPointer(start: p, count: count), as: UTF8.self)
        }
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

    /// A number's list by a record's key: its packed digits, or (0) the number itself.
    subscript(packed k: UInt64, other phone: String) -> PhoneSessions? {
        get { k != 0 ? packed[k] : other[phone] }
        set { if k != 0 { packed[k] = newValue } else { other[phone] = newValue } }
    }

    mutating func take(packed k: UInt64, other phone: String) -> PhoneSessions? {
        k != 0 ? packed.removeValue(forKey: k) : other.removeValue(forKey: phone)
    }

    /// Removes and returns a number's list (so it can be changed without copying).
    mutating func take(_ phone: String) -> PhoneSessions? {
        if let k = Self.pack(phone) { return packed.removeValue(forKey: k) }
        return other.removeValue(forKey: phone)
    }
}

/// A session's fields that most sessions do not have (nil), kept beside its record.
struct SessionExtras: Sendable {
    var appSignatureHash: String?
    var owner: String?
    var delivery: SMSDelivery?
    /// The number or the code, when it does not pack into the record.
    var phoneNumber: String?
    var code: String?
}

/// A run of the creation order holding the sessions themselves, sorted by sequence; removed ones stay (marked) until
/// more than half are, then the chunk is compacted.
struct LogChunk: Sendable {
    static let capacity = 4096
    var entries: [SessionRecord] = []
    var live = 0
    var firstSequence: UInt64 { entries[0].sequence }
    var lastSequence: UInt64 { entries[entries.count - 1].sequence }
}

/// A page of pending sessions, in creation order.
public struct SessionPage: Sendable {
    public var sessions: [VerificationSession]
    /// Set when more sessions follow: pass it back as `after` for the next page.
    public let nextAfter: UInt64?
}

/// Pending sessions, kept in creation order in chunks (the log, 56 bytes a session) and found by id through 64 shards
/// of id → (chunk slot, offset) (24 bytes a bucket): growing or compacting one shard never copies more than 1/64 of
/// the ids while the store lock is held, and expired sessions are swept one shard at a time.
///
/// Reads are O(result): the log is the creation order (the unfiltered inbox and its paging) and each number has its
/// sessions' ids (`?phoneNumber=`, `:wait` and deletes by number). Both are updated on every insert and removal
/// (sign-in, expiry, sweep, clear); removals mark the log entry and leave the number's list stale, and either is
/// compacted once more than half of it is, in amortised O(1).
public struct SessionTable: Sendable {
    static let shardCount = 64
    /// id → its chunk's slot << 16 | its offset in the chunk.
    private var shards: [[SessionID: UInt64]] = Array(repeating: [:], count: shardCount)
    private var cursor = 0
    public private(set) var count = 0
    /// The log's chunks by slot: a chunk keeps its slot while it lives; freed slots are reused.
    private var chunks: [LogChunk] = []
    private var freeSlots: [Int] = []
    /// The slots of the log's chunks, in creation order.
    private var order: [Int] = []
    /// The buffer of the last chunk dropped when it was the newest, emptied, for the next new chunk: a table that
    /// empties and fills again (one sign-in after each send) reuses it instead of allocating a chunk each time.
    private var spare: [SessionRecord] = []
    private var phones = PhoneIndex()
    /// What the few sessions with an Android app hash, an owner, a non-default delivery, a number or a code that
    /// does not pack have besides their record.
    private var extras: [SessionID: SessionExtras] = [:]

    public init() {}

    @inline(__always) private static func handle(_ slot: Int, _ offset: Int) -> UInt64 { UInt64(slot) << 16 | UInt64(offset) }

    /// The stored record of a pending session.
    @inline(__always) private func record(_ id: SessionID) -> SessionRecord? {
        guard let h = shards[id.shard][id] else { return nil }
        return chunks[Int(h >> 16)].entries[Int(h & 0xFFFF)]
    }

    /// The session stored as `r`, with its side-table fields.
    private func full(_ r: SessionRecord) -> VerificationSession {
        let e = extras.isEmpty ? nil : extras[r.id]
        var s = VerificationSession(id: r.id, phoneNumber: r.packedPhone != 0 ? r.phoneText : e?.phoneNumber ?? "",
                                    code: r.codePacked ? r.codeText : e?.code ?? "", createdAt: r.createdAt,
                                    expiresAt: r.expiresAt == 0 ? nil : r.expiresAt, attemptsLeft: r.attemptsLeft < 0 ? nil : Int(r.attemptsLeft),
                                    fictional: r.bits & SessionRecord.fictionalBit != 0, kind: r.kind,
                                    appSignatureHash: e?.appSignatureHash, sequence: r.sequence)
        if let e {
            s.owner = e.owner
            s.delivery = e.delivery
        }
        return s
    }

    /// Whether `r` is a session of `phone` (`packed`: `PhoneIndex.pack(phone)`).
    @inline(__always) private func isFor(_ r: SessionRecord, _ phone: String, packed: UInt64?) -> Bool {
        if let packed { return r.packedPhone == packed }
        return r.packedPhone == 0 && extras[r.id]?.phoneNumber == phone
    }

    public subscript(id: SessionID) -> VerificationSession? {
        get { record(id).map { full($0) } }
        set {
            guard let s = newValue else {
                remove(id)
                return
            }
            let packed = PhoneIndex.pack(s.phoneNumber)
            let record = SessionRecord(s, packedPhone: packed ?? 0)
            var update = false
            // What sends do: a new session, newer than every other, into the newest chunk — one dictionary operation.
            var known: UInt64? = nil
            if let slot = order.last, chunks[slot].entries.count < LogChunk.capacity, chunks[slot].lastSequence < record.sequence {
                known = shards[id.shard].updateValue(Self.handle(slot, chunks[slot].entries.count), forKey: id)
                if known == nil {
                    setExtras(s, id, packed: packed, record)
                    count += 1
                    chunks[slot].entries.append(record)
                    chunks[slot].live += 1
                    indexPhone(id, record.sequence, fresh: true, phone: s.phoneNumber, packed: packed ?? 0)
                    return
                }
                shards[id.shard][id] = known
            }
            if let h = known ?? shards[id.shard][id] {
                let slot = Int(h >> 16), offset = Int(h & 0xFFFF)
                let old = chunks[slot].entries[offset]
                if old.sequence == record.sequence && isFor(old, s.phoneNumber, packed: packed) {
                    // An update (attempts left).
                    chunks[slot].entries[offset] = record
                    update = true
                } else {
                    // A changed number or sequence is a new session: re-index it.
                    remove(id)
                }
            }
            setExtras(s, id, packed: packed, record)
            if !update { insert(record, phone: s.phoneNumber, packed: packed ?? 0) }
        }
    }

    @inline(__always) private mutating func setExtras(_ s: VerificationSession, _ id: SessionID, packed: UInt64?, _ record: SessionRecord) {
        if s.appSignatureHash != nil || s.owner != nil || s.delivery != nil || packed == nil || !record.codePacked {
            extras[id] = SessionExtras(appSignatureHash: s.appSignatureHash, owner: s.owner, delivery: s.delivery,
                                       phoneNumber: packed == nil ? s.phoneNumber : nil, code: record.codePacked ? nil : s.code)
        } else if !extras.isEmpty {
            extras[id] = nil
        }
    }

    public func contains(_ id: SessionID) -> Bool { shards[id.shard][id] != nil }

    /// Removes one session, as setting it to nil, in one lookup; false if there was none.
    @discardableResult
    public mutating func remove(_ id: SessionID) -> Bool {
        guard let h = shards[id.shard].removeValue(forKey: id) else { return false }
        count -= 1
        let slot = Int(h >> 16), offset = Int(h & 0xFFFF)
        chunks[slot].entries[offset].markRemoved()
        chunks[slot].live -= 1
        let packed = chunks[slot].entries[offset].packedPhone
        let e = extras.isEmpty ? nil : extras.removeValue(forKey: id)
        unindexLog(slot)
        unindexPhone(id, packed: packed, other: e?.phoneNumber)
        return true
    }

    /// Every pending session, in creation order.
    public var values: [VerificationSession] {
        var out: [VerificationSession] = []
        out.reserveCapacity(count)
        for slot in order {
            for r in chunks[slot].entries where !r.removed { out.append(full(r)) }
        }
        return out
    }

    public mutating func removeAll() {
        shards = Array(repeating: [:], count: Self.shardCount)
        chunks = []
        freeSlots = []
        order = []
        spare = []
        phones = PhoneIndex()
        extras = [:]
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
            let entries = chunks[order[c]].entries
            var i = 0
            if let after, entries[0].sequence <= after {
                i = firstIndex(in: entries, after: after)
            }
            while i < entries.count {
                let r = entries[i]
                i += 1
                visits += 1
                if r.removed { continue }
                if out.count == limit { return SessionPage(sessions: out, nextAfter: out.last?.sequence) }
                out.append(full(r))
            }
            c += 1
        }
        return SessionPage(sessions: out, nextAfter: nil)
    }

    /// One number's pending sessions in creation order with a sequence above `after`, at most `limit`; O(result).
    public func page(phone: String, after: UInt64? = nil, limit: Int) -> SessionPage {
        guard let list = phones[phone] else { return SessionPage(sessions: [], nextAfter: nil) }
        let packed = PhoneIndex.pack(phone)
        var out: [VerificationSession] = []
        var visits = 0
        defer { noteVisits(visits) }
        for i in 0..<list.total {
            visits += 1
            guard let r = record(list[i]), isFor(r, phone, packed: packed) else { continue }
            if let after, r.sequence <= after { continue }
            if out.count == limit { return SessionPage(sessions: out, nextAfter: out.last?.sequence) }
            out.append(full(r))
        }
        return SessionPage(sessions: out, nextAfter: nil)
    }

    /// The newest pending session of a number; O(1) amortised.
    /// `deliveredBy`: only a session whose SMS has arrived by then (the inbox's view).
    public func newest(phone: String, deliveredBy now: Int64? = nil) -> VerificationSession? {
        guard let list = phones[phone] else { return nil }
        let packed = PhoneIndex.pack(phone)
        var visits = 0
        defer { noteVisits(visits) }
        for i in stride(from: list.total - 1, through: 0, by: -1) {
            visits += 1
            if let r = record(list[i]), isFor(r, phone, packed: packed) {
                let s = full(r)
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
        for g in gone { remove(g.id) }
        return gone
    }

    /// Removes one number's pending sessions and returns them (creation order); O(result).
    public mutating func removeAll(phone: String) -> [VerificationSession] {
        let gone = page(phone: phone, limit: .max).sessions
        for s in gone { remove(s.id) }
        return gone
    }

    /// Removes expired sessions from the oldest on, and returns them: sessions expire in about the order they were
    /// made (one TTL per store), so this stops at the first one still live that expires; sessions that never expire
    /// are stepped over. At most `maxVisits` log entries are looked at, so its cost is O(what it removes) and
    /// bounded — what the session cap needs on every refused send.
    public mutating func sweepExpiredOldest(now: Int64, maxVisits: Int) -> [VerificationSession] {
        var gone: [VerificationSession] = []
        var visits = 0
        var c = 0, i = 0
        scan: while c < order.count, visits < maxVisits {
            let entries = chunks[order[c]].entries
            while i < entries.count {
                guard visits < maxVisits else { break scan }
                let r = entries[i]
                i += 1
                visits += 1
                if r.removed || r.expiresAt == 0 { continue }
                if r.expiresAt > now { break scan }
                gone.append(full(r))
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
        var gone: [VerificationSession] = []
        for (_, h) in shards[i] {
            let r = chunks[Int(h >> 16)].entries[Int(h & 0xFFFF)]
            if r.expiresAt != 0 && r.expiresAt <= now { gone.append(full(r)) }
        }
        for s in gone { remove(s.id) }
        if shards[i].capacity > 64 && shards[i].count * 4 < shards[i].capacity {
            shards[i] = Dictionary(uniqueKeysWithValues: shards[i].map { ($0.key, $0.value) })
        }
        return gone
    }

    // MARK: indexes

    private mutating func insert(_ r: SessionRecord, phone: String, packed: UInt64) {
        count += 1
        let id = r.id, seq = r.sequence
        // Creation order: sends append; only sessions restored from disk (or by a rollback) can arrive out of order.
        let fresh = order.last.map { chunks[$0].lastSequence < seq } ?? true
        if fresh {
            var slot = order.last ?? -1
            if slot < 0 || chunks[slot].entries.count >= LogChunk.capacity {
                slot = newChunk(at: order.count)
                if spare.capacity > 0 {
                    swap(&chunks[slot].entries, &spare)
                } else {
                    chunks[slot].entries.reserveCapacity(LogChunk.capacity)
                }
            }
            shards[id.shard][id] = Self.handle(slot, chunks[slot].entries.count)
            chunks[slot].entries.append(r)
            chunks[slot].live += 1
        } else if let (slot, offset) = removedEntry(seq, id) {
            // A rolled-back removal re-inserts a session whose log entry may still be there (removals are lazy): it
            // is live again, never added twice.
            chunks[slot].entries[offset] = r
            chunks[slot].live += 1
            shards[id.shard][id] = Self.handle(slot, offset)
        } else {
            // Before the first later entry; the entries after it move, and so their handles.
            let c = chunkIndex(containing: seq)
            let slot = order[c]
            let at = firstIndex(in: chunks[slot].entries, after: seq)
            chunks[slot].entries.insert(r, at: at)
            chunks[slot].live += 1
            rehandle(slot, from: at)
            if chunks[slot].entries.count > 2 * LogChunk.capacity { splitChunk(c) }
        }
        indexPhone(id, seq, fresh: fresh, phone: phone, packed: packed)
    }

    /// Adds `id` (of sequence `seq`) to its number's list; `fresh`: newer than every other session.
    private mutating func indexPhone(_ id: SessionID, _ seq: UInt64, fresh: Bool, phone: String, packed: UInt64) {
        guard var list = phones.take(packed: packed, other: phone) else {
            phones[packed: packed, other: phone] = .one(id)
            return
        }
        var ids = list.ids
        let live = list.live
        list = .one(id)  // drops the enum's reference: `ids` is unique, so appending does not copy it
        if !fresh, ids.contains(id) {
            phones[packed: packed, other: phone] = .many(ids, live: Int32(clamping: live + 1))
            return
        }
        if let last = record(ids[ids.count - 1]), last.sequence > seq {
            // Out of order (never from sends; restores insert in creation order): before the first later entry.
            ids.insert(id, at: ids.firstIndex { $0 != id && (record($0)?.sequence ?? 0) > seq } ?? ids.count)
        } else {
            ids.append(id)
        }
        phones[packed: packed, other: phone] = .many(ids, live: Int32(clamping: live + 1))
    }

    /// After an entry of chunk `slot` was marked removed: drops the chunk when none is live, compacts it when more
    /// than half are removed (and gives memory back when it is mostly unused).
    private mutating func unindexLog(_ slot: Int) {
        if chunks[slot].live <= 0 {
            let newest = order.last == slot
            if let c = order.lastIndex(of: slot) { order.remove(at: c) }
            var entries: [SessionRecord] = []
            swap(&entries, &chunks[slot].entries)
            chunks[slot].live = 0
            if newest && entries.capacity <= 2 * LogChunk.capacity {
                entries.removeAll(keepingCapacity: true)
                spare = entries
            }
            freeSlots.append(slot)
        } else if chunks[slot].entries.count > 64 && chunks[slot].live * 2 < chunks[slot].entries.count {
            noteVisits(chunks[slot].entries.count)
            chunks[slot].entries.removeAll { $0.removed }
            if chunks[slot].entries.capacity > 4 * chunks[slot].entries.count + 256 && slot != order.last {
                chunks[slot].entries = Array(chunks[slot].entries[...])
            }
            rehandle(slot, from: 0)
        }
    }

    /// Called after `id` left the shards: its number's list (`packed`, or `other` when 0).
    private mutating func unindexPhone(_ id: SessionID, packed: UInt64, other: String?) {
        guard var list = phones.take(packed: packed, other: other ?? "") else { return }
        let live = list.live - 1
        guard live > 0, case .many(var ids, _) = list else { return }
        list = .one(id)  // drops the enum's reference to `ids`
        if ids.count > 8 && live * 2 < ids.count {
            noteVisits(ids.count)
            ids.removeAll { i in
                guard let r = record(i) else { return true }
                return packed != 0 ? r.packedPhone != packed : r.packedPhone != 0 || extras[i]?.phoneNumber != other
            }
            guard !ids.isEmpty else { return }
            phones[packed: packed, other: other ?? ""] = ids.count == 1 ? .one(ids[0]) : .many(ids, live: Int32(clamping: ids.count))
        } else {
            phones[packed: packed, other: other ?? ""] = .many(ids, live: Int32(clamping: live))
        }
    }

    /// A free slot for a new chunk, placed at `position` in the creation order.
    private mutating func newChunk(at position: Int) -> Int {
        let slot: Int
        if let free = freeSlots.popLast() {
            slot = free
        } else {
            slot = chunks.count
            chunks.append(LogChunk())
        }
        order.insert(slot, at: position)
        return slot
    }

    /// Points the shards at the live entries of chunk `slot` from `start` on (after they moved).
    private mutating func rehandle(_ slot: Int, from start: Int) {
        var i = start
        while i < chunks[slot].entries.count {
            let r = chunks[slot].entries[i]
            if !r.removed { shards[r.id.shard][r.id] = Self.handle(slot, i) }
            i += 1
        }
    }

    /// The removed log entry of (sequence, id), if it is still there.
    private func removedEntry(_ sequence: UInt64, _ id: SessionID) -> (slot: Int, offset: Int)? {
        guard !order.isEmpty else { return nil }
        var c = chunkIndex(containing: sequence)
        // Equal sequences (never from sends) could straddle a chunk boundary: look back while they might.
        while c >= 0 {
            let entries = chunks[order[c]].entries
            var i = firstIndex(in: entries, after: sequence) - 1
            while i >= 0 && entries[i].sequence == sequence {
                if entries[i].id == id && entries[i].removed { return (order[c], i) }
                i -= 1
            }
            guard c > 0, entries[0].sequence == sequence else { return nil }
            c -= 1
        }
        return nil
    }

    /// The position in `order` of the chunk whose range holds `sequence` (the last chunk starting at or before it; the
    /// first chunk if none).
    private func chunkIndex(containing sequence: UInt64) -> Int {
        var lo = 0, hi = order.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if chunks[order[mid]].firstSequence <= sequence { lo = mid + 1 } else { hi = mid }
        }
        return max(0, lo - 1)
    }

    /// The first position in sorted `entries` whose sequence is above `sequence`.
    private func firstIndex(in entries: [SessionRecord], after sequence: UInt64) -> Int {
        var lo = 0, hi = entries.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if entries[mid].sequence <= sequence { lo = mid + 1 } else { hi = mid }
        }
        return lo
    }

    /// Splits the chunk at position `c` of the creation order in two halves (the second in a new slot).
    private mutating func splitChunk(_ c: Int) {
        let slot = order[c]
        let entries = chunks[slot].entries
        let half = entries.count / 2
        let a = Array(entries[..<half]), b = Array(entries[half...])
        let second = newChunk(at: c + 1)
        chunks[slot] = LogChunk(entries: a, live: a.reduce(0) { $0 + ($1.removed ? 0 : 1) })
        chunks[second] = LogChunk(entries: b, live: b.reduce(0) { $0 + ($1.removed ? 0 : 1) })
        rehandle(second, from: 0)
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
