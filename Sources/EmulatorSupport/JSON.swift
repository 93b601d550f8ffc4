import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A JSON value. Objects keep their key order, so what we emit is stable and mirrors Google's field order.
public enum JSON: Sendable, Equatable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSON])
    case object(JSONObject)

    public var stringValue: String? { if case .string(let s) = self { return s } else { return nil } }
    public var boolValue: Bool? { if case .bool(let b) = self { return b } else { return nil } }
    public var doubleValue: Double? { if case .number(let d) = self { return d } else { return nil } }
    public var arrayValue: [JSON]? { if case .array(let a) = self { return a } else { return nil } }
    public var objectValue: JSONObject? { if case .object(let o) = self { return o } else { return nil } }
    public var isNull: Bool { if case .null = self { return true } else { return false } }

    /// The value as an exact integer, if it is a finite integral number within Int64.
    public var int64Value: Int64? {
        guard case .number(let d) = self, d.isFinite, d.rounded() == d, abs(d) < 9.2e18 else { return nil }
        return Int64(d)
    }

    public var typeName: String {
        switch self {
        case .null: return "null"
        case .bool: return "boolean"
        case .number: return "number"
        case .string: return "string"
        case .array: return "array"
        case .object: return "object"
        }
    }

    public subscript(key: String) -> JSON? {
        if case .object(let o) = self { return o[key] }
        return nil
    }
}

extension JSON: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral, ExpressibleByFloatLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int) { self = .number(Double(value)) }
    public init(floatLiteral value: Double) { self = .number(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: JSON...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSON)...) { self = .object(JSONObject(elements)) }
    public init(nilLiteral: ()) { self = .null }
}

extension JSON {
    public static func int<I: BinaryInteger>(_ value: I) -> JSON { .number(Double(value)) }

    /// An Int64 stored exactly: JSON numbers are doubles, exact only up to 2^53, so larger magnitudes are written as
    /// decimal strings (what the journal and exports store; `exactInt64` reads both).
    public static func exactInt(_ v: Int64) -> JSON { v.magnitude <= 1 << 53 ? .int(v) : .string(String(v)) }
    public static func exactInt(_ v: UInt64) -> JSON { v <= 1 << 53 ? .int(v) : .string(String(v)) }

    /// Reads what `exactInt` wrote, and plain numbers. A number beyond Int64 saturates instead of failing (an older
    /// version could store one from a client value, and that must not make a whole record unreadable).
    public var exactInt64: Int64? {
        switch self {
        case .string(let s): return Int64(s)
        case .number(let d):
            guard d.isFinite else { return nil }
            if let exact = int64Value { return exact }
            if d >= 9.2e18 { return Int64.max }
            if d <= -9.2e18 { return Int64.min }
            return Int64(d.rounded(.towardZero))
        default: return nil
        }
    }
}

/// An insertion-ordered JSON object with O(1) amortised insert and lookup.
///
/// Small objects (what the wire carries: a handful of fields) are found by a linear scan of `entries`, which beats
/// hashing at that size. Past `indexThreshold` keys a hash index (key → position in `entries`) is built once and kept
/// current, so building an object of n keys costs O(n) however large n is (a hostile 1 MiB body of 110k keys
/// must not cost O(n²)). `String` hashing is seeded per process, so colliding keys cannot be precomputed.
///
/// Duplicate keys: **the last value wins**, at the position where the key first appeared. Setting an existing key
/// replaces its value and keeps its place in the order; the parser does the same for `{"a":1,"a":2}` (→ `{"a":2}`),
/// as most JSON parsers and the protobuf JSON parsers in non-strict mode do.
public struct JSONObject: Sendable, Sequence {
    /// Keys beyond this many get a hash index.
    static let indexThreshold = 12

    public private(set) var entries: [(key: String, value: JSON)]
    /// key → position in `entries`; empty (no allocation) until the object outgrows `indexThreshold`.
    private var index: [ExactText: Int] = [:]

    public init() { entries = [] }
    /// Room for `capacity` members without growing (the parser's objects: one allocation for a usual request body).
    public init(capacity: Int) {
        entries = []
        entries.reserveCapacity(capacity)
    }
    public init(_ pairs: [(String, JSON)]) {
        entries = []
        entries.reserveCapacity(pairs.count)
        for (k, v) in pairs { self[k] = v }
    }

    public var count: Int { entries.count }
    public var isEmpty: Bool { entries.isEmpty }
    public var keys: [String] { entries.map(\.key) }

    /// The position of `key` in `entries`.
    @inline(__always) private func position(of key: String) -> Int? {
        if !index.isEmpty {
            JSONObject.countProbe()
            return index[ExactText(key)]
        }
        let n = key.utf8.count
        for i in entries.indices {
            JSONObject.countProbe()
            if ExactText.same(entries[i].key, key, n) { return i }
        }
        return nil
    }

