import EmulatorSupport

/// A user account, as the Identity Toolkit stores it.
///
/// Small on purpose (a million may be stored, UserTable.swift): what most users have is stored inline — the uid,
/// phone number, names, claims, password and times (the optional times as plain `Int64`s and a bit each saying
/// whether it is set: an optional `Int64` takes 16 bytes in a struct) — and what few have (a photo, second factors, federated identities, screen name, initial
/// email, extension fields) in one shared immutable box that exists only when one of them is set. 184 bytes inline
/// instead of 288; every property reads and writes as a plain stored one.
public struct UserRecord: Sendable, Equatable {
    public var localId: String
    public var phoneNumber: String?
    public var displayName: String?
    public var email: String?
    /// Custom claims as the JSON text the Admin API stored (`{}` or absent means none).
    public var customAttributes: String?
    public var tenantId: String?
    /// The password's salted hash and its salt (base64; see PhoneAuthAPI/Passwords.swift), never the password.
    public var passwordHash: String?
    public var salt: String?
    /// Milliseconds since the epoch.
    public var createdAt: Int64
    private var lastLoginAtStorage: Int64 = 0
    private var lastRefreshAtStorage: Int64 = 0
    private var validSinceStorage: Int64 = 0
    private var passwordUpdatedAtStorage: Int64 = 0
    public var emailVerified = false
    public var disabled = false
    /// The user has signed in with an email link (the password provider then exists without a password).
    public var emailLinkSignin = false
    /// Which of the four optional times are set (bits of `Time`): in the padding the flags leave anyway.
    private var timesSet: UInt8 = 0
    /// The fields few users have; nil while all are empty.
    private var rare: RareUserFields?

    private enum Time: UInt8 { case lastLoginAt = 1, lastRefreshAt = 2, validSince = 4, passwordUpdatedAt = 8 }

    @inline(__always) private func time(_ t: Time, _ v: Int64) -> Int64? { timesSet & t.rawValue != 0 ? v : nil }
    @inline(__always) private mutating func setTime(_ t: Time, _ v: Int64?, _ storage: inout Int64) {
        if let v { storage = v; timesSet |= t.rawValue } else { storage = 0; timesSet &= ~t.rawValue }
    }

    public var lastLoginAt: Int64? {
        get { time(.lastLoginAt, lastLoginAtStorage) }
        set { var v = lastLoginAtStorage; setTime(.lastLoginAt, newValue, &v); lastLoginAtStorage = v }
    }
    public var lastRefreshAt: Int64? {
        get { time(.lastRefreshAt, lastRefreshAtStorage) }
        set { var v = lastRefreshAtStorage; setTime(.lastRefreshAt, newValue, &v); lastRefreshAtStorage = v }
    }
    /// Seconds since the epoch; tokens issued before it are revoked.
    public var validSince: Int64? {
        get { time(.validSince, validSinceStorage) }
        set { var v = validSinceStorage; setTime(.validSince, newValue, &v); validSinceStorage = v }
    }
    /// Milliseconds since the epoch: when the password was last set.
    public var passwordUpdatedAt: Int64? {
        get { time(.passwordUpdatedAt, passwordUpdatedAtStorage) }
        set { var v = passwordUpdatedAtStorage; setTime(.passwordUpdatedAt, newValue, &v); passwordUpdatedAtStorage = v }
    }

