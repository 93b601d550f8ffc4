#if canImport(Glibc)
import Glibc
#endif

/// Bytes read a chunk at a time: a file (`FileByteSource`) or, in tests, an array cut where a test chooses.
public protocol ByteSource: AnyObject {
    /// Fills at most `buffer.count` bytes and returns how many; 0 only at the end.
    func read(into buffer: UnsafeMutableRawBufferPointer) throws(Files.IOError) -> Int
}

/// A regular file read front to back (`EINTR` retried); closed when released. Directories are refused.
public final class FileByteSource: ByteSource {
    public let path: String
    private let fd: Int32

    public init(path: String) throws(Files.IOError) {
        guard !Files.hasNUL(path) else { throw Files.IOError(path: path, errnoCode: EINVAL) }
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw Files.IOError(path: path, errnoCode: errno) }
        var st = stat()
        if fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR {
            close(fd)
            throw Files.IOError(path: path, errnoCode: EISDIR)
        }
        self.path = path
        self.fd = fd
    }

    deinit { close(fd) }

    public func read(into buffer: UnsafeMutableRawBufferPointer) throws(Files.IOError) -> Int {
        while true {
            let n = Glibc.read(fd, buffer.baseAddress, buffer.count)
            if n >= 0 { return n }
            if errno != EINTR { throw Files.IOError(path: path, errnoCode: errno) }
        }
    }
}

/// Why a streamed file was refused: where (byte offset from 0, line from 1) and, inside the array, which record
/// (from 0).
public struct JSONStreamError: Error, Sendable, CustomStringConvertible, Equatable {
    public let message: String
    public let offset: Int
    public let line: Int
    public let record: Int?
    public init(message: String, offset: Int, line: Int, record: Int?) {
        self.message = message
        self.offset = offset
        self.line = line
        self.record = record
    }
    public var description: String {
        if let record { return "record \(record) (byte \(offset), line \(line)): \(message)" }
        return "byte \(offset) (line \(line)): \(message)"
    }
}

/// Reads a JSON object of the shape `{…, "users": [record, record, …], …}` (firebase-tools' `accounts.json`,
/// production's `firebase auth:export`) one record at a time, so memory is one buffer plus one record however large
/// the file. Each record's bytes are found by a small scanner (strings, escapes, nesting) and parsed by `JSONParser`
/// (strict RFC 8259, UTF-8 validated), in place when the record lies inside the buffer. The object's other members are
/// parsed whole (each at most `maxMemberBytes`) into `otherMembers`. Anything after the object but whitespace is refused.
public final class JSONRecordReader {
    public struct Record {
        /// The record's position in the array, from 0.
        public let index: Int
        /// Its first byte's offset in the stream, and that byte's line (from 1).
        public let offset: Int
        public let line: Int
        public let value: JSON
    }

    public let arrayKey: String
    public let maxRecordBytes: Int
    public let maxMemberBytes: Int
    public let maxDepth: Int
    /// The top-level members other than the array, as read so far (all of them once `next()` returned nil).
    public private(set) var otherMembers = JSONObject()
    /// Whether the array's member was seen (a file without it holds no records).
    public private(set) var sawArray = false
    /// Records read so far.
    public private(set) var count = 0

    private enum Phase { case start, firstMember, member, afterMember, arrayFirst, arrayNext, trailing, finished }
    private var phase = Phase.start
    private let source: any ByteSource
    private let buf: UnsafeMutableBufferPointer<UInt8>
    private var pos = 0
    private var end = 0
    /// The stream offset of `buf[0]`, and the line `pos` is on.
    private var base = 0
    private var line = 1
    private var atEnd = false
    /// A value that spans buffer refills, gathered here.
    private var spill: [UInt8] = []
    /// The records' member names, made once (JSONParser.swift).
    private let names = JSONNameCache()

    public init(_ source: any ByteSource, arrayKey: String = "users", bufferSize: Int = 1 << 20,
                maxRecordBytes: Int = 1 << 20, maxMemberBytes: Int = 1 << 20, maxDepth: Int = 64) {
        self.source = source
        self.arrayKey = arrayKey
        self.maxRecordBytes = maxRecordBytes
        self.maxMemberBytes = maxMemberBytes
        self.maxDepth = maxDepth
        buf = .allocate(capacity: max(1, bufferSize))
    }

    deinit { buf.deallocate() }

    private func fail(_ message: String, record: Int? = nil) -> JSONStreamError {
        JSONStreamError(message: message, offset: base + pos, line: line, record: record)
    }

