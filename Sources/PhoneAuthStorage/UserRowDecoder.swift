import EmulatorSupport
import PhoneAuthCore
#if canImport(Glibc)
import Glibc
#endif

/// A user row's journal document (`Codecs.encode`: the standard table's `journalObject`, compact JSON) read straight
/// from its bytes into a `UserRecord`: no `JSON` tree, no `JSONObject`, no walk of the field table per row. A restart
/// from `--data-dir` reads a million of them; the generic way (`JSONParser` then `UserFieldTable.record(fromJournal:)`)
/// cost ~45,000 instructions a row, most of it building and searching the tree and copying the table's rows.
///
/// It reads the documents this version writes: scalar fields as their exact JSON types, times as integers (or the
/// decimal strings `JSON.exactInt` writes past 2^53), the nested fields (`providerUserInfo`, `mfaInfo`, an imported
/// hash's `passwordHashAlgorithm`) parsed in place by `JSONParser` and given to the table's own `assign`. Anything
/// else — a type it does not expect, a key seen twice, an unknown key, a `\u` surrogate escape, a fraction or
/// exponent, malformed text — answers `nil`, and the caller decodes that row the generic way, so every document
/// decodes exactly as `Codecs.decodeUser` would (`UserRowDecoderTests` compares the two).
struct UserRowDecoder: Sendable {
    private let providerField: UserField
    private let mfaField: UserField
    private let algorithmField: UserField

    /// A decoder for `table`, or nil when the table is not the standard one (tests with extra fields: the generic way).
    init?(_ table: UserFieldTable) {
        guard table.fields.map(\.journalKey) == UserFieldTable.standard.fields.map(\.journalKey),
              let p = table["providerUserInfo"], let m = table["mfaInfo"], let a = table[UserFields.passwordHashAlgorithm] else { return nil }
        providerField = p
        mfaField = m
        algorithmField = a
    }

    /// The journal keys the decoder knows, one bit each (a key seen twice goes the generic way).
    private enum Key: Int {
        case localId, email, emailVerified, displayName, photoUrl, phoneNumber, disabled, providerUserInfo, customAttributes, validSince,
             lastLoginAt, createdAt, lastRefreshAt, tenantId, passwordHash, salt, passwordUpdatedAt, passwordHashAlgorithm, emailLinkSignin,
             screenName, mfaInfo, initialEmail
    }

    /// The record `doc` holds; nil: not a document this reader takes (decode it the generic way).
    func decode(_ doc: UnsafeBufferPointer<UInt8>) -> UserRecord? {
        var scratch: [UInt8] = []
        return decode(doc, scratch: &scratch)
    }

