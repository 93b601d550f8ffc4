/// Reads CSV (RFC 4180: `,` between fields, `"…"` quoting with `""` for a quote, CRLF or LF) one row at a time, as
/// `firebase auth:export --format=csv` writes it; blank lines are skipped. Memory: one buffer plus one row (at most
/// `maxRowBytes`). Errors are `JSONStreamError`s (the row as `record`, from 0).
public final class CSVRowReader {
    public struct Row {
        public let index: Int
        public let offset: Int
        public let line: Int
        public let fields: [String]
    }

    public let maxRowBytes: Int
    public let maxFields: Int
    private let source: any ByteSource
    private let buf: UnsafeMutableBufferPointer<UInt8>
    private var pos = 0
    private var end = 0
    private var base = 0
    private var line = 1
    private var atEnd = false
    private var count = 0

    public init(_ source: any ByteSource, bufferSize: Int = 1 << 20, maxRowBytes: Int = 1 << 20, maxFields: Int = 64) {
        self.source = source
        self.maxRowBytes = maxRowBytes
        self.maxFields = maxFields
        buf = .allocate(capacity: max(1, bufferSize))
    }

    deinit { buf.deallocate() }

    private func byte() throws(JSONStreamError) -> UInt8? {
        guard try peekAfterRefill() else { return nil }
        let b = buf[pos]
        pos += 1
        return b
    }

    /// The next non-blank row, or nil at the end.
    public func next() throws(JSONStreamError) -> Row? {
        while true {
            let startOffset = base + pos, startLine = line
            var fields: [String] = []
            var field: [UInt8] = []
            var size = 0
            var quoted = false       // inside quotes
            var wasQuoted = false    // this field began with a quote
            var sawAny = false
            func tooLarge() -> JSONStreamError {
                JSONStreamError(message: "the row is larger than \(maxRowBytes) bytes or has more than \(maxFields) fields",
                                offset: startOffset, line: startLine, record: count)
            }
            func endField() throws(JSONStreamError) {
                guard fields.count < maxFields else { throw tooLarge() }
                fields.append(String(decoding: field, as: UTF8.self))
                field.removeAll(keepingCapacity: true)
                wasQuoted = false
            }
            rowLoop: while true {
                guard let b = try byte() else {
                    if quoted {
                        throw JSONStreamError(message: "the file ends inside a quoted field", offset: startOffset, line: startLine, record: count)
                    }
                    if !sawAny { return nil }
                    try endField()
                    break rowLoop
                }
                sawAny = true
                size += 1
                if size > maxRowBytes { throw tooLarge() }
                if quoted {
                    if b == 0x22 {
                        // `""` is a quote; a lone quote ends the quoting.
                        let more = try peekAfterRefill()
                        if more && buf[pos] == 0x22 { pos += 1; size += 1; field.append(0x22); continue }
                        quoted = false
                        continue
                    }
                    if b == 0x0A { line += 1 }
                    field.append(b)
                    continue
                }
                switch b {
                case 0x22 where field.isEmpty && !wasQuoted:
                    quoted = true
                    wasQuoted = true
                case 0x2C:
                    try endField()
                case 0x0A:
                    line += 1
                    if field.last == 0x0D { field.removeLast() }
                    try endField()
                    break rowLoop
                default:
                    field.append(b)
                }
            }
            // A blank line is no row.
            if fields.count == 1 && fields[0].isEmpty { continue }
            let index = count
            count += 1
            return Row(index: index, offset: startOffset, line: startLine, fields: fields)
        }
    }

    /// Makes the next byte available in `buf[pos]` without consuming it; false at the end.
    private func peekAfterRefill() throws(JSONStreamError) -> Bool {
        if pos < end { return true }
        if atEnd { return false }
        base += end
        pos = 0
        end = 0
        let n: Int
        do { n = try source.read(into: UnsafeMutableRawBufferPointer(buf)) } catch {
            throw JSONStreamError(message: "cannot read: \(error)", offset: base, line: line, record: nil)
        }
        if n == 0 { atEnd = true; return false }
        end = n
        return true
    }
}