    /// The next record, or nil after the object's closing brace (and nothing but whitespace after it).
    public func next() throws(JSONStreamError) -> Record? {
        while true {
            switch phase {
            case .finished:
                return nil
            case .start:
                guard let b = try peek() else { throw fail("the file is empty (expected a JSON object)") }
                guard b == UInt8(ascii: "{") else { throw fail("expected a JSON object") }
                pos += 1
                phase = .firstMember
            case .firstMember, .member:
                guard let b = try peek() else { throw fail("the file ends inside the top-level object") }
                if b == UInt8(ascii: "}") && phase == .firstMember {
                    pos += 1
                    phase = .trailing
                    continue
                }
                guard b == UInt8(ascii: "\"") else { throw fail("expected a member name") }
                try readMember()
            case .afterMember:
                guard let b = try peek() else { throw fail("the file ends inside the top-level object") }
                pos += 1
                if b == UInt8(ascii: ",") { phase = .member } else if b == UInt8(ascii: "}") { phase = .trailing } else {
                    pos -= 1
                    throw fail("expected ',' or '}' after a member")
                }
            case .arrayFirst:
                guard let b = try peek() else { throw fail("the file ends inside the \"\(arrayKey)\" array", record: count) }
                if b == UInt8(ascii: "]") {
                    pos += 1
                    phase = .afterMember
                    continue
                }
                return try readRecord()
            case .arrayNext:
                guard let b = try peek() else { throw fail("the file ends inside the \"\(arrayKey)\" array, after \(count) records", record: count) }
                if b == UInt8(ascii: "]") {
                    pos += 1
                    phase = .afterMember
                    continue
                }
                guard b == UInt8(ascii: ",") else { throw fail("expected ',' or ']' after a record", record: count) }
                pos += 1
                guard let c = try peek() else { throw fail("the file ends inside the \"\(arrayKey)\" array, after \(count) records", record: count) }
                guard c != UInt8(ascii: "]") else { throw fail("a ',' before ']'", record: count) }
                return try readRecord()
            case .trailing:
                if try peek() != nil { throw fail("unexpected data after the JSON object") }
                phase = .finished
                return nil
            }
        }
    }

    private func readRecord() throws(JSONStreamError) -> Record {
        let index = count
        let (value, offset, at) = try captureValue(limit: maxRecordBytes, record: index, what: "record")
        count += 1
        phase = .arrayNext
        return Record(index: index, offset: offset, line: at, value: value)
    }

    private func readMember() throws(JSONStreamError) {
        let (k, _, _) = try captureValue(limit: 4096, record: nil, what: "member name")
        guard case .string(let key) = k else { throw fail("expected a member name") }
        guard let colon = try peek() else { throw fail("the file ends inside the top-level object") }
        guard colon == UInt8(ascii: ":") else { throw fail("expected ':' after a member name") }
        pos += 1
        guard let b = try peek() else { throw fail("the file ends inside the top-level object") }
        if key == arrayKey {
            guard !sawArray else { throw fail("\"\(arrayKey)\" appears twice") }
            guard b == UInt8(ascii: "[") else { throw fail("\"\(arrayKey)\" must be an array") }
            sawArray = true
            pos += 1
            phase = .arrayFirst
        } else {
            let (v, _, _) = try captureValue(limit: maxMemberBytes, record: nil, what: "member \"\(LogEscaping.truncate(key, to: 64))\"")
            otherMembers[key] = v
            phase = .afterMember
        }
    }

    /// Skips whitespace (counting lines) and returns the next byte without consuming it; nil at the end.
    private func peek() throws(JSONStreamError) -> UInt8? {
        while true {
            while pos < end {
                switch buf[pos] {
                case 0x0A: line += 1; pos += 1
                case 0x20, 0x09, 0x0D: pos += 1
                default: return buf[pos]
                }
            }
            guard try refill() else { return nil }
        }
    }

    /// Reads the next chunk into the buffer (from its start); false at the end of the stream.
    private func refill() throws(JSONStreamError) -> Bool {
        if atEnd { return false }
        base += end
        pos = 0
        end = 0
        let n: Int
        do { n = try source.read(into: UnsafeMutableRawBufferPointer(buf)) } catch {
            throw JSONStreamError(message: "cannot read: \(String(cString: strerror(error.errnoCode)))", offset: base, line: line, record: nil)
        }
        if n == 0 { atEnd = true; return false }
        end = n
        return true
    }

