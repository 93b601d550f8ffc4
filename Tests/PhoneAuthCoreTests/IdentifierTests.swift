import EmulatorSupport
@testable import PhoneAuthCore
import XCTest

/// The identifier boundary (issue 11): what ids may name state, store admission, caps and the tenant switch.
final class IdentifierTests: XCTestCase {
    func testProjectAndTenantIDs() {
        for ok in ["demo-phone", "p", "team_a", "tenant-1-abcde", "A1", String(repeating: "x", count: 128)] {
            XCTAssertTrue(Identifiers.isValidProjectID(ok), ok)
            XCTAssertTrue(Identifiers.isValidTenantID(ok), ok)
        }
        for bad in ["", "/../../../tmp/x\u{0}", "..", ".", "a/b", "a b", "a\u{0}b", "a\nb", "a\u{1B}[31m", "ü-tenant", "a.b",
                    String(repeating: "x", count: 129), "a\u{85}", "a\u{7F}"] {
            XCTAssertFalse(Identifiers.isValidProjectID(bad), bad)
            XCTAssertFalse(Identifiers.isValidTenantID(bad), bad)
        }
        XCTAssertNil(try Identifiers.tenantID(nil))
        XCTAssertNil(try Identifiers.tenantID(""))
        XCTAssertThrowsError(try Identifiers.tenantID("/../x\u{0}")) { e in
            XCTAssertEqual((e as? AuthError)?.description, "INVALID_TENANT_ID : The tenant ID must be a valid non-empty string.")
        }
        XCTAssertThrowsError(try Identifiers.projectID("p\u{0}")) { e in
            XCTAssertEqual((e as? AuthError)?.code, .invalidRequest)
            XCTAssertFalse((e as? AuthError)?.description.contains("\u{0}") ?? true, "the raw id is never echoed")
        }
    }

    func testLocalIDsEmailsAndEnrollmentIDs() {
        for ok in ["u1", "user@example.com", "ünïcödé", "a b", String(repeating: "x", count: 128)] { XCTAssertTrue(Identifiers.isValidLocalID(ok), ok) }
        for bad in ["", "victim\u{0}x", "a\nb", "a\rb", "a\u{1B}", "a\u{7F}", "a\u{9B}", "a\u{2028}", String(repeating: "x", count: 129)] {
            XCTAssertFalse(Identifiers.isValidLocalID(bad), bad)
            XCTAssertFalse(Identifiers.isValidMFAEnrollmentID(bad), bad)
        }
        XCTAssertThrowsError(try Identifiers.localID("x\u{0}")) { XCTAssertEqual(($0 as? AuthError)?.code, .invalidLocalId) }
        for ok in ["a@b", "first.last+tag@example.co.uk", "user@xn--bcher-kva.example"] { XCTAssertTrue(Identifiers.isValidEmail(ok), ok) }
        for bad in ["", "nobody", "@example.com", "a@", "a b@example.com", "a@b@c", "a@exa mple.com", "a\n@b.com", "a@b.com\u{0}", "a@.b", "a@b."] {
            XCTAssertFalse(Identifiers.isValidEmail(bad), bad)
        }
        XCTAssertEqual(try Identifiers.phone("+1 650-555-4567"), "+16505554567")
        XCTAssertThrowsError(try Identifiers.phone("+1650555\u{0}4567"))
    }

    func testPrintableEscapesControlCharacters() {
        XCTAssertEqual(Identifiers.printable("a\nb\u{0}c\u{1B}[2J\u{85}"), "a\\nb\\u{0}c\\u{1B}[2J\\u{85}")
        XCTAssertEqual(Identifiers.printable(String(repeating: "x", count: 10), limit: 4), "xxxx…")
    }

    /// A used session spelled differently (other trailing bits, the standard alphabet) is not a session.
    func testSessionIDsParseOnlyInTheirCanonicalSpelling() {
        let id = SessionID(bytes: Array(0..<16))
        XCTAssertEqual(SessionID(id.text), id)
        var variants: [String] = []
        let last = id.text.unicodeScalars.last!
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        let index = alphabet.firstIndex(of: Character(last))!
        for bits in 1..<16 { variants.append(String(id.text.dropLast()) + String(alphabet[index ^ bits])) }
        variants.append(id.text + "==")
        let withStandard = SessionID(bytes: [0xFB] + Array(repeating: 0xFF, count: 15))
        variants.append(String(withStandard.text.map { $0 == "-" ? "+" : $0 == "_" ? "/" : $0 }))
        for v in variants where v != id.text && v != withStandard.text {
            XCTAssertNil(SessionID(v), v)
            XCTAssertNotNil(Base64URL.decode(v), "the decoder alone accepts \(v): the check must be in SessionID")
        }
    }

    func emulator(maxProjects: Int = 100, maxTenants: Int = 1000) -> Emulator {
        Emulator(defaultProjectId: "p", clock: EmulatorClock(fixedAtMillis: 1_800_000_000_000), random: SeededRandom(seed: 1),
                 logger: Logger(label: "t", level: .critical), maxProjects: maxProjects, maxTenantsPerProject: maxTenants)
    }

