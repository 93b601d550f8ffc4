#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import Synchronization

/// Log levels, trace through critical, as swift-log.
public enum LogLevel: Int, Sendable, Comparable, CaseIterable {
    case trace, debug, info, notice, warning, error, critical

    public init?(name: String) {
        switch name.lowercased() {
        case "trace": self = .trace
        case "debug": self = .debug
        case "info": self = .info
        case "notice": self = .notice
        case "warning", "warn": self = .warning
        case "error": self = .error
        case "critical": self = .critical
        default: return nil
        }
    }

    public var name: String {
        switch self {
        case .trace: "trace"
        case .debug: "debug"
        case .info: "info"
        case .notice: "notice"
        case .warning: "warning"
        case .error: "error"
        case .critical: "critical"
        }
    }

    public static func < (a: LogLevel, b: LogLevel) -> Bool { a.rawValue < b.rawValue }
}

public enum LogFormat: String, Sendable { case text, json }

/// Where log lines go. The default writes whole lines to stderr; tests collect them.
public protocol LogSink: Sendable {
    func write(_ line: String)
}

/// Writes whole lines to stderr synchronously (start-up messages, the CLI).
public struct StandardErrorSink: LogSink {
    public init() {}
    public func write(_ line: String) { StandardErrorSink.writeLine(line, fd: 2) }

    static func writeLine(_ line: String, fd: Int32) {
        var bytes = Array(line.utf8)
        bytes.append(0x0A)
        bytes.withUnsafeBytes { buf in
            var off = 0
            while off < buf.count {
                let n = Glibc.write(fd, buf.baseAddress! + off, buf.count - off)
                if n <= 0 { if errno == EINTR { continue } else { return } }
                off += n
            }
        }
    }
}

/// Hands lines to a writer thread through a bounded queue, so a slow or stuck stderr (a full pipe nobody reads)
/// never blocks an event loop. When the queue is full, lines are dropped and counted; the count is reported when
/// writing resumes.
public final class AsyncStandardErrorSink: LogSink, @unchecked Sendable {
    private struct State {
        var lines: [String] = []
        var dropped = 0
        var closed = false
    }
    private let state = Locked(State())
    private let ready = DispatchSemaphore(value: 0)
    private let done = DispatchSemaphore(value: 0)
    private let capacity: Int

    public init(capacity: Int = 10_000) {
        self.capacity = capacity
        NativeThread.start { [self] in self.run() }.detach()
    }

    public func write(_ line: String) {
        // Only the line that makes the queue non-empty wakes the writer: at thousands of lines a second the others
        // join the batch it is about to take, without a semaphore round trip (and a context switch) each.
        let wake = state.withLock { s -> Bool in
            guard !s.closed else { return false }
            if s.lines.count >= capacity { s.dropped += 1; return false }
            s.lines.append(line)
            return s.lines.count == 1
        }
        if wake { ready.signal() }
    }

    /// Writes what is queued and stops the writer thread (at shutdown).
    public func flush() {
        state.withLock { $0.closed = true }
        ready.signal()
        done.wait()
    }

    private func run() {
        while true {
            ready.wait()
            let (batch, dropped, closed) = state.withLock { s -> ([String], Int, Bool) in
                let b = s.lines, d = s.dropped
                s.lines = []
                s.dropped = 0
                return (b, d, s.closed)
            }
            if dropped > 0 { StandardErrorSink.writeLine("(\(dropped) log lines dropped: stderr was not being read)", fd: 2) }
            // One write per batch (up to ~64 KiB), not one per line.
            var chunk = ""
            for line in batch {
                if !chunk.isEmpty && chunk.utf8.count + line.utf8.count >= 65_536 {
                    StandardErrorSink.writeLine(chunk, fd: 2)
                    chunk = ""
                }
                if !chunk.isEmpty { chunk += "\n" }
                chunk += line
            }
            if !chunk.isEmpty { StandardErrorSink.writeLine(chunk, fd: 2) }
            if closed { done.signal(); return }
        }
    }
}

public final class MemoryLogSink: LogSink {
    private let lines = Locked<[String]>([])
    public init() {}
    public func write(_ line: String) { lines.withLock { $0.append(line) } }
    public var all: [String] { lines.withLock { $0 } }
}

/// A small structured logger: a fixed message plus key=value metadata; messages are built only when enabled.
public struct Logger: Sendable {
    public let label: String
    public var level: LogLevel
    public var format: LogFormat
    public var sink: any LogSink

    public init(label: String, level: LogLevel = .info, format: LogFormat = .text, sink: any LogSink = StandardErrorSink()) {
        self.label = label
        self.level = level
        self.format = format
        self.sink = sink
    }

    public func log(_ l: LogLevel, _ message: @autoclosure () -> String, _ metadata: @autoclosure () -> [(String, String)] = []) {
        guard l >= level else { return }
        let ts = Timestamp.rfc3339(millis: Timestamp.systemMillis())
        // Client text may be arbitrarily long (a refused path, a request target): each part is cut to a bound.
        let msg = LogEscaping.truncate(message(), to: LogEscaping.maxMessageLength)
        let meta = metadata().map { ($0.0, LogEscaping.truncate($0.1, to: LogEscaping.maxValueLength)) }
        // Messages and values may carry client text: no control character reaches the sink raw, so a value can
        // never end a line, forge another one or send terminal escapes.
        switch format {
        case .text:
            var line = "\(ts) \(l.name) \(label): \(LogEscaping.escape(msg))"
            for (k, v) in meta { line += " \(LogEscaping.escape(k))=\(LogEscaping.escape(v))" }
            sink.write(line)
        case .json:
            var o = JSONObject()
            o["time"] = .string(ts)
            o["level"] = .string(l.name)
            o["logger"] = .string(label)
            o["message"] = .string(msg)
            for (k, v) in meta { o[k] = .string(v) }
            sink.write(LogEscaping.escapeJSONLine(JSON.object(o).serializedString))
        }
    }

