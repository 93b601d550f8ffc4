import EmulatorSupport
import HTTPServer
@testable import PhoneAuthAPI
import PhoneAuthCore
import PhoneAuthTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Issue 11: identifiers from paths, queries and bodies cross one boundary; exports stay inside the export root.
final class BoundaryTests: XCTestCase, AppCalling {
    var dir = ""
    var root = ""
    var app: PhoneAuthApp!
    var log: MemoryLogSink!

    override func setUp() {
        dir = TemporaryDirectory.make("phone-auth-boundary")
        root = dir + "/root"
        mkdir(root, 0o755)
        makeApp()
    }

    override func tearDown() { TemporaryDirectory.remove(dir) }

    func makeApp(maxProjects: Int = 50, maxTenants: Int = 1000, signing: TokenSigningMode = .none) {
        log = MemoryLogSink()
        var config = ProjectConfig()
        config.testPhoneNumbers = ["+16505554567": "123456"]
        let logger = Logger(label: "t", level: .info, sink: log)
        let emulator = Emulator(defaultProjectId: "demo-phone", projectConfigs: ["demo-phone": config], clock: EmulatorClock(fixedAtMillis: 1_800_000_000_000),
                                random: SeededRandom(seed: 9), logger: logger, maxProjects: maxProjects, maxTenantsPerProject: maxTenants)
        app = PhoneAuthApp(emulator: emulator, tokens: TokenService(mode: signing, initialKey: nil), signingPool: nil, logger: logger,
                           exportRoot: root)
    }

    func itk(_ op: String, _ body: String) -> (Int, JSON) { call("POST", "/identitytoolkit.googleapis.com/v1/accounts:\(op)?key=x", body) }
    func export(_ path: String) -> (Int, JSON) {
        call("POST", "/emulator/v1/projects/demo-phone:export", JSON.object(["path": .string(path)]).serializedString)
    }

    /// The issue's three requests, with the target outside the export root.
    func testTheFileWriteAttackWritesNothingOutsideTheRoot() throws {
        let target = dir + "/bashrc"
        // Step 1 in one request creates three directories: refused since the export depth bound (red-team
        // follow-up); in two steps it still works, so the rest must hold on its own.
        XCTAssertEqual(export("D/auth_export/accounts-").0, 400)
        XCTAssertEqual(export("D").0, 200)
        XCTAssertEqual(export("D/auth_export/accounts-").0, 200)
        let hostile = JSON.object(["tenantId": .string("/../../../../../..\(target)\u{0}"), "displayName": "$(id>/tmp/x)"]).serializedString
        let r = itk("signUp", hostile)
        XCTAssertEqual(r.0, 400)
        XCTAssertEqual(message(r), "INVALID_TENANT_ID : The tenant ID must be a valid non-empty string.")
        XCTAssertEqual(r.1["error"]?["status"], "INVALID_ARGUMENT")
        XCTAssertEqual(app.emulator.tenants(of: "demo-phone"), [])
        XCTAssertEqual(export("D").0, 200)
        XCTAssertFalse(Files.exists(target))
        XCTAssertTrue(Files.exists(root + "/D/auth_export/accounts.json"))
        XCTAssertFalse(log.all.contains { $0.contains("\u{0}") || $0.contains("\n") })
    }

