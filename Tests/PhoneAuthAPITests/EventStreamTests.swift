import EmulatorSupport
import HTTPServer
@testable import PhoneAuthAPI
import PhoneAuthCore
import PhoneAuthTestSupport
import Dispatch
import Synchronization
import XCTest

final class EventStreamTests: XCTestCase, AppCalling {
    var app: PhoneAuthApp!
    override func setUp() { app = makeTestApp(seed: 15) }

    /// The response to a stream request, and everything its source yields right now (as the event loop pulls it).
    func open(_ target: String, headers: [(String, String)] = []) -> (HTTPResponse, HTTPStreamBody?) {
        var h = HTTPHeaders()
        for (k, v) in headers { h.add(k, v) }
        let resp = app.respond(to: HTTPRequest(method: "GET", target: target, headers: h), context: .detached)!
        if let s = resp.stream { s.source.attach { } }
        return (resp, resp.stream)
    }

    func drain(_ s: HTTPStreamBody) -> (String, HTTPStreamPull) {
        var out: [UInt8] = []
        var r = HTTPStreamPull.more
        while r == .more { r = s.source.pull(into: &out, limit: 1 << 16) }
        return (String(decoding: out, as: UTF8.self), r)
    }

    let base = "/emulator/v1/projects/demo-phone/events"

    func testDecimalIdsOnTheWire() {
        for n: UInt64 in [0, 7, 9, 10, 99, 100, 12_345, 1 << 32, UInt64.max] {
            var out: [UInt8] = [0x41]
            JSON.writeInt(n, into: &out)
            XCTAssertEqual(String(decoding: out, as: UTF8.self), "A" + String(n))
        }
        for n: Int64 in [0, -1, 9, -10, 1 << 40, Int64.max, Int64.min] {
            var out: [UInt8] = []
            JSON.writeInt(n, into: &out)
            XCTAssertEqual(String(decoding: out, as: UTF8.self), String(n))
        }
    }

