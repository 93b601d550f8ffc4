import EmulatorSupport

/// A configuration problem, naming the offending key path (and the file, when there is one).
public struct ConfigError: Error, Sendable, CustomStringConvertible, Equatable {
    public let path: String
    public let message: String
    public init(path: String, message: String) {
        self.path = path
        self.message = message
    }
    public var description: String { path.isEmpty ? message : "\(path): \(message)" }
}

/// A send/verify limit: at most `max` events per `perSeconds` window; `max == 0` means no limit.
public struct RateLimit: Sendable, Equatable {
    public var max: Int
    public var perSeconds: Int
    public init(max: Int, perSeconds: Int) {
        self.max = max
        self.perSeconds = perSeconds
    }
}

/// A scenario number: fail with this Google error at send or at sign-in.
public struct Scenario: Sendable, Equatable {
    public var onSend: String?
    public var onSignIn: String?
}

/// `smsRegionConfig`, in production's shape.
public enum SMSRegionPolicy: Sendable, Equatable {
    case allowByDefault(disallowed: [String])
    case allowlistOnly(allowed: [String])

    public func allows(region: String?) -> Bool {
        switch self {
        case .allowByDefault(let d): return region.map { !d.contains($0) } ?? true
        case .allowlistOnly(let a): return region.map { a.contains($0) } ?? false
        }
    }
}

/// The per-project phone-auth settings (`phoneAuth` block of the config).
public struct PhoneAuthSettings: Sendable, Equatable {
    public enum AppVerification: String, Sendable { case off = "OFF", enforce = "ENFORCE" }
    public var appVerification: AppVerification = .off
    public var codeLength = 6
    public var sessionTtlSeconds = 600
    public var maxCodeAttempts = 5
    public var perPhoneNumber = RateLimit(max: 0, perSeconds: 3600)
    public var perIp = RateLimit(max: 0, perSeconds: 3600)
    public var smsQuota = RateLimit(max: 0, perSeconds: 86400)
    public var scenarioNumbers: [String: Scenario] = [:]
    /// `delivery`: how the carrier treats SMS to a number or prefix (SMSDefense.swift).
    public var delivery: [String: SMSDeliveryRule] = [:]
    public init() {}
}

/// How tenants come into being (`tenants` block of a project's config).
public struct TenantPolicy: Sendable, Equatable {
    /// A valid, unknown `tenantId` in a request creates that tenant (as the official emulator does). `false`:
    /// production's `TENANT_NOT_FOUND`, and tenants exist only once created through the v2 tenants API (or an import).
    public var createOnFirstUse = true
    public init() {}
}

