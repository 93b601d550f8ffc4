import EmulatorSupport
#if canImport(Glibc)
import Glibc
#endif

/// An HTTP-level failure, answered with its status and then the connection is closed.
public struct HTTPParseError: Error, Sendable, Equatable {
    public let status: Int
    public let message: String

    public static func badRequest(_ m: String) -> HTTPParseError { HTTPParseError(status: 400, message: m) }
    public static let headersTooLarge = HTTPParseError(status: 431, message: "Request header fields too large.")
    public static let bodyTooLarge = HTTPParseError(status: 413, message: "Request body too large.")
    public static let chunkedNotSupported = HTTPParseError(status: 411, message: "Chunked request bodies are not supported; send Content-Length.")
    public static let versionNotSupported = HTTPParseError(status: 505, message: "HTTP version not supported.")
    public static let timeout = HTTPParseError(status: 408, message: "Request timeout.")
    /// A connection over a connection cap (in all, or per peer): answered at once and closed, never read.
    public static let tooManyConnections = HTTPParseError(status: 503, message: "Too many connections from this address.")
}

public struct HTTPLimits: Sendable {
    public var maxHeadBytes = 64 * 1024
    public var maxBodyBytes = 1024 * 1024
    public var maxHeaderCount = 256
    public init() {}
}

/// An incremental HTTP/1.x request parser over raw bytes. Pure: no I/O, no clocks.
///
/// Feed it the connection's unread bytes (`buffer[start...]`); it returns a request and how many bytes it used,
/// asks for more, or fails with the status to answer. It remembers a parsed head while the body arrives.
public struct HTTPRequestParser: Sendable {
    public enum Outcome: Sendable {
        case needMore
        case request(HTTPRequest, consumed: Int)
        case failure(HTTPParseError)
    }

    private struct Head: Sendable {
        var request: HTTPRequest
        var headLength: Int
        var bodyLength: Int
    }

    public var limits: HTTPLimits
    private var head: Head?
    private var scanned = 0

    public init(limits: HTTPLimits = HTTPLimits()) { self.limits = limits }

    /// True when part of a request has been seen but not all of it.
    public var isMidRequest: Bool { head != nil || scanned > 0 }

    public mutating func parse(_ buffer: [UInt8], from start: Int, remoteAddress: String = "") -> Outcome {
        buffer.withUnsafeBufferPointer { all in
            parse(UnsafeBufferPointer(rebasing: all[start..<all.count]), remoteAddress: remoteAddress)
        }
    }

    public mutating func parse(_ buf: UnsafeBufferPointer<UInt8>, remoteAddress: String) -> Outcome {
        if head == nil {
            // Skip empty lines before a request line (RFC 9112 §2.2).
            var lead = 0
            while lead < buf.count, buf[lead] == 0x0D || buf[lead] == 0x0A { lead += 1 }
            if lead > 0 && lead == buf.count { return lead > 8 ? .failure(.badRequest("Empty request.")) : .needMore }
            // Find the end of the head: LF (CR)? LF.
            var i = max(lead, scanned)
            var end = -1
            while let lf = Self.nextLF(buf, from: i) {
                if lf + 1 < buf.count, buf[lf + 1] == 0x0A { end = lf + 2; break }
                if lf + 2 < buf.count, buf[lf + 1] == 0x0D, buf[lf + 2] == 0x0A { end = lf + 3; break }
                i = lf + 1
            }
            if end < 0 {
                scanned = max(lead, buf.count - 2)
                if buf.count - lead > limits.maxHeadBytes { return .failure(.headersTooLarge) }
                return .needMore
            }
            if end - lead > limits.maxHeadBytes { return .failure(.headersTooLarge) }
            switch parseHead(UnsafeBufferPointer(rebasing: buf[lead..<end]), remoteAddress: remoteAddress) {
            case .success(var h):
                h.headLength += lead
                head = h
            case .failure(let e):
                return .failure(e)
            }
        }
        guard let headLength = head?.headLength, let bodyLength = head?.bodyLength else { return .needMore }
        let total = headLength + bodyLength
        guard buf.count >= total else { return .needMore }
        var taken: Head? = nil
        swap(&taken, &head)  // moved out, not copied
        var req = taken.unsafelyUnwrapped.request
        if bodyLength > 0 { req.body = Array(UnsafeBufferPointer(rebasing: buf[headLength..<total])) }
        scanned = 0
        return .request(req, consumed: total)
    }

