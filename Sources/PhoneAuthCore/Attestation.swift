import Synchronization
import EmulatorSupport

/// `appCheck`: App Check for Authentication, per project and tenant (production's enforcement states; the emulator
/// mints and exchanges the tokens itself).
public struct AppCheckConfig: Sendable, Equatable {
    public enum Enforcement: String, Sendable, CaseIterable {
        /// No check: the header is ignored.
        case off = "OFF"
        /// Production's "unenforced" (monitoring): every client call's token is verified and counted, none refused.
        case unenforced = "UNENFORCED"
        /// A client call without a valid token is refused (401 `UNAUTHENTICATED`, "Firebase App Check token is invalid").
        case enforced = "ENFORCED"
    }
    /// Production's bounds for an App Check token's lifetime: 30 minutes to 7 days (1 hour by default).
    public static let ttlRange = 1800...604_800
    /// Registered apps and debug tokens a store keeps at most.
    public static let maxApps = 50
    public static let maxDebugTokens = 50

    public var enforcement: Enforcement = .off {
        didSet { if enforcement != .off { Self.everEnabled.store(true, ordering: .relaxed) } }
    }

    /// Whether any App Check config in this process has ever been set to a state other than `OFF`: every such value
    /// comes through `enforcement`'s setter (a config starts `OFF`), so while this is false no store can enforce, and a
    /// client call skips the gate with one load instead of a store lookup (the fictional send's hot path). Never
    /// reset: turning enforcement off again only costs the lookup.
    public static var mayBeEnabled: Bool { everEnabled.load(ordering: .relaxed) }
    private static let everEnabled = Atomic<Bool>(false)
    public var tokenTtlSeconds = 3600
    /// Registered app ids (`1:<number>:web|android|ios:<hex>`); empty: any app id of the project number.
    public var apps: [String] = []
    /// Registered debug tokens; empty: any debug token (a UUID-like string of 8 to 128 characters).
    public var debugTokens: [String] = []

    public init() {}

    public var json: JSON {
        ["enforcement": .string(enforcement.rawValue), "tokenTtlSeconds": .int(tokenTtlSeconds),
         "apps": .array(apps.map(JSON.string)), "debugTokens": .array(debugTokens.map(JSON.string))]
    }

    /// Reads `{enforcement?, tokenTtlSeconds?, apps?, debugTokens?}` onto `self` (fields present replace).
    public mutating func apply(_ v: JSON, path: String) throws(ConfigError) {
        for (k, v2) in try ProjectConfig.object(v, path) {
            let p = ProjectConfig.join(path, k)
            switch k {
            case "enforcement": enforcement = try ProjectConfig.choice(v2, p)
            case "tokenTtlSeconds":
                let n = try ProjectConfig.int(v2, p)
                guard Self.ttlRange.contains(n) else { throw ConfigError(path: p, message: "must be from 1800 (30 minutes) to 604800 (7 days)") }
                tokenTtlSeconds = n
            case "apps":
                apps = try Self.list(v2, p, max: Self.maxApps) { s throws(ConfigError) in
                    guard AppCheck.isValidAppID(s) else {
                        throw ConfigError(path: p, message: "\(s.prefix(80)) is not an app id (1:<project number>:web|android|ios:<hex>)")
                    }
                }
            case "debugTokens":
                debugTokens = try Self.list(v2, p, max: Self.maxDebugTokens) { s throws(ConfigError) in
                    guard AppCheck.isValidDebugToken(s) else {
                        throw ConfigError(path: p, message: "a debug token is 8 to 128 letters, digits and '-'")
                    }
                }
            default: throw ConfigError(path: p, message: "unknown key")
            }
        }
    }

    static func list(_ v: JSON, _ p: String, max: Int, _ check: (String) throws(ConfigError) -> Void) throws(ConfigError) -> [String] {
        guard case .array(let items) = v else { throw ConfigError(path: p, message: "must be an array of strings, not \(v.typeName)") }
        guard items.count <= max else { throw ConfigError(path: p, message: "at most \(max) entries") }
        var out: [String] = []
        for i in items {
            let s = try ProjectConfig.string(i, p)
            try check(s)
            if !out.contains(s) { out.append(s) }
        }
        return out
    }
}

/// `phoneNumberVerification`: the numbers the emulator issues Firebase PNV tokens for (besides the fictional ones).
public struct PNVConfig: Sendable, Equatable {
    public static let maxTestNumbers = 100
    public static let ttlRange = 60...86_400
    /// Canonical E.164 numbers.
    public var testNumbers: [String] = []
    public var tokenTtlSeconds = 3600

    public init() {}

    public var json: JSON { ["testNumbers": .array(testNumbers.map(JSON.string)), "tokenTtlSeconds": .int(tokenTtlSeconds)] }