/// One project's (or tenant's) configuration: the same JSON that `GET/PATCH /emulator/v1/projects/{p}/config` uses.
public struct ProjectConfig: Sendable, Equatable {
    public var phoneEnabled = true
    /// Fictional numbers (canonical E.164) → their fixed code.
    public var testPhoneNumbers: [String: String] = [:]
    public var smsRegion: SMSRegionPolicy = .allowByDefault(disallowed: [])
    public var phoneAuth = PhoneAuthSettings()
    /// The `tenants` block: how tenants come into being in this project.
    public var tenantPolicy = TenantPolicy()
    /// SMS multi-factor (`mfa` here and in the v2 config, `mfaConfig` on tenants): ENABLED with PHONE_SMS by default.
    public var mfa = MFAConfig()
    /// The official emulator's config key `signIn.allowDuplicateEmails`: stored and returned.
    public var allowDuplicateEmails = false
    /// `emailPrivacyConfig.enableImprovedEmailPrivacy`: production's email enumeration protection, on by default as for
    /// every project created since September 2023: a wrong password and an unknown email both answer
    /// `INVALID_LOGIN_CREDENTIALS`, `createAuthUri` says nothing about the email, a password reset for an unknown email
    /// answers as for a known one. `false`: the legacy codes (`EMAIL_NOT_FOUND`, `INVALID_PASSWORD`), as the official
    /// emulator answers by default.
    public var enableImprovedEmailPrivacy = true
    /// `protection` (Protection.swift): production's limits on guessing codes and passwords, on when the server is
    /// reachable by others unless configured.
    public var protection = ProtectionConfig()
    /// `blockingFunctions` (BlockingFunctions.swift): the functions called before a user is created, signs in, or an SMS is sent.
    public var blockingFunctions = BlockingFunctionsConfig()
    /// `events` (Webhooks.swift): webhooks and the Functions emulator, where committed events are pushed.
    public var events = EventsPushConfig()
    /// `idpConfigs` (IdpConfigs.swift): federated providers' configurations, in creation order.
    public var idpConfigs: [IdpConfig] = []
    /// `appCheck` (Attestation.swift): App Check enforcement for the client calls, token lifetime, registered apps.
    public var appCheck = AppCheckConfig()
    /// `phoneNumberVerification` (Attestation.swift): numbers Firebase PNV test tokens are issued for.
    public var pnv = PNVConfig()
    /// `recaptchaConfig` (SMSDefense.swift): reCAPTCHA SMS defense, production's shape.
    public var recaptcha = RecaptchaSettings()
    /// `passwordPolicyConfig` (PasswordPolicy.swift): production's password policy, off unless given.
    public var passwordPolicy = PasswordPolicy()
    /// Fields of the production v2 config we do not model, kept so a GET returns what a PATCH stored.
    public var passthrough = JSONObject()

    public init() {}

    // MARK: rendering

    public func toJSON() -> JSON {
        var o = JSONObject()
        o["signIn"] = ["phoneNumber": ["enabled": .bool(phoneEnabled), "testPhoneNumbers": Self.testNumbersJSON(testPhoneNumbers)],
                       "allowDuplicateEmails": .bool(allowDuplicateEmails)]
        o["emailPrivacyConfig"] = ["enableImprovedEmailPrivacy": .bool(enableImprovedEmailPrivacy)]
        o["mfa"] = mfa.json
        o["smsRegionConfig"] = smsRegionJSON
        var pa = JSONObject()
        pa["appVerification"] = .string(phoneAuth.appVerification.rawValue)
        pa["codeLength"] = .int(phoneAuth.codeLength)
        pa["sessionTtlSeconds"] = .int(phoneAuth.sessionTtlSeconds)
        pa["maxCodeAttempts"] = .int(phoneAuth.maxCodeAttempts)
        pa["sendRateLimits"] = ["perPhoneNumber": Self.limitJSON(phoneAuth.perPhoneNumber), "perIp": Self.limitJSON(phoneAuth.perIp)]
        pa["smsQuota"] = Self.limitJSON(phoneAuth.smsQuota)
        var sc = JSONObject()
        for k in phoneAuth.scenarioNumbers.keys.sorted() {
            let s = phoneAuth.scenarioNumbers[k]!
            var e = JSONObject()
            e.set("onSend", s.onSend.map(JSON.string))
            e.set("onSignIn", s.onSignIn.map(JSON.string))
            sc[k] = .object(e)
        }
        pa["scenarioNumbers"] = .object(sc)
        var dl = JSONObject()
        for k in phoneAuth.delivery.keys.sorted() { dl[k] = phoneAuth.delivery[k]!.json }
        pa["delivery"] = .object(dl)
        o["phoneAuth"] = .object(pa)
        o["recaptchaConfig"] = recaptcha.json
        if passwordPolicy.configured { o["passwordPolicyConfig"] = passwordPolicy.json }
        o["tenants"] = ["createOnFirstUse": .bool(tenantPolicy.createOnFirstUse)]
        o["protection"] = protection.json
        o["blockingFunctions"] = blockingFunctions.json
        o["events"] = events.json
        if !idpConfigs.isEmpty { o["idpConfigs"] = idpConfigsJSON }
        o["appCheck"] = appCheck.json
        o["phoneNumberVerification"] = pnv.json
        return .object(o)
    }

