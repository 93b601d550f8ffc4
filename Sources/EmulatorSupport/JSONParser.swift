#if canImport(Glibc)
import Glibc
#endif

/// Why a JSON text was refused; `description` reads like Google's "Invalid JSON payload received." tails.
public struct JSONParseError: Error, Sendable, Equatable, CustomStringConvertible {
    public let message: String
    public let offset: Int
    public var description: String { "\(message) at position \(offset)." }
}

/// A strict RFC 8259 parser over raw bytes: validates UTF-8, limits nesting depth and keys per object, never traps.
/// Linear time: objects are built with `JSONObject`'s hash index, so n keys cost O(n).
/// Duplicate keys in an object: the last value wins (see `JSONObject`).
public struct JSONParser {
    public static let defaultMaxDepth = 128
    /// More keys than this in one object is refused ("Too many keys"): no API object comes near it, and it bounds
    /// what one hostile object can make a handler iterate.
    public static let defaultMaxObjectKeys = 10_000

    private let bytes: UnsafeBufferPointer<UInt8>
    private var i = 0
    private let maxDepth: Int
    private let maxObjectKeys: Int
    private let names: JSONNameCache?

    public static func parse(_ data: [UInt8], maxDepth: Int = defaultMaxDepth,
                             maxObjectKeys: Int = defaultMaxObjectKeys) throws(JSONParseError) -> JSON {
        do {
            return try data.withUnsafeBufferPointer { buf in try parse(buf, maxDepth: maxDepth, maxObjectKeys: maxObjectKeys) }
        } catch let e as JSONParseError {
            throw e
        } catch {
            throw JSONParseError(message: "Invalid JSON", offset: 0)
        }
    }

    /// Parses bytes in place (the stream reader's records, JSONStream.swift, without copying them out of its buffer).
    /// `names`: member names kept from earlier texts and reused (the stream reader's, for a file of records that
    /// repeat the same names).
    public static func parse(_ buf: UnsafeBufferPointer<UInt8>, maxDepth: Int = defaultMaxDepth,
                             maxObjectKeys: Int = defaultMaxObjectKeys, names: JSONNameCache? = nil) throws(JSONParseError) -> JSON {
        var p = JSONParser(bytes: buf, maxDepth: maxDepth, maxObjectKeys: maxObjectKeys, names: names)
        p.skipWhitespace()
        let v = try p.parseValue(depth: 0)
        p.skipWhitespace()
        guard p.i == buf.count else { throw p.fail("Unexpected trailing data") }
        return v
    }

    /// The value at the start of `buf` and how many bytes it takes (whitespace before it included): the stream
    /// reader's records, parsed where they lie without first scanning for their end. Whatever follows the value is
    /// not looked at; a value cut off by the end of `buf` fails like any other.
    public static func parsePrefix(_ buf: UnsafeBufferPointer<UInt8>, maxDepth: Int = defaultMaxDepth,
                                   maxObjectKeys: Int = defaultMaxObjectKeys, names: JSONNameCache? = nil) throws(JSONParseError) -> (JSON, Int) {
        var p = JSONParser(bytes: buf, maxDepth: maxDepth, maxObjectKeys: maxObjectKeys, names: names)
        p.skipWhitespace()
        let v = try p.parseValue(depth: 0)
        return (v, p.i)
    }

    public static func parse(_ text: String, maxDepth: Int = defaultMaxDepth,
                             maxObjectKeys: Int = defaultMaxObjectKeys) throws(JSONParseError) -> JSON {
        // In place for native strings (no copy into an array: custom claims are parsed for every imported user).
        let inPlace = text.utf8.withContiguousStorageIfAvailable { buf -> Result<JSON, JSONParseError> in
            do throws(JSONParseError) { return .success(try parse(buf, maxDepth: maxDepth, maxObjectKeys: maxObjectKeys)) } catch { return .failure(error) }
        }
        if let inPlace { return try inPlace.get() }
        return try parse(Array(text.utf8), maxDepth: maxDepth, maxObjectKeys: maxObjectKeys)
    }

