import EmulatorSupport
import JWT
import PhoneAuthCore

/// How passwords are stored: PBKDF2-HMAC-SHA256 (OpenSSL) with a random 16-byte salt from the emulator's
/// `RandomSource`, `iterations` rounds, 32 bytes; `passwordHash` and `salt` are their standard base64. The cost is
/// deliberately low: this is test data, and suites sign in thousands of times (see SECURITY.md). The password itself
/// is never stored, logged or returned.
enum Passwords {
    /// PBKDF2 rounds. Fixed: stored hashes (data directories, exports) depend on it.
    static let iterations = 100
    static let saltBytes = 16
    /// Production's minimum (`WEAK_PASSWORD : Password should be at least 6 characters`).
    static let minimumLength = 6

    /// A new password's checks: the enforced password policy's requirements (`PASSWORD_DOES_NOT_MEET_REQUIREMENTS`,
    /// PasswordPolicy.swift), else `WEAK_PASSWORD` below `minimumLength` characters.
    static func check(_ password: String, policy: PasswordPolicy) throws(AuthError) {
        try policy.check(password)
        guard password.count >= minimumLength else { throw weak }
    }

    /// `check`, then the hash and salt.
    static func checkedHash(_ password: String, policy: PasswordPolicy, random: any RandomSource) throws(AuthError) -> (hash: String, salt: String) {
        try check(password, policy: policy)
        return hash(password, random: random)
    }

    static let weak = AuthError(.weakPassword, "Password should be at least \(minimumLength) characters")

    static func hash(_ password: String, random: any RandomSource) -> (hash: String, salt: String) {
        let salt = random.bytes(saltBytes)
        return (derive(password, salt: salt), Base64URL.encodeStandard(salt))
    }

    static func derive(_ password: String, salt: [UInt8]) -> String {
        Base64URL.encodeStandard(pbkdf2SHA256(password: Array(password.utf8), salt: salt, iterations: iterations))
    }

    /// Whether `password` is the one stored as `hash`/`salt`: our PBKDF2 format, or the salted SHA-256
    /// (`salt:hash`, base64url, no separate salt) earlier versions stored for admin-set passwords, or — with the
    /// user's `algorithm` — an imported hash (ImportedHashes.swift). Constant-time compare.
    static func matches(_ password: String, hash: String?, salt: String?, algorithm: JSON? = nil) -> Bool {
        guard let hash else { return false }
        if let algorithm { return matchesImported(password, hash: hash, salt: salt, algorithm: algorithm) }
        if let salt, let saltBytes = Base64URL.decode(salt) {
            // A suite signs the same test user in thousands of times: a password verified against this hash before
            // is recognised by a salted SHA-256 instead of PBKDF2 (a different one still takes the slow path).
            let quick = quickDigest(password, saltBytes)
            if isKnown(quick, hash: hash, salt: salt) { return true }
            guard constantTimeEquals(derive(password, salt: saltBytes), hash) else { return false }
            verified.withLock { v in
                if v.count >= verifiedCapacity { v.removeAll(keepingCapacity: true) }
                v[hash + "|" + salt] = quick
            }
            return true
        }
        if salt == nil, let colon = hash.firstIndex(of: ":"), let s = Base64URL.decode(hash[..<colon]) {
            let expected = Base64URL.encode(sha256(s + Array(password.utf8)))
            return constantTimeEquals(expected, String(hash[hash.index(after: colon)...]))
        }
        return false
    }

    /// True when `password` was verified against this hash before (the cheap check of `matches`); false when that
    /// is unknown — `matches` then derives the key.
    static func knownMatch(_ password: String, hash: String, salt: String?) -> Bool {
        guard let salt, let saltBytes = Base64URL.decode(salt) else { return false }
        return isKnown(quickDigest(password, saltBytes), hash: hash, salt: salt)
    }

    private static func quickDigest(_ password: String, _ salt: [UInt8]) -> String {
        Base64URL.encodeStandard(sha256(salt + [0] + Array(password.utf8)))
    }

    private static func isKnown(_ quick: String, hash: String, salt: String) -> Bool {
        guard let known = verified.withLock({ $0[hash + "|" + salt] }) else { return false }
        return constantTimeEquals(known, quick)
    }

    /// Passwords verified recently: `hash|salt` → base64(SHA-256(salt ‖ 0 ‖ password)). In memory only, bounded
    /// (emptied when full); see SECURITY.md.
    static let verified = Locked<[String: String]>([:])
    static let verifiedCapacity = 4096

    /// The official emulator stores `fakeHash:salt=<salt>:password=<password>` (and exports it): the password an
    /// imported record of that form carries, so it can be re-hashed on import and keep signing in.
    static func officialEmulatorPassword(hash: String, salt: String?) -> String? {
        let prefix = "fakeHash:salt=" + (salt ?? "") + ":password="
        guard hash.hasPrefix(prefix) else { return nil }
        return String(hash.dropFirst(prefix.count))
    }

    /// What production shows a non-admin caller instead of a hash ("REDACTED", base64).
    static let redacted = UserFields.redactedPasswordHash
}

/// The password of an imported record (batchCreate, firebase-tools import): our own `passwordHash`/`salt` as exported;
/// the official emulator's `fakeHash:salt=…:password=…` re-hashed (so its exports keep signing in, and the password
/// is not kept in the clear); a foreign hash with its algorithm (the request's `hashAlgorithm`…, or the record's own
/// `passwordHashAlgorithm`: ImportedHashes.swift); `rawPassword` (the official emulator's import field) hashed;
/// anything else stored as given (kept in exports; it cannot sign in). `.failure`: the user's import error.
enum ImportedPassword {
    static func change(_ u: JSONObject, index: Int, random: any RandomSource,
                       algorithm: ImportedHash? = nil) throws(AuthError) -> Result<PasswordChange?, UserFieldError> {
        let updatedAt = UserFields.integer(u["passwordUpdatedAt"]).flatMap { TimeField.createdAt.isValid($0) ? $0 : nil }
        func ours(_ h: (hash: String, salt: String)) -> PasswordChange {
            PasswordChange(hash: h.hash, salt: h.salt, updatedAt: updatedAt, revokesTokens: false)
        }
        if let hash = BatchAccounts.stringField(u["passwordHash"]), !hash.isEmpty {
            let salt = BatchAccounts.stringField(u["salt"])
            if let plain = Passwords.officialEmulatorPassword(hash: hash, salt: salt) { return .success(ours(Passwords.hash(plain, random: random))) }
            if let foreign = try foreign(hash, salt: salt, updatedAt: updatedAt, user: u, index: index, algorithm: algorithm) {
                return foreign.map(Optional.some)
            }
            return .success(PasswordChange(hash: hash, salt: salt, updatedAt: updatedAt, revokesTokens: false))
        }
        if let raw = BatchAccounts.stringField(u["rawPassword"]), !raw.isEmpty { return .success(ours(Passwords.hash(raw, random: random))) }
        return .success(nil)
    }
}