    public var smsRegionJSON: JSON {
        switch smsRegion {
        case .allowByDefault(let d): return ["allowByDefault": ["disallowedRegions": .array(d.map(JSON.string))]]
        case .allowlistOnly(let a): return ["allowlistOnly": ["allowedRegions": .array(a.map(JSON.string))]]
        }
    }

    public static func testNumbersJSON(_ m: [String: String]) -> JSON {
        var o = JSONObject()
        for k in m.keys.sorted() { o[k] = .string(m[k]!) }
        return .object(o)
    }

    static func limitJSON(_ l: RateLimit) -> JSON { ["max": .int(l.max), "perSeconds": .int(l.perSeconds)] }

    // MARK: decoding

    /// `emailPrivacyConfig` (`{enableImprovedEmailPrivacy}`), in a project's config or a tenant resource.
    public mutating func applyEmailPrivacy(_ v: JSON, path p: String) throws(ConfigError) {
        for (k2, v2) in try Self.object(v, p) {
            let p2 = Self.join(p, k2)
            guard k2 == "enableImprovedEmailPrivacy" else { throw ConfigError(path: p2, message: "unknown key") }
            enableImprovedEmailPrivacy = try Self.bool(v2, p2)
        }
    }

    /// Applies a config JSON object onto `self`: fields present replace, objects merge, maps
    /// (`testPhoneNumbers`, `scenarioNumbers`) are replaced whole. Unknown keys are refused.
    public mutating func apply(_ json: JSON, path: String = "") throws(ConfigError) {
        let o = try Self.object(json, path)
        for (k, v) in o {
            let p = Self.join(path, k)
            switch k {
            case "signIn": try applySignIn(v, path: p, strict: true)
            case "smsRegionConfig": smsRegion = try Self.parseSMSRegion(v, path: p)
            case "mfa": try mfa.apply(v, path: p)
            case "emailPrivacyConfig": try applyEmailPrivacy(v, path: p)
            case "phoneAuth": try applyPhoneAuth(v, path: p)
            case "recaptchaConfig": try recaptcha.apply(v, path: p)
            case "passwordPolicyConfig": passwordPolicy = try PasswordPolicy.parse(v, path: p)
            case "protection": try protection.apply(v, path: p)
            case "blockingFunctions":
                do { blockingFunctions = try BlockingFunctionsConfig.parse(v, path: p) } catch { throw error.configError }
            case "events": try events.apply(v, path: p)
            case "idpConfigs": idpConfigs = try Self.parseIdpConfigs(v, path: p)
            case "appCheck": try appCheck.apply(v, path: p)
            case "phoneNumberVerification": try pnv.apply(v, path: p)
            case "tenants":
                for (k2, v2) in try Self.object(v, p) {
                    let p2 = Self.join(p, k2)
                    switch k2 {
                    case "createOnFirstUse": tenantPolicy.createOnFirstUse = try Self.bool(v2, p2)
                    default: throw ConfigError(path: p2, message: "unknown key")
                    }
                }
            default: throw ConfigError(path: p, message: "unknown key")
            }
        }
    }

    mutating func applySignIn(_ v: JSON, path: String, strict: Bool) throws(ConfigError) {
        let o = try Self.object(v, path)
        for (k, v2) in o {
            let p = Self.join(path, k)
            if k == "allowDuplicateEmails" {
                allowDuplicateEmails = try Self.bool(v2, p)
                continue
            }
            guard k == "phoneNumber" else {
                if strict { throw ConfigError(path: p, message: "unknown key") }
                continue
            }
            let pn = try Self.object(v2, p)
            for (k3, v3) in pn {
                let p3 = Self.join(p, k3)
                switch k3 {
                case "enabled": phoneEnabled = try Self.bool(v3, p3)
                case "testPhoneNumbers": testPhoneNumbers = try Self.parseTestNumbers(v3, path: p3)
                default: throw ConfigError(path: p3, message: "unknown key")
                }
            }
        }
    }

