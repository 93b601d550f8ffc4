/// A failure the domain reports: a code clients map (`INVALID_CODE`, `SESSION_EXPIRED`, …), an optional detail, and
/// where it was raised. The domain says *what* went wrong; how it travels (HTTP status, Google status, `reason`,
/// message) is decided in one place in the API layer (`PhoneAuthAPI/ErrorWire.swift`). Equality compares the code.
public struct AuthError: Error, Sendable, Equatable, CustomStringConvertible {
    /// An error code. The constants (ErrorCodes.swift) are Google's codes as clients see them; a few more name
    /// request-level failures whose wire message is free text (`invalidRequest`, `malformedJSON`, …). A scenario
    /// number in the config may name any code.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(_ rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }
    }

    public let code: Code
    public let detail: String?
    /// The failure is the server's or a service's it called, not the request's: the API answers 500 with this
    /// error's `CODE : detail` whatever its code's own status (a blocking function that timed out, could not be
    /// reached or answered non-JSON). A typed flag: nothing decides by the detail's text.
    public let serverFault: Bool
    /// Where the error was raised (for logs and test failures; never sent).
    public let file: StaticString
    public let line: UInt

    public init(_ code: Code, _ detail: String? = nil, serverFault: Bool = false, file: StaticString = #fileID, line: UInt = #line) {
        self.code = code
        self.detail = detail
        self.serverFault = serverFault
        self.file = file
        self.line = line
    }

    /// `CODE : detail` (or the code alone), as Google writes coded errors.
    public var description: String { detail.map { "\(code.rawValue) : \($0)" } ?? code.rawValue }

    /// Where it was raised, for a log line.
    public var origin: String { "\(file):\(line)" }

    public static func == (a: AuthError, b: AuthError) -> Bool { a.code == b.code }

    // MARK: request-level failures (the wire message is the detail itself)

    /// A body that is not valid JSON, or a field of the wrong JSON type.
    public static func invalidJSON(_ detail: String, file: StaticString = #fileID, line: UInt = #line) -> AuthError {
        AuthError(.malformedJSON, detail, file: file, line: line)
    }
    /// A request-level argument error whose message is free text.
    public static func invalidArgument(_ text: String, file: StaticString = #fileID, line: UInt = #line) -> AuthError {
        AuthError(.invalidRequest, text, file: file, line: line)
    }
    public static func notFound(_ text: String, file: StaticString = #fileID, line: UInt = #line) -> AuthError {
        AuthError(.routeNotFound, text, file: file, line: line)
    }
    public static func internalError(_ text: String? = nil, file: StaticString = #fileID, line: UInt = #line) -> AuthError {
        AuthError(.internalFailure, text, file: file, line: line)
    }
}

extension AuthError.Code {
    // Request-level failures: not Google codes (those are upper case); ErrorWire renders
    // each with its own HTTP status, reason and free-text message.
    public static let malformedJSON = Self("malformed-json")
    public static let invalidRequest = Self("invalid-request")
    public static let missingAPIKey = Self("missing-api-key")
    public static let missingCredential = Self("missing-credential")
    public static let invalidCredential = Self("invalid-credential")
    public static let routeNotFound = Self("route-not-found")
    public static let methodNotAllowed = Self("method-not-allowed")
    public static let internalFailure = Self("internal-failure")
}
