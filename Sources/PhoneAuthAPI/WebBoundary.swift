import HTTPServer
import PhoneAuthCore

/// The browser boundary: which `Origin`s may call protected routes (the emulator API, admin calls) and which `Host`
/// names the server answers at all (DNS rebinding). Pure values and functions: no I/O, no clock.
///
/// Threat: a web page open in the developer's browser. It can send "simple" cross-site requests (any method the
/// browser allows, `text/plain` bodies) without a preflight, but the browser always labels them with its `Origin`;
/// it cannot choose the `Host` header, except by pointing a DNS name it controls at 127.0.0.1 (rebinding), and then
/// the `Host` header carries that DNS name.
public struct WebBoundary: Sendable, Equatable {
    /// Extra origins (`--allow-origin`), normalized by `normalizeOrigin`.
    public private(set) var allowedOrigins: Set<String> = []
    /// Extra host names (`--allow-host`), normalized by `normalizeHost`: `name`, `name:port`, `*.suffix` or `*`.
    public private(set) var allowedHosts: [String] = []
    /// Bound to `0.0.0.0` / `::`: reachable on every interface, so single-label names (a Docker Compose service name
    /// such as `auth`) are accepted too; they cannot be registered in public DNS, so they cannot be rebound.
    public private(set) var wildcardBind = false

    /// The verdict for one request.
    public enum Verdict: Sendable, Equatable {
        /// Go on; reflect `origin` in `Access-Control-Allow-Origin` when set. `trusted`: the origin is allowed
        /// (may be granted Private Network Access and reach protected routes).
        case allow(reflect: String?, trusted: Bool)
        /// Refuse with 403 PERMISSION_DENIED before any handler runs.
        case refuseHost
        case refuseOrigin
    }

    /// The defaults for a server bound to loopback: loopback origins and names, IP literals.
    public init() {}

    /// `bindHost`: the listen address; `allowOrigins`/`allowHosts`: raw values, validated here.
    public init(bindHost: String, allowOrigins: [String] = [], allowHosts: [String] = []) throws(SettingsError) {
        var h = bindHost
        if h.hasPrefix("[") && h.hasSuffix("]") { h = String(h.dropFirst().dropLast()) }
        wildcardBind = h == "0.0.0.0" || h == "::" || h == "0:0:0:0:0:0:0:0"
        for o in allowOrigins {
            guard let n = Self.normalizeOrigin(o) else {
                throw SettingsError("invalid --allow-origin '\(Self.printable(o))': expected scheme://host[:port], e.g. http://192.168.1.20:3000 (no path; 'null' and '*' are not allowed)")
            }
            allowedOrigins.insert(n)
        }
        for name in allowHosts {
            guard let n = Self.normalizeHost(name) else {
                throw SettingsError("invalid --allow-host '\(Self.printable(name))': expected a host name, NAME:PORT, *.SUFFIX or *")
            }
            if !allowedHosts.contains(n) { allowedHosts.append(n) }
        }
    }

    // MARK: the decision

    /// Decides for one request. `hosts`/`origins`: every value of those headers (normally zero or one each);
    /// `protected`: the request reaches the emulator API or an admin route, or carries credentials.
    public func verdict(hosts: [String], origins: [String], protected: Bool) -> Verdict {
        if hosts.count > 1 { return .refuseHost }
        let host = hosts.first
        if let host, !hostAllowed(host) { return .refuseHost }
        guard let first = origins.first else { return .allow(reflect: nil, trusted: false) }
        let trusted = origins.count == 1 && originAllowed(first, host: host)
        if trusted { return .allow(reflect: first, trusted: true) }
        if protected { return .refuseOrigin }
        // Client-facing Google endpoints: open to any origin, as in production (no credentials are involved).
        return .allow(reflect: origins.count == 1 ? first : nil, trusted: false)
    }

