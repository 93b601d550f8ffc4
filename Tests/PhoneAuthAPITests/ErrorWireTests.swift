import EmulatorSupport
@testable import HTTPServer
@testable import PhoneAuthAPI
@testable import PhoneAuthCore
import XCTest

/// The one mapping from typed error codes to the wire: statuses, Google status names, reasons and messages.
final class ErrorWireTests: XCTestCase {
    func testGoogleCodesRenderAsCodeAndDetail() {
        let w = AuthError(.invalidPhoneNumber, "TOO_SHORT").wire
        XCTAssertEqual(w, ErrorWire(http: 400, reason: "invalid", message: "INVALID_PHONE_NUMBER : TOO_SHORT"))
        XCTAssertEqual(w.status, "INVALID_ARGUMENT")
        XCTAssertEqual(AuthError(.sessionExpired).wire.message, "SESSION_EXPIRED")
    }

    func testCodesWithTheirOwnStatus() {
        XCTAssertEqual(AuthError(.tenantNotFound).wire, ErrorWire(http: 404, reason: "notFound", message: "TENANT_NOT_FOUND"))
        XCTAssertEqual(AuthError(.tenantNotFound).wire.status, "NOT_FOUND")
        XCTAssertEqual(AuthError(.resourceExhausted, "x").wire.http, 429)
        XCTAssertEqual(AuthError(.resourceExhausted, "x").wire.status, "RESOURCE_EXHAUSTED")
        XCTAssertEqual(AuthError(.permissionDenied, "no").wire.http, 403)
        XCTAssertEqual(AuthError(.quotaExceeded).wire.http, 400, "production answers QUOTA_EXCEEDED with 400")
    }

    func testRequestLevelFailuresCarryFreeText() {
        XCTAssertEqual(AuthError.invalidJSON("Unexpected token.").wire,
                       ErrorWire(http: 400, reason: "parseError", message: "Invalid JSON payload received. Unexpected token."))
        XCTAssertEqual(AuthError.invalidArgument("pageSize must be between 1 and 10000.").wire.message, "pageSize must be between 1 and 10000.")
        XCTAssertEqual(AuthError(.missingAPIKey).wire, ErrorWire(http: 403, reason: "forbidden", message: "The request is missing a valid API key."))
        XCTAssertEqual(AuthError(.missingCredential).wire.http, 401)
        XCTAssertEqual(AuthError(.missingCredential).wire.status, "UNAUTHENTICATED")
        XCTAssertEqual(AuthError(.invalidCredential).wire.reason, "authError")
        XCTAssertEqual(AuthError(.routeNotFound).wire, ErrorWire(http: 404, reason: "notFound", message: "Not Found"))
        XCTAssertEqual(AuthError(.methodNotAllowed).wire.http, 405)
        XCTAssertEqual(AuthError.internalError().wire, ErrorWire(http: 500, reason: "backendError", message: "Internal error encountered."))
        XCTAssertEqual(AuthError.internalError().wire.status, "INTERNAL")
    }

    func testScenarioCodesGetTheirStatuses() {
        XCTAssertEqual(Emulator.scenarioError("INTERNAL_ERROR").wire.http, 500)
        XCTAssertEqual(Emulator.scenarioError("UNAVAILABLE : try later").wire, ErrorWire(http: 503, reason: "invalid", message: "UNAVAILABLE : try later"))
        XCTAssertEqual(Emulator.scenarioError("QUOTA_EXCEEDED").wire.http, 400)
    }

    func testTheErrorRemembersWhereItWasRaised() {
        let e = AuthError(.userNotFound); let line = #line
        XCTAssertEqual(e.line, UInt(line))
        XCTAssertTrue("\(e.file)".hasSuffix("ErrorWireTests.swift"))
        XCTAssertEqual(AuthError.invalidArgument("x").line, UInt(#line))
    }

    func testTheServersOwnFailuresRenderInTheEnvelope() throws {
        let r = PhoneAuthApp.renderHTTPError(HTTPParseError(status: 431, message: "Request header fields too large."))
        XCTAssertEqual(r.status, 431)
        let json = try JSONParser.parse(r.body)
        XCTAssertEqual(json["error"]?["status"], "OUT_OF_RANGE")
        XCTAssertEqual(json["error"]?["code"], 431)
        XCTAssertEqual(json["error"]?["message"], "Request header fields too large.")
    }

    /// The connection cap's 503, rendered by the API for the server: the bytes the server wrote itself before.
    func testTheConnectionCapRefusalIsTheEnvelopeItWas() {
        var bytes: [UInt8] = []
        PhoneAuthApp.renderHTTPError(.tooManyConnections).serialize(into: &bytes, keepAlive: false, versionMinor: 1, headOnly: false)
        let body = #"{"error":{"code":503,"message":"Too many connections from this address.","errors":[{"message":"Too many connections from this address.","domain":"global","reason":"backendError"}],"status":"UNAVAILABLE"}}"#
        XCTAssertEqual(String(decoding: bytes, as: UTF8.self),
                       "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)")
    }

    /// A blocking function that could not be used is a 500 by a typed flag, never by its message's text.
    func testServerFaultsAreTypedNotReadFromTheirText() {
        let down = BlockingFunctions.deadlineExceeded(uri: "http://f")
        XCTAssertEqual(down.wire, ErrorWire(http: 500, reason: "backendError",
                                            message: "BLOCKING_FUNCTION_ERROR_RESPONSE : ((Deadline exceeded making request to http://f.))"))
        XCTAssertEqual(BlockingFunctions.requestFailed(uri: "http://f").wire.http, 500)
        // The same words in a function's own answer (an HttpsError it chose) stay the client's 400.
        let said = AuthError(.blockingFunctionErrorResponse, "((Deadline exceeded making request to http://f.))")
        XCTAssertEqual(said.wire, ErrorWire(http: 400, reason: "invalid", message: said.description))
        XCTAssertEqual(BlockingFunctions.httpError(uri: "http://f", status: 400, body: Array("((Failed to make request".utf8)).wire.http, 400)
    }

    /// The one mapping of thrown errors (the loop, the pools, blocking-function flows): an AuthError stays itself (an
    /// internal failure is logged with where it was raised), anything else is logged and becomes an internal error.
    func testAnyThrownErrorMapsOnce() {
        struct Odd: Error {}
        let logs = MemoryLogSink()
        let logger = Logger(label: "t", sink: logs)
        XCTAssertEqual(AuthError.answering(AuthError(.userNotFound), logger: logger).code, .userNotFound)
        XCTAssertTrue(logs.all.isEmpty, "a client's error is not an internal one")
        XCTAssertEqual(AuthError.answering(Odd(), logger: logger, context: [("path", "/x")]).code, .internalFailure)
        XCTAssertEqual(AuthError.answering(AuthError.internalError("disk"), logger: logger).code, .internalFailure)
        XCTAssertEqual(logs.all.count, 2)
        XCTAssertTrue(logs.all[0].contains("Odd") && logs.all[0].contains("/x"), logs.all[0])
        XCTAssertTrue(logs.all[1].contains("ErrorWireTests.swift"), "where it was raised: \(logs.all[1])")
        XCTAssertEqual(Reply(error: AuthError(.tenantNotFound)).status, 404)
    }
}
