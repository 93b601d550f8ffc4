import EmulatorSupport

/// A JWT split into its parts. Decoding never verifies; call `SigningKey.verify` or check `alg` yourself.
public struct DecodedJWT: Sendable {
    public let header: JSONObject
    public let payload: JSONObject
    public let signingInput: [UInt8]
    public let signature: [UInt8]

    public var algorithm: String? { header["alg"]?.stringValue }
    public var keyID: String? { header["kid"]?.stringValue }

    /// Splits `b64(header).b64(payload).b64(signature)`; nil unless both JSON parts are objects.
    public init?(_ token: String) {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, token.utf8.count < 64 * 1024,
            let h = Base64URL.decode(parts[0]), let p = Base64URL.decode(parts[1]), let s = Base64URL.decode(parts[2]),
            case .object(let ho)? = try? JSONParser.parse(h, maxDepth: 16),
            case .object(let po)? = try? JSONParser.parse(p, maxDepth: 32)
        else { return nil }
        header = ho
        payload = po
        signingInput = Array(parts[0].utf8) + [UInt8(ascii: ".")] + Array(parts[1].utf8)
        signature = s
    }
}

/// The one place that builds `b64url(header).b64url(payload)`.
public enum JWTSerializer {
    public static func signingInput(header: JSONObject, payload: JSONObject) -> [UInt8] {
        signingInput(header: header, payloadJSON: JSON.object(payload).serialized())
    }

    static func signingInput(header: JSONObject, payloadJSON: [UInt8]) -> [UInt8] {
        var out = Base64URL.encodeBytes(JSON.object(header).serialized())
        out.append(UInt8(ascii: "."))
        Base64URL.append(payloadJSON, to: &out)
        return out
    }

    /// An unsigned token exactly like the official emulator's: `{"alg":"none","typ":"JWT"}` and an empty signature.
    public static func unsigned(payload: JSONObject) -> String {
        unsigned(payloadJSON: JSON.object(payload).serialized())
    }

    /// The same from a payload already serialized.
    public static func unsigned(payloadJSON: [UInt8]) -> String {
        var input = signingInput(header: ["alg": "none", "typ": "JWT"], payloadJSON: payloadJSON)
        input.append(UInt8(ascii: "."))
        return String(decoding: input, as: UTF8.self)
    }
}

/// A signing key with its published identity: `kid`, X.509 certificate and JWK.
public struct SigningKey: Sendable {
    public let key: RSAKey
    public let kid: String
    public let certificatePEM: String
    public let jwk: JSONObject
    /// `b64url({"alg":"RS256","kid":…,"typ":"JWT"}).`: the same for every token this key signs, encoded once.
    private let headerPrefix: [UInt8]

    /// Derives the kid (40 hex characters of the SPKI SHA-256, like Google's) and the certificate.
    public init(key: RSAKey, createdAt: Int64) throws {
        self.key = key
        kid = KeyID.fromSPKI(try key.publicKeyDER())
        var prefix = Base64URL.encodeBytes(JSON.object(["alg": "RS256", "kid": .string(kid), "typ": "JWT"]).serialized())
        prefix.append(UInt8(ascii: "."))
        headerPrefix = prefix
        certificatePEM = try X509Certificate.selfSignedPEM(
            key: key, commonName: "securetoken.system.gserviceaccount.com", serial: Int(createdAt & 0x7fff_ffff) | 1,
            notBefore: createdAt - 86_400, validSeconds: 20 * 365 * 86_400)
        jwk = [
            "kty": "RSA", "alg": "RS256", "use": "sig", "kid": .string(kid),
            "n": .string(Base64URL.encode(try key.modulus())), "e": .string(Base64URL.encode(try key.exponent())),
        ]
    }

    /// Signs `payload` as RS256 with this key's kid.
    public func sign(payload: JSONObject) throws -> String {
        try sign(payloadJSON: JSON.object(payload).serialized())
    }

    /// Signs a payload already serialized.
    public func sign(payloadJSON: [UInt8]) throws -> String {
        var token = signingInput(payloadJSON: payloadJSON)
        let sig = try key.signSHA256(token)
        token.append(UInt8(ascii: "."))
        Base64URL.append(sig, to: &token)
        return String(decoding: token, as: UTF8.self)
    }

    /// `b64url(header).b64url(payload)`, with room for the signature: the key's encoded header, then the payload
    /// encoded straight after it (what `JWTSerializer.signingInput` builds, without encoding the header each time).
    public func signingInput(_ payload: JSONObject) -> [UInt8] {
        signingInput(payloadJSON: JSON.object(payload).serialized())
    }

    public func signingInput(payloadJSON json: [UInt8]) -> [UInt8] {
        var token = [UInt8]()
        token.reserveCapacity(headerPrefix.count + (json.count + 2) / 3 * 4 + 1 + (key.signatureSize + 2) / 3 * 4)
        token.append(contentsOf: headerPrefix)
        Base64URL.append(json, to: &token)
        return token
    }

    public func verify(_ jwt: DecodedJWT) -> Bool {
        jwt.algorithm == "RS256" && key.verifySHA256(signature: jwt.signature, message: jwt.signingInput)
    }
}
