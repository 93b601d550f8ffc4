@testable import EmulatorSupport
import PhoneAuthTestSupport
import XCTest

/// Objects are linear to build and read, whatever their size (issue 11: one 1 MiB body of 110k keys held an event
/// loop for 28.6 s). Work is measured by counting key probes (debug builds count them), never by timing.
final class JSONObjectCostTests: XCTestCase {
    /// `{"k0":0,"k1":1,…}` with `n` distinct keys.
    func objectText(keys n: Int, prefix: String = "k") -> [UInt8] {
        var s = "{"
        for k in 0..<n { s += (k == 0 ? "" : ",") + "\"\(prefix)\(k)\":\(k)" }
        return Array((s + "}").utf8)
    }

    func probes(_ body: () throws -> Void) rethrows -> Int {
        let before = JSONObject.probes.load(ordering: .relaxed)
        try body()
        return JSONObject.probes.load(ordering: .relaxed) - before
    }

    func testParsingIsLinearInTheNumberOfKeys() throws {
        let small = objectText(keys: 1000), large = objectText(keys: 8000)
        let p1 = try probes { _ = try JSONParser.parse(small) }
        let p8 = try probes { _ = try JSONParser.parse(large) }
        XCTAssertGreaterThan(p1, 0, "probes are counted in debug builds")
        // Linear: about 8×. The old linear-scan object needed ~n²/2 probes: 64× (and 32 million probes for 8000 keys).
        XCTAssertLessThanOrEqual(p8, p1 * 10, "8× the keys cost \(p8) probes vs \(p1)")
        XCTAssertLessThanOrEqual(p8, 8000 * 3)
    }

    func testLookupsAndRebuildingAreLinear() throws {
        guard case .object(let o) = try JSONParser.parse(objectText(keys: 8000)) else { return XCTFail() }
        let reads = probes { for k in 0..<8000 { XCTAssertEqual(o["k\(k)"], .number(Double(k))) } }
        XCTAssertLessThanOrEqual(reads, 8000 * 2)
        // What makeCall does with a body: copy every key into a new object.
        let copy = probes {
            var body = JSONObject()
            for (k, v) in o { body[k] = v }
            XCTAssertEqual(body, o)
        }
        XCTAssertLessThanOrEqual(copy, 8000 * 4)
    }

    func testSmallObjectsStayUnindexedAndCheap() {
        var o = JSONObject()
        for k in 0..<JSONObject.indexThreshold { o["f\(k)"] = .int(k) }
        // A lookup in a small object is a short scan, no hashing.
        XCTAssertEqual(probes { _ = o["f0"] }, 1)
        o["one more"] = true
        XCTAssertEqual(probes { _ = o["f0"] }, 1)
        XCTAssertEqual(probes { _ = o["f\(JSONObject.indexThreshold - 1)"] }, 1, "indexed past the threshold")
    }

    /// Duplicate keys: the last value wins, at the first key's position (documented on `JSONObject`).
    func testDuplicateKeysLastWinsInFirstPosition() throws {
        let v = try JSONParser.parse(#"{"a":1,"b":2,"a":3}"#)
        XCTAssertEqual(v.objectValue?.keys, ["a", "b"])
        XCTAssertEqual(v["a"], 3)
        XCTAssertEqual(v.serializedString, #"{"a":3,"b":2}"#)
        // The same past the index threshold.
        var text = "{"
        for k in 0..<50 { text += "\"k\(k)\":\(k)," }
        text += #""k7":"last"}"#
        let big = try JSONParser.parse(text)
        XCTAssertEqual(big.objectValue?.count, 50)
        XCTAssertEqual(big["k7"], "last")
        XCTAssertEqual(big.objectValue?.keys[7], "k7")
        // Building from pairs follows the same rule.
        let lit = JSONObject([("x", 1), ("y", 2), ("x", 9)])
        XCTAssertEqual(lit.keys, ["x", "y"])
        XCTAssertEqual(lit["x"], 9)
    }

    func testKeyCountCap() throws {
        XCTAssertNoThrow(try JSONParser.parse(objectText(keys: JSONParser.defaultMaxObjectKeys)))
        XCTAssertThrowsError(try JSONParser.parse(objectText(keys: JSONParser.defaultMaxObjectKeys + 1))) { e in
            XCTAssertEqual((e as? JSONParseError)?.message, "Too many keys in one object (more than 10000)")
        }
        // Repeating one key counts too (it is still work for the parser), and nested objects each have the cap.
        var dup = "{"
        for k in 0...JSONParser.defaultMaxObjectKeys { dup += (k == 0 ? "" : ",") + "\"a\":1" }
        XCTAssertThrowsError(try JSONParser.parse(dup + "}"))
        let nested = "[" + String(decoding: objectText(keys: 6000), as: UTF8.self) + "," + String(decoding: objectText(keys: 6000), as: UTF8.self) + "]"
        XCTAssertNoThrow(try JSONParser.parse(nested))
        XCTAssertThrowsError(try JSONParser.parse(objectText(keys: 5, prefix: "k"), maxObjectKeys: 4))
    }

    /// The 1 MiB body of the issue (110k keys) is refused after 10,001 keys with a linear amount of work.
    func testHostileMegabyteBodyIsRefusedCheaply() {
        var s = "{"
        var k = 0
        while s.utf8.count < 1 << 20 - 16 { s += (k == 0 ? "" : ",") + "\"\(k)\":0"; k += 1 }
        s += "}"
        XCTAssertGreaterThan(k, 100_000)
        var refused = false
        let work = probes { do { _ = try JSONParser.parse(s) } catch { refused = true } }
        XCTAssertTrue(refused)
        XCTAssertLessThanOrEqual(work, JSONParser.defaultMaxObjectKeys * 3)
    }

    /// Random edits keep the object equal to a reference (order and values), across the index threshold.
    func testMatchesAReferenceModelUnderRandomEdits() {
        var rng = SplitMix(seed: 11)
        for _ in 0..<20 {
            var o = JSONObject()
            var order: [String] = []
            var values: [String: Int] = [:]
            for _ in 0..<400 {
                let key = "k\(rng.next() % 40)"
                if rng.next() % 4 == 0 {
                    o[key] = nil
                    if values.removeValue(forKey: key) != nil { order.removeAll { $0 == key } }
                } else {
                    let v = Int(rng.next() % 1000)
                    o[key] = .int(v)
                    if values.updateValue(v, forKey: key) == nil { order.append(key) }
                }
                XCTAssertEqual(o.keys, order)
            }
            for k in 0..<40 { XCTAssertEqual(o["k\(k)"], values["k\(k)"].map { .int($0) }) }
        }
    }
}
