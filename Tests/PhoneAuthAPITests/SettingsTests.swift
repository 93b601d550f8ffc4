import EmulatorSupport
import PhoneAuthAPI
import PhoneAuthCore
import XCTest

final class SettingsTests: XCTestCase {
    func resolve(_ args: [String], env: [String: String] = [:], files: [String: String] = [:]) throws -> ServerSettings {
        let outcome = try ServerSettings.resolve(
            arguments: args, environment: { env[$0] },
            readFile: { path in
                guard let f = files[path] else { throw Files.IOError(path: path, errnoCode: 2) }
                return Array(f.utf8)
            }, fileExists: { files[$0] != nil })
        guard case .run(let s) = outcome else { throw SettingsError("not run") }
        return s
    }

    func testDefaultsComeFromTheEmbeddedConfig() throws {
        let s = try resolve([])
        XCTAssertEqual(s.host, "127.0.0.1")
        XCTAssertEqual(s.port, 9099)
        XCTAssertEqual(s.projectId, "demo-phone")
        XCTAssertEqual(s.tokenSigning, .rs256)
        XCTAssertEqual(s.configSource, "embedded default")
        XCTAssertEqual(s.projects["demo-phone"]?.testPhoneNumbers, ["+16505554567": "123456"])
    }

    func testEmbeddedDefaultMatchesShippedFile() throws {
        let file = try Files.read(#filePath.split(separator: "/").dropLast(3).map(String.init).joined(separator: "/").withRoot + "/config/emulator.json")
        XCTAssertEqual(String(decoding: file, as: UTF8.self), EmbeddedDefaults.configJSON + "\n")
    }

    func testPrecedenceFlagEnvFileDefault() throws {
        let file = #"{"port": 7000, "host": "0.0.0.0", "projectId": "from-file", "tokenSigning": "none"}"#
        var s = try resolve(["--config", "c.json"], files: ["c.json": file])
        XCTAssertEqual(s.port, 7000)
        XCTAssertEqual(s.projectId, "from-file")
        XCTAssertEqual(s.tokenSigning, .none)
        s = try resolve(["--config", "c.json"], env: ["PHONE_AUTH_EMULATOR_PORT": "7001", "PHONE_AUTH_EMULATOR_PROJECT": "from-env"], files: ["c.json": file])
        XCTAssertEqual(s.port, 7001)
        XCTAssertEqual(s.projectId, "from-env")
        s = try resolve(["--config=c.json", "--port", "0", "--project", "from-flag"], env: ["PHONE_AUTH_EMULATOR_PORT": "7001"], files: ["c.json": file])
        XCTAssertEqual(s.port, 0)
        XCTAssertEqual(s.projectId, "from-flag")
        s = try resolve([], env: ["GCLOUD_PROJECT": "gcloud-proj"])
        XCTAssertEqual(s.projectId, "demo-phone", "the shipped config names a project, which beats GCLOUD_PROJECT")
        s = try resolve(["--config", "e.json"], env: ["GOOGLE_CLOUD_PROJECT": "gcp-proj"], files: ["e.json": "{}"])
        XCTAssertEqual(s.projectId, "gcp-proj")
    }

    func testTestPhonesFromEnvAndFlags() throws {
        let s = try resolve(["--test-phone", "+15555550100=111111", "--test-phone=+15555550101=222222"],
                            env: ["PHONE_AUTH_EMULATOR_TEST_PHONES": "+15555550100=999999,+15555550102=333333"])
        XCTAssertEqual(s.projects["demo-phone"]?.testPhoneNumbers,
                       ["+16505554567": "123456", "+15555550100": "111111", "+15555550101": "222222", "+15555550102": "333333"])
    }

    func testErrorsNameTheProblem() {
        func message(_ args: [String], env: [String: String] = [:], files: [String: String] = [:]) -> String {
            do { _ = try resolve(args, env: env, files: files); return "" } catch { return "\(error)" }
        }
        XCTAssertTrue(message(["--config", "x.json"], files: ["x.json": #"{"colour": 1}"#]).contains("x.json: unknown key \"colour\""))
        XCTAssertTrue(message(["--config", "x.json"], files: ["x.json": "{"]).contains("invalid JSON"))
        XCTAssertTrue(message(["--config", "missing.json"]).contains("does not exist"))
        XCTAssertTrue(message(["--nope"]).contains("--nope"))
        XCTAssertTrue(message(["--port"]).contains("needs a value"))
        XCTAssertTrue(message(["--port", "http"]).contains("invalid port"))
        XCTAssertTrue(message(["--token-signing", "hs256"]).contains("rs256 or none"))
        XCTAssertTrue(message(["--test-phone", "+1650=12"]).contains("invalid test phone"))
        XCTAssertTrue(message(["--config", "x.json"], files: ["x.json": #"{"projects": {"demo-phone": {"phoneAuth": {"codeLenght": 6}}}}"#])
            .contains("projects.demo-phone.phoneAuth.codeLenght"))
    }

    /// `--allow-origin` / `--allow-host`: repeatable flags, else the comma-separated environment, else the config file.
    func testAllowOriginsAndHosts() throws {
        var s = try resolve([])
        XCTAssertEqual(s.allowOrigins, [])
        XCTAssertEqual(s.allowHosts, [])
        XCTAssertEqual(s.boundary, WebBoundary())
        XCTAssertFalse(s.boundary.hostAllowed("auth:9099"), "loopback bind: no single-label names")

        let file = #"{"allowOrigins": ["https://file.example"], "allowHosts": ["file.example"]}"#
        s = try resolve(["--config", "c.json"], files: ["c.json": file])
        XCTAssertEqual(s.allowOrigins, ["https://file.example"])
        XCTAssertEqual(s.allowHosts, ["file.example"])
        XCTAssertTrue(s.boundary.originAllowed("https://file.example", host: nil))
        XCTAssertTrue(s.boundary.hostAllowed("file.example:9099"))

        let env = ["PHONE_AUTH_EMULATOR_ALLOW_ORIGINS": "http://192.168.1.20:3000, HTTPS://Env.Example/",
                   "PHONE_AUTH_EMULATOR_ALLOW_HOSTS": "env.example,*.ngrok.test"]
        s = try resolve(["--config", "c.json"], env: env, files: ["c.json": file])
        XCTAssertEqual(s.allowOrigins, ["http://192.168.1.20:3000", "https://env.example"])
        XCTAssertEqual(s.allowHosts, ["env.example", "*.ngrok.test"])
        XCTAssertFalse(s.boundary.originAllowed("https://file.example", host: nil))
        XCTAssertTrue(s.boundary.originAllowed("https://env.example", host: nil))
        XCTAssertTrue(s.boundary.hostAllowed("x.ngrok.test"))

        s = try resolve(["--config", "c.json", "--allow-origin", "http://a.example:8080", "--allow-origin=http://b.example",
                         "--allow-host", "a.example", "--allow-host=b.example:9099"], env: env, files: ["c.json": file])
        XCTAssertEqual(s.allowOrigins, ["http://a.example:8080", "http://b.example"])
        XCTAssertEqual(s.allowHosts, ["a.example", "b.example:9099"])
        XCTAssertFalse(s.boundary.originAllowed("https://env.example", host: nil))
        XCTAssertTrue(s.boundary.originAllowed("http://b.example", host: nil))
        XCTAssertTrue(s.boundary.hostAllowed("b.example:9099"))
        XCTAssertFalse(s.boundary.hostAllowed("b.example:9098"))

        // Bound to every interface: single-label names (a Compose service) are accepted, dotted names still are not.
        s = try resolve(["--host", "0.0.0.0"])
        XCTAssertTrue(s.boundary.hostAllowed("auth:9099"))
        XCTAssertFalse(s.boundary.hostAllowed("evil.example:9099"))
        s = try resolve([], env: ["PHONE_AUTH_EMULATOR_HOST": "::"])
        XCTAssertTrue(s.boundary.hostAllowed("auth"))
    }

    func testAllowOriginAndHostErrors() {
        func message(_ args: [String], env: [String: String] = [:], files: [String: String] = [:]) -> String {
            do { _ = try resolve(args, env: env, files: files); return "" } catch { return "\(error)" }
        }
        XCTAssertTrue(message(["--allow-origin", "null"]).contains("invalid --allow-origin 'null'"))
        XCTAssertTrue(message(["--allow-origin", "*"]).contains("invalid --allow-origin"))
        XCTAssertTrue(message(["--allow-origin", "localhost:3000"]).contains("scheme://host[:port]"))
        XCTAssertTrue(message(["--allow-origin", "http://x.example/app"]).contains("invalid --allow-origin"))
        XCTAssertTrue(message(["--allow-origin"]).contains("needs a value"))
        XCTAssertTrue(message([], env: ["PHONE_AUTH_EMULATOR_ALLOW_ORIGINS": "http://ok.example,nope"]).contains("'nope'"))
        XCTAssertTrue(message(["--allow-host", "a b"]).contains("invalid --allow-host"))
        XCTAssertTrue(message(["--allow-host", "http://x.example"]).contains("invalid --allow-host"))
        XCTAssertTrue(message(["--config", "x.json"], files: ["x.json": #"{"allowOrigins": "http://x.example"}"#])
            .contains("x.json: \"allowOrigins\" must be an array of strings"))
        XCTAssertTrue(message(["--config", "x.json"], files: ["x.json": #"{"allowHosts": ["ok.example", 3]}"#])
            .contains("x.json: \"allowHosts\" must be an array of strings"))
        XCTAssertTrue(message(["--config", "x.json"], files: ["x.json": #"{"allowHosts": ["bad host"]}"#]).contains("invalid --allow-host"))
        // The usage text documents the options.
        for needle in ["--allow-origin ORIGIN", "PHONE_AUTH_EMULATOR_ALLOW_ORIGINS", "--allow-host NAME", "PHONE_AUTH_EMULATOR_ALLOW_HOSTS",
                       "/emulator/ API"] {
            XCTAssertTrue(ServerSettings.usage.contains(needle), needle)
        }
    }
}

extension String {
    var withRoot: String { hasPrefix("/") ? self : "/" + self }
}
