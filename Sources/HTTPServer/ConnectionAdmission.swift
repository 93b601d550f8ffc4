import CSystem
import EmulatorSupport
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The process's open-file limit (RLIMIT_NOFILE).
public enum DescriptorLimit {
    /// The soft limit now.
    public static var current: Int {
        var rl = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &rl) == 0 else { return 1024 }
        return rl.rlim_cur == rlim_t.max ? 1 << 20 : Int(clamping: rl.rlim_cur)
    }

    /// Raises the soft limit to the hard limit (to 2^20 when the hard limit is unlimited), so idle connections are not
    /// what runs the server out of descriptors. Returns the soft limit before and after.
    @discardableResult
    public static func raiseSoftToHard() -> (before: Int, after: Int) {
        var rl = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &rl) == 0 else { return (current, current) }
        let before = rl.rlim_cur == rlim_t.max ? 1 << 20 : Int(clamping: rl.rlim_cur)
        let target: rlim_t = rl.rlim_max == rlim_t.max ? 1 << 20 : rl.rlim_max
        if rl.rlim_cur != rlim_t.max, rl.rlim_cur < target {
            var raised = rl
            raised.rlim_cur = target
            _ = setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &raised)
        }
        return (before, current)
    }
}

/// Who may open another connection. Shared by every event loop: a total cap below the descriptor limit (a reserve
/// stays for the listener, the data directory and exports, so accept never fails for lack of descriptors and a refused
/// client gets an answer instead of hanging in the backlog), and a per-peer cap so one address cannot take them all.
///
/// A peer is an IPv4 address or an IPv6 /64 (one host owns a whole /64). By default the per-peer cap is half the
/// budget and does not apply to loopback: every local client (test runners, SDKs, the browser, benchmarks) shares
/// 127.0.0.1, so a loopback cap would only be a smaller total cap. An explicit `--max-connections-per-peer` applies
/// to every peer, loopback included.
final class ConnectionAdmission: Sendable {
    struct Counts {
        var total = 0
        var perPeer: [String: Int] = [:]
    }

    enum Verdict: Equatable {
        case admitted
        case overTotal
        case overPeer
    }

    let maxConnections: Int
    let maxPerPeer: Int
    let capsLoopback: Bool
    private let counts = Locked(Counts())
    /// Process-wide, so N event loops do not repeat the same line N times.
    let refusedWarning = RateLimitedWarning(intervalSeconds: 10)
    let pausedWarning = RateLimitedWarning(intervalSeconds: 10)

    /// - Parameters:
    ///   - maxConnections: 0 derives it from the descriptor limit.
    ///   - maxPerPeer: 0 derives it (half of `maxConnections`, loopback exempt).
    init(descriptorLimit: Int, maxConnections: Int, maxPerPeer: Int) {
        let reserve = max(64, descriptorLimit / 16)
        let total = maxConnections > 0 ? maxConnections : max(16, descriptorLimit - reserve)
        self.maxConnections = total
        self.maxPerPeer = maxPerPeer > 0 ? maxPerPeer : max(8, total / 2)
        capsLoopback = maxPerPeer > 0
    }

    func admit(_ peer: PeerAddress) -> Verdict {
        counts.withLock { c in
            guard c.total < maxConnections else { return .overTotal }
            let n = c.perPeer[peer.key, default: 0]
            if (capsLoopback || !peer.isLoopback), n >= maxPerPeer { return .overPeer }
            c.total += 1
            c.perPeer[peer.key] = n + 1
            return .admitted
        }
    }

    func release(_ peer: PeerAddress) {
        counts.withLock { c in
            c.total -= 1
            let n = c.perPeer[peer.key, default: 1] - 1
            c.perPeer[peer.key] = n > 0 ? n : nil
        }
    }

    func open(_ key: String) -> Int { counts.withLock { $0.perPeer[key] ?? 0 } }
}

/// The remote end of a connection, for admission.
struct PeerAddress: Sendable, Equatable {
    /// IPv4 dotted quad (IPv4-mapped IPv6 included), or the first 64 bits of an IPv6 address in hex.
    let key: String
    let isLoopback: Bool

    init(key: String, isLoopback: Bool) {
        self.key = key
        self.isLoopback = isLoopback
    }

    init(_ addr: inout sockaddr_storage) {
        switch Int32(addr.ss_family) {
        case AF_INET:
            let a = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_addr.s_addr } }
            let b = withUnsafeBytes(of: a) { Array($0) }
            self.init(v4: b)
        case AF_INET6:
            let b = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { p in withUnsafeBytes(of: p.pointee.sin6_addr) { Array($0) } } }
            if b[0..<10].allSatisfy({ $0 == 0 }) && b[10] == 0xFF && b[11] == 0xFF {
                self.init(v4: Array(b[12..<16]))
            } else {
                let loopback = b[0..<15].allSatisfy { $0 == 0 } && b[15] == 1
                let hex = Array("0123456789abcdef".utf8)
                var text: [UInt8] = []
                for (i, byte) in b[0..<8].enumerated() {
                    if i > 0 && i % 2 == 0 { text.append(UInt8(ascii: ":")) }
                    text.append(hex[Int(byte >> 4)])
                    text.append(hex[Int(byte & 15)])
                }
                self.init(key: (loopback ? "::1" : String(decoding: text, as: UTF8.self) + "::/64"), isLoopback: loopback)
            }
        default:
            self.init(key: "unknown", isLoopback: false)
        }
    }

    private init(v4 b: [UInt8]) {
        self.init(key: "\(b[0]).\(b[1]).\(b[2]).\(b[3])", isLoopback: b[0] == 127)
    }
}

/// A warning that repeats at most once per interval; the lines it held back are counted in the next one.
final class RateLimitedWarning: Sendable {
    private let intervalNanos: UInt64
    private let state = Locked<(last: UInt64?, suppressed: Int)>((nil, 0))

    init(intervalSeconds: Double) { intervalNanos = UInt64(intervalSeconds * 1e9) }

    /// Nil: stay quiet. Otherwise log now; the value is how many occurrences were held back since the last line.
    func shouldLog(now: UInt64) -> Int? {
        state.withLock { s in
            if let last = s.last, now &- last < intervalNanos {
                s.suppressed += 1
                return nil
            }
            let held = s.suppressed
            s = (now, 0)
            return held
        }
    }
}
