// # The console's user search index
//
// The console's Users view searches a store by what a person types: the start of a uid, of an email (or of its
// domain), of a phone number (with or without its country code), or of any word of a display name. A substring
// search has no index that fits a user's memory budget (issue 29: a trigram index costs ~80 entries a user), and a
// scan costs ~130 ms of CPU at a million users; a word-prefix search has one:
//
// - an entry is a word start of one searchable field of one user: the user's slot in its `UserTable` (24 bits), the
//   field (2 bits) and the word's byte offset in it (6 bits), packed in 4 bytes: a uid, a phone number, an email and
//   its domain, each word of a display name (words starting past byte 63 are not indexed);
// - entries are ordered by their text (the field from the word on, ASCII case folded), then uid, then field and
//   offset, in blocks of at most `blockSize` (a block is found by binary search on the blocks' last entries, an entry
//   by binary search in its block: an insertion moves at most a block);
// - every matching user is one range per prefix searched (a phone number typed without `+` is looked up under every
//   country calling code): a page is two binary searches and a walk of what it returns, O(log n + page).
//
// The index is built the first time a store is searched (a store never searched costs nothing for it) and kept by
// `UserTable.updateValue`/`removeValue` from then on. An entry names a slot, and a deleted user's slot takes the last
// record: its entries are found (by their text) and repointed.

import EmulatorSupport

/// Where a user's word starts: the field and byte offset of an index entry.
enum SearchField: UInt32, CaseIterable, Sendable {
    case uid = 0, email = 1, phone = 2, displayName = 3
}

struct UserSearchIndex: Sendable {
    /// Entries per block at most (an insertion into a full block splits it in two).
    static let blockSize = 1024
    /// Slots an entry can name (24 bits): a store with more users is searched by a scan (`UserTable.searchScan`).
    static let maxSlots = 1 << 24
    /// Word starts past this byte offset are not indexed (6 bits).
    static let maxOffset = 63

    private(set) var blocks: [[UInt32]] = []

    @inline(__always) static func entry(slot: Int, field: SearchField, offset: Int) -> UInt32 {
        UInt32(truncatingIfNeeded: slot) << 8 | field.rawValue << 6 | UInt32(truncatingIfNeeded: offset)
    }
    @inline(__always) static func slot(_ e: UInt32) -> Int { Int(e >> 8) }
    @inline(__always) static func field(_ e: UInt32) -> SearchField { SearchField(rawValue: (e >> 6) & 3)! }
    @inline(__always) static func offset(_ e: UInt32) -> Int { Int(e & 63) }
    /// The entry with another slot (same field and offset).
    @inline(__always) static func moved(_ e: UInt32, to slot: Int) -> UInt32 { UInt32(truncatingIfNeeded: slot) << 8 | (e & 0xFF) }

    @inline(__always) static func lower(_ b: UInt8) -> UInt8 { b >= 0x41 && b <= 0x5A ? b | 0x20 : b }
    /// Bytes that separate the words of a display name.
    @inline(__always) static func separates(_ b: UInt8) -> Bool {
        switch b {
        case 0x20, 0x09, 0x0A, 0x0D, 0x2D, 0x5F, 0x2E, 0x2C, 0x28, 0x29, 0x2F, 0x40, 0x2B, 0x26, 0x27, 0x22, 0x3A, 0x3B: return true
        default: return false
        }
    }

    /// Calls `body` with the offset of each indexed word of `bytes`, a value of `field`.
    static func forEachWord(_ field: SearchField, _ bytes: UnsafeBufferPointer<UInt8>, _ body: (Int) -> Void) {
        guard !bytes.isEmpty else { return }
        switch field {
        case .uid, .phone:
            body(0)
        case .email:
            body(0)
            if let at = bytes.firstIndex(of: 0x40), at + 1 < bytes.count, at + 1 <= maxOffset { body(at + 1) }
        case .displayName:
            var i = 0
            let end = Swift.min(bytes.count, maxOffset + 1)
            while i < end {
                if !separates(bytes[i]) && (i == 0 || separates(bytes[i - 1])) { body(i) }
                i += 1
            }
        }
    }

