import EmulatorSupport
import Synchronization

/// The time every expiry reads (sessions, tokens, rate windows). Not named `Clock`, which would shadow Swift's.
public protocol WallClock: Sendable {
    /// Milliseconds since the Unix epoch.
    func nowMillis() -> Int64
}

extension WallClock {
    public func nowSeconds() -> Int64 { nowMillis() / 1000 }
}

/// The emulator's clock: the system time (or a fixed start, for tests) plus an offset that the emulator API advances.
public final class EmulatorClock: WallClock {
    private let fixedStart: Int64?
    private let offset = Atomic<Int64>(0)

    /// A clock following the system time.
    public init() { fixedStart = nil }

    /// A manual clock frozen at `startMillis` until advanced.
    public init(fixedAtMillis startMillis: Int64) { fixedStart = startMillis }

    public func nowMillis() -> Int64 {
        (fixedStart ?? Timestamp.systemMillis()) + offset.load(ordering: .acquiring)
    }

    /// Moves time forward by `millis` (negative values are refused by callers).
    public func advance(millis: Int64) { offset.wrappingAdd(millis, ordering: .acquiringAndReleasing) }

    /// Returns to the base time.
    public func reset() { offset.store(0, ordering: .releasing) }

    public var offsetMillis: Int64 { offset.load(ordering: .acquiring) }
}
