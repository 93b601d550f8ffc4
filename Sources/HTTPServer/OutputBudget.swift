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

    #if DEBUG
    /// The most ever charged at once (debug builds, for tests).
    var peak: Int { peakUsed.load(ordering: .relaxed) }
    #endif
}
