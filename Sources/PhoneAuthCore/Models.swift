import EmulatorSupport

/// A user account, as the Identity Toolkit stores it.
public struct UserRecord: Sendable, Equatable {
    public var localId: String
    public var phoneNumber: String?
    public var displayName: String?
    public var photoUrl: String?
    public var email: String?
    public var emailVerified = false
    public var disabled = false
    /// Custom claims as the JSON text the Admin API stored (`{}` or absent means none).
    public var customAttributes: String?
    /// Milliseconds since the epoch.
    public var createdAt: Int64
    public var lastLoginAt: Int64?
    public var lastRefreshAt: Int64?
    /// Seconds since the epoch; tokens issued before it are revoked.
    public var validSince: Int64?
    public var tenantId: String?
    /// The password's salted hash and its salt (base64; see PhoneAuthAPI/Passwords.swift), never the password.
    public var passwordHash: String?
    public var salt: String?
    /// Milliseconds since the epoch: when the password was last set.
    public var passwordUpdatedAt: Int64?
    /// Enrolled second factors (SMS multi-factor), in enrollment order (MultiFactor.swift).
    public var mfaInfo: [MFAEnrollment] = []
    /// Federated identities linked to the user (google.com, apple.com, oidc.*…), in link order (Providers.swift);
    /// `phone` and `password` are derived from the fields above, never stored here.
    public var providerUserInfo: [ProviderUserInfo] = []
    /// The user has signed in with an email link (the password provider then exists without a password).
    public var emailLinkSignin = false
    /// A federated provider's user name (Twitter's, GitHub's), as the last IdP sign-in gave it.
    public var screenName: String?
    /// Values of fields a table declares without a stored property of their own, by field name (UserFields.swift:
    /// a test's field, a field on its way to becoming a property). Empty for every standard field.
    public var extensions: [String: JSON] = [:]

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