    public var photoUrl: String? {
        get { rare?.values.photoUrl }
        set { updateRare { $0.photoUrl = newValue } }
    }
    /// Enrolled second factors (SMS multi-factor), in enrollment order (MultiFactor.swift).
    public var mfaInfo: [MFAEnrollment] {
        get { rare?.values.mfaInfo ?? [] }
        set { updateRare { $0.mfaInfo = newValue } }
    }
    /// Federated identities linked to the user (google.com, apple.com, oidc.*…), in link order (Providers.swift);
    /// `phone` and `password` are derived from the fields above, never stored here.
    public var providerUserInfo: [ProviderUserInfo] {
        get { rare?.values.providerUserInfo ?? [] }
        set { updateRare { $0.providerUserInfo = newValue } }
    }
    /// A federated provider's user name (Twitter's, GitHub's), as the last IdP sign-in gave it.
    public var screenName: String? {
        get { rare?.values.screenName }
        set { updateRare { $0.screenName = newValue } }
    }
    /// The address the account had before its email was first changed (production's `initialEmail`; a change made by
    /// an anonymous session sets none). Kept once set.
    public var initialEmail: String? {
        get { rare?.values.initialEmail }
        set { updateRare { $0.initialEmail = newValue } }
    }
    /// Values of fields a table declares without a stored property of their own, by field name (UserFields.swift:
    /// a test's field, a field on its way to becoming a property). Empty for every standard field.
    public var extensions: [String: JSON] {
        get { rare?.values.extensions ?? [:] }
        set { updateRare { $0.extensions = newValue } }
    }

    /// Writes the rare fields: a new box (they are rarely written), none when they are all empty.
    private mutating func updateRare(_ change: (inout RareUserFields.Values) -> Void) {
        var v = rare?.values ?? RareUserFields.Values()
        change(&v)
        rare = v.isEmpty ? nil : RareUserFields(v)
    }

    public init(localId: String, createdAt: Int64) {
        self.localId = localId
        self.createdAt = createdAt
    }

    public var isAnonymous: Bool { phoneNumber == nil && email == nil && passwordHash == nil && providerUserInfo.isEmpty }

    /// The custom claims as a JSON object (empty when none or unparsable).
    public var customClaims: JSONObject {
        guard let customAttributes, case .object(let o)? = try? JSONParser.parse(customAttributes) else { return JSONObject() }
        return o
    }
}

/// `UserRecord`'s rarely set fields, shared between copies of a record and replaced whole when one changes.
final class RareUserFields: Sendable, Equatable {
    struct Values: Sendable, Equatable {
        var photoUrl: String?
        var mfaInfo: [MFAEnrollment] = []
        var providerUserInfo: [ProviderUserInfo] = []
        var screenName: String?
        var initialEmail: String?
        var extensions: [String: JSON] = [:]
        var isEmpty: Bool {
            photoUrl == nil && mfaInfo.isEmpty && providerUserInfo.isEmpty && screenName == nil && initialEmail == nil && extensions.isEmpty
        }
    }
    let values: Values
    init(_ values: Values) { self.values = values }
    static func == (a: RareUserFields, b: RareUserFields) -> Bool { a === b || a.values == b.values }
}

/// A pending verification: what `sendVerificationCode` created and `signInWithPhoneNumber` consumes.
/// Compact on purpose (about 100 bytes, no heap allocation for typical numbers): a million may be pending.
public struct VerificationSession: Sendable, Equatable {
    /// First-factor sign-in, or an SMS second factor's enrollment or sign-in (MultiFactor.swift).
    public enum Kind: String, Sendable { case signIn = "SIGN_IN", mfaEnrollment = "MFA_ENROLLMENT", mfaSignIn = "MFA_SIGN_IN" }
    public let id: SessionID
    public let phoneNumber: String
    public let code: String
    public let createdAt: Int64
    /// Nil: never expires.
    public let expiresAt: Int64?
    /// Nil: unlimited wrong attempts.
    public var attemptsLeft: Int32?
    public let fictional: Bool
    public let kind: Kind
    /// Android SMS Retriever hash the SMS text ends with (`autoRetrievalInfo.appSignatureHash`).
    public let appSignatureHash: String?
    /// Creation order within the store.
    public let sequence: UInt64
    /// MFA sessions: the user (`localId`) the code was sent for; only that user's finalize may consume it.
    public var owner: String? = nil
    /// How its SMS travels (language, a late or lost delivery); nil: delivered at once, in English.
    public var delivery: SMSDelivery? = nil