    private init(bytes: UnsafeBufferPointer<UInt8>, maxDepth: Int, maxObjectKeys: Int, names: JSONNameCache? = nil) {
        self.bytes = bytes
        self.maxDepth = maxDepth
        self.maxObjectKeys = maxObjectKeys
        self.names = names
    }

    private func fail(_ message: String) -> JSONParseError { JSONParseError(message: message, offset: i) }

    private mutating func skipWhitespace() {
        while i < bytes.count {
            switch bytes[i] {
            case 0x20, 0x09, 0x0A, 0x0D: i += 1
            default: return
            }
        }
    }

    private mutating func parseValue(depth: Int) throws(JSONParseError) -> JSON {
        guard i < bytes.count else { throw fail("Unexpected end of input") }
        switch bytes[i] {
        case UInt8(ascii: "{"): return try parseObject(depth: depth + 1)
        case UInt8(ascii: "["): return try parseArray(depth: depth + 1)
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try literal("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw fail("Unexpected token")
        }
    }

    private mutating func literal(_ word: StaticString) throws(JSONParseError) {
        let n = word.utf8CodeUnitCount
        guard i + n <= bytes.count else { throw fail("Unexpected token") }
        let w = word.utf8Start
        for k in 0..<n where bytes[i + k] != w[k] { throw fail("Unexpected token") }
        i += n
    }

    private mutating func parseObject(depth: Int) throws(JSONParseError) -> JSON {
        guard depth <= maxDepth else { throw fail("Nesting too deep") }
        i += 1
        skipWhitespace()
        if i < bytes.count, bytes[i] == UInt8(ascii: "}") { i += 1; return .object(JSONObject()) }
        // A stream's records (a name cache: an accounts file) hold several members; a request's objects a few.
        var obj = JSONObject(capacity: names == nil ? 4 : 8)
        var seen = 0
        while true {
            skipWhitespace()
            guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else { throw fail("Expected a string key") }
            seen += 1
            guard seen <= maxObjectKeys else { throw fail("Too many keys in one object (more than \(maxObjectKeys))") }
            let key = try parseName()
            skipWhitespace()
            guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else { throw fail("Expected ':'") }
            i += 1
            skipWhitespace()
            obj[key] = try parseValue(depth: depth)
            skipWhitespace()
            guard i < bytes.count else { throw fail("Unexpected end of input") }
            if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
            if bytes[i] == UInt8(ascii: "}") { i += 1; return .object(obj) }
            throw fail("Expected ',' or '}'")
        }
    }

    private mutating func parseArray(depth: Int) throws(JSONParseError) -> JSON {
        guard depth <= maxDepth else { throw fail("Nesting too deep") }
        i += 1
        var arr: [JSON] = []
        skipWhitespace()
        if i < bytes.count, bytes[i] == UInt8(ascii: "]") { i += 1; return .array(arr) }
        while true {
            skipWhitespace()
            arr.append(try parseValue(depth: depth))
            skipWhitespace()
            guard i < bytes.count else { throw fail("Unexpected end of input") }
            if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
            if bytes[i] == UInt8(ascii: "]") { i += 1; return .array(arr) }
            throw fail("Expected ',' or ']'")
        }
    }

    private mutating func parseNumber() throws(JSONParseError) -> JSON {
        let start = i
        if bytes[i] == UInt8(ascii: "-") { i += 1 }
        guard i < bytes.count else { throw fail("Invalid number") }
        if bytes[i] == UInt8(ascii: "0") {
            i += 1
        } else if isDigit(bytes[i]) {
            while i < bytes.count, isDigit(bytes[i]) { i += 1 }
        } else {
            throw fail("Invalid number")
        }
        if i < bytes.count, bytes[i] == UInt8(ascii: ".") {
            i += 1
            guard i < bytes.count, isDigit(bytes[i]) else { throw fail("Invalid number") }
            while i < bytes.count, isDigit(bytes[i]) { i += 1 }
        }
        if i < bytes.count, bytes[i] == UInt8(ascii: "e") || bytes[i] == UInt8(ascii: "E") {
            i += 1
            if i < bytes.count, bytes[i] == UInt8(ascii: "+") || bytes[i] == UInt8(ascii: "-") { i += 1 }
            guard i < bytes.count, isDigit(bytes[i]) else { throw fail("Invalid number") }
            while i < bytes.count, isDigit(bytes[i]) { i += 1 }
        }
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<i]), as: UTF8.self)
        guard let d = Double(text) else { throw JSONParseError(message: "Invalid number", offset: start) }
        return .number(d)
    }

    @inline(__always) private func isDigit(_ b: UInt8) -> Bool { b >= 0x30 && b <= 0x39 }

    /// A member name: from `names` when it has these bytes (a short ASCII name without escapes), else as any string.
    private mutating func parseName() throws(JSONParseError) -> String {
        guard let names else { return try parseString() }
        let start = i + 1
        var j = start
        var seen: UInt8 = 0
        let limit = min(bytes.count, start + JSONNameCache.longest + 1)
        while j < limit {
            let b = bytes[j]
            if b == UInt8(ascii: "\"") {
                guard seen < 0x80, j > start else { break }
                let name = UnsafeBufferPointer(rebasing: bytes[start..<j])
                if let known = names.lookup(name) {
                    i = j + 1
                    return known
                }
                let text = try parseString()
                names.insert(text, name)
                return text
            }
            if b == UInt8(ascii: "\\") || b < 0x20 { break }
            seen |= b
            j += 1
        }
        return try parseString()
    }

    private mutating func parseString() throws(JSONParseError) -> String {
        i += 1  // opening quote
        let start = i
        // Fast path: no escapes. ASCII (what nearly every request carries) needs no UTF-8 validation: the generic
        // validating initializer looked up type metadata at run time for every string.
        var seen: UInt8 = 0
        while i < bytes.count {
            let b = bytes[i]
            if b == UInt8(ascii: "\"") {
                let slice = UnsafeBufferPointer(rebasing: bytes[start..<i])
                let text: String
                if seen < 0x80 {
                    text = String(decoding: slice, as: UTF8.self)
                } else {
                    guard let s = String(validating: slice, as: UTF8.self) else {
                        throw JSONParseError(message: "Invalid UTF-8 in string", offset: start)
                    }
                    text = s
                }
                i += 1
                return text
            }
            if b == UInt8(ascii: "\\") { break }
            if b < 0x20 { throw fail("Control character in string") }
            seen |= b
            i += 1
        }
        var out: [UInt8] = Array(UnsafeBufferPointer(rebasing: bytes[start..<i]))
        while i < bytes.count {
            let b = bytes[i]
            if b == UInt8(ascii: "\"") {
                i += 1
                guard let s = String(validating: out, as: UTF8.self) else {
                    throw JSONParseError(message: "Invalid UTF-8 in string", offset: start)
                }
                return s
            }
            if b < 0x20 { throw fail("Control character in string") }
            if b != UInt8(ascii: "\\") {
                out.append(b)
                i += 1
                continue
            }
            i += 1
            guard i < bytes.count else { break }
            let e = bytes[i]
            i += 1
            if let b = JSONEscape.byte(for: e) {
                out.append(b)
                continue
            }
            switch e {
            case UInt8(ascii: "u"):
                var scalar = try hex4()
                if scalar >= 0xD800 && scalar < 0xDC00 {
                    guard i + 1 < bytes.count, bytes[i] == UInt8(ascii: "\\"), bytes[i + 1] == UInt8(ascii: "u") else {
                        throw fail("Unpaired surrogate")
                    }
                    i += 2
                    let low = try hex4()
                    guard low >= 0xDC00 && low < 0xE000 else { throw fail("Unpaired surrogate") }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                } else if scalar >= 0xDC00 && scalar < 0xE000 {
                    throw fail("Unpaired surrogate")
                }
                guard let u = Unicode.Scalar(scalar) else { throw fail("Invalid escape") }
                out.append(contentsOf: Array(String(Character(u)).utf8))
            default:
                throw fail("Invalid escape")
            }
        }
        throw fail("Unterminated string")
    }

    private mutating func hex4() throws(JSONParseError) -> UInt32 {
        guard i + 4 <= bytes.count else { throw fail("Invalid \\u escape") }
        var v: UInt32 = 0
        for _ in 0..<4 {
            guard let d = JSONEscape.hexDigit(bytes[i]) else { throw fail("Invalid \\u escape") }
            v = v << 4 | d
            i += 1
        }
        return v
    }
}

