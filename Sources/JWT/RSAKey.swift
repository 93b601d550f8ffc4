internal import COpenSSL

/// An RSA key pair (or public key) owning its `EVP_PKEY`. Immutable after creation, so one instance is shared
/// read-only by every signing thread (OpenSSL 3 allows concurrent signatures with separate `EVP_MD_CTX`s).
public final class RSAKey: @unchecked Sendable {
    let pkey: OpaquePointer
    public let isPrivate: Bool

    init(takingOwnershipOf pkey: OpaquePointer, isPrivate: Bool) {
        self.pkey = pkey
        self.isPrivate = isPrivate
    }

    deinit { EVP_PKEY_free(pkey) }

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
        let bytes = try collectBIO("PEM_write_bio_PrivateKey") { PEM_write_bio_PrivateKey($0, pkey, nil, nil, 0, nil, nil) }
        return String(decoding: bytes, as: UTF8.self)
    }

    public func publicKeyPEM() throws -> String {
        let bytes = try collectBIO("PEM_write_bio_PUBKEY") { PEM_write_bio_PUBKEY($0, pkey) }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// SubjectPublicKeyInfo DER.
    public func publicKeyDER() throws -> [UInt8] {
        var p: UnsafeMutablePointer<UInt8>? = nil
        let n = i2d_PUBKEY(pkey, &p)
        guard n > 0, let p else { throw OpenSSLError.capture("i2d_PUBKEY") }
        defer { copenssl_OPENSSL_free(p) }
        return Array(UnsafeBufferPointer(start: p, count: Int(n)))
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

    /// RSASSA-PKCS1-v1_5 with SHA-256 over `message` (the JWS RS256 algorithm).
    public func signSHA256(_ message: [UInt8]) throws -> [UInt8] {
        guard isPrivate else { throw OpenSSLError(operation: "sign", details: ["public key only"]) }
        guard let ctx = EVP_MD_CTX_new() else { throw OpenSSLError.capture("EVP_MD_CTX_new") }
        defer { EVP_MD_CTX_free(ctx) }
        guard EVP_DigestSignInit(ctx, nil, EVP_sha256(), nil, pkey) == 1 else { throw OpenSSLError.capture("EVP_DigestSignInit") }
        var len = 0
        let ok = message.withUnsafeBufferPointer { m -> Bool in
            guard EVP_DigestSign(ctx, nil, &len, m.baseAddress, m.count) == 1 else { return false }
            return true
        }
        guard ok else { throw OpenSSLError.capture("EVP_DigestSign") }
        var sig = [UInt8](repeating: 0, count: len)
        let ok2 = message.withUnsafeBufferPointer { m in
            sig.withUnsafeMutableBufferPointer { s in EVP_DigestSign(ctx, s.baseAddress, &len, m.baseAddress, m.count) == 1 }
        }
        guard ok2 else { throw OpenSSLError.capture("EVP_DigestSign") }
        return Array(sig[0..<len])
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
