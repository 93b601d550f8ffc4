import EmulatorSupport
import HTTPServer
import PhoneAuthCore

/// How an `AuthError` travels: the one place that knows HTTP statuses, Google's canonical status names, `reason`
/// strings and message shapes. Handlers and the domain throw typed codes; the API renders them here.
struct ErrorWire: Sendable, Equatable {
    let http: Int
    let reason: String
    let message: String

    /// Google's canonical status name for the HTTP code (`error.status`).
    var status: String { Self.canonicalStatus(http) }

    static func canonicalStatus(_ http: Int) -> String {
        switch http {
        case 400: "INVALID_ARGUMENT"
        case 401: "UNAUTHENTICATED"
        case 403: "PERMISSION_DENIED"
        case 404: "NOT_FOUND"
        case 408: "DEADLINE_EXCEEDED"
        case 409: "ALREADY_EXISTS"
        case 413, 431: "OUT_OF_RANGE"
        case 429: "RESOURCE_EXHAUSTED"
        case 501: "UNIMPLEMENTED"
        case 503: "UNAVAILABLE"
        default: http >= 500 ? "INTERNAL" : "FAILED_PRECONDITION"
        }
    }

    static let credentialHelp = "Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project."

    init(http: Int, reason: String, message: String) {
        self.http = http
        self.reason = reason
        self.message = message
    }

    init(_ e: AuthError) {
        switch e.code {
        // The server's fault (a blocking function that could not be used): the official emulator's InternalError.
        case _ where e.serverFault: self.init(http: 500, reason: "backendError", message: e.description)
        // Request-level failures: free-text messages.
        case .malformedJSON: self.init(http: 400, reason: "parseError", message: "Invalid JSON payload received. \(e.detail ?? "")")
        case .invalidRequest: self.init(http: 400, reason: "invalid", message: e.detail ?? "Invalid argument.")
        case .missingAPIKey: self.init(http: 403, reason: "forbidden", message: "The request is missing a valid API key.")
        case .missingCredential:
            self.init(http: 401, reason: "required", message: "Request is missing required authentication credential. \(Self.credentialHelp)")
        case .invalidCredential:
            self.init(http: 401, reason: "authError", message: "Request had invalid authentication credentials. \(Self.credentialHelp)")
        case .routeNotFound: self.init(http: 404, reason: "notFound", message: e.detail ?? "Not Found")
        case .methodNotAllowed: self.init(http: 405, reason: "notFound", message: "Method Not Allowed")
        // A carrier's refusal, as production answers it (the JS SDK turns it into `auth/error-code:-39`).
        case .smsNotDelivered: self.init(http: 503, reason: "backendError", message: "Error code: 39")
        case .internalFailure: self.init(http: 500, reason: "backendError", message: e.detail ?? "Internal error encountered.")
        // What the emulator does not do: the text alone (the official emulator's NotImplementedError; the JS SDK turns
        // it into `auth/<the-text-dashed>` there and here alike).
        case .notImplemented: self.init(http: 501, reason: "unimplemented", message: e.detail ?? "Not implemented.")
        // Google codes: `CODE : detail`, 400 unless the code says otherwise.
        default: self.init(http: Self.httpStatus(e.code), reason: Self.reason(e.code), message: e.description)
        }
    }

    static func httpStatus(_ code: AuthError.Code) -> Int {
        switch code {
        case .tenantNotFound, .configurationNotFound: 404
        case .configurationExists: 409
        case .permissionDenied: 403
        case .resourceExhausted: 429
        case .notImplemented: 501
        case .internal, .internalError: 500
        case .unavailable: 503
        default: 400
        }
    }

    static func reason(_ code: AuthError.Code) -> String {
        switch code {
        case .tenantNotFound, .configurationNotFound: "notFound"
        case .configurationExists: "conflict"
        case .permissionDenied: "forbidden"
        case .resourceExhausted: "rateLimitExceeded"
        case .notImplemented: "unimplemented"
        default: "invalid"
        }
    }

    /// Google's error envelope.
    var json: JSON {
        [
            "error": [
                "code": .int(http),
                "message": .string(message),
                "errors": [["message": .string(message), "domain": "global", "reason": .string(reason)]],
                "status": .string(status),
            ]
        ]
    }

    /// An HTTP-level failure (the HTTP server's parse errors, timeouts, limits and connection caps) in the same envelope: the hook
    /// the API gives the server (`ConnectionPolicy.renderError`), which itself knows nothing of Google.
    static let renderParseError: @Sendable (HTTPParseError) -> HTTPResponse = { e in
        let wire = ErrorWire(http: e.status, reason: e.status == 503 ? "backendError" : "badRequest", message: e.message)
        return HTTPResponse(status: e.status, headers: [("Content-Type", "application/json; charset=utf-8")],
                            body: wire.json.serialized(), closeConnection: true)
    }
}

extension PhoneAuthApp {
    /// The HTTP server's own failures (malformed requests, timeouts, limits) in Google's envelope: give this to
    /// `ConnectionPolicy.renderError`.
    public static let renderHTTPError: @Sendable (HTTPParseError) -> HTTPResponse = ErrorWire.renderParseError
}

extension AuthError {
    /// The wire form of this error.
    var wire: ErrorWire { ErrorWire(self) }

    /// What anything a handler throws answers — the one mapping, for the loop, the pools and deferred replies alike:
    /// an `AuthError` as it is (an internal failure is also logged, with where it was raised), anything else logged
    /// and answered as an internal error. `context`: log fields naming the request (printable).
    static func answering(_ error: any Error, logger: Logger, context: [(String, String)] = []) -> AuthError {
        if let e = error as? AuthError {
            if e.code == .internalFailure { logger.error("internal error", context + [("error", e.description), ("at", e.origin)]) }
            return e
        }
        logger.error("internal error", context + [("error", String(describing: error))])
        return .internalError()
    }
}

extension Reply {
    /// An error's reply: its envelope and HTTP status (ErrorWire).
    init(error e: AuthError) {
        let w = e.wire
        self.init(w.json, status: w.http)
    }
}

extension AuthError.Code {
    // Codes that only a scenario number raises (ErrorWire gives them their statuses).
    static let internalError = Self("INTERNAL_ERROR")
    static let `internal` = Self("INTERNAL")
    static let unavailable = Self("UNAVAILABLE")
}
