import EmulatorSupport
import HTTPServer
import PhoneAuthCore

/// One API call after routing and authentication: the parsed body plus who is calling and for which project.
struct Call: Sendable {
    let request: HTTPRequest
    let query: [(String, String)]
    var body: JSONObject
    let apiKey: String?
    /// Authenticated with `Authorization: Bearer owner` (admin).
    let privileged: Bool
    var projectId: String
    /// `/tenants/{t}/` from the path, if any (validated).
    let pathTenant: String?
    /// The route's path parameters, percent-decoded once by the router: what handlers read of the path (never
    /// `request.path`, whose raw spelling may differ from what routed).
    var params = PathParams()
    /// Came by a legacy v3 path (`Route.legacy`): replies carry `kind`.
    let legacy: Bool
    /// Admits the tenants this call names (validity, caps, `tenants.createOnFirstUse`).
    let emulator: Emulator
    /// Answers a deferred call later (see `Reply.deferred`), from any thread.
    let complete: @Sendable (Reply) -> Void
    /// Registers what to run if the client goes away before a deferred call is answered (`ResponseContext.onClose`).
    var onClose: @Sendable (@escaping @Sendable () -> Void) -> Void = { _ in }
    /// From a web page whose `Origin` the browser boundary does not allow: it may use existing tenants but never
    /// creates one (a page could otherwise fill the per-project tenant cap, persistently with `--data-dir`).
    var foreignOrigin = false
    /// Runs on an event loop for an `.adaptive` route: costly work moves the request to the signing pool.
    var costlyWorkMovesOffLoop = false

    /// Called by an `.adaptive` handler before costly work (a signature, a password hash) and before it changes
    /// anything: on an event loop this ends the call here, and the request runs again on the signing pool.
    func beforeCostlyWork() throws(MoveOffLoop) {
        if costlyWorkMovesOffLoop { throw MoveOffLoop() }
    }

    func queryValue(_ name: String) -> String? { query.last(where: { $0.0 == name })?.1 }
    func queryValues(_ name: String) -> [String] { query.filter { $0.0 == name }.map(\.1) }

    /// A string field; integral numbers are accepted as their decimal text (as the official emulator does).
    func string(_ name: String) throws(AuthError) -> String? {
        guard let v = body[name] else { return nil }
        switch v {
        case .null: return nil
        case .string(let s): return s
        case .number: if let n = v.int64Value { return String(n) }
        default: break
        }
        throw AuthError.invalidJSON("Invalid value at '\(name)' (TYPE_STRING), \(v.serializedString.prefix(100))")
    }

    func bool(_ name: String) throws(AuthError) -> Bool? {
        guard let v = body[name] else { return nil }
        switch v {
        case .null: return nil
        case .bool(let b): return b
        default: throw AuthError.invalidJSON("Invalid value at '\(name)' (TYPE_BOOL), \(v.serializedString.prefix(100))")
        }
    }

    func object(_ name: String) throws(AuthError) -> JSONObject? {
        guard let v = body[name] else { return nil }
        switch v {
        case .null: return nil
        case .object(let o): return o
        default: throw AuthError.invalidJSON("Invalid value at '\(name)' (type.googleapis.com/\(name)), \(v.serializedString.prefix(100))")
        }
    }

    /// A repeated string field; a single string is accepted as a one-element list.
    func strings(_ name: String) throws(AuthError) -> [String] {
        guard let v = body[name] else { return [] }
        switch v {
        case .null: return []
        case .string(let s): return [s]
        case .array(let items):
            var out: [String] = []
            for i in items {
                guard let s = i.stringValue else { throw AuthError.invalidJSON("Invalid value at '\(name)' (TYPE_STRING), \(i.serializedString.prefix(100))") }
                out.append(s)
            }
            return out
        default:
            throw AuthError.invalidJSON("Invalid value at '\(name)' (TYPE_STRING), \(v.serializedString.prefix(100))")
        }
    }

