import EmulatorSupport

// # Abuse limits: what production does against guessing, for a server others can reach
//
// Production bounds how often codes and passwords can be guessed: verification requests per IP address (its quotas
// page: 150 per IP per hour), failed attempts per number, sessions and attempts per pending MFA sign-in, and a
// temporary lockout after many wrong passwords (`TOO_MANY_ATTEMPTS_TRY_LATER : Access to this account has been
// temporarily disabled due to many failed login attempts. …`). A test suite on loopback must not trip over any of
// that, so the limits follow the config's `protection.mode`: `AUTO` (the default) turns them on when the server is
// reachable by others — it listens beyond loopback or has an `--admin-token` (`Emulator.exposed`) — `ON` and `OFF`
// decide explicitly, per project and tenant. Only failures are counted (a suite signing in thousands of times a
// minute with the right codes never gets near them), and fictional numbers are exempt, as from every other limit.
//
// The counters are not durable (like the send windows) and live in bounded tables (`ExpiringTable`): an attacker
// rotating addresses evicts old counters but cannot grow memory.

/// The `protection` block of a project's (or tenant's) config.
public struct ProtectionConfig: Sendable, Equatable {
    public enum Mode: String, Sendable, CaseIterable {
        /// On when the server is reachable by others (`Emulator.exposed`), else off.
        case auto = "AUTO"
        case on = "ON"
        case off = "OFF"
    }
    public var mode: Mode = .auto
    /// Wrong codes (first factor, MFA enrollment and sign-in) from one IP address.
    public var failedCodesPerIp = RateLimit(max: 150, perSeconds: 3600)
    /// Wrong codes for one phone number, from anywhere.
    public var failedCodesPerPhoneNumber = RateLimit(max: 30, perSeconds: 3600)
    /// Codes one pending MFA sign-in (`mfaPendingCredential`) may have sent (`mfaSignIn:start`, or the iOS SDK's
    /// masked send).
    public var sessionsPerMfaSignIn = 5
    /// Wrong codes one pending MFA sign-in may make across its sessions; past it the pending credential is revoked.
    public var failedCodesPerMfaSignIn = 10
    /// Wrong passwords for one account before it is locked for the rest of the window.
    public var failedPasswordsPerAccount = RateLimit(max: 10, perSeconds: 3600)

    public init() {}

    /// Whether the limits apply, for a server that is (or is not) reachable by others.
    public func isOn(exposed: Bool) -> Bool {
        switch mode {
        case .auto: exposed
        case .on: true
        case .off: false
        }
    }

    public var json: JSON {
        ["mode": .string(mode.rawValue),
         "failedCodesPerIp": ProjectConfig.limitJSON(failedCodesPerIp),
         "failedCodesPerPhoneNumber": ProjectConfig.limitJSON(failedCodesPerPhoneNumber),
         "sessionsPerMfaSignIn": .int(sessionsPerMfaSignIn),
         "failedCodesPerMfaSignIn": .int(failedCodesPerMfaSignIn),
         "failedPasswordsPerAccount": ProjectConfig.limitJSON(failedPasswordsPerAccount)]
    }

    /// Reads `{mode?, failedCodesPerIp?, …}` onto `self` (fields present replace; limits merge).
    public mutating func apply(_ v: JSON, path: String) throws(ConfigError) {
        for (k, v2) in try ProjectConfig.object(v, path) {
            let p = ProjectConfig.join(path, k)
            switch k {
            case "mode":
                guard let s = v2.stringValue, let m = Mode(rawValue: s.uppercased()) else {
                    throw ConfigError(path: p, message: "must be \"AUTO\", \"ON\" or \"OFF\"")
                }
                mode = m
            case "failedCodesPerIp": failedCodesPerIp = try ProjectConfig.parseLimit(v2, base: failedCodesPerIp, path: p)
            case "failedCodesPerPhoneNumber":
                failedCodesPerPhoneNumber = try ProjectConfig.parseLimit(v2, base: failedCodesPerPhoneNumber, path: p)
            case "sessionsPerMfaSignIn": sessionsPerMfaSignIn = try ProjectConfig.nonNegative(v2, p)
            case "failedCodesPerMfaSignIn": failedCodesPerMfaSignIn = try ProjectConfig.nonNegative(v2, p)
            case "failedPasswordsPerAccount":
                failedPasswordsPerAccount = try ProjectConfig.parseLimit(v2, base: failedPasswordsPerAccount, path: p)
            default: throw ConfigError(path: p, message: "unknown key")
            }
        }
    }
}

