import HTTPServer
import XCTest

/// The parser is fed raw bytes, as a socket would deliver them.
final class HTTPParserTests: XCTestCase {
    func parseAll(_ text: String, limits: HTTPLimits = HTTPLimits()) -> (requests: [HTTPRequest], error: HTTPParseError?, rest: Int) {
        var parser = HTTPRequestParser(limits: limits)
        let bytes = Array(text.utf8)
        var start = 0
        var out: [HTTPRequest] = []
        while start < bytes.count {
            switch parser.parse(bytes, from: start) {
            case .needMore: return (out, nil, bytes.count - start)
            case .request(let r, let consumed): out.append(r); start += consumed
            case .failure(let e): return (out, e, bytes.count - start)
            }
        }
        return (out, nil, 0)
    }

    /// Header names compare equal exactly when their bytes are equal with ASCII letters folded: every pair of byte
    /// values at every position of a three-byte name (`[` and `{`, `@` and `` ` `` differ by the case bit too, and are
    /// not letters); lengths must match; lookups find a header in any case.
    func testHeaderNamesCompareIgnoringASCIICaseOnly() {
        func fold(_ b: UInt8) -> UInt8 { b >= 0x41 && b <= 0x5A ? b + 0x20 : b }
        for x in 0...127 {
            for y in 0...127 {
                let a = UInt8(x), b = UInt8(y)
                let expected = fold(a) == fold(b)
                for position in 0..<3 {
                    var l = Array("a-z".utf8), r = Array("A-Z".utf8)
                    l[position] = a; r[position] = b
                    if position != 0 { l[0] = 0x61; r[0] = 0x41 }
                    let same = HTTPHeaders.equalsIgnoringASCIICase(String(decoding: l, as: UTF8.self), String(decoding: r, as: UTF8.self))
                    if same != expected { XCTFail("\(l) vs \(r): \(same)"); return }
                }
            }
        }
        XCTAssertFalse(HTTPHeaders.equalsIgnoringASCIICase("Host", "Hos"))
        XCTAssertFalse(HTTPHeaders.equalsIgnoringASCIICase("", "a"))
        XCTAssertTrue(HTTPHeaders.equalsIgnoringASCIICase("", ""))
        XCTAssertTrue(HTTPHeaders.equalsIgnoringASCIICase("Content-Type", "content-TYPE"))
        let h = HTTPHeaders([("X-One", "1"), ("content-type", "application/json"), ("CONTENT-TYPE", "second")])
        XCTAssertEqual(h["Content-Type"], "application/json", "the first of its name")
        XCTAssertEqual(h["x-one"], "1")
        XCTAssertNil(h["X-On"])
    }

    /// A header name or method takes exactly RFC 9110's `tchar` bytes: every byte value tried in both places.
    func testTokenCharactersAreExactlyTchar() {
        let tchar = Set(Array("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ".utf8))
        for b in 0...255 {
            let byte = UInt8(b)
            guard byte != 0x0A, byte != 0x0D, byte != UInt8(ascii: ":"), byte != 0x20 else { continue }
            var header = Array("GET / HTTP/1.1\r\nX".utf8) + [byte] + Array("Y: v\r\n\r\n".utf8)
            var parser = HTTPRequestParser(limits: HTTPLimits())
            var accepted = false
            if case .request = parser.parse(header, from: 0) { accepted = true }
            XCTAssertEqual(accepted, tchar.contains(byte), "header name byte \(b)")
            header = Array("G".utf8) + [byte] + Array("T / HTTP/1.1\r\n\r\n".utf8)
            parser = HTTPRequestParser(limits: HTTPLimits())
            accepted = false
            if case .request = parser.parse(header, from: 0) { accepted = true }
            XCTAssertEqual(accepted, tchar.contains(byte), "method byte \(b)")
        }
    }

    func testSimpleAndPipelined() {
        let r = parseAll("GET /a?key=k HTTP/1.1\r\nHost: x\r\n\r\nPOST /b HTTP/1.1\r\nContent-Length: 5\r\nContent-Type: application/json\r\n\r\nhello")
        XCTAssertNil(r.error)
        XCTAssertEqual(r.requests.map(\.method), ["GET", "POST"])
        XCTAssertEqual(r.requests[0].path, "/a")
        XCTAssertEqual(r.requests[0].query, "key=k")
        XCTAssertEqual(r.requests[1].body, Array("hello".utf8))
        XCTAssertEqual(r.requests[1].headers["content-type"], "application/json")
        XCTAssertTrue(r.requests[0].keepAlive)
    }

