extension JSON {
    /// Compact serialization as UTF-8 bytes.
    public func serialized() -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        JSONWriter.write(self, into: &out, indent: nil, level: 0)
        return out
    }

    /// Appends `s` as a JSON string (quoted, escaped).
    public static func writeString(_ s: String, into out: inout [UInt8]) {
        JSONWriter.writeString(s, into: &out)
    }

    /// Appends `v` as a JSON array of strings.
    public static func writeStrings(_ v: [String], into out: inout [UInt8]) {
        out.append(UInt8(ascii: "["))
        for (n, e) in v.enumerated() {
            if n > 0 { out.append(UInt8(ascii: ",")) }
            JSONWriter.writeString(e, into: &out)
        }
        out.append(UInt8(ascii: "]"))
    }

    /// Appends `n` in decimal.
    public static func writeInt(_ n: Int64, into out: inout [UInt8]) {
        if n < 0 { out.append(UInt8(ascii: "-")) }
        writeInt(n.magnitude, into: &out)
    }

    /// Appends `n` in decimal (concrete, not generic: a generic integer across modules is not specialized, and cost
    /// an event's rendering a quarter of its time).
    public static func writeInt(_ n: UInt64, into out: inout [UInt8]) {
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes: room for 20 digits
        var v = n
        var count = 0
        withUnsafeMutableBytes(of: &digits) { buf in
            repeat {
                buf[23 - count] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: v % 10)
                v /= 10
                count += 1
            } while v > 0
            out.append(contentsOf: UnsafeRawBufferPointer(rebasing: buf[(24 - count)...]))
        }
    }

    /// Serialization with two-space indentation (for files and people).
    public func prettySerialized() -> [UInt8] {
        var out: [UInt8] = []
        JSONWriter.write(self, into: &out, indent: 2, level: 0)
        out.append(0x0A)
        return out
    }

    /// Appends the two-space-indented form as it appears `level` levels deep in a pretty document (no newline
    /// after it): for streaming one array element at a time into a file.
    public func prettySerialized(into out: inout [UInt8], level: Int) {
        JSONWriter.write(self, into: &out, indent: 2, level: level)
    }

    public var serializedString: String { String(decoding: serialized(), as: UTF8.self) }
    public var prettyString: String { String(decoding: prettySerialized(), as: UTF8.self) }

    /// Writes a number as JSON (non-finite: `null`).
    public static func writeNumber(_ d: Double, into out: inout [UInt8]) { JSONWriter.writeNumber(d, into: &out) }
}

enum JSONWriter {
    static func write(_ v: JSON, into out: inout [UInt8], indent: Int?, level: Int) {
        switch v {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .number(let d): writeNumber(d, into: &out)
        case .string(let s): writeString(s, into: &out)
        case .array(let a):
            out.append(UInt8(ascii: "["))
            for (n, e) in a.enumerated() {
                if n > 0 { out.append(UInt8(ascii: ",")) }
                newline(&out, indent, level + 1)
                write(e, into: &out, indent: indent, level: level + 1)
            }
            if !a.isEmpty { newline(&out, indent, level) }
            out.append(UInt8(ascii: "]"))
        case .object(let o):
            out.append(UInt8(ascii: "{"))
            var first = true
            for (k, e) in o {
                if !first { out.append(UInt8(ascii: ",")) }
                first = false
                newline(&out, indent, level + 1)
                writeString(k, into: &out)
                out.append(UInt8(ascii: ":"))
                if indent != nil { out.append(0x20) }
                write(e, into: &out, indent: indent, level: level + 1)
            }
            if !o.isEmpty { newline(&out, indent, level) }
            out.append(UInt8(ascii: "}"))
        }
    }

    private static func newline(_ out: inout [UInt8], _ indent: Int?, _ level: Int) {
        guard let indent else { return }
        out.append(0x0A)
        out.append(contentsOf: repeatElement(0x20, count: indent * level))
    }

    static func writeNumber(_ d: Double, into out: inout [UInt8]) {
        if !d.isFinite {
            out.append(contentsOf: "null".utf8)
        } else if d.rounded() == d, d >= -9_223_372_036_854_775_808.0, d < 9_223_372_036_854_775_808.0 {
            // Every integral double in Int64's range prints as its exact integer (no exponent), so an Int64 stored
            // through `JSON.int` reads back as the same double: exactly the value for magnitudes up to 2^53.
            out.append(contentsOf: String(Int64(d)).utf8)
        } else {
            out.append(contentsOf: d.description.utf8)
        }
    }

    private static let hex: [UInt8] = Array("0123456789abcdef".utf8)

    /// True when one of the eight bytes of `x` is below 0x20, '"' (0x22) or '\\' (0x5C); false only when none is
    /// (each test is the exact "some byte is less than n / is zero" bit trick, no false negatives).
    @inline(__always)
    static func mayNeedEscape(_ x: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101, highs: UInt64 = 0x8080_8080_8080_8080
        let control = (x &- ones &* 0x20) & ~x & highs
        let q = x ^ (ones &* 0x22), b = x ^ (ones &* 0x5C)
        let quote = (q &- ones) & ~q & highs
        let backslash = (b &- ones) & ~b & highs
        return (control | quote | backslash) != 0
    }

