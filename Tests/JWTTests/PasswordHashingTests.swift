import EmulatorSupport
@testable import JWT
import XCTest

/// Known answers for the primitives of imported password hashes: published test vectors (RFC 1321/3174/6234 digests,
/// RFC 2202/4231 HMAC, RFC 6070 and RFC 7914 PBKDF2, RFC 7914 scrypt, NIST SP 800-38A AES-256-CTR, Firebase's scrypt
/// README and its admin SDKs' integration tests) and bcrypt's (pyca/bcrypt's and crypt_blowfish's vectors).
final class PasswordHashingTests: XCTestCase {
    func hex(_ s: String) -> [UInt8] {
        var out: [UInt8] = []
        var i = s.startIndex
        while i < s.endIndex {
            let j = s.index(i, offsetBy: 2)
            out.append(UInt8(s[i..<j], radix: 16)!)
            i = j
        }
        return out
    }

    let abc = Array("abc".utf8)

    func testDigests() {
        XCTAssertEqual(Digest.md5.hash(abc), hex("900150983cd24fb0d6963f7d28e17f72"))
        XCTAssertEqual(Digest.sha1.hash(abc), hex("a9993e364706816aba3e25717850c26c9cd0d89d"))
        XCTAssertEqual(Digest.sha256.hash(abc), hex("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"))
        XCTAssertEqual(Digest.sha512.hash(abc), hex("ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a"
                                                    + "2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f"))
        XCTAssertEqual(sha256(abc), Digest.sha256.hash(abc))
        for d in Digest.allCases { XCTAssertEqual(d.hash([]).count, d.size) }
    }

    func testHMAC() {
        let key = Array("Jefe".utf8), data = Array("what do ya want for nothing?".utf8)
        XCTAssertEqual(Digest.md5.hmac(key: key, data), hex("750c783e6ab0b503eaa86e310a5db738"))
        XCTAssertEqual(Digest.sha1.hmac(key: key, data), hex("effcdf6ae5eb2fa2d27416d5f184df9c259a7c79"))
        XCTAssertEqual(Digest.sha256.hmac(key: key, data), hex("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"))
        XCTAssertEqual(Digest.sha512.hmac(key: key, data), hex("164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea250554"
                                                               + "9758bf75c05a994a6d034f65f8f0e6fdcaeab1a34d4a6b4b636e070a38bce737"))
        XCTAssertEqual(Digest.sha256.hmac(key: [], []).count, 32)  // empty key and message: no crash, a full MAC
    }

    func testPBKDF2() {
        let p = Array("password".utf8), s = Array("salt".utf8)
        XCTAssertEqual(pbkdf2(.sha1, password: p, salt: s, iterations: 1, length: 20), hex("0c60c80f961f0e71f3a9b524af6012062fe037a6"))
        XCTAssertEqual(pbkdf2(.sha1, password: p, salt: s, iterations: 4096, length: 20), hex("4b007901b765489abead49d926f721d065a429c1"))
        XCTAssertEqual(pbkdf2(.sha256, password: Array("passwd".utf8), salt: s, iterations: 1, length: 64),
                       hex("55ac046e56e3089fec1691c22544b605f94185216dde0465e68b9d57c20dacbc"
                           + "49ca9cccf179b645991664b39d77ef317c71b845b1e30bd509112041d3a19783"))
        XCTAssertEqual(pbkdf2SHA256(password: p, salt: s, iterations: 7), pbkdf2(.sha256, password: p, salt: s, iterations: 7, length: 32))
    }