    /// The SMS text that would have been sent.
    public var message: String {
        let text = "\(code) is your verification code."
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

/// Everything one project (or tenant) holds. Plain value state; the `Emulator` guards it with a mutex.
public struct AuthStore: Sendable {
    public var config: ProjectConfig
    public var users: [String: UserRecord] = [:]
    public var phoneIndex: [String: String] = [:]
    /// Lowercased email → localId (emails are unique per store); kept by `save`/`deleteUser`.
    public var emailIndex: [String: String] = [:]
    /// Federated identity (provider id and raw id) → localId, and a federated identity's lowercased email → the
    /// users linked to it (Providers.swift); kept by `save`/`deleteUser`.
    public var federatedIndex: [String: String] = [:]
    public var providerEmailIndex: [String: [String]] = [:]
    /// Out-of-band codes (email verification, password reset) and their inbox long-polls (OobCodes.swift).
    public var oob = OobState()
    public var sessions = SessionTable()
    public var nextSequence: UInt64 = 0
    /// temporaryProof → phone number (link conflicts); expiring and capped (`Emulator.temporaryProofLifetimeMillis`).
    public var temporaryProofs = ExpiringTable<String>(capacity: Emulator.maxTemporaryProofs)
    /// mfaPendingCredential → who passed the first factor; expiring and capped (`Emulator.mfaPendingLifetimeMillis`).
    public var mfaPending = ExpiringTable<PendingMFA>(capacity: Emulator.maxMFAPending)
    /// TOTP `sessionInfo` → the enrollment between start and finalize; expiring and capped (TOTP.swift).
    public var totpEnrollments = ExpiringTable<PendingTOTPEnrollment>(capacity: TOTP.maxPendingEnrollments)
    /// Set for tenant stores: the tenant's settings.
    public var tenant: TenantSettings?
    /// Opt-in send limits' windows.
    public var windows = SendWindows()
    /// Failure counters of the abuse limits (Protection.swift).
    public var protection = ProtectionState()
    /// Minted app credentials, iOS receipts and recorded pushes.
    public var credentials = CredentialState()
    /// Inbox long-polls waiting for a number's next code (`verificationCodes:wait`), by number.
    var waiters: [String: [CodeWaiter]] = [:]
    /// How many waiters are registered in `waiters` (capped by `Emulator.maxWaitersPerStore`).
    var waiterCount = 0
    /// A tenant created on first use by a client request (not by the tenants API, and never configured). Such a
    /// tenant is reclaimed when its project reaches the tenant cap while it holds nothing (`isReclaimable`). Derived
    /// from durable state: configuring a tenant stores its config and settings (`StoreTransaction.setConfig` clears
    /// the flag, a rollback restores it), and a journal restore marks tenants without either implicit.
    public internal(set) var implicitTenant = false

    public init(config: ProjectConfig, tenant: TenantSettings? = nil) {
        self.config = config
        self.tenant = tenant
    }

    public func user(phone: String) -> UserRecord? { phoneIndex[phone].flatMap { users[$0] } }

    /// Saves `user`, keeping the phone index unique and current.
    /// Returns the record it replaced (moved out of the table, not copied: a sign-in saves its user every time).
    @discardableResult
    public mutating func save(_ user: UserRecord) -> UserRecord? {
        let replaced = users.updateValue(user, forKey: user.localId)
        if let old = replaced?.phoneNumber, old != user.phoneNumber, phoneIndex[old] == user.localId {
            phoneIndex[old] = nil
        }
        if let p = user.phoneNumber { phoneIndex[p] = user.localId }
        if let old = replaced?.email?.lowercased(), old != user.email?.lowercased(), emailIndex[old] == user.localId {
            emailIndex[old] = nil
        }
        if let e = user.email { emailIndex[e.lowercased()] = user.localId }
        if !user.providerUserInfo.isEmpty || !(replaced?.providerUserInfo.isEmpty ?? true) { reindexProviders(old: replaced, new: user) }
        return replaced
    }

    /// The user with this email (any case).
    public func user(email: String) -> UserRecord? { emailIndex[email.lowercased()].flatMap { users[$0] } }

    /// Rebuilds the email index from `users` (after `users` was replaced whole: a rolled-back wipe).
    mutating func rebuildEmailIndex() {
        emailIndex = [:]
        for u in users.values { if let e = u.email { emailIndex[e.lowercased()] = u.localId } }
    }

    public mutating func deleteUser(_ localId: String) {
        guard let u = users.removeValue(forKey: localId) else { return }
        if let p = u.phoneNumber, phoneIndex[p] == localId { phoneIndex[p] = nil }
        if let e = u.email?.lowercased(), emailIndex[e] == localId { emailIndex[e] = nil }
        if !u.providerUserInfo.isEmpty { reindexProviders(old: u, new: nil) }
    }

    /// Pending sessions in creation order, optionally for one number: O(result) through the session indexes.
    public func pendingSessions(phone: String? = nil) -> [VerificationSession] {
        pendingSessions(phone: phone, after: nil, limit: .max).sessions
    }

    /// A page of pending sessions in creation order (sequence above `after`, at most `limit`), optionally for one number.
    public func pendingSessions(phone: String?, after: UInt64?, limit: Int) -> SessionPage {
        if let phone { return sessions.page(phone: phone, after: after, limit: limit) }
        return sessions.page(after: after, limit: limit)
    }

    /// Sessions `isReclaimable` inspects one by one; a tenant with more pending sessions is never reclaimed.
    static let reclaimSessionScan = 32

    /// An implicit tenant with no users, no live pending codes, no waiters and no live app credentials: dropping it
    /// loses nothing a client could observe (reads of a missing tenant answer as for an empty one). O(1) amortised.
    mutating func isReclaimable(now: Int64) -> Bool {
        guard implicitTenant, users.isEmpty, waiterCount == 0, sessions.count <= Self.reclaimSessionScan else { return false }
        credentials.minted.sweep(now: now)
        credentials.receipts.sweep(now: now)
        guard credentials.minted.isEmpty, credentials.receipts.isEmpty else { return false }
        return sessions.values.allSatisfy { s in s.expiresAt.map { now >= $0 } ?? false }
    }
}
