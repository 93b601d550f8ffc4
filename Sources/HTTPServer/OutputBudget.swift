import Synchronization

/// The answers every connection of one server holds for clients that have not read them, in bytes, against one
/// budget (`ConnectionPolicy.outputBudgetBytes`), shared by the event loops.
///
/// Each connection is bounded on its own (`ConnectionPolicy.outputHighWaterBytes`); this bounds them together: many
/// connections that pipeline requests and never read would otherwise hold that bound each. A connection charges what
/// its output buffer holds past `floor`; while the charges reach the budget, a connection holding `floor` or more
/// parses no further request (and pulls no stream): it is not read until its client reads (or the write timeout
/// drops it). A connection below `floor` is served whatever the others hold, so a client that reads its answers is
/// never held up by clients that do not. Held output is therefore at most the budget, plus `floor` and one answer
/// per connection, plus one answer per loop deciding at the same moment.
///
/// The common answer (sent at once, smaller than `floor`) never touches the shared counter.
final class OutputBudget: Sendable {
    /// What every connection may hold uncharged.
    static let floor = 16 * 1024
    let limit: Int
    private let used = Atomic<Int>(0)
    /// "The budget is used up", at most every 10 s (`EventLoop.sweep` logs it).
    let exhaustedWarning = RateLimitedWarning(intervalSeconds: 10)
    #if DEBUG
    private let peakUsed = Atomic<Int>(0)
    #endif
    /// Buffer bytes closed connections gave back since malloc was last asked to return free memory to the system.
    private let released = Atomic<Int>(0)
    private let lastTrim = Atomic<UInt64>(0)
    /// Free memory goes back once this much was released (at most once a second).
    static let trimAfter = 16 << 20

    /// `limit` ≤ 0: no budget (nothing is ever refused).
    init(limit: Int) { self.limit = limit > 0 ? limit : Int.max }

    /// The bytes charged now.
    var bytes: Int { used.load(ordering: .relaxed) }

    var isExhausted: Bool { used.load(ordering: .relaxed) >= limit }

    /// Whether less than the budget is used, counting `uncharged` bytes not charged yet.
    func hasRoom(uncharged: Int) -> Bool { used.load(ordering: .relaxed) + uncharged < limit }

    func charge(_ delta: Int) {
        #if DEBUG
        let now = used.wrappingAdd(delta, ordering: .relaxed).newValue
        var peak = peakUsed.load(ordering: .relaxed)
        while now > peak {
            let (exchanged, original) = peakUsed.compareExchange(expected: peak, desired: now, ordering: .relaxed)
            if exchanged { break }
            peak = original
        }
        #else
        used.wrappingAdd(delta, ordering: .relaxed)
        #endif
    }

    /// A connection closed, letting go of buffers of this many bytes.
    func noteReleased(_ bytes: Int) {
        if bytes > 0 { released.wrappingAdd(bytes, ordering: .relaxed) }
    }

    /// Whether to return free memory to the system now (`malloc_trim`): once `trimAfter` bytes were released by
    /// closed connections, at most once a second, to one caller. Small buffers (below malloc's mmap threshold) go
    /// back to the threads' heaps when freed, and stay there: many connections that closed at once left tens of
    /// megabytes there.
    func shouldTrim(now: UInt64) -> Bool {
        guard released.load(ordering: .relaxed) >= Self.trimAfter else { return false }
        let last = lastTrim.load(ordering: .relaxed)
        guard now &- last >= 1_000_000_000,
              lastTrim.compareExchange(expected: last, desired: now, ordering: .relaxed).exchanged else { return false }
        released.store(0, ordering: .relaxed)
        return true
    }

    #if DEBUG
    /// The most ever charged at once (debug builds, for tests).
    var peak: Int { peakUsed.load(ordering: .relaxed) }
    #endif
}
