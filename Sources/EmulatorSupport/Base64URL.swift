/// Base64url without padding (RFC 4648 §5), specialised on raw buffers (the generic path costs 45× more).
public enum Base64URL {
    private static let alphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
    private static let standardAlphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    public static func encode(_ bytes: [UInt8]) -> String {
        String(decoding: encodeBytes(bytes), as: UTF8.self)
    }

    public static func encodeBytes(_ bytes: [UInt8]) -> [UInt8] {
        bytes.withUnsafeBufferPointer { encode(UnsafeRawBufferPointer($0), alphabet: alphabet, pad: false) }
    }

    /// Standard base64 with padding (for PEM bodies).
    public static func encodeStandard(_ bytes: [UInt8]) -> String {
        String(decoding: bytes.withUnsafeBufferPointer { encode(UnsafeRawBufferPointer($0), alphabet: standardAlphabet, pad: true) }, as: UTF8.self)
    }

    static func encode(_ input: UnsafeRawBufferPointer, alphabet: [UInt8], pad: Bool) -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity((input.count + 2) / 3 * 4)
        alphabet.withUnsafeBufferPointer { a in
            var i = 0
            let n = input.count
            while i + 3 <= n {
                let v = UInt32(input[i]) << 16 | UInt32(input[i + 1]) << 8 | UInt32(input[i + 2])
                out.append(a[Int(v >> 18 & 63)]); out.append(a[Int(v >> 12 & 63)])
                out.append(a[Int(v >> 6 & 63)]); out.append(a[Int(v & 63)])
                i += 3
            }
            let rest = n - i
            if rest == 1 {
                let v = UInt32(input[i]) << 16
                out.append(a[Int(v >> 18 & 63)]); out.append(a[Int(v >> 12 & 63)])
                if pad { out.append(0x3D); out.append(0x3D) }
            } else if rest == 2 {
                let v = UInt32(input[i]) << 16 | UInt32(input[i + 1]) << 8
                out.append(a[Int(v >> 18 & 63)]); out.append(a[Int(v >> 12 & 63)]); out.append(a[Int(v >> 6 & 63)])
                if pad { out.append(0x3D) }
            }
        }
        return out
    }

    /// Decodes base64url (padding optional; also accepts the standard alphabet). Nil on any invalid input.
    public static func decode<S: StringProtocol>(_ text: S) -> [UInt8]? {
        var out = [UInt8]()
        out.reserveCapacity(text.utf8.count * 3 / 4)
        var acc: UInt32 = 0
        var bits = 0
        var sawPad = false
        for c in text.utf8 {
            let v: UInt32
            switch c {
            case 0x41...0x5A: v = UInt32(c - 0x41)
            case 0x61...0x7A: v = UInt32(c - 0x61 + 26)
            case 0x30...0x39: v = UInt32(c - 0x30 + 52)
            case 0x2D, 0x2B: v = 62
            case 0x5F, 0x2F: v = 63
            case 0x3D: sawPad = true; continue
            default: return nil
            }
            if sawPad { return nil }
            acc = acc << 6 | v
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: acc >> UInt32(bits)))
                acc &= (1 << UInt32(bits)) - 1
            }
        }
        if bits >= 6 { return nil }
        return out
    }
}