    /// The index of the next LF at or after `from` (`memchr`: a head is scanned for its end and split into lines).
    @inline(__always) static func nextLF(_ buf: UnsafeBufferPointer<UInt8>, from: Int) -> Int? {
        guard from < buf.count, let base = buf.baseAddress, let p = memchr(base + from, 0x0A, buf.count - from) else { return nil }
        return UnsafeRawPointer(base).distance(to: UnsafeRawPointer(p))
    }

    /// RFC 9110 `tchar` (ALPHA, DIGIT and !#$%&'*+-.^_`|~) as two 64-bit masks: constants, where a table was a lazily
    /// initialized global (a `swift_once` call per byte of every method and header name).
    private static let tokenLow: UInt64 = 0x03ff_6cfa_0000_0000
    private static let tokenHigh: UInt64 = 0x57ff_ffff_c7ff_fffe

    @inline(__always) static func isTokenChar(_ c: UInt8) -> Bool {
        if c < 64 { return tokenLow >> UInt64(c) & 1 != 0 }
        if c < 128 { return tokenHigh >> UInt64(c &- 64) & 1 != 0 }
        return false
    }

    /// Compares bytes with a lowercase ASCII constant, ignoring case, without allocating.
    @inline(__always) private static func matches(_ b: UnsafeBufferPointer<UInt8>.SubSequence, _ lower: StaticString) -> Bool {
        guard b.count == lower.utf8CodeUnitCount else { return false }
        let p = lower.utf8Start
        var i = 0
        for c in b {
            let l = c >= 0x41 && c <= 0x5A ? c | 0x20 : c
            if l != p[i] { return false }
            i += 1
        }
        return true
    }

    private func parseHead(_ b: UnsafeBufferPointer<UInt8>, remoteAddress: String) -> Result<Head, HTTPParseError> {
        // Split into lines (strip CR before LF); the final empty line ends the head.
        var lines: [Range<Int>] = []
        lines.reserveCapacity(24)  // one allocation for a usual head, instead of one per doubling
        var lineStart = 0
        while let i = Self.nextLF(b, from: lineStart) {
            var e = i
            if e > lineStart, b[e - 1] == 0x0D { e -= 1 }
            lines.append(lineStart..<e)
            lineStart = i + 1
        }
        guard let requestLine = lines.first, !requestLine.isEmpty else { return .failure(.badRequest("Malformed request line.")) }
        // Request line: method SP target SP version.
        let rl = UnsafeBufferPointer(rebasing: b[requestLine])
        guard let sp1 = rl.firstIndex(of: 0x20) else { return .failure(.badRequest("Malformed request line.")) }
        let afterMethod = sp1 + 1
        guard afterMethod < rl.count, let sp2rel = rl[afterMethod...].firstIndex(of: 0x20) else {
            return .failure(.badRequest("Malformed request line."))
        }
        let methodBytes = rl[0..<sp1]
        let targetBytes = rl[afterMethod..<sp2rel]
        let versionBytes = rl[(sp2rel + 1)...]
        guard !methodBytes.isEmpty, methodBytes.count <= 32, methodBytes.allSatisfy(Self.isTokenChar) else {
            return .failure(.badRequest("Malformed request line."))
        }
        guard !targetBytes.isEmpty, targetBytes.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            return .failure(.badRequest("Malformed request target."))
        }
        let minor: Int
        if Self.matches(versionBytes, "http/1.1") && versionBytes.first == UInt8(ascii: "H") {
            minor = 1
        } else if Self.matches(versionBytes, "http/1.0") && versionBytes.first == UInt8(ascii: "H") {
            minor = 0
        } else if versionBytes.count == 8, versionBytes.starts(with: "HTTP/".utf8), versionBytes[versionBytes.startIndex + 6] == UInt8(ascii: "."),
            (0x30...0x39).contains(versionBytes[versionBytes.startIndex + 5]), (0x30...0x39).contains(versionBytes[versionBytes.startIndex + 7])
        {
            return .failure(.versionNotSupported)
        } else {
            return .failure(.badRequest("Malformed request line."))
        }
        let method = String(decoding: methodBytes, as: UTF8.self)
        let target = String(decoding: targetBytes, as: UTF8.self)

