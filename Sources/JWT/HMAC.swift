internal import COpenSSL

/// HMAC-SHA256 (RFC 2104) through OpenSSL: the 32-byte tag of `data` under `key` (webhook signatures).
public func hmacSHA256(key: [UInt8], data: [UInt8]) -> [UInt8] {
    var out = [UInt8](repeating: 0, count: 32)
    var length = 0
    let done = key.withUnsafeBytes { k in
        data.withUnsafeBytes { d in
            EVP_Q_mac(nil, "HMAC", nil, "SHA256", nil, k.baseAddress, k.count,
                      d.baseAddress?.assumingMemoryBound(to: UInt8.self), d.count, &out, out.count, &length)
        }
    }
    precondition(done != nil && length == 32, "HMAC-SHA256 failed")
    return out
}
