import XCTest

@testable import EmulatorSupport

final class BatchPipeTests: XCTestCase {
    /// Every item arrives once, in order, with at most `capacity` waiting between the threads.
    func testItemsArriveInOrderThroughABoundedPipe() {
        let pipe = BatchPipe<Int>(capacity: 3)
        let inFlight = Locked((now: 0, most: 0))
        let producer = NativeThread.start {
            for i in 0..<5000 {
                inFlight.withLock { $0.now += 1; $0.most = max($0.most, $0.now) }
                XCTAssertTrue(pipe.send(i))
            }
            _ = pipe.send(-1)
        }
        var got: [Int] = []
        while true {
            let v = pipe.receive()
            if v < 0 { break }
            inFlight.withLock { $0.now -= 1 }
            got.append(v)
        }
        producer.join()
        XCTAssertEqual(got, Array(0..<5000))
        // The producer counts an item before its send waits for a place: the place, plus the one it holds.
        XCTAssertLessThanOrEqual(inFlight.withLock { $0.most }, 3 + 2)
    }

    /// `waiting` counts what was sent and not yet received (the import's hint that its writer is behind).
    func testWaitingCountsWhatTheConsumerHasNotTaken() {
        let pipe = BatchPipe<Int>(capacity: 3)
        XCTAssertEqual(pipe.waiting, 0)
        XCTAssertTrue(pipe.send(1))
        XCTAssertTrue(pipe.send(2))
        XCTAssertEqual(pipe.waiting, 2)
        XCTAssertEqual(pipe.receive(), 1)
        XCTAssertEqual(pipe.waiting, 1)
        pipe.cancel()
        XCTAssertEqual(pipe.waiting, 0)
    }

    /// A consumer that gives up with items in flight stops the producer (its next send is false) and the pipe can be
    /// dropped with them (libdispatch traps on a semaphore freed below its starting value).
    func testCancellingStopsTheProducerAndDropsWhatIsInFlight() {
        for _ in 0..<50 {
            let p = BatchPipe<[Int]>(capacity: 2)  // freed at the end of each pass, items still in it
            let sent = Locked(0)
            let producer = NativeThread.start {
                while p.send([1, 2, 3]) { sent.withLock { $0 += 1 } }
            }
            XCTAssertEqual(p.receive(), [1, 2, 3])
            p.cancel()
            producer.join()
            XCTAssertFalse(p.send([4]))
        }
    }
}