    /// `decode(_:)` with a buffer for unescaping strings that the caller keeps from one document to the next.
    func decode(_ doc: UnsafeBufferPointer<UInt8>, scratch: inout [UInt8]) -> UserRecord? {
        var r = Reader(doc)
        var u = UserRecord(localId: "", createdAt: 0)
        var hasId = false
        var created: Int64? = nil
        var seen: UInt32 = 0
        r.skipSpace()
        guard r.take(UInt8(ascii: "{")) else { return nil }
        r.skipSpace()
        if !r.take(UInt8(ascii: "}")) {
            while true {
                r.skipSpace()
                guard let key = r.key() else { return nil }
                let bit: UInt32 = 1 << UInt32(key.rawValue)
                guard seen & bit == 0 else { return nil }
                seen |= bit
                r.skipSpace()
                guard r.take(UInt8(ascii: ":")) else { return nil }
                r.skipSpace()
                if r.takeNull() {
                    // A null is an absent field (record(fromJournal:) skips it); the required two stay missing.
                    if key == .localId { hasId = false }
                    if key == .createdAt { created = nil }
                } else {
                    switch key {
                    case .localId:
                        guard let s = r.string(&scratch) else { return nil }
                        u.localId = s
                        hasId = true
                    case .email: guard let s = r.string(&scratch) else { return nil }; u.email = s
                    case .emailVerified: guard let b = r.bool() else { return nil }; u.emailVerified = b
                    case .displayName: guard let s = r.string(&scratch) else { return nil }; u.displayName = s
                    case .photoUrl: guard let s = r.string(&scratch) else { return nil }; u.photoUrl = s
                    case .phoneNumber: guard let s = r.string(&scratch) else { return nil }; u.phoneNumber = s
                    case .disabled: guard let b = r.bool() else { return nil }; u.disabled = b
                    case .customAttributes: guard let s = r.string(&scratch) else { return nil }; u.customAttributes = s
                    case .validSince: guard let t = r.exactInt() else { return nil }; u.validSince = t
                    case .lastLoginAt: guard let t = r.exactInt() else { return nil }; u.lastLoginAt = t
                    case .createdAt: guard let t = r.exactInt() else { return nil }; created = t
                    case .lastRefreshAt: guard let t = r.exactInt() else { return nil }; u.lastRefreshAt = t
                    case .tenantId: guard let s = r.string(&scratch) else { return nil }; u.tenantId = s
                    case .passwordHash: guard let s = r.string(&scratch) else { return nil }; u.passwordHash = s
                    case .salt: guard let s = r.string(&scratch) else { return nil }; u.salt = s
                    case .passwordUpdatedAt: guard let t = r.exactInt() else { return nil }; u.passwordUpdatedAt = t
                    case .emailLinkSignin: guard let b = r.bool() else { return nil }; u.emailLinkSignin = b
                    case .screenName: guard let s = r.string(&scratch) else { return nil }; u.screenName = s
                    case .initialEmail: guard let s = r.string(&scratch) else { return nil }; u.initialEmail = s
                    case .providerUserInfo: guard let v = r.nested() else { return nil }; providerField.assign(&u, v)
                    case .mfaInfo: guard let v = r.nested() else { return nil }; mfaField.assign(&u, v)
                    case .passwordHashAlgorithm: guard let v = r.nested() else { return nil }; algorithmField.assign(&u, v)
                    }
                }
                r.skipSpace()
                if r.take(UInt8(ascii: ",")) { continue }
                guard r.take(UInt8(ascii: "}")) else { return nil }
                break
            }
        }
        r.skipSpace()
        guard r.atEnd, hasId, let created else { return nil }
        u.createdAt = created
        return u
    }

    /// A cursor over one document.
    private struct Reader {
        let bytes: UnsafeBufferPointer<UInt8>
        var i = 0

