import EmulatorSupport
import JWT
import Synchronization
import XCTest

/// RS256 against a known answer: RSASSA-PKCS1-v1_5 is deterministic, so our signature must equal the one
/// `openssl dgst -sha256 -sign` produced for the same key and input.
final class RS256Tests: XCTestCase {
    static let pem = """
-----BEGIN PRIVATE KEY-----
MIIEvwIBADANBgkqhkiG9w0BAQEFAASCBKkwggSlAgEAAoIBAQDlr8Hg9jnLNZQj
igRkUXj9kPc4GhIN7Lkfm8ieWBj1LEEsPNPFtnfwHBj2nlm7yMU20MOH9ddgaTx6
sAMde+mVIMHnpJWaiKV50VYEWKsiqI52RCIDKdqA+hpo9GaqGpf8ibse0lVKE/D7
q5RUuUIMQqelD0DQBw9aakBK0/LEZUwyTFjF5nQJH16iIGFATtb4xn8T3iFBYcTj
EbTsS3ye9Q0bce5cpwJDyDmjX3gal3H7EO0zY0JbE9Xfz8E3SmQ4bwEmGv12oFlp
aFqu/f4Njv6brjfYgvwX6W9al7TUFfJvjwJpbAhwnqfgqMrr0Dpw5ODzrkbsW7Ho
MKntCyEZAgMBAAECggEAXDDUj/gksGTcBfvC0YVGG/jQ0erc7kvi7kX4G15e/iF6
M0hi9AvOTkjo2Cws9kuapOrcYLkTbrYuuUvmpDH1So8wZUrRZYqNaLzWWr5ASpP/
QocMY9qrwnMgoJngj0xHTuz1d2STKT2hz1JKIkuNsCAc7AqYSCddSTw2fBJgceU4
KGRCBG2Q53kmrVBdicL3lE5XlLQU9FVmioD9STgQFnNGqW1GFIA/rWaKoSBbjU3z
8OX0eR3CwgP04eM4ccDJWIat5V7bsJRllZceQ0Ip96KhT++ZZcBJhGzrvxAnFjjA
IHUGDC8ENXyV6InVMFBUqIBRmV/0ZnOsIZHsa2+EZQKBgQD1kj4p8CBcUn/xuXeS
7GNIOYY+3reXUip3WgCIsB5iqpEK/iwdrky2mbSXXBi/LV5Qlfv+eOaggnMMgWtQ
4mv/gyB/2Qc8ycD3xK5QaQ+OMDjmFguavIIyhPy8o4HE5pjRBmZfk+/2F/cwtTLt
Q0agF+BgzJBiNvJZGBEo9ZcikwKBgQDvcNJvLSHXtKgG7DsKUIdLmnl8WdLvQoc0
J8LweoaQiLFi32g2etkLE5k5gc34kUK7yNrqoW82iKJGzkyriA6G38vZWI22ni0q
6S829/Hewzg1mH8lp9Dfy3uP4nFUMVeA1LcZBuSyS+DIeDgZfTwd+XqWbC3nmtUu
coAzcCZdIwKBgQDGdKg+NivA0H9Ld0o190mI3cwq1MxjwuhEyfxyenoj3JoY2y4F
0o12aCM0yx3Iqj51O7CJh2VCRAn8Cj8S/9ithmfmShr6OkXzNgR1QWJr03a4Iwq/
wyYo86ZYQH8oA/9ttRFYnnKnW9jNiTId4meaC5GuSMNKTANwku2TP14jdwKBgQCs
SQ3hmSPkxcSxVoEU5uSy7a/EXg18wu3uBT4rMr5oeTLJ5d5idPp/EdcKne/Kjxrp
a5i5gvc20hGRyRc5xWhOe/F9rk4pvJ7bZXXno3iRxP5I8jVqrtmIbi22VkUdQ3Om
62fjxiYAdMCE/pu/G3GKT9x5J9XP9IS4KwM7/9Ja6QKBgQCY0A18tyQP1PkkQBtu
c64EcF4UmMwsN/gR2PRyGMxp6ywzkf5lDlrtyOAlGL+XSy8RV6+d6iP9mwC0Fe8f
wGm8LiL37RMyIpdGq+B+aL4hncxXehQn1P0GPyvQXAl2djHnc20y2mJQ3wEwT5BY
A88sGFxrkRJ9VbFnDIvDwj0EWw==
-----END PRIVATE KEY-----
"""
    static let input = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJrYXQifQ"
    static let expected = "vFgOFr3fAJxu8Lb0LHp5VTtCHkqKTwMP7FBAnIXOjfGQR2I-YYoP0iJSp_SzmZERhBRyqpDiMEAk44wzBAxjRrsiST3YOHsVFY9eZRqfJMRBvvzr5jzi8mdhQ8JDh8AIS-3mAXR_9zNoUThWXSpuk6bQL9htvP_jWB8QGNdVIsddhHfY7rRm5n-KJzswRmyqyqwVMHy4JArEf0P59kOVT6wFUl-JJBqjaNlvh01-VJQSXZwNJXcU9uFydHpo9QQUjRjFtclLW7S6QmfH7q4pjzjHoT7mK_fADglfGQr6WFPpahFShcbdB5RtbHQ3jXPnoKfwPtUfz96TjZyGSfr8Xw"