    mutating func applyPhoneAuth(_ v: JSON, path: String) throws(ConfigError) {
        let o = try Self.object(v, path)
        for (k, v2) in o {
            let p = Self.join(path, k)
            switch k {
            case "appVerification":
                let s = try Self.string(v2, p)
                guard let a = PhoneAuthSettings.AppVerification(rawValue: s.uppercased()) else {
                    throw ConfigError(path: p, message: "must be \"OFF\" or \"ENFORCE\"")
                }
                phoneAuth.appVerification = a
            case "codeLength":
                let n = try Self.int(v2, p)
                guard (4...10).contains(n) else { throw ConfigError(path: p, message: "must be between 4 and 10") }
                phoneAuth.codeLength = n
            case "sessionTtlSeconds": phoneAuth.sessionTtlSeconds = try Self.nonNegative(v2, p)
            case "maxCodeAttempts": phoneAuth.maxCodeAttempts = try Self.nonNegative(v2, p)
            case "sendRateLimits":
                let rl = try Self.object(v2, p)
                for (k3, v3) in rl {
                    let p3 = Self.join(p, k3)
                    switch k3 {
                    case "perPhoneNumber": phoneAuth.perPhoneNumber = try Self.parseLimit(v3, base: phoneAuth.perPhoneNumber, path: p3)
                    case "perIp": phoneAuth.perIp = try Self.parseLimit(v3, base: phoneAuth.perIp, path: p3)
                    default: throw ConfigError(path: p3, message: "unknown key")
                    }
                }
            case "smsQuota": phoneAuth.smsQuota = try Self.parseLimit(v2, base: phoneAuth.smsQuota, path: p)
            case "scenarioNumbers": phoneAuth.scenarioNumbers = try Self.parseScenarios(v2, path: p)
            case "delivery": phoneAuth.delivery = try SMSDeliveryRule.parse(v2, path: p)
            default: throw ConfigError(path: p, message: "unknown key")
            }
        }
    }

