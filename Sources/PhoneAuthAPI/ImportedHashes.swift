import EmulatorSupport
import JWT
import PhoneAuthCore

// # Production's password hashes
//
// `accounts:batchCreate` takes users whose `passwordHash`/`salt` another system made, with the algorithm named at the
// top of the request — what firebase-admin's `import_users(users, hash_alg=UserImportHash.…)` and firebase-tools
// `auth:import --hash-algo …` send: `hashAlgorithm`, `signerKey`, `saltSeparator`, `rounds`, `memoryCost`,
// `cpuMemCost`, `blockSize`, `parallelization`, `dkLen`, `passwordHashOrder`. The hash is kept as given, with its
// algorithm (`UserRecord.passwordHashAlgorithm`), verified at sign-in, and replaced by our own on the first successful
// sign-in (production: "Firebase Auth will rehash the password the first time that account successfully logs in",
// github.com/firebase/scrypt's README).
//
// How each algorithm hashes (salt and password as bytes, `‖` concatenation):
// - SCRYPT (Firebase's): AES-256-CTR, keyed by the first 32 bytes of scrypt(password, salt ‖ saltSeparator,
//   N = 2^memoryCost, r = rounds, p = 1, 64 bytes), over the signer key (github.com/firebase/scrypt).
// - STANDARD_SCRYPT: scrypt(password, salt, N = cpuMemCost, r = blockSize, p = parallelization, dkLen).
// - BCRYPT: the hash is the whole `$2a$`/`$2b$`/`$2y$` string; the salt field is unused.
// - PBKDF_SHA1, PBKDF2_SHA256: PBKDF2(password, salt, rounds) as long as the stored hash (firebase-admin-node's
//   integration test against production imports a 64-byte PBKDF2_SHA256 hash).
// - HMAC_*: HMAC(signerKey, password ‖ salt), salt first with SALT_AND_PASSWORD (firebase-admin-node's and
//   firebase-admin-go's integration tests against production).
// - SHA1, SHA256, SHA512: H(salt ‖ password) (password first with PASSWORD_AND_SALT), then H of the digest until
//   `rounds` applications; rounds 0 is accepted but never verifies ("round = 0 only works for MD5", the Auth team
//   in firebase-tools#1701).
// - MD5: x = MD5(salt ‖ password), then `rounds` times x = MD5(x ‖ password); the stored hash is x's lowercase hex.
//   `passwordHashOrder` does not apply (firebase-admin-node's integration test imports hex(MD5(salt ‖ password)) with
//   rounds 0; a password-first MD5 import failed against production in firebase-admin-node#314; rounds ≥ 1 as a
//   production recording in github.com/t-k/fireemu has it).
// - ARGON2: production accepts it (`argon2Parameters`); OpenSSL 3.0 has no Argon2, so its users are refused here.
//
// Parameters outside production's ranges fail the whole request with production's code (below). What production
// would accept but would let one sign-in cost more than about half a second of CPU or 40 MiB (bcrypt above cost 12,
// a large STANDARD_SCRYPT, a long PBKDF2 hash at many rounds) is refused per user, with a message naming the limit:
// users without a password still import. SECURITY.md lists the limits.

/// An imported hash's algorithm and parameters.
struct ImportedHash: Sendable, Equatable {
    enum Algorithm: String, Sendable, CaseIterable {
        case hmacSHA512 = "HMAC_SHA512", hmacSHA256 = "HMAC_SHA256", hmacSHA1 = "HMAC_SHA1", hmacMD5 = "HMAC_MD5"
        case md5 = "MD5", sha1 = "SHA1", sha256 = "SHA256", sha512 = "SHA512"
        case pbkdfSHA1 = "PBKDF_SHA1", pbkdf2SHA256 = "PBKDF2_SHA256"
        case scrypt = "SCRYPT", standardScrypt = "STANDARD_SCRYPT", bcrypt = "BCRYPT", argon2 = "ARGON2"