    func testAdmissionValidatesAndCreatesOnlyWhenAsked() throws {
        let e = emulator()
        XCTAssertThrowsError(try e.admit(StoreKey(projectId: "p", tenantId: "/../../x\u{0}"), create: true)) {
            XCTAssertEqual(($0 as? AuthError)?.code, .invalidTenantId)
        }
        XCTAssertThrowsError(try e.admit(StoreKey(projectId: "../x"), create: true))
        XCTAssertEqual(e.storeKeys.count, 1)
        // Reads of a never-used project allocate nothing.
        try e.admit(StoreKey(projectId: "other"), create: false)
        XCTAssertEqual(e.config(StoreKey(projectId: "other")), ProjectConfig())
        XCTAssertEqual(e.config(StoreKey(projectId: "other", tenantId: "t")), ProjectConfig())
        XCTAssertEqual(e.storeKeys.count, 1)
        try e.admit(StoreKey(projectId: "other", tenantId: "t"), create: true)
        XCTAssertEqual(Set(e.storeKeys), [StoreKey(projectId: "p"), StoreKey(projectId: "other"), StoreKey(projectId: "other", tenantId: "t")])
        XCTAssertEqual(e.tenants(of: "other"), ["t"])
    }

    func testStoreNeverRegistersAnInvalidID() {
        let e = emulator()
        let bad = StoreKey(projectId: "p", tenantId: "../../etc/passwd\u{0}")
        _ = e.store(bad)
        XCTAssertEqual(e.storeKeys, [StoreKey(projectId: "p")])
        XCTAssertEqual(e.tenants(of: "p"), [])
    }

    func testProjectCap() throws {
        let e = emulator(maxProjects: 3)
        try e.admit(StoreKey(projectId: "a"), create: true)
        try e.admit(StoreKey(projectId: "b", tenantId: "t"), create: true)
        XCTAssertEqual(e.projectCount, 3)
        for key in [StoreKey(projectId: "c"), StoreKey(projectId: "c", tenantId: "t")] {
            for create in [true, false] {
                XCTAssertThrowsError(try e.admit(key, create: create)) { error in
                    let err = error as? AuthError
                    XCTAssertEqual(err?.code, .quotaExceeded)
                    XCTAssertEqual(err?.description, "QUOTA_EXCEEDED : Too many projects: this emulator holds at most 3 (--max-projects).")
                }
            }
        }
        // Existing projects keep working.
        try e.admit(StoreKey(projectId: "a"), create: true)
        try e.admit(StoreKey(projectId: "a", tenantId: "new"), create: true)
        XCTAssertEqual(e.projectCount, 3)
    }

    func testTenantCapPerProject() throws {
        let e = emulator(maxTenants: 5)
        // Tenants holding data count (empty ones created on first use are reclaimed at the cap: see ReclaimTests).
        for i in 0..<5 {
            let key = StoreKey(projectId: "p", tenantId: "t\(i)")
            try e.admit(key, create: true)
            _ = try e.createUser(key, localId: "u", changes: UserChanges())
        }
        XCTAssertThrowsError(try e.admit(StoreKey(projectId: "p", tenantId: "t5"), create: true)) {
            XCTAssertEqual(($0 as? AuthError)?.description, "QUOTA_EXCEEDED : Too many tenants: a project holds at most 5 tenants.")
        }
        XCTAssertThrowsError(try e.admit(StoreKey(projectId: "p", tenantId: "t5"), create: true, explicit: true))
        try e.admit(StoreKey(projectId: "p", tenantId: "t4"), create: true)  // existing
        try e.admit(StoreKey(projectId: "q", tenantId: "t5"), create: true)  // another project has its own cap
        try e.deleteTenant(StoreKey(projectId: "p", tenantId: "t0"))
        try e.admit(StoreKey(projectId: "p", tenantId: "t5"), create: true)
        XCTAssertEqual(e.tenants(of: "p"), ["t1", "t2", "t3", "t4", "t5"])
    }

    func testCreateOnFirstUseSwitch() throws {
        let e = emulator()
        _ = try e.patchConfig(StoreKey(projectId: "p"), ["tenants": ["createOnFirstUse": false]])
        XCTAssertEqual(e.config(StoreKey(projectId: "p")).toJSON()["tenants"], ["createOnFirstUse": false])
        XCTAssertThrowsError(try e.admit(StoreKey(projectId: "p", tenantId: "t"), create: true)) { error in
            XCTAssertEqual((error as? AuthError)?.code, .tenantNotFound)
        }
        XCTAssertEqual(e.tenants(of: "p"), [])
        try e.admit(StoreKey(projectId: "p", tenantId: "t"), create: true, explicit: true)
        try e.admit(StoreKey(projectId: "p", tenantId: "t"), create: true)  // exists now
        XCTAssertThrowsError(try e.patchConfig(StoreKey(projectId: "p"), ["tenants": ["createOnFirstUse": "no"]]))
        XCTAssertThrowsError(try e.patchConfig(StoreKey(projectId: "p"), ["tenants": ["other": true]]))
    }
}
