import EmulatorSupport
import HTTPServer
@testable import PhoneAuthAPI
import PhoneAuthCore
import PhoneAuthTestSupport
import XCTest

/// What the tests of the emulator API for test suites share (test principals, reset and snapshots): the app for
/// "demo-phone" on a fixed clock, its paths, and an app behind `--admin-token`.
class EmulatorAPITestCase: XCTestCase, AppCalling {
    var clock: EmulatorClock!
    var app: PhoneAuthApp!
    static let admin = [("Authorization", "Bearer owner")]
    let base = "/emulator/v1/projects/demo-phone"
    /// Each subclass's randomness.
    var seed: UInt64 { 1 }

    override func setUp() {
        clock = EmulatorClock(fixedAtMillis: testEpochMillis)
        app = makeTestApp(clock: clock, seed: seed)
    }

    /// `POST …[/tenants/{t}]/idTokens`.
    func mint(_ body: String, tenant: String? = nil, headers: [(String, String)] = []) -> (Int, JSON) {
        call("POST", base + (tenant.map { "/tenants/\($0)" } ?? "") + "/idTokens", body, headers: headers)
    }

    /// The status an app started with `--admin-token s3cret` answers.
    func statusBehindAnAdminToken(_ method: String, _ target: String, _ body: String = "", headers: [(String, String)]) -> Int {
        let guarded = PhoneAuthApp(emulator: makeTestEmulator(projectId: "demo-phone", seed: 3), tokens: TokenService(mode: .rs256, initialKey: TestKeys.signingKey),
                                   signingPool: nil, logger: .quiet, adminToken: "s3cret")
        var h = HTTPHeaders()
        for (k, v) in headers { h.add(k, v) }
        return guarded.respond(to: HTTPRequest(method: method, target: target, headers: h, body: Array(body.utf8)), context: .detached)?.status ?? 0
    }
}
