import EmulatorSupport

// An imported user's foreign password hash: `accounts:batchCreate` (firebase-admin's `import_users` with a
// `UserImportHash`, firebase-tools `auth:import --hash-algo`) keeps the hash as given, with the algorithm and
// parameters it was made with (PhoneAuthAPI/ImportedHashes.swift reads, checks and verifies them; this layer only
// stores them). They travel as the user field `passwordHashAlgorithm` (UserFields.swift: lookups, exports, journal)
// and belong to the hash: every path that sets or clears the password sets or clears them too, and the first
// successful sign-in replaces both by our own hash (`upgradePassword`), as production rehashes on sign-in.

extension UserFields {
    /// The field name of an imported hash's algorithm.
    public static let passwordHashAlgorithm = "passwordHashAlgorithm"
}

extension UserRecord {
    /// The algorithm and parameters of an imported `passwordHash` (a JSON object in `batchCreate`'s request names:
    /// `{"hashAlgorithm":"SCRYPT","signerKey":…,"rounds":8,…}`); nil while the hash is ours. Users imported together
    /// share one value (interned), so a million imported users hold one copy of the project's signer key, not a million.
    public var passwordHashAlgorithm: JSON? {
        get { extensions[UserFields.passwordHashAlgorithm] }
        set {
            if let newValue {
                extensions[UserFields.passwordHashAlgorithm] = HashAlgorithmValues.shared(newValue)
            } else if !extensions.isEmpty {
                extensions[UserFields.passwordHashAlgorithm] = nil
            }
        }
    }

    /// Sets the password's hash and salt together with the algorithm they need (nil: ours).
    public mutating func setPassword(hash: String?, salt: String?, algorithm: JSON?) {
        passwordHash = hash
        self.salt = salt
        passwordHashAlgorithm = hash == nil ? nil : algorithm
    }

    /// Replaces an imported hash that `upgrade` verified by our own: when the password was set and `validSince` stay
    /// (a rehash is not a password change). False, and nothing changed, when the stored hash or its algorithm is no
    /// longer the one the password was verified against.
    @discardableResult
    public mutating func upgradePassword(_ upgrade: PasswordUpgrade) -> Bool {
        guard let current = passwordHash, constantTimeEquals(current, upgrade.verifiedHash),
              passwordHashAlgorithm == upgrade.verifiedAlgorithm else { return false }
        setPassword(hash: upgrade.hash, salt: upgrade.salt, algorithm: nil)
        return true
    }
}

/// Our own hash of a password just verified against an imported one, and what it was verified against.
public struct PasswordUpgrade: Sendable, Equatable {
    public let verifiedHash: String
    public let verifiedAlgorithm: JSON
    public let hash: String
    public let salt: String

    public init(verifiedHash: String, verifiedAlgorithm: JSON, hash: String, salt: String) {
        self.verifiedHash = verifiedHash
        self.verifiedAlgorithm = verifiedAlgorithm
        self.hash = hash
        self.salt = salt
    }
}

/// The distinct algorithm values in use, so users imported with the same parameters share one value's storage.
/// A project has one set of hash parameters (a few across tenants and migrations); the table keeps the 64 most
/// recent distinct values and compares by value, so it can only save memory, never change a user.
enum HashAlgorithmValues {
    static let capacity = 64
    private static let recent = Locked<[JSON]>([])

    static func shared(_ value: JSON) -> JSON {
        recent.withLock { r in
            if let known = r.first(where: { $0 == value }) { return known }
            if r.count >= capacity { r.removeFirst() }
            r.append(value)
            return value
        }
    }
}
