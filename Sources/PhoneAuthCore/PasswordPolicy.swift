import EmulatorSupport

/// `passwordPolicyConfig`, production's password policy of a project or tenant (Identity Platform): the v2 Config and
/// Tenant resources' `{passwordPolicyEnforcementState, forceUpgradeOnSignin, passwordPolicyVersions: [{customStrengthOptions}],
/// lastUpdateTime}`, the same shape in the emulator's config block, and what `GET /v2/passwordPolicy` serves the SDKs.
///
/// With `ENFORCE`, a new password (email sign-up, admin create, a password change, a reset) that misses a requirement
/// answers `PASSWORD_DOES_NOT_MEET_REQUIREMENTS : Missing password requirements: [<each requirement missed>]`, in
/// production's words and order; a password sign-in with such a password answers that too with `forceUpgradeOnSignin`
/// (production's "require" mode), else succeeds with `userNotifications` (its "notify" mode). `OFF`: no checks (the
/// 6-character `WEAK_PASSWORD` minimum only).
public struct PasswordPolicy: Sendable, Equatable {
    public enum Enforcement: String, Sendable, CaseIterable { case off = "OFF", enforce = "ENFORCE" }

    /// One requirement a password can miss: production's `notificationCode` and message.
    public enum Requirement: Sendable, Equatable {
        case minLength(Int), maxLength(Int), lowercase, uppercase, numeric, nonAlphanumeric

        public var message: String {
            switch self {
            case .minLength(let n): "Password must contain at least \(n) characters"
            case .maxLength(let n): "Password may contain at most \(n) characters"
            case .lowercase: "Password must contain a lower case character"
            case .uppercase: "Password must contain an upper case character"
            case .numeric: "Password must contain a numeric character"
            case .nonAlphanumeric: "Password must contain a non-alphanumeric character"
            }
        }

        public var notificationCode: String {
            switch self {
            case .minLength: "MINIMUM_PASSWORD_LENGTH"
            case .maxLength: "MAXIMUM_PASSWORD_LENGTH"
            case .lowercase: "MISSING_LOWERCASE_CHARACTER"
            case .uppercase: "MISSING_UPPERCASE_CHARACTER"
            case .numeric: "MISSING_NUMERIC_CHARACTER"
            case .nonAlphanumeric: "MISSING_NON_ALPHANUMERIC_CHARACTER"
            }
        }
    }

    /// Whether a `passwordPolicyConfig` was ever set: only then do the config and tenant resources carry one
    /// (firebase-admin refuses a `passwordPolicyConfig` without `passwordPolicyEnforcementState`).
    public var configured = false
    public var enforcement: Enforcement = .off
    public var forceUpgradeOnSignin = false
    /// `customStrengthOptions.minPasswordLength` (6…30) and `maxPasswordLength` (≤ 4096), when given.
    public var minLength: Int?
    public var maxLength: Int?
    /// The four `contains…Character` options, as given (production echoes an explicit `false`; firebase-admin sends all four).
    public var requireLowercase: Bool?
    public var requireUppercase: Bool?
    public var requireNumeric: Bool?
    public var requireNonAlphanumeric: Bool?
    /// Whether the policy has a version (`passwordPolicyVersions` of length 1) at all.
    public var hasVersion = false
    /// `lastUpdateTime` (output only), RFC 3339: set when a v2 PATCH changes the policy.
    public var lastUpdateTime: String?

    public init() {}

    /// The minimum production enforces even with no `minPasswordLength` (the JS SDK's MINIMUM_MIN_PASSWORD_LENGTH).
    public static let floorLength = 6
    public static let minLengthRange = 6...30
    public static let maxLengthLimit = 4096
    /// The policy's schema version (`schemaVersion`; the JS SDK's `validatePassword` accepts 1 only).
    public static let schemaVersion = 1
    /// What satisfies `containsNonAlphanumericCharacter` (production's list; the JS SDK checks against the list the
    /// policy serves, so space, `+`, `-` and `=` do not count).
    public static let allowedNonAlphanumeric: [Character] = [
        "^", "$", "*", ".", "[", "]", "{", "}", "(", ")", "?", "\"", "!", "@", "#", "%", "&", "/", "\\", ",", ">", "<", "'",
        ":", ";", "|", "_", "~", "`",
    ]