    /// The tenant of this call: the path's, else the body's `tenantId`; both given and different → `TENANT_ID_MISMATCH`.
    /// The one way handlers learn a tenant: the id is validated (`INVALID_TENANT_ID`) and admitted, so a valid
    /// unknown tenant is created on first use within the per-project cap, or `TENANT_NOT_FOUND` when the project's
    /// `tenants.createOnFirstUse` is off.
    func tenant() throws(AuthError) -> String? {
        let bodyTenant = try Identifiers.tenantID(try string("tenantId"))
        if let p = pathTenant, let b = bodyTenant, p != b { throw AuthError(.tenantIdMismatch) }
        guard let t = pathTenant ?? bodyTenant else { return nil }
        let key = StoreKey(projectId: projectId, tenantId: t)
        if foreignOrigin, emulator.existingStore(key) == nil {
            _ = try Identifiers.projectID(projectId)
            throw AuthError.tenantNotCreatedForForeignOrigin
        }
        try emulator.admit(key, create: true)
        return t
    }

    /// `tenant()` for calls that only read: validated and checked the same way (`TENANT_NOT_FOUND` when tenants are
    /// not created on first use), but nothing is created; a missing tenant reads as an empty one.
    func readTenant() throws(AuthError) -> String? {
        let bodyTenant = try Identifiers.tenantID(try string("tenantId"))
        if let p = pathTenant, let b = bodyTenant, p != b { throw AuthError(.tenantIdMismatch) }
        guard let t = pathTenant ?? bodyTenant else { return nil }
        try emulator.admit(StoreKey(projectId: projectId, tenantId: t), create: false)
        return t
    }

    /// The path's tenant, else the `?tenantId=` query parameter (GET calls), validated and admitted like `tenant()`.
    func queryTenant() throws(AuthError) -> String? {
        let queried = try Identifiers.tenantID(queryValue("tenantId"))
        guard let t = pathTenant ?? queried else { return nil }
        try emulator.admit(StoreKey(projectId: projectId, tenantId: t), create: false)
        return t
    }

    func storeKey() throws(AuthError) -> StoreKey { try enabled(StoreKey(projectId: projectId, tenantId: try tenant())) }

    /// `storeKey()` for reads: creates nothing.
    func readStoreKey() throws(AuthError) -> StoreKey { try enabled(StoreKey(projectId: projectId, tenantId: try readTenant())) }

    /// `key`, unless it is a tenant with `disableAuth`: `PROJECT_DISABLED` before anything else of the request is read
    /// (production: its users cannot sign in, and its admins cannot manage its users; the official emulator's order).
    func enabled(_ key: StoreKey) throws(AuthError) -> StoreKey {
        if key.tenantId != nil, emulator.tenantSettings(key)?.disableAuth == true { throw AuthError(.projectDisabled) }
        return key
    }
}

/// What a handler answers: a status, a JSON body (or raw bytes) and extra headers.
/// Thrown by `Call.beforeCostlyWork()`: the request runs again on the signing pool.
struct MoveOffLoop: Error {}

struct Reply: Sendable {
    /// The handler will answer later through `Call.complete` (long polls); nothing is sent now.
    static let deferred: Reply = { var r = Reply(.null); r.isDeferred = true; return r }()
    var isDeferred = false
    var status = 200
    var json: JSON?
    var raw: [UInt8]? = nil
    var contentType = "application/json; charset=utf-8"
    var headers: [(String, String)] = []
    /// A body produced over time (the event stream): `raw` is ignored.
    var stream: HTTPStreamBody? = nil

    init(_ json: JSON, status: Int = 200, headers: [(String, String)] = []) {
        self.json = json
        self.status = status
        self.headers = headers
    }

    /// A JSON body already serialized (`JSONObjectBytes`).
    init(json bytes: [UInt8], status: Int = 200) {
        self.status = status
        self.raw = bytes
    }

    init(status: Int, raw: [UInt8], contentType: String, headers: [(String, String)] = []) {
        self.status = status
        self.raw = raw
        self.contentType = contentType
        self.headers = headers
    }
}

extension AuthError {
    /// A foreign web page named a tenant that does not exist (404, as any missing tenant).
    static let tenantNotCreatedForForeignOrigin = AuthError(
        .tenantNotFound,
        "Tenants are created on first use only by requests without an Origin header or from an allowed origin (localhost, 127.0.0.1, [::1], the server's own address, --allow-origin); create it with the tenants API.")
}
