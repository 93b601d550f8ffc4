/// bcrypt (Provos and Mazières, "A Future-Adaptable Password Scheme", 1999) in the OpenBSD modular-crypt format,
/// `$2b$CC$` + 22 characters of salt + 31 of hash: Eksblowfish's expensive key schedule, then
/// "OrpheanBeholderScryDoubt" encrypted 64 times. OpenSSL has no Eksblowfish, so it is here, on Blowfish's
/// π-digit tables (BlowfishTables.swift). `$2a$`, `$2b$` and `$2y$` hash the same way (the password's bytes up to the
/// first NUL, a NUL appended, at most 72 bytes); `$2x$` (crypt_blowfish's sign-extension bug) is not accepted.
public enum BCrypt {
    public static let costRange = 4...31

    /// A bcrypt string taken apart.
    public struct Parsed: Sendable, Equatable {
        /// `2a`, `2b` or `2y`.
        public let version: String
        public let cost: Int
        /// 16 bytes.
        public let salt: [UInt8]
        /// The 23 bytes of the hash.
        public let hash: [UInt8]
    }

    /// The parts of `text`, or nil unless it is exactly a `$2a$`/`$2b$`/`$2y$` string with a cost from 4 to 31.
    public static func parse(_ text: String) -> Parsed? {
        let b = Array(text.utf8)
        guard b.count == 60, b[0] == 0x24, b[1] == 0x32, [0x61, 0x62, 0x79].contains(b[2]), b[3] == 0x24, b[6] == 0x24,
              (0x30...0x39).contains(b[4]), (0x30...0x39).contains(b[5]) else { return nil }
        let cost = Int(b[4] - 0x30) * 10 + Int(b[5] - 0x30)
        guard costRange.contains(cost), let salt = decode(b[7..<29], count: 16), let hash = decode(b[29..<60], count: 23) else { return nil }
        return Parsed(version: "2" + String(UnicodeScalar(b[2])), cost: cost, salt: salt, hash: hash)
    }

    /// The bcrypt string of `password` with a 16-byte `salt` at `cost` (2^cost rounds of the key schedule).
    public static func hash(password: [UInt8], salt: [UInt8], cost: Int, version: String = "2b") -> String {
        let raw = derive(password: password, salt: salt, cost: cost)
        let c = cost < 10 ? "0\(cost)" : "\(cost)"
        return "$\(version)$\(c)$" + String(decoding: encode(salt) + encode(raw), as: UTF8.self)
    }

    /// Whether `password` is the one `parsed` was made from (compared in constant time).
    public static func verify(password: [UInt8], _ parsed: Parsed) -> Bool {
        let raw = derive(password: password, salt: parsed.salt, cost: parsed.cost)
        return raw.count == parsed.hash.count && zip(raw, parsed.hash).reduce(0) { $0 | ($1.0 ^ $1.1) } == 0
    }

    /// The 23 bytes bcrypt keeps of "OrpheanBeholderScryDoubt" encrypted under EksBlowfishSetup(cost, salt, key).
    static func derive(password: [UInt8], salt: [UInt8], cost: Int) -> [UInt8] {
        precondition(salt.count == 16 && costRange.contains(cost), "bcrypt takes a 16-byte salt and a cost from 4 to 31")
        let key = Array((password.prefix { $0 != 0 } + [0]).prefix(72))
        var state = initial
        var text = words(Array("OrpheanBeholderScryDoubt".utf8), count: 6)
        state.withUnsafeMutableBufferPointer { s in
            let st = s.baseAddress!
            expand(st, key: words(key, count: 18), salt: words(salt, count: 4))
            let keyWords = words(key, count: 18), saltWords = words(salt, count: 18)
            for _ in 0..<(1 << cost) {
                expand(st, key: keyWords, salt: nil)
                expand(st, key: saltWords, salt: nil)
            }
            for _ in 0..<64 {
                for k in stride(from: 0, to: 6, by: 2) {
                    var l = text[k], r = text[k + 1]
                    encrypt(st, &l, &r)
                    (text[k], text[k + 1]) = (l, r)
                }
            }
        }
        return Array(text.flatMap { w in [UInt8(w >> 24), UInt8(truncatingIfNeeded: w >> 16), UInt8(truncatingIfNeeded: w >> 8), UInt8(truncatingIfNeeded: w)] }.prefix(23))
    }