    func testServerSentEventsCarryIdTypeAndOneLineOfJSON() throws {
        let (resp, stream) = open(base)
        XCTAssertEqual(resp.status, 200)
        XCTAssertTrue(resp.headers.contains { $0.0 == "Content-Type" && $0.1.hasPrefix("text/event-stream") })
        let s = try XCTUnwrap(stream)
        XCTAssertEqual(String(decoding: s.keepAlive, as: UTF8.self), ": keep-alive\n\n")
        XCTAssertEqual(s.keepAliveSeconds, 15)
        XCTAssertEqual(drain(s).1, .waiting, "live: nothing yet")
        let sent = itk("sendVerificationCode", #"{"phoneNumber":"+15551239999"}"#)
        let session = try XCTUnwrap(sent.1["sessionInfo"]?.stringValue)
        let (text, state) = drain(s)
        XCTAssertEqual(state, .waiting)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        XCTAssertEqual(lines[0], "id: 1")
        XCTAssertEqual(lines[1], "event: code.sent")
        XCTAssertTrue(lines[2].hasPrefix("data: {"))
        XCTAssertTrue(text.hasSuffix("\n\n"))
        let json = try JSONParser.parse(Array(lines[2].dropFirst(6).utf8))
        XCTAssertEqual(json["id"], 1)
        XCTAssertEqual(json["type"], "code.sent")
        XCTAssertEqual(json["project"], "demo-phone")
        XCTAssertEqual(json["time"]?.stringValue, Timestamp.rfc3339(millis: testEpochMillis))
        XCTAssertEqual(json["sessionInfo"]?.stringValue, session)
        XCTAssertEqual(json["phoneNumber"], "+15551239999")
        XCTAssertEqual(json["fictional"], false)
        XCTAssertNotNil(json["code"]?.stringValue)
        s.source.detach()
        XCTAssertEqual(app.emulator.events.subscribers, 0)
    }

    func testJSONLinesReplayAfterLastEventIdFilterAndClose() throws {
        for n in 0..<3 { _ = itk("sendVerificationCode", #"{"phoneNumber":"+1555123000\#(n)"}"#) }
        _ = call("PATCH", "/emulator/v1/projects/demo-phone/config", #"{"phoneAuth":{"codeLength":6}}"#)
        _ = call("POST", "/emulator/v1/clock:advance", #"{"seconds":5}"#)
        let (resp, stream) = open(base + "?format=jsonl&follow=false", headers: [("Last-Event-ID", "1")])
        XCTAssertTrue(resp.headers.contains { $0.0 == "Content-Type" && $0.1.hasPrefix("application/x-ndjson") })
        let (text, state) = drain(try XCTUnwrap(stream))
        XCTAssertEqual(state, .finished)
        let events = text.split(separator: "\n").map { try! JSONParser.parse(Array($0.utf8)) }
        XCTAssertEqual(events.map { $0["id"]?.int64Value }, [2, 3, 4])
        XCTAssertEqual(events.map { $0["type"]?.stringValue }, ["code.sent", "code.sent", "clock.changed"])
        XCTAssertEqual(events[2]["offsetMillis"], 5000)

        let (_, typed) = open(base + "?format=jsonl&follow=false&since=0&type=clock.changed,config.*")
        let t = drain(try XCTUnwrap(typed)).0.split(separator: "\n").map { try! JSONParser.parse(Array($0.utf8))["type"]?.stringValue }
        XCTAssertEqual(t, ["clock.changed"], "the PATCH changed nothing (codeLength was 6): no config.changed")
    }

    func testBadParametersAndTheSubscriberCapAnswerGoogleErrors() throws {
        XCTAssertEqual(call("GET", base + "?format=xml").0, 400)
        XCTAssertEqual(call("GET", base + "?since=-1").0, 400)
        XCTAssertEqual(call("GET", base + "?since=abc").0, 400)
        XCTAssertEqual(call("GET", base + "?follow=maybe").0, 400)
        XCTAssertEqual(call("GET", base + "?type=nope").0, 400)
        XCTAssertEqual(call("GET", "/emulator/v1/projects/bad%20id/events").0, 400)
        var held: [EventSubscription] = []
        for _ in 0..<EventHub.maxSubscribers {
            held.append(try app.emulator.events.subscribe(StoreKey(projectId: "demo-phone"), since: nil, filter: EventFilter(), follow: true))
        }
        let r = call("GET", base)
        XCTAssertEqual(r.0, 429)
        XCTAssertEqual(r.1["error"]?["status"], "RESOURCE_EXHAUSTED")
        held.removeLast().cancel()
        XCTAssertEqual(call("GET", base).0, 200)
    }

    func testATenantStreamHasOnlyItsTenantsEvents() throws {
        let tid = "t1"
        try app.emulator.admit(StoreKey(projectId: "demo-phone", tenantId: tid), create: true, explicit: true)
        _ = itk("sendVerificationCode", #"{"phoneNumber":"+15551231111","tenantId":"\#(tid)"}"#)
        _ = itk("sendVerificationCode", #"{"phoneNumber":"+15551232222"}"#)
        let (_, ts) = open("/emulator/v1/projects/demo-phone/tenants/\(tid)/events?format=jsonl&follow=false&since=0")
        let events = drain(try XCTUnwrap(ts)).0.split(separator: "\n").map { try! JSONParser.parse(Array($0.utf8)) }
        XCTAssertEqual(events.map { $0["phoneNumber"]?.stringValue }, ["+15551231111"])
        XCTAssertEqual(events.first?["tenant"]?.stringValue, tid)
    }

    /// A project's history is bounded by bytes (`EventHub.bytesPerStore`), not a count: a stream that follows but does
    /// not read while the project's events pass the bound gets a `dropped` event with how many it missed (no id: its
    /// `Last-Event-ID` stays on the last event it got), then the retained events in order; a replay from an id before
    /// the history starts at its oldest event.
    func testAStreamThatFellBehindTheByteBoundIsToldWhatItMissed() throws {
        let (_, stream) = open(base)  // live SSE, rendering every event as it is published
        let s = try XCTUnwrap(stream)
        let sends = 3000
        for _ in 0..<sends { XCTAssertEqual(itk("sendVerificationCode", #"{"phoneNumber":"+16505554567"}"#).0, 200) }
        let look = try app.emulator.events.subscribe(StoreKey(projectId: "demo-phone"), since: 0, filter: EventFilter(), follow: false)
        defer { look.cancel() }
        let history = look.log
        XCTAssertLessThanOrEqual(history.bytes, EventHub.bytesPerStore)
        XCTAssertLessThanOrEqual(app.emulator.events.retainedBytes, EventHub.bytesInAll)
        let kept = history.retained
        XCTAssertGreaterThan(kept.count, 100)
        XCTAssertLessThan(kept.count, sends, "3,000 rendered sends are more than 512 KiB")
        let (text, state) = drain(s)
        XCTAssertEqual(state, .waiting)
        let blocks = text.split(separator: "\n\n").map(String.init)
        XCTAssertTrue(blocks[0].hasPrefix("event: dropped\ndata: {"), blocks[0])
        let notice = try JSONParser.parse(Array(blocks[0].dropFirst("event: dropped\ndata: ".count).utf8))
        XCTAssertEqual(notice["count"]?.int64Value, Int64(sends - kept.count))
        XCTAssertNil(notice["id"])
        let ids = blocks.dropFirst().map { b in UInt64(b.split(separator: "\n")[0].dropFirst("id: ".count))! }
        XCTAssertEqual(ids, kept.map { $0.id }, "then every retained event, in order")
        s.source.detach()

        let (_, replay) = open(base + "?format=jsonl&follow=false", headers: [("Last-Event-ID", "1")])
        let lines = drain(try XCTUnwrap(replay)).0.split(separator: "\n").map { try! JSONParser.parse(Array($0.utf8)) }
        XCTAssertEqual(lines.map { UInt64($0["id"]?.int64Value ?? 0) }, kept.map { $0.id }, "from the oldest retained event")
    }

    /// `createSessionCookie` is a `sessionCookie.created` on the project's (or tenant's) stream with the uid and the
    /// validity in seconds, never the cookie; a refused one (bad duration, bad ID token) is no event.
    func testASessionCookieIsAnEventWithItsUidAndDurationButNotTheCookie() throws {
        func signIn(_ extra: String) throws -> JSON {
            let session = try XCTUnwrap(itk("sendVerificationCode", #"{"phoneNumber":"+16505554567"\#(extra)}"#).1["sessionInfo"]?.stringValue)
            let r = itk("signInWithPhoneNumber", #"{"sessionInfo":"\#(session)","code":"123456"\#(extra)}"#)
            XCTAssertEqual(r.0, 200, "\(r.1)")
            return r.1
        }
        let admin = [("Authorization", "Bearer owner")]
        let user = try signIn("")
        let idToken = try XCTUnwrap(user["idToken"]?.stringValue)
        let create = "/identitytoolkit.googleapis.com/v1/projects/demo-phone:createSessionCookie"
        let made = call("POST", create, #"{"idToken":"\#(idToken)","validDuration":"600"}"#, headers: admin)
        XCTAssertEqual(made.0, 200, "\(made.1)")
        let cookie = try XCTUnwrap(made.1["sessionCookie"]?.stringValue)
        XCTAssertEqual(call("POST", create, #"{"idToken":"\#(idToken)","validDuration":"60"}"#, headers: admin).0, 400)
        XCTAssertEqual(call("POST", create, #"{"idToken":"not-a-token"}"#, headers: admin).0, 400)
        XCTAssertEqual(call("POST", create, #"{"idToken":"\#(idToken)"}"#, headers: admin).0, 200)

        let (_, stream) = open(base + "?format=jsonl&follow=false&since=0&type=sessionCookie.*")
        let text = drain(try XCTUnwrap(stream)).0
        XCTAssertFalse(text.contains(cookie), "the cookie itself is never in an event")
        let events = text.split(separator: "\n").map { try! JSONParser.parse(Array($0.utf8)) }
        XCTAssertEqual(events.map { $0["type"]?.stringValue }, ["sessionCookie.created", "sessionCookie.created"])
        XCTAssertEqual(events.map { $0["expiresIn"]?.int64Value }, [600, 1_209_600])
        XCTAssertTrue(events.allSatisfy { $0["uid"] == user["localId"] && $0["project"] == "demo-phone" && $0["tenant"] == nil })
        XCTAssertEqual(Set(events[0].objectValue?.keys.map { $0 } ?? []), ["id", "type", "time", "project", "uid", "expiresIn"])

        // A tenant's cookie is on the tenant's stream only.
        try app.emulator.admit(StoreKey(projectId: "demo-phone", tenantId: "t1"), create: true, explicit: true)
        let tenantUser = try signIn(#","tenantId":"t1""#)
        let tenantToken = try XCTUnwrap(tenantUser["idToken"]?.stringValue)
        XCTAssertEqual(call("POST", "/identitytoolkit.googleapis.com/v1/projects/demo-phone/tenants/t1:createSessionCookie",
                            #"{"idToken":"\#(tenantToken)","validDuration":300}"#, headers: admin).0, 200)
        let (_, ts) = open("/emulator/v1/projects/demo-phone/tenants/t1/events?format=jsonl&follow=false&since=0&type=sessionCookie.created")
        let tenantEvents = drain(try XCTUnwrap(ts)).0.split(separator: "\n").map { try! JSONParser.parse(Array($0.utf8)) }
        XCTAssertEqual(tenantEvents.map { $0["expiresIn"]?.int64Value }, [300])
        XCTAssertEqual(tenantEvents.first?["uid"], tenantUser["localId"])
        XCTAssertEqual(tenantEvents.first?["tenant"], "t1")
        let (_, again) = open(base + "?format=jsonl&follow=false&since=0&type=sessionCookie.created")
        XCTAssertEqual(drain(try XCTUnwrap(again)).0.split(separator: "\n").count, 2, "not on the project's stream")
    }

    /// Every blocking-function call is a `blockingFunction.called` with its outcome: ok, blocked (an HttpsError, 4xx
    /// with `{"error"}`), error (a reply we refuse, an unreachable function) or timeout.
    func testBlockingFunctionCallsAreEventsWithTheirOutcome() throws {
        let functions = FunctionServer()
        let server = HTTPServer(configuration: .init(host: "127.0.0.1", port: 0, eventLoops: 1, policy: ConnectionPolicy()),
                                responder: functions, logger: Logger(label: "fn", level: .critical))
        let fn = "http://127.0.0.1:\(try server.start())"
        let emulator = makeTestEmulator(projectId: "demo-phone", seed: 16, logger: .quiet)
        app = PhoneAuthApp(emulator: emulator, tokens: TokenService(mode: .rs256, initialKey: TestKeys.signingKey), signingPool: nil,
                           logger: .quiet, blocking: BlockingCalls(timeoutMillis: 300, threads: 2, maxInFlight: 8))
        defer {
            functions.release()
            app.blocking.shutdown()
            server.shutdown()
        }
        func signUp(_ trigger: String, _ uri: String) -> Int {
            let cfg = #"{"blockingFunctions":{"triggers":{"\#(trigger)":{"functionUri":"\#(uri)"}}}}"#
            XCTAssertEqual(call("PATCH", "/identitytoolkit.googleapis.com/v2/projects/demo-phone/config?updateMask=blockingFunctions", cfg,
                                headers: [("Authorization", "Bearer owner")]).0, 200)
            let req = HTTPRequest(method: "POST", target: "/identitytoolkit.googleapis.com/v1/accounts:signUp?key=k",
                                  headers: HTTPHeaders(), body: Array("{}".utf8), remoteAddress: "127.0.0.9")
            let box = Locked<Int>(0)
            let done = DispatchSemaphore(value: 0)
            if let now = app.respond(to: req, deliver: { r in box.withLock { $0 = r.status }; done.signal() }) { return now.status }
            XCTAssertEqual(done.wait(timeout: .now() + 60), .success, "no answer")
            return box.withLock { $0 }
        }
        XCTAssertEqual(signUp("beforeCreate", fn + "/create"), 200)
        XCTAssertEqual(signUp("beforeCreate", fn + "/block"), 400)
        XCTAssertEqual(signUp("beforeCreate", fn + "/nomask"), 400)
        XCTAssertEqual(signUp("beforeCreate", fn + "/hang"), 500)
        XCTAssertEqual(signUp("beforeCreate", "http://127.0.0.1:1/nothing"), 500)

        let (_, stream) = open(base + "?format=jsonl&follow=false&since=0&type=blockingFunction.called")
        let events = drain(try XCTUnwrap(stream)).0.split(separator: "\n").map { try! JSONParser.parse(Array($0.utf8)) }
        XCTAssertEqual(events.map { $0["outcome"]?.stringValue }, ["ok", "blocked", "error", "timeout", "error"])
        XCTAssertEqual(events.map { $0["uri"]?.stringValue },
                       [fn + "/create", fn + "/block", fn + "/nomask", fn + "/hang", "http://127.0.0.1:1/nothing"])
        XCTAssertTrue(events.allSatisfy { $0["event"] == "beforeCreate" && ($0["durationMs"]?.int64Value ?? -1) >= 0 })
    }
}
