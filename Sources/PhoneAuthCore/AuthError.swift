/// A Google API error: the exact code string clients map (`INVALID_CODE`, `SESSION_EXPIRED`, …), an optional
/// detail (rendered `CODE : detail`), and the HTTP status. Equality compares the code only.
public struct AuthError: Error, Sendable, Equatable, CustomStringConvertible {
    public let code: String
    public let detail: String?
    public let httpStatus: Int
    /// The `errors[0].reason` Google uses for this class of error.
    public let reason: String
    /// Free-text message for envelope-level errors (e.g. "The request is missing a valid API key.").
    let freeText: String?

    public init(_ code: String, _ detail: String? = nil, http: Int = 400, reason: String = "invalid") {
        self.code = code
        self.detail = detail
        self.httpStatus = http
        self.reason = reason
        self.freeText = nil
    }

    private init(code: String, message: String, http: Int, reason: String) {
        self.code = code
        self.detail = nil
        self.httpStatus = http
        self.reason = reason
        self.freeText = message
    }

    /// The `error.message` on the wire.
    public var message: String {
        if let freeText { return freeText }
        if let detail { return "\(code) : \(detail)" }
        return code
    }

    /// Google's canonical status name for the HTTP code.
    public var status: String {
        switch httpStatus {
        case 400: "INVALID_ARGUMENT"
        case 401: "UNAUTHENTICATED"
        case 403: "PERMISSION_DENIED"
        case 404: "NOT_FOUND"
        case 409: "ALREADY_EXISTS"
        case 429: "RESOURCE_EXHAUSTED"
        case 501: "UNIMPLEMENTED"
        case 503: "UNAVAILABLE"
        default: httpStatus >= 500 ? "INTERNAL" : "FAILED_PRECONDITION"
        }
    }

    public var description: String { "\(httpStatus) \(message)" }

    public static func == (a: AuthError, b: AuthError) -> Bool { a.code == b.code }

    // MARK: envelope-level errors

    public static func invalidJSON(_ detail: String) -> AuthError {
        AuthError(code: "INVALID_ARGUMENT", message: "Invalid JSON payload received. \(detail)", http: 400, reason: "parseError")
    }
    public static func invalidArgument(_ text: String) -> AuthError {
        AuthError(code: "INVALID_ARGUMENT", message: text, http: 400, reason: "invalid")
    }
    public static let missingAPIKey = AuthError(
        code: "PERMISSION_DENIED", message: "The request is missing a valid API key.", http: 403, reason: "forbidden")
    public static let missingCredential = AuthError(
        code: "UNAUTHENTICATED",
        message: "Request is missing required authentication credential. Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project.",
        http: 401, reason: "required")
    public static let invalidCredential = AuthError(
        code: "UNAUTHENTICATED",
        message: "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project.",
        http: 401, reason: "authError")
    public static let notFound = AuthError(code: "NOT_FOUND", message: "Not Found", http: 404, reason: "notFound")
    public static func notFound(_ text: String) -> AuthError { AuthError(code: "NOT_FOUND", message: text, http: 404, reason: "notFound") }
    public static let methodNotAllowed = AuthError(code: "NOT_FOUND", message: "Method Not Allowed", http: 405, reason: "notFound")
    public static func internalError(_ text: String = "Internal error encountered.") -> AuthError {
        AuthError(code: "INTERNAL", message: text, http: 500, reason: "backendError")
    }

    // MARK: phone-auth codes used in several places

    public static let invalidPhoneFormat = AuthError("INVALID_PHONE_NUMBER", "Invalid format.")
    public static let invalidSessionInfo = AuthError("INVALID_SESSION_INFO")
    public static let invalidCode = AuthError("INVALID_CODE")
    public static let sessionExpired = AuthError("SESSION_EXPIRED")
    public static let tooManyAttempts = AuthError("TOO_MANY_ATTEMPTS_TRY_LATER")
    public static let userNotFound = AuthError("USER_NOT_FOUND")
    public static let userDisabled = AuthError("USER_DISABLED")
    public static let tokenExpired = AuthError("TOKEN_EXPIRED")
    public static let invalidIDToken = AuthError("INVALID_ID_TOKEN")
}
