import EmulatorSupport
import PhoneAuthAPI
import XCTest

/// The option table is the one place an option is defined: no option twice, `--help` lists each, and docs/configuration.md's
/// configuration table is the one the table generates.
final class SettingsTableTests: XCTestCase {
    func testNoFlagEnvironmentVariableOrConfigKeyIsDefinedTwice() {
        for key in [\ServerOption.flag, \.env, \.configKey] {
            let names = ServerSettings.options.compactMap { $0[keyPath: key] }
            XCTAssertEqual(names.count, Set(names).count, "\(names)")
        }
    }

    func testHelpListsEveryVisibleOption() {
        for option in ServerSettings.options where !option.hidden {
            if let flag = option.flag { XCTAssertTrue(ServerSettings.usage.contains("  --\(flag) "), flag) }
            if let env = option.env { XCTAssertTrue(ServerSettings.usage.contains(env), env) }
        }
        XCTAssertFalse(ServerSettings.usage.contains("PHONE_AUTH_EMULATOR_EVENT_LOOPS"), "benchmark tuning stays out of --help")
    }

    func testReadmeConfigurationTableIsGeneratedFromTheOptions() throws {
        // PHONE_AUTH_EMULATOR_WRITE_TABLE=FILE writes the generated table there, to paste into the README.
        if let out = Files.environment("PHONE_AUTH_EMULATOR_WRITE_TABLE") { try Files.writeAtomically(out, Array(ServerSettings.configurationTable.utf8)) }
        let root = #filePath.split(separator: "/").dropLast(3).joined(separator: "/")
        let readme = String(decoding: try Files.read("/" + root + "/docs/configuration.md"), as: UTF8.self)
        let lines = readme.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let start = try XCTUnwrap(lines.firstIndex(of: "| flag | environment | default | what |"), "docs/configuration.md's configuration table")
        let table = lines[start...].prefix { $0.hasPrefix("|") }.joined(separator: "\n")
        XCTAssertEqual(table, ServerSettings.configurationTable,
                       "docs/configuration.md's configuration table differs from ServerSettings.options: paste ServerSettings.configurationTable " +
                       "(PHONE_AUTH_EMULATOR_WRITE_TABLE=FILE swift test --filter SettingsTableTests writes it to FILE)")
    }

    /// Every one-value option takes its flag over its environment variable.
    func testFlagBeatsEnvironmentForEveryOption() throws {
        let samples = ["host": "0.0.0.0", "port": "7", "project": "flag-proj", "token-signing": "none", "signing-key": "/k.pem",
                       "admin-token": "secret-token", "data-dir": "/d", "durability": "full", "import": "/i", "export-on-exit": "/e",
                       "export-root": "/r", "max-projects": "9", "max-users": "7", "max-sessions": "11", "max-users-total": "13", "request-timeout": "2", "blocking-timeout-ms": "1500", "max-connections-per-peer": "3",
                       "log-level": "debug", "log-format": "json"]
        for option in ServerSettings.options {
            guard case .one = option.kind, let flag = option.flag, let env = option.env else { continue }
            let value = try XCTUnwrap(samples[flag], "a sample value for --\(flag)")
            let fromEnv = try resolve([], env: [env: value])
            let fromBoth = try resolve(["--\(flag)", value], env: [env: "!invalid"])
            XCTAssertEqual(summary(fromEnv), summary(fromBoth), flag)
            XCTAssertNotEqual(summary(fromEnv), summary(try resolve([], env: [:])), "--\(flag) \(value) changes something")
        }
    }

    /// The settings as text, projects in a stable order.
    func summary(_ s: ServerSettings) -> String {
        var t = s
        t.projects = [:]
        return "\(t) projects: \(s.projects.keys.sorted())"
    }

    func resolve(_ args: [String], env: [String: String]) throws -> ServerSettings {
        let outcome = try ServerSettings.resolve(arguments: args, environment: { env[$0] }, readFile: { _ in [] }, fileExists: { _ in false })
        guard case .run(let s) = outcome else { throw SettingsError("not run") }
        return s
    }
}
