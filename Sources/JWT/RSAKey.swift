internal import COpenSSL
import EmulatorSupport
#if canImport(Glibc)
import Glibc
#endif

/// An `EVP_PKEY_CTX` owned by `RSAKey`'s free list, on the thread's own copy of the key; used by one thread at a time.
struct SigningContext: @unchecked Sendable {
    let pointer: OpaquePointer
    /// The copy of the key the context signs with (freed with it).
    let key: OpaquePointer
    /// The thread that made it (`pthread_self()`): it takes this one back first.
    let owner: UInt

    func free() {
        EVP_PKEY_CTX_free(pointer)
        EVP_PKEY_free(key)
    }
}

/// An RSA key pair (or public key) owning its `EVP_PKEY`. Immutable after creation, so one instance is shared
/// read-only by every signing thread (OpenSSL 3 allows concurrent signatures with separate `EVP_MD_CTX`s).
public final class RSAKey: @unchecked Sendable {
    let pkey: OpaquePointer
    public let isPrivate: Bool

    init(takingOwnershipOf pkey: OpaquePointer, isPrivate: Bool) {
        self.pkey = pkey
        self.isPrivate = isPrivate
    }

    /// The signature's length in bytes (the modulus size).
    public var signatureSize: Int { Int(EVP_PKEY_get_size(pkey)) }

    /// SHA-256 fetched once: `EVP_sha256()` passed to `EVP_Digest` makes OpenSSL 3 look the algorithm up again in its
    /// provider store (a locked property query) on every call.
    nonisolated(unsafe) private static let sha256 = EVP_MD_fetch(nil, "SHA256", nil)

    /// Prepared signing contexts not in use (see `signSHA256`).
    private let signingContexts = Locked<[SigningContext]>([])
    private static let maxIdleContexts = 16

    deinit {
        for c in signingContexts.withLock({ $0 }) { c.free() }
        EVP_PKEY_free(pkey)
    }

    /// Generates a new key pair (100–300 ms for 2048 bits).
    public static func generate(bits: Int = 2048) throws -> RSAKey {
        guard let ctx = EVP_PKEY_CTX_new_from_name(nil, "RSA", nil) else { throw OpenSSLError.capture("EVP_PKEY_CTX_new_from_name") }
        defer { EVP_PKEY_CTX_free(ctx) }
        guard EVP_PKEY_keygen_init(ctx) == 1, EVP_PKEY_CTX_set_rsa_keygen_bits(ctx, Int32(bits)) == 1 else {
            throw OpenSSLError.capture("EVP_PKEY_keygen_init")
        }
        var out: OpaquePointer? = nil
        guard EVP_PKEY_generate(ctx, &out) == 1, let out else { throw OpenSSLError.capture("EVP_PKEY_generate") }
        return RSAKey(takingOwnershipOf: out, isPrivate: true)
    }

    /// Loads a PEM private key (PKCS#8 or traditional `RSA PRIVATE KEY`).
    public static func privateKey(pem: [UInt8]) throws -> RSAKey {
        let key: OpaquePointer = try withMemoryBIO(pem) { bio in
            guard let k = PEM_read_bio_PrivateKey(bio, nil, nil, nil) else { throw OpenSSLError.capture("PEM_read_bio_PrivateKey") }
            return k
        }
        guard EVP_PKEY_get_base_id(key) == EVP_PKEY_RSA else {
            EVP_PKEY_free(key)
            throw OpenSSLError(operation: "load key", details: ["not an RSA key"])
        }
        guard EVP_PKEY_get_bits(key) >= 2048 else {
            EVP_PKEY_free(key)
            throw OpenSSLError(operation: "load key", details: ["RSA key shorter than 2048 bits"])
        }
        return RSAKey(takingOwnershipOf: key, isPrivate: true)
    }

    /// Loads a PEM public key (`BEGIN PUBLIC KEY`).
    public static func publicKey(pem: [UInt8]) throws -> RSAKey {
        try withMemoryBIO(pem) { bio in
            guard let k = PEM_read_bio_PUBKEY(bio, nil, nil, nil) else { throw OpenSSLError.capture("PEM_read_bio_PUBKEY") }
            return RSAKey(takingOwnershipOf: k, isPrivate: false)
        }
    }

    /// Builds a public key from a JWK's modulus and exponent.
    public static func publicKey(modulus n: [UInt8], exponent e: [UInt8]) throws -> RSAKey {
        let key = n.withUnsafeBufferPointer { nb in
            e.withUnsafeBufferPointer { eb in copenssl_rsa_public_from_ne(nb.baseAddress, Int32(n.count), eb.baseAddress, Int32(e.count)) }
        }
        guard let key else { throw OpenSSLError.capture("EVP_PKEY_fromdata") }
        return RSAKey(takingOwnershipOf: key, isPrivate: false)
    }

    public func privateKeyPEM() throws -> String {
        try pemPrivateKey(pkey)
    }