    public init(id: SessionID, phoneNumber: String, code: String, createdAt: Int64, expiresAt: Int64?, attemptsLeft: Int?,
                fictional: Bool, kind: Kind, appSignatureHash: String?, sequence: UInt64) {
        self.id = id
        self.phoneNumber = phoneNumber
        self.code = code
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.attemptsLeft = attemptsLeft.map { Int32(clamping: $0) }
        self.fictional = fictional
        self.kind = kind
        self.appSignatureHash = appSignatureHash
        self.sequence = sequence
    }

    /// The client-facing `sessionInfo`.
    public var sessionInfo: String { id.text }

    /// Whether its SMS has arrived by `now` (a lost one never does).
    public func isDelivered(now: Int64) -> Bool {
        guard let d = delivery else { return true }
        return !d.lost && (d.deliverAt ?? 0) <= now
    }

    /// The SMS text that would have been sent, in its language.
    public var message: String {
        let text = SMSText.text(code: code, language: delivery?.language)
        guard let hash = appSignatureHash, !hash.isEmpty else { return text }
        return "<#> \(text)\n\(hash)"
    }
}

/// Server-side state behind an opaque refresh token.
public struct RefreshTokenRecord: Sendable, Equatable {
    public let projectId: String
    public let tenantId: String?
    public let localId: String
    /// Seconds: when the user signed in (kept across refreshes).
    public let authTime: Int64
    public let signInProvider: String
    /// Seconds: when this refresh token was issued (revoked if before the user's validSince).
    public let issuedAt: Int64
    /// The `mfaEnrollmentId` of the SMS second factor the session passed (its ID tokens keep the claims on refresh).
    public let secondFactorId: String?
    /// Claims the session adds to every ID token it mints, as JSON object text (a custom token's `claims`); nil: none.
    public let extraClaims: String?
    /// The second factor's kind (`sign_in_second_factor`) when `secondFactorId` is set: `phone` (nil) or `totp` (a
    /// minted test principal's, TestPrincipals.swift).
    public let secondFactor: String?

    public init(projectId: String, tenantId: String?, localId: String, authTime: Int64, signInProvider: String, issuedAt: Int64,
                secondFactorId: String? = nil, extraClaims: String? = nil, secondFactor: String? = nil) {
        self.projectId = projectId
        self.tenantId = tenantId
        self.localId = localId
        self.authTime = authTime
        self.signInProvider = signInProvider
        self.issuedAt = issuedAt
        self.secondFactorId = secondFactorId
        self.extraClaims = extraClaims
        self.secondFactor = secondFactor
    }

    /// `extraClaims` as an object (empty when none or unparsable).
    public var extraClaimsObject: JSONObject {
        guard let extraClaims, case .object(let o)? = try? JSONParser.parse(extraClaims, maxDepth: 32) else { return JSONObject() }
        return o
    }
}

/// Identifies one isolated state: a project, or a tenant inside it.
public struct StoreKey: Sendable, Hashable, CustomStringConvertible {
    public let projectId: String
    public let tenantId: String?
    public init(projectId: String, tenantId: String? = nil) {
        self.projectId = projectId
        self.tenantId = (tenantId?.isEmpty ?? true) ? nil : tenantId
    }
    public var description: String { tenantId.map { "\(projectId)/tenants/\($0)" } ?? projectId }
}

/// The identity carried by a verified ID token.
public struct TokenIdentity: Sendable, Equatable {
    public let projectId: String
    public let tenantId: String?
    public let localId: String
    public let issuedAt: Int64
    public let authTime: Int64
    public let signInProvider: String
    public init(projectId: String, tenantId: String?, localId: String, issuedAt: Int64, authTime: Int64, signInProvider: String) {
        self.projectId = projectId
        self.tenantId = tenantId
        self.localId = localId
        self.issuedAt = issuedAt
        self.authTime = authTime
        self.signInProvider = signInProvider
    }
}