    /// The token `SigningKey.sign` assembles (a header encoded once per key, the payload and signature encoded into
    /// the token's buffer) is byte for byte the one built part by part: same header, same payload, the known answer's
    /// signature over that input.
    func testSignedTokenEqualsTheTokenBuiltPartByPart() throws {
        let key = try SigningKey(key: RSAKey.privateKey(pem: Array(Self.pem.utf8)), createdAt: 1_700_000_000)
        for payload: JSONObject in [["sub": "kat"], ["sub": "u", "n": .int(7), "name": "é\"x"], [:]] {
            let token = try key.sign(payload: payload)
            var input = JWTSerializer.signingInput(header: ["alg": "RS256", "kid": .string(key.kid), "typ": "JWT"], payload: payload)
            let signature = try key.key.signSHA256(input)
            input.append(UInt8(ascii: "."))
            input.append(contentsOf: Array(Base64URL.encode(signature).utf8))
            XCTAssertEqual(token, String(decoding: input, as: UTF8.self))
            let decoded = try XCTUnwrap(DecodedJWT(token))
            XCTAssertTrue(key.verify(decoded))
            XCTAssertEqual(decoded.payload, payload)
            XCTAssertEqual(decoded.keyID, key.kid)
        }
    }

    func testKnownAnswerSignature() throws {
        let key = try RSAKey.privateKey(pem: Array(Self.pem.utf8))
        let sig = try key.signSHA256(Array(Self.input.utf8))
        XCTAssertEqual(Base64URL.encode(sig), Self.expected)
        XCTAssertTrue(key.verifySHA256(signature: sig, message: Array(Self.input.utf8)))
        var bad = sig
        bad[10] ^= 1
        XCTAssertFalse(key.verifySHA256(signature: bad, message: Array(Self.input.utf8)))
        XCTAssertFalse(key.verifySHA256(signature: sig, message: Array((Self.input + "x").utf8)))
    }

    /// Threads signing with one key at once each use their own copy of it: every signature is the known answer
    /// (PKCS#1 v1.5 is deterministic), whichever thread made it, and contexts are reused, not leaked.
    func testConcurrentSignaturesOnManyThreadsAreAllTheKnownAnswer() throws {
        let key = try RSAKey.privateKey(pem: Array(Self.pem.utf8))
        let wrong = Atomic<Int>(0)
        let threads = (0..<6).map { _ in
            NativeThread.start {
                for _ in 0..<20 {
                    let sig = try? key.signSHA256(Array(Self.input.utf8))
                    if sig.map(Base64URL.encode) != Self.expected { wrong.wrappingAdd(1, ordering: .relaxed) }
                }
            }
        }
        for t in threads { t.join() }
        XCTAssertEqual(wrong.load(ordering: .relaxed), 0)
    }

    func testPublicKeyFromJWKAndCertificateVerify() throws {
        let key = try RSAKey.privateKey(pem: Array(Self.pem.utf8))
        let signing = try SigningKey(key: key, createdAt: 1_800_000_000)
        XCTAssertEqual(signing.kid.count, 40)
        XCTAssertEqual(signing.jwk["e"], "AQAB")
        let token = try signing.sign(payload: ["sub": "u1", "iat": 1])
        let jwt = try XCTUnwrap(DecodedJWT(token))
        XCTAssertEqual(jwt.algorithm, "RS256")
        XCTAssertEqual(jwt.keyID, signing.kid)
        XCTAssertTrue(signing.verify(jwt))

        let n = try XCTUnwrap(Base64URL.decode(XCTUnwrap(signing.jwk["n"]?.stringValue)))
        let e = try XCTUnwrap(Base64URL.decode("AQAB"))
        XCTAssertEqual(n.count, 256)
        let fromJWK = try RSAKey.publicKey(modulus: n, exponent: e)
        XCTAssertTrue(fromJWK.verifySHA256(signature: jwt.signature, message: jwt.signingInput))

        let fromCert = try X509Certificate.publicKey(certificatePEM: Array(signing.certificatePEM.utf8))
        XCTAssertTrue(fromCert.verifySHA256(signature: jwt.signature, message: jwt.signingInput))
        XCTAssertTrue(signing.certificatePEM.hasPrefix("-----BEGIN CERTIFICATE-----"))
        XCTAssertEqual(try fromCert.publicKeyDER(), try key.publicKeyDER())
    }

    func testGeneratedKeyRoundTripsThroughPEM() throws {
        let key = try RSAKey.generate(bits: 2048)
        let again = try RSAKey.privateKey(pem: Array(try key.privateKeyPEM().utf8))
        XCTAssertEqual(try again.modulus(), try key.modulus())
        let pub = try RSAKey.publicKey(pem: Array(try key.publicKeyPEM().utf8))
        let sig = try key.signSHA256([1, 2, 3])
        XCTAssertTrue(pub.verifySHA256(signature: sig, message: [1, 2, 3]))
        XCTAssertThrowsError(try pub.signSHA256([1]))
    }

    func testRejectsBadKeysAndTokens() {
        XCTAssertThrowsError(try RSAKey.privateKey(pem: Array("-----BEGIN PRIVATE KEY-----\nnope\n-----END PRIVATE KEY-----\n".utf8)))
        XCTAssertThrowsError(try RSAKey.privateKey(pem: []))
        XCTAssertNil(DecodedJWT("a.b"))
        XCTAssertNil(DecodedJWT("!!.??.**"))
        XCTAssertNil(DecodedJWT("e30.W10."))  // payload is an array
        XCTAssertNotNil(DecodedJWT("e30.e30."))
    }

    func testUnsignedTokenShape() throws {
        let t = JWTSerializer.unsigned(payload: ["sub": "x"])
        XCTAssertTrue(t.hasSuffix("."))
        let jwt = try XCTUnwrap(DecodedJWT(t))
        XCTAssertEqual(jwt.algorithm, "none")
        XCTAssertEqual(jwt.header["typ"], "JWT")
        XCTAssertTrue(jwt.signature.isEmpty)
    }
}