    public static func parseTestNumbers(_ v: JSON, path: String) throws(ConfigError) -> [String: String] {
        let o = try object(v, path)
        var out: [String: String] = [:]
        for (k, v2) in o {
            let p = join(path, k)
            let phone: PhoneNumber
            do { phone = try PhoneNumber(parsing: k) } catch { throw ConfigError(path: p, message: "not a valid phone number (\(error.description))") }
            let code = try string(v2, p)
            guard (4...10).contains(code.utf8.count), code.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
                throw ConfigError(path: p, message: "the code must be 4 to 10 digits")
            }
            out[phone.e164] = code
        }
        return out
    }

    public static func parseSMSRegion(_ v: JSON, path: String) throws(ConfigError) -> SMSRegionPolicy {
        let o = try object(v, path)
        guard o.count == 1, let (k, inner) = o.entries.first.map({ ($0.key, $0.value) }) else {
            throw ConfigError(path: path, message: "must hold exactly one of allowByDefault or allowlistOnly")
        }
        let p = join(path, k)
        let io = try object(inner, p)
        switch k {
        case "allowByDefault": return .allowByDefault(disallowed: try regionList(io, "disallowedRegions", path: p))
        case "allowlistOnly": return .allowlistOnly(allowed: try regionList(io, "allowedRegions", path: p))
        default: throw ConfigError(path: p, message: "unknown key")
        }
    }

    /// Validates every entry before building the list (LeakSanitizer caught a typed-throw path leaking a partly
    /// built array from a nested function here).
    static func regionList(_ io: JSONObject, _ key: String, path p: String) throws(ConfigError) -> [String] {
        for (k2, _) in io where k2 != key { throw ConfigError(path: join(p, k2), message: "unknown key") }
        guard let list = io[key] else { return [] }
        guard case .array(let items) = list else { throw ConfigError(path: join(p, key), message: "must be an array of region codes") }
        let valid = items.allSatisfy { item in
            guard let s = item.stringValue else { return false }
            return s.utf8.count == 2 && s.utf8.allSatisfy { $0 >= 0x41 && $0 <= 0x5A }
        }
        guard valid else { throw ConfigError(path: join(p, key), message: "regions must be two-letter uppercase codes such as \"US\"") }
        return items.compactMap(\.stringValue)
    }

    static func parseLimit(_ v: JSON, base: RateLimit, path: String) throws(ConfigError) -> RateLimit {
        var l = base
        for (k, v2) in try object(v, path) {
            let p = join(path, k)
            switch k {
            case "max": l.max = try nonNegative(v2, p)
            case "perSeconds":
                let n = try int(v2, p)
                guard n > 0 else { throw ConfigError(path: p, message: "must be positive") }
                l.perSeconds = n
            default: throw ConfigError(path: p, message: "unknown key")
            }
        }
        return l
    }

    static func parseScenarios(_ v: JSON, path: String) throws(ConfigError) -> [String: Scenario] {
        var out: [String: Scenario] = [:]
        for (k, v2) in try object(v, path) {
            let p = join(path, k)
            let phone: PhoneNumber
            do { phone = try PhoneNumber(parsing: k) } catch { throw ConfigError(path: p, message: "not a valid phone number") }
            var s = Scenario()
            for (k3, v3) in try object(v2, p) {
                let p3 = join(p, k3)
                let code = try string(v3, p3)
                guard !code.isEmpty, code.utf8.allSatisfy({ ($0 >= 0x41 && $0 <= 0x5A) || $0 == 0x5F || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x20 || $0 == 0x3A || ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x2E || $0 == 0x2D })
                else { throw ConfigError(path: p3, message: "must be a Google error code such as \"QUOTA_EXCEEDED\"") }
                switch k3 {
                case "onSend": s.onSend = code
                case "onSignIn": s.onSignIn = code
                default: throw ConfigError(path: p3, message: "unknown key")
                }
            }
            out[phone.e164] = s
        }
        return out
    }

    // MARK: small typed readers

    static func join(_ a: String, _ b: String) -> String { a.isEmpty ? b : "\(a).\(b)" }
    static func object(_ v: JSON, _ p: String) throws(ConfigError) -> JSONObject {
        guard case .object(let o) = v else { throw ConfigError(path: p, message: "must be an object, not \(v.typeName)") }
        return o
    }
    static func string(_ v: JSON, _ p: String) throws(ConfigError) -> String {
        guard case .string(let s) = v else { throw ConfigError(path: p, message: "must be a string, not \(v.typeName)") }
        return s
    }
    static func bool(_ v: JSON, _ p: String) throws(ConfigError) -> Bool {
        guard case .bool(let b) = v else { throw ConfigError(path: p, message: "must be true or false, not \(v.typeName)") }
        return b
    }
    static func int(_ v: JSON, _ p: String) throws(ConfigError) -> Int {
        guard let n = v.int64Value, n >= Int64(Int32.min), n <= Int64(Int32.max) else {
            throw ConfigError(path: p, message: "must be an integer, not \(v.typeName == "number" ? "a fraction or a huge number" : v.typeName)")
        }
        return Int(n)
    }
    /// One of an enum's values, case-insensitively ("must be "A", "B" or "C"" otherwise).
    static func choice<E: RawRepresentable & CaseIterable>(_ v: JSON, _ p: String) throws(ConfigError) -> E where E.RawValue == String {
        if let s = v.stringValue, let e = E(rawValue: s.uppercased()) { return e }
        let names = E.allCases.map { "\"\($0.rawValue)\"" }
        throw ConfigError(path: p, message: "must be " + names.dropLast().joined(separator: ", ") + " or " + (names.last ?? ""))
    }
    static func nonNegative(_ v: JSON, _ p: String) throws(ConfigError) -> Int {
        let n = try int(v, p)
        guard n >= 0 else { throw ConfigError(path: p, message: "must not be negative") }
        return n
    }
}
