import EmulatorSupport
import XCTest
@testable import PhoneAuthCore

/// `events.webhooks` / `events.functionsEmulator` (Webhooks.swift): what the config accepts, refuses and renders, and
/// the bounded queue a destination's events wait in.
final class WebhooksConfigTests: XCTestCase {
    static let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

    func config(_ text: String) throws -> ProjectConfig {
        var c = ProjectConfig()
        try c.apply(try JSONParser.parse(Array(text.utf8)))
        return c
    }

    func refusal(_ text: String, file: StaticString = #filePath, line: UInt = #line) -> ConfigError? {
        do {
            _ = try config(text)
            XCTFail("accepted: \(text)", file: file, line: line)
            return nil
        } catch let e as ConfigError {
            return e
        } catch {
            XCTFail("\(error)", file: file, line: line)
            return nil
        }
    }

    func testAcceptsAndRendersWebhooksAndFunctionsEmulator() throws {
        let c = try config("""
            {"events": {"webhooks": [{"url": "http://127.0.0.1:8300/hook", "secret": "\(Self.secret)", "types": ["user.*", "code.sent"]},
                                     {"id": "all", "url": "http://[::1]:9/x", "secret": "\(Self.secret)"}],
                        "functionsEmulator": {"url": "http://127.0.0.1:5001/", "projectId": "demo-fn", "formats": ["v2"]}}}
            """)
        XCTAssertEqual(c.events.webhooks.map(\.id), ["hook-1", "all"])
        XCTAssertEqual(c.events.webhooks[0].key.count, 24)
        XCTAssertTrue(c.events.webhooks[0].filter.matches("user.deleted"))
        XCTAssertTrue(c.events.webhooks[0].filter.matches("code.sent"))
        XCTAssertFalse(c.events.webhooks[0].filter.matches("tokens.issued"))
        XCTAssertTrue(c.events.webhooks[1].filter.isAll)
        XCTAssertEqual(c.events.functionsEmulator?.url, "http://127.0.0.1:5001")  // the trailing slash goes
        XCTAssertEqual(c.events.functionsEmulator?.formats, [.v2])
        // It renders what it parsed, and that parses back to the same config (the journal and exports rely on it).
        let rendered = c.toJSON()
        XCTAssertEqual(rendered["events"]?["webhooks"]?.arrayValue?.first?["types"], ["user.*", "code.sent"])
        XCTAssertEqual(rendered["events"]?["functionsEmulator"]?["projectId"], "demo-fn")
        var again = ProjectConfig()
        try again.apply(rendered)
        XCTAssertEqual(again, c)
        // The default: no destinations, rendered as an empty list.
        XCTAssertEqual(ProjectConfig().toJSON()["events"], ["webhooks": []])
        XCTAssertTrue(PushHint.mayBeConfigured)
    }

