import EmulatorSupport
import PhoneAuthAPI
import XCTest

/// Replays the fuzz seed corpus and every input a fuzz run ever crashed on (Tests/Fuzz/regressions).
final class FuzzRegressionTests: XCTestCase {
    var fuzzDir: String { #filePath.split(separator: "/").dropLast(2).map(String.init).joined(separator: "/").withLeadingSlash + "/Fuzz" }

    func files(_ sub: String) -> [String] {
        guard let d = opendir(fuzzDir + "/" + sub) else { return [] }
        defer { closedir(d) }
        var out: [String] = []
        while let e = readdir(d) {
            let name = withUnsafeBytes(of: e.pointee.d_name) { String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self) }
            if !name.hasPrefix(".") { out.append(fuzzDir + "/" + sub + "/" + name) }
        }
        return out.sorted()
    }

    func testRegressionsNoLongerCrash() throws {
        let inputs = files("regressions")
        XCTAssertFalse(inputs.isEmpty)
        for f in inputs { RequestReplay.shared.run(try Files.read(f)) }
        // The first regression: invalid UTF-8 in Authorization is an ordinary 401, not a trap.
        let statuses = RequestReplay.shared.run(try Files.read(fuzzDir + "/regressions/authorization-invalid-utf8"))
        XCTAssertEqual(statuses, [401])
    }

    func testSeedCorpusIsAnswered() throws {
        let inputs = files("corpus")
        XCTAssertGreaterThan(inputs.count, 30)
        for f in inputs {
            let statuses = RequestReplay().run(try Files.read(f))
            XCTAssertFalse(statuses.isEmpty, f)
            XCTAssertFalse(statuses.contains(500), f)
        }
    }
}

extension String {
    var withLeadingSlash: String { hasPrefix("/") ? self : "/" + self }
}
#if canImport(Glibc)
import Glibc
#endif
