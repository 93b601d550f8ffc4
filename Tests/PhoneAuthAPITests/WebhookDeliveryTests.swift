import Dispatch
import EmulatorSupport
import HTTPServer
import JWT
@testable import PhoneAuthAPI
@testable import PhoneAuthCore
import PhoneAuthTestSupport
import XCTest

/// A receiver behind the dispatcher's `send`: records every request, answers what `answer` says (which may block).
final class FakeReceiver: @unchecked Sendable {
    let requests = Locked<[PushRequest]>([])
    let answer: Locked<@Sendable (PushRequest, Int) -> PushResponse>
    init(_ answer: @escaping @Sendable (PushRequest, Int) -> PushResponse = { _, _ in .status(200) }) { self.answer = Locked(answer) }

    var send: @Sendable (PushRequest) -> PushResponse {
        { [self] r in
            let n = requests.withLock { $0.append(r); return $0.count }
            return answer.withLock { $0 }(r, n)
        }
    }

    var bodies: [JSON] { requests.withLock { $0.map { (try? JSONParser.parse($0.body)) ?? .null } } }
    var count: Int { requests.withLock { $0.count } }
}

final class WebhookDeliveryTests: XCTestCase, AppCalling {
    static let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    var app: PhoneAuthApp!
    var receiver: FakeReceiver!

    func makeApp(_ receiver: FakeReceiver, limits: WebhookDispatcher.Limits = fastLimits()) {
        self.receiver = receiver
        let emulator = makeTestEmulator(projectId: "demo-phone", seed: 26, logger: .quiet)
        let dispatcher = WebhookDispatcher(emulator: emulator, logger: .quiet, limits: limits, wallSeconds: { 1_800_000_123 },
                                           send: receiver.send)
        app = PhoneAuthApp(emulator: emulator, tokens: TokenService(mode: .rs256, initialKey: TestKeys.signingKey), signingPool: nil,
                           logger: .quiet, webhooks: dispatcher)
    }

    static func fastLimits() -> WebhookDispatcher.Limits {
        var l = WebhookDispatcher.Limits()
        l.backoffBaseMillis = 1
        l.maxBackoffMillis = 4
        l.threads = 2
        return l
    }

    override func tearDown() {
        app?.webhooks.shutdown()
        super.tearDown()
    }