    /// The `Host` check: IP literals (rebinding needs a DNS name), loopback names, the names `--allow-host` added, and
    /// single-label names when bound to every interface. A malformed value is refused.
    public func hostAllowed(_ value: String) -> Bool {
        // Nearly every request says `127.0.0.1:PORT` or `localhost:PORT`: decided on the bytes, without the general
        // parser's strings (which cost more than the rest of a send).
        if Self.isLoopbackOrIPv4Authority(value) { return true }
        guard let (name, port, isIP) = Self.parseAuthority(value) else { return false }
        if isIP || name == "localhost" { return true }
        // A single label names a Compose service or LAN host; with a trailing dot (`auth.`) it would be a top-level
        // domain resolved from the root, so that spelling is not a single-label name.
        if wildcardBind && !name.contains(".") && !Self.hasTrailingDot(value) { return true }
        for pattern in allowedHosts {
            if pattern == "*" { return true }
            var p = Substring(pattern)
            var wantPort: Int? = nil
            if let colon = p.lastIndex(of: ":") {
                wantPort = Int(p[p.index(after: colon)...])
                p = p[..<colon]
            }
            if let wantPort, wantPort != (port ?? 80) { continue }
            if p.hasPrefix("*.") {
                if name.hasSuffix(p.dropFirst()) { return true }
            } else if name == p {
                return true
            }
        }
        return false
    }

    /// The `Origin` check for protected routes: `http(s)://localhost|127.0.0.1|[::1]` on any port, the origin the
    /// request was addressed to (`Host`, already checked: a page this server served itself), and `--allow-origin`.
    /// `null` and anything malformed are refused.
    public func originAllowed(_ origin: String, host: String?) -> Bool {
        guard let (scheme, name, port) = Self.parseOrigin(origin) else {
            // Other schemes (chrome-extension://…, capacitor://…) only by exact match.
            return allowedOrigins.contains(origin.lowercased())
        }
        if name == "localhost" || name == "127.0.0.1" || name == "[::1]" { return true }
        let normalized = scheme + "://" + name + (port.map { ":\($0)" } ?? "")
        if allowedOrigins.contains(normalized) { return true }
        // Same origin as the request's own authority (the server's own pages, e.g. reached as http://192.168.1.20:9099).
        if let host, let (hname, hport, _) = Self.parseAuthority(host), hname == name, (hport ?? 80) == (port ?? (scheme == "https" ? 443 : 80)) {
            return true
        }
        return false
    }

    /// A listen address only this machine can reach: `127.0.0.0/8`, `::1` or `localhost`.
    public static func isLoopbackHost(_ host: String) -> Bool {
        let h = host.lowercased()
        if h == "localhost" || h == "::1" || h == "[::1]" || h == "0:0:0:0:0:0:0:1" { return true }
        if h.hasPrefix("::ffff:") { return isLoopbackHost(String(h.dropFirst(7))) }
        let parts = h.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { p in UInt8(p) != nil }
    }

    // MARK: parsing

    /// `host[:port]` as in a `Host` header: lowercase name without a trailing dot (IPv6 in brackets), the port, and
    /// whether the name is an IP literal. Nil when malformed.
    /// `a.b.c.d[:port]` (each part 0–255, at most 3 digits) or `localhost[:port]` in any case, port 0–65535 — the
    /// same answer `parseAuthority` gives for these spellings, decided on the UTF-8 bytes with no allocation.
    private static let localhostBytes: [UInt8] = Array("localhost".utf8)

    static func isLoopbackOrIPv4Authority(_ value: String) -> Bool {
        var value = value
        return value.withUTF8 { b -> Bool in
            var i = 0
            let n = b.count
            guard n > 0, n <= 300 else { return false }
            // The name.
            if n >= 9, (0..<9).allSatisfy({ b[$0] | 0x20 == Self.localhostBytes[$0] }), n == 9 || b[9] == UInt8(ascii: ":") {
                i = 9
            } else {
                var parts = 0
                while parts < 4 {
                    var digits = 0, octet = 0
                    while i < n, b[i] >= 0x30, b[i] <= 0x39, digits < 4 { octet = octet * 10 + Int(b[i] - 0x30); digits += 1; i += 1 }
                    guard digits >= 1, digits <= 3, octet <= 255 else { return false }
                    parts += 1
                    if parts < 4 {
                        guard i < n, b[i] == UInt8(ascii: ".") else { return false }
                        i += 1
                    }
                }
            }
            // The port.
            if i == n { return true }
            guard b[i] == UInt8(ascii: ":") else { return false }
            i += 1
            let digits = n - i
            guard digits >= 1, digits <= 5 else { return false }
            var port = 0
            while i < n {
                guard b[i] >= 0x30, b[i] <= 0x39 else { return false }
                port = port * 10 + Int(b[i] - 0x30)
                i += 1
            }
            return port <= 65535
        }
    }