    func testScrypt() {
        let big: UInt64 = 64 << 20
        XCTAssertEqual(scrypt(password: [], salt: [], n: 16, r: 1, p: 1, length: 64, maxMemory: big),
                       hex("77d6576238657b203b19ca42c18a0497f16b4844e3074ae8dfdffa3fede21442"
                           + "fcd0069ded0948f8326a753a0fc81f17e8d3e0fb2e0d3628cf35e20c38d18906"))
        XCTAssertEqual(scrypt(password: Array("password".utf8), salt: Array("NaCl".utf8), n: 1024, r: 8, p: 16, length: 64, maxMemory: big),
                       hex("fdbabe1c9d3472007856e7190d01e9fe7c6ad7cbc8237830e77376634b373162"
                           + "2eaf30d92e22a3886ff109279d9830dac727afb94a83ee6d8360cbdfa2cc0640"))
        // Refused, not attempted: N not a power of two, a zero parameter, more memory than allowed (128·r·N ≈ 1 MiB).
        XCTAssertNil(scrypt(password: [1], salt: [2], n: 1000, r: 8, p: 1, length: 32, maxMemory: big))
        XCTAssertNil(scrypt(password: [1], salt: [2], n: 1024, r: 0, p: 1, length: 32, maxMemory: big))
        XCTAssertNil(scrypt(password: [1], salt: [2], n: 1024, r: 8, p: 1, length: 0, maxMemory: big))
        XCTAssertNil(scrypt(password: [1], salt: [2], n: 1024, r: 8, p: 1, length: 32, maxMemory: 1 << 20))
        XCTAssertNotNil(scrypt(password: [1], salt: [2], n: 1024, r: 8, p: 1, length: 32, maxMemory: 2 << 20))
    }

    func testAES256CTR() {
        let key = hex("603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4")
        let iv = hex("f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff")
        let plain = hex("6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51")
        let cipher = hex("601ec313775789a5b7a7f504bbf3d228f443e3ca4d62b59aca84e990cacaf5c5")
        XCTAssertEqual(aes256CTR(key: key, iv: iv, plain), cipher)
        XCTAssertEqual(aes256CTR(key: key, iv: iv, cipher), plain)
        XCTAssertEqual(aes256CTR(key: key, []), [])
    }

    /// Firebase's scrypt: the sample project parameters of github.com/firebase/scrypt's README, with the README's
    /// exported user and the one firebase-admin's integration tests import into a real project.
    func testFirebaseScrypt() throws {
        let key = try XCTUnwrap(Base64URL.decode("jxspr8Ki0RYycVU8zykbdLGjFQ3McFUH0uiiTvC8pVMXAn210wjLNmdZJzxUECKbm0QsEmYUSDzZvpjeJ9WmXA=="))
        let separator = try XCTUnwrap(Base64URL.decode("Bw=="))
        func hash(_ password: String, _ salt: [UInt8]) -> String? {
            firebaseScrypt(password: Array(password.utf8), salt: salt, saltSeparator: separator, signerKey: key, rounds: 8, memoryCost: 14,
                           maxMemory: 32 << 20).map(Base64URL.encodeStandard)
        }
        let readmeSalt = try XCTUnwrap(Base64URL.decode("42xEC+ixf3L2lw=="))
        XCTAssertEqual(hash("user1password", readmeSalt), "lSrfV15cpx95/sZS2W9c9Kp6i/LVgQNDNC/qzrCnh1SAyZvqmZqAjTdn3aoItz+VHjoZilo78198JAdRuid5lQ==")
        XCTAssertEqual(hash("password", Array("NaCl".utf8)), "V358E8LdWJXAO7muq0CufVpEOXaj8aFiC7T/rcaGieN04q/ZPJ08WhJEHGjj9lz/2TT+/86N5VjVoc5DdBhBiw==")
        XCTAssertNotEqual(hash("user1passwore", readmeSalt), hash("user1password", readmeSalt))
        XCTAssertNil(firebaseScrypt(password: [1], salt: [], saltSeparator: [], signerKey: key, rounds: 8, memoryCost: 14, maxMemory: 8 << 20))
    }

    // MARK: bcrypt

    func testBlowfishTablesAreThePiDigits() {
        // P1, P18, S1[0] and S4[255] as Blowfish's specification prints them.
        XCTAssertEqual(BCrypt.initial.count, 18 + 4 * 256)
        XCTAssertEqual(BCrypt.initial[0], 0x243F_6A88)
        XCTAssertEqual(BCrypt.initial[17], 0x8979_FB1B)
        XCTAssertEqual(BCrypt.initial[18], 0xD131_0BA6)
        XCTAssertEqual(BCrypt.initial[1041], 0x3AC3_72E6)
    }

