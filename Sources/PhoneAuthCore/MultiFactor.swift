import EmulatorSupport
#if canImport(Glibc)
import Glibc
#endif

// # SMS as a second factor
//
// A user with enrollments (`UserRecord.mfaInfo`) who passes a first factor (password, email link, IdP) gets no tokens
// but an `mfaPendingCredential` (`Emulator.passFirstFactor`, the seam a first-factor sign-in calls); `mfaSignIn:start`
// sends a code to one of the enrolled numbers and `mfaSignIn:finalize` trades the code and the pending credential for
// tokens carrying `firebase.sign_in_second_factor` / `second_factor_identifier`. `mfaEnrollment:start/finalize` add a
// number for a signed-in, email-verified user; `withdraw` removes one.
//
// MFA codes go through the same session table as first-factor codes (inbox, `:wait`, expiry, attempts, journal,
// fictional numbers, scenario numbers, app verification, limits): sessions of kind `mfaEnrollment`/`mfaSignIn`, bound
// to their user (`VerificationSession.owner`). A first-factor sign-in never consumes one, and an MFA finalize never
// consumes another user's.

extension VerificationSession.Kind {
    /// The inbox's `kind`: `signIn`, `mfaEnrollment` or `mfaSignIn`.
    public var inboxName: String {
        switch self {
        case .signIn: "signIn"
        case .mfaEnrollment: "mfaEnrollment"
        case .mfaSignIn: "mfaSignIn"
        }
    }
}

/// One enrolled second factor: an SMS number (`phoneInfo`) or a TOTP secret (`totp`), exactly one of them.
public struct MFAEnrollment: Sendable, Equatable {
    /// 28 letters and digits when we make it; an admin may give its own (`Identifiers.mfaEnrollmentID`).
    public var mfaEnrollmentId: String
    /// The enrolled number, canonical E.164 (nil for a TOTP factor).
    public var phoneInfo: String?
    /// A TOTP factor's secret and replay state (nil for an SMS factor).
    public var totp: TOTPFactor?
    public var displayName: String?
    /// Milliseconds since the epoch.
    public var enrolledAt: Int64

    public init(mfaEnrollmentId: String, phoneInfo: String, displayName: String?, enrolledAt: Int64) {
        self.mfaEnrollmentId = mfaEnrollmentId
        self.phoneInfo = phoneInfo
        self.displayName = displayName
        self.enrolledAt = enrolledAt
    }

    public init(mfaEnrollmentId: String, totp: TOTPFactor, displayName: String?, enrolledAt: Int64) {
        self.mfaEnrollmentId = mfaEnrollmentId
        self.totp = totp
        self.displayName = displayName
        self.enrolledAt = enrolledAt
    }

    /// `phone` or `totp`: the ID token's `sign_in_second_factor`, a blocking function's `factor_id`.
    public var factorId: String { totp == nil ? "phone" : "totp" }

    /// Every digit but the last four shown as `*` (`+*******0100`), as first-factor replies show the hints (nil for TOTP).
    public var maskedPhone: String? { phoneInfo.map(MultiFactor.mask) }

    /// The journal's form (the `mfaInfo` field's canonical value): a TOTP factor keeps its secret (base32) and the last
    /// step it verified.
    public var journalJSON: JSON {
        var o: JSONObject = ["mfaEnrollmentId": .string(mfaEnrollmentId)]
        o.set("phoneInfo", phoneInfo.map(JSON.string))
        if let totp {
            o["totpSecret"] = .string(TOTP.base32(totp.secret))
            o.set("totpLastUsedStep", totp.lastUsedStep.map(JSON.exactInt))
        }
        o["enrolledAt"] = .exactInt(enrolledAt)
        o.set("displayName", displayName.map(JSON.string))
        return .object(o)
    }

    /// Reads `journalJSON`; nil without an id, or without a number or a secret.
    public init?(journal v: JSON) {
        guard let id = v["mfaEnrollmentId"]?.stringValue else { return nil }
        let name = v["displayName"]?.stringValue, at = v["enrolledAt"]?.exactInt64 ?? 0
        if let phone = v["phoneInfo"]?.stringValue {
            self.init(mfaEnrollmentId: id, phoneInfo: phone, displayName: name, enrolledAt: at)
        } else if let secret = v["totpSecret"]?.stringValue.flatMap(TOTP.base32Decode) {
            self.init(mfaEnrollmentId: id, totp: TOTPFactor(secret: secret, lastUsedStep: v["totpLastUsedStep"]?.exactInt64),
                      displayName: name, enrolledAt: at)
        } else {
            return nil
        }
    }

    /// A user record's `mfaInfo` entry (lookup, batchGet, query): the number in full, as the official emulator also
    /// writes `unobfuscatedPhoneInfo`; a TOTP factor as production shows it, `totpInfo: {}` (never the secret).
    public var wireJSON: JSON {
        var o = JSONObject()
        o.set("phoneInfo", phoneInfo.map(JSON.string))
        o.set("displayName", displayName.map(JSON.string))
        o["mfaEnrollmentId"] = .string(mfaEnrollmentId)
        o["enrolledAt"] = .string(Timestamp.protobufJSON(millis: enrolledAt))
        if let phoneInfo { o["unobfuscatedPhoneInfo"] = .string(phoneInfo) } else { o["totpInfo"] = .object(JSONObject()) }
        return .object(o)
    }

    /// The export's entry (firebase-tools `accounts.json`): `wireJSON`, and for a TOTP factor the secret in an
    /// emulator-only field, `totpInfo.sharedSecretKey` (production's exports carry none), so an import can sign in again.
    public var exportJSON: JSON {
        guard let totp, case .object(var o) = wireJSON else { return wireJSON }
        o["totpInfo"] = ["sharedSecretKey": .string(TOTP.base32(totp.secret))]
        return .object(o)
    }

    /// A blocking function's `multi_factor.enrolled_factors` entry.
    public var blockingJSON: JSON {
        var f: JSONObject = ["uid": .string(mfaEnrollmentId), "factor_id": .string(factorId)]
        f.set("phone_number", phoneInfo.map(JSON.string))
        f.set("display_name", displayName.map(JSON.string))
        f["enrollment_time"] = .string(Timestamp.rfc3339(millis: enrolledAt))
        return .object(f)
    }
}

/// `mfa.providerConfigs[]`'s TOTP entry: `{state, totpProviderConfig: {adjacentIntervals}}`.
public struct TOTPProviderConfig: Sendable, Equatable {
    public var state: MFAConfig.State
    /// 0-10; nil: production's default (`TOTP.defaultAdjacentIntervals`).
    public var adjacentIntervals: Int?

    public init(state: MFAConfig.State = .enabled, adjacentIntervals: Int? = nil) {
        self.state = state
        self.adjacentIntervals = adjacentIntervals
    }

