import CSQLite
import Synchronization

/// A failed SQLite call, with SQLite's own message.
public struct SQLiteError: Error, CustomStringConvertible, Sendable {
    public let code: Int32
    public let message: String
    public var description: String { "SQLite error \(code): \(message)" }
}

/// One SQLite connection, used by one thread at a time (the journal serializes access with a mutex).
final class SQLiteConnection: @unchecked Sendable {
    let db: OpaquePointer
    private var statements: [String: OpaquePointer] = [:]

    init(path: String) throws {
        var handle: OpaquePointer? = nil
        let rc = sqlite3_open_v2(path, &handle, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nil)
        guard rc == SQLITE_OK, let handle else {
            let msg = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open"
            if let handle { sqlite3_close_v2(handle) }
            throw SQLiteError(code: rc, message: "\(path): \(msg)")
        }
        db = handle
        sqlite3_busy_timeout(db, 5000)
    }

    deinit {
        for (_, s) in statements { sqlite3_finalize(s) }
        sqlite3_close_v2(db)
    }

    func error(_ rc: Int32) -> SQLiteError { SQLiteError(code: rc, message: String(cString: sqlite3_errmsg(db))) }

    func exec(_ sql: String) throws {
        var err: UnsafeMutablePointer<CChar>? = nil
        let rc = sqlite3_exec(db, sql, nil, nil, &err)
        if rc != SQLITE_OK {
            let msg = err.map { String(cString: $0) } ?? ""
            sqlite3_free(err)
            throw SQLiteError(code: rc, message: msg)
        }
    }

    /// A cached prepared statement, reset and with bindings cleared.
    func statement(_ sql: String) throws -> OpaquePointer {
        if let s = statements[sql] {
            sqlite3_reset(s)
            sqlite3_clear_bindings(s)
            return s
        }
        var s: OpaquePointer? = nil
        let rc = sqlite3_prepare_v2(db, sql, -1, &s, nil)
        guard rc == SQLITE_OK, let s else { throw error(rc) }
        statements[sql] = s
        return s
    }

    /// Runs a statement with text/integer bindings to completion.
    func run(_ sql: String, _ values: [SQLValue]) throws {
        let s = try statement(sql)
        try bind(s, values)
        let rc = sqlite3_step(s)
        guard rc == SQLITE_DONE || rc == SQLITE_ROW else { throw error(rc) }
        sqlite3_reset(s)
    }

    /// Rows of a query, each as its column values.
    func query(_ sql: String, _ values: [SQLValue] = []) throws -> [[SQLValue]] {
        let s = try statement(sql)
        try bind(s, values)
        var rows: [[SQLValue]] = []
        while true {
            let rc = sqlite3_step(s)
            if rc == SQLITE_DONE { break }
            guard rc == SQLITE_ROW else { throw error(rc) }
            var row: [SQLValue] = []
            for i in 0..<sqlite3_column_count(s) {
                switch sqlite3_column_type(s, i) {
                case SQLITE_INTEGER: row.append(.int(sqlite3_column_int64(s, i)))
                case SQLITE_NULL: row.append(.null)
                default:
                    if let p = sqlite3_column_text(s, i) {
                        // The whole value (sqlite3_column_bytes), not up to its first NUL.
                        let n = Int(sqlite3_column_bytes(s, i))
                        row.append(.text(String(decoding: UnsafeBufferPointer(start: p, count: n), as: UTF8.self)))
                    } else {
                        row.append(.null)
                    }
                }
            }
            rows.append(row)
        }
        sqlite3_reset(s)
        return rows
    }

    /// One row of `forEachRow`, its columns read in place (valid until the next row).
    struct Row {
        let statement: OpaquePointer

        /// A column's bytes as stored (text or blob; empty for NULL), not copied.
        func bytes(_ column: Int32) -> UnsafeBufferPointer<UInt8> {
            // sqlite3_column_text first, then _bytes (SQLite's order for the length of the text form).
            guard let p = sqlite3_column_text(statement, column) else { return UnsafeBufferPointer(start: nil, count: 0) }
            return UnsafeBufferPointer(start: p, count: Int(sqlite3_column_bytes(statement, column)))
        }

        func isNull(_ column: Int32) -> Bool { sqlite3_column_type(statement, column) == SQLITE_NULL }
    }

    /// Steps a query, handing each row to `body` without collecting them (a table of a million rows read once).
    func forEachRow(_ sql: String, _ values: [SQLValue] = [], _ body: (Row) throws -> Void) throws {
        let s = try statement(sql)
        try bind(s, values)
        defer { sqlite3_reset(s) }
        while true {
            let rc = sqlite3_step(s)
            if rc == SQLITE_DONE { break }
            guard rc == SQLITE_ROW else { throw error(rc) }
            try body(Row(statement: s))
        }
    }

    private func bind(_ s: OpaquePointer, _ values: [SQLValue]) throws {
        for (i, v) in values.enumerated() {
            let idx = Int32(i + 1)
            let rc: Int32
            switch v {
            case .null: rc = sqlite3_bind_null(s, idx)
            case .int(let n): rc = sqlite3_bind_int64(s, idx, n)
            case .text(let t):
                // With its byte length, never -1: a NUL inside the text must not end it (it once merged the keys
                // `victim` and `victim\u{0}x`). SQLite copies the bytes (SQLITE_TRANSIENT).
                var text = t
                rc = text.withUTF8 { buf -> Int32 in
                    guard let base = buf.baseAddress else { return sqlite3_bind_text(s, idx, "", 0, csqlite_transient()) }
                    return base.withMemoryRebound(to: CChar.self, capacity: buf.count) {
                        sqlite3_bind_text(s, idx, $0, Int32(buf.count), csqlite_transient())
                    }
                }
            }
            guard rc == SQLITE_OK else { throw error(rc) }
        }
    }
}

enum SQLValue: Sendable, Equatable {
    case null
    case int(Int64)
    case text(String)

    var text: String? { if case .text(let t) = self { return t } else { return nil } }
    var int: Int64? { if case .int(let n) = self { return n } else { return nil } }
}
