import EmulatorSupport
import HTTPServer
import JWT
import PhoneAuthCore
#if canImport(Glibc)
import Glibc
#endif

/// The Firebase-compatible HTTP surface: authenticates, routes, runs handlers and renders Google envelopes.
public final class PhoneAuthApp: HTTPResponder {
    public static let version = ProductVersion.string
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
    /// `--admin-token`: when set, admin calls and the emulator API need `Bearer <token>`; `owner` and `ya29.` are refused.
    let adminToken: String?
    /// `--export-root`: `POST …:export` writes only below it. The resolved root first, then the path as configured
    /// (absolute paths may name either spelling).
    let exportRoots: [String]
    /// The browser boundary: allowed origins for protected routes, accepted `Host` names.
    let boundary: WebBoundary
    /// Blocking functions: the bounded pool and deadline their calls run with (BlockingCalls.swift).
    public let blocking: BlockingCalls
    /// Webhooks and the Functions emulator's auth triggers: the emulator's push sink (WebhookDelivery.swift).
    public let webhooks: WebhookDispatcher

    public init(emulator: Emulator, tokens: TokenService, signingPool: WorkerPool?, apiKeyProjects: [String: String] = [:], logger: Logger,
                saveSigningKey: (@Sendable (SigningKey) throws -> Void)? = nil, adminToken: String? = nil, exportRoot: String? = nil,
                boundary: WebBoundary = WebBoundary(), blocking: BlockingCalls = BlockingCalls(), webhooks: WebhookDispatcher? = nil) {
        self.blocking = blocking
        self.webhooks = webhooks ?? WebhookDispatcher(emulator: emulator, logger: logger)
        emulator.events.setPushSink(self.webhooks)
        self.exportRoots = Self.resolveExportRoot(exportRoot)
        self.emulator = emulator
        self.tokens = tokens
        self.signingPool = signingPool
        self.apiKeyProjects = apiKeyProjects
        self.logger = logger
        self.saveSigningKey = saveSigningKey
        self.adminToken = adminToken
        self.boundary = boundary
    }

    public func respond(to request: HTTPRequest, context: ResponseContext) -> HTTPResponse? {
        respond(to: request, deliver: { context.complete($0) }, onClose: { context.onClose($0) }, runOnLoop: { context.runOnLoop($0) })
    }

    /// `respond(to:context:)` with the two things a context does as closures (tests deliver deferred replies here).
    func respond(to request: HTTPRequest, deliver: @escaping @Sendable (HTTPResponse) -> Void,
                 onClose: @escaping @Sendable (@escaping @Sendable () -> Void) -> Void = { _ in },
                 runOnLoop: @escaping @Sendable (@escaping @Sendable () -> Void) -> Bool = { _ in false }) -> HTTPResponse? {
        let seen = BoundaryHeaders(request.headers)
        if request.method == "OPTIONS" { return preflight(request, seen) }
        let match = Router.match(method: request.method, path: request.path)
        // The browser boundary, before any handler runs (so a refused request has no effect).
        var protected = seen.authorization
        if case .route(let r) = match, r.access.isProtected { protected = true }
        // A request from a web page whose origin is not allowed ("foreign") may still use the client-facing endpoints,
        // but creates no tenants and, with unsigned tokens, may not present an ID token (see `makeCall`).
        let foreignOrigin: Bool
        switch boundary.verdict(hosts: seen.hosts, origins: seen.origins, protected: protected) {
        case .refuseHost: return refuse(.hostNotAllowed, host: true, request, seen)
        case .refuseOrigin: return refuse(.originNotAllowed, host: false, request, seen)
        case .allow(_, let trusted): foreignOrigin = !seen.origins.isEmpty && !trusted
        }
        switch match {
        case .notFound:
            return render(error: AuthError(.routeNotFound), for: request)
        case .methodNotAllowed:
            return render(error: AuthError(.methodNotAllowed), for: request)
        case .route(let route):
            guard let pool = signingPool, route.run == .bulk || (route.run != .loop && tokens.mode == .rs256) else {
                return handle(request, route, foreignOrigin: foreignOrigin, deliver: deliver, onClose: onClose)
            }
            let job: @Sendable () -> Void = { [self] in
                if let r = self.handle(request, route, foreignOrigin: foreignOrigin, deliver: deliver, onClose: onClose) { deliver(r) }
            }
            // Signing work runs later on this event loop when it has room (no hand-off, no context switch; cheap
            // requests that arrive meanwhile still go first), else on the pool. Bulk work, and anything before the
            // first key exists (waiting for it blocks), always goes to the pool.
            let later: @Sendable () -> Void = { [tokens] in
                if route.run == .bulk || !tokens.hasKeys || !runOnLoop(job) { pool.submit(job) }
            }
            if route.run == .adaptive {
                return handle(request, route, foreignOrigin: foreignOrigin, deliver: deliver, onClose: onClose, offLoop: later)
            }
            later()
            return nil
        }
    }