    public var json: JSON {
        var t = JSONObject()
        t.set("adjacentIntervals", adjacentIntervals.map { JSON.int(Int64($0)) })
        return ["state": .string(state.rawValue), "totpProviderConfig": .object(t)]
    }
}

/// `mfa` / `mfaConfig`: whether SMS multi-factor is on for a project or tenant.
public struct MFAConfig: Sendable, Equatable {
    public enum State: String, Sendable, CaseIterable { case disabled = "DISABLED", enabled = "ENABLED", mandatory = "MANDATORY" }
    public var state: State
    public var enabledProviders: [String]
    /// `providerConfigs`' TOTP entry (nil: TOTP off, production's default).
    public var totp: TOTPProviderConfig? = nil

    /// A project's default (the official emulator hard-wires it): ENABLED with PHONE_SMS.
    public init(state: State = .enabled, enabledProviders: [String] = ["PHONE_SMS"]) {
        self.state = state
        self.enabledProviders = enabledProviders
    }

    /// A tenant created through the tenants API without `mfaConfig` (as production and the official emulator).
    public static let disabled = MFAConfig(state: .disabled, enabledProviders: [])

    public var smsEnabled: Bool { state != .disabled && enabledProviders.contains("PHONE_SMS") }
    /// TOTP follows its own provider config (production: `providerConfigs` is for TOTP, `enabledProviders` for SMS).
    public var totpEnabled: Bool { totp.map { $0.state != .disabled } ?? false }
    public var totpAdjacentIntervals: Int { totp?.adjacentIntervals ?? TOTP.defaultAdjacentIntervals }

    /// Whether a second factor of this kind is on: a first factor then owes it.
    public func enables(_ e: MFAEnrollment) -> Bool { e.totp == nil ? smsEnabled : totpEnabled }

    public var json: JSON {
        var o: JSONObject = ["state": .string(state.rawValue), "enabledProviders": .array(enabledProviders.map(JSON.string))]
        if let totp { o["providerConfigs"] = [totp.json] }
        return .object(o)
    }

    /// Reads `{state?, enabledProviders?}` onto `self` (fields present replace).
    public mutating func apply(_ v: JSON, path: String) throws(ConfigError) {
        guard case .object(let o) = v else { throw ConfigError(path: path, message: "must be an object, not \(v.typeName)") }
        for (k, v2) in o {
            let p = path.isEmpty ? k : "\(path).\(k)"
            switch k {
            case "state":
                guard let s = v2.stringValue, let st = State(rawValue: s.uppercased()) else {
                    throw ConfigError(path: p, message: "must be \"ENABLED\", \"DISABLED\" or \"MANDATORY\"")
                }
                state = st
            case "enabledProviders":
                guard case .array(let items) = v2, items.allSatisfy({ $0.stringValue != nil }) else {
                    throw ConfigError(path: p, message: "must be an array of provider names such as \"PHONE_SMS\"")
                }
                let names = items.compactMap(\.stringValue)
                // Production's enum (PROVIDER_UNSPECIFIED, PHONE_SMS); "TOTP" as configs before providerConfigs had it.
                guard names.allSatisfy({ ["PHONE_SMS", "PROVIDER_UNSPECIFIED", "TOTP"].contains($0) }) else {
                    throw ConfigError(path: p, message: "providers are \"PHONE_SMS\" or \"PROVIDER_UNSPECIFIED\" (TOTP is set in providerConfigs)")
                }
                enabledProviders = names
            case "providerConfigs": totp = try Self.providerConfigs(v2, path: p)
            default: throw ConfigError(path: p, message: "unknown key")
            }
        }
    }
}

extension MFAConfig {
    /// `[{state, totpProviderConfig: {adjacentIntervals?}}]` → the TOTP entry (nil for an empty list). At most one entry;
    /// each needs `totpProviderConfig` (production: phone MFA is not configured here).
    static func providerConfigs(_ v: JSON, path: String) throws(ConfigError) -> TOTPProviderConfig? {
        guard case .array(let items) = v else { throw ConfigError(path: path, message: "must be an array, not \(v.typeName)") }
        guard items.count <= 1 else { throw ConfigError(path: path, message: "takes one entry (the TOTP provider)") }
        guard let item = items.first else { return nil }
        let p0 = "\(path)[0]"
        guard case .object(let o) = item else { throw ConfigError(path: p0, message: "must be an object, not \(item.typeName)") }
        var config = TOTPProviderConfig(state: .disabled)
        var sawTotp = false
        for (k, v2) in o {
            let p = "\(p0).\(k)"
            switch k {
            case "state":
                guard let s = v2.stringValue, let st = State(rawValue: s.uppercased()) else {
                    throw ConfigError(path: p, message: "must be \"ENABLED\", \"DISABLED\" or \"MANDATORY\"")
                }
                config.state = st
            case "totpProviderConfig":
                guard case .object(let t) = v2 else { throw ConfigError(path: p, message: "must be an object, not \(v2.typeName)") }
                sawTotp = true
                for (tk, tv) in t {
                    guard tk == "adjacentIntervals" else { throw ConfigError(path: "\(p).\(tk)", message: "unknown key") }
                    guard let n = tv.exactInt64, TOTP.adjacentIntervalsRange.contains(Int(clamping: n)) else {
                        throw ConfigError(path: "\(p).\(tk)", message: "must be an integer from 0 to 10")
                    }
                    config.adjacentIntervals = Int(n)
                }
            default: throw ConfigError(path: p, message: "unknown key")
            }
        }
        guard sawTotp else { throw ConfigError(path: "\(p0).totpProviderConfig", message: "is required (providerConfigs configures TOTP)") }
        return config
    }
}

/// Who passed a first factor and still owes the second (behind an `mfaPendingCredential`), and the codes sent for it:
/// only a code sent to this pending sign-in finalizes it.
public struct PendingMFA: Sendable, Equatable {
    public let localId: String
    /// The first factor (`password`, `emailLink`, an IdP id): the final tokens' `sign_in_provider`.
    public let signInProvider: String
    /// The sessions sent for this sign-in (`mfaSignIn:start`, or the iOS SDK's masked send), oldest first; the newest
    /// `maxBoundSessions` are kept.
    public var sessions: [SessionID] = []
    /// Codes sent for it in all, and wrong codes given for it (the abuse limits of Protection.swift count them).
    public var sent: Int32 = 0
    public var failedCodes: Int32 = 0

    /// Sessions a pending sign-in remembers: older ones can no longer finalize it.
    public static let maxBoundSessions = 16

    init(localId: String, signInProvider: String) {
        self.localId = localId
        self.signInProvider = signInProvider
    }
}

/// What a first-factor sign-in does next (`Emulator.passFirstFactor`).
public enum FirstFactorOutcome: Sendable, Equatable {
    /// No second factor is due: issue tokens as usual.
    case issueTokens
    /// The user has SMS second factors: answer `mfaPendingCredential` and the masked hints instead of tokens
    /// (`MFAJSON.pendingReply` in the API renders production's shape).
    case mfaRequired(pendingCredential: String, enrollments: [MFAEnrollment])
}