    /// A field's value of a record.
    @inline(__always) static func value(_ u: borrowing UserRecord, _ field: SearchField) -> String? {
        switch field {
        case .uid: return u.localId
        case .email: return u.email
        case .phone: return u.phoneNumber
        case .displayName: return u.displayName
        }
    }

    /// Calls `body` with each entry of the record in `slot`.
    static func forEachEntry(of u: borrowing UserRecord, slot: Int, _ body: (UInt32) -> Void) {
        for f in SearchField.allCases {
            guard var s = value(u, f) else { continue }
            s.withUTF8 { b in forEachWord(f, b) { body(entry(slot: slot, field: f, offset: $0)) } }
        }
    }

    /// The entries of a record, field by field.
    static func entries(of u: borrowing UserRecord, slot: Int) -> [UInt32] {
        var out: [UInt32] = []
        forEachEntry(of: u, slot: slot) { out.append($0) }
        return out
    }

    /// The searchable fields of two records are the same bytes (their entries are). Not `String ==`: that equates
    /// canonically equivalent text (an NFC and an NFD "Zoë"), which the index orders by its bytes.
    static func sameEntries(_ a: borrowing UserRecord, _ b: borrowing UserRecord) -> Bool {
        func same(_ x: String?, _ y: String?) -> Bool {
            switch (x, y) {
            case (nil, nil): return true
            case let (x?, y?): return x.utf8.elementsEqual(y.utf8)
            default: return false
            }
        }
        return same(a.localId, b.localId) && same(a.email, b.email) && same(a.phoneNumber, b.phoneNumber) && same(a.displayName, b.displayName)
    }

    // MARK: positions

    struct Position: Equatable, Comparable {
        var block: Int, index: Int
        static func < (a: Position, b: Position) -> Bool { (a.block, a.index) < (b.block, b.index) }
    }

    var start: Position { Position(block: 0, index: 0) }
    var end: Position { Position(block: blocks.count, index: 0) }

    @inline(__always) subscript(p: Position) -> UInt32 { blocks[p.block][p.index] }

    @inline(__always) func after(_ p: Position) -> Position {
        p.index + 1 < blocks[p.block].count ? Position(block: p.block, index: p.index + 1) : Position(block: p.block + 1, index: 0)
    }

    /// The first position whose entry is not `before` (`before` is true for a prefix of the entries, false after).
    func partition(_ before: (UInt32) -> Bool) -> Position {
        var lo = 0, hi = blocks.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if before(blocks[mid][blocks[mid].count - 1]) { lo = mid + 1 } else { hi = mid }
        }
        guard lo < blocks.count else { return end }
        let b = blocks[lo]
        var l = 0, h = b.count
        while l < h {
            let mid = (l + h) / 2
            if before(b[mid]) { l = mid + 1 } else { h = mid }
        }
        return Position(block: lo, index: l)
    }

    /// Entries from `a` up to `b` (O(the blocks between them)).
    func distance(_ a: Position, _ b: Position) -> Int {
        guard a < b else { return 0 }
        if a.block == b.block { return b.index - a.index }
        var n = blocks[a.block].count - a.index + b.index
        for k in (a.block + 1)..<b.block { n += blocks[k].count }
        return n
    }

    // MARK: changes

    /// `sorted` as the index (built in order).
    init(sorted: [UInt32]) {
        var i = 0
        blocks.reserveCapacity((sorted.count + Self.blockSize - 1) / Self.blockSize)
        while i < sorted.count {
            let j = Swift.min(sorted.count, i + Self.blockSize)
            blocks.append(Array(sorted[i..<j]))
            i = j
        }
    }

    /// Inserts `e` at `p` (where `partition` placed it).
    mutating func insert(_ e: UInt32, at p: Position) {
        if blocks.isEmpty {
            blocks.append([e])
            return
        }
        // Past the end: the last block takes it.
        let b = p.block < blocks.count ? p.block : blocks.count - 1
        let i = p.block < blocks.count ? p.index : blocks[b].count
        blocks[b].insert(e, at: i)
        if blocks[b].count > Self.blockSize {
            let half = blocks[b].count / 2
            let tail = Array(blocks[b][half...])
            blocks[b].removeSubrange(half...)
            blocks.insert(tail, at: b + 1)
        }
    }

    mutating func remove(at p: Position) {
        blocks[p.block].remove(at: p.index)
        if blocks[p.block].isEmpty { blocks.remove(at: p.block) }
    }

    mutating func replace(at p: Position, with e: UInt32) { blocks[p.block][p.index] = e }
}

