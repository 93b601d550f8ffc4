import EmulatorSupport
import HTTPServer
import JWT
import PhoneAuthCore

/// The Firebase-compatible HTTP surface: authenticates, routes, runs handlers and renders Google envelopes.
public final class PhoneAuthApp: HTTPResponder {
    public static let version = "0.1.0"
    /// The project number every response reports (the official emulator's value).
    public static let projectNumber = "12345"

    public let emulator: Emulator
    public let tokens: TokenService
    public let logger: Logger
    let signingPool: WorkerPool?
    /// `apiKeys` config: API key → project.
    let apiKeyProjects: [String: String]
    /// Stores a new signing key durably (with `--data-dir`) before it is used.
    let saveSigningKey: (@Sendable (SigningKey) throws -> Void)?
    /// `--admin-token`: when set, admin calls need `Bearer <token>`; `owner` and `ya29.` are refused.
    let adminToken: String?

    public init(emulator: Emulator, tokens: TokenService, signingPool: WorkerPool?, apiKeyProjects: [String: String] = [:], logger: Logger,
                saveSigningKey: (@Sendable (SigningKey) throws -> Void)? = nil, adminToken: String? = nil) {
        self.emulator = emulator
        self.tokens = tokens
        self.signingPool = signingPool
        self.apiKeyProjects = apiKeyProjects
        self.logger = logger
        self.saveSigningKey = saveSigningKey
        self.adminToken = adminToken
    }

    public func respond(to request: HTTPRequest, context: ResponseContext) -> HTTPResponse? {
        if request.method == "OPTIONS" { return preflight(request) }
        switch Router.match(method: request.method, path: request.path) {
        case .notFound:
            return render(error: .notFound, for: request)
        case .methodNotAllowed:
            return render(error: .methodNotAllowed, for: request)
        case .route(let route):
            if route.offload, tokens.mode == .rs256, let pool = signingPool {
                pool.submit { [self] in
                    if let r = self.handle(request, route, context) { context.complete(r) }
                }
                return nil
            }
            return handle(request, route, context)
        }
    }

    /// Runs a routed request (on the loop, or on the signing pool); nil when the handler answers later.
    func handle(_ request: HTTPRequest, _ route: Route, _ context: ResponseContext) -> HTTPResponse? {
        do {
            var call = try makeCall(request, route) { [self] reply in context.complete(self.render(reply, for: request)) }
            call.onClose = { context.onClose($0) }
            let reply = try route.handler(self, call)
            if reply.isDeferred { return nil }
            return render(reply, for: request)
        } catch let e as AuthError {
            return render(error: e, for: request)
        } catch {
            logger.error("internal error", [("method", request.method), ("path", String(request.path)), ("error", String(describing: error))])
            return render(error: .internalError(), for: request)
        }
    }

    func makeCall(_ request: HTTPRequest, _ route: Route, complete: @escaping @Sendable (Reply) -> Void) throws(AuthError) -> Call {
        let query = URLEncoding.parsePairs(request.query)
        // Credentials.
        var privileged = false
        if let auth = request.headers["authorization"], auth.utf8.count >= 7,
            HTTPHeaders.equalsIgnoringASCIICase(String(decoding: auth.utf8.prefix(7), as: UTF8.self), "bearer ")
        {
            // Header values may hold repaired invalid UTF-8: slice bytes and decode leniently, never force-unwrap.
            let token = String(decoding: auth.utf8.dropFirst(7), as: UTF8.self)[...].trimmingSpaces()
            let isAdmin = adminToken.map { constantTimeEquals(token, $0) }
                ?? (HTTPHeaders.equalsIgnoringASCIICase(token, "owner") || token.hasPrefix("ya29."))
            if isAdmin {
                privileged = true
            } else if route.access != .open {
                throw AuthError.invalidCredential
            }
        }
        var apiKey = query.last(where: { $0.0 == "key" })?.1
        if apiKey?.isEmpty ?? true { apiKey = request.headers["x-goog-api-key"] }
        if apiKey?.isEmpty ?? false { apiKey = nil }
        switch route.access {
        case .open: break
        case .apiKey: guard apiKey != nil else { throw AuthError.missingAPIKey }
        case .client, .adminPath: guard apiKey != nil || privileged else { throw AuthError.missingAPIKey }
        case .admin: guard privileged else { throw AuthError.missingCredential }
        }

        // Body.
        var body = JSONObject()
        if route.body != .none, !request.body.isEmpty {
            let ct = request.headers["content-type"]?.lowercased() ?? ""
            let first = request.body.first(where: { $0 != 0x20 && $0 != 0x0A && $0 != 0x0D && $0 != 0x09 })
            if route.body == .jsonOrForm, ct.hasPrefix("application/x-www-form-urlencoded") || (first != UInt8(ascii: "{") && first != nil) {
                guard let text = String(validating: request.body, as: UTF8.self) else { throw AuthError.invalidJSON("Invalid UTF-8 in form body.") }
                let pairs = URLEncoding.parsePairs(text)
                guard pairs.count <= JSONParser.defaultMaxObjectKeys else {
                    throw AuthError.invalidJSON("Too many form fields (more than \(JSONParser.defaultMaxObjectKeys)).")
                }
                for (k, v) in pairs { body[Self.camelCase(k)] = .string(v) }
            } else {
                let parsed: JSON
                do { parsed = try JSONParser.parse(request.body) } catch { throw AuthError.invalidJSON(error.description) }
                guard case .object(let o) = parsed else {
                    throw AuthError.invalidJSON("Expected a JSON object at the top level, got \(parsed.typeName).")
                }
                for (k, v) in o { body[Self.camelCase(k)] = v }
            }
        }

        // Project: the path's, else an admin's body targetProjectId, else the API key's.
        var projectId = emulator.defaultProjectId
        if let key = apiKey, let mapped = apiKeyProjects[key] { projectId = mapped }
        if let p = route.projectId {
            if route.access == .adminPath && !privileged {
                throw AuthError("INSUFFICIENT_PERMISSION", "Only authenticated requests can specify target_project_id.")
            }
            projectId = p
        } else if case .string(let target)? = body["targetProjectId"], !target.isEmpty {
            guard privileged else { throw AuthError("INSUFFICIENT_PERMISSION", "Only authenticated requests can specify target_project_id.") }
            projectId = target
        }
        guard Self.isValidProjectID(projectId) else { throw AuthError.invalidArgument("Invalid project ID: \(projectId.prefix(64))") }
        if let t = route.tenantId, !t.isEmpty, !Self.isValidProjectID(t) { throw AuthError("INVALID_TENANT_ID") }
        return Call(request: request, query: query, body: body, apiKey: apiKey, privileged: privileged, projectId: projectId,
                    pathTenant: route.tenantId.flatMap { $0.isEmpty ? nil : $0 }, pathParams: route.params, complete: complete)
    }