/// The outcome of `mfaEnrollment:finalize` and `mfaSignIn:finalize`: tokens to sign.
public struct MFATokens: Sendable, Equatable {
    public let user: UserRecord
    public let refreshToken: String
    public let signInProvider: String
    public let authTime: Int64
    /// The enrollment the session passed (nil after a withdraw).
    public let secondFactorId: String?
    /// Its kind: nil (`phone`) or `totp`.
    public var secondFactor: String? = nil
}

public enum MultiFactor {
    /// First factors MFA is not available for (production and the official emulator).
    public static let ineligibleProviders: Set<String> = ["anonymous", "phone", "custom", "gc.apple.com"]
    /// Second factors one user may have (Identity Platform's limit): more is `SECOND_FACTOR_LIMIT_EXCEEDED`.
    public static let maxEnrollments = 5

    /// Every ASCII digit but the last four replaced by `*`.
    public static func mask(_ phone: String) -> String {
        // Bytes, not Characters: an ASCII digit is never part of a multi-byte sequence (this runs for every hint).
        var out = Array(phone.utf8)
        var seen = 0
        for i in out.indices.reversed() where out[i] >= 0x30 && out[i] <= 0x39 {
            seen += 1
            if seen > 4 { out[i] = UInt8(ascii: "*") }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// A masked number as the iOS SDK sends it in testing mode (`+*******0100`): `+`, one or more `*`, then 4 digits.
    public static func isMasked(_ s: String) -> Bool {
        let u = Array(s.utf8)
        guard u.count >= 6, u.count <= 20, u[0] == UInt8(ascii: "+") else { return false }
        let stars = u[1..<(u.count - 4)], last = u[(u.count - 4)...]
        return stars.allSatisfy { $0 == UInt8(ascii: "*") } && last.allSatisfy { $0 >= 0x30 && $0 <= 0x39 }
    }

    /// `2026-11-30T10:02:05.123Z` (fraction optional, `Z` or an offset) → milliseconds; nil if it is not one.
    public static func parseRFC3339(_ s: String) -> Int64? {
        let u = Array(s.utf8)
        guard u.count >= 20, u.count <= 40 else { return nil }
        func num(_ a: Int, _ n: Int) -> Int? {
            var v = 0
            for i in a..<(a + n) {
                guard i < u.count, u[i] >= 0x30, u[i] <= 0x39 else { return nil }
                v = v * 10 + Int(u[i] - 0x30)
            }
            return v
        }
        guard let y = num(0, 4), u[4] == 0x2D, let mo = num(5, 2), u[7] == 0x2D, let d = num(8, 2), u[10] == 0x54 || u[10] == 0x74,
            let h = num(11, 2), u[13] == 0x3A, let mi = num(14, 2), u[16] == 0x3A, let sec = num(17, 2),
            (1...12).contains(mo), (1...31).contains(d), h < 24, mi < 60, sec < 61
        else { return nil }
        var i = 19
        var ms = 0
        if i < u.count, u[i] == 0x2E {
            i += 1
            var digits = 0
            while i < u.count, u[i] >= 0x30, u[i] <= 0x39 {
                if digits < 3 { ms = ms * 10 + Int(u[i] - 0x30) }
                digits += 1
                i += 1
            }
            guard digits > 0 else { return nil }
            if digits < 3 { for _ in digits..<3 { ms *= 10 } }  // 4 to 9+ digits: only the first three count
        }
        var offset = 0
        guard i < u.count else { return nil }
        if u[i] == 0x5A || u[i] == 0x7A {
            i += 1
        } else if u[i] == 0x2B || u[i] == 0x2D, let oh = num(i + 1, 2), i + 3 < u.count, u[i + 3] == 0x3A, let om = num(i + 4, 2) {
            offset = (oh * 60 + om) * 60 * (u[i] == 0x2B ? 1 : -1)
            i += 6
        } else {
            return nil
        }
        guard i == u.count else { return nil }
        var t = tm()
        t.tm_year = Int32(y - 1900)
        t.tm_mon = Int32(mo - 1)
        t.tm_mday = Int32(d)
        t.tm_hour = Int32(h)
        t.tm_min = Int32(mi)
        t.tm_sec = Int32(min(sec, 59))
        let seconds = Int64(timegm(&t)) - Int64(offset)
        let millis = seconds * 1000 + Int64(ms)
        guard millis >= 0, millis <= Timestamp.maxMillis else { return nil }
        return millis
    }

    /// An admin's enrollment list (`mfaInfo` on signUp, `mfa.enrollments` on update), checked as production: each
    /// `phoneInfo` a valid number (`INVALID_MFA_PHONE_NUMBER : Invalid format.`), each id given when `generateIds` is
    /// false (`INVALID_MFA_ENROLLMENT_ID : mfaEnrollmentId must be defined.`) and valid, no id twice
    /// (`DUPLICATE_MFA_ENROLLMENT_ID`). A number given twice is kept once (the official emulator). At most
    /// `maxEnrollments` (`SECOND_FACTOR_LIMIT_EXCEEDED`).
    public struct AdminEnrollment: Sendable {
        public var phoneInfo: String?
        public var mfaEnrollmentId: String?
        public var displayName: String?
        public var enrolledAt: Int64?
        /// The entry has `totpInfo`: a TOTP factor, given with its secret (`totpInfo.sharedSecretKey`, base32) or, without
        /// one, the user's existing TOTP factor of that `mfaEnrollmentId` kept as it is (`Emulator.apply` resolves it).
        public var isTOTP = false
        public var totpSecret: [UInt8]?
        public init(phoneInfo: String?, mfaEnrollmentId: String?, displayName: String?, enrolledAt: Int64?, isTOTP: Bool = false,
                    totpSecret: [UInt8]? = nil) {
            self.phoneInfo = phoneInfo
            self.mfaEnrollmentId = mfaEnrollmentId
            self.displayName = displayName
            self.enrolledAt = enrolledAt
            self.isTOTP = isTOTP
            self.totpSecret = totpSecret
        }
    }

    /// A TOTP secret given by an admin or an import: base32 of 10 to 64 bytes.
    public static func totpSecret(_ base32: String?) -> [UInt8]? {
        guard let base32, let bytes = TOTP.base32Decode(base32), (10...64).contains(bytes.count) else { return nil }
        return bytes
    }

    /// A kept TOTP factor in an admin's list (`AdminEnrollment` without a secret) until `resolveKeptTOTP` finds it.
    static let keptTOTPMarker = ""

    /// An admin's new `mfaInfo` list (journal form) with each kept TOTP factor replaced by the user's existing one of that
    /// id (its secret and replay state; a `displayName` given replaces its name): `MFA_ENROLLMENT_NOT_FOUND` when the
    /// user has none.
    static func resolveKeptTOTP(_ items: [JSON], current: [MFAEnrollment]) throws(AuthError) -> [JSON] {
        var out: [JSON] = []
        for item in items {
            guard item["totpSecret"]?.stringValue == keptTOTPMarker else { out.append(item); continue }
            let id = item["mfaEnrollmentId"]?.stringValue
            guard var kept = current.first(where: { $0.mfaEnrollmentId == id && $0.totp != nil }) else {
                throw AuthError(.mfaEnrollmentNotFound, "A TOTP factor is kept by the mfaEnrollmentId of the user's own, or given with totpInfo.sharedSecretKey.")
            }
            if let n = item["displayName"]?.stringValue { kept.displayName = n }
            out.append(kept.journalJSON)
        }
        return out
    }

    public static func enrollments(_ items: [AdminEnrollment], generateIds: Bool, now: Int64, random: any RandomSource) throws(AuthError) -> [MFAEnrollment] {
        var out: [MFAEnrollment] = []
        var phones = Set<String>(), ids = Set<String>()
        for item in items {
            if let n = item.displayName, Identifiers.containsControlCharacters(n) || n.utf8.count > 256 {
                throw AuthError.invalidArgument("mfaInfo displayName must be at most 256 bytes without control characters.")
            }
            if item.isTOTP {
                let id: String
                if !generateIds || item.totpSecret == nil {
                    guard let given = item.mfaEnrollmentId, !given.isEmpty else {
                        throw AuthError(.invalidMfaEnrollmentId, "mfaEnrollmentId must be defined.")
                    }
                    id = try Identifiers.mfaEnrollmentID(given)
                } else {
                    var fresh = random.alphanumeric(28)
                    while ids.contains(fresh) { fresh = random.alphanumeric(28) }
                    id = fresh
                }
                guard ids.insert(id).inserted else { throw AuthError(.duplicateMfaEnrollmentId) }
                // Without a secret: a placeholder for the user's own factor, resolved when the change is applied.
                out.append(MFAEnrollment(mfaEnrollmentId: id, totp: TOTPFactor(secret: item.totpSecret ?? []), displayName: item.displayName,
                                         enrolledAt: item.enrolledAt ?? now))
                continue
            }
            guard let raw = item.phoneInfo, let phone = try? PhoneNumber(parsing: raw).e164 else {
                throw AuthError(.invalidMfaPhoneNumber, "Invalid format.")
            }
            guard phones.insert(phone).inserted else { continue }
            let id: String
            if generateIds {
                var fresh = random.alphanumeric(28)
                while ids.contains(fresh) { fresh = random.alphanumeric(28) }
                id = fresh
            } else {
                guard let given = item.mfaEnrollmentId, !given.isEmpty else {
                    throw AuthError(.invalidMfaEnrollmentId, "mfaEnrollmentId must be defined.")
                }
                id = try Identifiers.mfaEnrollmentID(given)
            }
            guard ids.insert(id).inserted else { throw AuthError(.duplicateMfaEnrollmentId) }
            out.append(MFAEnrollment(mfaEnrollmentId: id, phoneInfo: phone, displayName: item.displayName, enrolledAt: item.enrolledAt ?? now))
        }
        guard out.count <= maxEnrollments else { throw AuthError(.secondFactorLimitExceeded) }
        return out
    }

    /// An imported record's `mfaInfo` (`accounts:batchCreate`, firebase-tools `accounts.json`), with the official
    /// emulator's per-user messages; nil when the record has none.
    static func importEnrollments(_ v: JSON?, email: String?, emailVerified: Bool, input: UserFieldInput) -> Result<[MFAEnrollment]?, UserFieldError> {
        guard let v, v != .null else { return .success(nil) }
        guard case .array(let items) = v else { return .failure(.init("mfaInfo must be an array")) }
        if items.isEmpty { return .success([]) }
        guard email != nil else { return .failure(.init("Second factor account requires email to be presented.")) }
        guard emailVerified else { return .failure(.init("Second factor account requires email to be verified.")) }
        guard items.count <= maxEnrollments else { return .failure(.init(AuthError(.secondFactorLimitExceeded).description)) }
        var ids = Set<String>()
        for item in items {
            if let id = item["mfaEnrollmentId"]?.stringValue, !id.isEmpty {
                guard ids.insert(id).inserted else { return .failure(.init("Enrollment id already exists.")) }
                guard Identifiers.isValidMFAEnrollmentID(id) else { return .failure(.init(AuthError(.invalidMfaEnrollmentId).description)) }
            }
        }
        var out: [MFAEnrollment] = []
        var phones = Set<String>()
        for item in items {
            let name = item["displayName"]?.stringValue
            if let name, Identifiers.containsControlCharacters(name) || name.utf8.count > 256 {
                return .failure(.init("mfaInfo displayName must be at most 256 bytes without control characters"))
            }
            let at = item["enrolledAt"]?.stringValue.flatMap(parseRFC3339) ?? input.now
            if item["phoneInfo"] == nil, case .object(let t)? = item["totpInfo"] {
                // Our exports carry the secret in `totpInfo.sharedSecretKey`; production's carry none, and a factor
                // without it could never be used.
                guard let secret = totpSecret(t["sharedSecretKey"]?.stringValue) else {
                    return .failure(.init("A TOTP second factor needs totpInfo.sharedSecretKey (base32, as this emulator exports it)."))
                }
                var id = item["mfaEnrollmentId"]?.stringValue ?? ""
                if id.isEmpty {
                    repeat { id = input.random.alphanumeric(28) } while ids.contains(id)
                    ids.insert(id)
                }
                out.append(MFAEnrollment(mfaEnrollmentId: id, totp: TOTPFactor(secret: secret), displayName: name, enrolledAt: at))
                continue
            }
            guard let raw = item["phoneInfo"]?.stringValue else { return .failure(.init("Second factor not supported.")) }
            guard let phone = try? PhoneNumber(parsing: raw).e164 else { return .failure(.init("Phone number format is invalid")) }
            guard phones.insert(phone).inserted else { continue }
            var id = item["mfaEnrollmentId"]?.stringValue ?? ""
            if id.isEmpty {
                repeat { id = input.random.alphanumeric(28) } while ids.contains(id)
                ids.insert(id)
            }
            out.append(MFAEnrollment(mfaEnrollmentId: id, phoneInfo: phone, displayName: name, enrolledAt: at))
        }
        return .success(out)
    }
}

extension Emulator {
    /// How long an `mfaPendingCredential` is good for, and how many a store keeps (the oldest evicted first).
    public static let mfaPendingLifetimeMillis: Int64 = 600_000
    public static let maxMFAPending = 1024
    /// Pending sign-ins one user keeps (the oldest of theirs go first).
    public static let maxMFAPendingPerUser = 5

    static let mfaDisabled = AuthError(.operationNotAllowed, "SMS based MFA not enabled.")
    static let unsupportedFirstFactorForMFA = AuthError(.unsupportedFirstFactor, "MFA is not available for the given first factor.")
    /// Phone sign-in of a user with second factors (at send and at sign-in, as the official emulator).
    public static let phoneFirstFactorOfMFAUser = AuthError(.unsupportedFirstFactor, "A phone number cannot be set as a first factor on an SMS based MFA user.")
    static let secondFactorExists = AuthError(.secondFactorExists, "Phone number already enrolled as second factor for this account.")

    static func checkMFAEnabled(_ s: AuthStore) throws(AuthError) {
        guard s.config.mfa.smsEnabled else { throw mfaDisabled }
    }

    /// `OPERATION_NOT_ALLOWED : SMS based MFA not enabled.` when the project or tenant has SMS MFA off (reads only).
    public func checkMFAEnabled(_ key: StoreKey) throws(AuthError) {
        try checkMFAProvider(key, Self.mfaDisabled) { $0.smsEnabled }
    }

    /// `PROJECT_DISABLED` for a disabled tenant, else `off` unless `enabled` holds for the store's MFA config (reads only).
    func checkMFAProvider(_ key: StoreKey, _ off: AuthError, _ enabled: (MFAConfig) -> Bool) throws(AuthError) {
        if let s = existingStore(key)?.read({ $0.tenant?.disableAuth == true ? 1 : (enabled($0.config.mfa) ? 0 : 2) }) {
            if s == 1 { throw AuthError(.projectDisabled) }
            if s == 2 { throw off }
        } else if !enabled(config(key).mfa) {
            throw off
        }
    }

    // MARK: the first-factor seam

    /// The seam for a first-factor sign-in (password, email link, IdP): call it inside the sign-in's transaction,
    /// after the credential checked out and before issuing tokens, with the signed-in user and its provider id.
    /// `.issueTokens` when no second factor is due (no enrollments, or MFA off for the store, as the official
    /// emulator); otherwise it records a pending credential (expiring, bounded, bound to this store and user) and
    /// answers `.mfaRequired`: reply with `MFAJSON.pendingReply` instead of tokens, and do not issue a refresh token.
    public func passFirstFactor(_ tx: inout StoreTransaction, user: UserRecord, signInProvider: String) -> FirstFactorOutcome {
        let mfa = tx.store.config.mfa
        guard user.mfaInfo.contains(where: mfa.enables) else { return .issueTokens }
        let now = clock.nowMillis()
        let token = random.token(byteCount: 48)
        // A user's own older pending sign-ins make room first: one account signing in again and again cannot push
        // other users' pending sign-ins out of the table.
        let mine = tx.store.mfaPending.keys(now: now) { $0.localId == user.localId }
        for old in mine.prefix(max(0, mine.count - (Self.maxMFAPendingPerUser - 1))) { _ = tx.mfaPending.take(old, now: now) }
        tx.mfaPending.insert(token, PendingMFA(localId: user.localId, signInProvider: signInProvider),
                             expiresAt: now + Self.mfaPendingLifetimeMillis, now: now)
        return .mfaRequired(pendingCredential: token, enrollments: user.mfaInfo)
    }

    /// Whether a first-factor sign-in of `user` will end with the MFA-required answer rather than tokens, as
    /// `passFirstFactor` decides it now (a handler's guess of whether it will sign; the transaction decides).
    public func secondFactorLikelyRequired(_ key: StoreKey, user: UserRecord) -> Bool {
        guard !user.mfaInfo.isEmpty else { return false }
        let mfa = existingStore(key)?.read { $0.config.mfa } ?? config(key).mfa
        return user.mfaInfo.contains(where: mfa.enables)
    }

    /// `passFirstFactor` in its own transaction, for a first factor that has already saved its user.
    public func passFirstFactor(_ key: StoreKey, localId: String, signInProvider: String) throws(AuthError) -> FirstFactorOutcome {
        try transaction(key) { tx throws(AuthError) -> FirstFactorOutcome in
            guard let user = tx.store.users[localId] else { throw AuthError(.userNotFound) }
            return passFirstFactor(&tx, user: user, signInProvider: signInProvider)
        }
    }

    /// Checks and consumes a code: `MISSING_SESSION_INFO`/`MISSING_CODE` are the caller's; unknown session (or one
    /// `accepts` refuses) `INVALID_SESSION_INFO`, expired `SESSION_EXPIRED`, out of attempts
    /// `TOO_MANY_ATTEMPTS_TRY_LATER`, scenario `onSignIn`, too many wrong codes from this IP address or for this number
    /// (the abuse limits, Protection.swift) `TOO_MANY_ATTEMPTS_TRY_LATER`, wrong `INVALID_CODE` (an attempt used, the
    /// failure counted, `onWrongCode` called). The matching session is deleted (single use).
    func consumeCode(_ tx: inout StoreTransaction, sessionInfo: String, code: String, clientIP: String?, now: Int64,
                     accepts: (VerificationSession) -> Bool,
                     onWrongCode: (inout StoreTransaction, VerificationSession) -> Void = { _, _ in }) throws(AuthError) -> VerificationSession {
        guard let sid = SessionID(sessionInfo), var session = tx.store.sessions[sid], accepts(session) else {
            throw AuthError(.invalidSessionInfo)
        }
        if let exp = session.expiresAt, now >= exp {
            tx.deleteSession(sid)
            tx.emit(.sessionExpired(phoneNumber: session.phoneNumber, session: sid))
            tx.emit(.codeRejected(phoneNumber: session.phoneNumber, kind: session.kind, session: sid, reason: .sessionExpired, attemptsLeft: nil))
            throw AuthError(.sessionExpired)
        }
        if let left = session.attemptsLeft, left <= 0 {
            tx.deleteSession(sid)
            tx.emit(.codeRejected(phoneNumber: session.phoneNumber, kind: session.kind, session: sid, reason: .tooManyAttemptsTryLater, attemptsLeft: 0))
            throw AuthError(.tooManyAttemptsTryLater)
        }
        if let scenario = tx.store.config.phoneAuth.scenarioNumbers[session.phoneNumber]?.onSignIn {
            throw Self.scenarioError(scenario)
        }
        try checkCodeGuessLimits(&tx, session, clientIP: clientIP, now: now)
        guard constantTimeEquals(code, session.code) else {
            if let left = session.attemptsLeft {
                session.attemptsLeft = left - 1
                tx.save(session)
            }
            countWrongCode(&tx, session, clientIP: clientIP, now: now)
            onWrongCode(&tx, session)
            tx.emit(.codeRejected(phoneNumber: session.phoneNumber, kind: session.kind, session: sid, reason: .invalidCode,
                                  attemptsLeft: session.attemptsLeft))
            throw AuthError(.invalidCode)
        }
        tx.deleteSession(sid)
        tx.emit(.codeVerified(phoneNumber: session.phoneNumber, kind: session.kind, session: sid))
        return session
    }

    // MARK: enrollment

    /// `mfaEnrollment:start`: sends a code to `phoneNumber` for the signed-in user (`identity`, already verified).
    /// `hasEnrollmentInfo`: the request carried `phoneEnrollmentInfo`. Returns the `sessionInfo`.
    public func startMFAEnrollment(_ key: StoreKey, identity: TokenIdentity, hasEnrollmentInfo: Bool, phoneNumber: String?,
                                   clientIP: String? = nil, credentials: AppCredentials = AppCredentials()) throws(AuthError) -> String {
        let now = clock.nowMillis()
        makeSessionRoom(now: now)
        let session = try transaction(key) { tx throws(AuthError) -> VerificationSession in
            try tx.checkTenantEnabled()
            try Self.checkMFAEnabled(tx.store)
            guard let user = tx.store.users[identity.localId] else { throw AuthError(.userNotFound) }
            guard !MultiFactor.ineligibleProviders.contains(identity.signInProvider) else { throw Self.unsupportedFirstFactorForMFA }
            guard user.email != nil, user.emailVerified else {
                throw AuthError(.unverifiedEmail, "Need to verify email first before enrolling second factors.")
            }
            guard hasEnrollmentInfo else { throw AuthError(.invalidArgument, "((Missing phoneEnrollmentInfo.))") }
            let phone = try PhoneNumber(parsing: phoneNumber)
            guard !user.mfaInfo.contains(where: { $0.phoneInfo == phone.e164 }) else { throw Self.secondFactorExists }
            guard user.mfaInfo.count < MultiFactor.maxEnrollments else { throw AuthError(.secondFactorLimitExceeded) }
            guard tx.store.config.phoneEnabled else { throw AuthError(.operationNotAllowed) }
            return try createSession(&tx, phone: phone, kind: .mfaEnrollment, owner: user.localId, appSignatureHash: nil,
                                     clientIP: clientIP, credentials: credentials, now: now)
        }
        logCode(session, key: key)
        return session.sessionInfo
    }

    /// `mfaEnrollment:finalize`: checks the code and adds the number to the user's second factors; the user's older
    /// sessions are revoked (production: "existing Firebase sessions are revoked"). Accepts an enrollment session of
    /// this user, or a first-factor session (the iOS SDK in testing mode sends its enrollment code through
    /// `sendVerificationCode`).
    public func finalizeMFAEnrollment(_ key: StoreKey, identity: TokenIdentity, sessionInfo: String?, code: String?,
                                      displayName: String?, clientIP: String? = nil) throws(AuthError) -> MFATokens {
        let now = clock.nowMillis()
        return try transaction(key) { tx throws(AuthError) -> MFATokens in
            try tx.checkTenantEnabled()
            try Self.checkMFAEnabled(tx.store)
            guard let enrolling = tx.store.users[identity.localId] else { throw AuthError(.userNotFound) }
            guard !MultiFactor.ineligibleProviders.contains(identity.signInProvider) else { throw Self.unsupportedFirstFactorForMFA }
            // As at start: a first-factor code for the number (the iOS path) skips start, not this rule.
            guard enrolling.email != nil, enrolling.emailVerified else {
                throw AuthError(.unverifiedEmail, "Need to verify email first before enrolling second factors.")
            }
            guard let code, !code.isEmpty else { throw AuthError(.missingCode) }
            guard let sessionInfo, !sessionInfo.isEmpty else { throw AuthError(.missingSessionInfo) }
            let session = try consumeCode(&tx, sessionInfo: sessionInfo, code: code, clientIP: clientIP, now: now) { s in
                // This user's enrollment code, or a code for the number sent through `sendVerificationCode` (the iOS
                // SDK in testing mode): either proves the number is the user's.
                (s.kind == .mfaEnrollment && s.owner == identity.localId) || (s.kind == .signIn && s.owner == nil)
            }
            guard let user = tx.store.users[identity.localId] else { throw AuthError(.userNotFound) }
            guard !user.mfaInfo.contains(where: { $0.phoneInfo == session.phoneNumber }) else { throw Self.secondFactorExists }
            guard user.mfaInfo.count < MultiFactor.maxEnrollments else { throw AuthError(.secondFactorLimitExceeded) }
            return addSecondFactor(&tx, user, identity: identity, now: now) { id in
                MFAEnrollment(mfaEnrollmentId: id, phoneInfo: session.phoneNumber, displayName: displayName, enrolledAt: now)
            }
        }
    }

    /// The end of an enrollment finalize (SMS and TOTP): `make` builds the factor with a fresh id; the user's older
    /// sessions are revoked (`validSince`), `mfa.enrolled`, and tokens with the new second factor.
    func addSecondFactor(_ tx: inout StoreTransaction, _ found: UserRecord, identity: TokenIdentity, now: Int64,
                         _ make: (String) -> MFAEnrollment) -> MFATokens {
        var user = found
        var id = random.alphanumeric(28)
        while user.mfaInfo.contains(where: { $0.mfaEnrollmentId == id }) { id = random.alphanumeric(28) }
        let enrollment = make(id)
        user.mfaInfo.append(enrollment)
        user.validSince = now / 1000
        tx.save(user)
        tx.emit(.mfaEnrolled(uid: user.localId, mfaEnrollmentId: id, phoneNumber: enrollment.phoneInfo))
        tx.emitUserChanges(from: found, to: user)
        let authTime = now / 1000, kind = enrollment.totp == nil ? nil : enrollment.factorId
        let (token, record) = newRefreshToken(tx.key, localId: user.localId, authTime: authTime, signInProvider: identity.signInProvider,
                                              secondFactorId: id, secondFactor: kind)
        tx.insertRefreshToken(token, record)
        tx.emit(.tokensIssued(uid: user.localId, provider: identity.signInProvider, secondFactor: enrollment.factorId))
        return MFATokens(user: user, refreshToken: token, signInProvider: identity.signInProvider, authTime: authTime, secondFactorId: id,
                         secondFactor: kind)
    }

    /// `mfaEnrollment:withdraw`: removes one second factor (`MFA_ENROLLMENT_NOT_FOUND`) and issues fresh tokens
    /// without second-factor claims.
    public func withdrawMFA(_ key: StoreKey, identity: TokenIdentity, mfaEnrollmentId: String?) throws(AuthError) -> MFATokens {
        try transaction(key) { tx throws(AuthError) -> MFATokens in
            try tx.checkTenantEnabled()
            guard var user = tx.store.users[identity.localId] else { throw AuthError(.userNotFound) }
            guard let id = mfaEnrollmentId, let i = user.mfaInfo.firstIndex(where: { $0.mfaEnrollmentId == id }) else {
                throw AuthError(.mfaEnrollmentNotFound)
            }
            let old = user
            user.mfaInfo.remove(at: i)
            tx.save(user)
            tx.emit(.mfaWithdrawn(uid: user.localId, mfaEnrollmentId: id))
            tx.emitUserChanges(from: old, to: user)
            let (token, record) = newRefreshToken(key, localId: user.localId, authTime: identity.authTime, signInProvider: identity.signInProvider)
            tx.insertRefreshToken(token, record)
            tx.emit(.tokensIssued(uid: user.localId, provider: identity.signInProvider, secondFactor: nil))
            return MFATokens(user: user, refreshToken: token, signInProvider: identity.signInProvider, authTime: identity.authTime, secondFactorId: nil)
        }
    }

    // MARK: sign-in

    /// The live pending credential of this store (`INVALID_MFA_PENDING_CREDENTIAL` when unknown, expired, used or
    /// from another project or tenant) and its user.
    static func pending(_ tx: inout StoreTransaction, _ credential: String, now: Int64) throws(AuthError) -> (PendingMFA, UserRecord) {
        guard credential.utf8.count <= 512, let p = tx.store.mfaPending.peek(credential, now: now), let user = tx.store.users[p.localId] else {
            throw AuthError(.invalidMfaPendingCredential)
        }
        return (p, user)
    }

    /// `mfaSignIn:start`: sends a code to the enrolled number `mfaEnrollmentId` of the pending credential's user, bound
    /// to this pending sign-in (only it can finalize with that code), through the same pipeline as every send. With the
    /// abuse limits on, a pending sign-in sends at most `protection.sessionsPerMfaSignIn` codes (fictional numbers
    /// exempt).
    public func startMFASignIn(_ key: StoreKey, pendingCredential: String?, mfaEnrollmentId: String?,
                               clientIP: String? = nil, credentials: AppCredentials = AppCredentials()) throws(AuthError) -> String {
        let now = clock.nowMillis()
        makeSessionRoom(now: now)
        let session = try transaction(key) { tx throws(AuthError) -> VerificationSession in
            try tx.checkTenantEnabled()
            try Self.checkMFAEnabled(tx.store)
            guard let pendingCredential, !pendingCredential.isEmpty else {
                throw AuthError(.missingMfaPendingCredential, "Request does not have MFA pending credential.")
            }
            guard let mfaEnrollmentId, !mfaEnrollmentId.isEmpty else {
                throw AuthError(.missingMfaEnrollmentId, "No second factor identifier is provided.")
            }
            let (pending, user) = try Self.pending(&tx, pendingCredential, now: now)
            guard let enrollment = user.mfaInfo.first(where: { $0.mfaEnrollmentId == mfaEnrollmentId }) else {
                throw AuthError(.mfaEnrollmentNotFound)
            }
            guard enrollment.totp == nil else {
                throw AuthError(.invalidArgument, "The enrollment is a TOTP factor: mfaSignIn:finalize takes its code (totpVerificationInfo).")
            }
            let phone = try PhoneNumber(parsing: enrollment.phoneInfo)
            guard tx.store.config.phoneEnabled else { throw AuthError(.operationNotAllowed) }
            if tx.store.config.testPhoneNumbers[phone.e164] == nil, let limits = activeProtection(tx), limits.sessionsPerMfaSignIn > 0,
               pending.sent >= limits.sessionsPerMfaSignIn {
                tx.emit(.limitHit(limit: .tooManyAttemptsTryLater, phoneNumber: phone.e164, ip: clientIP))
                throw AuthError(.tooManyAttemptsTryLater)
            }
            let session = try createSession(&tx, phone: phone, kind: .mfaSignIn, owner: user.localId, appSignatureHash: nil,
                                            clientIP: clientIP, credentials: credentials, now: now)
            tx.mfaPending.update(pendingCredential, now: now) { p in
                p.sessions.append(session.id)
                if p.sessions.count > PendingMFA.maxBoundSessions { p.sessions.removeFirst() }
                p.sent &+= 1
            }
            return session
        }
        logCode(session, key: key)
        return session.sessionInfo
    }

    /// `mfaSignIn:finalize` without blocking functions, in one call (`signIn(key, .mfaFinalize(…))`).
    public func finalizeMFASignIn(_ key: StoreKey, pendingCredential: String, sessionInfo: String?, code: String?,
                                  clientIP: String? = nil) throws(AuthError) -> MFATokens {
        let request = SignInRequest.MFAFinalize(pendingCredential: pendingCredential, sessionInfo: sessionInfo, code: code, clientIP: clientIP)
        guard case .signedIn(let s) = try signIn(key, .mfaFinalize(request)) else {
            throw AuthError.internalError("an MFA finalize ends signed in")
        }
        return MFATokens(user: s.user, refreshToken: s.refreshToken, signInProvider: s.signInProvider, authTime: s.authTime,
                         secondFactorId: s.secondFactorId, secondFactor: s.secondFactor)
    }

    /// The user a pending MFA credential names (for beforeSendSms on `mfaSignIn:start`), if any.
    public func pendingMFAUser(_ key: StoreKey, pendingCredential: String?) -> UserRecord? {
        guard let box = existingStore(key), let c = pendingCredential, c.utf8.count <= 512 else { return nil }
        let now = clock.nowMillis()
        return box.read { s in s.mfaPending.peek(c, now: now).flatMap { s.users[$0.localId] } }
    }

    /// The iOS SDK with app verification disabled for testing starts an MFA sign-in with `sendVerificationCode
    /// {phoneNumber: "+*******0100"}`: the masked hint, with no pending credential (firebase-ios-sdk#11079). The hint
    /// stands for the pending sign-in it came from: the newest live pending credential of this store whose user has an
    /// enrollment of that masked form, and that enrollment (the first of that form). Nil when there is none.
    public func resolveMaskedMFASignIn(_ key: StoreKey, maskedPhone: String) -> (pendingCredential: String, mfaEnrollmentId: String)? {
        guard MultiFactor.isMasked(maskedPhone), let box = existingStore(key) else { return nil }
        let now = clock.nowMillis()
        return box.read { s -> (pendingCredential: String, mfaEnrollmentId: String)? in
            var found: (pendingCredential: String, mfaEnrollmentId: String)? = nil
            _ = s.mfaPending.newest(now: now) { token, p in
                guard let e = s.users[p.localId]?.mfaInfo.first(where: { $0.maskedPhone == maskedPhone }) else { return false }
                found = (token, e.mfaEnrollmentId)
                return true
            }
            return found
        }
    }

    /// The iOS masked send, resolved (`resolveMaskedMFASignIn`) and sent exactly as `mfaSignIn:start` sends: to the
    /// enrolled number the hint stands for (its preset code only if that number is fictional), bound to that pending
    /// sign-in, through every send policy. A hint that stands for no pending sign-in is `INVALID_PHONE_NUMBER`, as
    /// production answers a masked number.
    public func sendMaskedMFACode(_ key: StoreKey, maskedPhone: String, clientIP: String? = nil,
                                  credentials: AppCredentials = AppCredentials()) throws(AuthError) -> String {
        guard let (credential, enrollmentId) = resolveMaskedMFASignIn(key, maskedPhone: maskedPhone) else {
            throw AuthError(.invalidPhoneNumber, "Invalid format.")
        }
        return try startMFASignIn(key, pendingCredential: credential, mfaEnrollmentId: enrollmentId, clientIP: clientIP, credentials: credentials)
    }
}

extension SignInRequest {
    /// `mfaSignIn:finalize`: the pending credential a first factor answered, and an SMS code sent for it.
    public struct MFAFinalize: Sendable {
        public var pendingCredential: String
        public var sessionInfo: String?
        public var code: String?
        public var clientIP: String?

        public init(pendingCredential: String, sessionInfo: String?, code: String?, clientIP: String? = nil) {
            self.pendingCredential = pendingCredential
            self.sessionInfo = sessionInfo
            self.code = code
            self.clientIP = clientIP
        }
    }
}

extension SignInRequest.MFAFinalize: SignInMethod {
    /// Without blocking functions nothing is decided before the commit (it checks everything). With them
    /// (beforeSignIn after the second factor, as production): whether the code and the pending credential are good
    /// right now, reading only — nothing is consumed until the commit checks again, so a function that refuses leaves
    /// both usable. Nil when they are not: the commit then answers the precise error and counts the attempt, and no
    /// function is called.
    func plan(_ e: Emulator, _ tx: inout StoreTransaction, now: Int64, hooked: Bool) throws(AuthError) -> SignInStep<SignInCandidate?> {
        guard hooked, let sessionInfo, let code, !code.isEmpty, let sid = SessionID(sessionInfo), pendingCredential.utf8.count <= 512,
              let p = tx.store.mfaPending.peek(pendingCredential, now: now), let session = tx.store.sessions[sid],
              session.kind == .mfaSignIn, session.owner == p.localId, p.sessions.contains(sid), constantTimeEquals(code, session.code),
              session.expiresAt.map({ now < $0 }) ?? true, let user = tx.store.users[p.localId], !user.disabled,
              user.mfaInfo.contains(where: { $0.phoneInfo == session.phoneNumber })
        else { return .proceed(nil) }
        return .proceed(SignInCandidate(user: user, isNew: false, method: BlockingSignInMethod(rawValue: p.signInProvider),
                                        secondFactor: "phone"))
    }

    func candidate(_ decision: SignInCandidate?) -> SignInCandidate? { decision }

    /// Checks the pending credential, then the code — which must be one sent to this pending sign-in
    /// (`PendingMFA.sessions`) for one of its user's enrolled numbers — consumes both (the credential is single use),
    /// sets `lastLoginAt` and issues tokens with the second factor. With the abuse limits on, a pending sign-in that
    /// has had `protection.failedCodesPerMfaSignIn` wrong codes is revoked (`TOO_MANY_ATTEMPTS_TRY_LATER`). After
    /// beforeSignIn: a user it disabled gets its changes saved and `USER_DISABLED` (nothing consumed); otherwise its
    /// changes are saved with the sign-in.
    func commit(_ e: Emulator, _ tx: inout StoreTransaction, _ decision: consuming SignInCandidate?, changes: BlockingFunctions.Outcome?,
                now: Int64) throws(AuthError) -> SignInOutcome {
        try e.beginMFACommit(&tx, decision, changes, Emulator.checkMFAEnabled)
        guard let code, !code.isEmpty else { throw AuthError(.missingCode) }
        guard let sessionInfo, !sessionInfo.isEmpty else { throw AuthError(.missingSessionInfo) }
        let (pending, _) = try Emulator.pending(&tx, pendingCredential, now: now)
        if let limits = e.activeProtection(tx), limits.failedCodesPerMfaSignIn > 0, pending.failedCodes >= limits.failedCodesPerMfaSignIn {
            _ = tx.mfaPending.take(pendingCredential, now: now)
            tx.emit(.limitHit(limit: .tooManyAttemptsTryLater, phoneNumber: nil, ip: clientIP))
            throw AuthError(.tooManyAttemptsTryLater)
        }
        let session = try e.consumeCode(&tx, sessionInfo: sessionInfo, code: code, clientIP: clientIP, now: now, accepts: { s in
            s.kind == .mfaSignIn && s.owner == pending.localId && pending.sessions.contains(s.id)
        }, onWrongCode: { tx, s in
            if !s.fictional { tx.mfaPending.update(pendingCredential, now: now) { $0.failedCodes &+= 1 } }
        })
        guard let user = tx.store.users[pending.localId] else { throw AuthError(.invalidMfaPendingCredential) }
        guard let enrollment = user.mfaInfo.first(where: { $0.phoneInfo == session.phoneNumber }) else { throw AuthError(.mfaEnrollmentNotFound) }
        return try e.finishMFASignIn(&tx, user, found: user, pendingCredential: pendingCredential, pending, changes: changes,
                                     enrollment: enrollment, now: now)
    }
}

extension Emulator {
    /// The start of an MFA sign-in finalize's commit (SMS and TOTP): a user a beforeSignIn function disabled gets its
    /// changes saved and `USER_DISABLED` (nothing consumed); then the tenant and the factor kind (`enabled`) must be on.
    func beginMFACommit(_ tx: inout StoreTransaction, _ decision: SignInCandidate?, _ changes: BlockingFunctions.Outcome?,
                        _ enabled: (AuthStore) throws(AuthError) -> Void) throws(AuthError) {
        if let changes, changes.disabled == true, let peeked = decision {
            try refuseDisabled(&tx, localId: peeked.user.localId, changes)
        }
        try tx.checkTenantEnabled()
        try enabled(tx.store)
    }

    /// The end of an MFA sign-in finalize (SMS and TOTP), once the code checked out: a disabled user is
    /// `USER_DISABLED`; else a beforeSignIn's changes (reported against `found`) and the sign-in times are saved, the
    /// pending credential is consumed (single use) and tokens carry the second factor.
    func finishMFASignIn(_ tx: inout StoreTransaction, _ checked: UserRecord, found: UserRecord, pendingCredential: String, _ pending: PendingMFA,
                         changes: BlockingFunctions.Outcome?, enrollment: MFAEnrollment, now: Int64) throws(AuthError) -> SignInOutcome {
        guard !checked.disabled else { throw AuthError(.userDisabled) }
        var user = checked
        changes?.apply(to: &user)
        user.lastLoginAt = now
        user.lastRefreshAt = now
        tx.save(user)
        tx.emitUserChanges(from: found, to: user)  // what a beforeSignIn function changed
        _ = tx.mfaPending.take(pendingCredential, now: now)
        return issueSession(&tx, user, isNew: false, provider: pending.signInProvider, authTime: now / 1000,
                            secondFactorId: enrollment.mfaEnrollmentId, secondFactor: enrollment.totp == nil ? nil : enrollment.factorId)
    }
}
