import EmulatorSupport
import HTTPServer
@testable import PhoneAuthAPI
import PhoneAuthCore
import PhoneAuthTestSupport
import XCTest

/// Production's password hashes (issue 29.2): each algorithm `batchCreate` accepts verifies the hashes other
/// implementations made, production's parameter errors fail the request, this emulator's cost limits fail the user,
/// and a successful sign-in replaces the imported hash by ours.
final class ImportedHashTests: XCTestCase, AppCalling {
    var app: PhoneAuthApp!
    override func setUp() { app = makeTestApp(seed: 29, signing: .none) }

    let owner = [("Authorization", "Bearer owner")]
    func admin(_ op: String, _ body: String, project: String = "demo-phone") -> (Int, JSON) {
        call("POST", "/identitytoolkit.googleapis.com/v1/projects/\(project)/\(op)", body, headers: owner)
    }
    func signIn(_ email: String, _ password: String, key: String = "fake-api-key") -> (Int, JSON) {
        itk("signInWithPassword", #"{"email":"\#(email)","password":"\#(password)","returnSecureToken":true}"#)
    }
    func lookup(_ uid: String) -> JSON? { admin("accounts:lookup", #"{"localId":["\#(uid)"]}"#).1["users"]?.arrayValue?.first }

    // MARK: known answers

    static let password = "pässword123"
    /// "Na\0Cl-salt" and "emulator-test-signer-key-0123456789", base64.
    static let salt = "TmEAQ2wtc2FsdA=="
    static let key = "ZW11bGF0b3ItdGVzdC1zaWduZXIta2V5LTAxMjM0NTY3ODk="

    /// Hashes made by independent implementations (Python's hashlib and hmac, pyca/cryptography's AES-CTR for
    /// Firebase's scrypt, pyca/bcrypt) of `password` and `salt`, with the formulas ImportedHashes.swift documents.
    static let vectors: [(params: String, hash: String)] = [
        (#""hashAlgorithm":"HMAC_MD5","signerKey":"\#(key)""#, "7+5i/Ql4ZSbmh2pT9xZ+Sg=="),
        (#""hashAlgorithm":"HMAC_MD5","signerKey":"\#(key)","passwordHashOrder":"SALT_AND_PASSWORD""#, "KfGb+Qgw5fcBsBZvBxtw+Q=="),
        (#""hashAlgorithm":"HMAC_SHA1","signerKey":"\#(key)""#, "12zFsLz7Q1hFekceP1Wu7f+YZx4="),
        (#""hashAlgorithm":"HMAC_SHA1","signerKey":"\#(key)","passwordHashOrder":"SALT_AND_PASSWORD""#, "o07t0JliF1NF4XE8GlXj9ujRDtc="),
        (#""hashAlgorithm":"HMAC_SHA256","signerKey":"\#(key)""#, "gfq9JtwCX/cpdUjvr+4TAJaJFzBWAgt8BMTH/LalJDY="),
        (#""hashAlgorithm":"HMAC_SHA256","signerKey":"\#(key)","passwordHashOrder":"SALT_AND_PASSWORD""#,
         "PcM1kaaGKuzCXntInknBzUOQKtK/7vct/Y6Wkc/3v1Q="),
        (#""hashAlgorithm":"HMAC_SHA512","signerKey":"\#(key)""#,
         "m4nDHTX+HBh+p20Ras55CpqHWd7nGk/Tx1Fl+KnRVx9I+FGyhpL4yo3emValL/iernMtr6z+oKW7GETnzHKJ/Q=="),
        (#""hashAlgorithm":"HMAC_SHA512","signerKey":"\#(key)","passwordHashOrder":"SALT_AND_PASSWORD""#,
         "6L9L33W5Ri/d3lmxKe/2yx1YuNsotLwcREchIlIdzD0JaZY78DAf50+HS7Cg+VICpRgajy8wHZP/VL+ZBj3ZWA=="),
        (#""hashAlgorithm":"MD5","rounds":0"#, "YWMyMmU4OWYxOTczMGFmYjhiNGUwNmY4NzllMmRmN2Y="),
        (#""hashAlgorithm":"MD5","rounds":1"#, "NDQ0OTI1YzdlODA4MmMzNmM3Mjk4NWFkYWVhYmViMjk="),
        (#""hashAlgorithm":"MD5","rounds":"3","passwordHashOrder":"PASSWORD_AND_SALT""#, "NzdhNmM2M2Y3YWQ3MWY3NWZjNTI4NzAzYTkyY2RmNTA="),
        (#""hashAlgorithm":"SHA1","rounds":1"#, "vmfTCPfSgF+3ia8BLE3AFxGGT+Y="),
        (#""hashAlgorithm":"SHA1","rounds":3"#, "NCOqkkhvf1AwFwhANQnu4j25XhU="),
        (#""hashAlgorithm":"SHA1","rounds":2,"passwordHashOrder":"PASSWORD_AND_SALT""#, "l5DV4hjbm3oiTg6oRVVuSYQBq9g="),
        (#""hashAlgorithm":"SHA256","rounds":1"#, "J2agEgI0fHkK83XjHKhuEdt6rqDmhJsJvVnNRAeCezw="),
        (#""hashAlgorithm":"SHA256","rounds":3"#, "ZgpCEBsIhcDEuUJv88hgPzh5b2KkPmbH7W5rj6+PjkI="),
        (#""hashAlgorithm":"SHA256","rounds":2,"passwordHashOrder":"PASSWORD_AND_SALT""#, "3OAQwDhsypVSgTQI5g5JcsL6AvorNP9s+pEURZqMBbA="),
        (#""hashAlgorithm":"SHA512","rounds":1"#,
         "M86F6P/LxFNajZUdZ+ICv/9SemUEV4Uoa1vGHts49MAht+tabnYovmCk0POO2+sJv/a108/ZdY4tnTzBEPVVsA=="),
        (#""hashAlgorithm":"SHA512","rounds":3"#,
         "5jPaFoSAznldVHqvnJM5zXmfOoNXU1p2uhT/Lqvdjw+2KauNN0ur58Fi2dsaFxeQqFnOQ6gLnzUdTVnzwEddeg=="),
        (#""hashAlgorithm":"SHA512","rounds":2,"passwordHashOrder":"PASSWORD_AND_SALT""#,
         "g10buPkE+KT0jgAjZ9nx6Pa9sr5hphNa3jLnZHJCOiTn9RBXuyW5oAlhlQO1Ll7Y6wCd0re5CIYSBys+2MpvAg=="),
        (#""hashAlgorithm":"PBKDF_SHA1","rounds":1000"#, "gRV8nqjU3EEj5Ad7wdVVUth3NWY="),
        (#""hashAlgorithm":"PBKDF_SHA1","rounds":1000"#,
         "gRV8nqjU3EEj5Ad7wdVVUth3NWYeQWLAJWIvb/cRDs080bNYzjCzuPbYEaTCzX0XsFXXxYo++wF7qKt3by/pMw=="),
        (#""hashAlgorithm":"PBKDF2_SHA256","rounds":1000"#, "CBC8/eV3NVoyQlfZcKHe02owWzklUNDuTMbGzJEDMbo="),
        (#""hashAlgorithm":"SCRYPT","signerKey":"\#(key)","saltSeparator":"Bw==","rounds":8,"memoryCost":10"#,
         "w5bXuS18czD9oDWA3swQde3qPFKA3PIGnjJ+eTkulcUNNPA="),
        (#""hashAlgorithm":"STANDARD_SCRYPT","cpuMemCost":1024,"blockSize":8,"parallelization":1,"dkLen":64"#,
         "Erlt6mNghSp1iLiOthpmOp+98/GRwOQ4EVLKl41jRjDVsq4rjgvpTDkU3NBVAtVAjiO68D71o2EgNVS8XCmmag=="),
        (#""hashAlgorithm":"BCRYPT""#, "JDJiJDA1JGFiY2RlZmdoaWprbG1ub3BxcnN0dWUxdDFPalRNMXliYzFjQkk4WXY1WnExZG1QNTZTUjd1"),
    ]

    func algorithm(_ params: String) throws -> ImportedHash {
        guard case .object(let o) = try JSONParser.parse(Array("{\(params)}".utf8)) else { throw AuthError(.invalidArgument) }
        return try XCTUnwrap(try ImportedHash.parse(o))
    }

    func testEveryAlgorithmVerifiesIndependentHashes() throws {
        let salt = try XCTUnwrap(Base64URL.decode(Self.salt))
        var seen = Set<String>()
        for (params, hash) in Self.vectors {
            let h = try algorithm(params)
            seen.insert(h.algorithm.rawValue)
            let bytes = try XCTUnwrap(Base64URL.decode(hash))
            XCTAssertNil(h.refusal(hash: bytes), params)
            XCTAssertTrue(h.verify(Self.password, hash: bytes, salt: salt), params)
            XCTAssertFalse(h.verify("pässword124", hash: bytes, salt: salt), params)
            if h.algorithm != .bcrypt { XCTAssertFalse(h.verify(Self.password, hash: bytes, salt: salt + [0]), params) }  // bcrypt's salt is in its hash
            // The stored form parses back to the same parameters (MD5's order, which does not apply, is dropped).
            let stored = try XCTUnwrap(try ImportedHash.parse(try XCTUnwrap(h.json.objectValue)))
            XCTAssertEqual(stored.json, h.json, params)
            XCTAssertTrue(stored.verify(Self.password, hash: bytes, salt: salt), params)
        }
        XCTAssertEqual(seen, Set(ImportedHash.Algorithm.allCases.map(\.rawValue)).subtracting(["ARGON2"]))
    }

    /// Hashes production itself accepts: firebase-admin's integration tests (run against real projects: the sample
    /// SCRYPT project of github.com/firebase/scrypt, HMAC_SHA256 password-first, SHA256 salt-first, MD5 rounds 0 as
    /// hex, 64-byte PBKDF2, STANDARD_SCRYPT N=1024 r=8 p=16), and MD5/SHA1 hashes a production recording
    /// (github.com/t-k/fireemu, conformance/src/auth-account/hash-vectors.json) signed in with.
    func testHashesProductionAccepts() throws {
        let nacl = Array("NaCl".utf8)
        let admin: [(String, String)] = [
            (#""hashAlgorithm":"SCRYPT","signerKey":"jxspr8Ki0RYycVU8zykbdLGjFQ3McFUH0uiiTvC8pVMXAn210wjLNmdZJzxUECKbm0QsEmYUSDzZvpjeJ9WmXA==","saltSeparator":"Bw==","rounds":8,"memoryCost":14"#,
             "V358E8LdWJXAO7muq0CufVpEOXaj8aFiC7T/rcaGieN04q/ZPJ08WhJEHGjj9lz/2TT+/86N5VjVoc5DdBhBiw=="),
            (#""hashAlgorithm":"HMAC_SHA256","signerKey":"c2VjcmV0""#, "C5WKh+Qa5RkMlq+h5DX5XKsBOsQt/DEKEaUBAMQqrlI="),
            (#""hashAlgorithm":"SHA256","rounds":1"#, "sgq3SqJUn34ToOiGy0RxzC5w/NLOgHXA7mSDq7phMvM="),
            (#""hashAlgorithm":"MD5","rounds":0"#, "NjJkMTlmN2U3ZGRjYjU5NDY3Mjg3NzZkMjVlNDEwZWQ="),
            (#""hashAlgorithm":"PBKDF2_SHA256","rounds":100000"#,
             "5VnqZoKMOie1mhCQGRw7u1FV5Kv8Yb8uxEArtVAl0vSlwAQqXe8VxejCRe5enxUyNN4OWQ60PGRIVPZzEvcQtw=="),
            (#""hashAlgorithm":"STANDARD_SCRYPT","cpuMemCost":1024,"blockSize":8,"parallelization":16,"dkLen":64"#,
             "/bq+HJ00cgB4VucZDQHp/nxq18vII3gw53N2Y0s3MWIurzDZLiKjiG/xCSedmDDaxyevuUqD7m2DYMvfoswGQA=="),
        ]
        for (params, hash) in admin {
            XCTAssertTrue(try algorithm(params).verify("password", hash: try XCTUnwrap(Base64URL.decode(hash)), salt: nacl), params)
        }
        let recorded = Array("salt-value-01".utf8)
        for (params, hash) in [(#""hashAlgorithm":"MD5","rounds":1"#, "OTUzMTNiMjYzNWVhZjNlNjc4NTVjY2FhMjg1MGFmNTU="),
                               (#""hashAlgorithm":"MD5","rounds":2"#, "YjU2MzU3NjUwMzg2OTc1MDk4ODI3ZTllNzJkZjJkMTM="),
                               (#""hashAlgorithm":"SHA1","rounds":2"#, "+YsnGyLcSSqd7nPHgOEKTemsRhk=")] {
            XCTAssertTrue(try algorithm(params).verify("password123", hash: try XCTUnwrap(Base64URL.decode(hash)), salt: recorded), params)
        }
        // SHA rounds 0 is accepted and never verifies ("round = 0 only works for MD5", firebase-tools#1701).
        XCTAssertFalse(try algorithm(#""hashAlgorithm":"SHA256","rounds":0"#).verify("password", hash: Base64URL.decode("sgq3SqJUn34ToOiGy0RxzC5w/NLOgHXA7mSDq7phMvM=")!, salt: nacl))
    }

    // MARK: through batchCreate and signInWithPassword

    func importUsers(_ params: String, _ users: String, project: String = "demo-phone") -> (Int, JSON) {
        admin("accounts:batchCreate", #"{\#(params)\#(params.isEmpty ? "" : ",")"users":[\#(users)]}"#, project: project)
    }

    func testImportedUsersSignInAndTheirHashIsUpgraded() throws {
        for (i, (params, hash)) in Self.vectors.enumerated() {
            let r = importUsers(params, #"{"localId":"u\#(i)","email":"u\#(i)@example.com","passwordHash":"\#(hash)","salt":"\#(Self.salt)","passwordUpdatedAt":1700000000000}"#)
            XCTAssertEqual(r.0, 200, "\(r.1)")
            XCTAssertNil(r.1["error"], "\(params): \(r.1)")
            let before = try XCTUnwrap(lookup("u\(i)"))
            XCTAssertEqual(before["passwordHash"]?.stringValue, hash)
            XCTAssertEqual(before["passwordHashAlgorithm"]?["hashAlgorithm"], try algorithm(params).json["hashAlgorithm"])
            XCTAssertEqual(message(signIn("u\(i)@example.com", "pässword124")), "INVALID_LOGIN_CREDENTIALS", params)
            let ok = signIn("u\(i)@example.com", Self.password)
            XCTAssertEqual(ok.0, 200, "\(params): \(ok.1)")
            XCTAssertEqual(ok.1["localId"], .string("u\(i)"))
            // Rehashed in the sign-in: our format now, same password-set time, and it keeps signing in.
            let after = try XCTUnwrap(lookup("u\(i)"))
            XCTAssertNil(after["passwordHashAlgorithm"], params)
            XCTAssertNotEqual(after["passwordHash"], before["passwordHash"], params)
            XCTAssertEqual(after["passwordUpdatedAt"], before["passwordUpdatedAt"])
            XCTAssertEqual(after["validSince"], before["validSince"])
            XCTAssertEqual(signIn("u\(i)@example.com", Self.password).0, 200)
            XCTAssertEqual(message(signIn("u\(i)@example.com", "pässword124")), "INVALID_LOGIN_CREDENTIALS")
        }
    }

    func testUpgradeNeedsTheVerifiedHashAndAlgorithm() {
        var u = UserRecord(localId: "x", createdAt: 1)
        let md5: JSON = ["hashAlgorithm": "MD5", "rounds": 0]
        u.setPassword(hash: "h", salt: "s", algorithm: md5)
        XCTAssertFalse(u.upgradePassword(PasswordUpgrade(verifiedHash: "other", verifiedAlgorithm: md5, hash: "ours", salt: "s2")))
        XCTAssertFalse(u.upgradePassword(PasswordUpgrade(verifiedHash: "h", verifiedAlgorithm: ["hashAlgorithm": "MD5", "rounds": 1], hash: "ours", salt: "s2")))
        XCTAssertEqual(u.passwordHash, "h")
        XCTAssertTrue(u.upgradePassword(PasswordUpgrade(verifiedHash: "h", verifiedAlgorithm: md5, hash: "ours", salt: "s2")))
        XCTAssertEqual(u.passwordHash, "ours")
        XCTAssertEqual(u.salt, "s2")
        XCTAssertNil(u.passwordHashAlgorithm)
    }

    /// Production's ranges: the request fails with production's code, nothing is imported.
    func testParametersOutsideProductionsRangesFailTheRequest() {
        let user = #"{"localId":"bad","email":"bad@example.com","passwordHash":"YWJj","salt":"c2FsdA=="}"#
        let cases: [(String, String)] = [
            (#""hashAlgorithm":"NOT_AN_ALGORITHM""#, "INVALID_HASH_ALGORITHM"),
            (#""hashAlgorithm":"sha256","rounds":1"#, "INVALID_HASH_ALGORITHM"),
            (#""hashAlgorithm":"SHA256","rounds":8193"#, "INVALID_HASH_ROUNDS"),
            (#""hashAlgorithm":"SHA1","rounds":-1"#, "INVALID_HASH_ROUNDS"),
            (#""hashAlgorithm":"MD5","rounds":8193"#, "INVALID_HASH_ROUNDS"),
            (#""hashAlgorithm":"PBKDF_SHA1","rounds":0"#, "INVALID_HASH_ROUNDS"),
            (#""hashAlgorithm":"PBKDF2_SHA256""#, "INVALID_HASH_ROUNDS"),
            (#""hashAlgorithm":"PBKDF2_SHA256","rounds":120001"#, "INVALID_HASH_ROUNDS"),
            (#""hashAlgorithm":"HMAC_SHA256""#, "EMPTY_HASH_KEY"),
            (#""hashAlgorithm":"HMAC_MD5","signerKey":"""#, "EMPTY_HASH_KEY"),
            (#""hashAlgorithm":"SCRYPT","rounds":8,"memoryCost":14"#, "EMPTY_HASH_KEY"),
            (#""hashAlgorithm":"SCRYPT","signerKey":"a2V5","rounds":9,"memoryCost":14"#, "INVALID_HASH_ROUNDS"),
            (#""hashAlgorithm":"SCRYPT","signerKey":"a2V5","rounds":0,"memoryCost":14"#, "INVALID_HASH_ROUNDS"),
            (#""hashAlgorithm":"SCRYPT","signerKey":"a2V5","rounds":8,"memoryCost":15"#, "INVALID_HASH_MEMORY_COST"),
            (#""hashAlgorithm":"SCRYPT","signerKey":"a2V5","rounds":8"#, "INVALID_HASH_MEMORY_COST"),
            (#""hashAlgorithm":"STANDARD_SCRYPT","blockSize":8,"parallelization":1,"dkLen":64"#, "INVALID_HASH_MEMORY_COST"),
            (#""hashAlgorithm":"STANDARD_SCRYPT","cpuMemCost":1000,"blockSize":8,"parallelization":1,"dkLen":64"#, "INVALID_HASH_MEMORY_COST"),
            (#""hashAlgorithm":"STANDARD_SCRYPT","cpuMemCost":1024,"parallelization":1,"dkLen":64"#, "INVALID_HASH_BLOCK_SIZE"),
            (#""hashAlgorithm":"STANDARD_SCRYPT","cpuMemCost":1024,"blockSize":8,"dkLen":64"#, "INVALID_HASH_PARALLELIZATION"),
            (#""hashAlgorithm":"STANDARD_SCRYPT","cpuMemCost":1024,"blockSize":8,"parallelization":1,"dkLen":0"#, "INVALID_HASH_DERIVED_KEY_LENGTH"),
            (#""hashAlgorithm":"SHA256","rounds":"many""#, "Invalid value at 'rounds' (TYPE_INT32), \"many\""),
            (#""hashAlgorithm":"SHA256","rounds":1.5"#, "Invalid value at 'rounds' (TYPE_INT32), 1.5"),
            (#""hashAlgorithm":"SHA256","rounds":4294967297"#, "Invalid value at 'rounds' (TYPE_INT32), 4294967297"),
            (#""hashAlgorithm":"HMAC_SHA1","signerKey":"not base64!""#, "Invalid value at 'signer_key' (TYPE_BYTES), \"not base64!\""),
            (#""hashAlgorithm":"SCRYPT","signerKey":"a2V5","saltSeparator":7,"rounds":8,"memoryCost":14"#, "Invalid value at 'salt_separator' (TYPE_BYTES), 7"),
            (#""hashAlgorithm":"SHA256","rounds":1,"passwordHashOrder":"SALT_LAST""#, "Invalid value at 'password_hash_order' (TYPE_ENUM), \"SALT_LAST\""),
            (#""hashAlgorithm":5"#, "Invalid value at 'hash_algorithm' (TYPE_STRING), 5"),
        ]
        for (params, expected) in cases {
            let r = importUsers(params, user)
            XCTAssertEqual(r.0, 400, params)
            XCTAssertEqual(message(r).map { $0.replacingOccurrences(of: "Invalid JSON payload received. ", with: "") }, expected, params)
        }
        // A hash or salt that is not base64 under an algorithm fails the request as proto JSON's bytes do.
        let notBase64 = importUsers(#""hashAlgorithm":"MD5","rounds":0"#, #"{"localId":"a"},{"localId":"b","email":"b@example.com","passwordHash":"not base64!"}"#)
        XCTAssertEqual(notBase64.0, 400)
        XCTAssertEqual(message(notBase64), #"Invalid JSON payload received. Invalid value at 'users[1].password_hash' (TYPE_BYTES), "not base64!""#)
        XCTAssertEqual(message(importUsers(#""hashAlgorithm":"MD5","rounds":0"#, #"{"localId":"c","passwordHash":"YWJj","salt":"%%"}"#)),
                       #"Invalid JSON payload received. Invalid value at 'users[0].salt' (TYPE_BYTES), "%%""#)
        XCTAssertNil(lookup("bad"))
        XCTAssertNil(lookup("a"))
    }

    /// This emulator's cost limits: the user fails with a message naming the limit; the others import.
    func testCostlyParametersFailTheUserWithTheLimit() throws {
        let bcrypt13 = Base64URL.encodeStandard(Array("$2b$13$abcdefghijklmnopqrstue1t1OjTM1ybc1cBI8Yv5Zq1dmP56SR7u".utf8))
        let cases: [(String, String, String)] = [
            (#""hashAlgorithm":"BCRYPT""#, bcrypt13, "bcrypt cost 13 is above this emulator's limit of 12: one sign-in would take seconds (SECURITY.md)"),
            (#""hashAlgorithm":"BCRYPT""#, "YWJj",
             "passwordHash is not a bcrypt hash: expected $2a$, $2b$ or $2y$, a cost from 04 to 31, 53 characters of salt and hash"),
            (#""hashAlgorithm":"STANDARD_SCRYPT","cpuMemCost":1048576,"blockSize":8,"parallelization":1,"dkLen":64"#, "YWJj",
             "STANDARD_SCRYPT with cpuMemCost 1048576, blockSize 8 and parallelization 1 is above this emulator's limits, 128·r·(N + p + 2) ≤ 40 MiB of memory and N·r·p ≤ 524288: one sign-in would cost more (SECURITY.md)"),
            (#""hashAlgorithm":"STANDARD_SCRYPT","cpuMemCost":16384,"blockSize":8,"parallelization":16,"dkLen":64"#, "YWJj",
             "STANDARD_SCRYPT with cpuMemCost 16384, blockSize 8 and parallelization 16 is above this emulator's limits, 128·r·(N + p + 2) ≤ 40 MiB of memory and N·r·p ≤ 524288: one sign-in would cost more (SECURITY.md)"),
            (#""hashAlgorithm":"STANDARD_SCRYPT","cpuMemCost":1073741824,"blockSize":2147483647,"parallelization":2147483647,"dkLen":64"#, "YWJj",
             "STANDARD_SCRYPT with cpuMemCost 1073741824, blockSize 2147483647 and parallelization 2147483647 is above this emulator's limits, 128·r·(N + p + 2) ≤ 40 MiB of memory and N·r·p ≤ 524288: one sign-in would cost more (SECURITY.md)"),
            (#""hashAlgorithm":"STANDARD_SCRYPT","cpuMemCost":1024,"blockSize":8,"parallelization":1,"dkLen":2000"#, "YWJj",
             "STANDARD_SCRYPT dkLen 2000 is above this emulator's limit of 1024 bytes"),
            (#""hashAlgorithm":"PBKDF_SHA1","rounds":120000"#, Base64URL.encodeStandard([UInt8](repeating: 1, count: 100)),
             "PBKDF_SHA1 over a 100-byte hash at 120000 rounds needs 600000 HMAC blocks; this emulator verifies at most 480000 (SECURITY.md)"),
            (#""hashAlgorithm":"ARGON2","argon2Parameters":{"hashType":"ARGON2_ID","iterations":2,"memoryCostKib":1024,"parallelism":1,"hashLengthBytes":32}"#, "YWJj",
             "ARGON2 password hashes are not supported by this emulator (its OpenSSL has no Argon2): import the user with rawPassword or without a password"),
        ]
        for (n, (params, hash, expected)) in cases.enumerated() {
            let r = importUsers(params, #"{"localId":"ok\#(n)","phoneNumber":"+1555000\#(1000 + n)"},{"localId":"costly\#(n)","email":"c\#(n)@example.com","passwordHash":"\#(hash)"}"#)
            XCTAssertEqual(r.0, 200, params)
            XCTAssertEqual(r.1["error"], [["index": 1, "message": .string(expected)]], params)
            XCTAssertNotNil(lookup("ok\(n)"), params)
            XCTAssertNil(lookup("costly\(n)"), params)
        }
        // At the limits: kept (a 64-byte PBKDF_SHA1 hash at 120,000 rounds, bcrypt cost 12, N·r·p = 2^19).
        let edge = importUsers(#""hashAlgorithm":"PBKDF_SHA1","rounds":120000"#, #"{"localId":"edge","passwordHash":"\#(Base64URL.encodeStandard([UInt8](repeating: 1, count: 80)))"}"#)
        XCTAssertNil(edge.1["error"], "\(edge.1)")
        XCTAssertNil(try algorithm(#""hashAlgorithm":"STANDARD_SCRYPT","cpuMemCost":16384,"blockSize":8,"parallelization":4,"dkLen":64"#).refusal(hash: [1]))
        XCTAssertNil(try algorithm(#""hashAlgorithm":"STANDARD_SCRYPT","cpuMemCost":32768,"blockSize":8,"parallelization":2,"dkLen":64"#).refusal(hash: [1]))
        XCTAssertNotNil(try algorithm(#""hashAlgorithm":"STANDARD_SCRYPT","cpuMemCost":65536,"blockSize":8,"parallelization":1,"dkLen":64"#).refusal(hash: [1]))
        XCTAssertNotNil(try algorithm(#""hashAlgorithm":"STANDARD_SCRYPT","cpuMemCost":2,"blockSize":131072,"parallelization":2,"dkLen":64"#).refusal(hash: [1]))
        XCTAssertNil(try algorithm(#""hashAlgorithm":"BCRYPT""#).refusal(hash: Array("$2b$12$abcdefghijklmnopqrstue1t1OjTM1ybc1cBI8Yv5Zq1dmP56SR7u".utf8)))
    }

    /// MD5 hashes the password in every round: the longest password production allows verifies at the most rounds, a
    /// longer one (a 1 MiB body could carry one) is not hashed at all.
    func testPasswordLengthBoundsMD5sCost() throws {
        let h = try algorithm(#""hashAlgorithm":"MD5","rounds":8192"#)
        let hash = try XCTUnwrap(Base64URL.decode("MDE5ZDU4MjcwYjBlNTU3ZTc2NjU5YTlhMTRlNjc4MmU="))  // hashlib, "é" × 4096
        let longest = String(repeating: "é", count: 4096)
        XCTAssertTrue(h.verify(longest, hash: hash, salt: Array("NaCl".utf8)))
        XCTAssertFalse(h.verify(longest + String(repeating: "é", count: 4097), hash: hash, salt: Array("NaCl".utf8)))
        // hashlib's MD5 (rounds 0) of 16,385 × "x": the right password, but longer than production allows.
        let tooLong = try XCTUnwrap(Base64URL.decode("ODFhZWMwNDE2Yjg0NDM3NWY0MzBkYzRlOTM3MGUyZGE="))
        XCTAssertFalse(try algorithm(#""hashAlgorithm":"MD5","rounds":0"#).verify(String(repeating: "x", count: 16385), hash: tooLong, salt: []))
    }

    /// An algorithm that would cost too much never runs, whatever stored it (a hand-edited journal).
    func testVerificationRefusesWhatTheLimitsRefuse() throws {
        let huge = try algorithm(#""hashAlgorithm":"STANDARD_SCRYPT","cpuMemCost":1048576,"blockSize":8,"parallelization":1,"dkLen":1"#)
        XCTAssertFalse(huge.verify("x", hash: [1], salt: []))
        var u = UserRecord(localId: "x", createdAt: 1)
        u.setPassword(hash: "YWJj", salt: nil, algorithm: huge.json)
        XCTAssertFalse(Passwords.matches("x", hash: u.passwordHash, salt: u.salt, algorithm: u.passwordHashAlgorithm))
        XCTAssertFalse(Passwords.matches("x", hash: "YWJj", salt: nil, algorithm: ["hashAlgorithm": "NOPE"]))
        XCTAssertFalse(Passwords.matches("x", hash: "YWJj", salt: nil, algorithm: "not an object"))
    }

    /// Our export carries the algorithm, so a file exported before the first sign-in imports back and signs in.
    func testExportedUsersImportBackWithTheirAlgorithm() throws {
        let (params, hash) = Self.vectors[4]  // HMAC_SHA256
        XCTAssertNil(importUsers(params, #"{"localId":"e1","email":"e1@example.com","passwordHash":"\#(hash)","salt":"\#(Self.salt)"}"#).1["error"])
        let listed = call("GET", "/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts:batchGet", headers: owner)
        let exported = try XCTUnwrap(listed.1["users"]?.arrayValue?.first { $0["localId"] == "e1" }, "\(listed.1)")
        XCTAssertEqual(exported["passwordHashAlgorithm"], try algorithm(params).json)
        XCTAssertNil(exported["passwordHashAlgorithm"]?["passwordHashOrder"])
        // Deleted and imported back without top-level hash fields, as --import and firebase-tools import send it.
        XCTAssertEqual(admin("accounts:delete", #"{"localId":"e1"}"#).0, 200)
        XCTAssertNil(lookup("e1"))
        let back = importUsers("", exported.serializedString)
        XCTAssertEqual(back.0, 200)
        XCTAssertNil(back.1["error"], "\(back.1)")
        XCTAssertEqual(lookup("e1")?["passwordHashAlgorithm"], exported["passwordHashAlgorithm"])
        XCTAssertEqual(signIn("e1@example.com", Self.password).0, 200)
        // A malformed algorithm on a user is that user's error.
        let bad = importUsers("", #"{"localId":"e2","passwordHash":"YWJj","passwordHashAlgorithm":{"hashAlgorithm":"MD5","rounds":9000}}"#)
        XCTAssertEqual(bad.1["error"], [["index": 0, "message": "passwordHashAlgorithm: INVALID_HASH_ROUNDS"]])
        XCTAssertEqual(importUsers("", #"{"localId":"e3","passwordHash":"YWJj","passwordHashAlgorithm":"MD5"}"#).1["error"],
                       [["index": 0, "message": "passwordHashAlgorithm must be an object"]])
        // The request's algorithm wins over a user's own.
        let both = importUsers(#""hashAlgorithm":"MD5","rounds":0"#, #"{"localId":"e4","passwordHash":"YWJj","passwordHashAlgorithm":{"hashAlgorithm":"SHA1","rounds":1}}"#)
        XCTAssertNil(both.1["error"])
        XCTAssertEqual(lookup("e4")?["passwordHashAlgorithm"]?["hashAlgorithm"], "MD5")
    }

    /// A new password (update, reset, import of ours) replaces the algorithm with the hash; so does removing it.
    func testANewPasswordDropsTheAlgorithm() throws {
        let (params, hash) = Self.vectors[14]  // SHA256 rounds 1
        XCTAssertNil(importUsers(params, #"{"localId":"p1","email":"p1@example.com","passwordHash":"\#(hash)","salt":"\#(Self.salt)"}"#).1["error"])
        XCTAssertNotNil(lookup("p1")?["passwordHashAlgorithm"])
        XCTAssertEqual(admin("accounts:update", #"{"localId":"p1","password":"brand-new-1"}"#).0, 200)
        XCTAssertNil(lookup("p1")?["passwordHashAlgorithm"])
        XCTAssertEqual(signIn("p1@example.com", "brand-new-1").0, 200)
        XCTAssertEqual(message(signIn("p1@example.com", Self.password)), "INVALID_LOGIN_CREDENTIALS")

        XCTAssertNil(importUsers(params, #"{"localId":"p2","email":"p2@example.com","passwordHash":"\#(hash)","salt":"\#(Self.salt)"}"#).1["error"])
        XCTAssertEqual(admin("accounts:update", #"{"localId":"p2","deleteProvider":["password"]}"#).0, 200)
        XCTAssertNil(lookup("p2")?["passwordHashAlgorithm"])
        XCTAssertNil(lookup("p2")?["passwordHash"])

        XCTAssertNil(importUsers(params, #"{"localId":"p3","email":"p3@example.com","passwordHash":"\#(hash)","salt":"\#(Self.salt)"}"#).1["error"])
        XCTAssertNil(importUsers(#""allowOverwrite":true"#, #"{"localId":"p3","email":"p3@example.com","rawPassword":"plain-pass-3"}"#).1["error"])
        XCTAssertNil(lookup("p3")?["passwordHashAlgorithm"])
        XCTAssertEqual(signIn("p3@example.com", "plain-pass-3").0, 200)

        XCTAssertNil(importUsers(params, #"{"localId":"p4","email":"p4@example.com","passwordHash":"\#(hash)","salt":"\#(Self.salt)"}"#).1["error"])
        XCTAssertEqual(itk("sendOobCode", #"{"requestType":"PASSWORD_RESET","email":"p4@example.com"}"#).0, 200)
        let code = try XCTUnwrap(call("GET", "/emulator/v1/projects/demo-phone/oobCodes").1["oobCodes"]?.arrayValue?.last?["oobCode"]?.stringValue)
        XCTAssertEqual(itk("resetPassword", #"{"oobCode":"\#(code)","newPassword":"reset-pass-4"}"#).0, 200)
        XCTAssertNil(lookup("p4")?["passwordHashAlgorithm"])
        XCTAssertEqual(signIn("p4@example.com", "reset-pass-4").0, 200)
    }

    /// The field goes through the journal with the record.
    func testTheAlgorithmGoesThroughTheJournal() throws {
        var u = UserRecord(localId: "j", createdAt: 1)
        let alg = try algorithm(Self.vectors[23].params).json  // SCRYPT
        u.setPassword(hash: Self.vectors[23].hash, salt: Self.salt, algorithm: alg)
        let table = UserFieldTable.standard
        let doc = table.journalObject(u)
        XCTAssertEqual(doc["passwordHashAlgorithm"], alg)
        let back = try XCTUnwrap(table.record(fromJournal: doc))
        XCTAssertEqual(back, u)
        XCTAssertTrue(Passwords.matches(Self.password, hash: back.passwordHash, salt: back.salt, algorithm: back.passwordHashAlgorithm))
        XCTAssertEqual(table.changedFields(from: UserRecord(localId: "j", createdAt: 1), to: u), ["password"])
        // Admins and exports see it with the hash; a user's own lookup sees neither.
        XCTAssertEqual(table.render(u)["passwordHashAlgorithm"], alg)
        XCTAssertNil(table.render(u, forClient: true)["passwordHashAlgorithm"])
    }
}
