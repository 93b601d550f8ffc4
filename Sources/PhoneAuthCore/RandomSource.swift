import CSystem
import EmulatorSupport
import Synchronization

/// Where codes and identifiers get their randomness. Production uses the system CSPRNG (getrandom(2)).
public protocol RandomSource: Sendable {
    func bytes(_ count: Int) -> [UInt8]
}

/// The system CSPRNG: glibc's `arc4random_buf` (seeded from getrandom(2); one call per request, no syscall).
public struct SystemRandom: RandomSource {
    public init() {}
    public func bytes(_ count: Int) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: count) { buf, n in
            csys_random_bytes(buf.baseAddress, count)
            n = count
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
