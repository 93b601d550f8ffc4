/// Header fields in arrival order with case-insensitive lookup.
public struct HTTPHeaders: Sendable, Sequence {
    public private(set) var entries: [(name: String, value: String)]

    public init(_ entries: [(name: String, value: String)] = []) { self.entries = entries }

    public subscript(name: String) -> String? {
        for i in entries.indices where HTTPHeaders.equalsIgnoringASCIICase(entries[i].name, name) { return entries[i].value }
        return nil
    }

    public func values(_ name: String) -> [String] {
        entries.filter { HTTPHeaders.equalsIgnoringASCIICase($0.name, name) }.map(\.value)
    }

    /// ASCII case-insensitive comparison without allocating (header names are ASCII tokens).
    /// Reads both strings' bytes in place (no copy of either: this runs for every header of every lookup).
    public static func equalsIgnoringASCIICase(_ a: String, _ b: String) -> Bool {
        let x = a.utf8, y = b.utf8
        guard x.count == y.count else { return false }
        // Native strings (every parsed header name, every literal): compare the contiguous bytes, no index walking.
        if let r = x.withContiguousStorageIfAvailable({ p in
            y.withContiguousStorageIfAvailable { q -> Bool in
                for k in 0..<p.count {
                    let u = p[k], v = q[k]
                    if u != v {
                        let lu = u >= 0x41 && u <= 0x5A ? u | 0x20 : u
                        let lv = v >= 0x41 && v <= 0x5A ? v | 0x20 : v
                        if lu != lv { return false }
                    }
                }
                return true
            }
        }), let r { return r }
        var i = x.startIndex, j = y.startIndex
        while i != x.endIndex {
            let p = x[i], q = y[j]
            if p != q {
                let lp = p >= 0x41 && p <= 0x5A ? p | 0x20 : p
                let lq = q >= 0x41 && q <= 0x5A ? q | 0x20 : q
                if lp != lq { return false }
            }
            x.formIndex(after: &i)
            y.formIndex(after: &j)
        }
        return true
    }

    public mutating func add(_ name: String, _ value: String) { entries.append((name, value)) }

    public mutating func reserveCapacity(_ n: Int) { entries.reserveCapacity(n) }

    public func makeIterator() -> IndexingIterator<[(name: String, value: String)]> { entries.makeIterator() }
}

/// One parsed request. The path keeps its raw form (no percent-decoding, empty segments preserved).
public struct HTTPRequest: Sendable {
    public var method: String
    public var target: String {
        didSet { (path, query) = HTTPRequest.split(target) }
    }
    /// The path part of the target (before `?`), raw.
    public private(set) var path: String
    /// The raw query string (after `?`), empty if none.
    public private(set) var query: String
    public var versionMinor: Int
    public var headers: HTTPHeaders
    public var body: [UInt8]
    public var remoteAddress: String
    public var keepAlive: Bool

    public init(method: String, target: String, versionMinor: Int = 1, headers: HTTPHeaders = HTTPHeaders(), body: [UInt8] = [],
                remoteAddress: String = "127.0.0.1", keepAlive: Bool = true) {
        self.method = method
        self.target = target
        (path, query) = HTTPRequest.split(target)
        self.versionMinor = versionMinor
        self.headers = headers
        self.body = body
        self.remoteAddress = remoteAddress
        self.keepAlive = keepAlive
    }

    /// Splits a request target at its first `?`, working on UTF-8 bytes.
    static func split(_ target: String) -> (String, String) {
        var t = target
        return t.withUTF8 { b in
            guard let q = b.firstIndex(of: UInt8(ascii: "?")) else { return (target, "") }
            return (String(decoding: UnsafeBufferPointer(rebasing: b[0..<q]), as: UTF8.self),
                    String(decoding: UnsafeBufferPointer(rebasing: b[(q + 1)...]), as: UTF8.self))
        }
    }
}

public struct HTTPResponse: Sendable {
    public var status: Int
    public var headers: [(String, String)]
    public var body: [UInt8]
    /// Close the connection after this response (set for HTTP-level errors).
    public var closeConnection: Bool
    /// A body produced over time instead of `body` (see `HTTPStreamSource`): sent without `Content-Length`, then the
    /// connection closes.
    public var stream: HTTPStreamBody? = nil

    public init(status: Int, headers: [(String, String)] = [], body: [UInt8] = [], closeConnection: Bool = false) {
        self.status = status
        self.headers = headers
        self.body = body
        self.closeConnection = closeConnection
    }

