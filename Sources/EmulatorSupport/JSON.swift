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
}

/// An insertion-ordered JSON object. Lookups are linear, which beats hashing for the small objects on the wire.
public struct JSONObject: Sendable, Equatable, Sequence {
    public private(set) var entries: [(key: String, value: JSON)]

    public init() { entries = [] }
    public init(_ pairs: [(String, JSON)]) {
        entries = []
        entries.reserveCapacity(pairs.count)
        for (k, v) in pairs { self[k] = v }
    }

    public var count: Int { entries.count }
    public var isEmpty: Bool { entries.isEmpty }
    public var keys: [String] { entries.map(\.key) }

    public subscript(key: String) -> JSON? {
        get {
            for e in entries where e.key == key { return e.value }
            return nil
        }
        set {
            if let i = entries.firstIndex(where: { $0.key == key }) {
                if let v = newValue { entries[i].value = v } else { entries.remove(at: i) }
            } else if let v = newValue {
                entries.append((key, v))
            }
        }
    }

    /// Sets `key` only when `value` is non-nil (Google omits absent fields).
    public mutating func set(_ key: String, _ value: JSON?) {
        if let value { self[key] = value }
    }

    public func makeIterator() -> IndexingIterator<[(key: String, value: JSON)]> { entries.makeIterator() }

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
