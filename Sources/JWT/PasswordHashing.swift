internal import COpenSSL

// The primitives of the password hashes production imports (PhoneAuthAPI/ImportedHashes.swift says which algorithm
// uses what): digests, HMAC, PBKDF2, scrypt and AES-256-CTR through OpenSSL; bcrypt is in BCrypt.swift (OpenSSL has
// no Eksblowfish). Every function is pure and allocates only its output; costs are bounded by the callers.

/// A digest OpenSSL's default provider offers.
public enum Digest: Sendable, CaseIterable {
    case md5, sha1, sha256, sha512

    /// Output bytes.
    public var size: Int {
        switch self {
        case .md5: 16
        case .sha1: 20
        case .sha256: 32
        case .sha512: 64
        }
    }

    var md: OpaquePointer? {
        switch self {
        case .md5: EVP_md5()
        case .sha1: EVP_sha1()
        case .sha256: EVP_sha256()
        case .sha512: EVP_sha512()
        }
    }

    /// The digest of `data`.
    public func hash(_ data: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var len: UInt32 = 0
        let ok = data.withUnsafeBytes { d in EVP_Digest(d.baseAddress, d.count, &out, &len, md, nil) }
        precondition(ok == 1 && Int(len) == size, "EVP_Digest failed")
        return Array(out[0..<size])
    }

    /// HMAC (RFC 2104) of `data` under `key`.
    public func hmac(key: [UInt8], _ data: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var len: UInt32 = 0
        // An empty array may have no address; OpenSSL wants a pointer all the same (the lengths stay 0).
        let k = key.isEmpty ? [0] : key, d = data.isEmpty ? [0] : data
        let ok = HMAC(md, k, Int32(key.count), d, data.count, &out, &len)
        precondition(ok != nil && Int(len) == size, "HMAC failed")
        return Array(out[0..<size])
    }
}

/// PBKDF2 (RFC 8018) with HMAC-`digest`: `length` bytes. `iterations` ≥ 1.
public func pbkdf2(_ digest: Digest, password: [UInt8], salt: [UInt8], iterations: Int, length: Int) -> [UInt8] {
    var out = [UInt8](repeating: 0, count: length)
    let ok = password.withUnsafeBytes { p in
        salt.withUnsafeBytes { s in
            PKCS5_PBKDF2_HMAC(p.baseAddress?.assumingMemoryBound(to: CChar.self), Int32(password.count),
                              s.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32(salt.count),
                              Int32(iterations), digest.md, Int32(length), &out)
        }
    }
    precondition(ok == 1, "PKCS5_PBKDF2_HMAC failed")
    return out
}

/// scrypt (RFC 7914): `length` bytes, or nil when OpenSSL refuses the parameters (N not a power of two above 1,
/// r·p too large, or more than `maxMemory` bytes needed: 128·r·(N + p + 2), OpenSSL's own count).
public func scrypt(password: [UInt8], salt: [UInt8], n: UInt64, r: UInt64, p: UInt64, length: Int, maxMemory: UInt64) -> [UInt8]? {
    guard length > 0 else { return nil }
    var out = [UInt8](repeating: 0, count: length)
    // An empty array may have no address; OpenSSL wants a pointer all the same (the lengths stay 0).
    let pw = password.isEmpty ? [0] : password, s = salt.isEmpty ? [0] : salt
    let ok = pw.withUnsafeBytes { pwb in
        EVP_PBE_scrypt(pwb.baseAddress!.assumingMemoryBound(to: CChar.self), password.count, s, salt.count,
                       n, r, p, maxMemory, &out, length)
    }
    guard ok == 1 else {
        ERR_clear_error()
        return nil
    }
    return out
}

/// AES-256 in counter mode (the counter block starts at `iv`, big-endian increments): encrypting and decrypting are
/// the same. `key` is 32 bytes, `iv` 16.
public func aes256CTR(key: [UInt8], iv: [UInt8] = [UInt8](repeating: 0, count: 16), _ data: [UInt8]) -> [UInt8] {
    precondition(key.count == 32 && iv.count == 16, "AES-256-CTR takes a 32-byte key and a 16-byte IV")
    guard let ctx = EVP_CIPHER_CTX_new() else { preconditionFailure("EVP_CIPHER_CTX_new failed") }
    defer { EVP_CIPHER_CTX_free(ctx) }
    var out = [UInt8](repeating: 0, count: data.count + 16)
    var n: Int32 = 0, tail: Int32 = 0
    let ok = EVP_EncryptInit_ex(ctx, EVP_aes_256_ctr(), nil, key, iv) == 1
        && data.withUnsafeBufferPointer { d in EVP_EncryptUpdate(ctx, &out, &n, d.baseAddress, Int32(d.count)) } == 1
        && out.withUnsafeMutableBufferPointer { o in EVP_EncryptFinal_ex(ctx, o.baseAddress! + Int(n), &tail) } == 1
    precondition(ok, "AES-256-CTR failed")
    return Array(out[0..<Int(n + tail)])
}

/// Firebase's modified scrypt (github.com/firebase/scrypt, `scryptenc_buf_saltlen`): 64 bytes of
/// scrypt(password, salt ‖ saltSeparator, N = 2^memoryCost, r = rounds, p = 1); the first 32 are an AES-256-CTR key
/// (counter block from zero) that encrypts the project's signer key — the ciphertext is the stored hash. Nil when
/// scrypt refuses the parameters or would need more than `maxMemory` bytes.
public func firebaseScrypt(password: [UInt8], salt: [UInt8], saltSeparator: [UInt8], signerKey: [UInt8],
                           rounds: Int, memoryCost: Int, maxMemory: UInt64) -> [UInt8]? {
    guard (1...62).contains(memoryCost), rounds >= 1,
          let derived = scrypt(password: password, salt: salt + saltSeparator, n: 1 << UInt64(memoryCost), r: UInt64(rounds), p: 1,
                               length: 64, maxMemory: maxMemory) else { return nil }
    return aes256CTR(key: Array(derived[0..<32]), signerKey)
}
