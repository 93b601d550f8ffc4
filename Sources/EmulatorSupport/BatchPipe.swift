import Dispatch

/// Hands items from one producer thread to one consumer, at most `capacity` in flight: the producer waits while the
/// consumer is behind, so memory stays bounded by what is in flight, not by what is produced. A start-up import reads
/// and parses its file on one core while the other writes the users (ExportImport.swift).
public final class BatchPipe<Item: Sendable>: Sendable {
    private struct State {
        /// At most `capacity` items (the producer waits for a free place), so taking the first shifts a handful.
        var items: [Item] = []
        var cancelled = false
    }

    private let state = Locked(State())
    /// Free places (the producer takes one per item) and items waiting (the consumer takes one).
    private let free: DispatchSemaphore
    private let filled = DispatchSemaphore(value: 0)

    public init(capacity: Int) {
        // Made at 0 and signalled up: libdispatch traps when a semaphore is freed below the value it was made with
        // (a pipe dropped with items in flight, after a failure).
        free = DispatchSemaphore(value: 0)
        for _ in 0..<max(1, capacity) { free.signal() }
    }

    /// Producer: queues `item`, waiting for a free place first. False once the consumer has cancelled (stop producing).
    public func send(_ item: Item) -> Bool {
        free.wait()
        let open = state.withLock { s -> Bool in
            guard !s.cancelled else { return false }
            s.items.append(item)
            return true
        }
        if open { filled.signal() } else { free.signal() }  // pass the wake-up on: any later send fails at once too
        return open
    }

    /// Consumer: the next item, waiting for one.
    public func receive() -> Item {
        filled.wait()
        let item = state.withLock { s -> Item in s.items.removeFirst() }
        free.signal()
        return item
    }

    /// How many items wait for the consumer now (a producer's hint: the consumer is behind).
    public var waiting: Int { state.withLock { $0.items.count } }

    /// Consumer: gives up; a producer waiting for a place (or sending later) gets false and stops.
    public func cancel() {
        state.withLock { s in
            s.cancelled = true
            s.items.removeAll()
        }
        free.signal()
    }
}

/// Moves a value that is not `Sendable` to another thread that becomes its only user (a file source handed to the
/// thread that reads it): the sender must not touch it afterwards.
public final class Handoff<Value>: @unchecked Sendable {
    public let value: Value
    public init(_ value: Value) { self.value = value }
}
