import EmulatorSupport
import XCTest

/// Bytes handed out at most `chunk` at a time: every chunk boundary a file read could make.
final class ChunkedSource: ByteSource {
    let bytes: [UInt8]
    let chunk: Int
    var at = 0
    init(_ bytes: [UInt8], chunk: Int) {
        self.bytes = bytes
        self.chunk = chunk
    }
    func read(into buffer: UnsafeMutableRawBufferPointer) throws(Files.IOError) -> Int {
        let n = min(chunk, buffer.count, bytes.count - at)
        for i in 0..<n { buffer[i] = bytes[at + i] }
        at += n
        return n
    }
}

final class JSONStreamTests: XCTestCase {
    /// Escapes, multi-byte UTF-8, nesting, numbers, brackets inside strings, members before and after the array.
    static let sample = """
    {"kind": "identitytoolkit#DownloadAccountResponse", "users": [
      {"localId": "a", "displayName": "quote \\" backslash \\\\ brace } bracket ] \\u00e9 \\ud83d\\ude00 ☃", "n": -1.5e3},
      {"localId": "b", "providerUserInfo": [{"providerId": "phone", "rawId": "+15555550100"}], "deep": {"x": [[[{}]]], "y": []}},
      {},
      [1, 2],
      "a string record",
      42
    ], "after": {"k": [true, false, null]}}

    """

    func read(_ bytes: [UInt8], chunk: Int, buffer: Int = 1 << 20, maxRecord: Int = 1 << 20) throws(JSONStreamError) -> ([JSONRecordReader.Record], JSONObject) {
        let r = JSONRecordReader(ChunkedSource(bytes, chunk: chunk), bufferSize: buffer, maxRecordBytes: maxRecord)
        var out: [JSONRecordReader.Record] = []
        while let rec = try r.next() { out.append(rec) }
        return (out, r.otherMembers)
    }

    func testEveryChunkBoundaryGivesTheRecordsAWholeParseGives() throws {
        let bytes = Array(Self.sample.utf8)
        let whole = try JSONParser.parse(bytes)
        let expected = whole["users"]?.arrayValue ?? []
        XCTAssertEqual(expected.count, 6)
        for buffer in [1, 2, 7, 64, 1 << 20] {
            for chunk in 1...bytes.count {
                let (records, others) = try read(bytes, chunk: chunk, buffer: buffer)
                XCTAssertEqual(records.map(\.value), expected, "chunk \(chunk) buffer \(buffer)")
                XCTAssertEqual(records.map(\.index), Array(0..<6))
                XCTAssertEqual(others["kind"], whole["kind"])
                XCTAssertEqual(others["after"], whole["after"])
                if buffer >= 64 { break }  // the buffer, not the source, decides where values are split past this
            }
        }
    }

    func testRecordsKnowTheirByteOffsetAndLine() throws {
        let bytes = Array(Self.sample.utf8)
        let (records, _) = try read(bytes, chunk: 5, buffer: 16)
        XCTAssertEqual(records.map(\.line), [2, 3, 4, 5, 6, 7])
        for r in records {
            let first = bytes[r.offset]
            XCTAssertTrue([UInt8(ascii: "{"), UInt8(ascii: "["), UInt8(ascii: "\""), UInt8(ascii: "4")].contains(first), "\(r.offset)")
            XCTAssertEqual(bytes[..<r.offset].filter { $0 == 0x0A }.count + 1, r.line)
        }
    }

    /// Records that lie whole in the buffer are parsed where they are: their lines, and the lines of the records and
    /// problems after them, still count every line feed (pretty-printed exports, records of several lines).
    func testMultiLineRecordsKeepTheLinesCountedWhereverTheyAreParsed() throws {
        let text = "{\"users\": [\n  {\n    \"localId\": \"a\",\n    \"n\": [\n      1\n    ]\n  },\n  {\"localId\": \"b\"},\n  {\"localId\": }\n]}\n"
        let bytes = Array(text.utf8)
        for buffer in [16, 64, 1 << 20] {
            let r = JSONRecordReader(ChunkedSource(bytes, chunk: 1 << 20), bufferSize: buffer)
            let first = try r.next(), second = try r.next()
            XCTAssertEqual(first?.line, 2, "buffer \(buffer)")
            XCTAssertEqual(second?.line, 8, "buffer \(buffer)")
            XCTAssertEqual(second?.value, ["localId": "b"])
            XCTAssertEqual(second.map { bytes[$0.offset] }, UInt8(ascii: "{"))
            XCTAssertThrowsError(try r.next(), "buffer \(buffer)") { e in
                XCTAssertEqual((e as? JSONStreamError)?.line, 9, "buffer \(buffer): \(e)")
                XCTAssertEqual((e as? JSONStreamError)?.record, 2)
            }
        }
    }