/// JSON's string escapes, shared by the parser and the journal's row decoder (PhoneAuthStorage/UserRowDecoder.swift).
public enum JSONEscape {
    /// The byte a one-letter escape stands for (`\n` → 0x0A …); nil for `u` and anything that is not an escape.
    @inline(__always) public static func byte(for e: UInt8) -> UInt8? {
        switch e {
        case UInt8(ascii: "\""): 0x22
        case UInt8(ascii: "\\"): 0x5C
        case UInt8(ascii: "/"): 0x2F
        case UInt8(ascii: "b"): 0x08
        case UInt8(ascii: "f"): 0x0C
        case UInt8(ascii: "n"): 0x0A
        case UInt8(ascii: "r"): 0x0D
        case UInt8(ascii: "t"): 0x09
        default: nil
        }
    }

    /// A hexadecimal digit's value (`\uXXXX`), either case.
    @inline(__always) public static func hexDigit(_ c: UInt8) -> UInt32? {
        switch c {
        case 0x30...0x39: UInt32(c - 0x30)
        case 0x41...0x46: UInt32(c - 0x41 + 10)
        case 0x61...0x66: UInt32(c - 0x61 + 10)
        default: nil
        }
    }
}

/// Member names a parser has made, kept to be handed out again: a file of a million records repeats a dozen names,
/// and making each again cost a validation per name and an allocation per name longer than 15 bytes, and later its
/// release. Short ASCII names without escapes only, a fixed number of slots (a name that lands on a taken slot takes
/// it over): memory stays bounded whatever a file holds. Used by one thread at a time (one reader's).
public final class JSONNameCache {
    /// Names up to this many bytes are kept.
    public static let longest = 32
    private static let slotCount = 64
    /// Each slot's name bytes (`longest` apiece, one block) and length (0: empty), and the name made of them (raw
    /// storage, not arrays: a lookup is a compare and a copy, without the exclusivity checks of a class's array).
    private let bytes: UnsafeMutablePointer<UInt8>
    private let lengths: UnsafeMutablePointer<Int>
    private let values: UnsafeMutablePointer<String>

