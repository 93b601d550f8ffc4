import Dispatch
import EmulatorSupport
@testable import PhoneAuthCore
import XCTest

/// The buffered system CSPRNG hands every byte out once, across chunk refills and threads.
final class SystemRandomTests: XCTestCase {
    func testSizesAndNoRepeatsAcrossRefills() {
        let r = SystemRandom()
        XCTAssertEqual(r.bytes(0), [])
        var seen = Set<[UInt8]>()
        // 16-byte draws: 3 × 4 KiB chunks' worth; a repeated 128-bit value would mean a byte handed out twice.
        for _ in 0..<(3 * SystemRandomPool.chunk / 16) {
            let b = r.bytes(16)
            XCTAssertEqual(b.count, 16)
            XCTAssertTrue(seen.insert(b).inserted)
        }
        // Odd sizes straddle the chunk end; large requests go to the kernel directly.
        for n in [1, 7, 1000, 1023, SystemRandomPool.chunk / 4 + 1, 100_000] { XCTAssertEqual(r.bytes(n).count, n) }
        XCTAssertNotEqual(r.bytes(100_000), r.bytes(100_000))
    }

    func testConcurrentDrawsNeverShareBytes() {
        let results = Locked<[[UInt8]]>([])
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            var mine: [[UInt8]] = []
            for _ in 0..<500 { mine.append(SystemRandom().bytes(16)) }
            results.withLock { $0.append(contentsOf: mine) }
        }
        let all = results.withLock { $0 }
        XCTAssertEqual(all.count, 4000)
        XCTAssertEqual(Set(all).count, 4000)
    }

    func testCodesAreUniformEnoughToBeRandom() {
        // Not a statistical test suite: every digit appears among 6,000 code digits (p of failure < 10^-200).
        let digits = (0..<1000).map { _ in SystemRandom().digits(6) }.joined()
        XCTAssertEqual(Set(digits).count, 10)
    }
}