    /// Runs a routed request (on the loop, or on the signing pool); nil when the answer comes later through `deliver`.
    /// `foreignOrigin`: the request came from a web page whose origin the boundary does not allow (see `makeCall`).
    ///
    /// With a journal (`--data-dir`) every answer, success or error, waits until what the request wrote or read is
    /// durable (see PhoneAuthCore/Transaction.swift): the handler runs inside a `DurabilityScope`, and if its
    /// tickets are still being committed the answer is delivered later from the journal's committer thread, so no
    /// event loop and no pool thread ever waits for the disk. A rolled-back commit turns the answer into a 500.
    /// `offLoop`: on an event loop for an `.adaptive` route, what moves the request off the fast path (to run later on
    /// the loop, or on the signing pool).
    func handle(_ request: HTTPRequest, _ route: Route, foreignOrigin: Bool = false, deliver: @escaping @Sendable (HTTPResponse) -> Void,
                onClose: @escaping @Sendable (@escaping @Sendable () -> Void) -> Void, offLoop: (@Sendable () -> Void)? = nil) -> HTTPResponse? {
        guard emulator.journal != nil else { return run(request, route, foreignOrigin: foreignOrigin, deliver: deliver, onClose: onClose, offLoop: offLoop) }
        let scope = DurabilityScope()
        let durable: @Sendable (HTTPResponse) -> Void = { [self] response in
            if let now = afterDurable(scope, request, response, deliver: deliver) { deliver(now) }
        }
        let response = DurabilityScope.$current.withValue(scope) {
            run(request, route, foreignOrigin: foreignOrigin, deliver: durable, onClose: onClose, offLoop: offLoop)
        }
        guard let response else { return nil }
        return afterDurable(scope, request, response, deliver: deliver)
    }

    /// `response` if what `scope` depends on is durable now; otherwise nil, and `deliver` gets it (or a 500 if it was
    /// rolled back) once the commit is decided.
    private func afterDurable(_ scope: DurabilityScope, _ request: HTTPRequest, _ response: HTTPResponse,
                              deliver: @escaping @Sendable (HTTPResponse) -> Void) -> HTTPResponse? {
        let handoff = Locked<(returned: Bool, now: HTTPResponse?)>((false, nil))
        emulator.whenDurable(scope) { [self] ok in
            let answer = ok ? response : render(error: Emulator.notDurable, for: request)
            let later = handoff.withLock { h -> Bool in
                if h.returned { return true }
                h.now = answer
                return false
            }
            if later { deliver(answer) }
        }
        return handoff.withLock { h in
            h.returned = true
            return h.now
        }
    }

    private func run(_ request: HTTPRequest, _ route: Route, foreignOrigin: Bool, deliver: @escaping @Sendable (HTTPResponse) -> Void,
                     onClose: @escaping @Sendable (@escaping @Sendable () -> Void) -> Void, offLoop: (@Sendable () -> Void)?) -> HTTPResponse? {
        do {
            var call = try makeCall(request, route, foreignOrigin: foreignOrigin) { [self] reply in deliver(self.render(reply, for: request)) }
            call.onClose = onClose
            call.costlyWorkMovesOffLoop = offLoop != nil
            let reply = try route.handler(self, call)
            if reply.isDeferred { return nil }
            return render(reply, for: request)
        } catch is MoveOffLoop {
            offLoop?()
            return nil
        } catch let r as ForeignOriginRefusal {
            return refuse(r.error, host: false, request, BoundaryHeaders(request.headers))
        } catch {
            let context = [("method", WebBoundary.printable(request.method)), ("path", WebBoundary.printable(request.path))]
            return render(error: AuthError.answering(error, logger: logger, context: context), for: request)
        }
    }