        init(_ bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

        var atEnd: Bool { i == bytes.count }

        @inline(__always)
        mutating func skipSpace() {
            while i < bytes.count, bytes[i] == 0x20 || bytes[i] == 0x0A || bytes[i] == 0x0D || bytes[i] == 0x09 { i += 1 }
        }

        @inline(__always)
        mutating func take(_ b: UInt8) -> Bool {
            guard i < bytes.count, bytes[i] == b else { return false }
            i += 1
            return true
        }

        mutating func takeNull() -> Bool { literal("null") }

        mutating func literal(_ w: StaticString) -> Bool {
            let n = w.utf8CodeUnitCount
            guard i + n <= bytes.count else { return false }
            let p = w.utf8Start
            for k in 0..<n where bytes[i + k] != p[k] { return false }
            // The literal must end there (`nullx` is not `null`).
            if i + n < bytes.count, Self.isWordByte(bytes[i + n]) { return false }
            i += n
            return true
        }

        static func isWordByte(_ b: UInt8) -> Bool { (b >= 0x30 && b <= 0x39) || (b | 0x20 >= 0x61 && b | 0x20 <= 0x7A) || b == 0x2E || b == 0x2D || b == 0x2B }

        mutating func bool() -> Bool? {
            if literal("true") { return true }
            if literal("false") { return false }
            return nil
        }

        /// A key: a plain (unescaped) quoted name the decoder knows.
        mutating func key() -> Key? {
            guard take(0x22) else { return nil }
            let start = i
            while i < bytes.count, bytes[i] != 0x22 {
                if bytes[i] == 0x5C || bytes[i] < 0x20 { return nil }
                i += 1
            }
            guard i < bytes.count else { return nil }
            let k = UnsafeBufferPointer(rebasing: bytes[start..<i])
            i += 1
            return Self.keys(k)
        }

        static func keys(_ k: UnsafeBufferPointer<UInt8>) -> Key? {
            @inline(__always) func is_(_ s: StaticString) -> Bool {
                s.utf8CodeUnitCount == k.count && memcmp(s.utf8Start, k.baseAddress!, k.count) == 0
            }
            guard k.count > 0 else { return nil }
            switch k[0] {
            case UInt8(ascii: "l"):
                if is_("localId") { return .localId }
                if is_("lastLoginAt") { return .lastLoginAt }
                if is_("lastRefreshAt") { return .lastRefreshAt }
            case UInt8(ascii: "e"):
                if is_("email") { return .email }
                if is_("emailVerified") { return .emailVerified }
                if is_("emailLinkSignin") { return .emailLinkSignin }
            case UInt8(ascii: "d"):
                if is_("displayName") { return .displayName }
                if is_("disabled") { return .disabled }
            case UInt8(ascii: "p"):
                if is_("phoneNumber") { return .phoneNumber }
                if is_("photoUrl") { return .photoUrl }
                if is_("providerUserInfo") { return .providerUserInfo }
                if is_("passwordHash") { return .passwordHash }
                if is_("passwordUpdatedAt") { return .passwordUpdatedAt }
                if is_("passwordHashAlgorithm") { return .passwordHashAlgorithm }
            case UInt8(ascii: "c"):
                if is_("customAttributes") { return .customAttributes }
                if is_("createdAt") { return .createdAt }
            case UInt8(ascii: "v"): if is_("validSince") { return .validSince }
            case UInt8(ascii: "t"): if is_("tenantId") { return .tenantId }
            case UInt8(ascii: "s"):
                if is_("salt") { return .salt }
                if is_("screenName") { return .screenName }
            case UInt8(ascii: "m"): if is_("mfaInfo") { return .mfaInfo }
            case UInt8(ascii: "i"): if is_("initialEmail") { return .initialEmail }
            default: break
            }
            return nil
        }

        /// A string value, unescaped (`\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t`, `\u` outside the surrogates);
        /// bytes decoded as `String(decoding:)` does (what the row's text went through before this reader existed).
        mutating func string(_ out: inout [UInt8]) -> String? {
            guard take(0x22) else { return nil }
            let start = i
            while i < bytes.count {
                let b = bytes[i]
                if b == 0x22 {
                    let s = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<i]), as: UTF8.self)
                    i += 1
                    return s
                }
                if b == 0x5C { break }
                if b < 0x20 { return nil }
                i += 1
            }
            out.removeAll(keepingCapacity: true)
            out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<i]))
            while i < bytes.count {
                let b = bytes[i]
                if b == 0x22 {
                    i += 1
                    return String(decoding: out, as: UTF8.self)
                }
                if b < 0x20 { return nil }
                if b != 0x5C {
                    out.append(b)
                    i += 1
                    continue
                }
                guard i + 1 < bytes.count else { return nil }
                let e = bytes[i + 1]
                i += 2
                if let b = JSONEscape.byte(for: e) {
                    out.append(b)
                    continue
                }
                switch e {
                case UInt8(ascii: "u"):
                    guard i + 4 <= bytes.count else { return nil }
                    var v: UInt32 = 0
                    for k in 0..<4 {
                        guard let d = JSONEscape.hexDigit(bytes[i + k]) else { return nil }
                        v = v << 4 | d
                    }
                    i += 4
                    // Surrogates (pairs and lone ones) are left to the generic parser and its rules.
                    guard v < 0xD800 || v > 0xDFFF, let scalar = Unicode.Scalar(v) else { return nil }
                    out.append(contentsOf: UTF8.encode(scalar)!)
                default: return nil
                }
            }
            return nil
        }

        /// An exact integer: a JSON integer up to 2^53 in magnitude (exact as the double `JSONParser` makes of it), or
        /// a decimal string (`JSON.exactInt` past 2^53) within Int64.
        mutating func exactInt() -> Int64? {
            let quoted = take(0x22)
            var negative = false
            if i < bytes.count, bytes[i] == UInt8(ascii: "-") {
                negative = true
                i += 1
            }
            let start = i
            var v: UInt64 = 0
            while i < bytes.count, bytes[i] >= 0x30, bytes[i] <= 0x39 {
                // 19 digits fit a UInt64; Int64's range is checked below.
                guard i - start < 19 else { return nil }
                v = v * 10 + UInt64(bytes[i] - 0x30)
                i += 1
            }
            let digits = i - start
            guard digits > 0 else { return nil }
            if quoted {
                // Int64(String) takes a leading zero ("007") but no "+" or spaces: the generic way reads those.
                guard take(0x22) else { return nil }
            } else {
                // JSON: up to 2^53 (exact as the double the generic way makes of it), no leading zero, no fraction or
                // exponent (the generic way rounds those through a double).
                guard v <= 1 << 53, !(digits > 1 && bytes[start] == 0x30) else { return nil }
                if i < bytes.count, Self.isWordByte(bytes[i]) { return nil }
            }
            if negative {
                guard v <= UInt64(Int64.max) + 1 else { return nil }
                return Int64(bitPattern: 0 &- v)
            }
            guard v <= UInt64(Int64.max) else { return nil }
            return Int64(v)
        }

        /// A nested value (array or object) parsed in place by `JSONParser`.
        mutating func nested() -> JSON? {
            guard i < bytes.count, bytes[i] == UInt8(ascii: "[") || bytes[i] == UInt8(ascii: "{") else { return nil }
            let start = i
            var depth = 0
            while i < bytes.count {
                let b = bytes[i]
                i += 1
                switch b {
                case UInt8(ascii: "["), UInt8(ascii: "{"): depth += 1
                case UInt8(ascii: "]"), UInt8(ascii: "}"):
                    depth -= 1
                    // One level below the document: the generic parse of the whole document allows one level less here.
                    if depth == 0 { return try? JSONParser.parse(UnsafeBufferPointer(rebasing: bytes[start..<i]), maxDepth: JSONParser.defaultMaxDepth - 1) }
                case 0x22:
                    while i < bytes.count, bytes[i] != 0x22 {
                        if bytes[i] == 0x5C { i += 1 }
                        i += 1
                    }
                    i += 1
                default: break
                }
            }
            return nil
        }
    }
}

