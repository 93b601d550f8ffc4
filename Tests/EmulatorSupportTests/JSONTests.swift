import EmulatorSupport
import XCTest

final class JSONTests: XCTestCase {
    func parse(_ s: String) throws -> JSON { try JSONParser.parse(s) }

    func testParsesAndPreservesKeyOrder() throws {
        let v = try parse(#" {"b": 1, "a": [true, false, null, -1.5e2, "x\u00e9\n\ud83d\ude00"], "+16505554567": "123456"} "#)
        XCTAssertEqual(v.objectValue?.keys, ["b", "a", "+16505554567"])
        XCTAssertEqual(v["a"]?.arrayValue?[3], .number(-150))
        XCTAssertEqual(v["a"]?.arrayValue?[4], .string("xé\n😀"))
        XCTAssertEqual(v.serializedString, #"{"b":1,"a":[true,false,null,-150,"xé\n😀"],"+16505554567":"123456"}"#)
    }

    /// Replies written member by member are byte for byte what serializing the same object gives.
    func testObjectBytesMatchSerialization() {
        for (text, flag) in [("plain", true), ("quote \" backslash \\ newline \n tab \t nul \u{0} é 😀 \u{1F}", false), ("", true)] {
            var w = JSONObjectBytes(capacity: 4)
            w.string("idToken", text)
            w.bool("isNewUser", flag)
            w.string("phoneNumber", "+16505554567")
            let object: JSON = ["idToken": .string(text), "isNewUser": .bool(flag), "phoneNumber": "+16505554567"]
            XCTAssertEqual(w.finish(), object.serialized(), text)
        }
        var empty = JSONObjectBytes()
        XCTAssertEqual(empty.finish(), JSON.object([:]).serialized())
        // A member written as static prefix + value is the member with the joined string.
        for v in ["demo-phone", "", "q\"uote\\ \u{1}"] {
            var w = JSONObjectBytes(capacity: 1)
            w.string("iss", prefix: "https://securetoken.google.com/", v)
            XCTAssertEqual(w.finish(), JSON.object(["iss": .string("https://securetoken.google.com/" + v)]).serialized(), v)
        }
    }

    /// The eight-bytes-at-a-time scan escapes exactly what the byte-by-byte rule does, wherever the byte falls.
    func testStringEscapingMatchesBytewiseRule() {
        func reference(_ s: String) -> [UInt8] {
            var out: [UInt8] = [0x22]
            for b in s.utf8 {
                switch b {
                case 0x22: out += [0x5C, 0x22]
                case 0x5C: out += [0x5C, 0x5C]
                case 0x0A: out += [0x5C, 0x6E]
                case 0x0D: out += [0x5C, 0x72]
                case 0x09: out += [0x5C, 0x74]
                case 0..<0x20: out += Array(String(format: "\\u%04x", b).utf8)
                default: out.append(b)
                }
            }
            return out + [0x22]
        }
        let pieces = ["a", "Z", "0", "\"", "\\", "\n", "\r", "\t", "\u{0}", "\u{1F}", "\u{7F}", " ", "!", "#", "[", "]", "^", "é", "😀", "\u{80}"]
        var rng = SystemRandomNumberGenerator()
        for length in 0..<48 {
            for _ in 0..<40 {
                let s = (0..<length).map { _ in pieces[Int.random(in: 0..<pieces.count, using: &rng)] }.joined()
                var out: [UInt8] = []
                JSON.writeString(s, into: &out)
                XCTAssertEqual(out, reference(s), s.debugDescription)
            }
        }
        // Every byte value at every offset of a 16-byte run of plain text.
        for offset in 0..<16 {
            for b in UInt8(0)..<0x80 {
                var bytes = Array(repeating: UInt8(ascii: "x"), count: 16)
                bytes[offset] = b
                let s = String(decoding: bytes, as: UTF8.self)
                var out: [UInt8] = []
                JSON.writeString(s, into: &out)
                XCTAssertEqual(out, reference(s))
            }
        }
    }

    func testRejectsMalformedInput() {
        let bad = ["", "{", "{\"a\":}", "[1,]", "{\"a\" 1}", "01", "1.", "-", "tru", "\"\\x\"", "\"\u{01}\"", "{} {}", "\"\\ud800\"",
                   "\"\\udc00x\"", "nan", "[1 2]", "{\"a\":1,}"]
        for b in bad { XCTAssertThrowsError(try parse(b), b) }
        XCTAssertThrowsError(try JSONParser.parse([0x22, 0xFF, 0xFE, 0x22]))  // invalid UTF-8
        // Invalid UTF-8 after ASCII, wherever it falls (ASCII-only strings skip validation: one high byte must not).
        for at in 0..<12 {
            var bytes = Array("\"abcdefghijkl\"".utf8)
            bytes[1 + at] = 0xC3  // a lead byte without its continuation
            XCTAssertThrowsError(try JSONParser.parse(bytes), "at \(at)")
        }
        XCTAssertEqual(try JSONParser.parse(Array("\"caf\u{E9} \u{1F600} ok\"".utf8)).stringValue, "caf\u{E9} \u{1F600} ok")
        XCTAssertEqual(try JSONParser.parse(Array("\"+16505554567\"".utf8)).stringValue, "+16505554567")
    }

    func testDepthLimit() {
        XCTAssertNoThrow(try parse(String(repeating: "[", count: 100) + String(repeating: "]", count: 100)))
        XCTAssertThrowsError(try parse(String(repeating: "[", count: 100_000)))
        XCTAssertThrowsError(try parse(String(repeating: "{\"a\":", count: 5000)))
    }

    func testNumbers() throws {
        XCTAssertEqual(try parse("1796033491418").int64Value, 1_796_033_491_418)
        XCTAssertNil(try parse("1e400").int64Value)
        XCTAssertNil(try parse("1.5").int64Value)
        XCTAssertEqual(JSON.number(.infinity).serializedString, "null")
    }

    func testEscapingOnOutput() {
        XCTAssertEqual(JSON.string("a\"b\\c\u{01}").serializedString, #""a\"b\\c\u0001""#)
    }

    func testMergeAndPaths() {
        var o: JSONObject = ["signIn": ["phoneNumber": ["enabled": true, "testPhoneNumbers": ["+1": "1"]]]]
        let merged = o.merging(["signIn": ["phoneNumber": ["testPhoneNumbers": ["+2": "2"]]]], replaceWhole: ["testPhoneNumbers"])
        XCTAssertEqual(merged.value(atPath: ["signIn", "phoneNumber", "testPhoneNumbers"]), ["+2": "2"])
        XCTAssertEqual(merged.value(atPath: ["signIn", "phoneNumber", "enabled"]), true)
        o.setValue(nil, atPath: ["signIn", "phoneNumber"])
        XCTAssertNil(o["signIn"])
        o.setValue("x", atPath: ["a", "b"])
        XCTAssertEqual(o.value(atPath: ["a", "b"]), "x")
    }

    func testBase64URL() {
        for n in 0..<40 {
            let bytes = (0..<n).map { UInt8(($0 * 37 + 11) & 0xFF) }
            XCTAssertEqual(Base64URL.decode(Base64URL.encode(bytes)), bytes)
        }
        XCTAssertEqual(Base64URL.encode(Array("hi?>".utf8)), "aGk_Pg")
        // Appending writes after what is there, every tail length, with and without padding.
        for (input, url, standard) in [("", "", ""), ("f", "Zg", "Zg=="), ("fo", "Zm8", "Zm8="), ("foo", "Zm9v", "Zm9v"),
                                        ("foob", "Zm9vYg", "Zm9vYg=="), ("\u{FB}\u{FF}", "w7vDvw", "w7vDvw==")] {
            var out = Array("x.".utf8)
            Base64URL.append(Array(input.utf8), to: &out)
            XCTAssertEqual(String(decoding: out, as: UTF8.self), "x." + url)
            XCTAssertEqual(Base64URL.encodeStandard(Array(input.utf8)), standard)
        }
        XCTAssertEqual(Base64URL.encodeStandard(Array("hi?>".utf8)), "aGk/Pg==")
        // The six-bytes-at-a-time path agrees with the standard encoding, mapped to the URL alphabet, for every length
        // and every byte value in every position.
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        func next() -> UInt64 { state ^= state << 13; state ^= state >> 7; state ^= state << 17; return state }
        for n in 0..<200 {
            for round in 0..<(n < 20 ? 40 : 3) {
                let bytes = (0..<n).map { i in round < 2 ? UInt8(truncatingIfNeeded: (i * 131 + round * 255) & 0xFF) : UInt8(truncatingIfNeeded: next() >> 29) }
                let expected = Base64URL.encodeStandard(bytes).replacingOccurrences(of: "=", with: "")
                    .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                var out = Array("x".utf8)
                Base64URL.append(bytes, to: &out)
                XCTAssertEqual(String(decoding: out, as: UTF8.self), "x" + expected, "\(n)")
            }
        }
        XCTAssertNil(Base64URL.decode("a$b"))
        XCTAssertNil(Base64URL.decode("a"))
    }

    func testURLEncoding() {
        let pairs = URLEncoding.parsePairs("grant_type=refresh_token&refresh_token=a%2Bb+c&x")
        XCTAssertEqual(pairs.map(\.0), ["grant_type", "refresh_token", "x"])
        XCTAssertEqual(pairs[1].1, "a+b c")
        XCTAssertEqual(URLEncoding.percentDecode("%zz%4"), "%zz%4")
    }

    func testTimestamp() {
        XCTAssertEqual(Timestamp.rfc3339(millis: 0), "1970-01-01T00:00:00.000Z")
        XCTAssertEqual(Timestamp.rfc3339(millis: 1_796_033_491_418), "2026-11-30T10:11:31.418Z")
        XCTAssertEqual(Timestamp.rfc3339(millis: 951_782_400_000), "2000-02-29T00:00:00.000Z")
        XCTAssertEqual(Timestamp.rfc3339(millis: -1), "1969-12-31T23:59:59.999Z")
        XCTAssertEqual(Timestamp.rfc3339(millis: Timestamp.minMillis), "0001-01-01T00:00:00.000Z")
        XCTAssertEqual(Timestamp.rfc3339(millis: Timestamp.maxMillis), "9999-12-31T23:59:59.999Z")
        XCTAssertEqual(Timestamp.rfc3339(millis: .min), "0001-01-01T00:00:00.000Z", "clamped, never trapping")
        XCTAssertEqual(Timestamp.rfc3339(millis: .max), "9999-12-31T23:59:59.999Z")
        // The date arithmetic against the C library's gmtime_r across the whole range (and every day near the epoch).
        var x: UInt64 = 0x9E37_79B9_7F4A_7C15
        let span = UInt64(Timestamp.maxMillis - Timestamp.minMillis)
        let samples = (0..<20_000).map { _ -> Int64 in
            x = x &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Timestamp.minMillis + Int64((x >> 11) % span)
        } + (-800...800).map { Int64($0) * 86_400_000 - 1 }
        for millis in samples {
            let floorSeconds = millis / 1000 - (millis % 1000 < 0 ? 1 : 0)
            var t = time_t(floorSeconds)
            var tmv = tm()
            gmtime_r(&t, &tmv)
            let ms = (millis % 1000 + 1000) % 1000
            let expected = String(format4(Int(tmv.tm_year) + 1900)) + "-" + two(Int(tmv.tm_mon) + 1) + "-" + two(Int(tmv.tm_mday))
                + "T" + two(Int(tmv.tm_hour)) + ":" + two(Int(tmv.tm_min)) + ":" + two(Int(tmv.tm_sec)) + "."
                + String(String(ms + 1000).dropFirst()) + "Z"
            XCTAssertEqual(Timestamp.rfc3339(millis: millis), expected, "\(millis)")
        }
        func two(_ v: Int) -> String { v < 10 ? "0\(v)" : "\(v)" }
        func format4(_ v: Int) -> String { String(String(v + 10_000).dropFirst()) }
    }

    /// Member names from a name cache are the names a parse without one makes, whatever the texts hold: names that
    /// share a slot, names at and past the longest kept, escaped, non-ASCII and empty names, repeated keys.
    func testANameCacheChangesNothingButWhereNamesComeFrom() throws {
        let names = JSONNameCache()
        let long = String(repeating: "n", count: JSONNameCache.longest)
        var texts = [
            #"{"localId":"a","createdAt":"1","providerUserInfo":[{"providerId":"phone","rawId":"+1"}]}"#,
            #"{"\#(long)":1,"\#(long)x":2,"":3,"\u0041b":4,"Ab":5,"é":6,"e\u0301":7,"a":1,"a":2}"#,
            #"{"kind":{"kind":{"kind":[]}},"users":[{"localId":"b"}]}"#,
        ]
        // Enough different names to make them take each other's slots, twice over.
        texts.append("{" + (0..<300).map { #""k\#($0)":\#($0)"# }.joined(separator: ",") + "}")
        texts.append(texts[3])
        for round in 0..<3 {
            for t in texts {
                let plain = try JSONParser.parse(Array(t.utf8))
                let cached = try Array(t.utf8).withUnsafeBufferPointer { try JSONParser.parse($0, names: names) }
                XCTAssertEqual(cached, plain, "round \(round): \(t.prefix(60))")
                XCTAssertEqual(cached.objectValue?.keys, plain.objectValue?.keys)
            }
        }
        // A name made once is handed out again.
        let a = try Array(#"{"customAttributes":1}"#.utf8).withUnsafeBufferPointer { try JSONParser.parse($0, names: names) }
        let b = try Array(#"{"customAttributes":2}"#.utf8).withUnsafeBufferPointer { try JSONParser.parse($0, names: names) }
        XCTAssertEqual(a.objectValue?.keys, ["customAttributes"])
        XCTAssertEqual(b["customAttributes"], .int(2))
    }

    /// `parsePrefix`: the first value and the bytes it took; what follows is not read; a cut-off value fails.
    func testParsePrefixStopsAtTheEndOfTheFirstValue() throws {
        func prefix(_ t: String) throws(JSONParseError) -> (JSON, Int) {
            let bytes = Array(t.utf8)
            return try bytes.withUnsafeBufferPointer { (b) throws(JSONParseError) -> (JSON, Int) in try JSONParser.parsePrefix(b) }
        }
        let (v, n) = try prefix(#"  {"a":[1,2]} ,{"b":"#)
        XCTAssertEqual(v, ["a": [1, 2]])
        XCTAssertEqual(n, 13)
        XCTAssertEqual(try prefix("[]]").1, 2)
        XCTAssertThrowsError(try prefix(#"{"a":[1,2"#))
        XCTAssertThrowsError(try prefix(#"{"a":1"#))
        XCTAssertThrowsError(try prefix(#"{"a" 1}"#))
    }

    /// Member names of different lengths are different names, even canonically equivalent ones (a precomposed é and
    /// e + U+0301), as JSON compares them.
    func testNamesOfDifferentLengthsAreDifferentMembers() throws {
        var o = JSONObject()
        o["\u{E9}"] = 1
        o["e\u{301}"] = 2
        XCTAssertEqual(o.count, 2)
        XCTAssertEqual(o["\u{E9}"], 1)
        XCTAssertEqual(o["e\u{301}"], 2)
        let parsed = try JSONParser.parse(#"{"\u00e9":1,"e\u0301":2}"#)
        XCTAssertEqual(parsed.objectValue?.count, 2)
        XCTAssertEqual(parsed["e\u{301}"], 2)
        // Past the hash index's threshold too; and canonically equivalent names of one length (marks in another
        // order) are different names as well.
        var big = JSONObject()
        for i in 0..<20 { big["k\(i)"] = .int(Int64(i)) }
        big["K"] = 1
        big["\u{212A}"] = 2
        big["a\u{301}\u{323}"] = 3
        big["a\u{323}\u{301}"] = 4
        XCTAssertEqual(big.count, 24)
        XCTAssertEqual([big["K"], big["\u{212A}"], big["a\u{301}\u{323}"], big["a\u{323}\u{301}"]], [1, 2, 3, 4])
        var small = JSONObject()
        small["a\u{301}\u{323}"] = 3
        small["a\u{323}\u{301}"] = 4
        XCTAssertEqual(small.count, 2)
        XCTAssertEqual(small["a\u{323}\u{301}"], 4)
        big["K"] = nil
        XCTAssertEqual(big["\u{212A}"], 2)
        XCTAssertNil(big["K"])
    }
}