    /// The value starting at `pos` (a non-whitespace byte), scanned to its end and parsed.
    private func captureValue(limit: Int, record: Int?, what: String) throws(JSONStreamError) -> (JSON, Int, Int) {
        let startOffset = base + pos, startLine = line
        // An object or array that lies whole in the buffer (nearly every record) is parsed where it is, without the
        // scan for its end below (a fifth of what reading a record cost). A value the buffer cuts off, one larger
        // than `limit` or one with a problem takes the scanning path, which gathers, refuses and locates as before.
        if buf[pos] == UInt8(ascii: "{") || buf[pos] == UInt8(ascii: "[") {
            let window = UnsafeBufferPointer(rebasing: buf[pos..<(limit >= end - pos ? end : pos + limit)])
            if let (value, n) = try? JSONParser.parsePrefix(window, maxDepth: maxDepth, names: names) {
                line += Self.newlines(in: UnsafeBufferPointer(rebasing: buf[pos..<pos + n]))
                pos += n
                return (value, startOffset, startLine)
            }
        }
        spill.removeAll(keepingCapacity: spill.capacity <= 4 << 20)
        let first = buf[pos]
        let scalar = first != UInt8(ascii: "{") && first != UInt8(ascii: "[") && first != UInt8(ascii: "\"")
        var depth = 0
        var inString = false
        var escaped = false
        var p = pos
        var segment = pos
        var ln = line
        var done = false
        while true {
            let e = end
            let b0 = buf.baseAddress!
            scan: while p < e {
                let b = b0[p]
                if inString {
                    if escaped { escaped = false } else if b == 0x5C { escaped = true } else if b == 0x22 {
                        inString = false
                        if depth == 0 { p += 1; done = true; break scan }
                    } else if b == 0x0A { ln += 1 }
                    p += 1
                    continue
                }
                if scalar {
                    switch b {
                    case 0x2C, 0x5D, 0x7D, 0x20, 0x09, 0x0A, 0x0D: done = true; break scan
                    default: p += 1
                    }
                    continue
                }
                switch b {
                case 0x22: inString = true
                case 0x7B, 0x5B: depth += 1
                case 0x7D, 0x5D:
                    depth -= 1
                    if depth == 0 { p += 1; done = true; break scan }
                case 0x0A: ln += 1
                default: break
                }
                p += 1
            }
            if spill.count + (p - segment) > limit {
                pos = p
                line = ln
                // A broken quote makes the rest of the file look like one string: the parser names where, if it can.
                var prefix = spill
                prefix.append(contentsOf: UnsafeBufferPointer(rebasing: buf[segment..<p]))
                if case .failure(let e) = prefix.withUnsafeBufferPointer({ parse($0) }), e.offset < prefix.count {
                    throw located(e, in: prefix, startOffset: startOffset, startLine: startLine, record: record, what: what)
                }
                throw JSONStreamError(message: "the \(what) is larger than \(limit) bytes", offset: startOffset, line: startLine, record: record)
            }
            if done { break }
            spill.append(contentsOf: UnsafeBufferPointer(rebasing: buf[segment..<p]))
            pos = p
            line = ln
            guard try refill() else {
                throw JSONStreamError(message: "the file ends inside the \(what)", offset: startOffset, line: startLine, record: record)
            }
            p = 0
            segment = 0
        }
        pos = p
        line = ln
        let parsed: Result<JSON, JSONParseError>
        if spill.isEmpty {
            parsed = parse(UnsafeBufferPointer(rebasing: buf[segment..<p]))
        } else {
            spill.append(contentsOf: UnsafeBufferPointer(rebasing: buf[segment..<p]))
            parsed = spill.withUnsafeBufferPointer { parse($0) }
        }
        switch parsed {
        case .success(let v): return (v, startOffset, startLine)
        case .failure(let e):
            let bytes = spill.isEmpty ? Array(UnsafeBufferPointer(rebasing: buf[segment..<p])) : spill
            throw located(e, in: bytes, startOffset: startOffset, startLine: startLine, record: record, what: what)
        }
    }

    /// A parser error inside a value, placed in the file: the value's start plus the parser's offset, and the lines
    /// up to there.
    private func located(_ e: JSONParseError, in bytes: [UInt8], startOffset: Int, startLine: Int, record: Int?, what: String) -> JSONStreamError {
        let upTo = min(max(0, e.offset), bytes.count)
        let lines = bytes[..<upTo].reduce(0) { $0 + ($1 == 0x0A ? 1 : 0) }
        return JSONStreamError(message: "invalid JSON in the \(what): \(e.message)", offset: startOffset + e.offset,
                               line: startLine + lines, record: record)
    }

    private func parse(_ bytes: UnsafeBufferPointer<UInt8>) -> Result<JSON, JSONParseError> {
        do { return .success(try JSONParser.parse(bytes, maxDepth: maxDepth, names: names)) } catch { return .failure(error) }
    }

    /// How many line feeds `bytes` holds.
    private static func newlines(in bytes: UnsafeBufferPointer<UInt8>) -> Int {
        guard var p = UnsafeRawPointer(bytes.baseAddress) else { return 0 }
        var left = bytes.count
        var n = 0
        while left > 0, let hit = memchr(p, 0x0A, left) {
            n += 1
            let next = UnsafeRawPointer(hit) + 1
            left -= next - p
            p = next
        }
        return n
    }
}