/// User documents copied out of SQLite's rows, a chunk at a time, for a worker to decode (`DataDirectory.loadUsers`).
struct UserRowChunk: Sendable {
    /// Rows a chunk holds at most: a user table's chunk (a restore takes the decoded chunks as the table's own).
    static let rows = UserTable.chunkSize

    private var bytes: [UInt8] = []
    /// Where each document ends in `bytes`.
    private var ends: [Int] = []

    init() {
        bytes.reserveCapacity(Self.rows * 256)
        ends.reserveCapacity(Self.rows)
    }

    var count: Int { ends.count }
    var isEmpty: Bool { ends.isEmpty }

    mutating func append(_ doc: UnsafeBufferPointer<UInt8>) {
        bytes.append(contentsOf: doc)
        ends.append(bytes.count)
    }

    /// The records, in order; nil if a document is unreadable both ways.
    func decode(_ decoder: UserRowDecoder?, _ fields: UserFieldTable) -> ContiguousArray<UserRecord>? {
        var out: ContiguousArray<UserRecord> = []
        out.reserveCapacity(ends.count)
        var scratch: [UInt8] = []
        scratch.reserveCapacity(1024)
        return bytes.withUnsafeBufferPointer { all -> ContiguousArray<UserRecord>? in
            var start = 0
            for end in ends {
                let doc = UnsafeBufferPointer(rebasing: all[start..<end])
                start = end
                guard let u = decoder?.decode(doc, scratch: &scratch) ?? Codecs.decodeUser(String(decoding: doc, as: UTF8.self), fields: fields) else { return nil }
                out.append(u)
            }
            return out
        }
    }
}
