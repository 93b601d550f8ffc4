import EmulatorSupport

/// The one boundary every identifier crosses before it names state: project ids, tenant ids, user ids (`localId`),
/// phone numbers, emails and MFA enrollment ids, whether they arrive in a path, a query or a body.
///
/// Ids that name stores or files (project, tenant) are restricted to letters, digits, `-` and `_` (at most 128
/// bytes): what Google Cloud project ids, Identity Platform tenant ids (`<name>-<5 random>`) and firebase-tools'
/// `accounts-<tenant>.json` file names use. No identifier may hold NUL, a control character or invalid text, so
/// nothing stored, logged or written to disk can be truncated, forge a log line or climb a directory.
public enum Identifiers {
    public static let maxIDBytes = 128

    // MARK: predicates

    /// Letters, digits, `-` and `_`, 1 to 128 bytes.
    public static func isValidProjectID(_ s: String) -> Bool { isSimpleName(s) }

    /// As a project id (production tenant ids are `<display-name>-<5 random>`).
    public static func isValidTenantID(_ s: String) -> Bool { isSimpleName(s) }

    /// A uid (`localId`): 1 to 128 bytes (production: "UID must be a non-empty string with at most 128
    /// characters"), and no control characters (C0, DEL, C1, line/paragraph separators).
    public static func isValidLocalID(_ s: String) -> Bool {
        !s.isEmpty && s.utf8.count <= maxIDBytes && !containsControlCharacters(s)
    }

    /// An MFA enrollment id (`mfaEnrollmentId`): as a uid.
    public static func isValidMFAEnrollmentID(_ s: String) -> Bool { isValidLocalID(s) }

    /// A basic production-like email check: `local@domain`, at most 254 bytes, one `@`, a domain with a dot-free
    /// or dotted name of letters, digits, `-`, `.`, no spaces or control characters.
    public static func isValidEmail(_ e: String) -> Bool {
        guard e.utf8.count <= 254, !containsControlCharacters(e), let at = e.utf8.firstIndex(of: UInt8(ascii: "@")) else { return false }
        let local = e.utf8[..<at], domain = e.utf8[e.utf8.index(after: at)...]
        guard !local.isEmpty, local.count <= 64, !domain.isEmpty else { return false }
        guard !local.contains(0x20), !local.contains(UInt8(ascii: "@")) else { return false }
        guard domain.first != UInt8(ascii: "."), domain.last != UInt8(ascii: "."), domain.first != UInt8(ascii: "-") else { return false }
        return domain.allSatisfy { c in
            (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x2D || c == 0x2E || c >= 0x80
        }
    }

    /// True if `s` holds a C0 control (U+0000–U+001F, including NUL, CR, LF, ESC), DEL, a C1 control
    /// (U+0080–U+009F) or a line/paragraph separator (U+2028/U+2029).
    public static func containsControlCharacters<S: StringProtocol>(_ s: S) -> Bool {
        // ASCII (nearly every id, name and email) by its bytes; text with anything else by its scalars.
        for b in s.utf8 {
            if b < 0x20 || b == 0x7F { return true }
            if b >= 0x80 { return s.unicodeScalars.contains { isControl($0) } }
        }
        return false
    }

    @inline(__always)
    public static func isControl(_ u: Unicode.Scalar) -> Bool {
        let v = u.value
        return v < 0x20 || (v >= 0x7F && v <= 0x9F) || v == 0x2028 || v == 0x2029
    }

    static func isSimpleName(_ s: String) -> Bool {
        !s.isEmpty && s.utf8.count <= maxIDBytes
            && s.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x2D || $0 == 0x5F }
    }

    // MARK: validating accessors (the errors clients see)

    /// The project id, or `INVALID_ARGUMENT : Invalid project ID.` (the raw text is never echoed).
    public static func projectID(_ s: String) throws(AuthError) -> String {
        guard isValidProjectID(s) else { throw AuthError.invalidArgument("Invalid project ID: use letters, digits, '-' and '_' (at most 128).") }
        return s
    }

    /// The tenant id (nil or empty means none), or `INVALID_TENANT_ID`.
    public static func tenantID(_ s: String?) throws(AuthError) -> String? {
        guard let s, !s.isEmpty else { return nil }
        guard isValidTenantID(s) else { throw invalidTenantID }
        return s
    }

    /// A uid for a new or existing user, or `INVALID_LOCAL_ID`.
    public static func localID(_ s: String) throws(AuthError) -> String {
        guard isValidLocalID(s) else { throw invalidLocalID }
        return s
    }

    /// A canonical E.164 phone number (Google's `INVALID_PHONE_NUMBER` errors otherwise).
    public static func phone(_ s: String?) throws(AuthError) -> String { try PhoneNumber(parsing: s).e164 }

    /// An email, or `INVALID_EMAIL`.
    public static func email(_ s: String) throws(AuthError) -> String {
        guard isValidEmail(s) else { throw AuthError(.invalidEmail) }
        return s
    }

    /// An MFA enrollment id, or `INVALID_MFA_ENROLLMENT_ID`.
    public static func mfaEnrollmentID(_ s: String) throws(AuthError) -> String {
        guard isValidMFAEnrollmentID(s) else { throw AuthError(.invalidMfaEnrollmentId) }
        return s
    }

    public static let invalidTenantID = AuthError(.invalidTenantId, "The tenant ID must be a valid non-empty string.")
    public static let invalidLocalID = AuthError(.invalidLocalId, "UID must be a non-empty string with at most 128 characters.")

    /// Both ids of a store key are valid.
    public static func isValid(_ key: StoreKey) -> Bool {
        isValidProjectID(key.projectId) && (key.tenantId.map(isValidTenantID) ?? true)
    }

    /// Text safe for a log line or an error message: at most `limit` Unicode scalars (then `…`), control and bidi
    /// characters shown as escapes (`\n`, `\u{1B}`, `\u{202E}`…).
    public static func printable<S: StringProtocol>(_ s: S, limit: Int = 200) -> String {
        LogEscaping.escape(LogEscaping.truncate(String(s), to: limit))
    }
}