/// Failure counters of one store, each in a fixed window that starts at its first failure. Not durable.
public struct ProtectionState: Sendable {
    /// Keys each counter table holds at most (the oldest evicted first).
    public static let capacity = 4096
    public var failedCodesByIP = ExpiringTable<Int32>(capacity: capacity)
    public var failedCodesByPhone = ExpiringTable<Int32>(capacity: capacity)
    public var failedPasswords = ExpiringTable<Int32>(capacity: capacity)

    /// Whether `key` has reached `limit` in its current window (`max == 0`: never).
    static func reached(_ table: ExpiringTable<Int32>, _ key: String, _ limit: RateLimit, now: Int64) -> Bool {
        limit.max > 0 && Int(table.peek(key, now: now) ?? 0) >= limit.max
    }

    /// Counts one failure for `key`; a new window starts with the first failure after the last one ended.
    static func count(_ table: inout ExpiringTable<Int32>, _ key: String, _ limit: RateLimit, now: Int64) {
        guard limit.max > 0 else { return }
        if !table.update(key, now: now, { $0 &+= 1 }) {
            table.insert(key, 1, expiresAt: now + Int64(limit.perSeconds) * 1000, now: now)
        }
    }
}

extension Emulator {
    /// Production's lockout answer after too many wrong passwords.
    public static let accountLocked = AuthError(
        .tooManyAttemptsTryLater,
        "Access to this account has been temporarily disabled due to many failed login attempts. You can immediately restore it by resetting your password or you can try again later.")

    /// Whether the abuse limits apply to this store (its `protection.mode`, and for `AUTO` whether the server is
    /// reachable by others).
    func protectionOn(_ config: ProjectConfig) -> Bool { config.protection.isOn(exposed: exposed) }

    /// The store's limits if they apply now (read in place: copying the config costs a retain per field, on every
    /// code check).
    func activeProtection(_ tx: StoreTransaction) -> ProtectionConfig? {
        tx.store.config.protection.isOn(exposed: exposed) ? tx.store.config.protection : nil
    }

    /// Before a code is checked: refuses it (`TOO_MANY_ATTEMPTS_TRY_LATER`, nothing consumed) when its IP address or
    /// its number has failed too often in the window. Fictional numbers are exempt.
    func checkCodeGuessLimits(_ tx: inout StoreTransaction, _ session: VerificationSession, clientIP: String?, now: Int64) throws(AuthError) {
        guard !session.fictional, let limits = activeProtection(tx) else { return }
        if let ip = clientIP, ProtectionState.reached(tx.protection.failedCodesByIP, ip, limits.failedCodesPerIp, now: now) {
            tx.emit(.limitHit(limit: .tooManyAttemptsTryLater, phoneNumber: session.phoneNumber, ip: ip))
            throw AuthError(.tooManyAttemptsTryLater)
        }
        if ProtectionState.reached(tx.protection.failedCodesByPhone, session.phoneNumber, limits.failedCodesPerPhoneNumber, now: now) {
            tx.emit(.limitHit(limit: .tooManyAttemptsTryLater, phoneNumber: session.phoneNumber, ip: nil))
            throw AuthError(.tooManyAttemptsTryLater)
        }
    }

    /// After a wrong code: counts it for its IP address and its number (fictional numbers are exempt).
    func countWrongCode(_ tx: inout StoreTransaction, _ session: VerificationSession, clientIP: String?, now: Int64) {
        guard !session.fictional, let limits = activeProtection(tx) else { return }
        if let ip = clientIP { ProtectionState.count(&tx.protection.failedCodesByIP, ip, limits.failedCodesPerIp, now: now) }
        ProtectionState.count(&tx.protection.failedCodesByPhone, session.phoneNumber, limits.failedCodesPerPhoneNumber, now: now)
    }

    /// `TOO_MANY_ATTEMPTS_TRY_LATER` (production's lockout text) while the account has had too many wrong passwords in
    /// the window; the right password is refused too until the window ends.
    public func checkPasswordLockout(_ key: StoreKey, localId: String) throws(AuthError) {
        guard let box = existingStore(key) else { return }
        let now = clock.nowMillis()
        let locked = box.read { s in
            protectionOn(s.config) && ProtectionState.reached(s.protection.failedPasswords, localId, s.config.protection.failedPasswordsPerAccount, now: now)
        }
        if locked { throw Self.accountLocked }
    }

    /// Counts a wrong password for the account (nothing durable: a counter in the store's protection state).
    public func countWrongPassword(_ key: StoreKey, localId: String) {
        let now = clock.nowMillis()
        withLiveStore(key) { s in
            guard protectionOn(s.config) else { return }
            ProtectionState.count(&s.protection.failedPasswords, localId, s.config.protection.failedPasswordsPerAccount, now: now)
        }
    }
}
