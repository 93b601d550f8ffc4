/// Header fields in arrival order with case-insensitive lookup.
public struct HTTPHeaders: Sendable, Sequence {
    public private(set) var entries: [(name: String, value: String)]

    public init(_ entries: [(name: String, value: String)] = []) { self.entries = entries }

    public subscript(name: String) -> String? {
        for e in entries where e.name.utf8.count == name.utf8.count && e.name.lowercased() == name.lowercased() { return e.value }
        return nil
    }

    public func values(_ name: String) -> [String] {
        let n = name.lowercased()
        return entries.filter { $0.name.lowercased() == n }.map(\.value)
    }

    public mutating func add(_ name: String, _ value: String) { entries.append((name, value)) }

    public func makeIterator() -> IndexingIterator<[(name: String, value: String)]> { entries.makeIterator() }
}

/// One parsed request. The path keeps its raw form (no percent-decoding, empty segments preserved).
public struct HTTPRequest: Sendable {
    public var method: String
    public var target: String
    public var versionMinor: Int
    public var headers: HTTPHeaders
    public var body: [UInt8]
    public var remoteAddress: String
    public var keepAlive: Bool

    public init(method: String, target: String, versionMinor: Int = 1, headers: HTTPHeaders = HTTPHeaders(), body: [UInt8] = [],
                remoteAddress: String = "127.0.0.1", keepAlive: Bool = true) {
        self.method = method
        self.target = target
        self.versionMinor = versionMinor
        self.headers = headers
        self.body = body
        self.remoteAddress = remoteAddress
        self.keepAlive = keepAlive
    }

    /// The path part of the target (before `?`).
    public var path: Substring {
        if let q = target.firstIndex(of: "?") { return target[target.startIndex..<q] }
        return target[...]
    }

    /// The raw query string (after `?`), empty if none.
    public var query: Substring {
        if let q = target.firstIndex(of: "?") { return target[target.index(after: q)...] }
        return ""
    }
}

public struct HTTPResponse: Sendable {
    public var status: Int
    public var headers: [(String, String)]
    public var body: [UInt8]
    /// Close the connection after this response (set for HTTP-level errors).
    public var closeConnection: Bool

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

    /// Appends the wire form. `keepAlive` is what the connection will do; `headOnly` omits the body (HEAD).
    public func serialize(into out: inout [UInt8], keepAlive: Bool, versionMinor: Int, headOnly: Bool) {
        out.append(contentsOf: "HTTP/1.1 \(status) \(HTTPResponse.reason(status))\r\n".utf8)
        for (n, v) in headers {
            out.append(contentsOf: n.utf8)
            out.append(contentsOf: ": ".utf8)
            out.append(contentsOf: v.utf8)
            out.append(contentsOf: "\r\n".utf8)
        }
        if status != 204 && status != 304 {
            out.append(contentsOf: "Content-Length: \(body.count)\r\n".utf8)
        }
        if !keepAlive {
            out.append(contentsOf: "Connection: close\r\n".utf8)
        } else if versionMinor == 0 {
            out.append(contentsOf: "Connection: keep-alive\r\n".utf8)
        }
        out.append(contentsOf: "\r\n".utf8)
        if !headOnly && status != 204 && status != 304 { out.append(contentsOf: body) }
    }
}
