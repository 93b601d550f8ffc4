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
    public static func parse(_ buf: UnsafeBufferPointer<UInt8>, maxDepth: Int = defaultMaxDepth,
                             maxObjectKeys: Int = defaultMaxObjectKeys) throws(JSONParseError) -> JSON {
        var p = JSONParser(bytes: buf, maxDepth: maxDepth, maxObjectKeys: maxObjectKeys)
        p.skipWhitespace()
        let v = try p.parseValue(depth: 0)
        p.skipWhitespace()
        guard p.i == buf.count else { throw p.fail("Unexpected trailing data") }
        return v
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

    private init(bytes: UnsafeBufferPointer<UInt8>, maxDepth: Int, maxObjectKeys: Int) {
        self.bytes = bytes
        self.maxDepth = maxDepth
        self.maxObjectKeys = maxObjectKeys
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
        var obj = JSONObject(capacity: 4)
        var seen = 0
        while true {
            skipWhitespace()
            guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else { throw fail("Expected a string key") }
            seen += 1
            guard seen <= maxObjectKeys else { throw fail("Too many keys in one object (more than \(maxObjectKeys))") }
            let key = try parseString()
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
