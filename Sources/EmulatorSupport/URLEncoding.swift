/// application/x-www-form-urlencoded and query-string decoding.
public enum URLEncoding {
    /// Decodes `%XX` and (when `plusAsSpace`) `+`. Invalid escapes are kept literally; invalid UTF-8 is replaced.
    public static func percentDecode<S: StringProtocol>(_ s: S, plusAsSpace: Bool = true) -> String {
        if !s.utf8.contains(where: { $0 == UInt8(ascii: "%") || ($0 == UInt8(ascii: "+") && plusAsSpace) }) { return String(s) }
        var out: [UInt8] = []
        let u = Array(s.utf8)
        out.reserveCapacity(u.count)
        var i = 0
        while i < u.count {
            let c = u[i]
            if c == UInt8(ascii: "%"), i + 2 < u.count, let h = hexValue(u[i + 1]), let l = hexValue(u[i + 2]) {
                out.append(h << 4 | l)
                i += 3
            } else if c == UInt8(ascii: "+") && plusAsSpace {
                out.append(0x20)
                i += 1
            } else {
                out.append(c)
                i += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Parses `a=1&b=2` into ordered pairs (empty segments skipped).
    public static func parsePairs<S: StringProtocol>(_ s: S) -> [(String, String)] {
        var result: [(String, String)] = []
        let bytes = Array(s.utf8)
        var start = 0
        while start <= bytes.count {
            var end = start
            while end < bytes.count && bytes[end] != UInt8(ascii: "&") { end += 1 }
            if end > start {
                let part = bytes[start..<end]
                if let eq = part.firstIndex(of: UInt8(ascii: "=")) {
                    result.append((decodeBytes(part[start..<eq]), decodeBytes(part[(eq + 1)..<end])))
                } else {
                    result.append((decodeBytes(part), ""))
                }
            }
            start = end + 1
        }
        return result
    }

    private static func decodeBytes(_ b: ArraySlice<UInt8>) -> String {
        percentDecode(String(decoding: b, as: UTF8.self))
    }

    public static func percentEncode(_ s: String) -> String {
        var out = ""
        for b in s.utf8 {
            switch b {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(b))
            default:
                let hex = Array("0123456789ABCDEF".utf8)
                out += "%" + String(decoding: [hex[Int(b >> 4)], hex[Int(b & 15)]], as: UTF8.self)
            }
        }
        return out
    }

    private static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case 0x30...0x39: return c - 0x30
        case 0x41...0x46: return c - 0x41 + 10
        case 0x61...0x66: return c - 0x61 + 10
        default: return nil
        }
    }
}