    public subscript(key: String) -> JSON? {
        get { position(of: key).map { entries[$0].value } }
        set {
            if let i = position(of: key) {
                if let v = newValue {
                    entries[i].value = v
                } else {
                    entries.remove(at: i)
                    rebuildIndex()
                }
            } else if let v = newValue {
                entries.append((key, v))
                if !index.isEmpty {
                    index[ExactText(key)] = entries.count - 1
                } else if entries.count > Self.indexThreshold {
                    rebuildIndex()
                }
            }
        }
    }

    private mutating func rebuildIndex() {
        guard entries.count > Self.indexThreshold else { index = [:]; return }
        var m = [ExactText: Int](minimumCapacity: entries.count)
        for (i, e) in entries.enumerated() { m[ExactText(e.key)] = i }
        index = m
    }

    /// Sets `key` only when `value` is non-nil (Google omits absent fields).
    public mutating func set(_ key: String, _ value: JSON?) {
        if let value { self[key] = value }
    }

    /// Reserves room for `n` entries (the index is sized when it is built).
    public mutating func reserveCapacity(_ n: Int) { entries.reserveCapacity(n) }

    public func makeIterator() -> IndexingIterator<[(key: String, value: JSON)]> { entries.makeIterator() }

    #if DEBUG
    /// Key probes (one per linear comparison or hash lookup), counted in debug builds so tests can check that
    /// building and reading objects is linear by counting work instead of timing it.
    static let probes = Atomic<Int>(0)
    @inline(__always) static func countProbe() { probes.wrappingAdd(1, ordering: .relaxed) }
    #else
    @inline(__always) static func countProbe() {}
    #endif
}

/// Text compared and hashed by its bytes (UTF-8), never by `String`'s canonical equivalence — a precomposed `é` and
/// `e` + U+0301, or `K` and the Kelvin sign, are different: `JSONObject`'s member names (as JSON compares them, in a
/// small object and in an indexed one alike) and an import's memo of valid claims texts (`ValidClaims`, where an
/// equivalent text may have another UTF-16 length). Lengths first, which turns away nearly every other name at once
/// (`String`'s `==` alone compared the bytes of every name longer than 15 — `customAttributes`, `providerUserInfo` —
/// about 4 k instructions per imported record, callgrind).
public struct ExactText: Hashable, Sendable {
    public let text: String
    @inline(__always) public init(_ text: String) { self.text = text }

    @inline(__always) public static func same(_ a: String, _ b: String, _ n: Int) -> Bool {
        // `==` turns the rest away cheaply (a short ASCII name by its bits); only a name it calls equal is then
        // compared byte for byte (`==` also equates same-length reorderings of combining marks).
        guard a.utf8.count == n, a == b else { return false }
        guard n > 0 else { return true }
        var x = a, y = b
        return x.withUTF8 { p in y.withUTF8 { q in memcmp(p.baseAddress!, q.baseAddress!, n) == 0 } }
    }

    public static func == (a: ExactText, b: ExactText) -> Bool { same(a.text, b.text, b.text.utf8.count) }

    public func hash(into h: inout Hasher) {
        var t = text
        t.withUTF8 { h.combine(bytes: UnsafeRawBufferPointer($0)) }
    }
}

extension JSONObject: Equatable {
    /// Same keys with equal values; order does not matter.
    public static func == (a: JSONObject, b: JSONObject) -> Bool {
        guard a.entries.count == b.entries.count else { return false }
        for (k, v) in a.entries where b[k] != v { return false }
        return true
    }
}

extension JSONObject: ExpressibleByDictionaryLiteral {
    public init(dictionaryLiteral elements: (String, JSON)...) { self.init(elements) }
}

extension JSONObject {
    /// Deep merge: objects merge recursively, everything else (arrays, scalars) is replaced.
    /// Keys listed in `replaceWhole` are replaced even when both sides are objects (maps such as phone → code).
    public func merging(_ other: JSONObject, replaceWhole: Set<String> = []) -> JSONObject {
        var out = self
        for (k, v) in other {
            if case .object(let mine)? = out[k], case .object(let theirs) = v, !replaceWhole.contains(k) {
                out[k] = .object(mine.merging(theirs, replaceWhole: replaceWhole))
            } else {
                out[k] = v
            }
        }
        return out
    }

    /// The value at a dotted path (`signIn.phoneNumber.enabled`).
    public func value(atPath path: [String]) -> JSON? {
        guard let first = path.first else { return .object(self) }
        guard let v = self[first] else { return nil }
        if path.count == 1 { return v }
        guard case .object(let o) = v else { return nil }
        return o.value(atPath: Array(path.dropFirst()))
    }

    /// Sets (or with nil removes) the value at a dotted path, creating objects on the way.
    public mutating func setValue(_ value: JSON?, atPath path: [String]) {
        guard let first = path.first else { return }
        if path.count == 1 { self[first] = value; return }
        var child = self[first]?.objectValue ?? JSONObject()
        child.setValue(value, atPath: Array(path.dropFirst()))
        self[first] = child.isEmpty && value == nil ? nil : .object(child)
    }
}