    /// `count` big-endian words read cyclically from `bytes` (Blowfish_stream2word).
    static func words(_ bytes: [UInt8], count: Int) -> [UInt32] {
        var j = 0
        return (0..<count).map { _ in
            var w: UInt32 = 0
            for _ in 0..<4 {
                if j >= bytes.count { j = 0 }
                w = w << 8 | UInt32(bytes[j])
                j += 1
            }
            return w
        }
    }

    /// Blowfish's key schedule: the P-array XORed with the key words, then every P and S entry replaced, two at a
    /// time, by encrypting the running block — first XORed with the salt's words (cyclically) when there is a salt.
    private static func expand(_ s: UnsafeMutablePointer<UInt32>, key: [UInt32], salt: [UInt32]?) {
        for i in 0..<18 { s[i] ^= key[i] }
        var l: UInt32 = 0, r: UInt32 = 0, j = 0
        for i in stride(from: 0, to: 1042, by: 2) {
            if let salt {
                l ^= salt[j]
                r ^= salt[j + 1]
                j = (j + 2) & 3
            }
            encrypt(s, &l, &r)
            s[i] = l
            s[i + 1] = r
        }
    }

    /// One Blowfish block (16 rounds) under the state `s` (P at 0..<18, S0…S3 after it).
    @inline(__always)
    private static func encrypt(_ s: UnsafeMutablePointer<UInt32>, _ l: inout UInt32, _ r: inout UInt32) {
        @inline(__always) func f(_ x: UInt32) -> UInt32 {
            ((s[18 + Int(x >> 24)] &+ s[274 + Int((x >> 16) & 0xFF)]) ^ s[530 + Int((x >> 8) & 0xFF)]) &+ s[786 + Int(x & 0xFF)]
        }
        var xl = l, xr = r
        for i in stride(from: 0, to: 16, by: 2) {
            xl ^= s[i]
            xr ^= f(xl)
            xr ^= s[i + 1]
            xl ^= f(xr)
        }
        xl ^= s[16]
        xr ^= s[17]
        l = xr
        r = xl
    }

    // MARK: bcrypt's base64 (its own alphabet, no padding)

    private static let alphabet = Array("./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789".utf8)
    private static let values: [Int8] = {
        var v = [Int8](repeating: -1, count: 256)
        for (i, c) in alphabet.enumerated() { v[Int(c)] = Int8(i) }
        return v
    }()

    static func encode(_ bytes: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        var i = 0
        while i < bytes.count {
            let n = min(3, bytes.count - i)
            var group: UInt32 = 0
            for k in 0..<3 { group = group << 8 | UInt32(k < n ? bytes[i + k] : 0) }
            for k in 0...n { out.append(alphabet[Int((group >> (18 - 6 * UInt32(k))) & 63)]) }
            i += 3
        }
        return out
    }

    /// The first `count` bytes the characters encode; nil on a character outside the alphabet or too few of them.
    static func decode(_ chars: ArraySlice<UInt8>, count: Int) -> [UInt8]? {
        var out: [UInt8] = []
        out.reserveCapacity(count)
        var acc: UInt32 = 0, bits = 0
        for c in chars {
            let v = values[Int(c)]
            guard v >= 0 else { return nil }
            acc = acc << 6 | UInt32(v)
            bits += 6
            if bits >= 8 {
                bits -= 8
                if out.count < count { out.append(UInt8(truncatingIfNeeded: acc >> UInt32(bits))) }
            }
            acc &= (1 << UInt32(bits)) - 1
        }
        return out.count == count ? out : nil
    }
}