    /// - Parameter foreignOrigin: the request came from a web page whose origin the boundary does not allow.
    func makeCall(_ request: HTTPRequest, _ route: Route, foreignOrigin: Bool = false,
                  complete: @escaping @Sendable (Reply) -> Void) throws -> Call {
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
            } else if route.access != .open && (route.access != .emulator || adminToken != nil) {
                throw AuthError(.invalidCredential)
            }
        }
        var apiKey = query.last(where: { $0.0 == "key" })?.1
        if apiKey?.isEmpty ?? true { apiKey = request.headers["x-goog-api-key"] }
        if apiKey?.isEmpty ?? false { apiKey = nil }
        switch route.access {
        case .open: break
        case .emulator: guard privileged || adminToken == nil else { throw AuthError(.missingCredential) }
        case .apiKey: guard apiKey != nil else { throw AuthError(.missingAPIKey) }
        case .client, .adminPath: guard apiKey != nil || privileged else { throw AuthError(.missingAPIKey) }
        case .admin: guard privileged else { throw AuthError(.missingCredential) }
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

        // Unsigned ID tokens (`--token-signing none`) are forgeable by anyone: a foreign web page may not present one
        // (it could act as any user), before anything else happens. Requests without an Origin (SDKs, curl) and
        // allowed origins keep working; `Authorization` headers are already refused for foreign origins.
        if foreignOrigin, tokens.mode == .none, let t = body["idToken"], t != .null {
            throw ForeignOriginRefusal(.unsignedTokenOriginNotAllowed)
        }

        // Project: the path's, else an admin's body targetProjectId, else the API key's.
        var projectId = emulator.defaultProjectId
        if let key = apiKey, let mapped = apiKeyProjects[key] { projectId = mapped }
        if let p = route.params.project {
            if route.access == .adminPath && !privileged {
                throw AuthError(.insufficientPermission, "Only authenticated requests can specify target_project_id.")
            }
            projectId = p
        } else if case .string(let target)? = body["targetProjectId"], !target.isEmpty {
            guard privileged else { throw AuthError(.insufficientPermission, "Only authenticated requests can specify target_project_id.") }
            projectId = target
        }
        // Identifiers: validated and admitted here (path and body alike; body tenants in `Call.tenant()`).
        let pathTenant = try Identifiers.tenantID(route.params.tenant)
        try admitPathKey(StoreKey(projectId: try Identifiers.projectID(projectId), tenantId: pathTenant), route)
        var call = Call(request: request, query: query, body: body, apiKey: apiKey, privileged: privileged, projectId: projectId,
                        pathTenant: pathTenant, params: route.params, legacy: route.legacy, emulator: emulator, complete: complete)
        call.foreignOrigin = foreignOrigin
        return call
    }

    /// A new project named by a path or `targetProjectId` must fit `--max-projects`; a path tenant must be allowed
    /// to exist (cap, `tenants.createOnFirstUse`). Writes create the store here, so the caps are exact; reads
    /// (`RouteRow.readOnly`: every GET, and the POST lookups and queries) allocate nothing. The v2 admin resources
    /// (tenants, provider configurations) answer `TENANT_NOT_FOUND` themselves (`RouteRow.isTenantResource`: told by
    /// the route's row, not by the request's raw path, which may spell the same route with percent-escapes).
    func admitPathKey(_ key: StoreKey, _ route: Route) throws(AuthError) {
        let create = !route.readOnly
        if key.tenantId != nil && !route.row.isTenantResource {
            try emulator.admit(key, create: create)
        } else if key.projectId != emulator.defaultProjectId {
            try emulator.admit(StoreKey(projectId: key.projectId), create: create)
        }
    }

    /// Project and tenant ids: letters, digits, `-` and `_`, at most 128 characters (see `Identifiers`).
    static func isValidProjectID(_ s: String) -> Bool { Identifiers.isValidProjectID(s) }

    /// The export root (default: the working directory) as an absolute, symlink-free path, plus its spelling.
    static func resolveExportRoot(_ configured: String?) -> [String] {
        var given = configured ?? "."
        if !given.hasPrefix("/") {
            var buf = [CChar](repeating: 0, count: 4096)
            if getcwd(&buf, buf.count) != nil {
                let cwd = String(decoding: buf.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
                given = given == "." ? cwd : cwd + "/" + given
            }
        }
        guard !Files.hasNUL(given), let real = realpath(given, nil) else { return [given] }
        defer { free(real) }
        let resolved = String(cString: real)
        return resolved == given ? [resolved] : [resolved, given]
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
        var response = HTTPResponse(status: reply.status, headers: headers, body: body)
        response.stream = reply.stream
        return response
    }

    func render(error e: AuthError, for request: HTTPRequest) -> HTTPResponse {
        var headers = [("Content-Type", "application/json; charset=utf-8")]
        addCORS(&headers, request)
        return HTTPResponse(status: e.wire.http, headers: headers, body: e.wire.json.serialized())
    }

    /// Reflects the request's `Origin`. Requests from an origin that may not reach their route never get here: they
    /// are refused in `respond` without CORS headers.
    func addCORS(_ headers: inout [(String, String)], _ request: HTTPRequest) {
        guard let origin = request.headers["origin"], request.headers.values("origin").count == 1 else { return }
        headers.append(("Access-Control-Allow-Origin", origin))
        headers.append(("Vary", "Origin"))
    }

    /// A request refused at the browser boundary: 403 `PERMISSION_DENIED`, no CORS headers, and a log line.
    func refuse(_ e: AuthError, host: Bool, _ request: HTTPRequest, _ seen: BoundaryHeaders) -> HTTPResponse {
        logger.notice(host ? "refused a request for another Host (DNS rebinding?)" : "refused a cross-origin request",
                      [("method", WebBoundary.printable(request.method)), ("path", WebBoundary.printable(request.path)),
                       ("host", seen.hosts.map(WebBoundary.printable).joined(separator: ",")),
                       ("origin", seen.origins.map(WebBoundary.printable).joined(separator: ","))])
        return HTTPResponse(status: e.wire.http, headers: [("Content-Type", "application/json; charset=utf-8")],
                            body: e.wire.json.serialized())
    }

    /// CORS preflight, as the official emulator (`cors({origin:true})`) for the client-facing Google endpoints. For
    /// protected routes (or a request that will carry `Authorization`) only an allowed origin gets an answer, and Private
    /// Network Access (a public page reaching this loopback server) is granted to allowed origins only.
    func preflight(_ request: HTTPRequest, _ seen: BoundaryHeaders) -> HTTPResponse {
        let requested = request.headers["access-control-request-headers"].map(Self.headerNames) ?? []
        let protected = seen.authorization || requested.contains("authorization")
            || Router.isProtected(path: request.path)
        switch boundary.verdict(hosts: seen.hosts, origins: seen.origins, protected: protected) {
        case .refuseHost: return refuse(.hostNotAllowed, host: true, request, seen)
        case .refuseOrigin: return refuse(.originNotAllowed, host: false, request, seen)
        case .allow(let reflect, let trusted):
            var headers: [(String, String)] = []
            if let reflect {
                headers.append(("Access-Control-Allow-Origin", reflect))
                headers.append(("Vary", "Origin, Access-Control-Request-Headers, Access-Control-Request-Private-Network"))
            }
            headers.append(("Access-Control-Allow-Methods", "GET,HEAD,PUT,PATCH,POST,DELETE"))
            if !requested.isEmpty {
                headers.append(("Access-Control-Allow-Headers", requested.joined(separator: ",")))
            }
            if trusted, request.headers["access-control-request-private-network"] != nil {
                headers.append(("Access-Control-Allow-Private-Network", "true"))
            }
            headers.append(("Access-Control-Max-Age", "86400"))
            return HTTPResponse(status: 204, headers: headers)
        }
    }

    /// `Access-Control-Request-Headers` as lowercase header names; anything that is not a header name is dropped.
    static func headerNames(_ value: String) -> [String] {
        value.split(separator: ",").prefix(64).compactMap { item -> String? in
            let name = item.trimmingSpaces().lowercased()
            guard !name.isEmpty, name.utf8.count <= 128, name.utf8.allSatisfy(Self.isTokenByte) else { return nil }
            return name
        }
    }

    /// RFC 9110 `tchar`.
    static func isTokenByte(_ b: UInt8) -> Bool {
        WebBoundary.isAlnum(b) || "!#$%&'*+-.^_`|~".utf8.contains(b)
    }
}

