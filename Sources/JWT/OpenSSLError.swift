internal import COpenSSL

/// An OpenSSL failure with the drained error queue as text.
public struct OpenSSLError: Error, CustomStringConvertible, Sendable {
    public let operation: String
    public let details: [String]
    public var description: String { "\(operation) failed" + (details.isEmpty ? "" : ": " + details.joined(separator: "; ")) }

    static func capture(_ operation: String) -> OpenSSLError {
        var details: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            var buf = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buf, buf.count)
            details.append(buf.withUnsafeBufferPointer { String(cString: $0.baseAddress!) })
        }
        return OpenSSLError(operation: operation, details: details)
    }
}

/// Runs `body` with a read-only memory BIO over `bytes`; the BIO never outlives the call.
func withMemoryBIO<T>(_ bytes: [UInt8], _ body: (OpaquePointer) throws -> T) throws -> T {
    try bytes.withUnsafeBytes { raw in
        guard let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count)) else { throw OpenSSLError.capture("BIO_new_mem_buf") }
        defer { BIO_free(bio) }
        return try body(bio)
    }
}

/// Runs `write` against a fresh memory BIO and returns what it wrote.
func collectBIO(_ operation: String, _ write: (OpaquePointer) -> Int32) throws -> [UInt8] {
    guard let bio = BIO_new(BIO_s_mem()) else { throw OpenSSLError.capture("BIO_new") }
    defer { BIO_free(bio) }
    guard write(bio) == 1 else { throw OpenSSLError.capture(operation) }
    var ptr: UnsafeMutablePointer<CChar>? = nil
    let n = copenssl_BIO_get_mem_data(bio, &ptr)
    guard n > 0, let ptr else { return [] }
    return ptr.withMemoryRebound(to: UInt8.self, capacity: n) { Array(UnsafeBufferPointer(start: $0, count: n)) }
}

/// SHA-256 of `data`.
public func sha256(_ data: [UInt8]) -> [UInt8] { Digest.sha256.hash(data) }

/// A key's private half as PEM (PKCS#8, unencrypted).
func pemPrivateKey(_ pkey: OpaquePointer) throws -> String {
        let bytes = try collectBIO("PEM_write_bio_PrivateKey") { PEM_write_bio_PrivateKey($0, pkey, nil, nil, 0, nil, nil) }
        return String(decoding: bytes, as: UTF8.self)
}

/// A key's SubjectPublicKeyInfo DER.
func subjectPublicKeyInfo(_ pkey: OpaquePointer) throws -> [UInt8] {
        var p: UnsafeMutablePointer<UInt8>? = nil
        let n = i2d_PUBKEY(pkey, &p)
        guard n > 0, let p else { throw OpenSSLError.capture("i2d_PUBKEY") }
        defer { copenssl_OPENSSL_free(p) }
        return Array(UnsafeBufferPointer(start: p, count: Int(n)))
}