/// Reads index entries' text out of a table's records.
struct SearchText {
    let chunks: [ContiguousArray<UserRecord>]
    let chunkSize: Int

    /// The entry's field from its word on, and the record's uid (raw bytes).
    @inline(__always) func with<R>(_ e: UInt32, _ body: (UnsafeBufferPointer<UInt8>, UnsafeBufferPointer<UInt8>) -> R) -> R {
        let slot = UserSearchIndex.slot(e)
        return chunks[slot / chunkSize].withUnsafeBufferPointer { records in
            var id = records[slot % chunkSize].localId
            var v = UserSearchIndex.value(records[slot % chunkSize], UserSearchIndex.field(e)) ?? ""
            let off = UserSearchIndex.offset(e)
            return id.withUTF8 { idb in
                v.withUTF8 { vb in
                    body(UnsafeBufferPointer(rebasing: vb[Swift.min(off, vb.count)...]), idb)
                }
            }
        }
    }

    /// The entry's sort key, materialized (text case folded).
    func key(_ e: UInt32) -> SearchKey {
        with(e) { text, id in SearchKey(text: text.map(UserSearchIndex.lower), uid: Array(id), code: UInt8(e & 0xFF)) }
    }

    /// -1, 0, 1: the entry against `k` (text case folded, then uid bytes, then field and offset).
    func compare(_ e: UInt32, _ k: SearchKey) -> Int {
        with(e) { text, id in
            let c = SearchKey.compareFolded(text, k.text)
            if c != 0 { return c }
            let d = SearchKey.compareBytes(id, k.uid)
            if d != 0 { return d }
            let code = UInt8(e & 0xFF)
            return code == k.code ? 0 : (code < k.code ? -1 : 1)
        }
    }

    /// The entry's text starts with one of `prefixes` (sorted, none a prefix of another: only the greatest one not
    /// after the text can be its prefix, so a binary search finds it).
    func matchesAny(_ e: UInt32, _ prefixes: [[UInt8]]) -> Bool {
        var lo = 0, hi = prefixes.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if comparePrefix(e, prefixes[mid]) >= 0 { lo = mid + 1 } else { hi = mid }
        }
        return lo > 0 && comparePrefix(e, prefixes[lo - 1]) == 0
    }

    /// The entry's text (case folded) starts with `prefix` (case folded), or comes before it (-1) or after (1).
    func comparePrefix(_ e: UInt32, _ prefix: [UInt8]) -> Int {
        with(e) { text, _ in
            let n = Swift.min(text.count, prefix.count)
            for i in 0..<n {
                let a = UserSearchIndex.lower(text[i]), b = prefix[i]
                if a != b { return a < b ? -1 : 1 }
            }
            return text.count < prefix.count ? -1 : 0
        }
    }
}

/// An entry's place in the order, materialized: a page's cursor, an entry being inserted or found.
public struct SearchKey: Sendable, Equatable, Comparable {
    /// The text from the word on, ASCII case folded.
    public var text: [UInt8]
    public var uid: [UInt8]
    /// Field and offset (the entry's low byte).
    public var code: UInt8