    func testIncrementalByteByByte() {
        let text = Array("POST /x HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc".utf8)
        var parser = HTTPRequestParser()
        var got: HTTPRequest? = nil
        for n in 1...text.count {
            switch parser.parse(Array(text[0..<n]), from: 0) {
            case .needMore: XCTAssertLessThan(n, text.count)
            case .request(let r, let c): got = r; XCTAssertEqual(c, text.count)
            case .failure(let e): XCTFail("\(e)")
            }
        }
        XCTAssertEqual(got?.body, Array("abc".utf8))
    }

    func testBareLFAndLeadingBlankLines() {
        let r = parseAll("\r\nGET / HTTP/1.1\nHost: x\n\n")
        XCTAssertEqual(r.requests.count, 1)
    }

    func testKeepAliveRules() {
        XCTAssertFalse(parseAll("GET / HTTP/1.1\r\nConnection: close\r\n\r\n").requests[0].keepAlive)
        XCTAssertFalse(parseAll("GET / HTTP/1.0\r\n\r\n").requests[0].keepAlive)
        XCTAssertTrue(parseAll("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n").requests[0].keepAlive)
    }

    func testErrors() {
        XCTAssertEqual(parseAll("GARBAGE\r\n\r\n").error?.status, 400)
        XCTAssertEqual(parseAll("GET  / HTTP/1.1\r\n\r\n").error?.status, 400)
        XCTAssertEqual(parseAll("GET / HTTP/2.0\r\n\r\n").error?.status, 505)
        XCTAssertEqual(parseAll("GET / FTP/1.1\r\n\r\n").error?.status, 400)
        XCTAssertEqual(parseAll("GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n").error?.status, 400)
        XCTAssertEqual(parseAll("GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n").error?.status, 400)
        XCTAssertNil(parseAll("GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx").error)
        XCTAssertEqual(parseAll("GET / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n").error?.status, 413)
        XCTAssertEqual(parseAll("GET / HTTP/1.1\r\nContent-Length: 1048577\r\n\r\n").error?.status, 413)
        XCTAssertEqual(parseAll("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n").error?.status, 411)
        XCTAssertEqual(parseAll("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n").error?.status, 400)
        XCTAssertEqual(parseAll("GET / HTTP/1.1\r\n folded\r\n\r\n").error?.status, 400)
        XCTAssertEqual(parseAll("GET / HTTP/1.1\r\nBad Name: x\r\n\r\n").error?.status, 400)
        XCTAssertEqual(parseAll("GET / HTTP/1.1\r\nX: a\u{01}b\r\n\r\n").error?.status, 400)
        XCTAssertEqual(parseAll("GET /\u{7F} HTTP/1.1\r\n\r\n").error?.status, 400)
    }

    func testHeadLimit() {
        var limits = HTTPLimits()
        limits.maxHeadBytes = 1024
        XCTAssertEqual(parseAll("GET / HTTP/1.1\r\nX: " + String(repeating: "a", count: 2000), limits: limits).error?.status, 431)
        XCTAssertEqual(parseAll("GET / HTTP/1.1\r\nX: " + String(repeating: "a", count: 2000) + "\r\n\r\n", limits: limits).error?.status, 431)
        let many = (0..<300).map { "H\($0): v\r\n" }.joined()
        XCTAssertEqual(parseAll("GET / HTTP/1.1\r\n" + many + "\r\n").error?.status, 431)
    }

    func testResponseSerialization() {
        var out: [UInt8] = []
        HTTPResponse(status: 200, headers: [("Content-Type", "application/json")], body: Array("{}".utf8))
            .serialize(into: &out, keepAlive: false, versionMinor: 1, headOnly: false)
        XCTAssertEqual(String(decoding: out, as: UTF8.self),
                       "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
        out = []
        HTTPResponse(status: 204).serialize(into: &out, keepAlive: true, versionMinor: 1, headOnly: false)
        XCTAssertEqual(String(decoding: out, as: UTF8.self), "HTTP/1.1 204 No Content\r\n\r\n")
        out = []
        HTTPResponse(status: 304, headers: [("ETag", "\"x\"")], body: Array("ignored".utf8))
            .serialize(into: &out, keepAlive: true, versionMinor: 1, headOnly: false)
        XCTAssertEqual(String(decoding: out, as: UTF8.self), "HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n")
    }
}
