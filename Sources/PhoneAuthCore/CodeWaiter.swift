import Dispatch
import EmulatorSupport
import Synchronization

/// Someone waiting for the next code of a number (the inbox long-poll). Finishes exactly once: fired with a session,
/// fired with nil (timed out), or cancelled (its client went away). Its timer and cancel hook are released as soon as
/// it finishes, so nothing of an abandoned poll outlives its connection.
public final class CodeWaiter: Sendable {
    let phone: String
    private let done = Atomic<Bool>(false)
    private let callback: @Sendable (VerificationSession?) -> Void
    private struct Attachments {
        var timer: (any DispatchSourceTimer)?
        var onCancel: (@Sendable () -> Void)?
    }
    private let attachments = Locked(Attachments())

    init(phone: String, callback: @escaping @Sendable (VerificationSession?) -> Void) {
        self.phone = phone
        self.callback = callback
    }

    /// Delivers `session` (nil: timed out) unless already finished; true if this call delivered.
    @discardableResult
    func fire(_ session: VerificationSession?) -> Bool {
        guard finish() else { return false }
        callback(session)
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