    public static func < (a: SearchKey, b: SearchKey) -> Bool {
        a.text.withUnsafeBufferPointer { at in
            b.text.withUnsafeBufferPointer { bt in
                let c = compareBytes(at, bt)
                if c != 0 { return c < 0 }
                let d = a.uid.withUnsafeBufferPointer { au in b.uid.withUnsafeBufferPointer { bu in compareBytes(au, bu) } }
                if d != 0 { return d < 0 }
                return a.code < b.code
            }
        }
    }

    @inline(__always) static func compareBytes(_ a: UnsafeBufferPointer<UInt8>, _ b: UnsafeBufferPointer<UInt8>) -> Int {
        let n = Swift.min(a.count, b.count)
        for i in 0..<n where a[i] != b[i] { return a[i] < b[i] ? -1 : 1 }
        return a.count == b.count ? 0 : (a.count < b.count ? -1 : 1)
    }

    static func compareBytes(_ a: UnsafeBufferPointer<UInt8>, _ b: [UInt8]) -> Int {
        b.withUnsafeBufferPointer { compareBytes(a, $0) }
    }

    /// `a` case folded against `b` (already folded).
    @inline(__always) static func compareFolded(_ a: UnsafeBufferPointer<UInt8>, _ b: [UInt8]) -> Int {
        let n = Swift.min(a.count, b.count)
        for i in 0..<n {
            let x = UserSearchIndex.lower(a[i]), y = b[i]
            if x != y { return x < y ? -1 : 1 }
        }
        return a.count == b.count ? 0 : (a.count < b.count ? -1 : 1)
    }

    /// The cursor's wire form (a page token): `s1.` and base64url of the code, the uid's length, the uid and the text.
    public var token: String {
        var bytes: [UInt8] = [code]
        var n = UInt32(uid.count)
        for _ in 0..<4 { bytes.append(UInt8(n & 0xFF)); n >>= 8 }
        bytes += uid
        bytes += text
        return "s1." + Base64URL.encode(bytes)
    }

    public init(text: [UInt8], uid: [UInt8], code: UInt8) {
        self.text = text
        self.uid = uid
        self.code = code
    }

    /// The longest token a page can end on: a 128-byte uid and a field of up to 1,024 UTF-16 units from its word
    /// on (3 bytes each at most in UTF-8), base64url (4 characters for 3 bytes) after `s1.` and the 5-byte header.
    static let maxTokenLength = 3 + 4 * ((5 + 128 + 3 * UserFieldLimits.displayName + 2) / 3)

    /// A token `token` made; nil for anything else.
    public init?(token: String) {
        guard token.hasPrefix("s1."), token.utf8.count <= Self.maxTokenLength, let bytes = Base64URL.decode(String(token.dropFirst(3))),
              bytes.count >= 5 else { return nil }
        let n = Int(bytes[1]) | Int(bytes[2]) << 8 | Int(bytes[3]) << 16 | Int(bytes[4]) << 24
        guard n <= bytes.count - 5 else { return nil }
        code = bytes[0]
        uid = Array(bytes[5..<(5 + n)])
        text = Array(bytes[(5 + n)...])
    }
}

extension UserTable {
    /// What `q` (as a person typed it) is looked up as: its text, and when it reads as (part of) a phone number —
    /// digits, with `+`, spaces, dots, hyphens and parentheses — its digits after `+` and, without a `+`, after every
    /// country calling code (`650 555` finds `+1 650 555…`, `+44 650 555…`).
    public static func queryPrefixes(_ q: String) -> [[UInt8]] {
        var out: [[UInt8]] = [Array(q.utf8)]
        let stripped = q.utf8.filter { !" -.()".utf8.contains($0) }
        let plus = stripped.first == UInt8(ascii: "+")
        let digits = plus ? Array(stripped.dropFirst()) : stripped
        guard !digits.isEmpty, digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return out }
        let sign = UInt8(ascii: "+")
        out.append([sign] + digits)
        if !plus { for c in Self.callingCodes { out.append([sign] + c + digits) } }
        return out
    }

    static let callingCodes: [[UInt8]] = CallingCodes.regions.keys.sorted().map { Array($0.utf8) }
}
