import EmulatorSupport
import HTTPServer
import PhoneAuthAPI
import PhoneAuthCore
import PhoneAuthServer
import PhoneAuthTestSupport
import XCTest

/// The whole server as `main.swift` starts it: settings resolved from flags, `PhoneAuthServer.start`, real sockets.
final class PhoneAuthServerTests: XCTestCase {
    var dir = ""
    var log: MemoryLogSink!

    override func setUp() {
        dir = TemporaryDirectory.make("phone-auth-server")
        log = MemoryLogSink()
    }

    override func tearDown() { TemporaryDirectory.remove(dir) }

    func settings(_ flags: [String]) throws -> ServerSettings {
        let outcome = try ServerSettings.resolve(arguments: ["--port", "0", "--config", dir + "/none.json"] + flags, environment: { _ in nil },
                                                 readFile: { _ in Array("{}".utf8) }, fileExists: { _ in true })
        guard case .run(let s) = outcome else { throw SettingsError("not run") }
        return s
    }

    func post(_ server: RunningServer, _ path: String, _ body: String, headers: [(String, String)] = []) throws -> (Int, JSON) {
        let r = try HTTPClient.send(method: "POST", url: server.url + path, headers: [("Content-Type", "application/json")] + headers,
                                    body: Array(body.utf8))
        return (r.status, try JSONParser.parse(r.body))
    }

    /// Send a code to a fictional number and sign in with it; returns the sign-in answer.
    func signIn(_ server: RunningServer) throws -> JSON {
        let (s1, sent) = try post(server, "/identitytoolkit.googleapis.com/v1/accounts:sendVerificationCode?key=k", #"{"phoneNumber":"+15555550100"}"#)
        XCTAssertEqual(s1, 200)
        let session = try XCTUnwrap(sent["sessionInfo"]?.stringValue)
        let (s2, signedIn) = try post(server, "/identitytoolkit.googleapis.com/v1/accounts:signInWithPhoneNumber?key=k",
                                      #"{"sessionInfo":"\#(session)","code":"654321"}"#)
        XCTAssertEqual(s2, 200)
        return signedIn
    }

    func testStartsOnAFreePortSignsInOverASocketAndStops() throws {
        let server = try PhoneAuthServer.start(settings: try settings(["--test-phone", "+15555550100=654321"]), logSink: log)
        XCTAssertGreaterThan(server.port, 0)
        XCTAssertEqual(server.url, "http://127.0.0.1:\(server.port)")
        let signedIn = try signIn(server)
        XCTAssertEqual(signedIn["phoneNumber"], "+15555550100")
        let idToken = try XCTUnwrap(signedIn["idToken"]?.stringValue)
        XCTAssertEqual(idToken.split(separator: ".").count, 3)
        XCTAssertNotEqual(idToken.split(separator: ".")[2], "", "rs256: a key was generated in the background and used")
        let (s, looked) = try post(server, "/identitytoolkit.googleapis.com/v1/accounts:lookup?key=k", #"{"idToken":"\#(idToken)"}"#)
        XCTAssertEqual(s, 200)
        XCTAssertEqual(looked["users"]?.arrayValue?.first?["phoneNumber"], "+15555550100")

        XCTAssertEqual(server.stop(), 0)
        XCTAssertEqual(server.stop(), 0, "a second stop does nothing")
        XCTAssertThrowsError(try HTTPClient.send(method: "GET", url: server.url + "/"), "nothing listens after stop")
        XCTAssertTrue(log.all.contains { $0.contains("ready") })
        XCTAssertTrue(log.all.contains { $0.contains("stopped") })
    }

    /// `stop()` exports (`--export-on-exit`) and closes the data directory; a second start finds the user there.
    func testStopExportsAndTheDataDirectorySurvivesARestart() throws {
        let flags = ["--test-phone", "+15555550100=654321", "--data-dir", dir + "/data", "--export-on-exit", dir + "/export",
                     "--token-signing", "none"]
        let first = try PhoneAuthServer.start(settings: try settings(flags), logSink: log)
        let uid = try XCTUnwrap(try signIn(first)["localId"]?.stringValue)
        XCTAssertEqual(first.stop(), 0)
        XCTAssertTrue(Files.exists(dir + "/export/firebase-export-metadata.json"))
        XCTAssertTrue(String(decoding: try Files.read(dir + "/export/auth_export/accounts.json"), as: UTF8.self).contains(uid))

        let second = try PhoneAuthServer.start(settings: try settings(flags), logSink: log)
        defer { second.stop() }
        let (s, found) = try post(second, "/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts:lookup",
                                  #"{"localId":["\#(uid)"]}"#, headers: [("Authorization", "Bearer owner")])
        XCTAssertEqual(s, 200)
        XCTAssertEqual(found["users"]?.arrayValue?.first?["phoneNumber"], "+15555550100")
    }

    /// A failed start says why, with the executable's exit code, and releases what it took (the data directory lock).
    func testAFailedStartReleasesTheDataDirectory() throws {
        let running = try PhoneAuthServer.start(settings: try settings(["--token-signing", "none"]), logSink: log)
        defer { running.stop() }
        let busy = ["--port", String(running.port), "--data-dir", dir + "/data", "--token-signing", "none"]
        XCTAssertThrowsError(try PhoneAuthServer.start(settings: try settings(busy), logSink: log)) { error in
            XCTAssertEqual((error as? StartError)?.exitCode, 1)
            XCTAssertTrue("\(error)".contains("in use"), "\(error)")
        }
        XCTAssertThrowsError(try PhoneAuthServer.start(settings: try settings(["--export-root", dir + "/missing"]), logSink: log)) { error in
            XCTAssertEqual((error as? StartError)?.exitCode, 2)
            XCTAssertTrue("\(error)".contains("is not an existing directory"), "\(error)")
        }
        let again = try PhoneAuthServer.start(settings: try settings(["--data-dir", dir + "/data", "--token-signing", "none"]), logSink: log)
        XCTAssertEqual(again.stop(), 0)
    }
}