    public static func reason(_ status: Int) -> String {
        switch status {
        case 200: "OK"
        case 201: "Created"
        case 204: "No Content"
        case 302: "Found"
        case 303: "See Other"
        case 304: "Not Modified"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 408: "Request Timeout"
        case 409: "Conflict"
        case 411: "Length Required"
        case 413: "Content Too Large"
        case 429: "Too Many Requests"
        case 431: "Request Header Fields Too Large"
        case 500: "Internal Server Error"
        case 501: "Not Implemented"
        case 503: "Service Unavailable"
        case 505: "HTTP Version Not Supported"
        default: "Status \(status)"
        }
    }

    /// Status lines for the codes we answer, built once.
    private static let statusLines: [Int: [UInt8]] = {
        var m: [Int: [UInt8]] = [:]
        for code in [200, 201, 204, 302, 303, 304, 400, 401, 403, 404, 405, 408, 409, 411, 413, 429, 431, 500, 501, 503, 505] {
            m[code] = Array("HTTP/1.1 \(code) \(reason(code))\r\n".utf8)
        }
        return m
    }()

    @inline(__always) private static func append(_ s: String, to out: inout [UInt8]) {
        var s = s
        s.withUTF8 { out.append(contentsOf: $0) }
    }

    private static func appendDecimal(_ n: Int, to out: inout [UInt8]) {
        if n == 0 { out.append(0x30); return }
        var digits: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) =
            (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var v = n, i = 0
        withUnsafeMutableBytes(of: &digits) { d in
            while v > 0 { d[i] = UInt8(0x30 + v % 10); v /= 10; i += 1 }
            while i > 0 { i -= 1; out.append(d[i]) }
        }
    }

    /// Appends the wire form. `keepAlive` is what the connection will do; `headOnly` omits the body (HEAD).
    public func serialize(into out: inout [UInt8], keepAlive: Bool, versionMinor: Int, headOnly: Bool) {
        if let line = HTTPResponse.statusLines[status] {
            out.append(contentsOf: line)
        } else {
            HTTPResponse.append("HTTP/1.1 \(status) \(HTTPResponse.reason(status))\r\n", to: &out)
        }
        for (n, v) in headers {
            HTTPResponse.append(n, to: &out)
            out.append(0x3A); out.append(0x20)
            HTTPResponse.append(v, to: &out)
            out.append(0x0D); out.append(0x0A)
        }
        if status != 204 && status != 304 && stream == nil {
            HTTPResponse.append("Content-Length: ", to: &out)
            HTTPResponse.appendDecimal(body.count, to: &out)
            out.append(0x0D); out.append(0x0A)
        }
        if !keepAlive {
            HTTPResponse.append("Connection: close\r\n", to: &out)
        } else if versionMinor == 0 {
            HTTPResponse.append("Connection: keep-alive\r\n", to: &out)
        }
        out.append(0x0D); out.append(0x0A)
        if !headOnly && status != 204 && status != 304 { out.append(contentsOf: body) }
    }
}

/// What a stream's source had when the loop pulled.
public enum HTTPStreamPull: Sendable, Equatable {
    /// It may have more now: the loop pulls again once the client has read what is pending.
    case more
    /// Nothing now: the source calls its `wake` when it has something.
    case waiting
    /// The body is complete: the connection closes once it is sent.
    case finished
}

/// A response body produced over time (Server-Sent Events, JSON lines), sent close-delimited (`Connection: close`, no
/// `Content-Length`). The connection's event loop pulls it only while the client reads (at most `streamLowWater`
/// bytes wait in the connection), so a client that stops reading stops the pulling: the source's own bound then
/// applies, never the server's memory.
public protocol HTTPStreamSource: AnyObject, Sendable {
    /// Called once on the event loop before the first pull; `wake` (any thread, cheap, coalesced) asks for a pull.
    func attach(wake: @escaping @Sendable () -> Void)
    /// Appends up to about `limit` bytes to `out`. `out` is the connection's pending output (it may hold bytes
    /// already: append after them; `limit` counts only what this pull adds). Runs on the event loop: never block.
    func pull(into out: inout [UInt8], limit: Int) -> HTTPStreamPull
    /// The stream is over (finished, client gone, server stopping, or never started): release everything. Called
    /// exactly once per started stream, on the event loop; may also be called for a stream that never started.
    func detach()
}

/// A streamed body: its source and the keep-alive the connection writes when nothing was sent for a while.
public struct HTTPStreamBody: Sendable {
    public let source: any HTTPStreamSource
    /// Written when the stream was quiet for `keepAliveSeconds` (e.g. an SSE comment); empty: none.
    public var keepAlive: [UInt8]
    public var keepAliveSeconds: Double
    public init(source: any HTTPStreamSource, keepAlive: [UInt8] = [], keepAliveSeconds: Double = 15) {
        self.source = source
        self.keepAlive = keepAlive
        self.keepAliveSeconds = keepAliveSeconds
    }
}