        var headers = HTTPHeaders()
        headers.reserveCapacity(min(lines.count - 1, limits.maxHeaderCount))  // not more than the head may have
        var contentLength: Int? = nil
        var connectionClose = false
        var connectionKeepAlive = false
        var sawTransferEncoding = false
        var count = 0
        for line in lines.dropFirst() where !line.isEmpty {
            let l = UnsafeBufferPointer(rebasing: b[line])
            if l[0] == 0x20 || l[0] == 0x09 { return .failure(.badRequest("Obsolete header line folding.")) }
            guard let colon = l.firstIndex(of: UInt8(ascii: ":")), colon > 0 else { return .failure(.badRequest("Malformed header line.")) }
            let nameBytes = l[0..<colon]
            guard nameBytes.allSatisfy(Self.isTokenChar) else { return .failure(.badRequest("Malformed header name.")) }
            var vs = colon + 1
            var ve = l.count
            while vs < ve, l[vs] == 0x20 || l[vs] == 0x09 { vs += 1 }
            while ve > vs, l[ve - 1] == 0x20 || l[ve - 1] == 0x09 { ve -= 1 }
            let valueBytes = l[vs..<ve]
            if valueBytes.contains(where: { ($0 < 0x20 && $0 != 0x09) || $0 == 0x7F }) {
                return .failure(.badRequest("Invalid character in header value."))
            }
            count += 1
            if count > limits.maxHeaderCount { return .failure(.headersTooLarge) }
            let name = String(decoding: nameBytes, as: UTF8.self)
            let value = String(decoding: valueBytes, as: UTF8.self)
            if Self.matches(nameBytes, "content-length") {
                guard !valueBytes.isEmpty, valueBytes.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
                    return .failure(.badRequest("Invalid Content-Length."))
                }
                var n = 0
                for d in valueBytes {
                    n = n * 10 + Int(d - 0x30)
                    if n > limits.maxBodyBytes { return .failure(.bodyTooLarge) }
                }
                if let existing = contentLength, existing != n { return .failure(.badRequest("Conflicting Content-Length headers.")) }
                contentLength = n
            } else if Self.matches(nameBytes, "transfer-encoding") {
                sawTransferEncoding = true
            } else if Self.matches(nameBytes, "connection") {
                for token in value.lowercased().split(separator: ",") {
                    let t = token.trimmingSpaces()
                    if t == "close" { connectionClose = true }
                    if t == "keep-alive" { connectionKeepAlive = true }
                }
            }
            headers.add(name, value)
        }
        if sawTransferEncoding {
            if contentLength != nil { return .failure(.badRequest("Both Transfer-Encoding and Content-Length.")) }
            return .failure(.chunkedNotSupported)
        }
        let keepAlive = minor == 1 ? !connectionClose : (connectionKeepAlive && !connectionClose)
        let req = HTTPRequest(method: method, target: target, versionMinor: minor, headers: headers, body: [],
                              remoteAddress: remoteAddress, keepAlive: keepAlive)
        return .success(Head(request: req, headLength: b.count, bodyLength: contentLength ?? 0))
    }
}