    /// Project and tenant ids: letters, digits, `-` and `_`, at most 128 characters.
    static func isValidProjectID(_ s: String) -> Bool {
        !s.isEmpty && s.utf8.count <= 128
            && s.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x2D || $0 == 0x5F }
    }

    /// `session_info` → `sessionInfo` (proto JSON accepts both spellings).
    static func camelCase(_ key: String) -> String {
        guard key.utf8.contains(UInt8(ascii: "_")) else { return key }
        var out = ""
        var upper = false
        for c in key {
            if c == "_" { upper = !out.isEmpty; continue }
            if upper { out += c.uppercased(); upper = false } else { out.append(c) }
        }
        return out
    }

    // MARK: rendering

    func render(_ reply: Reply, for request: HTTPRequest) -> HTTPResponse {
        var headers = [("Content-Type", reply.contentType)]
        headers.append(contentsOf: reply.headers)
        addCORS(&headers, request)
        let body = reply.raw ?? reply.json.map { $0.serialized() } ?? []
        return HTTPResponse(status: reply.status, headers: headers, body: body)
    }

    func render(error e: AuthError, for request: HTTPRequest) -> HTTPResponse {
        var headers = [("Content-Type", "application/json; charset=utf-8")]
        addCORS(&headers, request)
        return HTTPResponse(status: e.httpStatus, headers: headers, body: ErrorEnvelope.render(e).serialized())
    }

    func addCORS(_ headers: inout [(String, String)], _ request: HTTPRequest) {
        guard let origin = request.headers["origin"] else { return }
        headers.append(("Access-Control-Allow-Origin", origin))
        headers.append(("Vary", "Origin"))
    }

    /// CORS preflight, as the official emulator (`cors({origin:true})`) plus Private Network Access.
    func preflight(_ request: HTTPRequest) -> HTTPResponse {
        var headers: [(String, String)] = []
        if let origin = request.headers["origin"] {
            headers.append(("Access-Control-Allow-Origin", origin))
            headers.append(("Vary", "Origin, Access-Control-Request-Headers"))
        }
        headers.append(("Access-Control-Allow-Methods", "GET,HEAD,PUT,PATCH,POST,DELETE"))
        if let requested = request.headers["access-control-request-headers"] {
            headers.append(("Access-Control-Allow-Headers", requested))
        }
        if request.headers["access-control-request-private-network"] != nil {
            headers.append(("Access-Control-Allow-Private-Network", "true"))
        }
        headers.append(("Access-Control-Max-Age", "86400"))
        return HTTPResponse(status: 204, headers: headers)
    }
}

extension Substring {
    func trimmingSpaces() -> String {
        var s = self
        while s.first == " " || s.first == "\t" { s = s.dropFirst() }
        while s.last == " " || s.last == "\t" { s = s.dropLast() }
        return String(s)
    }
}
