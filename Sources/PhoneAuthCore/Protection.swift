import EmulatorSupport
#if canImport(Glibc)
import Glibc
#endif

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
// The counters are not durable (like the send windows) and live in bounded tables (`ExpiringTable`). A counter that
// reached its limit moves to a larger table of tripped keys, which keeps it until its window ends: flooding the
// counter table with other keys (other accounts, other numbers) evicts only counts below the limit, never a lockout.
// Addresses are counted per IPv4 address and per IPv6 /64, as the connection cap counts peers (one host owns a /64).

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
    /// New accounts one address may create (client sign-ups, first phone, custom-token, email-link and IdP sign-ins):
    /// production's quota page, "100 accounts/hour for each IP address" (`Emulator.countAccountCreation`).
    public var accountsPerIp = RateLimit(max: 100, perSeconds: 3600)
    /// Codes one address may have sent to numbers that are not fictional (production: 50 per IP per minute, 500 per
    /// hour; generous here so a suite in a container is not held back, while one client cannot fill `--max-sessions`).
    public var sendsPerIp = RateLimit(max: 1000, perSeconds: 60)

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
         "failedPasswordsPerAccount": ProjectConfig.limitJSON(failedPasswordsPerAccount),
         "accountsPerIp": ProjectConfig.limitJSON(accountsPerIp),
         "sendsPerIp": ProjectConfig.limitJSON(sendsPerIp)]
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
            case "accountsPerIp": accountsPerIp = try ProjectConfig.parseLimit(v2, base: accountsPerIp, path: p)
            case "sendsPerIp": sendsPerIp = try ProjectConfig.parseLimit(v2, base: sendsPerIp, path: p)
            default: throw ConfigError(path: p, message: "unknown key")
            }
        }
    }
}

/// Failure counters of one store, each in a fixed window that starts at its first failure. Not durable.
public struct ProtectionState: Sendable {
    /// Keys each counter table holds at most (the oldest evicted first), and tripped keys in all.
    public static let capacity = 4096
    public static let trippedCapacity = 65_536

    /// What a counter counts.
    public enum Kind: UInt8, Sendable, CaseIterable { case codesByIP, codesByPhone, passwords, accountsByIP, sendsByIP }

    var counters: [ExpiringTable<Int32>] = Array(repeating: ExpiringTable(capacity: capacity), count: Kind.allCases.count)
    /// `kind:key` of the counters that reached their limit, until their window ends (never evicted by counting).
    var tripped = ExpiringTable<Bool>(capacity: trippedCapacity)

    /// Whether `key` has reached `limit` in its current window (`max == 0`: never).
    func reached(_ kind: Kind, _ key: String, _ limit: RateLimit, now: Int64) -> Bool {
        guard limit.max > 0 else { return false }
        if tripped.peek(Self.trippedKey(kind, key), now: now) != nil { return true }
        return Int(counters[Int(kind.rawValue)].peek(key, now: now) ?? 0) >= limit.max
    }

    /// Counts one event for `key`; a new window starts with the first event after the last one ended. A counter that
    /// reaches `limit` is kept as tripped until the end of its window.
    mutating func count(_ kind: Kind, _ key: String, _ limit: RateLimit, now: Int64) {
        guard limit.max > 0 else { return }
        let i = Int(kind.rawValue)
        var n: Int32 = 1
        if !counters[i].update(key, now: now, { $0 &+= 1; n = $0 }) {
            counters[i].insert(key, 1, expiresAt: now + Int64(limit.perSeconds) * 1000, now: now)
        }
        if Int(n) >= limit.max, let end = counters[i].expiry(key, now: now) {
            tripped.insert(Self.trippedKey(kind, key), true, expiresAt: end, now: now)
        }
    }

    static func trippedKey(_ kind: Kind, _ key: String) -> String { "\(kind.rawValue):\(key)" }

