internal import COpenSSL
import EmulatorSupport

/// A P-256 key pair owning its `EVP_PKEY` (ES256, the algorithm of Phone Number Verification tokens). Immutable after
/// creation; each signature builds its own digest context, so one instance is shared by every thread.
public final class ECKey: @unchecked Sendable {
    let pkey: OpaquePointer

    init(takingOwnershipOf pkey: OpaquePointer) { self.pkey = pkey }
    deinit { EVP_PKEY_free(pkey) }

    /// A new P-256 key pair (OpenSSL's CSPRNG; well under a millisecond).
    public static func generate() throws -> ECKey {
        guard let k = copenssl_ec_p256_generate() else { throw OpenSSLError.capture("EVP_PKEY_Q_keygen(P-256)") }
        return ECKey(takingOwnershipOf: k)
    }

    /// Loads a PEM private key; only P-256 keys are accepted.
    public static func privateKey(pem: [UInt8]) throws -> ECKey {
        let key: OpaquePointer = try withMemoryBIO(pem) { bio in
            guard let k = PEM_read_bio_PrivateKey(bio, nil, nil, nil) else { throw OpenSSLError.capture("PEM_read_bio_PrivateKey") }
            return k
        }
        let made = ECKey(takingOwnershipOf: key)
        guard EVP_PKEY_get_base_id(key) == EVP_PKEY_EC, made.curveName == "prime256v1" || made.curveName == "P-256" else {
            throw OpenSSLError(operation: "load key", details: ["not a P-256 key"])
        }
        return made
    }

    var curveName: String {
        var buf = [CChar](repeating: 0, count: 64)
        var len = 0
        guard EVP_PKEY_get_group_name(pkey, &buf, buf.count, &len) == 1 else { return "" }
        return String(decoding: buf.prefix(len).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    public func privateKeyPEM() throws -> String {
        try pemPrivateKey(pkey)
    }

    /// SubjectPublicKeyInfo DER.
    public func publicKeyDER() throws -> [UInt8] {
        try subjectPublicKeyInfo(pkey)
    }

    /// The public point's coordinates (32 bytes each, big-endian), as a JWK's `x` and `y`.
    public func publicPoint() throws -> (x: [UInt8], y: [UInt8]) {
        var buf = [UInt8](repeating: 0, count: 65)
        var len = 0
        guard EVP_PKEY_get_octet_string_param(pkey, OSSL_PKEY_PARAM_PUB_KEY, &buf, buf.count, &len) == 1, len == 65, buf[0] == 4 else {
            throw OpenSSLError.capture("EVP_PKEY_get_octet_string_param(pub)")
        }
        return (Array(buf[1...32]), Array(buf[33...64]))
    }

    /// ECDSA P-256 with SHA-256 over `message`, as JWS wants it: `r || s`, 64 bytes.
    public func signES256(_ message: [UInt8]) throws -> [UInt8] {
        guard let ctx = EVP_MD_CTX_new() else { throw OpenSSLError.capture("EVP_MD_CTX_new") }
        defer { EVP_MD_CTX_free(ctx) }
        guard EVP_DigestSignInit(ctx, nil, EVP_sha256(), nil, pkey) == 1 else { throw OpenSSLError.capture("EVP_DigestSignInit") }
        var der = [UInt8](repeating: 0, count: 80)
        var len = der.count
        let ok = message.withUnsafeBufferPointer { m in
            der.withUnsafeMutableBufferPointer { d in EVP_DigestSign(ctx, d.baseAddress, &len, m.baseAddress, m.count) == 1 }
        }
        guard ok else { throw OpenSSLError.capture("EVP_DigestSign") }
        var raw = [UInt8](repeating: 0, count: 64)
        let converted = der.withUnsafeBufferPointer { d in
            raw.withUnsafeMutableBufferPointer { r in copenssl_ecdsa_der_to_raw(d.baseAddress, len, r.baseAddress, 32) == 1 }
        }
        guard converted else { throw OpenSSLError.capture("d2i_ECDSA_SIG") }
        return raw
    }

    /// Verifies a JWS ES256 signature (`r || s`); false on any mismatch or malformed signature.
    public func verifyES256(signature: [UInt8], message: [UInt8]) -> Bool {
        guard signature.count == 64 else { return false }
        var der: UnsafeMutablePointer<UInt8>? = nil
        let n = signature.withUnsafeBufferPointer { copenssl_ecdsa_raw_to_der($0.baseAddress, 32, &der) }
        guard n > 0, let der else { ERR_clear_error(); return false }
        defer { copenssl_OPENSSL_free(der) }
        guard let ctx = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(ctx) }
        guard EVP_DigestVerifyInit(ctx, nil, EVP_sha256(), nil, pkey) == 1 else { ERR_clear_error(); return false }
        let rc = message.withUnsafeBufferPointer { m in EVP_DigestVerify(ctx, der, Int(n), m.baseAddress, m.count) }
        if rc != 1 { ERR_clear_error() }
        return rc == 1
    }
}

/// A key id as Google derives them: 40 hex characters of the SubjectPublicKeyInfo's SHA-256.
public enum KeyID {
    public static func fromSPKI(_ der: [UInt8]) -> String {
        let hex = Array("0123456789abcdef".utf8)
        var kidBytes: [UInt8] = []
        for b in sha256(der).prefix(20) { kidBytes.append(hex[Int(b >> 4)]); kidBytes.append(hex[Int(b & 15)]) }
        return String(decoding: kidBytes, as: UTF8.self)
    }
}

/// An ES256 signing key with its published identity: `kid` and JWK (`kty EC`, `crv P-256`).
public struct ES256SigningKey: Sendable {
    public let key: ECKey
    public let kid: String
    public let jwk: JSONObject
    private let headerPrefix: [UInt8]

    public init(key: ECKey) throws {
        self.key = key
        kid = KeyID.fromSPKI(try key.publicKeyDER())
        var prefix = Base64URL.encodeBytes(JSON.object(["alg": "ES256", "kid": .string(kid), "typ": "JWT"]).serialized())
        prefix.append(UInt8(ascii: "."))
        headerPrefix = prefix
        let (x, y) = try key.publicPoint()
        jwk = ["kty": "EC", "crv": "P-256", "alg": "ES256", "use": "sig", "kid": .string(kid),
               "x": .string(Base64URL.encode(x)), "y": .string(Base64URL.encode(y))]
    }

    /// `b64url({"alg":"ES256","kid":…,"typ":"JWT"}).b64url(payload).b64url(r||s)`.
    public func sign(payload: JSONObject) throws -> String {
        var token = headerPrefix
        Base64URL.append(JSON.object(payload).serialized(), to: &token)
        let sig = try key.signES256(token)
        token.append(UInt8(ascii: "."))
        Base64URL.append(sig, to: &token)
        return String(decoding: token, as: UTF8.self)
    }

    public func verify(_ jwt: DecodedJWT) -> Bool {
        jwt.algorithm == "ES256" && key.verifyES256(signature: jwt.signature, message: jwt.signingInput)
    }
}