    public var enforced: Bool { enforcement == .enforce }

    /// `allowedNonAlphanumeric` as two 64-bit masks over ASCII.
    static let allowedBits: (UInt64, UInt64) = {
        var lo: UInt64 = 0, hi: UInt64 = 0
        for c in allowedNonAlphanumeric {
            let a = c.asciiValue!
            if a < 64 { lo |= 1 << UInt64(a) } else { hi |= 1 << UInt64(a - 64) }
        }
        return (lo, hi)
    }()

    static func allowedMask(_ b: UInt8) -> Bool {
        b < 64 ? allowedBits.0 & (1 << UInt64(b)) != 0 : allowedBits.1 & (1 << UInt64(b - 64)) != 0
    }

    /// The requirements `password` misses, in production's order (length, lower case, upper case, numeric,
    /// non-alphanumeric). Lengths count UTF-16 code units, as the JS SDK's `validatePassword` does, so both agree.
    public func missing(_ password: String) -> [Requirement] {
        var out: [Requirement] = []
        let length = password.utf16.count
        let floor = max(minLength ?? Self.floorLength, Self.floorLength)
        if length < floor { out.append(.minLength(floor)) }
        if let maxLength, maxLength > 0, length > maxLength { out.append(.maxLength(maxLength)) }
        // Every character a requirement counts is ASCII: one pass over the bytes, a bit mask for the allowed list, and
        // no more than one pass however long the body's password is.
        var lower = false, upper = false, digit = false, other = false
        for b in password.utf8 where b < 0x80 {
            switch b {
            case 0x61...0x7A: lower = true
            case 0x41...0x5A: upper = true
            case 0x30...0x39: digit = true
            default: if Self.allowedMask(b) { other = true }
            }
            if lower, upper, digit, other { break }
        }
        if requireLowercase == true, !lower { out.append(.lowercase) }
        if requireUppercase == true, !upper { out.append(.uppercase) }
        if requireNumeric == true, !digit { out.append(.numeric) }
        if requireNonAlphanumeric == true, !other { out.append(.nonAlphanumeric) }
        return out
    }

    /// Production's refusal of a password that misses `requirements`.
    public static func refusal(_ requirements: [Requirement]) -> AuthError {
        AuthError(.passwordDoesNotMeetRequirements,
                  "Missing password requirements: [" + requirements.map(\.message).joined(separator: ", ") + "]")
    }

    /// Throws production's refusal when the policy is enforced and `password` misses a requirement.
    public func check(_ password: String) throws(AuthError) {
        guard enforced else { return }
        let m = missing(password)
        if !m.isEmpty { throw Self.refusal(m) }
    }

    // MARK: wire

    /// `customStrengthOptions` as production writes it: the options given (an explicit `false` too: firebase-admin's
    /// integration suite reads back `requireLowercase: false` after setting it).
    public var customStrengthOptionsJSON: JSON {
        var o = JSONObject()
        o.set("minPasswordLength", minLength.map { .int($0) })
        o.set("maxPasswordLength", maxLength.map { .int($0) })
        o.set("containsLowercaseCharacter", requireLowercase.map(JSON.bool))
        o.set("containsUppercaseCharacter", requireUppercase.map(JSON.bool))
        o.set("containsNumericCharacter", requireNumeric.map(JSON.bool))
        o.set("containsNonAlphanumericCharacter", requireNonAlphanumeric.map(JSON.bool))
        return .object(o)
    }

    /// The v2 Config's and Tenant's `passwordPolicyConfig` (admin), and the config block's.
    public var json: JSON {
        var o = JSONObject()
        o["passwordPolicyEnforcementState"] = .string(enforcement.rawValue)
        o["forceUpgradeOnSignin"] = .bool(forceUpgradeOnSignin)
        if hasVersion {
            o["passwordPolicyVersions"] = [["customStrengthOptions": customStrengthOptionsJSON, "schemaVersion": .int(Self.schemaVersion)]]
        }
        o.set("lastUpdateTime", lastUpdateTime.map(JSON.string))
        return .object(o)
    }