    public mutating func apply(_ v: JSON, path: String) throws(ConfigError) {
        for (k, v2) in try ProjectConfig.object(v, path) {
            let p = ProjectConfig.join(path, k)
            switch k {
            case "testNumbers":
                var canonical: [String] = []
                for s in try AppCheckConfig.list(v2, p, max: Self.maxTestNumbers, { _ throws(ConfigError) in }) {
                    guard let phone = try? PhoneNumber(parsing: s) else {
                        throw ConfigError(path: p, message: "\(s.prefix(40)) is not a valid phone number")
                    }
                    canonical.append(phone.e164)
                }
                testNumbers = canonical.reduce(into: []) { if !$0.contains($1) { $0.append($1) } }
            case "tokenTtlSeconds":
                let n = try ProjectConfig.int(v2, p)
                guard Self.ttlRange.contains(n) else { throw ConfigError(path: p, message: "must be from 60 to 86400 seconds") }
                tokenTtlSeconds = n
            default: throw ConfigError(path: p, message: "unknown key")
            }
        }
    }
}

/// App Check identifiers and the verification outcome a client call is counted under.
public enum AppCheck {
    /// `1:<digits>:web|android|ios:<hex>`, at most 100 characters (Firebase app ids).
    public static func isValidAppID(_ s: String) -> Bool {
        let parts = s.utf8.split(separator: UInt8(ascii: ":"), omittingEmptySubsequences: false)
        guard s.utf8.count <= 100, parts.count == 4, parts[0].elementsEqual("1".utf8),
              (1...20).contains(parts[1].count), parts[1].allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
              ["web", "android", "ios"].contains(where: { parts[2].elementsEqual($0.utf8) }),
              (1...64).contains(parts[3].count), parts[3].allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) })
        else { return false }
        return true
    }

    /// The project number an app id names.
    public static func projectNumber(ofAppID s: String) -> String? {
        guard isValidAppID(s) else { return nil }
        return s.split(separator: ":")[1].description
    }

    /// Debug tokens: 8 to 128 of `[A-Za-z0-9-]` (the SDKs make UUIDs).
    public static func isValidDebugToken(_ s: String) -> Bool {
        (8...128).contains(s.utf8.count) && s.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x7a) || $0 == 0x2D }
    }

    public enum Outcome: String, Sendable { case verified, missing, invalid }
}

/// Per-store counters of the App Check outcomes of client calls (not journaled, like production's metrics page).
public struct AppCheckMetrics: Sendable, Equatable {
    public var verified: Int64 = 0
    public var missing: Int64 = 0
    public var invalid: Int64 = 0
    public var refused: Int64 = 0
    public init() {}
    public var json: JSON { ["verified": .int(verified), "missing": .int(missing), "invalid": .int(invalid), "refused": .int(refused)] }
}

extension Emulator {
    /// The store's App Check settings (its project's until the tenant exists), read without creating anything.
    public func appCheckConfig(_ key: StoreKey) -> AppCheckConfig { config(key).appCheck }

    /// Only the enforcement state (what every client call reads): no copy of the config.
    public func appCheckEnforcement(_ key: StoreKey) -> AppCheckConfig.Enforcement {
        existingStore(key)?.read { $0.config.appCheck.enforcement } ?? initialConfig(key).appCheck.enforcement
    }

    /// Counts a client call's outcome and records it as an `appCheck.checked` event, in the store's counters (its
    /// project's while a named tenant does not exist yet: counting creates no tenant).
    public func recordAppCheck(_ key: StoreKey, outcome: AppCheck.Outcome, appId: String?, refused: Bool, method: String) {
        let key = key.tenantId == nil || existingStore(key) != nil ? key : StoreKey(projectId: key.projectId)
        withLiveStore(key) { s in
            switch outcome {
            case .verified: s.credentials.appCheck.verified += 1
            case .missing: s.credentials.appCheck.missing += 1
            case .invalid: s.credentials.appCheck.invalid += 1
            }
            if refused { s.credentials.appCheck.refused += 1 }
        }
        events.emit(key, .appCheckChecked(outcome: outcome.rawValue, appId: appId, refused: refused, method: method))
    }

    /// Takes a minted credential of `type` (single use, as in the send pipeline): App Check's reCAPTCHA exchanges.
    public func consumeMintedCredential(_ key: StoreKey, _ token: String, type: MintedCredentialType) -> Bool {
        let now = clock.nowMillis()
        return withLiveStore(key) { s in
            guard s.credentials.minted.peek(token, now: now) == type else { return false }
            return s.credentials.minted.take(token, now: now) != nil
        }
    }

    public func appCheckMetrics(_ key: StoreKey) -> AppCheckMetrics { existingStore(key)?.read { $0.credentials.appCheck } ?? AppCheckMetrics() }

    /// Whether the emulator issues PNV tokens for `e164`: a fictional number or one of `phoneNumberVerification.testNumbers`.
    public func isPNVTestNumber(_ key: StoreKey, _ e164: String) -> Bool {
        let c = config(key)
        return c.testPhoneNumbers[e164] != nil || c.pnv.testNumbers.contains(e164)
    }
}
