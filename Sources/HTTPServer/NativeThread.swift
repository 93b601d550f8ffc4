import CSystem
#if canImport(Glibc)
import Glibc
#endif

private final class ThreadBody {
    let run: () -> Void
    init(_ run: @escaping () -> Void) { self.run = run }
}

/// A joinable POSIX thread running a closure (Foundation's `Thread` is not in the allowed minimal set we use).
public struct NativeThread: @unchecked Sendable {
    private let handle: pthread_t

    /// Starts `body` on a new thread; traps only if the system cannot create threads at all.
    public static func start(stackSize: Int = 0, _ body: @escaping @Sendable () -> Void) -> NativeThread {
        let box = Unmanaged.passRetained(ThreadBody(body)).toOpaque()
        var t = pthread_t()
        let rc = csys_thread_create(&t, { arg in
            let b = Unmanaged<ThreadBody>.fromOpaque(arg!).takeRetainedValue()
            b.run()
            return nil
        }, box, stackSize)
        precondition(rc == 0, "pthread_create failed: \(rc)")
        return NativeThread(handle: t)
    }

    public func join() { pthread_join(handle, nil) }
}

/// Nanoseconds on the monotonic clock (timeouts never follow the emulator's adjustable clock).
@inline(__always) func monotonicNanos() -> UInt64 { UInt64(csys_monotonic_ns()) }