    func configure(_ events: String, tenant: String? = nil, file: StaticString = #filePath, line: UInt = #line) {
        let path = "/emulator/v1/projects/demo-phone\(tenant.map { "/tenants/\($0)" } ?? "")/config"
        let r = call("PATCH", path, #"{"events": \#(events)}"#)
        XCTAssertEqual(r.0, 200, "\(r.1)", file: file, line: line)
    }

    func hook(types: String? = nil, id: String = "t") -> String {
        #"{"webhooks": [{"id": "\#(id)", "url": "http://127.0.0.1:9/hook", "secret": "\#(Self.secret)"\#(types.map { #", "types": \#($0)"# } ?? "")}]}"#
    }

    /// Waits (bounded) until `condition` holds; the test then asserts on counts, never on how long it took.
    func eventually(_ what: String, _ condition: () -> Bool, file: StaticString = #filePath, line: UInt = #line) {
        for _ in 0..<2000 {
            if condition() { return }
            usleep(5_000)
        }
        XCTFail("never: \(what)", file: file, line: line)
    }

    @discardableResult
    func signIn(_ tenant: String? = nil) -> String {
        let t = tenant.map { #", "tenantId": "\#($0)""# } ?? ""
        let sent = itk("sendVerificationCode", #"{"phoneNumber": "+16505554567"\#(t)}"#)
        let session = sent.1["sessionInfo"]?.stringValue ?? ""
        let r = itk("signInWithPhoneNumber", #"{"sessionInfo": "\#(session)", "code": "123456"\#(t)}"#)
        XCTAssertEqual(r.0, 200, "\(r.1)")
        return r.1["localId"]?.stringValue ?? ""
    }

    func status(_ tenant: String? = nil) -> JSON {
        call("GET", "/emulator/v1/projects/demo-phone\(tenant.map { "/tenants/\($0)" } ?? "")/webhooks").1
    }

    // MARK: delivery

    func testEveryEventOnceInOrderWithTheStreamsJSONAndASignature() throws {
        makeApp(FakeReceiver())
        configure(hook())
        for _ in 0..<20 { signIn() }
        let key = StoreKey(projectId: "demo-phone")
        let published = app.emulator.events.log(key, pinned: false).retained
        // From the config change that named the hook on (it is resolved as that change is published).
        let expected = Array(published.drop { $0.type != "config.changed" })
        XCTAssertEqual(expected.count, 1 + 4 + 19 * 3, "config.changed, code.sent, code.verified, user.created (the first time), tokens.issued")
        eventually("every event delivered") { receiver.count >= expected.count }
        usleep(20_000)
        let delivered = receiver.requests.withLock { $0 }
        XCTAssertEqual(delivered.count, expected.count, "each event once")
        for (r, e) in zip(delivered, expected) {
            var expected: [UInt8] = []
            e.writeJSON(key, into: &expected)
            XCTAssertEqual(r.body, expected, "the event stream's JSON, in order")
            let id = r.header("webhook-id")!, ts = r.header("webhook-timestamp")!
            XCTAssertTrue(id.hasSuffix("_\(e.id)") && !id.contains("."), id)
            XCTAssertEqual(ts, "1800000123", "the real clock, not the emulator clock")
            let key = Base64URL.decode(Self.secret.dropFirst(6))!
            let mac = hmacSHA256(key: key, data: Array("\(id).\(ts).".utf8) + r.body)
            XCTAssertEqual(r.header("webhook-signature"), "v1," + Base64URL.encodeStandard(mac))
            XCTAssertEqual(r.header("content-type"), "application/json")
            XCTAssertEqual(r.url, "http://127.0.0.1:9/hook")
        }
        eventually("counters") { status()["webhooks"]?.arrayValue?.first?["delivered"]?.int64Value == Int64(delivered.count) }
        XCTAssertEqual(status()["webhooks"]?.arrayValue?.first?["failed"], 0)
    }

    func testTheSignatureIsTheStandardWebhooksOne() {
        // The Standard Webhooks libraries' test vector.
        let headers = WebhookDispatcher.signedHeaders(id: "msg_p5jXN8AQM9LWM0D4loKWxJek", timestamp: "1614265330",
                                                      body: Array(#"{"test": 2432232314}"#.utf8),
                                                      key: Base64URL.decode("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")!)
        XCTAssertEqual(headers.first { $0.0 == "webhook-signature" }?.1, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
    }

    func testTypesFilterWhatAHookGets() {
        makeApp(FakeReceiver())
        configure(hook(types: #"["user.created"]"#))
        let uid = signIn()
        signIn()  // the same number: no new user
        eventually("the one user.created") { receiver.count >= 1 }
        XCTAssertEqual(call("DELETE", "/emulator/v1/projects/demo-phone/accounts").0, 200)
        signIn()
        eventually("the second user.created") { receiver.count >= 2 }
        XCTAssertEqual(receiver.bodies.map { $0["type"]?.stringValue }, ["user.created", "user.created"])
        XCTAssertEqual(receiver.bodies.first?["uid"]?.stringValue, uid)
    }

    func testRetriesAfterFailuresThenDelivers() {
        // The first two attempts at the first event fail (a 500, then no answer); the third succeeds.
        makeApp(FakeReceiver { _, n in n == 1 ? .status(500) : n == 2 ? .failed("no answer within 5 s") : .status(204) })
        configure(hook(types: #"["user.created", "tokens.issued"]"#))
        signIn()
        eventually("both events delivered") { status()["webhooks"]?.arrayValue?.first?["delivered"]?.int64Value == 2 }
        let bodies = receiver.bodies
        XCTAssertEqual(bodies.map { $0["type"]?.stringValue }, ["user.created", "user.created", "user.created", "tokens.issued"])
        let ids = receiver.requests.withLock { $0.map { $0.header("webhook-id") } }
        XCTAssertEqual(Set(ids.prefix(3)).count, 1, "a retry keeps the webhook id")
        let s = status()["webhooks"]?.arrayValue?.first
        XCTAssertEqual(s?["attempts"], 4)
        XCTAssertEqual(s?["failed"], 0)
        XCTAssertEqual(s?["lastStatus"], 204)
    }

    func testGivesUpAfterMaxAttemptsAndGoesOn() {
        var limits = Self.fastLimits()
        limits.maxAttempts = 3
        makeApp(FakeReceiver { r, _ in (try? JSONParser.parse(r.body))?["type"]?.stringValue == "user.created" ? .status(500) : .status(200) },
                limits: limits)
        configure(hook(types: #"["user.created", "tokens.issued"]"#))
        signIn()
        eventually("the next event delivered") { status()["webhooks"]?.arrayValue?.first?["delivered"]?.int64Value == 1 }
        XCTAssertEqual(receiver.bodies.map { $0["type"]?.stringValue }, ["user.created", "user.created", "user.created", "tokens.issued"])
        XCTAssertEqual(status()["webhooks"]?.arrayValue?.first?["failed"], 1)
    }

    func testBackoffGrowsAndIsJittered() {
        makeApp(FakeReceiver())
        var limits = WebhookDispatcher.Limits()
        limits.backoffBaseMillis = 500
        limits.maxBackoffMillis = 30_000
        let d = WebhookDispatcher(emulator: app.emulator, logger: .quiet, limits: limits)
        for attempt in 1...10 {
            let base = min(30_000, 500 << (attempt - 1))
            let samples = (0..<50).map { _ in d.backoffMillis(afterAttempt: attempt) }
            XCTAssertTrue(samples.allSatisfy { $0 >= Int64(base / 2) && $0 < Int64(base * 3 / 2) }, "\(attempt): \(samples)")
            XCTAssertGreaterThan(Set(samples).count, 1, "jittered")
        }
    }

    // MARK: a receiver that hangs

    func testAHangingReceiverCostsABoundedQueueAndNoSignIn() {
        let gate = DispatchSemaphore(value: 0)
        var limits = Self.fastLimits()
        limits.queueCapacity = 50
        makeApp(FakeReceiver { _, n in
            if n == 1 { gate.wait() }  // the first delivery hangs until released
            return .status(200)
        }, limits: limits)
        configure(hook(types: #"["user.created"]"#))
        signIn()
        eventually("the first delivery in flight") { receiver.count == 1 }
        // A flood while the receiver hangs: every user creation succeeds, the queue stays at its capacity.
        var created: [String] = []
        for i in 0..<400 {
            let r = call("POST", "/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts", #"{"localId": "u\#(i)"}"#,
                         headers: [("Authorization", "Bearer owner")])
            XCTAssertEqual(r.0, 200)
            created.append("u\(i)")
        }
        let s = status()["webhooks"]?.arrayValue?.first
        XCTAssertEqual(s?["queued"], 50)
        XCTAssertEqual(s?["dropped"], 350)
        XCTAssertEqual(s?["inFlight"], true)
        XCTAssertEqual(app.webhooks.queuedTotal.load(ordering: .relaxed), 50)
        gate.signal()
        // Released: the receiver hears how many it missed, then the newest 50, in order.
        eventually("the rest delivered") { receiver.count == 1 + 1 + 50 }
        let bodies = receiver.bodies
        XCTAssertEqual(bodies[1]["type"], "dropped")
        XCTAssertEqual(bodies[1]["count"], 350)
        XCTAssertNil(bodies[1]["id"])
        XCTAssertEqual(bodies[2...].map { $0["uid"]?.stringValue ?? "" }, Array(created.suffix(50)))
        eventually("counted") { status()["webhooks"]?.arrayValue?.first?["delivered"]?.int64Value == 51 }
        XCTAssertEqual(app.webhooks.queuedTotal.load(ordering: .relaxed), 0)
    }

    func testTheServerWideBoundRefusesWhenAQueueHasNothingToDrop() {
        let gate = DispatchSemaphore(value: 0)
        var limits = Self.fastLimits()
        limits.queueCapacity = 1000
        limits.maxQueuedTotal = 10
        makeApp(FakeReceiver { _, n in
            if n == 1 { gate.wait() }
            return .status(200)
        }, limits: limits)
        configure(#"{"webhooks": [{"id": "a", "url": "http://127.0.0.1:9/a", "secret": "\#(Self.secret)", "types": ["user.created"]},"#
                  + #"{"id": "b", "url": "http://127.0.0.1:9/b", "secret": "\#(Self.secret)", "types": ["user.deleted"]}]}"#)
        signIn()
        eventually("a's first delivery in flight") { receiver.count == 1 }
        for i in 0..<30 {
            XCTAssertEqual(call("POST", "/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts", #"{"localId": "u\#(i)"}"#,
                                headers: [("Authorization", "Bearer owner")]).0, 200)
        }
        XCTAssertEqual(app.webhooks.queuedTotal.load(ordering: .relaxed), 10)
        let a = status()["webhooks"]?.arrayValue?.first { $0["id"] == "a" }
        XCTAssertEqual(a?["queued"], 10)
        XCTAssertEqual(a?["dropped"], 20)
        gate.signal()
        eventually("drained") { app.webhooks.queuedTotal.load(ordering: .relaxed) == 0 && status()["webhooks"]?.arrayValue?.first?["inFlight"] == false }
    }

    // MARK: configuration changes and tenants

    func testARemovedHookStopsAndAnAddedOneStartsAtOnce() {
        makeApp(FakeReceiver())
        configure(hook(types: #"["user.created"]"#))
        signIn()
        eventually("delivered") { receiver.count == 1 }
        configure(#"{"webhooks": []}"#)
        XCTAssertEqual(status()["webhooks"], [])
        XCTAssertEqual(call("DELETE", "/emulator/v1/projects/demo-phone/accounts").0, 200)
        signIn()
        configure(hook(types: #"["user.created"]"#, id: "again"))
        XCTAssertEqual(call("DELETE", "/emulator/v1/projects/demo-phone/accounts").0, 200)
        signIn()
        eventually("the new hook's delivery") { receiver.count == 2 }
        XCTAssertEqual(status()["webhooks"]?.arrayValue?.first?["id"], "again")
    }

    func testAProjectsHookTakesItsTenantsEventsOnce() {
        makeApp(FakeReceiver())
        configure(hook(types: #"["user.created"]"#))
        // A tenant made now starts with a copy of the project's config (the same hook: one destination, one delivery)…
        signIn("tenant-a")
        // …and a tenant with a hook of its own gets both.
        configure(#"{"webhooks": [{"id": "own", "url": "http://127.0.0.1:9/own", "secret": "\#(Self.secret)", "types": ["user.created"]}]}"#,
                  tenant: "tenant-b")
        signIn("tenant-b")
        eventually("three deliveries") { receiver.count == 3 }
        let seen = receiver.requests.withLock { $0.map { "\($0.url) \((try? JSONParser.parse($0.body))?["tenant"]?.stringValue ?? "-")" } }
        XCTAssertEqual(seen.sorted(), ["http://127.0.0.1:9/hook tenant-a", "http://127.0.0.1:9/hook tenant-b", "http://127.0.0.1:9/own tenant-b"])
        XCTAssertEqual(status("tenant-b")["webhooks"]?.arrayValue?.count, 2)
    }

    func testConfigRefusalsAnswerTheErrorEnvelope() {
        makeApp(FakeReceiver())
        let r = call("PATCH", "/emulator/v1/projects/demo-phone/config", #"{"events": {"webhooks": [{"url": "https://x/", "secret": "\#(Self.secret)"}]}}"#)
        XCTAssertEqual(r.0, 400)
        XCTAssertTrue(message(r)?.contains("events.webhooks[0].url: only http://") ?? false, "\(r.1)")
        XCTAssertEqual(call("GET", "/emulator/v1/projects/demo-phone/config").1["events"], ["webhooks": []], "nothing was stored")
    }

    // MARK: the Functions emulator

    func testFunctionsEmulatorGetsCreatedAndDeletedUsersInBothFormats() throws {
        makeApp(FakeReceiver())
        configure(#"{"functionsEmulator": {"url": "http://127.0.0.1:5001"}}"#)
        let created = call("POST", "/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts",
                           #"{"localId": "fn-user", "email": "Ada@Example.com", "displayName": "Ada", "phoneNumber": "+15555550123", "password": "secret-pw"}"#,
                           headers: [("Authorization", "Bearer owner")])
        XCTAssertEqual(created.0, 200, "\(created.1)")
        XCTAssertEqual(call("POST", "/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts:update",
                            #"{"localId": "fn-user", "customAttributes": "{\"role\":\"ops\"}"}"#, headers: [("Authorization", "Bearer owner")]).0, 200)
        eventually("created, both formats") { receiver.count == 2 }
        XCTAssertEqual(call("POST", "/identitytoolkit.googleapis.com/v1/projects/demo-phone/accounts:delete", #"{"localId": "fn-user"}"#,
                            headers: [("Authorization", "Bearer owner")]).0, 200)
        eventually("deleted, both formats") { receiver.count == 4 }
        let r = receiver.requests.withLock { $0 }
        XCTAssertEqual(Set(r.map(\.url)), ["http://127.0.0.1:5001/functions/projects/demo-phone/trigger_multicast"])
        XCTAssertEqual(r.map { $0.header("content-type") ?? "" },
                       ["application/json", "application/cloudevents+json; charset=UTF-8", "application/json", "application/cloudevents+json; charset=UTF-8"])
        XCTAssertNil(r[0].header("webhook-signature"))
        let v1 = try JSONParser.parse(r[0].body)
        XCTAssertEqual(v1["eventType"], "providers/firebase.auth/eventTypes/user.create")
        XCTAssertEqual(v1["resource"], ["name": "projects/demo-phone", "service": "firebaseauth.googleapis.com"])
        XCTAssertEqual(v1["params"], .object(JSONObject()))
        XCTAssertEqual(v1["eventId"]?.stringValue?.count, 36)
        let data = try XCTUnwrap(v1["data"]?.objectValue)
        XCTAssertEqual(data["uid"], "fn-user")
        XCTAssertEqual(data["email"], "ada@example.com")
        XCTAssertEqual(data["emailVerified"], false)
        XCTAssertEqual(data["displayName"], "Ada")
        XCTAssertEqual(data["phoneNumber"], "+15555550123")
        XCTAssertEqual(data["metadata"]?["creationTime"], .string(Timestamp.rfc3339(millis: testEpochMillis)))
        XCTAssertEqual(data["providerData"]?.arrayValue?.compactMap { $0["providerId"]?.stringValue }, ["phone", "password"])
        XCTAssertNil(data["passwordHash"], "never the password hash")
        let v2 = try JSONParser.parse(r[1].body)
        XCTAssertEqual(v2["specversion"], "1.0")
        XCTAssertEqual(v2["type"], "google.firebase.auth.user.v2.created")
        XCTAssertEqual(v2["source"], "//firebaseauth.googleapis.com/projects/demo-phone")
        XCTAssertEqual(v2["id"], v1["eventId"])
        XCTAssertEqual(v2["data"]?["value"]?["uid"], "fn-user")
        XCTAssertEqual(v2["data"]?["value"]?["metadata"]?["createTime"], .string(Timestamp.rfc3339(millis: testEpochMillis)))
        // The deletion carries the record as it was (claims set after creation included), not only the uid.
        let del = try JSONParser.parse(r[2].body)
        XCTAssertEqual(del["eventType"], "providers/firebase.auth/eventTypes/user.delete")
        XCTAssertEqual(del["data"]?["email"], "ada@example.com")
        XCTAssertEqual(del["data"]?["customClaims"], ["role": "ops"])
        let del2 = try JSONParser.parse(r[3].body)
        XCTAssertEqual(del2["type"], "google.firebase.auth.user.v2.deleted")
        XCTAssertEqual(del2["data"]?["oldValue"]?["displayName"], "Ada")
        XCTAssertEqual(del2["data"]?["oldValue"]?["customClaims"], ["role": "ops"])
    }

    func testFunctionsEmulatorOneFormatOtherProjectAndTenant() throws {
        makeApp(FakeReceiver())
        configure(#"{"functionsEmulator": {"url": "http://127.0.0.1:5001/", "projectId": "demo-fn", "formats": ["v2"]}}"#)
        signIn("tenant-x")
        eventually("one CloudEvent") { receiver.count == 1 }
        signIn("tenant-x")  // no new user: nothing more
        let r = receiver.requests.withLock { $0 }
        XCTAssertEqual(r.count, 1)
        XCTAssertEqual(r[0].url, "http://127.0.0.1:5001/functions/projects/demo-fn/trigger_multicast")
        let e = try JSONParser.parse(r[0].body)
        XCTAssertEqual(e["tenantid"], "tenant-x")
        XCTAssertEqual(e["source"], "//firebaseauth.googleapis.com/projects/demo-phone")
        XCTAssertEqual(e["data"]?["value"]?["phoneNumber"], "+16505554567")
        XCTAssertEqual(status("tenant-x")["functionsEmulator"]?["delivered"], 1)
    }
}

extension PushRequest {
    func header(_ name: String) -> String? { headers.first { $0.0.lowercased() == name.lowercased() }?.1 }
}