    static func writeString(_ s: String, into out: inout [UInt8]) {
        out.append(0x22)
        writeContents(s, into: &out)
        out.append(0x22)
    }

    /// Appends `s` escaped, without quotes; reads a native string's bytes in place (no copy of the string).
    static func writeContents(_ s: String, into out: inout [UInt8]) {
        if s.utf8.withContiguousStorageIfAvailable({ writeContents($0, into: &out) }) != nil { return }
        var s = s
        s.withUTF8 { writeContents($0, into: &out) }
    }

    private static func writeContents(_ buf: UnsafeBufferPointer<UInt8>, into out: inout [UInt8]) {
        guard let base = buf.baseAddress else { return }
        let raw = UnsafeRawPointer(base)
        var start = 0
        var idx = 0
        let n = buf.count
        while idx < n {
            // Eight bytes at a time while none needs escaping (a control byte, '"' or '\\'): a token is a kilobyte
            // of plain text, and this ran a compare-and-branch chain per byte.
            if idx + 8 <= n, !Self.mayNeedEscape(UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: idx, as: UInt64.self))) {
                idx += 8
                continue
            }
            let b = buf[idx]
            idx += 1
            if b >= 0x20 && b != 0x22 && b != 0x5C { continue }
            let at = idx - 1
            if at > start { out.append(contentsOf: UnsafeBufferPointer(rebasing: buf[start..<at])) }
            start = at + 1
            switch b {
            case 0x22: out.append(contentsOf: [0x5C, 0x22])
            case 0x5C: out.append(contentsOf: [0x5C, 0x5C])
            case 0x0A: out.append(contentsOf: [0x5C, UInt8(ascii: "n")])
            case 0x0D: out.append(contentsOf: [0x5C, UInt8(ascii: "r")])
            case 0x09: out.append(contentsOf: [0x5C, UInt8(ascii: "t")])
            default:
                out.append(contentsOf: [0x5C, UInt8(ascii: "u"), 0x30, 0x30, hex[Int(b >> 4)], hex[Int(b & 0xF)]])
            }
        }
        if start < buf.count { out.append(contentsOf: UnsafeBufferPointer(rebasing: buf[start..<buf.count])) }
    }
}

/// A JSON object written member by member straight into bytes, for the replies every sign-in sends (no `JSONObject`
/// and no `JSON` tree to build, copy and walk): the bytes are those `JSON.serialized()` gives for the same members in
/// the same order. Keys are static text that needs no escaping.
public struct JSONObjectBytes {
    private var bytes: [UInt8]
    private var empty = true

    public init(capacity: Int = 256) {
        bytes = []
        bytes.reserveCapacity(capacity)
        bytes.append(UInt8(ascii: "{"))
    }

    private mutating func key(_ k: StaticString) {
        if !empty { bytes.append(UInt8(ascii: ",")) }
        empty = false
        bytes.append(UInt8(ascii: "\""))
        k.withUTF8Buffer { bytes.append(contentsOf: $0) }
        bytes.append(UInt8(ascii: "\""))
        bytes.append(UInt8(ascii: ":"))
    }

    public mutating func string(_ k: StaticString, _ v: String) {
        key(k)
        JSONWriter.writeString(v, into: &bytes)
    }

    /// A string member whose value is `prefix` followed by `v`, without building that string; `prefix` is static text
    /// that needs no escaping.
    public mutating func string(_ k: StaticString, prefix: StaticString, _ v: String) {
        key(k)
        bytes.append(0x22)
        prefix.withUTF8Buffer { bytes.append(contentsOf: $0) }
        JSONWriter.writeContents(v, into: &bytes)
        bytes.append(0x22)
    }

    public mutating func bool(_ k: StaticString, _ v: Bool) {
        key(k)
        bytes.append(contentsOf: v ? "true".utf8 : "false".utf8)
    }

    public mutating func int(_ k: StaticString, _ v: Int64) {
        key(k)
        JSON.writeInt(v, into: &bytes)
    }

    /// An array of strings.
    public mutating func strings(_ k: StaticString, _ v: [String]) {
        key(k)
        JSON.writeStrings(v, into: &bytes)
    }

    /// A nested object, written by `body` into the same bytes.
    public mutating func object(_ k: StaticString, _ body: (inout JSONObjectBytes) -> Void) {
        key(k)
        var inner = JSONObjectBytes(continuing: &bytes)
        body(&inner)
        bytes = inner.finish()
    }

    /// Opens an object at the end of `buffer`, taking the buffer over (no copy).
    private init(continuing buffer: inout [UInt8]) {
        bytes = []
        swap(&bytes, &buffer)
        bytes.append(UInt8(ascii: "{"))
    }

    /// The object, closed; its bytes are taken out (a `consuming` finish copied them: the caller's variable still held
    /// the buffer when the closing brace was appended).
    public mutating func finish() -> [UInt8] {
        bytes.append(UInt8(ascii: "}"))
        var out: [UInt8] = []
        swap(&out, &bytes)
        return out
    }
}