    public func publicKeyPEM() throws -> String {
        let bytes = try collectBIO("PEM_write_bio_PUBKEY") { PEM_write_bio_PUBKEY($0, pkey) }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// SubjectPublicKeyInfo DER.
    public func publicKeyDER() throws -> [UInt8] {
        try subjectPublicKeyInfo(pkey)
    }

    private func bnParam(_ name: String) throws -> [UInt8] {
        var bn: OpaquePointer? = nil
        guard EVP_PKEY_get_bn_param(pkey, name, &bn) == 1, let bn else { throw OpenSSLError.capture("EVP_PKEY_get_bn_param(\(name))") }
        defer { BN_free(bn) }
        var out = [UInt8](repeating: 0, count: Int(copenssl_BN_num_bytes(bn)))
        _ = out.withUnsafeMutableBufferPointer { BN_bn2bin(bn, $0.baseAddress) }
        return out
    }

    /// The modulus `n`, big-endian without leading zeros.
    public func modulus() throws -> [UInt8] { try bnParam(OSSL_PKEY_PARAM_RSA_N) }
    /// The public exponent `e`, big-endian.
    public func exponent() throws -> [UInt8] { try bnParam(OSSL_PKEY_PARAM_RSA_E) }

    /// RSASSA-PKCS1-v1_5 with SHA-256 over `message` (the JWS RS256 algorithm): the digest, then the private-key
    /// operation on a signing context prepared once and reused (`EVP_DigestSignInit` fetched the algorithms and built
    /// a context on every call; `openssl speed` prepares it once too). A context serves one signature at a time, so
    /// each thread takes one from a small free list and gives it back. Each context signs with its own copy of the
    /// key, made by the thread that uses it: OpenSSL's RSA blinding belongs to the thread that set it up, and every
    /// other thread signing with the same key takes the key's write lock and a shared blinding behind another lock
    /// (two signing threads on one key reached 0.92 of `openssl speed -multi 2`, whose processes share nothing).
    public func signSHA256(_ message: [UInt8]) throws -> [UInt8] {
        guard isPrivate else { throw OpenSSLError(operation: "sign", details: ["public key only"]) }
        let ctx = try takeSigningContext()
        var digest = [UInt8](repeating: 0, count: 32)
        var dlen: UInt32 = 0
        let hashed = message.withUnsafeBytes { m in
            digest.withUnsafeMutableBufferPointer { d in EVP_Digest(m.baseAddress, m.count, d.baseAddress, &dlen, Self.sha256 ?? EVP_sha256(), nil) == 1 }
        }
        guard hashed, dlen == 32 else {
            returnSigningContext(ctx)
            throw OpenSSLError.capture("EVP_Digest")
        }
        var len = Int(EVP_PKEY_get_size(pkey))
        var sig = [UInt8](repeating: 0, count: len)
        let ok = sig.withUnsafeMutableBufferPointer { s in
            digest.withUnsafeBufferPointer { d in EVP_PKEY_sign(ctx.pointer, s.baseAddress, &len, d.baseAddress, d.count) == 1 }
        }
        guard ok else {
            // A context that failed is not reused.
            ctx.free()
            throw OpenSSLError.capture("EVP_PKEY_sign")
        }
        returnSigningContext(ctx)
        return len == sig.count ? sig : Array(sig[0..<len])
    }

    private func takeSigningContext() throws -> SigningContext {
        let me = UInt(pthread_self())
        let mine = signingContexts.withLock { list -> SigningContext? in
            guard let i = list.lastIndex(where: { $0.owner == me }) else { return nil }
            return list.remove(at: i)
        }
        if let mine { return mine }
        guard let key = EVP_PKEY_dup(pkey) else { throw OpenSSLError.capture("EVP_PKEY_dup") }
        guard let ctx = EVP_PKEY_CTX_new_from_pkey(nil, key, nil) else {
            EVP_PKEY_free(key)
            throw OpenSSLError.capture("EVP_PKEY_CTX_new_from_pkey")
        }
        let made = SigningContext(pointer: ctx, key: key, owner: me)
        guard EVP_PKEY_sign_init(ctx) == 1, EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_PADDING) == 1,
              EVP_PKEY_CTX_set_signature_md(ctx, EVP_sha256()) == 1 else {
            made.free()
            throw OpenSSLError.capture("EVP_PKEY_sign_init")
        }
        return made
    }

    /// Keeps at most `maxIdleContexts` (one per signing thread is enough; more threads than that just make new ones,
    /// and the oldest idle one goes).
    private func returnSigningContext(_ ctx: SigningContext) {
        let dropped = signingContexts.withLock { list -> SigningContext? in
            list.append(ctx)
            return list.count > Self.maxIdleContexts ? list.removeFirst() : nil
        }
        dropped?.free()
    }

    /// Verifies an RS256 signature; false on any mismatch or malformed signature.
    public func verifySHA256(signature: [UInt8], message: [UInt8]) -> Bool {
        guard let ctx = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(ctx) }
        guard EVP_DigestVerifyInit(ctx, nil, EVP_sha256(), nil, pkey) == 1 else { ERR_clear_error(); return false }
        let rc = signature.withUnsafeBufferPointer { s in
            message.withUnsafeBufferPointer { m in EVP_DigestVerify(ctx, s.baseAddress, s.count, m.baseAddress, m.count) }
        }
        if rc != 1 { ERR_clear_error() }
        return rc == 1
    }
}