/// The headers the browser boundary looks at, found in one pass.
struct BoundaryHeaders {
    var hosts: [String] = []
    var origins: [String] = []
    /// Any `Authorization` header: credentials (the Firebase client SDKs never send one).
    var authorization = false

    init(_ headers: HTTPHeaders) {
        for e in headers {
            switch e.name.utf8.count {
            case 4 where HTTPHeaders.equalsIgnoringASCIICase(e.name, "host"): hosts.append(e.value)
            case 6 where HTTPHeaders.equalsIgnoringASCIICase(e.name, "origin"): origins.append(e.value)
            case 13 where HTTPHeaders.equalsIgnoringASCIICase(e.name, "authorization"): authorization = true
            default: break
            }
        }
    }
}

extension AuthError {
    static let originNotAllowed = AuthError(
        .permissionDenied,
        "Origin not allowed: the emulator API and admin calls accept browser requests only from http(s)://localhost, 127.0.0.1 and [::1] (any port), the server's own address, and origins added with --allow-origin.")
    static let unsignedTokenOriginNotAllowed = AuthError(
        .permissionDenied,
        "Origin not allowed: with --token-signing none, ID tokens are unsigned, so requests carrying one are accepted only without an Origin or from http(s)://localhost, 127.0.0.1, [::1], the server's own address and origins added with --allow-origin.")
    static let hostNotAllowed = AuthError(
        .permissionDenied,
        "Host not allowed: the emulator answers requests addressed to an IP address, localhost, or a name added with --allow-host (DNS rebinding protection).")
}
