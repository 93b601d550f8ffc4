import EmulatorSupport
import PhoneAuthCore
@testable import PhoneAuthStorage
import PhoneAuthTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Issue 11: every stored Int64 reads back exactly, a row an older version wrote with a huge time never bricks a
/// restart, and the key table keeps only the newest keys.
final class BoundsStorageTests: XCTestCase {
    var dir = ""

    override func setUp() {
        dir = TemporaryDirectory.make("phone-auth-bounds")
    }

    override func tearDown() { TemporaryDirectory.remove(dir) }

    func testEveryInt64RoundTripsExactly() throws {
        for v: Int64 in [0, 1, -1, 1 << 53, (1 << 53) + 1, 9_000_000_000_000_001, Int64.max, Int64.min, Int64.max - 1, 253_402_300_799_999] {
            var u = UserRecord(localId: "u", createdAt: v)
            u.lastLoginAt = v
            u.lastRefreshAt = v
            u.validSince = v
            let back = try XCTUnwrap(Codecs.decodeUser(Codecs.encode(u)), "\(v)")
            XCTAssertEqual(back, u, "\(v)")
            let r = RefreshTokenRecord(projectId: "p", tenantId: nil, localId: "u", authTime: v, signInProvider: "phone", issuedAt: v)
            XCTAssertEqual(Codecs.decodeRefreshToken(Codecs.encode(r)), r)
        }
    }

    func testRowsWithHugeNumbersFromOlderVersionsStayReadable() throws {
        // What an older version stored for {"createdAt":"9223372036854775807"}: a double past Int64.
        let old = #"{"localId":"u","emailVerified":false,"disabled":false,"createdAt":9.2233720368547758e+18,"validSince":1e300,"lastLoginAt":-9.3e18}"#
        let u = try XCTUnwrap(Codecs.decodeUser(old))
        XCTAssertEqual(u.createdAt, Int64.max)
        XCTAssertEqual(u.validSince, Int64.max)
        XCTAssertEqual(u.lastLoginAt, Int64.min)
        XCTAssertNotNil(Codecs.decodeUser(#"{"localId":"u","createdAt":1700000000000}"#), "ordinary numeric rows as before")
    }

    func testWriterPrintsIntegralDoublesWithoutExponents() {
        XCTAssertEqual(JSON.int(Int64(1) << 53).serializedString, "9007199254740992")
        XCTAssertEqual(JSON.number(1e16).serializedString, "10000000000000000")
        XCTAssertEqual(JSON.number(-9.223372036854775808e18).serializedString, "-9223372036854775808")
        XCTAssertEqual(JSON.number(1e19).serializedString, "1e+19")
        for v: Int64 in [0, 1, -1, 1 << 53, -(1 << 53), 253_402_300_799_999] {
            XCTAssertEqual(try JSONParser.parse(JSON.int(v).serializedString).int64Value, v)
        }
    }

    func testSigningKeysArePrunedToTheNewestAndKeepTheirOrder() throws {
        let d = try DataDirectory(path: dir)
        defer { d.close() }
        // Decreasing `created` (a clock moved back): the order still follows the saves.
        for i in 0..<8 { try d.saveSigningKey(kid: "k\(i)", pem: "PEM\(i)", created: 1000 - Int64(i), keepNewest: 5) }
        XCTAssertEqual(try d.signingKeys().map(\.kid), ["k7", "k6", "k5", "k4", "k3"])
        try d.saveSigningKey(kid: "k9", pem: "PEM9", created: 1)
        XCTAssertEqual(try d.signingKeys().count, 6, "no pruning without keepNewest")
        XCTAssertEqual(try d.pruneSigningKeys(keepNewest: 5), 1)
        XCTAssertEqual(try d.signingKeys().map(\.kid), ["k9", "k7", "k6", "k5", "k4"])
        // Saving an existing key again makes it the newest (the --signing-key key at each start).
        try d.saveSigningKey(kid: "k4", pem: "PEM4", created: 0, keepNewest: 5)
        XCTAssertEqual(try d.signingKeys().map(\.kid), ["k4", "k9", "k7", "k6", "k5"])
    }
}