    static func parseAuthority(_ value: String) -> (String, Int?, Bool)? {
        let v = value.lowercased()
        guard !v.isEmpty, v.utf8.count <= 300 else { return nil }
        var name: Substring
        var portText: Substring? = nil
        if v.hasPrefix("[") {
            guard let close = v.firstIndex(of: "]") else { return nil }
            name = v[...close]
            let after = v[v.index(after: close)...]
            if !after.isEmpty {
                guard after.first == ":" else { return nil }
                portText = after.dropFirst()
            }
            guard isIPv6(name.dropFirst().dropLast()) else { return nil }
        } else {
            if let colon = v.firstIndex(of: ":") {
                name = v[..<colon]
                portText = v[v.index(after: colon)...]
            } else {
                name = v[...]
            }
            // One trailing dot is allowed on an otherwise valid name (`localhost.`, `dev.example.test.`).
            if name.hasSuffix(".") { name = name.dropLast() }
            guard isIPv4(name) || isDNSName(name) else { return nil }
        }
        var port: Int? = nil
        if let portText {
            guard !portText.isEmpty, portText.utf8.count <= 5, portText.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
                let p = Int(portText), p <= 65535 else { return nil }
            port = p
        }
        let isIP = name.hasPrefix("[") || isIPv4(name)
        return (String(name), port, isIP)
    }

    /// `scheme://host[:port]` for http and https, without path; nil otherwise (including `null`).
    static func parseOrigin(_ origin: String) -> (String, String, Int?)? {
        let o = origin.lowercased()
        let scheme: String
        if o.hasPrefix("http://") { scheme = "http" } else if o.hasPrefix("https://") { scheme = "https" } else { return nil }
        let rest = String(o.dropFirst(scheme.count + 3))
        guard !rest.contains("/"), !rest.contains("@"), !rest.contains("?"), !rest.contains("#"),
            let (name, port, _) = parseAuthority(rest), !name.isEmpty else { return nil }
        // Browsers leave out the default port.
        let defaultPort = scheme == "https" ? 443 : 80
        return (scheme, name, port == defaultPort ? nil : port)
    }

    /// An `--allow-origin` value in the form origins are compared in; nil when it is not an origin.
    public static func normalizeOrigin(_ raw: String) -> String? {
        var s = raw.trimmingSpaces()
        if s.hasSuffix("/") { s = String(s.dropLast()) }
        if let (scheme, name, port) = parseOrigin(s) { return scheme + "://" + name + (port.map { ":\($0)" } ?? "") }
        // Another scheme: scheme://authority, compared exactly (lowercase).
        let lower = s.lowercased()
        guard let sep = lower.firstRange(of: "://"), sep.lowerBound != lower.startIndex else { return nil }
        let scheme = lower[..<sep.lowerBound], rest = lower[sep.upperBound...]
        guard scheme != "http", scheme != "https", let f = scheme.first, f.isASCII, f.isLetter,
            scheme.utf8.allSatisfy({ isAlnum($0) || $0 == 0x2B || $0 == 0x2D || $0 == 0x2E }),
            !rest.isEmpty, !rest.contains("/"), rest.utf8.allSatisfy({ isNameByte($0) || $0 == 0x3A || $0 == 0x5B || $0 == 0x5D })
        else { return nil }
        return lower
    }

    /// An `--allow-host` value: `name`, `name:port`, `*.suffix` or `*`, lowercase; nil when malformed.
    public static func normalizeHost(_ raw: String) -> String? {
        let s = raw.trimmingSpaces().lowercased()
        if s == "*" { return s }
        var body = s
        if body.hasPrefix("*.") { body = String(body.dropFirst(2)) }
        guard let (name, port, _) = parseAuthority(body), !name.isEmpty, name != "*" else { return nil }
        return (s.hasPrefix("*.") ? "*." : "") + name + (port.map { ":\($0)" } ?? "")
    }

    /// Whether the name part of a `host[:port]` value ends with a dot (never for IPv6 literals).
    static func hasTrailingDot(_ value: String) -> Bool {
        guard !value.hasPrefix("[") else { return false }
        return (value.firstIndex(of: ":").map { value[..<$0] } ?? value[...]).hasSuffix(".")
    }