    func testEveryWayInForATenantIDIsValidated() {
        let bad = "a/../b\u{0}"
        let encoded = "a%2F..%2Fb%00"
        XCTAssertEqual(message(itk("sendVerificationCode", JSON.object(["phoneNumber": "+16505554567", "tenantId": .string(bad)]).serializedString))?.hasPrefix("INVALID_TENANT_ID"), true)
        XCTAssertEqual(message(itk("signInWithPhoneNumber", JSON.object(["sessionInfo": "x", "code": "1", "tenantId": .string(bad)]).serializedString))?.hasPrefix("INVALID_TENANT_ID"), true)
        XCTAssertEqual(message(itk("verifyClient", JSON.object(["appToken": "x", "tenantId": .string(bad)]).serializedString))?.hasPrefix("INVALID_TENANT_ID"), true)
        XCTAssertEqual(message(call("GET", "/identitytoolkit.googleapis.com/v2/recaptchaConfig?key=x&tenantId=\(encoded)"))?.hasPrefix("INVALID_TENANT_ID"), true)
        let owner = [("Authorization", "Bearer owner")]
        XCTAssertEqual(message(call("GET", "/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts:batchGet?tenantId=\(encoded)", headers: owner))?.hasPrefix("INVALID_TENANT_ID"), true)
        XCTAssertEqual(message(call("POST", "/identitytoolkit.googleapis.com/v1/projects/demo-phone/tenants/\(encoded)/accounts", "{}", headers: owner))?.hasPrefix("INVALID_TENANT_ID"), true)
        XCTAssertEqual(message(call("PATCH", "/emulator/v1/projects/demo-phone/tenants/\(encoded)/config", "{}"))?.hasPrefix("INVALID_TENANT_ID"), true)
        let p = call("GET", "/emulator/v1/projects/a%00b/config")
        XCTAssertEqual(p.0, 400)
        XCTAssertEqual(message(call("POST", "/identitytoolkit.googleapis.com/v1/accounts:lookup?key=x", #"{"targetProjectId":"x/../y"}"#, headers: owner))?.hasPrefix("Invalid project ID"), true)
        XCTAssertEqual(app.emulator.storeKeys, [StoreKey(projectId: "demo-phone")])
    }

    func testUIDsWithControlCharactersAreRefused() {
        let owner = [("Authorization", "Bearer owner")]
        let r = call("POST", "/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts", #"{"localId":"victim\u0000x"}"#, headers: owner)
        XCTAssertEqual(message(r), "INVALID_LOCAL_ID : UID must be a non-empty string with at most 128 characters.")
        let batch = call("POST", "/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts:batchCreate", #"{"users":[{"localId":"a\nb"},{"localId":"ok"}]}"#, headers: owner)
        XCTAssertEqual(batch.1["error"]?.arrayValue?.count, 1)
        XCTAssertEqual(app.emulator.store(StoreKey(projectId: "demo-phone")).read { Array($0.users.keys) }, ["ok"])
        XCTAssertEqual(message(call("POST", "/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts", #"{"email":"a\u0000@b.com"}"#, headers: owner)), "INVALID_EMAIL")
    }

    /// With unsigned tokens (`--token-signing none`) a token's `firebase.tenant` is the caller's to choose: it must
    /// never create a tenant.
    func testAForgedTokenTenantCreatesNothing() {
        let header = Base64URL.encode(Array(#"{"alg":"none","typ":"JWT"}"#.utf8))
        let claims = #"{"iss":"https://securetoken.google.com/demo-phone","aud":"demo-phone","sub":"u","user_id":"u","iat":1800000000,"exp":1800003600,"auth_time":1800000000,"firebase":{"tenant":"../../x\u0000"}}"#
        let token = header + "." + Base64URL.encode(Array(claims.utf8)) + "."
        let r = itk("lookup", JSON.object(["idToken": .string(token)]).serializedString)
        XCTAssertEqual(r.0, 400)
        XCTAssertEqual(app.emulator.storeKeys, [StoreKey(projectId: "demo-phone")])
    }

    func testExportPathsOutsideTheRootAreRefusedWithoutNamingThem() throws {
        mkdir(dir + "/outside", 0o755)
        XCTAssertEqual(symlink(dir + "/outside", root + "/link"), 0)
        XCTAssertEqual(symlink(dir + "/outside/file.json", root + "/dangling"), 0)
        let refused = ["../outside", "a/../../outside", dir + "/outside", "/etc", "link", "link/deeper", "dangling", "x\u{0}y", "a\nb", root + "/../outside"]
        for p in refused {
            let r = export(p)
            XCTAssertEqual(r.0, 400, p)
            XCTAssertEqual(message(r), "INVALID_ARGUMENT : path must be a directory inside the export root", p)
        }
        XCTAssertEqual(try listing(dir + "/outside"), [], "nothing was written outside the root")
        // A file where a directory is expected: the same message (it does not reveal what exists).
        try Files.writeAtomically(root + "/plain", [1])
        XCTAssertEqual(message(export("plain")), "INVALID_ARGUMENT : path must be a directory inside the export root")
        XCTAssertEqual(message(export("plain/x")), "INVALID_ARGUMENT : path must be a directory inside the export root")
        // Inside the root: relative, absolute, and the root itself.
        XCTAssertEqual(export("out/a").0, 200)
        XCTAssertEqual(export(root + "/out/b").0, 200)
        XCTAssertEqual(export(".").0, 200)
        XCTAssertTrue(Files.exists(root + "/out/a/auth_export/accounts.json"))
        XCTAssertTrue(Files.exists(root + "/out/b/firebase-export-metadata.json"))
        XCTAssertTrue(Files.exists(root + "/auth_export/config.json"))
        // The server log has the detail, escaped.
        XCTAssertTrue(log.all.contains { $0.contains("export refused") && $0.contains(#"x\u{0}y"#) })
    }

    func testAPlantedSymlinkInTheExportIsReplacedNotFollowed() throws {
        mkdir(dir + "/outside", 0o755)
        try Files.writeAtomically(dir + "/outside/target", Array("keep".utf8))
        XCTAssertEqual(export("e").0, 200)
        _ = unlink(root + "/e/auth_export/accounts.json")
        XCTAssertEqual(symlink(dir + "/outside/target", root + "/e/auth_export/accounts.json"), 0)
        XCTAssertEqual(export("e").0, 200)
        XCTAssertEqual(try Files.read(dir + "/outside/target"), Array("keep".utf8))
        // auth_export itself as a symlink: refused.
        _ = system("rm -rf '\(root)/f' && mkdir -p '\(root)/f' && ln -s '\(dir)/outside' '\(root)/f/auth_export'")
        let r = export("f")
        XCTAssertEqual(r.0, 500)
        XCTAssertFalse(message(r)?.contains(dir) ?? true)
        XCTAssertEqual(try listing(dir + "/outside"), ["target"])
    }

    /// A v2 tenant resource answers TENANT_NOT_FOUND for a missing tenant however its path is spelled: the route says
    /// what it is, not the raw path (a percent-escaped spelling once created the tenant on first use).
    func testTenantResourcesCreateNoTenantWhateverTheSpelling() {
        let owner = [("Authorization", "Bearer owner")]
        for path in ["/identitytoolkit.googleapis.com/v2/projects/demo-phone/tenants/t9",
                     "/identitytoolkit.googleapis%2Ecom/v2/projects/demo-phone/tenants/t9",
                     "/%69dentitytoolkit.googleapis.com/v2/projects/demo-phone/tenants/t9"] {
            let r = call("PATCH", path, #"{"displayName":"Nine"}"#, headers: owner)
            XCTAssertEqual(r.0, 404, path)
            XCTAssertEqual(message(r), "TENANT_NOT_FOUND", path)
            XCTAssertEqual(app.emulator.tenants(of: "demo-phone"), [], path)
        }
        // A tenant's provider configurations are v2 resources too: a create for a missing tenant creates no tenant.
        for kind in ["oauthIdpConfigs?oauthIdpConfigId=oidc.nine", "inboundSamlConfigs?inboundSamlConfigId=saml.nine",
                     "defaultSupportedIdpConfigs?idpId=google.com"] {
            let r = call("POST", "/identitytoolkit.googleapis.com/v2/projects/demo-phone/tenants/t9/" + kind, #"{"clientId":"c","issuer":"https://i.example"}"#, headers: owner)
            XCTAssertEqual(r.0, 404, kind)
            XCTAssertEqual(message(r), "TENANT_NOT_FOUND", kind)
            XCTAssertEqual(app.emulator.tenants(of: "demo-phone"), [], kind)
        }
    }

    func testTenantsFromTheBodyAreCreatedWithinTheCapAndTheSwitch() {
        makeApp(maxTenants: 3)
        for t in ["t1", "t2", "t3"] { XCTAssertEqual(itk("signUp", #"{"tenantId":"\#(t)"}"#).0, 200) }
        let r = itk("signUp", #"{"tenantId":"t4"}"#)
        XCTAssertEqual(message(r), "QUOTA_EXCEEDED : Too many tenants: a project holds at most 3 tenants.")
        XCTAssertEqual(itk("signUp", #"{"tenantId":"t3"}"#).0, 200)
        XCTAssertEqual(app.emulator.tenants(of: "demo-phone"), ["t1", "t2", "t3"])
        // The v2 tenants API is bound by the same cap.
        let owner = [("Authorization", "Bearer owner")]
        XCTAssertEqual(message(call("POST", "/identitytoolkit.googleapis.com/v2/projects/demo-phone/tenants", #"{"displayName":"Extra"}"#, headers: owner))?.hasPrefix("QUOTA_EXCEEDED"), true)

        makeApp()
        let patched = call("PATCH", "/emulator/v1/projects/demo-phone/config", #"{"tenants":{"createOnFirstUse":false}}"#)
        XCTAssertEqual(patched.1["tenants"], ["createOnFirstUse": false])
        XCTAssertEqual(call("GET", "/emulator/v1/projects/demo-phone/config").1["tenants"], ["createOnFirstUse": false])
        let nf = itk("sendVerificationCode", #"{"phoneNumber":"+16505554567","tenantId":"team-a"}"#)
        XCTAssertEqual(nf.0, 404)
        XCTAssertEqual(message(nf), "TENANT_NOT_FOUND")
        XCTAssertEqual(call("GET", "/emulator/v1/projects/demo-phone/tenants/team-a/verificationCodes").0, 404)
        let created = call("POST", "/identitytoolkit.googleapis.com/v2/projects/demo-phone/tenants", #"{"displayName":"Team-A"}"#, headers: owner)
        let id = created.1["name"]!.stringValue!.split(separator: "/").last.map(String.init)!
        XCTAssertEqual(itk("sendVerificationCode", #"{"phoneNumber":"+16505554567","tenantId":"\#(id)"}"#).0, 200)
    }

    func testProjectsCreatedOnFirstUseAreBounded() {
        makeApp(maxProjects: 3)
        // Reads of never-used projects answer from defaults and allocate nothing.
        for i in 0..<20 { XCTAssertEqual(call("GET", "/emulator/v1/projects/read-\(i)/config").0, 200) }
        XCTAssertEqual(app.emulator.projectCount, 1)
        XCTAssertEqual(call("PATCH", "/emulator/v1/projects/a/config", "{}").0, 200)
        XCTAssertEqual(call("DELETE", "/emulator/v1/projects/b/accounts").0, 200)
        let r = call("PATCH", "/emulator/v1/projects/c/config", "{}")
        XCTAssertEqual(r.0, 400)
        XCTAssertEqual(message(r), "QUOTA_EXCEEDED : Too many projects: this emulator holds at most 3 (--max-projects).")
        let owner = [("Authorization", "Bearer owner")]
        XCTAssertEqual(message(call("POST", "/identitytoolkit.googleapis.com/v1/projects/d/accounts", "{}", headers: owner))?.hasPrefix("QUOTA_EXCEEDED"), true)
        XCTAssertEqual(call("PATCH", "/emulator/v1/projects/a/config", "{}").0, 200, "existing projects keep working")
        XCTAssertEqual(app.emulator.projectCount, 3)
    }

    func testSettings() throws {
        func resolve(_ args: [String], env: [String: String] = [:], file: String? = nil) throws -> ServerSettings {
            let outcome = try ServerSettings.resolve(arguments: args, environment: { env[$0] },
                                                     readFile: { _ in Array((file ?? "{}").utf8) }, fileExists: { $0 == "c.json" && file != nil })
            guard case .run(let s) = outcome else { throw SettingsError("not run") }
            return s
        }
        XCTAssertNil(try resolve([]).exportRoot)
        XCTAssertEqual(try resolve([]).maxProjects, 5000)
        XCTAssertEqual(try resolve(["--export-root", "/srv/x", "--max-projects", "7"]).exportRoot, "/srv/x")
        XCTAssertEqual(try resolve(["--max-projects=7"]).maxProjects, 7)
        XCTAssertEqual(try resolve([], env: ["PHONE_AUTH_EMULATOR_EXPORT_ROOT": "/e", "PHONE_AUTH_EMULATOR_MAX_PROJECTS": "9"]).maxProjects, 9)
        XCTAssertEqual(try resolve([], env: ["PHONE_AUTH_EMULATOR_EXPORT_ROOT": "/e"]).exportRoot, "/e")
        let fromFile = try resolve(["--config", "c.json"], file: #"{"exportRoot":"/f","maxProjects":11}"#)
        XCTAssertEqual(fromFile.exportRoot, "/f")
        XCTAssertEqual(fromFile.maxProjects, 11)
        XCTAssertThrowsError(try resolve(["--max-projects", "0"]))
        XCTAssertThrowsError(try resolve(["--max-projects", "many"]))
        XCTAssertThrowsError(try resolve(["--config", "c.json"], file: #"{"maxProjects":-1}"#))
        XCTAssertTrue(ServerSettings.usage.contains("--export-root DIR") && ServerSettings.usage.contains("--max-projects N"))
    }

    func listing(_ path: String) throws -> [String] { try TemporaryDirectory.listing(path) }
}
