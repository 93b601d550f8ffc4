import CSystem
#if canImport(Glibc)
import Glibc
#endif

/// A small blocking HTTP/1.1 client for the CLI and tools: one request per connection (`Connection: close`).
public enum HTTPClient {
    public struct Response: Sendable {
        public let status: Int
        public let headers: HTTPHeaders
        public let body: [UInt8]
    }

    public struct ClientError: Error, CustomStringConvertible, Sendable {
        public let description: String
        /// The deadline passed (connect, send or the whole response).
        public var timedOut = false
        public init(description: String, timedOut: Bool = false) {
            self.description = description
            self.timedOut = timedOut
        }
    }

    /// Seconds on the monotonic clock.
    public static func monotonicSeconds() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    static func setTimeouts(_ fd: Int32, _ seconds: Double) {
        let s = max(0.001, seconds)
        var tv = timeval(tv_sec: Int(s), tv_usec: Int((s - Double(Int(s))) * 1e6))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    }

    /// Splits `http://host[:port][/path]` into host, port and the base path.
    public static func parseBase(_ url: String) throws(ClientError) -> (host: String, port: Int, path: String) {
        var rest = Substring(url)
        if rest.hasPrefix("http://") { rest = rest.dropFirst(7) } else if rest.contains("://") {
            throw ClientError(description: "only http:// URLs are supported: \(url)")
        }
        let slash = rest.firstIndex(of: "/") ?? rest.endIndex
        let authority = rest[..<slash]
        let path = String(rest[slash...])
        var host = String(authority)
        var port = 80
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { throw ClientError(description: "bad address \(url)") }
            host = String(authority[authority.index(after: authority.startIndex)..<close])
            let after = authority[authority.index(after: close)...]
            if after.hasPrefix(":") {
                guard let p = Int(after.dropFirst()) else { throw ClientError(description: "bad port in \(url)") }
                port = p
            }
        } else if let colon = authority.lastIndex(of: ":") {
            host = String(authority[..<colon])
            guard let p = Int(authority[authority.index(after: colon)...]), (1...65535).contains(p) else { throw ClientError(description: "bad port in \(url)") }
            port = p
        }
        guard !host.isEmpty else { throw ClientError(description: "no host in \(url)") }
        return (host, port, path == "/" ? "" : path)
    }

    /// Sends one request and reads the whole response. `timeout` bounds connect and each read; `deadline` (seconds,
    /// optional) bounds the whole exchange — connect, send and every byte of the answer — so a peer that trickles
    /// bytes cannot hold the caller past it; `maxResponseBytes` caps what is read (more is an error).
    public static func send(method: String, url: String, headers: [(String, String)] = [], body: [UInt8]? = nil,
                            timeout: Double = 30, deadline: Double? = nil, maxResponseBytes: Int = 64 << 20) throws(ClientError) -> Response {
        let (host, port, pathAndQuery) = try parseBase(url)
        let start = monotonicSeconds()
        let stopAt = deadline.map { start + $0 }
        func remaining() throws(ClientError) -> Double {
            guard let stopAt else { return timeout }
            let left = stopAt - monotonicSeconds()
            guard left > 0 else { throw ClientError(description: "\(host):\(port) did not answer within \(deadline ?? 0) s", timedOut: true) }
            return min(left, timeout)
        }
        let fd = try connect(host: host, port: port, timeout: try remaining())
        defer { close(fd) }
        var req = "\(method) \(pathAndQuery.isEmpty ? "/" : pathAndQuery) HTTP/1.1\r\nHost: \(host.contains(":") ? "[\(host)]" : host):\(port)\r\nConnection: close\r\nUser-Agent: phone-auth\r\n"
        for (k, v) in headers { req += "\(k): \(v)\r\n" }
        if let body { req += "Content-Length: \(body.count)\r\n" }
        req += "\r\n"
        var bytes = Array(req.utf8)
        if let body { bytes += body }
        var off = 0
        while off < bytes.count {
            if stopAt != nil { setTimeouts(fd, try remaining()) }
            switch bytes.withUnsafeBytes({ Posix.send(fd, UnsafeRawBufferPointer(rebasing: $0[off...])) }) {
            case .bytes(let n): off += n
            case .wouldBlock, .endOfStream: throw ClientError(description: "\(host):\(port) took nothing within \(timeout) s", timedOut: true)
            case .failed(let e): throw ClientError(description: "sending to \(host):\(port) failed: \(String(cString: strerror(e)))")
            }
        }
        var data: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 65536)
        reading: while true {
            if stopAt != nil { setTimeouts(fd, try remaining()) }
            switch buf.withUnsafeMutableBytes({ Posix.receive(fd, into: $0) }) {
            case .bytes(let n):
                guard data.count + n <= maxResponseBytes + 16384 else {
                    throw ClientError(description: "the answer from \(host):\(port) is larger than \(maxResponseBytes) bytes")
                }
                data.append(contentsOf: buf[0..<n])
            case .endOfStream: break reading
            case .wouldBlock: throw ClientError(description: "no answer from \(host):\(port) within \(timeout) s", timedOut: true)
            case .failed(let e): throw ClientError(description: "reading from \(host):\(port) failed: \(String(cString: strerror(e)))")
            }
        }
        return try parseResponse(data)
    }

    /// Sends a GET and hands the body to `onBody` as it arrives (a streamed response: Server-Sent Events, JSON lines)
    /// until the server closes or `onBody` returns false. A non-2xx answer is read whole and returned with its body
    /// (`onBody` is not called). `timeout` bounds connect and each read (a stream must send something that often).
    public static func stream(url: String, headers: [(String, String)] = [], timeout: Double = 60,
                              onBody: ([UInt8]) -> Bool) throws(ClientError) -> Response {
        let (host, port, pathAndQuery) = try parseBase(url)
        let fd = try connect(host: host, port: port, timeout: timeout)
        defer { close(fd) }
        var req = "GET \(pathAndQuery.isEmpty ? "/" : pathAndQuery) HTTP/1.1\r\nHost: \(host.contains(":") ? "[\(host)]" : host):\(port)\r\nConnection: close\r\nUser-Agent: phone-auth\r\n"
        for (k, v) in headers { req += "\(k): \(v)\r\n" }
        req += "\r\n"
        let bytes = Array(req.utf8)
        var off = 0
        while off < bytes.count {
            switch bytes.withUnsafeBytes({ Posix.send(fd, UnsafeRawBufferPointer(rebasing: $0[off...])) }) {
            case .bytes(let n): off += n
            case .wouldBlock, .endOfStream: throw ClientError(description: "\(host):\(port) took nothing within \(timeout) s")
            case .failed(let e): throw ClientError(description: "sending to \(host):\(port) failed: \(String(cString: strerror(e)))")
            }
        }
        var data: [UInt8] = []
        var head: Response? = nil
        var buf = [UInt8](repeating: 0, count: 65536)
        while true {
            switch buf.withUnsafeMutableBytes({ Posix.receive(fd, into: $0) }) {
            case .bytes(let n):
                if let head {
                    if !onBody(Array(buf[0..<n])) { return head }
                    continue
                }
                data.append(contentsOf: buf[0..<n])
                guard let end = findHeadEnd(data) else {
                    if data.count > 1 << 20 { throw ClientError(description: "malformed HTTP response") }
                    continue
                }
                let parsed = try parseResponse(data)
                guard (200..<300).contains(parsed.status) else { continue }  // an error: read it whole
                head = Response(status: parsed.status, headers: parsed.headers, body: [])
                let rest = Array(data[(end + 4)...])
                data = []
                if !rest.isEmpty, !onBody(rest) { return head! }
            case .endOfStream:
                if let head { return head }
                return try parseResponse(data)
            case .wouldBlock: throw ClientError(description: "nothing from \(host):\(port) within \(timeout) s")
            case .failed(let e): throw ClientError(description: "reading from \(host):\(port) failed: \(String(cString: strerror(e)))")
            }
        }
    }

    static func parseResponse(_ data: [UInt8]) throws(ClientError) -> Response {
        guard let end = findHeadEnd(data) else { throw ClientError(description: "malformed HTTP response") }
        let head = String(decoding: data[0..<end], as: UTF8.self)
        var lines = head.split(separator: "\r\n", omittingEmptySubsequences: false).map(String.init)
        guard !lines.isEmpty else { throw ClientError(description: "malformed HTTP response") }
        let statusParts = lines.removeFirst().split(separator: " ")
        guard statusParts.count >= 2, let status = Int(statusParts[1]) else { throw ClientError(description: "malformed status line") }
        var headers = HTTPHeaders()
        for l in lines where !l.isEmpty {
            guard let colon = l.firstIndex(of: ":") else { continue }
            headers.add(String(l[..<colon]), String(l[l.index(after: colon)...].drop(while: { $0 == " " })))
        }
        var body = Array(data[(end + 4)...])
        if headers["transfer-encoding"]?.lowercased().contains("chunked") == true {
            guard let decoded = dechunk(body) else { throw ClientError(description: "malformed chunked HTTP response") }
            return Response(status: status, headers: headers, body: decoded)
        }
        if let cl = headers["content-length"].flatMap({ Int($0) }), cl <= body.count { body = Array(body[0..<cl]) }
        return Response(status: status, headers: headers, body: body)
    }

    /// The body of a `Transfer-Encoding: chunked` response (extensions and trailers ignored); nil if malformed.
    static func dechunk(_ raw: [UInt8]) -> [UInt8]? {
        var out: [UInt8] = []
        var i = 0
        while true {
            guard let lineEnd = (i..<max(i, raw.count - 1)).first(where: { raw[$0] == 13 && raw[$0 + 1] == 10 }) else { return nil }
            let sizeText = String(decoding: raw[i..<lineEnd], as: UTF8.self).split(separator: ";").first.map { $0.trimmingSpaces() } ?? ""
            guard let size = Int(sizeText, radix: 16), size >= 0, size <= raw.count else { return nil }
            i = lineEnd + 2
            if size == 0 { return out }
            guard i + size <= raw.count else { return nil }
            out.append(contentsOf: raw[i..<(i + size)])
            i += size + 2
        }
    }

    static func findHeadEnd(_ d: [UInt8]) -> Int? {
        guard d.count >= 4 else { return nil }
        for i in 0...(d.count - 4) where d[i] == 13 && d[i + 1] == 10 && d[i + 2] == 13 && d[i + 3] == 10 { return i }
        return nil
    }

    static func connect(host: String, port: Int, timeout: Double) throws(ClientError) -> Int32 {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_family = AF_UNSPEC
        var res: UnsafeMutablePointer<addrinfo>? = nil
        let rc = getaddrinfo(host, String(port), &hints, &res)
        guard rc == 0, let first = res else { throw ClientError(description: "cannot resolve \(host): \(String(cString: gai_strerror(rc)))") }
        defer { freeaddrinfo(res) }
        var lastError: Int32 = 0
        var ai: UnsafeMutablePointer<addrinfo>? = first
        while let a = ai {
            let fd = socket(a.pointee.ai_family, a.pointee.ai_socktype | Int32(SOCK_CLOEXEC.rawValue), a.pointee.ai_protocol)
            if fd >= 0 {
                setTimeouts(fd, timeout)
                if Glibc.connect(fd, a.pointee.ai_addr, a.pointee.ai_addrlen) == 0 { return fd }
                lastError = csys_errno()
                if lastError == EINPROGRESS || lastError == EAGAIN || lastError == ETIMEDOUT {
                    close(fd)
                    throw ClientError(description: "cannot connect to \(host):\(port) within \(timeout) s", timedOut: true)
                }
                close(fd)
            }
            ai = a.pointee.ai_next
        }
        throw ClientError(description: "cannot connect to \(host):\(port): \(String(cString: strerror(lastError)))")
    }
}
