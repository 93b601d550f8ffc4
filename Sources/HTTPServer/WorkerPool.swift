import Dispatch
import EmulatorSupport
import Synchronization

/// A fixed pool of threads for CPU-heavy work (RSA signing) so event loops never stall.
public final class WorkerPool: Sendable {
    private struct Queue {
        var jobs: [(@Sendable () -> Void)?] = []
        var head = 0
        var stopping = false
    }

    private let queue = Locked(Queue())
    private let available = DispatchSemaphore(value: 0)
    private let threads: Locked<[NativeThread]> = Locked([])
    public let size: Int

    public init(threads count: Int) {
        size = max(1, count)
        var started: [NativeThread] = []
        for _ in 0..<size {
            started.append(NativeThread.start { [self] in self.work() })
        }
        threads.withLock { $0 = started }
    }

    /// Queues `job`; it runs on one of the pool's threads.
    public func submit(_ job: @escaping @Sendable () -> Void) {
        queue.withLock { q in
            q.jobs.append(job)
        }
        available.signal()
    }

    private func work() {
        while true {
            available.wait()
            let job: (@Sendable () -> Void)? = queue.withLock { q in
                if q.head < q.jobs.count {
                    let j = q.jobs[q.head]
                    q.jobs[q.head] = nil
                    q.head += 1
                    if q.head > 1024 && q.head * 2 > q.jobs.count {
                        q.jobs.removeFirst(q.head)
                        q.head = 0
                    }
                    return j
                }
                return nil
            }
            if let job { job(); continue }
            if queue.withLock({ $0.stopping }) { return }
        }
    }

    /// Lets queued jobs finish, then stops the threads and waits for them.
    public func shutdown() {
        queue.withLock { $0.stopping = true }
        for _ in 0..<size { available.signal() }
        let ts = threads.withLock { t -> [NativeThread] in let c = t; t = []; return c }
        for t in ts { t.join() }
    }
}
