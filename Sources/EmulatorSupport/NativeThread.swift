#if canImport(Glibc)
import Glibc
#endif

private final class ThreadBody {
    let run: () -> Void
    init(_ run: @escaping () -> Void) { self.run = run }
}

/// A POSIX thread running a closure (Foundation's `Thread` is not in the minimal set we use): the event loops and
/// worker pool join theirs, the log writer detaches its own.
public struct NativeThread: @unchecked Sendable {
    private let handle: pthread_t

    /// Starts `body` on a new thread; traps only if the system cannot create threads at all.
    public static func start(stackSize: Int = 0, _ body: @escaping @Sendable () -> Void) -> NativeThread {
        let box = Unmanaged.passRetained(ThreadBody(body)).toOpaque()
        var attr = pthread_attr_t()
        pthread_attr_init(&attr)
        defer { pthread_attr_destroy(&attr) }
        if stackSize > 0 { pthread_attr_setstacksize(&attr, stackSize) }
        var t = pthread_t()
        let rc = pthread_create(&t, &attr, { arg in
            let b = Unmanaged<ThreadBody>.fromOpaque(arg!).takeRetainedValue()
            b.run()
            return nil
        }, box)
        precondition(rc == 0, "pthread_create failed: \(rc)")
        return NativeThread(handle: t)
    }

    public func join() { pthread_join(handle, nil) }

    /// Lets the thread end on its own (never joined).
    public func detach() { pthread_detach(handle) }
}
