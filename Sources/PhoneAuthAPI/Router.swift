import EmulatorSupport
import HTTPServer
import PhoneAuthCore

/// Who may call a route.
enum Access: Sendable {
    /// API key (`?key=` / `x-goog-api-key`) or admin Bearer.
    case client
    /// API key only (Secure Token).
    case apiKey
    /// `Authorization: Bearer owner` only.
    case admin
    /// Client or admin; a path project needs admin (`INSUFFICIENT_PERMISSION` otherwise).
    case adminPath
    /// No credentials (keys, status).
    case open
    /// The emulator API (`/emulator/…`, export included): open, like the official emulator, unless `--admin-token`
    /// is set (then `Bearer <token>` only).
    case emulator

    /// Protected from other web origins (see `WebBoundary`): the emulator API and admin routes.
    var isProtected: Bool {
        switch self {
        case .admin, .adminPath, .emulator: true
        case .client, .apiKey, .open: false
        }
    }
}

enum BodyKind: Sendable { case none, json, jsonOrForm }

typealias Handler = @Sendable (PhoneAuthApp, Call) throws -> Reply

struct Route: Sendable {
    let access: Access
    let body: BodyKind
    /// Signs tokens: run on the signing pool, never on an event loop.
    let offload: Bool
    let handler: Handler
    var projectId: String? = nil
    var tenantId: String? = nil
    var params: [String: String] = [:]
    /// Legacy v3 path (iOS): replies carry `kind`.
    var legacy = false
    /// Bulk work (batch deletes and imports, wipes, full listings, export): runs on the worker pool in every signing
    /// mode, so one large request never holds an event loop (`offload` alone only applies with RS256 signing).
    var bulk = false

    /// Reads through `POST` (lookups, queries): a path project or tenant that does not exist is not created.
    var readOnly = false

    /// This route, marked as read-only.
    var reading: Route {
        var r = self
        r.readOnly = true
        return r
    }

    /// This route, marked as bulk work.
    var bulkWork: Route {
        var r = self
        r.bulk = true
        return r
    }
}

enum Router {
    enum Match {
        case route(Route)
        case methodNotAllowed
        case notFound
    }

    /// The hot client paths, matched with one hash lookup before any splitting.
    static let exact: [String: Route] = {
        var m: [String: Route] = [:]
        for op in ["accounts:sendVerificationCode", "accounts:signInWithPhoneNumber", "accounts:lookup", "accounts:signUp", "accounts:update",
                   "accounts:delete", "accounts:verifyClient"] {
            m["/identitytoolkit.googleapis.com/v1/" + op] = clientOperation(op)
        }
        m["/securetoken.googleapis.com/v1/token"] = Route(access: .apiKey, body: .jsonOrForm, offload: true, handler: SecureToken.grant)
        return m
    }()

    static func match(method: String, path: String) -> Match {
        if let r = exact[path] { return method == "POST" ? .route(r) : .methodNotAllowed }
        if path == "/" { return method == "GET" || method == "HEAD" ? .route(Route(access: .open, body: .none, offload: false, handler: Status.root)) : .methodNotAllowed }
        return matchSegments(method: method, path: path)
    }

    /// Whether a path leads to a protected route with any method (for preflights, which name the method to come).
    static func isProtected(method: String, path: String) -> Bool {
        for m in [method.uppercased(), "GET", "POST", "PATCH", "DELETE"] {
            if case .route(let r) = match(method: m, path: path), r.access.isProtected { return true }
        }
        return false
    }