    /// A DNS host name as browsers send it (punycode for IDNs): dot-separated labels of 1 to 63 letters, digits,
    /// `-` and `_` (Compose and Docker service names use it), each starting and ending with a letter or digit; at
    /// most 253 bytes. No empty label (`a..b`, `.a`), no label `-`.
    static func isDNSName(_ s: Substring) -> Bool {
        guard !s.isEmpty, s.utf8.count <= 253 else { return false }
        return s.utf8.split(separator: 0x2E, omittingEmptySubsequences: false).allSatisfy { label in
            guard let first = label.first, let last = label.last, label.count <= 63 else { return false }
            return isAlnum(first) && isAlnum(last) && label.allSatisfy { isAlnum($0) || $0 == 0x2D || $0 == 0x5F }
        }
    }

    /// An IPv6 address as written inside brackets (RFC 4291 text form, without a zone): eight groups of 1 to 4
    /// hex digits, or fewer around exactly one `::`, the last two groups optionally written as dotted IPv4.
    static func isIPv6(_ s: Substring) -> Bool {
        guard s.utf8.count >= 2, s.utf8.count <= 45 else { return false }
        let bytes = Array(s.utf8)
        var halves: [[UInt8]] = [bytes]
        if let at = (0..<bytes.count - 1).first(where: { bytes[$0] == 0x3A && bytes[$0 + 1] == 0x3A }) {
            halves = [Array(bytes[..<at]), Array(bytes[(at + 2)...])]
            if halves.contains(where: { h in h.count >= 1 && (h.first == 0x3A || h.last == 0x3A) }) { return false }
            if (0..<halves[1].count).contains(where: { i in i + 1 < halves[1].count && halves[1][i] == 0x3A && halves[1][i + 1] == 0x3A }) { return false }
        }
        var groups = 0
        for (h, half) in halves.enumerated() where !half.isEmpty {
            let parts = half.split(separator: 0x3A, omittingEmptySubsequences: false)
            for (i, part) in parts.enumerated() {
                if part.contains(0x2E) {
                    // Dotted IPv4: only as the very last part.
                    guard h == halves.count - 1, i == parts.count - 1, isIPv4(Substring(String(decoding: part, as: UTF8.self))) else { return false }
                    groups += 2
                } else {
                    guard (1...4).contains(part.count), part.allSatisfy(isHex) else { return false }
                    groups += 1
                }
            }
        }
        return halves.count == 2 ? groups <= 7 : groups == 8
    }

    static func isIPv4(_ s: Substring) -> Bool {
        let parts = s.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4 else { return false }
        return parts.allSatisfy { p in
            !p.isEmpty && p.utf8.count <= 3 && p.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) && Int(p)! <= 255
        }
    }

    static func isHex(_ b: UInt8) -> Bool { (b >= 0x30 && b <= 0x39) || (b >= 0x61 && b <= 0x66) || (b >= 0x41 && b <= 0x46) }
    static func isAlnum(_ b: UInt8) -> Bool { (b >= 0x30 && b <= 0x39) || (b >= 0x61 && b <= 0x7A) || (b >= 0x41 && b <= 0x5A) }
    /// Bytes of a DNS name as browsers send it (punycode for IDNs): letters, digits, `-`, `.`, `_`.
    static func isNameByte(_ b: UInt8) -> Bool { isAlnum(b) || b == 0x2D || b == 0x2E || b == 0x5F }

    /// A value shown in an error message: printable ASCII only, at most 100 characters.
    static func printable(_ s: String) -> String {
        String(String.UnicodeScalarView(s.unicodeScalars.prefix(100).map { $0.value >= 0x20 && $0.value < 0x7F ? $0 : "?" }))
    }
}

/// A client request a web page on a foreign origin may not make (it would act for any user, or take something a
/// native SDK needs): refused like a protected request — 403 `PERMISSION_DENIED` without CORS headers — by
/// `PhoneAuthApp` before the error is rendered. A type of its own, so no error is recognised by its text.
struct ForeignOriginRefusal: Error {
    let error: AuthError
    init(_ error: AuthError) { self.error = error }
}

extension AuthError {
    /// `verifyClient` is the iOS SDK's (which sends no `Origin`): a web page may not mint receipts or push out a
    /// suite's recorded pushes.
    static let verifyClientOriginNotAllowed = AuthError(
        .permissionDenied, "Origin not allowed: accounts:verifyClient is for the iOS SDK, which sends no Origin header.")
}
