#if canImport(Glibc)
import Glibc
#endif

/// A value behind a `pthread_mutex_t`. Used instead of `Synchronization.Mutex`, whose futex-based lock is invisible
/// to ThreadSanitizer (every access under it looked like a race); uncontended cost is the same ~20 ns.
public final class Locked<Value>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var value: Value

    public init(_ value: Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        // Adaptive (glibc's PTHREAD_MUTEX_ADAPTIVE_NP, 3): a contended lock spins a little before it sleeps. The
        // critical sections here are short, and a lock shared by two event loops (a store, an event log) would
        // otherwise put a loop to sleep and wake it for a few hundred nanoseconds of work: two context switches.
        var attr = pthread_mutexattr_t()
        pthread_mutexattr_init(&attr)
        pthread_mutexattr_settype(&attr, 3)
        pthread_mutex_init(mutex, &attr)
        pthread_mutexattr_destroy(&attr)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with exclusive access to the value.
    @inline(__always)
    public func withLock<R, E: Error>(_ body: (inout Value) throws(E) -> R) throws(E) -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