    static func matchSegments(method: String, path: String) -> Match {
        let segs = path.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false).dropFirst()
            .map { URLEncoding.percentDecode(String(decoding: $0, as: UTF8.self), plusAsSpace: false) }
        guard let host = segs.first else { return .notFound }
        let rest = Array(segs.dropFirst())
        let m = method == "HEAD" ? "GET" : method
        switch host {
        case "":
            if segs.count == 1 { return m == "GET" ? .route(Route(access: .open, body: .none, offload: false, handler: Status.root)) : .methodNotAllowed }
        case "identitytoolkit.googleapis.com":
            return identityToolkit(m, rest)
        case "securetoken.googleapis.com":
            if rest == ["v1", "token"] {
                return m == "POST" ? .route(Route(access: .apiKey, body: .jsonOrForm, offload: true, handler: SecureToken.grant)) : .methodNotAllowed
            }
        case "www.googleapis.com":
            if rest.count == 4, rest[0] == "identitytoolkit", rest[1] == "v3", rest[2] == "relyingparty" {
                guard var r = clientOperation(rest[3]) else { return .notFound }
                r.legacy = true
                r.params["legacy"] = "1"
                return m == "POST" ? .route(r) : .methodNotAllowed
            }
            if rest == ["robot", "v1", "metadata", "x509", "securetoken@system.gserviceaccount.com"] {
                return m == "GET" ? .route(Route(access: .open, body: .none, offload: true, handler: PublicKeys.x509)) : .methodNotAllowed
            }
            if rest == ["service_accounts", "v1", "jwk", "securetoken@system.gserviceaccount.com"] {
                return m == "GET" ? .route(Route(access: .open, body: .none, offload: true, handler: PublicKeys.jwks)) : .methodNotAllowed
            }
        case "securetoken.google.com":
            if rest.count == 3, !rest[0].isEmpty, rest[1] == ".well-known", rest[2] == "openid-configuration" {
                guard m == "GET" else { return .methodNotAllowed }
                var r = Route(access: .open, body: .none, offload: false, handler: PublicKeys.openIDConfiguration)
                r.projectId = rest[0]
                return .route(r)
            }
        case "emulator":
            return emulator(m, rest)
        default:
            break
        }
        return .notFound
    }

    /// Client operations by their `accounts:<op>` / legacy v3 name.
    static func clientOperation(_ name: String) -> Route? {
        switch name {
        case "accounts:sendVerificationCode", "sendVerificationCode":
            return Route(access: .client, body: .json, offload: false, handler: SendVerificationCode.handle)
        case "accounts:signInWithPhoneNumber", "verifyPhoneNumber":
            return Route(access: .client, body: .json, offload: true, handler: SignInWithPhoneNumber.handle)
        case "accounts:lookup", "getAccountInfo":
            return Route(access: .client, body: .json, offload: true, handler: Lookup.handle)
        case "accounts:signUp", "signupNewUser":
            return Route(access: .client, body: .json, offload: true, handler: SignUp.handle)
        case "accounts:update", "setAccountInfo":
            return Route(access: .client, body: .json, offload: true, handler: UpdateAccount.handle)
        case "accounts:delete", "deleteAccount":
            return Route(access: .client, body: .json, offload: true, handler: DeleteAccount.handle)
        case "accounts:verifyClient", "verifyClient":
            return Route(access: .client, body: .json, offload: false, handler: VerifyClient.handle)
        default:
            return nil
        }
    }

    static func identityToolkit(_ m: String, _ rest: [String]) -> Match {
        guard let version = rest.first else { return .notFound }
        let tail = Array(rest.dropFirst())
        if version == "v1" {
            if tail.count == 1, tail[0].hasPrefix("accounts:") {
                guard let r = clientOperation(tail[0]) else { return .notFound }
                return m == "POST" ? .route(r) : .methodNotAllowed
            }
            if tail.count == 1, tail[0] == "recaptchaParams" {
                return m == "GET" ? .route(Route(access: .client, body: .none, offload: false, handler: RecaptchaConfig.legacyParams)) : .methodNotAllowed
            }
            if tail.count == 1, tail[0] == "projects" {
                return m == "GET" ? .route(Route(access: .client, body: .none, offload: false, handler: Status.projects)) : .methodNotAllowed
            }
            // Admin: projects/{p}[/tenants/{t}]/accounts[:op]
            if tail.count >= 3, tail[0] == "projects", !tail[1].isEmpty {
                var op = ""
                var tenant: String? = nil
                if tail.count == 3 {
                    op = tail[2]
                } else if tail.count == 5, tail[2] == "tenants" {
                    tenant = tail[3]
                    op = tail[4]
                } else {
                    return .notFound
                }
                guard case (var r, let method)? = adminOperation(op) else { return .notFound }
                r.projectId = tail[1]
                r.tenantId = tenant
                return m == method ? .route(r) : .methodNotAllowed
            }
        } else if version == "v2" {
            if tail == ["recaptchaConfig"] {
                return m == "GET" ? .route(Route(access: .client, body: .none, offload: false, handler: RecaptchaConfig.handle)) : .methodNotAllowed
            }
            if tail.count == 3, tail[0] == "projects", !tail[1].isEmpty, tail[2] == "config" {
                var r: Route
                switch m {
                case "GET": r = Route(access: .admin, body: .none, offload: false, handler: AdminConfig.get)
                case "PATCH": r = Route(access: .admin, body: .json, offload: false, handler: AdminConfig.patch)
                default: return .methodNotAllowed
                }
                r.projectId = tail[1]
                return .route(r)
            }
            if tail.count == 3, tail[0] == "projects", !tail[1].isEmpty, tail[2] == "tenants" {
                var r: Route
                switch m {
                case "GET": r = Route(access: .admin, body: .none, offload: false, handler: Tenants.list)
                case "POST": r = Route(access: .admin, body: .json, offload: false, handler: Tenants.create)
                default: return .methodNotAllowed
                }
                r.projectId = tail[1]
                return .route(r)
            }
            if tail.count == 4, tail[0] == "projects", !tail[1].isEmpty, tail[2] == "tenants", !tail[3].isEmpty {
                var r: Route
                switch m {
                case "GET": r = Route(access: .admin, body: .none, offload: false, handler: Tenants.get)
                case "PATCH": r = Route(access: .admin, body: .json, offload: false, handler: Tenants.patch)
                case "DELETE": r = Route(access: .admin, body: .none, offload: false, handler: Tenants.delete).bulkWork
                default: return .methodNotAllowed
                }
                r.projectId = tail[1]
                r.tenantId = tail[3]
                return .route(r)
            }
        }
        return .notFound
    }

    /// Admin operations under `/v1/projects/{p}[/tenants/{t}]/`, with their HTTP method.
    static func adminOperation(_ op: String) -> (Route, String)? {
        switch op {
        case "accounts": return (Route(access: .adminPath, body: .json, offload: false, handler: SignUp.handle), "POST")
        case "accounts:lookup": return (Route(access: .adminPath, body: .json, offload: true, handler: Lookup.handle).reading, "POST")
        case "accounts:update": return (Route(access: .adminPath, body: .json, offload: true, handler: UpdateAccount.handle), "POST")
        case "accounts:delete": return (Route(access: .adminPath, body: .json, offload: true, handler: DeleteAccount.handle), "POST")
        case "accounts:batchDelete": return (Route(access: .admin, body: .json, offload: false, handler: BatchAccounts.batchDelete).bulkWork, "POST")
        case "accounts:batchGet": return (Route(access: .admin, body: .none, offload: false, handler: BatchAccounts.batchGet).bulkWork, "GET")
        case "accounts:query": return (Route(access: .admin, body: .json, offload: false, handler: BatchAccounts.query).bulkWork.reading, "POST")
        case "accounts:batchCreate": return (Route(access: .admin, body: .json, offload: false, handler: BatchAccounts.batchCreate).bulkWork, "POST")
        default: return nil
        }
    }

    static func emulator(_ m: String, _ rest: [String]) -> Match {
        if rest.count == 2, rest[0] == "v1" {
            let r: Route
            switch (rest[1], m) {
            case ("clock", "GET"): r = Route(access: .emulator, body: .none, offload: false, handler: EmulatorControls.clock)
            case ("clock:advance", "POST"): r = Route(access: .emulator, body: .json, offload: false, handler: EmulatorControls.advanceClock)
            case ("clock:reset", "POST"): r = Route(access: .emulator, body: .json, offload: false, handler: EmulatorControls.resetClock)
            case ("keys:rotate", "POST"): r = Route(access: .emulator, body: .json, offload: true, handler: EmulatorControls.rotateKeys)
            case ("clock", _), ("clock:advance", _), ("clock:reset", _), ("keys:rotate", _): return .methodNotAllowed
            default: return .notFound
            }
            return .route(r)
        }
        if rest.count == 3, rest[0] == "v1", rest[1] == "projects", rest[2].hasSuffix(":export") {
            let project = String(rest[2].dropLast(":export".count))
            guard !project.isEmpty else { return .notFound }
            guard m == "POST" else { return .methodNotAllowed }
            var r = Route(access: .emulator, body: .json, offload: false, handler: ExportEndpoint.handle).bulkWork
            r.projectId = project
            return .route(r)
        }
        guard rest.count >= 4, rest[0] == "v1", rest[1] == "projects", !rest[2].isEmpty else { return .notFound }
        var resource = Array(rest.dropFirst(3))
        var tenant: String? = nil
        if resource.count == 3, resource[0] == "tenants", !resource[1].isEmpty {
            tenant = resource[1]
            resource = [resource[2]]
        }
        guard resource.count == 1 else { return .notFound }
        var r: Route
        switch (resource[0], m) {
        case ("config", "GET"): r = Route(access: .emulator, body: .none, offload: false, handler: EmulatorAPI.getConfig)
        case ("config", "PATCH"): r = Route(access: .emulator, body: .json, offload: false, handler: EmulatorAPI.patchConfig)
        case ("verificationCodes", "GET"): r = Route(access: .emulator, body: .none, offload: false, handler: EmulatorAPI.listCodes)
        case ("verificationCodes", "DELETE"): r = Route(access: .emulator, body: .none, offload: false, handler: EmulatorAPI.clearCodes).bulkWork
        case ("accounts", "DELETE"): r = Route(access: .emulator, body: .none, offload: false, handler: EmulatorAPI.wipeAccounts).bulkWork
        case ("verificationCodes:wait", "GET"): r = Route(access: .emulator, body: .none, offload: false, handler: EmulatorAPI.waitForCode)
        case ("pushNotifications", "GET"): r = Route(access: .emulator, body: .none, offload: false, handler: EmulatorControls.pushNotifications)
        case ("appCredentials", "POST"): r = Route(access: .emulator, body: .json, offload: false, handler: EmulatorControls.mintCredential)
        case ("config", _), ("verificationCodes", _), ("accounts", _), ("verificationCodes:wait", _), ("pushNotifications", _), ("appCredentials", _):
            return .methodNotAllowed
        default: return .notFound
        }
        r.projectId = rest[2]
        r.tenantId = tenant
        return .route(r)
    }
}
