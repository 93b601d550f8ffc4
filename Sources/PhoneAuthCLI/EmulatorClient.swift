import EmulatorSupport
import HTTPServer

/// A Google API error answered by the emulator: printed with its code, exit code 1.
public struct APIError: Error, CustomStringConvertible, Sendable {
    public let status: Int
    public let message: String
    /// Google's canonical status (`error.status`, e.g. NOT_FOUND), when the reply had one.
    public var googleStatus: String? = nil

    /// The Google code: the part of the message before " : " (e.g. INVALID_CODE), or the canonical status for
    /// free-text messages.
    public var code: String {
        let head = message.firstRange(of: " : ").map { String(message[..<$0.lowerBound]) } ?? message
        if !head.isEmpty, head.unicodeScalars.allSatisfy({ ($0 >= "A" && $0 <= "Z") || $0 == "_" || ($0 >= "0" && $0 <= "9") }) { return head }
        return googleStatus ?? head
    }
    public var description: String { "\(message) (HTTP \(status))" }
}

/// Cannot reach the emulator at all: exit code 1.
public struct ConnectionError: Error, CustomStringConvertible, Sendable {
    public let description: String
}

/// Talks to a running emulator.
public struct EmulatorClient: Sendable {
    public let baseURL: String
    public var project: String
    public let apiKey: String
    public let tenant: String?
    /// The server's `--admin-token`: sent as `Bearer <token>` on admin and emulator-API calls (else `Bearer owner` on
    /// admin calls and nothing on emulator-API calls, as the official clients do).
    public let adminToken: String?

    public init(baseURL: String, project: String, apiKey: String, tenant: String?, adminToken: String? = nil) {
        self.baseURL = baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
        self.project = project
        self.apiKey = apiKey
        self.tenant = tenant
        self.adminToken = adminToken.flatMap { $0.isEmpty ? nil : $0 }
    }

    /// `FIREBASE_AUTH_EMULATOR_HOST` is `host:port`; a value with a scheme is used as is.
    public static func defaultURL(environment: (String) -> String?) -> String {
        if let h = environment("FIREBASE_AUTH_EMULATOR_HOST"), !h.isEmpty { return h.contains("://") ? h : "http://\(h)" }
        return "http://127.0.0.1:9099"
    }

    public func request(_ method: String, _ path: String, query: [(String, String)] = [], body: JSON? = nil,
                        admin: Bool = false, key: Bool = false, timeout: Double = 30) throws -> JSON {
        var q = query
        if key { q.insert(("key", apiKey), at: 0) }
        let qs = q.isEmpty ? "" : "?" + q.map { "\(URLEncoding.percentEncode($0.0))=\(URLEncoding.percentEncode($0.1))" }.joined(separator: "&")
        var headers: [(String, String)] = []
        if let adminToken, admin || path.hasPrefix("/emulator/") {
            headers.append(("Authorization", "Bearer \(adminToken)"))
        } else if admin {
            headers.append(("Authorization", "Bearer owner"))
        }
        var bytes: [UInt8]? = nil
        if let body {
            headers.append(("Content-Type", "application/json"))
            bytes = body.serialized()
        }
        let resp: HTTPClient.Response
        do {
            resp = try HTTPClient.send(method: method, url: baseURL + path + qs, headers: headers, body: bytes, timeout: timeout)
        } catch {
            throw ConnectionError(description: "cannot reach the emulator at \(baseURL): \(error.description)")
        }
        let json = (try? JSONParser.parse(resp.body)) ?? .null
        guard (200..<300).contains(resp.status) else {
            let message = json["error"]?["message"]?.stringValue ?? "HTTP \(resp.status)"
            throw APIError(status: resp.status, message: message, googleStatus: json["error"]?["status"]?.stringValue)
        }
        return json
    }

    /// `/emulator/v1/projects/{p}[/tenants/{t}]`
    public var emulatorBase: String { "/emulator/v1/projects/\(project)" + (tenant.map { "/tenants/\($0)" } ?? "") }
    /// `/identitytoolkit.googleapis.com/v1/projects/{p}[/tenants/{t}]`
    public var adminBase: String { "/identitytoolkit.googleapis.com/v1/projects/\(project)" + (tenant.map { "/tenants/\($0)" } ?? "") }

    /// A client call body, with `tenantId` when set.
    func clientBody(_ o: JSONObject) -> JSON {
        var b = o
        if let tenant { b["tenantId"] = .string(tenant) }
        return .object(b)
    }

    public func itk(_ op: String, _ body: JSONObject) throws -> JSON {
        try request("POST", "/identitytoolkit.googleapis.com/v1/accounts:\(op)", body: clientBody(body), key: true)
    }

    /// A v2 client call, e.g. `mfaEnrollment:start` → `POST /identitytoolkit.googleapis.com/v2/accounts/mfaEnrollment:start?key=…`.
    public func v2(_ op: String, _ body: JSONObject) throws -> JSON {
        try request("POST", "/identitytoolkit.googleapis.com/v2/accounts/\(op)", body: clientBody(body), key: true)
    }
}