        /// The digest of the HMAC, SHA, MD5 and PBKDF algorithms.
        var digest: Digest? {
            switch self {
            case .hmacMD5, .md5: .md5
            case .hmacSHA1, .sha1, .pbkdfSHA1: .sha1
            case .hmacSHA256, .sha256, .pbkdf2SHA256: .sha256
            case .hmacSHA512, .sha512: .sha512
            case .scrypt, .standardScrypt, .bcrypt, .argon2: nil
            }
        }
    }

    /// `passwordHashOrder` (`UNSPECIFIED_ORDER` or absent: the algorithm's own order).
    enum Order: String, Sendable { case saltFirst = "SALT_AND_PASSWORD", passwordFirst = "PASSWORD_AND_SALT" }

    let algorithm: Algorithm
    var signerKey: [UInt8] = []
    var saltSeparator: [UInt8] = []
    var rounds = 0
    /// SCRYPT: log2 N.
    var memoryCost = 0
    /// STANDARD_SCRYPT: N, r, p, dkLen.
    var cpuMemCost = 0
    var blockSize = 0
    var parallelization = 0
    var dkLen = 0
    var order: Order?

    // MARK: limits

    /// Production's ranges (firebase-tools `accountImporter`, firebase-admin's `UserImportHash`, firebase-tools#1146
    /// and #1701; PBKDF rounds 0 fails at production, firebase-admin-node#1222).
    static let digestRounds = 0...8192
    static let pbkdfRounds = 1...120_000
    static let scryptRounds = 1...8
    static let scryptMemoryCost = 1...14

    /// This emulator's: what one verification may cost (SECURITY.md).
    static let maxBcryptCost = 12
    /// scrypt's memory as OpenSSL counts it, 128·r·(N + p + 2) bytes: room for N·r = 2^18 (N = 2^15 with r = 8).
    static let maxScryptMemory = 40 << 20
    static let maxScryptWork = 1 << 19
    static let maxDerivedKeyLength = 1024
    static let maxPBKDFBlocks = 480_000
    /// Production's longest password, 4,096 characters, in UTF-8 at the most: a longer one never matches (MD5 hashes
    /// the password again in each of its up to 8,192 rounds, so its cost grows with the password).
    static let maxPasswordBytes = 4 * 4096

    // MARK: parsing

    /// The algorithm a request (or a user's `passwordHashAlgorithm`) names; nil when it names none. Values outside
    /// production's ranges throw production's error; a malformed field throws proto JSON's `Invalid value at …`.
    static func parse(_ o: JSONObject) throws(AuthError) -> ImportedHash? {
        guard let v = o["hashAlgorithm"], v != .null else { return nil }
        guard case .string(let name) = v else { throw invalid("hash_algorithm", "TYPE_STRING", v) }
        if name.isEmpty { return nil }
        guard let algorithm = Algorithm(rawValue: name) else { throw AuthError(.invalidHashAlgorithm) }
        var h = ImportedHash(algorithm: algorithm)
        h.signerKey = try bytes(o, "signerKey", "signer_key")
        h.saltSeparator = try bytes(o, "saltSeparator", "salt_separator")
        h.rounds = try int(o, "rounds", "rounds")
        h.memoryCost = try int(o, "memoryCost", "memory_cost")
        h.cpuMemCost = try int(o, "cpuMemCost", "cpu_mem_cost")
        h.blockSize = try int(o, "blockSize", "block_size")
        h.parallelization = try int(o, "parallelization", "parallelization")
        h.dkLen = try int(o, "dkLen", "dk_len")
        switch o["passwordHashOrder"] {
        case nil, .null?, "UNSPECIFIED_ORDER"?: break
        case .string(let s)? where Order(rawValue: s) != nil: h.order = Order(rawValue: s)
        case let other?: throw invalid("password_hash_order", "TYPE_ENUM", other)
        }
        try h.check()
        return h
    }

