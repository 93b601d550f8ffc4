internal import COpenSSL

/// PBKDF2-HMAC-SHA256 (RFC 8018) through OpenSSL: `length` bytes derived from `password` and `salt`.
public func pbkdf2SHA256(password: [UInt8], salt: [UInt8], iterations: Int, length: Int = 32) -> [UInt8] {
    var out = [UInt8](repeating: 0, count: length)
    let ok = password.withUnsafeBytes { p in
        salt.withUnsafeBytes { s in
            PKCS5_PBKDF2_HMAC(p.baseAddress?.assumingMemoryBound(to: CChar.self), Int32(password.count),
                              s.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32(salt.count),
                              Int32(iterations), EVP_sha256(), Int32(length), &out)
        }
    }
    precondition(ok == 1, "PKCS5_PBKDF2_HMAC failed")
    return out
}
