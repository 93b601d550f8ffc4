/// Base64url without padding (RFC 4648 §5), specialised on raw buffers (the generic path costs 45× more).
public enum Base64URL {
    private static let alphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
    private static let standardAlphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    public static func encode(_ bytes: [UInt8]) -> String {
        String(decoding: encodeBytes(bytes), as: UTF8.self)
    }

    public static func encodeBytes(_ bytes: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        append(bytes, to: &out)
        return out
    }

    /// Standard base64 with padding (for PEM bodies).
    public static func encodeStandard(_ bytes: [UInt8]) -> String {
        String(decoding: bytes.withUnsafeBufferPointer { encode(UnsafeRawBufferPointer($0), alphabet: standardAlphabet, pad: true) }, as: UTF8.self)
    }

    static func encode(_ input: UnsafeRawBufferPointer, alphabet: [UInt8], pad: Bool) -> [UInt8] {
        var out = [UInt8]()
        append(input, alphabet: alphabet, pad: pad, to: &out)
        return out
    }

    /// Appends the base64url of `input` to `out` (no padding): a token's parts are encoded straight into the token.
    public static func append(_ input: UnsafeRawBufferPointer, to out: inout [UInt8]) {
        // Six bytes at a time while eight can be read: two 12-bit halves per three bytes from a table of character
        // pairs, one 8-byte store (a token's payload and signature are a kilobyte: this was its costliest loop).
        let fast = input.count >= 8 ? (input.count - 2) / 6 : 0
        if fast > 0 {
            let start = out.count
            out.append(contentsOf: repeatElement(0, count: fast * 8))
            out.withUnsafeMutableBytes { o in
                pairs.withUnsafeBufferPointer { t in
                    let dst = o.baseAddress! + start
                    for k in 0..<fast {
                        let x = UInt64(bigEndian: input.loadUnaligned(fromByteOffset: k * 6, as: UInt64.self)) >> 16
                        let a = UInt64(t[Int(truncatingIfNeeded: x >> 36)])
                        let b = UInt64(t[Int(truncatingIfNeeded: (x >> 24) & 0xFFF)])
                        let c = UInt64(t[Int(truncatingIfNeeded: (x >> 12) & 0xFFF)])
                        let d = UInt64(t[Int(truncatingIfNeeded: x & 0xFFF)])
                        dst.storeBytes(of: (a | b << 16 | c << 32 | d << 48).littleEndian, toByteOffset: k * 8, as: UInt64.self)
                    }
                }
            }
        }
        append(UnsafeRawBufferPointer(rebasing: input[(fast * 6)...]), alphabet: alphabet, pad: false, to: &out)
    }

    /// Appends the base64url of `bytes` to `out` (no padding).
    public static func append(_ bytes: [UInt8], to out: inout [UInt8]) {
        bytes.withUnsafeBytes { append($0, to: &out) }
    }

    /// Every 12-bit value as its two base64url characters, the first in the low byte.
    private static let pairs: [UInt16] = (0..<4096).map { v in UInt16(alphabet[v >> 6]) | UInt16(alphabet[v & 63]) << 8 }

    /// Writes the encoding into room made at the end of `out` (one resize, no per-byte capacity checks: this runs on
    /// every token's payload and signature).
    static func append(_ input: UnsafeRawBufferPointer, alphabet: [UInt8], pad: Bool, to out: inout [UInt8]) {
        let n = input.count
        let full = n / 3, rest = n - full * 3
        let length = full * 4 + (rest == 0 ? 0 : (pad ? 4 : rest + 1))
        guard length > 0 else { return }
        let start = out.count
        out.append(contentsOf: repeatElement(0, count: length))
        out.withUnsafeMutableBufferPointer { o in
            alphabet.withUnsafeBufferPointer { a in
                var w = start, i = 0
                for _ in 0..<full {
                    let v = UInt32(input[i]) << 16 | UInt32(input[i + 1]) << 8 | UInt32(input[i + 2])
                    o[w] = a[Int(v >> 18 & 63)]; o[w + 1] = a[Int(v >> 12 & 63)]
                    o[w + 2] = a[Int(v >> 6 & 63)]; o[w + 3] = a[Int(v & 63)]
                    i += 3
                    w += 4
                }
                if rest == 1 {
                    let v = UInt32(input[i]) << 16
                    o[w] = a[Int(v >> 18 & 63)]; o[w + 1] = a[Int(v >> 12 & 63)]
                    if pad { o[w + 2] = 0x3D; o[w + 3] = 0x3D }
                } else if rest == 2 {
                    let v = UInt32(input[i]) << 16 | UInt32(input[i + 1]) << 8
                    o[w] = a[Int(v >> 18 & 63)]; o[w + 1] = a[Int(v >> 12 & 63)]; o[w + 2] = a[Int(v >> 6 & 63)]
                    if pad { o[w + 3] = 0x3D }
                }
            }
        }
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