    /// pyca/bcrypt's test vectors (OpenBSD's, crypt_blowfish's `U*U` family, a non-ASCII byte, a 72-byte cut).
    static let vectors: [(password: [UInt8], hash: String)] = [
        (Array("Kk4DQuMMfZL9o".utf8), "$2b$04$cVWp4XaNU8a4v1uMRum2SO026BWLIoQMD/TXg5uZV.0P.uO8m3YEm"),
        (Array("9IeRXmnGxMYbs".utf8), "$2b$04$pQ7gRO7e6wx/936oXhNjrOUNOHL1D0h1N2IDbJZYs.1ppzSof6SPy"),
        (Array("xVQVbwa1S0M8r".utf8), "$2b$04$SQe9knOzepOVKoYXo9xTteNYr6MBwVz4tpriJVe3PNgYufGIsgKcW"),
        (Array("Tg4daC27epFBE".utf8), "$2b$04$ahiTdwRXpUG2JLRcIznxc.s1.ydaPGD372bsGs8NqyYjLY1inG5n2"),
        (Array("J8eHUDuxBB520".utf8), "$2b$04$VvlCUKbTMjaxaYJ.k5juoecpG/7IzcH1AkmqKi.lIZMVIOLClWAk."),
        (Array("U*U".utf8), "$2a$05$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW"),
        (Array("U*U*".utf8), "$2a$05$CCCCCCCCCCCCCCCCCCCCC.VGOzA784oUp/Z0DY336zx7pLYAy0lwK"),
        (Array("U*U*U".utf8), "$2a$05$XXXXXXXXXXXXXXXXXXXXXOAcXxm9kjPGEMsLznoKqmqw7tc8WCx4a"),
        ([], "$2a$05$CCCCCCCCCCCCCCCCCCCCC.7uG0VCzI2bS7j6ymqJi9CdcdxiRTWNy"),
        ([0xA3], "$2a$05$/OK.fbVrR/bpIqNJ5ianF.Sa7shbm4.OzKpvFnX1pQLmQW96oUlCq"),
        ([0xFF, 0xFF, 0xA3], "$2y$05$/OK.fbVrR/bpIqNJ5ianF.CE5elHaaO4EbggVDjb8P19RukzXSM3e"),
        (Array("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789chars after 72 are ignored".utf8),
         "$2a$05$abcdefghijklmnopqrstuu5s2v8.iXieOjg/.AySBTTZIIVFJeBui"),
    ]

    func testBCryptKnownAnswers() throws {
        for (password, hash) in Self.vectors {
            let parsed = try XCTUnwrap(BCrypt.parse(hash), hash)
            XCTAssertTrue(BCrypt.verify(password: password, parsed), hash)
            XCTAssertFalse(BCrypt.verify(password: [0x21] + password, parsed), hash)
            XCTAssertEqual(BCrypt.verify(password: password + [0x21], parsed), password.count >= 72, hash)  // bytes past 72 are ignored
            XCTAssertEqual(BCrypt.hash(password: password, salt: parsed.salt, cost: parsed.cost, version: parsed.version), hash)
        }
    }

    func testBCryptParseIsStrict() throws {
        let good = "$2b$04$cVWp4XaNU8a4v1uMRum2SO026BWLIoQMD/TXg5uZV.0P.uO8m3YEm"
        let p = try XCTUnwrap(BCrypt.parse(good))
        XCTAssertEqual(p.version, "2b")
        XCTAssertEqual(p.cost, 4)
        XCTAssertEqual(p.salt.count, 16)
        XCTAssertEqual(p.hash.count, 23)
        for bad in ["$2x$04$cVWp4XaNU8a4v1uMRum2SO026BWLIoQMD/TXg5uZV.0P.uO8m3YEm",  // crypt_blowfish's buggy variant
                    "$2b$03$cVWp4XaNU8a4v1uMRum2SO026BWLIoQMD/TXg5uZV.0P.uO8m3YEm",  // cost below 4
                    "$2b$32$cVWp4XaNU8a4v1uMRum2SO026BWLIoQMD/TXg5uZV.0P.uO8m3YEm",  // cost above 31
                    "$2b$4$cVWp4XaNU8a4v1uMRum2SO026BWLIoQMD/TXg5uZV.0P.uO8m3YEmm",
                    "$2b$04$?Siw3Nv3Q/gTOIPetAyPr.GNj3aO0lb1E5E9UumYGKjP9BYqlNWJe",  // outside the alphabet
                    String(good.dropLast()), good + "x", "", "$2b$04$"] {
            XCTAssertNil(BCrypt.parse(bad), bad)
        }
    }
}
