import EmulatorSupport
import Synchronization

/// The emulator's clock, the time every expiry reads (sessions, tokens, rate windows): the system time (or a fixed
/// start, for tests) plus an offset that the emulator API advances. The offset is bounded (`maxOffsetMillis`) and every
/// read saturates, so no sequence of advances can overflow.
public final class EmulatorClock: Sendable {
    /// One advance moves time by at most ten years.
    public static let maxAdvanceMillis: Int64 = 10 * 365 * 86_400_000
    /// The total offset stays within a hundred years of the base time.
    public static let maxOffsetMillis: Int64 = 100 * 365 * 86_400_000

    private let fixedStart: Int64?
    private let offset = Atomic<Int64>(0)

    /// A clock following the system time.
    public init() { fixedStart = nil }

    /// A manual clock frozen at `startMillis` until advanced.
    public init(fixedAtMillis startMillis: Int64) { fixedStart = startMillis }

    /// Milliseconds since the Unix epoch.
    public func nowMillis() -> Int64 {
        let (sum, overflow) = (fixedStart ?? Timestamp.systemMillis()).addingReportingOverflow(offset.load(ordering: .acquiring))
        return overflow ? Int64.max : sum
    }

    public func nowSeconds() -> Int64 { nowMillis() / 1000 }

    /// Moves time forward by `millis` (0 … `maxAdvanceMillis`) unless the total offset would pass `maxOffsetMillis`.
    /// Returns false (and changes nothing) when refused.
    @discardableResult
    public func advance(millis: Int64) -> Bool {
        guard millis >= 0, millis <= Self.maxAdvanceMillis else { return false }
        var current = offset.load(ordering: .acquiring)
        while true {
            let next = current + millis  // both ≤ 100 years of milliseconds: no overflow
            guard next <= Self.maxOffsetMillis else { return false }
            let (exchanged, original) = offset.compareExchange(expected: current, desired: next, ordering: .acquiringAndReleasing)
            if exchanged { return true }
            current = original
        }
    }

    /// Returns to the base time.
    public func reset() { offset.store(0, ordering: .releasing) }

    public var offsetMillis: Int64 { offset.load(ordering: .acquiring) }
}