    private func check() throws(AuthError) {
        func require(_ ok: Bool, _ code: AuthError.Code) throws(AuthError) { if !ok { throw AuthError(code) } }
        switch algorithm {
        case .hmacSHA512, .hmacSHA256, .hmacSHA1, .hmacMD5:
            try require(!signerKey.isEmpty, .emptyHashKey)
        case .md5, .sha1, .sha256, .sha512:
            try require(Self.digestRounds.contains(rounds), .invalidHashRounds)
        case .pbkdfSHA1, .pbkdf2SHA256:
            try require(Self.pbkdfRounds.contains(rounds), .invalidHashRounds)
        case .scrypt:
            try require(!signerKey.isEmpty, .emptyHashKey)
            try require(Self.scryptRounds.contains(rounds), .invalidHashRounds)
            try require(Self.scryptMemoryCost.contains(memoryCost), .invalidHashMemoryCost)
        case .standardScrypt:
            try require(cpuMemCost > 1 && cpuMemCost & (cpuMemCost - 1) == 0, .invalidHashMemoryCost)
            try require(blockSize >= 1, .invalidHashBlockSize)
            try require(parallelization >= 1, .invalidHashParallelization)
            try require(dkLen >= 1, .invalidHashDerivedKeyLength)
        case .bcrypt, .argon2:
            break
        }
    }

    private static func invalid(_ field: String, _ type: String, _ v: JSON) -> AuthError {
        AuthError.invalidJSON("Invalid value at '\(field)' (\(type)), \(v.serializedString.prefix(100))")
    }

    /// An int32 given as a number or a decimal string (proto JSON); 0 when absent.
    private static func int(_ o: JSONObject, _ key: String, _ field: String) throws(AuthError) -> Int {
        guard let v = o[key], v != .null else { return 0 }
        guard let n = UserFields.integer(v), n >= Int64(Int32.min), n <= Int64(Int32.max) else { throw invalid(field, "TYPE_INT32", v) }
        return Int(n)
    }

    /// Bytes given as base64 (standard or URL-safe, padded or not); empty when absent.
    private static func bytes(_ o: JSONObject, _ key: String, _ field: String) throws(AuthError) -> [UInt8] {
        guard let v = o[key], v != .null else { return [] }
        guard case .string(let s) = v, let b = Base64URL.decode(s) else { throw invalid(field, "TYPE_BYTES", v) }
        return b
    }

    /// The canonical form stored on the user: the request's field names, the parameters the algorithm uses.
    var json: JSON {
        var o: JSONObject = ["hashAlgorithm": .string(algorithm.rawValue)]
        switch algorithm {
        case .hmacSHA512, .hmacSHA256, .hmacSHA1, .hmacMD5:
            o["signerKey"] = .string(Base64URL.encodeStandard(signerKey))
        case .md5, .sha1, .sha256, .sha512, .pbkdfSHA1, .pbkdf2SHA256:
            o["rounds"] = .int(Int64(rounds))
        case .scrypt:
            o["signerKey"] = .string(Base64URL.encodeStandard(signerKey))
            o["saltSeparator"] = .string(Base64URL.encodeStandard(saltSeparator))
            o["rounds"] = .int(Int64(rounds))
            o["memoryCost"] = .int(Int64(memoryCost))
        case .standardScrypt:
            o["cpuMemCost"] = .int(Int64(cpuMemCost))
            o["blockSize"] = .int(Int64(blockSize))
            o["parallelization"] = .int(Int64(parallelization))
            o["dkLen"] = .int(Int64(dkLen))
        case .bcrypt, .argon2:
            break
        }
        if let order, algorithm != .md5, algorithm.digest != nil, !isPBKDF { o["passwordHashOrder"] = .string(order.rawValue) }
        return .object(o)
    }

    private var isPBKDF: Bool { algorithm == .pbkdfSHA1 || algorithm == .pbkdf2SHA256 }

    // MARK: cost

