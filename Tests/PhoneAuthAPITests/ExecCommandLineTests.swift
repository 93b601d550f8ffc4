import PhoneAuthAPI
import XCTest

/// `phone-auth-emulator exec [options] -- COMMAND`: the split at `--`, and the port a free one unless `--port` says.
final class ExecCommandLineTests: XCTestCase {
    func resolve(_ serverArguments: [String], env: [String: String] = [:]) throws -> ServerSettings {
        guard case .run(let s) = try ServerSettings.resolve(arguments: serverArguments, environment: { env[$0] },
                                                            readFile: { _ in [] }, fileExists: { _ in false }) else {
            throw SettingsError("not run")
        }
        return s
    }

    func testSplitsAtTheFirstSeparator() throws {
        let line = try ExecCommandLine.parse(["--project", "p", "--", "pytest", "-q", "--", "--port", "3", "--help"])
        XCTAssertEqual(line, .run(serverArguments: ["--port", "0", "--project", "p"], command: ["pytest", "-q", "--", "--port", "3", "--help"]))
    }

    func testThePortIsAFreeOneUnlessTheFlagGivesOne() throws {
        guard case .run(let plain, _) = try ExecCommandLine.parse(["--", "true"]),
              case .run(let given, _) = try ExecCommandLine.parse(["--port", "7123", "--", "true"]) else { return XCTFail() }
        // The environment's port does not apply: a developer's server on 9099 must not collide with a test run.
        XCTAssertEqual(try resolve(plain, env: ["PHONE_AUTH_EMULATOR_PORT": "9099"]).port, 0)
        XCTAssertEqual(try resolve(given).port, 7123)
        // Every other option means what it means for the server.
        guard case .run(let other, _) = try ExecCommandLine.parse(["--project", "x", "--token-signing", "none", "--", "true"]) else { return XCTFail() }
        let s = try resolve(other)
        XCTAssertEqual(s.projectId, "x")
        XCTAssertEqual(s.tokenSigning, .none)
    }

    func testUsageErrors() {
        for args in [[], ["true"], ["--project", "p", "npm", "test"]] {
            XCTAssertThrowsError(try ExecCommandLine.parse(args), "\(args)") { XCTAssertTrue("\($0)".contains("exec needs --"), "\($0)") }
        }
        for args in [["--"], ["--project", "p", "--"], ["--", ""]] {
            XCTAssertThrowsError(try ExecCommandLine.parse(args), "\(args)") { XCTAssertTrue("\($0)".contains("needs a command"), "\($0)") }
        }
    }

    func testHelpBeforeTheSeparatorOnly() throws {
        XCTAssertEqual(try ExecCommandLine.parse(["--help"]), .help)
        XCTAssertEqual(try ExecCommandLine.parse(["-h", "--", "x"]), .help)
        XCTAssertEqual(try ExecCommandLine.parse(["--", "x", "--help"]), .run(serverArguments: ["--port", "0"], command: ["x", "--help"]))
        for needle in ["FIREBASE_AUTH_EMULATOR_HOST", "PHONE_AUTH_EMULATOR_URL", "GCLOUD_PROJECT", "128 + N", "64", "69", "70", "78", "126", "127"] {
            XCTAssertTrue(ExecCommandLine.usage.contains(needle), needle)
        }
        XCTAssertTrue(ServerSettings.usage.contains("phone-auth-emulator exec [options] -- COMMAND"))
    }
}