    func testMergesByKeyAndClears() throws {
        var c = try config(#"{"events": {"webhooks": [{"url": "http://127.0.0.1:1/", "secret": "\#(Self.secret)"}]}}"#)
        try c.apply(try JSONParser.parse(Array(#"{"events": {"functionsEmulator": {"url": "http://127.0.0.1:5001"}}}"#.utf8)))
        XCTAssertEqual(c.events.webhooks.count, 1, "a key not given is kept")
        XCTAssertEqual(c.events.functionsEmulator?.formats, [.v1, .v2], "both formats by default")
        try c.apply(try JSONParser.parse(Array(#"{"events": {"webhooks": []}}"#.utf8)))
        XCTAssertTrue(c.events.webhooks.isEmpty)
        try c.apply(try JSONParser.parse(Array(#"{"events": null}"#.utf8)))
        XCTAssertTrue(c.events.isEmpty)
    }

    func testRefusesWhatCannotBeDelivered() {
        let s = Self.secret
        let cases: [(String, String, String)] = [
            (#"{"events": {"webhooks": [{"url": "https://example.com/h", "secret": "\#(s)"}]}}"#, "events.webhooks[0].url", "only http://"),
            (#"{"events": {"webhooks": [{"url": "ftp://x/", "secret": "\#(s)"}]}}"#, "events.webhooks[0].url", "absolute http://"),
            (#"{"events": {"webhooks": [{"url": "http://", "secret": "\#(s)"}]}}"#, "events.webhooks[0].url", "with a host"),
            (#"{"events": {"webhooks": [{"url": "http://a:99999/", "secret": "\#(s)"}]}}"#, "events.webhooks[0].url", "http://"),
            (#"{"events": {"webhooks": [{"url": "http://127.0.0.1/"}]}}"#, "events.webhooks[0].secret", "is required"),
            (#"{"events": {"webhooks": [{"url": "http://127.0.0.1/", "secret": "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}]}}"#, "events.webhooks[0].secret", "whsec_"),
            (#"{"events": {"webhooks": [{"url": "http://127.0.0.1/", "secret": "whsec_c2hvcnQ="}]}}"#, "events.webhooks[0].secret", "24 to 64"),
            (#"{"events": {"webhooks": [{"url": "http://127.0.0.1/", "secret": "whsec_!!!!"}]}}"#, "events.webhooks[0].secret", "base64"),
            (#"{"events": {"webhooks": [{"url": "http://127.0.0.1/", "secret": "\#(s)", "types": ["user.made"]}]}}"#, "events.webhooks[0].types", "Unknown event type"),
            (#"{"events": {"webhooks": [{"url": "http://127.0.0.1/", "secret": "\#(s)", "types": []}]}}"#, "events.webhooks[0].types", "at least one"),
            (#"{"events": {"webhooks": [{"url": "http://127.0.0.1/", "secret": "\#(s)", "types": "user.created"}]}}"#, "events.webhooks[0].types", "array"),
            (#"{"events": {"webhooks": [{"url": "http://127.0.0.1/", "secret": "\#(s)", "id": "a.b"}]}}"#, "events.webhooks[0].id", "letters"),
            (#"{"events": {"webhooks": [{"url": "http://127.0.0.1/", "secret": "\#(s)", "id": "x"}, {"url": "http://127.0.0.1/", "secret": "\#(s)", "id": "x"}]}}"#,
             "events.webhooks[1].id", "twice"),
            (#"{"events": {"webhooks": [{"url": "http://127.0.0.1/", "secret": "\#(s)", "header": "x"}]}}"#, "events.webhooks[0].header", "unknown key"),
            (#"{"events": {"webhooks": {"url": "http://127.0.0.1/"}}}"#, "events.webhooks", "array"),
            (#"{"events": {"hooks": []}}"#, "events.hooks", "unknown key"),
            (#"{"events": {"functionsEmulator": {}}}"#, "events.functionsEmulator.url", "is required"),
            (#"{"events": {"functionsEmulator": {"url": "https://127.0.0.1:5001"}}}"#, "events.functionsEmulator.url", "only http://"),
            (#"{"events": {"functionsEmulator": {"url": "http://127.0.0.1:5001", "formats": ["v3"]}}}"#, "events.functionsEmulator.formats", "v1"),
            (#"{"events": {"functionsEmulator": {"url": "http://127.0.0.1:5001", "formats": []}}}"#, "events.functionsEmulator.formats", "non-empty"),
            (#"{"events": {"functionsEmulator": {"url": "http://127.0.0.1:5001", "projectId": "Bad Id"}}}"#, "events.functionsEmulator.projectId", "project id"),
        ]
        for (text, path, words) in cases {
            guard let e = refusal(text) else { continue }
            XCTAssertEqual(e.path, path, text)
            XCTAssertTrue(e.message.contains(words), "\(text): \(e.message)")
        }
        // At most `maxWebhooks` per project or tenant.
        let one = #"{"url": "http://127.0.0.1/", "secret": "\#(s)"}"#
        let many = Array(repeating: one, count: EventsPushConfig.maxWebhooks + 1).joined(separator: ",")
        XCTAssertEqual(refusal(#"{"events": {"webhooks": [\#(many)]}}"#)?.message, "at most \(EventsPushConfig.maxWebhooks) webhooks per project or tenant")
        let enough = Array(repeating: one, count: EventsPushConfig.maxWebhooks).joined(separator: ",")
        XCTAssertEqual(try config(#"{"events": {"webhooks": [\#(enough)]}}"#).events.webhooks.count, EventsPushConfig.maxWebhooks)
    }

    func testParsingMovesTheRouteGeneration() throws {
        let before = PushHint.generation
        _ = try config(#"{"events": {"webhooks": []}}"#)
        XCTAssertGreaterThan(PushHint.generation, before)
    }

    // MARK: the bounded queue

    func testQueueKeepsOrderAndDropsTheOldestWhenFull() {
        var q = BoundedQueue<Int>(capacity: 100)
        var dropped: [Int] = []
        for i in 0..<1000 { if let d = q.append(i) { dropped.append(d) } }
        XCTAssertEqual(q.count, 100)
        XCTAssertEqual(dropped, Array(0..<900))
        var out: [Int] = []
        while let x = q.popFirst() { out.append(x) }
        XCTAssertEqual(out, Array(900..<1000))
        XCTAssertTrue(q.isEmpty)
    }

    func testQueueMemoryIsBoundedAndFollowsWhatIsQueued() {
        var q = BoundedQueue<[UInt8]>(capacity: 1000)
        XCTAssertEqual(q.allocated, 0)
        for _ in 0..<10 { q.append([1]) }
        XCTAssertLessThanOrEqual(q.allocated, 16, "a few items take a few slots")
        for _ in 0..<100_000 { q.append([2]) }
        XCTAssertEqual(q.count, 1000)
        XCTAssertEqual(q.allocated, 1000, "a flood never grows it past its capacity")
        while q.popFirst() != nil {}
        XCTAssertEqual(q.allocated, 0, "drained, it gives its slots back")
        // Interleaved appends and pops across the ring's end keep the order.
        var r = BoundedQueue<Int>(capacity: 7)
        var expected: [Int] = []
        var next = 0
        for round in 0..<50 {
            for _ in 0..<(round % 5 + 1) {
                if r.append(next) != nil { expected.removeFirst() }
                expected.append(next)
                next += 1
            }
            for _ in 0..<(round % 3) { XCTAssertEqual(r.popFirst(), expected.isEmpty ? nil : expected.removeFirst()) }
        }
        var rest: [Int] = []
        while let x = r.popFirst() { rest.append(x) }
        XCTAssertEqual(rest, expected)
    }
}
