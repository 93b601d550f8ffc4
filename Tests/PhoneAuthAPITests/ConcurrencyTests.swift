import Dispatch
import EmulatorSupport
import HTTPServer
import JWT
@testable import PhoneAuthAPI
import PhoneAuthCore
import XCTest

/// The whole server under concurrent clients: event loops, the signing pool, eventfd completions, store locks.
/// Run under ThreadSanitizer in CI (`swift test --sanitize=thread`).
final class ConcurrencyTests: XCTestCase {
    func testConcurrentSignInsOverRealSockets() throws {
        let emulator = Emulator(defaultProjectId: "demo-phone", random: SystemRandom(), logger: Logger(label: "t", level: .critical))
        let pool = WorkerPool(threads: 2)
        let app = PhoneAuthApp(emulator: emulator, tokens: TokenService(mode: .rs256, initialKey: HandlerTests.signingKey),
                               signingPool: pool, logger: Logger(label: "t", level: .critical))
        let server = HTTPServer(configuration: .init(host: "127.0.0.1", port: 0, eventLoops: 2), responder: app,
                                logger: Logger(label: "t", level: .critical))
        let port = try server.start()
        defer {
            server.shutdown()
            pool.shutdown()
        }
        let base = "http://127.0.0.1:\(port)"
        let failures = Locked(0)
        let uids = Locked(Set<String>())
        let sameNumberUIDs = Locked(Set<String>())
        DispatchQueue.concurrentPerform(iterations: 8) { t in
            for i in 0..<10 {
                // Distinct numbers, and every thread also signs in one shared number.
                for phone in ["+1555\(sevenDigits(t * 100 + i))", "+15559990000"] {
                    do {
                        let sent = try HTTPClient.send(method: "POST", url: base + "/identitytoolkit.googleapis.com/v1/accounts:sendVerificationCode?key=k",
                                                       body: Array(#"{"phoneNumber":"\#(phone)"}"#.utf8))
                        let session = try JSONParser.parse(sent.body)["sessionInfo"]!.stringValue!
                        let code = emulator.verificationCodes(StoreKey(projectId: "demo-phone"), phone: phone).first { $0.sessionInfo == session }!.code
                        let r = try HTTPClient.send(method: "POST", url: base + "/identitytoolkit.googleapis.com/v1/accounts:signInWithPhoneNumber?key=k",
                                                    body: Array(#"{"sessionInfo":"\#(session)","code":"\#(code)"}"#.utf8))
                        guard r.status == 200, let uid = try JSONParser.parse(r.body)["localId"]?.stringValue else {
                            failures.withLock { $0 += 1 }
                            continue
                        }
                        if phone == "+15559990000" { sameNumberUIDs.withLock { _ = $0.insert(uid) } } else { uids.withLock { _ = $0.insert(uid) } }
                    } catch {
                        failures.withLock { $0 += 1 }
                    }
                }
            }
        }
        XCTAssertEqual(failures.withLock { $0 }, 0)
        XCTAssertEqual(uids.withLock { $0.count }, 80)
        XCTAssertEqual(sameNumberUIDs.withLock { $0.count }, 1, "concurrent sign-ins of one number make exactly one user")
        XCTAssertEqual(emulator.store(StoreKey(projectId: "demo-phone")).read { $0.users.count }, 81)
    }
}

/// Seven decimal digits, zero-padded.
func sevenDigits(_ n: Int) -> String {
    let digits = n.description
    return String(repeating: "0", count: max(0, 7 - digits.utf8.count)) + digits
}