    func testTruncatedAtAnyOffsetFailsAndNamesWhere() {
        let bytes = Array(Self.sample.utf8)
        // Every prefix short of the closing brace is refused (the trailing newline may go).
        let closing = bytes.lastIndex(of: UInt8(ascii: "}"))!
        for cut in 0...closing {
            XCTAssertThrowsError(try read(Array(bytes[..<cut]), chunk: 3, buffer: 8), "cut at \(cut)") { e in
                guard let e = e as? JSONStreamError else { return XCTFail("\(e)") }
                XCTAssertLessThanOrEqual(e.offset, cut)
                XCTAssertTrue(e.message.contains("ends") || e.message.contains("invalid JSON") || e.message.contains("empty"), "\(cut): \(e)")
            }
        }
        // Inside the second record: that record is named, with its first byte's offset and line.
        let second = Array(Self.sample.utf8).firstRange(of: Array(#"{"localId": "b""#.utf8))!.lowerBound
        XCTAssertThrowsError(try read(Array(bytes[..<(second + 30)]), chunk: 4096)) { e in
            let e = e as! JSONStreamError
            XCTAssertEqual(e.record, 1)
            XCTAssertEqual(e.offset, second)
            XCTAssertEqual(e.line, 3)
            XCTAssertEqual(e.description, "record 1 (byte \(second), line 3): the file ends inside the record")
        }
    }

    func testABadRecordIsNamedWithTheErrorsOffsetAndLine() {
        let text = "{\"users\": [\n{\"localId\": \"a\"},\n{\"localId\":\n tru}\n]}"
        XCTAssertThrowsError(try read(Array(text.utf8), chunk: 2)) { e in
            let e = e as! JSONStreamError
            XCTAssertEqual(e.record, 1)
            XCTAssertEqual(e.line, 4)
            XCTAssertEqual(e.offset, Array(text.utf8).firstRange(of: Array("tru}".utf8))!.lowerBound)
            XCTAssertTrue(e.message.hasPrefix("invalid JSON in the record: Unexpected token"), e.message)
        }
    }

    func testTrailingGarbageAndStructureErrors() throws {
        func refuses(_ text: String, _ message: String, record: Int? = nil, file: StaticString = #filePath, line: UInt = #line) {
            for chunk in [1, 3, 4096] {
                XCTAssertThrowsError(try read(Array(text.utf8), chunk: chunk), file: file, line: line) { e in
                    let e = e as! JSONStreamError
                    XCTAssertTrue(e.message.contains(message), "\(text): \(e)", file: file, line: line)
                    XCTAssertEqual(e.record, record, "\(text): \(e)", file: file, line: line)
                }
            }
        }
        refuses(#"{"users": []} x"#, "unexpected data after the JSON object")
        refuses(#"{"users": []}{}"#, "unexpected data after the JSON object")
        refuses("", "empty")
        refuses("[]", "expected a JSON object")
        refuses(#"{"users": {}}"#, "\"users\" must be an array")
        refuses(#"{"users": [], "users": []}"#, "appears twice")
        refuses(#"{"users": [{}, ]}"#, "a ',' before ']'", record: 1)
        refuses(#"{"users": [{} {}]}"#, "expected ',' or ']'", record: 1)
        refuses(#"{"users": [{},,{}]}"#, "invalid JSON", record: 1)
        refuses(#"{"users": [] "kind": 1}"#, "expected ',' or '}'")
        refuses(#"{"users": [{"a": "\#u{1}"}]}"#, "invalid JSON", record: 0)
        // Invalid UTF-8 inside a record is the parser's refusal.
        var bad = Array(#"{"users": [{"a": "xx"}]}"#.utf8)
        bad[bad.firstIndex(of: UInt8(ascii: "x"))!] = 0xFF
        XCTAssertThrowsError(try read(bad, chunk: 2)) { e in XCTAssertEqual((e as! JSONStreamError).record, 0) }
        // Whitespace after the object is fine; a file without the array holds no records.
        XCTAssertEqual(try read(Array("{\"users\": []}  \n\t".utf8), chunk: 1).0.count, 0)
        let (none, others) = try read(Array(#"{"kind": "x"}"#.utf8), chunk: 2)
        XCTAssertTrue(none.isEmpty)
        XCTAssertEqual(others["kind"], "x")
    }

    func testAHugeStringNeedsTheRecordCap() throws {
        let big = String(repeating: "ab\\\"", count: 800_000)  // 3.2 MB of escapes
        let text = "{\"users\": [{\"localId\": \"big\", \"displayName\": \"\(big)\"}, {\"localId\": \"next\"}]}"
        let (records, _) = try read(Array(text.utf8), chunk: 65536, buffer: 1 << 16, maxRecord: 4 << 20)
        XCTAssertEqual(records.count, 2)
        XCTAssertEqual(records[0].value["displayName"]?.stringValue?.utf8.count, 2_400_000)
        XCTAssertEqual(records[1].value["localId"], "next")
        XCTAssertThrowsError(try read(Array(text.utf8), chunk: 65536, buffer: 1 << 16)) { e in
            let e = e as! JSONStreamError
            XCTAssertEqual(e.record, 0)
            XCTAssertEqual(e.offset, 11)
            XCTAssertEqual(e.message, "the record is larger than 1048576 bytes")
        }
    }

    func testABrokenQuoteIsNamedWhereItBreaksNotAsAnOversizedRecord() {
        // `"localId"` losing its opening quote turns the rest into one long string for the scanner.
        var text = "{\"users\": [\n{\"localId\": \"a\"},\n{\n  !localId\": \"b\"}"
        for i in 0..<2000 { text += ",\n{\"localId\": \"u\(i)\"}" }
        text += "]}"
        XCTAssertThrowsError(try read(Array(text.utf8), chunk: 4096, buffer: 4096, maxRecord: 1000)) { e in
            let e = e as! JSONStreamError
            XCTAssertEqual(e.record, 1)
            XCTAssertEqual(e.line, 4)
            XCTAssertEqual(e.offset, Array(text.utf8).firstIndex(of: UInt8(ascii: "!")))
            XCTAssertTrue(e.message.hasPrefix("invalid JSON in the record: Expected a string key"), e.message)
        }
    }

    func testDepthIsLimitedPerRecord() {
        let deep = String(repeating: "[", count: 100) + String(repeating: "]", count: 100)
        XCTAssertThrowsError(try read(Array("{\"users\": [\(deep)]}".utf8), chunk: 7)) { e in
            XCTAssertEqual((e as! JSONStreamError).record, 0)
        }
    }

    // MARK: CSV

    func csv(_ text: String, chunk: Int, buffer: Int = 1 << 20) throws(JSONStreamError) -> [CSVRowReader.Row] {
        let r = CSVRowReader(ChunkedSource(Array(text.utf8), chunk: chunk), bufferSize: buffer)
        var rows: [CSVRowReader.Row] = []
        while let row = try r.next() { rows.append(row) }
        return rows
    }

    func testCSVRowsAtEveryChunkBoundary() throws {
        let text = "u1,a@example.com,true,,,\"Doe, Jane\",,\r\n\nu2,,false,,,\"say \"\"hi\"\"\nthere\",é☃,\n\"{\"\"role\"\":1}\",last"
        let expected = [["u1", "a@example.com", "true", "", "", "Doe, Jane", "", ""],
                        ["u2", "", "false", "", "", "say \"hi\"\nthere", "é☃", ""],
                        ["{\"role\":1}", "last"]]
        for buffer in [1, 3, 1 << 20] {
            for chunk in 1...text.utf8.count {
                let rows = try csv(text, chunk: chunk, buffer: buffer)
                XCTAssertEqual(rows.map(\.fields), expected, "chunk \(chunk) buffer \(buffer)")
                XCTAssertEqual(rows.map(\.line), [1, 3, 5])
                XCTAssertEqual(rows.map(\.index), [0, 1, 2])
                if buffer > 3 { break }
            }
        }
    }

    func testCSVTruncatedInsideQuotesFails() {
        XCTAssertThrowsError(try csv("u1,\"open", chunk: 2)) { e in
            let e = e as! JSONStreamError
            XCTAssertEqual(e.record, 0)
            XCTAssertEqual(e.message, "the file ends inside a quoted field")
        }
    }
}