    public init() {
        bytes = .allocate(capacity: Self.slotCount * Self.longest)
        bytes.initialize(repeating: 0, count: Self.slotCount * Self.longest)
        lengths = .allocate(capacity: Self.slotCount)
        lengths.initialize(repeating: 0, count: Self.slotCount)
        values = .allocate(capacity: Self.slotCount)
        values.initialize(repeating: "", count: Self.slotCount)
    }

    deinit {
        bytes.deallocate()
        lengths.deallocate()
        values.deinitialize(count: Self.slotCount)
        values.deallocate()
    }

    @inline(__always) private static func slot(_ name: UnsafeBufferPointer<UInt8>) -> Int {
        let n = name.count
        var h = n &* 0x9E37
        h ^= Int(name[0]) &* 0x85EB
        h ^= Int(name[n - 1]) &* 0xC2B2
        h ^= Int(name[n >> 1]) &* 0x27D4
        return (h ^ (h >> 7)) & (slotCount - 1)
    }

    /// The name with these bytes (1 to `longest` of them), if kept.
    @inline(__always) func lookup(_ name: UnsafeBufferPointer<UInt8>) -> String? {
        let s = Self.slot(name)
        guard lengths[s] == name.count, memcmp(bytes + s * Self.longest, name.baseAddress!, name.count) == 0 else { return nil }
        return values[s]
    }

    /// Keeps `text`, made of `name` (1 to `longest` bytes), in place of whatever shared its slot.
    func insert(_ text: String, _ name: UnsafeBufferPointer<UInt8>) {
        precondition(name.count >= 1 && name.count <= Self.longest)
        let s = Self.slot(name)
        (bytes + s * Self.longest).update(from: name.baseAddress!, count: name.count)
        lengths[s] = name.count
        values[s] = text
    }
}