    public func trace(_ m: @autoclosure () -> String, _ md: @autoclosure () -> [(String, String)] = []) { log(.trace, m(), md()) }
    public func debug(_ m: @autoclosure () -> String, _ md: @autoclosure () -> [(String, String)] = []) { log(.debug, m(), md()) }
    public func info(_ m: @autoclosure () -> String, _ md: @autoclosure () -> [(String, String)] = []) { log(.info, m(), md()) }
    public func notice(_ m: @autoclosure () -> String, _ md: @autoclosure () -> [(String, String)] = []) { log(.notice, m(), md()) }
    public func warning(_ m: @autoclosure () -> String, _ md: @autoclosure () -> [(String, String)] = []) { log(.warning, m(), md()) }
    public func error(_ m: @autoclosure () -> String, _ md: @autoclosure () -> [(String, String)] = []) { log(.error, m(), md()) }
}

/// Escaping for log lines and terminal output. Unsafe characters are C0 (U+0000–U+001F: NUL, CR, LF, ESC…), DEL,
/// C1 (U+0080–U+009F, e.g. the 8-bit CSI), the Unicode line/paragraph separators U+2028/U+2029, and the bidi
/// controls that reorder how a line reads ("Trojan Source"): embeddings and overrides U+202A–U+202E, isolates
/// U+2066–U+2069, and the marks U+200E, U+200F, U+061C.
public enum LogEscaping {
    /// A log message is cut after this many Unicode scalars (then `…`).
    public static let maxMessageLength = 1000
    /// A log metadata value (often client text) is cut after this many Unicode scalars (then `…`).
    public static let maxValueLength = 200

    @inline(__always)
    public static func isControl(_ v: UInt32) -> Bool {
        v < 0x20 || (v >= 0x7F && v <= 0x9F) || v == 0x2028 || v == 0x2029 || isBidiControl(v)
    }

    /// The bidi embeddings, overrides and isolates (U+202A–U+202E, U+2066–U+2069) and marks (U+200E, U+200F, U+061C).
    @inline(__always)
    public static func isBidiControl(_ v: UInt32) -> Bool {
        (v >= 0x202A && v <= 0x202E) || (v >= 0x2066 && v <= 0x2069) || v == 0x200E || v == 0x200F || v == 0x061C
    }

    /// `s` cut after `limit` Unicode scalars, with `…` appended when cut (scalars, not characters: one character
    /// may hold any number of combining marks).
    public static func truncate(_ s: String, to limit: Int) -> String {
        if s.utf8.count <= limit { return s }  // never more scalars than UTF-8 bytes
        var n = 0
        var end = s.unicodeScalars.startIndex
        while end != s.unicodeScalars.endIndex {
            if n == limit { return String(s.unicodeScalars[..<end]) + "…" }
            n += 1
            end = s.unicodeScalars.index(after: end)
        }
        return s
    }

    /// Text-format escaping: LF, CR and tab as `\n`, `\r`, `\t`, every other control character as `\u{HEX}`.
    /// Text without control characters is returned unchanged.
    public static func escape(_ s: String) -> String {
        guard s.unicodeScalars.contains(where: { isControl($0.value) }) else { return s }
        var out = ""
        out.reserveCapacity(s.utf8.count + 8)
        for u in s.unicodeScalars {
            guard isControl(u.value) else { out.unicodeScalars.append(u); continue }
            switch u.value {
            case 0x0A: out += "\\n"
            case 0x0D: out += "\\r"
            case 0x09: out += "\\t"
            default: out += "\\u{" + String(u.value, radix: 16, uppercase: true) + "}"
            }
        }
        return out
    }

    /// Serialized JSON (pretty-printed or not) with DEL, C1, U+2028/2029 and the bidi controls written as `\uXXXX`.
    /// The JSON writer already escapes C0 inside strings, so C0 here is structural whitespace and stays; the others
    /// only occur inside strings, where `\uXXXX` means the same text. For JSON printed to a terminal.
    public static func escapeJSONText(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: { $0.value >= 0x20 && isControl($0.value) }) else { return text }
        var out = ""
        out.reserveCapacity(text.utf8.count + 8)
        for u in text.unicodeScalars {
            if u.value >= 0x20 && isControl(u.value) {
                let hex = String(u.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            } else {
                out.unicodeScalars.append(u)
            }
        }
        return out
    }

    /// A serialized JSON line with DEL, C1, U+2028/2029 and the bidi controls also written as `\uXXXX` (the JSON
    /// writer already escapes C0). Such characters only occur inside JSON strings, where `\uXXXX` means the same text.
    public static func escapeJSONLine(_ line: String) -> String {
        guard line.unicodeScalars.contains(where: { isControl($0.value) }) else { return line }
        var out = ""
        for u in line.unicodeScalars {
            if isControl(u.value) {
                let hex = String(u.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            } else {
                out.unicodeScalars.append(u)
            }
        }
        return out
    }
}
