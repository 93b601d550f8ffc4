internal import COpenSSL

/// A self-signed X.509 certificate for a key, as Google publishes at the x509 metadata URL.
public enum X509Certificate {
    /// PEM of a self-signed certificate over `key`, valid from `notBefore` for `validSeconds`.
    public static func selfSignedPEM(key: RSAKey, commonName: String, serial: Int, notBefore: Int64, validSeconds: Int64) throws -> String {
        guard let x = X509_new() else { throw OpenSSLError.capture("X509_new") }
        defer { X509_free(x) }
        guard X509_set_version(x, 2) == 1 else { throw OpenSSLError.capture("X509_set_version") }
        ASN1_INTEGER_set(X509_get_serialNumber(x), serial)
        var start = time_t(notBefore)
        guard X509_time_adj_ex(X509_getm_notBefore(x), 0, 0, &start) != nil,
            X509_time_adj_ex(X509_getm_notAfter(x), 0, Int(validSeconds), &start) != nil
        else { throw OpenSSLError.capture("X509_time_adj_ex") }
        guard X509_set_pubkey(x, key.pkey) == 1 else { throw OpenSSLError.capture("X509_set_pubkey") }
        let name = X509_get_subject_name(x)
        let cn = Array(commonName.utf8)
        guard cn.withUnsafeBufferPointer({ X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, $0.baseAddress, Int32(cn.count), -1, 0) }) == 1,
            X509_set_issuer_name(x, name) == 1
        else { throw OpenSSLError.capture("X509_NAME") }
        guard X509_sign(x, key.pkey, EVP_sha256()) > 0 else { throw OpenSSLError.capture("X509_sign") }
        let bytes = try collectBIO("PEM_write_bio_X509") { PEM_write_bio_X509($0, x) }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The public key inside a PEM certificate.
    public static func publicKey(certificatePEM: [UInt8]) throws -> RSAKey {
        try withMemoryBIO(certificatePEM) { bio in
            guard let x = PEM_read_bio_X509(bio, nil, nil, nil) else { throw OpenSSLError.capture("PEM_read_bio_X509") }
            defer { X509_free(x) }
            guard let k = X509_get_pubkey(x) else { throw OpenSSLError.capture("X509_get_pubkey") }
            return RSAKey(takingOwnershipOf: k, isPrivate: false)
        }
    }
}
