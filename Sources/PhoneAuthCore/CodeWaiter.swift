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
        guard finish() else { return false }
        callback(item)
        return true
    }

    /// The client is gone: unregisters the waiter and drops its timer without answering. Safe from any thread,
    /// any number of times.
    public func cancel() {
        let hook = attachments.withLock { $0.onCancel }
        guard finish() else { return }
        hook?()
    }

    public var isFinished: Bool { done.load(ordering: .acquiring) }

    /// Marks the waiter finished and releases its timer and hook; false if it already was.
    private func finish() -> Bool {
        guard done.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged else { return false }
        let timer = attachments.withLock { a -> (any DispatchSourceTimer)? in
            defer { a = Attachments() }
            return a.timer
        }
        timer?.cancel()
        return true
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

    /// What `cancel()` runs (unregistering from the store).
    func setCancelHook(_ hook: @escaping @Sendable () -> Void) {
        attachments.withLock { $0.onCancel = hook }
    }
}
