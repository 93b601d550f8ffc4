internal import COpenSSL

/// PBKDF2-HMAC-SHA256 (RFC 8018) through OpenSSL: `length` bytes derived from `password` and `salt`.
public func pbkdf2SHA256(password: [UInt8], salt: [UInt8], iterations: Int, length: Int = 32) -> [UInt8] {
    pbkdf2(.sha256, password: password, salt: salt, iterations: iterations, length: length)
}