    /// The key an address is counted under: an IPv4 address, or the /64 of an IPv6 address (`2001:db8:1:2::/64`);
    /// anything unparsable as itself.
    public static func addressKey(_ ip: String) -> String {
        guard ip.contains(":") else { return ip }
        var bytes = [UInt8](repeating: 0, count: 16)
        var text = ip
        if let percent = text.firstIndex(of: "%") { text = String(text[..<percent]) }  // a zone id
        guard inet_pton(AF_INET6, text, &bytes) == 1 else { return ip }
        if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xFF && bytes[11] == 0xFF {
            return "\(bytes[12]).\(bytes[13]).\(bytes[14]).\(bytes[15])"  // IPv4-mapped
        }
        var parts: [String] = []
        for i in stride(from: 0, to: 8, by: 2) { parts.append(String(UInt16(bytes[i]) << 8 | UInt16(bytes[i + 1]), radix: 16)) }
        return parts.joined(separator: ":") + "::/64"
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

    /// Whether the abuse limits apply to `key`'s store (or would, to one not made yet).
    public func protectionApplies(_ key: StoreKey) -> Bool { protectionOn(config(key)) }

    /// The store's limits if they apply now (read in place: copying the config costs a retain per field, on every
    /// code check).
    func activeProtection(_ tx: borrowing StoreTransaction) -> ProtectionConfig? {
        tx.store.config.protection.isOn(exposed: exposed) ? tx.store.config.protection : nil
    }

    /// Before a code is checked: refuses it (`TOO_MANY_ATTEMPTS_TRY_LATER`, nothing consumed) when its IP address or
    /// its number has failed too often in the window. Fictional numbers are exempt.
    func checkCodeGuessLimits(_ tx: inout StoreTransaction, _ session: VerificationSession, clientIP: String?, now: Int64) throws(AuthError) {
        guard !session.fictional, let limits = activeProtection(tx) else { return }
        if let ip = clientIP, tx.protection.reached(.codesByIP, ProtectionState.addressKey(ip), limits.failedCodesPerIp, now: now) {
            tx.emit(.limitHit(limit: .tooManyAttemptsTryLater, phoneNumber: session.phoneNumber, ip: ip))
            throw AuthError(.tooManyAttemptsTryLater)
        }
        if tx.protection.reached(.codesByPhone, session.phoneNumber, limits.failedCodesPerPhoneNumber, now: now) {
            tx.emit(.limitHit(limit: .tooManyAttemptsTryLater, phoneNumber: session.phoneNumber, ip: nil))
            throw AuthError(.tooManyAttemptsTryLater)
        }
    }

    /// After a wrong code: counts it for its IP address and its number (fictional numbers are exempt).
    func countWrongCode(_ tx: inout StoreTransaction, _ session: VerificationSession, clientIP: String?, now: Int64) {
        guard !session.fictional, let limits = activeProtection(tx) else { return }
        if let ip = clientIP { tx.protection.count(.codesByIP, ProtectionState.addressKey(ip), limits.failedCodesPerIp, now: now) }
        tx.protection.count(.codesByPhone, session.phoneNumber, limits.failedCodesPerPhoneNumber, now: now)
    }

    /// `TOO_MANY_ATTEMPTS_TRY_LATER` (production's lockout text) while the account has had too many wrong passwords in
    /// the window; the right password is refused too until the window ends.
    public func checkPasswordLockout(_ key: StoreKey, localId: String) throws(AuthError) {
        guard let box = existingStore(key) else { return }
        let now = clock.nowMillis()
        let locked = box.read { s in
            protectionOn(s.config) && s.protection.reached(.passwords, localId, s.config.protection.failedPasswordsPerAccount, now: now)
        }
        if locked { throw Self.accountLocked }
    }

    /// Counts a wrong password for the account (nothing durable: a counter in the store's protection state).
    public func countWrongPassword(_ key: StoreKey, localId: String) {
        let now = clock.nowMillis()
        withLiveStore(key) { s in
            guard protectionOn(s.config) else { return }
            s.protection.count(.passwords, localId, s.config.protection.failedPasswordsPerAccount, now: now)
        }
    }
}

extension Emulator {
    /// A client creating an account (a sign-up, a first phone, custom-token, email-link or IdP sign-in): with the
    /// limits on, at most `protection.accountsPerIp` per address per window (`QUOTA_EXCEEDED`, as production's "too
    /// many accounts from this address"), counted when it passes.
    func countAccountCreation(_ tx: inout StoreTransaction, clientIP: String?, now: Int64) throws(AuthError) {
        guard let ip = clientIP, let limits = activeProtection(tx) else { return }
        let key = ProtectionState.addressKey(ip)
        if tx.protection.reached(.accountsByIP, key, limits.accountsPerIp, now: now) {
            tx.emit(.limitHit(limit: .quotaExceeded, phoneNumber: nil, ip: ip))
            throw AuthError(.quotaExceeded, "Too many accounts created from this address; try again later.")
        }
        tx.protection.count(.accountsByIP, key, limits.accountsPerIp, now: now)
    }

    /// A code sent to a number that is not fictional: with the limits on, at most `protection.sendsPerIp` per
    /// address per window (`TOO_MANY_ATTEMPTS_TRY_LATER`, production's answer).
    func countSend(_ tx: inout StoreTransaction, phone: String, clientIP: String?, now: Int64) throws(AuthError) {
        guard let ip = clientIP, let limits = activeProtection(tx) else { return }
        let key = ProtectionState.addressKey(ip)
        if tx.protection.reached(.sendsByIP, key, limits.sendsPerIp, now: now) {
            tx.emit(.limitHit(limit: .tooManyAttemptsTryLater, phoneNumber: phone, ip: ip))
            throw AuthError(.tooManyAttemptsTryLater)
        }
        tx.protection.count(.sendsByIP, key, limits.sendsPerIp, now: now)
    }
}