    /// Why this emulator refuses to keep `hash` under these parameters (it would cost too much to verify, or cannot
    /// be verified here), as the user's import error; nil when it is kept.
    func refusal(hash: [UInt8]) -> String? {
        switch algorithm {
        case .argon2:
            return "ARGON2 password hashes are not supported by this emulator (its OpenSSL has no Argon2): import the user with rawPassword or without a password"
        case .bcrypt:
            guard let parsed = BCrypt.parse(String(decoding: hash, as: UTF8.self)) else {
                return "passwordHash is not a bcrypt hash: expected $2a$, $2b$ or $2y$, a cost from 04 to 31, 53 characters of salt and hash"
            }
            guard parsed.cost <= Self.maxBcryptCost else {
                return "bcrypt cost \(parsed.cost) is above this emulator's limit of \(Self.maxBcryptCost): one sign-in would take seconds (SECURITY.md)"
            }
        case .standardScrypt:
            guard scryptMemory.map({ $0 <= Self.maxScryptMemory }) == true, scryptWork.map({ $0 <= Self.maxScryptWork }) == true else {
                return "STANDARD_SCRYPT with cpuMemCost \(cpuMemCost), blockSize \(blockSize) and parallelization \(parallelization) is above this emulator's limits, 128·r·(N + p + 2) ≤ 40 MiB of memory and N·r·p ≤ \(Self.maxScryptWork): one sign-in would cost more (SECURITY.md)"
            }
            guard dkLen <= Self.maxDerivedKeyLength else {
                return "STANDARD_SCRYPT dkLen \(dkLen) is above this emulator's limit of \(Self.maxDerivedKeyLength) bytes"
            }
        case .pbkdfSHA1, .pbkdf2SHA256:
            let size = algorithm.digest?.size ?? 32
            let blocks = (hash.count + size - 1) / size
            guard blocks * rounds <= Self.maxPBKDFBlocks else {
                return "\(algorithm.rawValue) over a \(hash.count)-byte hash at \(rounds) rounds needs \(blocks * rounds) HMAC blocks; this emulator verifies at most \(Self.maxPBKDFBlocks) (SECURITY.md)"
            }
        case .hmacSHA512, .hmacSHA256, .hmacSHA1, .hmacMD5, .md5, .sha1, .sha256, .sha512, .scrypt:
            break  // production's ranges already bound them (SCRYPT: 16 MiB, about 0.1 s)
        }
        return nil
    }

    /// STANDARD_SCRYPT's memory, 128·r·(N + p + 2) bytes (OpenSSL's V and B arrays), and work, N·r·p; nil on overflow.
    private var scryptMemory: Int? {
        let (np, o1) = cpuMemCost.addingReportingOverflow(parallelization &+ 2)
        let (m, o2) = np.multipliedReportingOverflow(by: blockSize)
        let (bytes, o3) = m.multipliedReportingOverflow(by: 128)
        return o1 || o2 || o3 ? nil : bytes
    }
    private var scryptWork: Int? {
        let (nr, o1) = cpuMemCost.multipliedReportingOverflow(by: blockSize)
        let (w, o2) = nr.multipliedReportingOverflow(by: parallelization)
        return o1 || o2 ? nil : w
    }

    // MARK: verification

    /// Whether `password` hashes to `hash` under these parameters (constant-time comparison). False for what the
    /// limits refuse, whatever stored it, and for a password longer than production allows.
    func verify(_ password: String, hash: [UInt8], salt: [UInt8]) -> Bool {
        guard refusal(hash: hash) == nil, !hash.isEmpty, password.utf8.count <= Self.maxPasswordBytes else { return false }
        let pw = Array(password.utf8)
        func joined(_ first: Order) -> [UInt8] { (order ?? first) == .saltFirst ? salt + pw : pw + salt }
        let derived: [UInt8]?
        switch algorithm {
        case .hmacSHA512, .hmacSHA256, .hmacSHA1, .hmacMD5:
            derived = algorithm.digest?.hmac(key: signerKey, joined(.passwordFirst))
        case .sha1, .sha256, .sha512:
            guard rounds >= 1, let d = algorithm.digest else { return false }
            var x = d.hash(joined(.saltFirst))
            for _ in 1..<rounds { x = d.hash(x) }
            derived = x
        case .md5:
            var x = Digest.md5.hash(salt + pw)
            for _ in 0..<rounds { x = Digest.md5.hash(x + pw) }
            derived = Array(x.map { String($0, radix: 16) }.map { $0.count == 1 ? "0" + $0 : $0 }.joined().utf8)
        case .pbkdfSHA1, .pbkdf2SHA256:
            derived = algorithm.digest.map { pbkdf2($0, password: pw, salt: salt, iterations: rounds, length: hash.count) }
        case .scrypt:
            derived = firebaseScrypt(password: pw, salt: salt, saltSeparator: saltSeparator, signerKey: signerKey, rounds: rounds,
                                     memoryCost: memoryCost, maxMemory: UInt64(Self.maxScryptMemory))
        case .standardScrypt:
            guard dkLen == hash.count else { return false }
            derived = scrypt(password: pw, salt: salt, n: UInt64(cpuMemCost), r: UInt64(blockSize), p: UInt64(parallelization),
                             length: dkLen, maxMemory: UInt64(Self.maxScryptMemory))
        case .bcrypt:
            guard let parsed = BCrypt.parse(String(decoding: hash, as: UTF8.self)) else { return false }
            return BCrypt.verify(password: pw, parsed)
        case .argon2:
            return false
        }
        guard let derived, derived.count == hash.count else { return false }
        return zip(derived, hash).reduce(0) { $0 | ($1.0 ^ $1.1) } == 0
    }
}