    /// `GET /v2/passwordPolicy`: what the SDKs read (the JS SDK's `GetPasswordPolicyResponse`).
    public var publicJSON: JSON {
        var o = JSONObject()
        o["customStrengthOptions"] = customStrengthOptionsJSON
        o["allowedNonAlphanumericCharacters"] = .array(Self.allowedNonAlphanumeric.map { .string(String($0)) })
        o["enforcementState"] = .string(enforcement.rawValue)
        o["forceUpgradeOnSignin"] = .bool(forceUpgradeOnSignin)
        o["schemaVersion"] = .int(Self.schemaVersion)
        return .object(o)
    }

    /// The same policy but for its `lastUpdateTime`.
    public func sameRules(as other: PasswordPolicy) -> Bool {
        var a = self, b = other
        a.lastUpdateTime = nil
        b.lastUpdateTime = nil
        return a == b
    }

    /// Reads a `passwordPolicyConfig` object (every field optional; `schemaVersion` and `lastUpdateTime`, output only,
    /// are accepted as a GET wrote them). `null` is no policy.
    public static func parse(_ v: JSON, path p: String) throws(ConfigError) -> PasswordPolicy {
        var policy = PasswordPolicy()
        if v == .null { return policy }
        policy.configured = true
        for (k, v2) in try ProjectConfig.object(v, p) {
            let p2 = ProjectConfig.join(p, k)
            switch k {
            case "passwordPolicyEnforcementState":
                let s = v2.stringValue?.uppercased()
                if s == "PASSWORD_POLICY_ENFORCEMENT_STATE_UNSPECIFIED" || v2 == .null {
                    policy.enforcement = .off
                } else {
                    policy.enforcement = try ProjectConfig.choice(v2, p2)
                }
            case "forceUpgradeOnSignin":
                policy.forceUpgradeOnSignin = false
                if v2 != .null { policy.forceUpgradeOnSignin = try ProjectConfig.bool(v2, p2) }
            case "lastUpdateTime":
                if v2 != .null { policy.lastUpdateTime = try ProjectConfig.string(v2, p2) }
            case "passwordPolicyVersions":
                if v2 == .null { continue }
                guard case .array(let versions) = v2 else { throw ConfigError(path: p2, message: "must be an array") }
                guard versions.count <= 1 else { throw ConfigError(path: p2, message: "must be of length 1") }
                if let first = versions.first { try policy.applyVersion(first, path: p2 + "[0]") }
            default: throw ConfigError(path: p2, message: "unknown key")
            }
        }
        return policy
    }

    mutating func applyVersion(_ v: JSON, path p: String) throws(ConfigError) {
        hasVersion = true
        for (k, v2) in try ProjectConfig.object(v, p) {
            let p2 = ProjectConfig.join(p, k)
            switch k {
            case "schemaVersion": continue  // output only
            case "customStrengthOptions":
                if v2 == .null { continue }
                for (k3, v3) in try ProjectConfig.object(v2, p2) {
                    let p3 = ProjectConfig.join(p2, k3)
                    if v3 == .null { continue }
                    switch k3 {
                    case "minPasswordLength":
                        let n = try ProjectConfig.int(v3, p3)
                        guard Self.minLengthRange.contains(n) else { throw ConfigError(path: p3, message: "must be between 6 and 30") }
                        minLength = n
                    case "maxPasswordLength":
                        let n = try ProjectConfig.int(v3, p3)
                        guard n > 0, n <= Self.maxLengthLimit else { throw ConfigError(path: p3, message: "must be between 1 and 4096") }
                        maxLength = n
                    case "containsLowercaseCharacter": requireLowercase = try ProjectConfig.bool(v3, p3)
                    case "containsUppercaseCharacter": requireUppercase = try ProjectConfig.bool(v3, p3)
                    case "containsNumericCharacter": requireNumeric = try ProjectConfig.bool(v3, p3)
                    case "containsNonAlphanumericCharacter": requireNonAlphanumeric = try ProjectConfig.bool(v3, p3)
                    default: throw ConfigError(path: p3, message: "unknown key")
                    }
                }
            default: throw ConfigError(path: p2, message: "unknown key")
            }
        }
        if let minLength, let maxLength, maxLength < minLength {
            throw ConfigError(path: ProjectConfig.join(p, "customStrengthOptions.maxPasswordLength"),
                              message: "must not be less than minPasswordLength")
        }
    }
}
