import EmulatorSupport
import Synchronization

/// Where codes and identifiers get their randomness. Production uses the system CSPRNG (`SystemRandom`, drawing from
/// EmulatorSupport's `SystemEntropy`: this module calls no C).
public protocol RandomSource: Sendable {
    func bytes(_ count: Int) -> [UInt8]
}

/// The system CSPRNG. glibc's `arc4random_buf` makes one getrandom(2) system call per call, and a send asks twice
/// (a session id and a code), so bytes are drawn from the kernel 4 KiB at a time into a buffer that is handed out once
/// and wiped as it is used: the same CSPRNG output, one system call per ~200 sends instead of two per send.
public struct SystemRandom: RandomSource {
    public init() {}
    public func bytes(_ count: Int) -> [UInt8] {
        guard count > 0 else { return [] }
        if count > SystemRandomPool.chunk / 4 { return SystemRandomPool.direct(count) }
        return SystemRandomPool.shared.withLock { $0.take(count) }
    }
}

/// Kernel randomness fetched in chunks; every byte is handed out at most once and zeroed when taken.
struct SystemRandomPool {
    static let chunk = 4096
    /// A pthread mutex (`Locked`), which ThreadSanitizer understands.
    static let shared = Locked(SystemRandomPool())

    private var buffer = [UInt8](repeating: 0, count: chunk)
    private var next = chunk

    static func direct(_ count: Int) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: count) { buf, n in
            SystemEntropy.fill(UnsafeMutableRawBufferPointer(buf))
            n = count
        }
    }

    mutating func take(_ count: Int) -> [UInt8] {
        if next + count > Self.chunk {
            buffer.withUnsafeMutableBytes { SystemEntropy.fill($0) }
            next = 0
        }
        let start = next
        next += count
        return buffer.withUnsafeMutableBufferPointer { b in
            let out = Array(b[start..<start + count])
            for i in start..<start + count { b[i] = 0 }
            return out
        }
    }
}

/// A deterministic generator for tests (SplitMix64). Never used by the server.
public final class SeededRandom: RandomSource {
    private let state: Locked<UInt64>
    public init(seed: UInt64) { state = Locked(seed) }
    public func bytes(_ count: Int) -> [UInt8] {
        state.withLock { s in
            var out: [UInt8] = []
            out.reserveCapacity(count)
            while out.count < count {
                s &+= 0x9E37_79B9_7F4A_7C15
                var z = s
                z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
                z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
                z ^= z >> 31
                for k in 0..<8 where out.count < count { out.append(UInt8(truncatingIfNeeded: z >> (8 * UInt64(k)))) }
            }
            return out
        }
    }
}

extension RandomSource {
    /// `count` decimal digits, uniformly distributed (rejection sampling, no modulo bias).
    public func digits(_ count: Int) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(count)
        while out.count < count {
            for b in bytes(count * 2) where b < 250 && out.count < count {
                out.append(UInt8(ascii: "0") + b % 10)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// An opaque URL-safe token with `byteCount` bytes of entropy.
    public func token(byteCount: Int = 32) -> String { Base64URL.encode(bytes(byteCount)) }

    /// A Firebase-style uid: 28 characters of [A-Za-z0-9].
    public func userID() -> String { alphanumeric(28) }

    public func alphanumeric(_ count: Int) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(count)
        while out.count < count {
            for b in bytes(count * 2) where b < 248 && out.count < count {
                out.append(alphabet[Int(b % 62)])
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// Compares two strings in time independent of where they differ (length differences still show).
public func constantTimeEquals(_ a: String, _ b: String) -> Bool {
    let x = Array(a.utf8), y = Array(b.utf8)
    var diff: UInt8 = x.count == y.count ? 0 : 1
    let n = max(x.count, y.count)
    for i in 0..<n {
        let p = i < x.count ? x[i] : 0
        let q = i < y.count ? y[i] : 0
        diff |= p ^ q
    }
    return diff == 0
}
