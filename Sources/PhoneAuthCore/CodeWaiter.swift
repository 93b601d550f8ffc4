import Dispatch
import EmulatorSupport
import Synchronization

/// Someone waiting for the next code of a number (`verificationCodes:wait`).
public typealias CodeWaiter = InboxWaiter<VerificationSession>

/// Someone waiting for the next item of an inbox (a number's code, an email's out-of-band code): the long-poll.
/// Finishes exactly once: fired with an item, fired with nil (timed out), or cancelled (its client went away). Its
/// timer and cancel hook are released as soon as it finishes, so nothing of an abandoned poll outlives its connection.
public final class InboxWaiter<Value: Sendable>: Sendable {
    /// What it waits for: a phone number or an email.
    let key: String
    var phone: String { key }
    private let done = Atomic<Bool>(false)
    private let callback: @Sendable (Value?) -> Void
    private struct Attachments {
        var timer: (any DispatchSourceTimer)?
        var onCancel: (@Sendable () -> Void)?
    }
    private let attachments = Locked(Attachments())

    init(key: String, callback: @escaping @Sendable (Value?) -> Void) {
        self.key = key
        self.callback = callback
    }

    convenience init(phone: String, callback: @escaping @Sendable (Value?) -> Void) { self.init(key: phone, callback: callback) }

    /// Delivers `item` (nil: timed out) unless already finished; true if this call delivered.
    @discardableResult
    func fire(_ item: Value?) -> Bool {
        guard finish() != nil else { return false }
        callback(item)
        return true
    }

    /// The client is gone: unregisters the waiter and drops its timer without answering. Safe from any thread,
    /// any number of times.
    public func cancel() {
        finish()?.onCancel?()
    }

    public var isFinished: Bool { done.load(ordering: .acquiring) }

    /// Marks the waiter finished, cancels its timer and hands back what was attached (nil if it already was
    /// finished): the hook set before this moment comes back here, one set after it runs when it is set.
    private func finish() -> Attachments? {
        guard done.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged else { return nil }
        let attached = attachments.withLock { a -> Attachments in
            defer { a = Attachments() }
            return a
        }
        attached.timer?.cancel()
        return attached
    }

    /// Runs `onTimeout` after `seconds` unless the waiter finishes first (the timer is cancelled then).
    func startTimer(seconds: Double, onTimeout: @escaping @Sendable () -> Void) {
        let timer = DispatchSource.makeTimerSource(queue: DispatchQueue.global())
        timer.schedule(deadline: .now() + seconds)
        timer.setEventHandler(handler: onTimeout)
        let attached = attachments.withLock { a -> Bool in
            guard !done.load(ordering: .acquiring) else { return false }
            a.timer = timer
            return true
        }
        if attached {
            timer.resume()
        } else {
            // Finished already: dispose of the never-started source (a suspended source must not be released).
            timer.setEventHandler(handler: nil)
            timer.cancel()
            timer.resume()
        }
    }

    /// What `cancel()` runs (unregistering from the store). A waiter that finished before its hook was set runs it
    /// now (cancelled before it was registered, it would stay registered otherwise; fired, unregistering is a no-op).
    func setCancelHook(_ hook: @escaping @Sendable () -> Void) {
        let finished = attachments.withLock { a -> Bool in
            if done.load(ordering: .acquiring) { return true }
            a.onCancel = hook
            return false
        }
        if finished { hook() }
    }
}

/// Long-polls on stores that do not exist yet, by store and item key (a number, an email): registered under the
/// registry lock (`Emulator.waitAsOrphan`), answered by the first send on the store once it exists. `isWaiting` is one
/// atomic load, what every send pays while nobody waits.
final class OrphanInbox<Value: Sendable>: Sendable {
    private struct Table: Sendable {
        var byKey: [StoreKey: [String: [InboxWaiter<Value>]]] = [:]
        var count = 0
    }
    private let table = Locked(Table())
    private let total = Atomic<Int>(0)

    var isWaiting: Bool { total.load(ordering: .acquiring) > 0 }

    /// False when `limit` waiters are registered already.
    func insert(_ key: StoreKey, _ w: InboxWaiter<Value>, limit: Int) -> Bool {
        table.withLock { t in
            guard t.count < limit else { return false }
            t.byKey[key, default: [:]][w.key, default: []].append(w)
            t.count += 1
            total.wrappingAdd(1, ordering: .releasing)
            return true
        }
    }

    /// Takes every waiter of `key` waiting for `item`.
    func take(_ key: StoreKey, _ item: String) -> [InboxWaiter<Value>] {
        table.withLock { t in
            guard let list = t.byKey[key]?.removeValue(forKey: item) else { return [] }
            if t.byKey[key]?.isEmpty == true { t.byKey[key] = nil }
            t.count -= list.count
            total.wrappingSubtract(list.count, ordering: .releasing)
            return list
        }
    }

    /// Unregisters one waiter; true if it was still registered.
    func remove(_ key: StoreKey, _ w: InboxWaiter<Value>) -> Bool {
        table.withLock { t in
            guard var list = t.byKey[key]?[w.key] else { return false }
            let before = list.count
            list.removeAll { $0 === w }
            guard list.count != before else { return false }
            t.byKey[key]?[w.key] = list.isEmpty ? nil : list
            if t.byKey[key]?.isEmpty == true { t.byKey[key] = nil }
            t.count -= before - list.count
            total.wrappingSubtract(before - list.count, ordering: .releasing)
            return true
        }
    }
}
