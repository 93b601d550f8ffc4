internal import COpenSSL

/// HMAC-SHA256 (RFC 2104) through OpenSSL: the 32-byte tag of `data` under `key` (webhook signatures).
public func hmacSHA256(key: [UInt8], data: [UInt8]) -> [UInt8] { hmac("SHA256", 32, key: key, data: data) }

/// HMAC-SHA1 through OpenSSL: the 20-byte tag (TOTP codes, RFC 6238).
@Sendable public func hmacSHA1(key: [UInt8], data: [UInt8]) -> [UInt8] { hmac("SHA1", 20, key: key, data: data) }

private func hmac(_ digest: String, _ size: Int, key: [UInt8], data: [UInt8]) -> [UInt8] {
    var out = [UInt8](repeating: 0, count: size)
    var length = 0
    let done = key.withUnsafeBytes { k in
        data.withUnsafeBytes { d in
            EVP_Q_mac(nil, "HMAC", nil, digest, nil, k.baseAddress, k.count,
                      d.baseAddress?.assumingMemoryBound(to: UInt8.self), d.count, &out, out.count, &length)
        }
    }
    precondition(done != nil && length == size, "HMAC-\(digest) failed")
    return out
}
