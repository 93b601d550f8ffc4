import EmulatorSupport
import HTTPServer
@testable import PhoneAuthAPI
import PhoneAuthCore
import PhoneAuthTestSupport
import XCTest

/// `GET /emulator/openapi.json`: generated from the route table, every routed path and method exactly once, valid
/// JSON; `Tests/Interop/test_openapi.py` validates it against the OpenAPI 3 schema and fuzzes it (schemathesis).
final class OpenAPITests: XCTestCase, AppCalling {
    var app: PhoneAuthApp!

    override func setUp() { app = makeTestApp(seed: 3, signing: .none) }

    func document() throws -> JSON { try JSONParser.parse(OpenAPI.bytes) }

    func testServedAsJSON() throws {
        let (status, served) = call("GET", "/emulator/openapi.json")
        XCTAssertEqual(status, 200)
        XCTAssertEqual(served, try document())
        XCTAssertEqual(served["openapi"], "3.0.3")
        XCTAssertEqual(call("GET", "/").1["authEmulator"]?["apiSpec"], "/emulator/openapi.json")
    }

    /// Every compiled pattern (a template's paths, its v3 name) is one operation; nothing else is described.
    func testListsEveryRouteExactlyOnce() throws {
        let paths = try XCTUnwrap(try document()["paths"]?.objectValue)
        var expected = Set<String>()
        for pattern in Router.table.patterns {
            let key = Router.rows[pattern.row].method.lowercased() + " " + OpenAPI.openAPIPath(pattern.path)
            XCTAssertTrue(expected.insert(key).inserted, "two routes at \(key)")
        }
        var described: [String] = []
        var ids = Set<String>()
        for (path, item) in paths {
            for (method, op) in try XCTUnwrap(item.objectValue) {
                described.append(method + " " + path)
                XCTAssertTrue(ids.insert(try XCTUnwrap(op["operationId"]?.stringValue)).inserted, "operationId of \(method) \(path)")
                // Every `{name}` of the path is a path parameter of the operation.
                let names = path.split(separator: "{").dropFirst().compactMap { $0.split(separator: "}").first.map(String.init) }
                let params = op["parameters"]?.arrayValue?.filter { $0["in"] == "path" }.compactMap { $0["name"]?.stringValue } ?? []
                XCTAssertEqual(params, names, "\(method) \(path)")
            }
        }
        XCTAssertEqual(described.count, Router.table.patterns.count)
        XCTAssertEqual(Set(described), expected)
        XCTAssertEqual(described.count, Set(described).count)
    }

    func testCredentialsParametersAndBodies() throws {
        let paths = try XCTUnwrap(try document()["paths"])
        let signIn = try XCTUnwrap(paths["/identitytoolkit.googleapis.com/v1/accounts:signInWithPhoneNumber"]?["post"])
        XCTAssertEqual(signIn["parameters"]?.arrayValue?.first?["name"], "key")
        XCTAssertEqual(signIn["security"]?.arrayValue?.count, 3)
        XCTAssertEqual(signIn["requestBody"]?["content"]?["application/json"]?["schema"]?["properties"]?["sessionInfo"], ["type": "string"])
        let legacy = try XCTUnwrap(paths["/www.googleapis.com/identitytoolkit/v3/relyingparty/verifyPhoneNumber"]?["post"])
        XCTAssertEqual(legacy["requestBody"], signIn["requestBody"])
        let token = try XCTUnwrap(paths["/securetoken.googleapis.com/v1/token"]?["post"])
        XCTAssertEqual(token["parameters"]?.arrayValue?.first?["required"], true)
        XCTAssertNotNil(token["requestBody"]?["content"]?["application/x-www-form-urlencoded"])
        let batchGet = try XCTUnwrap(paths["/identitytoolkit.googleapis.com/v1/projects/{project}/tenants/{tenant}/accounts:batchGet"]?["get"])
        XCTAssertEqual(batchGet["security"], [["bearer": []]])
        XCTAssertEqual(batchGet["parameters"]?.arrayValue?.compactMap { $0["name"]?.stringValue }, ["project", "tenant", "maxResults", "nextPageToken", "tenantId"])
        XCTAssertNil(batchGet["requestBody"])
        let export = try XCTUnwrap(paths["/emulator/v1/projects/{project}:export"]?["post"])
        XCTAssertEqual(export["requestBody"]?["content"]?["application/json"]?["schema"]?["properties"]?["path"], ["type": "string"])
        // A body without a written schema is still an object.
        let reset = try XCTUnwrap(paths["/emulator/v1/clock:reset"]?["post"])
        XCTAssertEqual(reset["requestBody"]?["content"]?["application/json"]?["schema"], ["type": "object"])
        XCTAssertEqual(reset["responses"]?["4XX"]?["content"]?["application/json"]?["schema"]?["$ref"], "#/components/schemas/Error")
    }

    /// `OpenAPI.bodies` describes routes that take a body, by their exact template: none is stale.
    func testBodySchemasNameRoutesWithBodies() {
        for template in OpenAPI.bodies.keys {
            XCTAssertTrue(Router.rows.contains { $0.template == template && $0.body != .none }, template)
        }
        for (_, fields) in OpenAPI.bodies {
            for field in fields.split(separator: " ") { XCTAssertTrue(field.contains(":"), String(field)) }
        }
    }

    func testDocumentedQueryParameters() {
        XCTAssertEqual(OpenAPI.documentedQuery("long-poll (`?phoneNumber=&timeoutSeconds=`), `?since=ID`"), ["phoneNumber", "timeoutSeconds", "since"])
        XCTAssertEqual(OpenAPI.documentedQuery("no `?` here, `a && b`, `?=`"), [])
    }
}
