#if canImport(Glibc)
import Glibc
#endif
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

public struct StandardErrorSink: LogSink {
    public init() {}
    public func write(_ line: String) {
        var bytes = Array(line.utf8)
        bytes.append(0x0A)
        bytes.withUnsafeBytes { buf in
            var off = 0
            while off < buf.count {
                let n = Glibc.write(2, buf.baseAddress! + off, buf.count - off)
                if n <= 0 { if errno == EINTR { continue } else { return } }
                off += n
            }
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

    public func isEnabled(_ l: LogLevel) -> Bool { l >= level }

    public func log(_ l: LogLevel, _ message: @autoclosure () -> String, _ metadata: @autoclosure () -> [(String, String)] = []) {
        guard l >= level else { return }
        let ts = Timestamp.rfc3339(millis: Timestamp.systemMillis())
        let msg = message()
        let meta = metadata()
        switch format {
        case .text:
            var line = "\(ts) \(l.name) \(label): \(msg)"
            for (k, v) in meta { line += " \(k)=\(v)" }
            sink.write(line)
        case .json:
            var o = JSONObject()
            o["time"] = .string(ts)
            o["level"] = .string(l.name)
            o["logger"] = .string(label)
            o["message"] = .string(msg)
            for (k, v) in meta { o[k] = .string(v) }
            sink.write(JSON.object(o).serializedString)
        }
    }

    public func trace(_ m: @autoclosure () -> String, _ md: @autoclosure () -> [(String, String)] = []) { log(.trace, m(), md()) }
    public func debug(_ m: @autoclosure () -> String, _ md: @autoclosure () -> [(String, String)] = []) { log(.debug, m(), md()) }
    public func info(_ m: @autoclosure () -> String, _ md: @autoclosure () -> [(String, String)] = []) { log(.info, m(), md()) }
    public func notice(_ m: @autoclosure () -> String, _ md: @autoclosure () -> [(String, String)] = []) { log(.notice, m(), md()) }
    public func warning(_ m: @autoclosure () -> String, _ md: @autoclosure () -> [(String, String)] = []) { log(.warning, m(), md()) }
    public func error(_ m: @autoclosure () -> String, _ md: @autoclosure () -> [(String, String)] = []) { log(.error, m(), md()) }
}
