import PhoneAuthCore
import PhoneAuthStorage
import PhoneAuthTestSupport
import XCTest

/// A uid given in another byte form of the same `String` (NFC and NFD: one key in memory, two in SQLite, which
/// compares bytes) replaces its user on disk too: the journal deletes the stored row by the bytes it was stored with,
/// so a restart finds the replacement, not the user it replaced.
final class UidFormsDurabilityTests: XCTestCase {
    func testAUserReplacedUnderAnotherFormOfItsUidStaysReplacedAfterARestart() throws {
        let dir = TemporaryDirectory.make("phone-auth-uid-forms")
        defer { TemporaryDirectory.remove(dir) }
        let key = StoreKey(projectId: "p")
        func reopen() throws -> (DataDirectory, Emulator) { try reopenDataDirectory(dir) }
        do {
            let (d, e) = try reopen()
            var first = UserChanges()
            first.displayName = .set("first")
            XCTAssertTrue(try e.importUsers(key, [(0, "caf\u{E9}", first)], allowOverwrite: true).isEmpty)
            var second = UserChanges()
            second.displayName = .set("second")
            XCTAssertTrue(try e.importUsers(key, [(0, "cafe\u{301}", second)], allowOverwrite: true).isEmpty)
            XCTAssertEqual(e.existingStore(key)?.read { $0.users.count }, 1)
            d.close()
        }
        let (d, e) = try reopen()
        defer { d.close() }
        XCTAssertEqual(e.existingStore(key)?.read { $0.users.count }, 1)
        XCTAssertEqual(e.existingStore(key)?.read { $0.users["caf\u{E9}"]?.displayName }, "second")
        XCTAssertEqual(e.existingStore(key)?.read { $0.users["cafe\u{301}"]?.displayName }, "second")
    }
}