extension Passwords {
    /// `matches` for an imported hash: its stored algorithm verifies it (nothing is remembered: the first success
    /// replaces the hash by ours).
    static func matchesImported(_ password: String, hash: String, salt: String?, algorithm: JSON) -> Bool {
        guard case .object(let o) = algorithm, let h = try? ImportedHash.parse(o), let bytes = Base64URL.decode(hash) else { return false }
        let saltBytes = salt.flatMap { Base64URL.decode($0) } ?? []
        return h.verify(password, hash: bytes, salt: saltBytes)
    }

    /// Our own hash of `password`, to replace `user`'s imported one in the sign-in that just verified it; nil when
    /// the user's hash is ours already.
    static func upgrade(_ password: String, user: UserRecord, random: any RandomSource) -> PasswordUpgrade? {
        guard let algorithm = user.passwordHashAlgorithm, let verified = user.passwordHash else { return nil }
        let ours = hash(password, random: random)
        return PasswordUpgrade(verifiedHash: verified, verifiedAlgorithm: algorithm, hash: ours.hash, salt: ours.salt)
    }
}

extension ImportedPassword {
    /// The request's algorithm for every user's `passwordHash` (`batchCreate`'s top-level fields); nil when it names
    /// none (our own and the official emulator's formats, or each user's `passwordHashAlgorithm`).
    static func requestAlgorithm(_ body: JSONObject) throws(AuthError) -> ImportedHash? { try ImportedHash.parse(body) }

    /// An imported user's foreign hash as the password change to store: the request's algorithm, else the user's own
    /// `passwordHashAlgorithm` (an export of this emulator). A hash or salt that is not base64 fails the request
    /// (proto JSON's bytes); an algorithm this emulator will not verify fails the user.
    static func foreign(_ hash: String, salt: String?, updatedAt: Int64?, user u: JSONObject, index: Int,
                        algorithm requested: ImportedHash?) throws(AuthError) -> Result<PasswordChange, UserFieldError>? {
        var algorithm = requested
        if algorithm == nil, let own = u[UserFields.passwordHashAlgorithm], own != .null {
            guard case .object(let o) = own else { return .failure(UserFieldError("passwordHashAlgorithm must be an object")) }
            do throws(AuthError) { algorithm = try ImportedHash.parse(o) } catch {
                return .failure(UserFieldError("passwordHashAlgorithm: \(error.wire.message)"))
            }
        }
        guard let algorithm else { return nil }
        guard let bytes = Base64URL.decode(hash) else {
            throw AuthError.invalidJSON("Invalid value at 'users[\(index)].password_hash' (TYPE_BYTES), \(JSON.string(hash).serializedString.prefix(100))")
        }
        if let salt, Base64URL.decode(salt) == nil {
            throw AuthError.invalidJSON("Invalid value at 'users[\(index)].salt' (TYPE_BYTES), \(JSON.string(salt).serializedString.prefix(100))")
        }
        if let refusal = algorithm.refusal(hash: bytes) { return .failure(UserFieldError(refusal)) }
        return .success(PasswordChange(hash: hash, salt: salt, updatedAt: updatedAt, revokesTokens: false, algorithm: algorithm.json))
    }
}
