import Dispatch
import EmulatorSupport
import HTTPServer
import JWT
import PhoneAuthCore
import Synchronization

// # Delivering pushed events (PhoneAuthCore/Webhooks.swift has the config and the queue)
//
// `WebhookDispatcher` is the `EventHub`'s push sink. For each publish it answers the store's route (cached per store;
// one atomic load when no config anywhere names a webhook), and the route hands each event, under the event log's
// lock and so in the log's order, to its destinations: each destination (`PushTarget`, one per webhook or Functions
// emulator, per project: a project's hook also takes its tenants' events, and a tenant's copy of it is the same
// destination) appends it to its own bounded queue — O(1), no store lock, no I/O, no thread woken unless the
// destination was idle. Nothing a destination does can slow the publisher: when its queue is full (a receiver that
// hangs or fails) its oldest pending event is dropped and counted.
//
// Delivery runs on the dispatcher's own few threads (started with the first destination), never on an event loop:
// one delivery in flight per destination, so its events arrive in order; each attempt has a deadline; a failed
// attempt (no answer, a non-2xx status) is retried with exponential backoff and jitter (from the emulator's
// `RandomSource`) on the monotonic clock — real time, not the emulator clock, which tests move — up to
// `maxAttempts`, then given up (counted, logged) and the next event goes. A delivery waiting for its retry holds no
// thread. Nothing is persisted: queued deliveries die with the process.

/// One HTTP request to a destination (what the injected `send` performs).
public struct PushRequest: Sendable {
    public let url: String
    public let headers: [(String, String)]
    public let body: [UInt8]
    public let timeoutSeconds: Double
}

/// A destination's answer: a status, or no answer (the error text).
public enum PushResponse: Sendable {
    case status(Int)
    case failed(String)
}

public final class WebhookDispatcher: DeletedUserSink {
    public struct Limits: Sendable {
        /// Delivery threads shared by every destination.
        public var threads = 4
        /// Each attempt's deadline (connect, send and the whole answer).
        public var attemptTimeoutMillis = 5_000
        /// Attempts per event (the first and the retries).
        public var maxAttempts = 5
        /// Backoff before retry n (n ≥ 1): `base · 2^(n-1)`, at most `maxBackoffMillis`, times a jitter in [0.5, 1.5).
        public var backoffBaseMillis = 500
        public var maxBackoffMillis = 30_000
        /// Pending events per destination; more drop the oldest.
        public var queueCapacity = 10_000
        /// Pending events across every destination; past it a destination drops its oldest (or refuses the event).
        public var maxQueuedTotal = 100_000
        /// How long a store's resolved route is trusted without a config change (a tenant deleted and made again).
        public var routeRecheckMillis: Int64 = 1_000
        /// Stores whose routes are remembered.
        public var maxCachedRoutes = 4096
        public init() {}
    }

    public let limits: Limits
    private let emulatorRef: WeakEmulator
    private let logger: Logger
    private let random: any RandomSource
    /// Unix seconds of the real clock: `webhook-timestamp`, which receivers check against their own clock.
    private let wallSeconds: @Sendable () -> Int64
    /// Milliseconds of a monotonic clock: deadlines and backoff.
    let monotonicMillis: @Sendable () -> Int64
    private let send: @Sendable (PushRequest) -> PushResponse
    /// Eight hex digits, new each start: webhook ids (`evt_<boot>_<event id>`) stay unique across restarts, where
    /// event ids start over.
    let boot: String

    private struct Schedule {
        var ready: BoundedQueue<PushTarget>
        var timers: [(due: Int64, target: PushTarget)] = []
        var threads: [NativeThread] = []
        var stopping = false
    }
    private let schedule: Locked<Schedule>
    private let wake = DispatchSemaphore(value: 0)

    private struct Routes {
        var byStore: [StoreKey: Cached] = [:]
        /// Destinations by identity (project and spec), so a tenant's copy of a project's hook is the same queue.
        var targets: [TargetKey: WeakTarget] = [:]
    }
    private struct Cached {
        let route: PushRoute?
        let checkedAt: Int64
        let generation: UInt64
    }
    private let routes = Locked(Routes())
    /// Events queued across destinations (against `maxQueuedTotal`).
    let queuedTotal = Atomic<Int>(0)

    public init(emulator: Emulator, logger: Logger, limits: Limits = Limits(),
                wallSeconds: @escaping @Sendable () -> Int64 = { Timestamp.systemMillis() / 1000 },
                monotonicMillis: @escaping @Sendable () -> Int64 = { Int64(HTTPClient.monotonicSeconds() * 1000) },
                send: @escaping @Sendable (PushRequest) -> PushResponse = WebhookDispatcher.httpSend) {
        self.limits = limits
        emulatorRef = WeakEmulator(emulator)
        self.logger = logger
        random = emulator.random
        self.wallSeconds = wallSeconds
        self.monotonicMillis = monotonicMillis
        self.send = send
        boot = emulator.random.bytes(4).map { b in String(b, radix: 16).count == 1 ? "0" + String(b, radix: 16) : String(b, radix: 16) }.joined()
        schedule = Locked(Schedule(ready: BoundedQueue(capacity: 1 << 20)))
    }

    /// Performs a request with the emulator's HTTP client (its deadline bounds the whole exchange).
    public static let httpSend: @Sendable (PushRequest) -> PushResponse = { r in
        do throws(HTTPClient.ClientError) {
            let resp = try HTTPClient.send(method: "POST", url: r.url, headers: r.headers, body: r.body,
                                           timeout: r.timeoutSeconds, deadline: r.timeoutSeconds, maxResponseBytes: 64 << 10)
            return .status(resp.status)
        } catch {
            return .failed(error.timedOut ? "no answer within \(r.timeoutSeconds) s" : error.description)
        }
    }

    /// Stops the delivery threads (each after the attempt it is making); what is queued is not delivered.
    public func shutdown() {
        let threads = schedule.withLock { s -> [NativeThread] in
            s.stopping = true
            let t = s.threads
            s.threads = []
            return t
        }
        for _ in threads { wake.signal() }
        for t in threads { t.detach() }  // an attempt in flight ends by its deadline; nobody waits for it
    }

    // MARK: routes

    public func route(_ key: StoreKey) -> (any EventPushRoute)? {
        guard PushHint.mayBeConfigured else { return nil }
        return resolvedRoute(key)
    }

    /// The store's route, from the cache while no config changed (and for at most `routeRecheckMillis`).
    func resolvedRoute(_ key: StoreKey) -> PushRoute? {
        let generation = PushHint.generation
        let now = monotonicMillis()
        if let c = routes.withLock({ $0.byStore[key] }), c.generation == generation, now - c.checkedAt < limits.routeRecheckMillis {
            return c.route
        }
        return refresh(key, generation: generation, now: now)
    }

    /// Reads the store's (and, for a tenant, its project's) `events` config and caches the destinations it names.
    private func refresh(_ key: StoreKey, generation: UInt64, now: Int64) -> PushRoute? {
        guard let emulator = emulatorRef.value else { return nil }
        let own = Self.eventsConfig(emulator, key)
        let project = key.tenantId == nil ? nil : Self.eventsConfig(emulator, StoreKey(projectId: key.projectId))
        var specs: [TargetSpec] = []
        for config in [project, own] {
            guard let config else { continue }
            for h in config.webhooks where !specs.contains(.webhook(h)) { specs.append(.webhook(h)) }
        }
        if let f = own?.functionsEmulator ?? project?.functionsEmulator { specs.append(.functions(f)) }
        return routes.withLock { r -> PushRoute? in
            var targets: [PushTarget] = []
            for spec in specs {
                let id = TargetKey(projectId: key.projectId, spec: spec)
                if let t = r.targets[id]?.target, !t.isRetired {
                    targets.append(t)
                } else {
                    let t = PushTarget(spec: spec, projectId: key.projectId, dispatcher: self)
                    r.targets[id] = WeakTarget(target: t)
                    targets.append(t)
                }
            }
            let route = targets.isEmpty ? nil : PushRoute(targets)
            let old = r.byStore[key]?.route
            if r.byStore.count >= limits.maxCachedRoutes && r.byStore[key] == nil {
                r.byStore = r.byStore.filter { $0.value.route != nil }  // forget stores without destinations first
                if r.byStore.count >= limits.maxCachedRoutes { r.byStore = [:] }
            }
            r.byStore[key] = Cached(route: route, checkedAt: now, generation: generation)
            // Destinations this store no longer names, and no other store names either, stop (their queue goes).
            if let old {
                for t in old.targets where !targets.contains(where: { $0 === t }) {
                    let stillUsed = r.byStore.values.contains { c in c.route?.targets.contains { $0 === t } ?? false }
                    if !stillUsed {
                        t.retire()
                        r.targets = r.targets.filter { $0.value.target != nil && $0.value.target !== t }
                    }
                }
            }
            r.targets = r.targets.filter { $0.value.target != nil }
            return route
        }
    }

    /// A store's `events` config, read under its lock without waiting for durability (this runs on commit paths,
    /// where a wait could be for the very commit that runs it). A store that does not exist has none.
    private static func eventsConfig(_ emulator: Emulator, _ key: StoreKey) -> EventsPushConfig? {
        guard let box = emulator.existingStore(key) else { return nil }
        let c = try? box.withLock { s throws(AuthError) -> EventsPushConfig in s.config.events }
        return c.flatMap { $0.isEmpty ? nil : $0 }
    }

    public func userDeleted(_ key: StoreKey, _ user: UserRecord) {
        guard let route = resolvedRoute(key), let emulator = emulatorRef.value else { return }
        let event = EmulatorEvent(id: 0, time: emulator.clock.nowMillis(), payload: .userDeleted(uid: user.localId))
        for t in route.targets where t.isFunctions { t.offer(PushItem(key: key, event: event, deletedUser: user)) }
    }

    /// The destinations `key`'s events go to now, with their counters (`GET …/webhooks`).
    func status(_ key: StoreKey) -> JSON {
        let route = PushHint.mayBeConfigured ? resolvedRoute(key) : nil
        var hooks: [JSON] = []
        var functions: JSON? = nil
        for t in route?.targets ?? [] {
            if t.isFunctions { functions = t.statusJSON } else { hooks.append(t.statusJSON) }
        }
        var o: JSONObject = ["webhooks": .array(hooks)]
        if let functions { o["functionsEmulator"] = functions }
        return .object(o)
    }

    // MARK: scheduling

    /// `target` has work now: a thread takes it.
    func makeReady(_ target: PushTarget) {
        schedule.withLock { s in
            s.ready.append(target)
            startThreadsIfNeeded(&s)
        }
        wake.signal()
    }

    /// `target` retries at `due` (monotonic milliseconds); no thread waits for it meanwhile.
    func retry(_ target: PushTarget, at due: Int64) {
        schedule.withLock { s in s.timers.append((due, target)) }
        wake.signal()  // a sleeping thread recomputes how long it may sleep
    }

    private func startThreadsIfNeeded(_ s: inout Schedule) {
        guard s.threads.isEmpty, !s.stopping else { return }
        for _ in 0..<max(1, limits.threads) {
            s.threads.append(NativeThread.start { [self] in self.work() })
        }
    }

    private func work() {
        while let target = nextTarget() { target.runOnce() }
    }

    /// The next destination with work (a due retry first moves to the ready ones); nil once stopping.
    private func nextTarget() -> PushTarget? {
        while true {
            let (target, sleepMillis) = schedule.withLock { s -> (PushTarget?, Int64) in
                if s.stopping { return (nil, -1) }
                let now = monotonicMillis()
                var soonest = Int64.max
                if !s.timers.isEmpty {
                    var keep: [(due: Int64, target: PushTarget)] = []
                    for t in s.timers {
                        if t.due <= now { s.ready.append(t.target) } else { keep.append(t); soonest = min(soonest, t.due) }
                    }
                    s.timers = keep
                }
                if let t = s.ready.popFirst() { return (t, 0) }
                return (nil, soonest == .max ? 1_000 : max(1, min(1_000, soonest - now)))
            }
            if let target { return target }
            if sleepMillis < 0 { return nil }
            _ = wake.wait(timeout: .now() + .milliseconds(Int(sleepMillis)))
        }
    }

    /// Milliseconds before retry `attempt` (the attempt that failed, from 1): exponential, capped, with jitter.
    func backoffMillis(afterAttempt attempt: Int) -> Int64 {
        let exp = min(Int64(limits.maxBackoffMillis), Int64(limits.backoffBaseMillis) << min(20, max(0, attempt - 1)))
        let r = random.bytes(2)
        let unit = Double(Int(r[0]) << 8 | Int(r[1])) / 65_536  // [0, 1)
        return max(1, Int64(Double(exp) * (0.5 + unit)))
    }

    // MARK: requests

    /// The request(s) that deliver `item` to `spec` now (a webhook: one, signed; the Functions emulator: one per
    /// format). Empty: nothing to send for it.
    func requests(for item: PushTarget.Pending, spec: TargetSpec) -> [PushRequest] {
        let timeout = Double(limits.attemptTimeoutMillis) / 1000
        switch spec {
        case .webhook(let hook):
            var body: [UInt8] = []
            let id: String
            if let count = item.droppedCount {
                EmulatorEvent(id: 0, time: item.item.event.time, payload: .dropped(count: count)).writeJSON(item.item.key, withId: false, into: &body)
                id = "evt_\(boot)_dropped_\(item.item.event.id)"
            } else {
                item.item.event.writeJSON(item.item.key, into: &body)
                id = "evt_\(boot)_\(item.item.event.id)"
            }
            let timestamp = String(wallSeconds())
            return [PushRequest(url: hook.url, headers: Self.signedHeaders(id: id, timestamp: timestamp, body: body, key: hook.key),
                                body: body, timeoutSeconds: timeout)]
        case .functions(let f):
            guard let emulator = emulatorRef.value else { return [] }
            let key = item.item.key
            let deleted = item.item.deletedUser
            let user: UserRecord
            if let deleted {
                user = deleted
            } else {
                guard case .userCreated(let uid, let phone, let email, _) = item.item.event.payload else { return [] }
                let stored = try? emulator.existingStore(key)?.withLock { s throws(AuthError) -> UserRecord? in s.users[uid] }
                if let stored = stored ?? nil {
                    user = stored
                } else {  // deleted before we got to it: what the event says
                    var u = UserRecord(localId: uid, createdAt: item.item.event.time)
                    u.phoneNumber = phone
                    u.email = email
                    u.tenantId = key.tenantId
                    user = u
                }
            }
            let path = "\(f.url)/functions/projects/\(f.projectId ?? key.projectId)/trigger_multicast"
            var out: [PushRequest] = []
            let eventId = Self.uuid(random.bytes(16))
            if f.formats.contains(.v1) {
                let body = AuthTriggerEvent.legacy(user: user, created: deleted == nil, key: key, eventId: eventId, time: item.item.event.time)
                out.append(PushRequest(url: path, headers: [("Content-Type", "application/json")], body: body, timeoutSeconds: timeout))
            }
            if f.formats.contains(.v2) {
                let body = AuthTriggerEvent.cloudEvent(user: user, created: deleted == nil, key: key, eventId: eventId, time: item.item.event.time)
                out.append(PushRequest(url: path, headers: [("Content-Type", "application/cloudevents+json; charset=UTF-8")], body: body,
                                       timeoutSeconds: timeout))
            }
            return out
        }
    }

    /// The Standard Webhooks headers: `webhook-signature` is `v1,` and the base64 HMAC-SHA256 of `id.timestamp.body`.
    static func signedHeaders(id: String, timestamp: String, body: [UInt8], key: [UInt8]) -> [(String, String)] {
        var signed = Array("\(id).\(timestamp).".utf8)
        signed.append(contentsOf: body)
        let signature = Base64URL.encodeStandard(hmacSHA256(key: key, data: signed))
        return [("Content-Type", "application/json"), ("webhook-id", id), ("webhook-timestamp", timestamp),
                ("webhook-signature", "v1,\(signature)")]
    }

    /// An RFC 4122 version-4 UUID from 16 random bytes (the official emulator's `eventId`).
    static func uuid(_ b: [UInt8]) -> String {
        var bytes = b
        bytes[6] = (bytes[6] & 0x0F) | 0x40
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        let hex = bytes.map { b in (b < 16 ? "0" : "") + String(b, radix: 16) }
        return [hex[0..<4], hex[4..<6], hex[6..<8], hex[8..<10], hex[10..<16]].map { $0.joined() }.joined(separator: "-")
    }

    func perform(_ r: PushRequest) -> PushResponse { send(r) }

    /// The emulator clock (event times), or 0 once the emulator is gone.
    func emulatorNow() -> Int64 { emulatorRef.value?.clock.nowMillis() ?? 0 }

    func log(_ level: LogLevel, _ message: String, _ fields: [(String, String)]) { logger.log(level, message, fields) }
}

/// What a destination is: a webhook, or the Functions emulator.
enum TargetSpec: Hashable, Sendable {
    case webhook(WebhookSpec)
    case functions(FunctionsEmulatorSpec)
}

struct TargetKey: Hashable {
    let projectId: String
    let spec: TargetSpec
}

struct WeakTarget {
    weak var target: PushTarget?
}

/// The emulator, not retained (it holds the hub that holds the dispatcher).
final class WeakEmulator: @unchecked Sendable {
    weak var value: Emulator?
    init(_ e: Emulator) { value = e }
}

/// A store's destinations.
final class PushRoute: EventPushRoute {
    let targets: [PushTarget]
    init(_ targets: [PushTarget]) { self.targets = targets }

    func push(_ event: EmulatorEvent, _ key: StoreKey) {
        for t in targets where t.wants(event.payload) { t.offer(PushItem(key: key, event: event)) }
    }
}

/// One destination: its queue, its one delivery in flight, its counters.
final class PushTarget: Sendable {
    let spec: TargetSpec
    let projectId: String
    private unowned let dispatcher: WebhookDispatcher

    /// A queued event, or the notice of events dropped before it.
    struct Pending: Sendable {
        let item: PushItem
        /// A `dropped` notice for this many events (a webhook's, sent before the event after them).
        var droppedCount: Int? = nil
    }

    enum Phase { case idle, ready, running, waiting }

    struct State {
        var queue: BoundedQueue<PushItem>
        var phase = Phase.idle
        var current: Pending?
        var attempt = 0
        var retired = false
        /// Dropped since the last notice went out.
        var droppedUnreported = 0
        var delivered = 0, failed = 0, dropped = 0, attempts = 0
        var lastStatus: Int?
        var lastError: String?
        var lastEventId: UInt64?
        /// When a drop was last logged (monotonic ms), and how many were dropped since.
        var dropLoggedAt = Int64.min / 2
        var droppedSinceLog = 0
        /// Dropped notices sent so far (their webhook ids).
        var notices: UInt64 = 0
    }
    private let state: Locked<State>

    init(spec: TargetSpec, projectId: String, dispatcher: WebhookDispatcher) {
        self.spec = spec
        self.projectId = projectId
        self.dispatcher = dispatcher
        state = Locked(State(queue: BoundedQueue(capacity: dispatcher.limits.queueCapacity)))
    }

    var isFunctions: Bool { if case .functions = spec { return true } else { return false } }
    var isRetired: Bool { state.withLock { $0.retired } }

    var name: String {
        switch spec {
        case .webhook(let h): h.id
        case .functions: "functionsEmulator"
        }
    }
    var url: String {
        switch spec {
        case .webhook(let h): h.url
        case .functions(let f): f.url
        }
    }

    /// Whether this destination takes `payload` (a webhook: its types; the Functions emulator: created users — deleted
    /// ones reach it with their record through `userDeleted`).
    func wants(_ payload: EventPayload) -> Bool {
        switch spec {
        case .webhook(let h): return h.filter.matches(payload.type)
        case .functions:
            if case .userCreated = payload { return true }
            return false
        }
    }

    /// Queues `item` (under the publishing log's lock: O(1), no I/O); wakes a delivery thread if this was idle.
    func offer(_ item: PushItem) {
        let limits = dispatcher.limits
        var logDrop: Int? = nil
        var evicted: PushItem? = nil  // released after the lock
        let becameReady = state.withLock { s -> Bool in
            guard !s.retired else { return false }
            var drop = s.queue.count >= s.queue.capacity
            if !drop {
                if dispatcher.queuedTotal.wrappingAdd(1, ordering: .relaxed).newValue > limits.maxQueuedTotal {
                    dispatcher.queuedTotal.wrappingSubtract(1, ordering: .relaxed)
                    if s.queue.isEmpty {
                        // Nothing of ours to drop: this event is refused.
                        noteDrop(&s, &logDrop)
                        return false
                    }
                    drop = true
                }
            }
            if drop {
                noteDrop(&s, &logDrop)
                // Over the server-wide bound: our oldest leaves to make room (a full queue drops it in `append`).
                if s.queue.count < s.queue.capacity { evicted = s.queue.popFirst() }
            }
            if let oldest = s.queue.append(item) { evicted = oldest }
            guard s.phase == .idle else { return false }
            s.phase = .ready
            return true
        }
        _ = evicted
        if let n = logDrop {
            dispatcher.log(.warning, "webhook queue full: dropping the oldest pending events", [("hook", name), ("url", url),
                           ("project", projectId), ("dropped", String(n)), ("capacity", String(limits.queueCapacity))])
        }
        if becameReady { dispatcher.makeReady(self) }
    }

    private func noteDrop(_ s: inout State, _ logDrop: inout Int?) {
        s.dropped += 1
        s.droppedUnreported += 1
        s.droppedSinceLog += 1
        // The clock is read on the first drop since the last log line and every 1024th after it.
        guard s.droppedSinceLog == 1 || s.droppedSinceLog % 1024 == 0 else { return }
        let now = dispatcher.monotonicMillis()
        if now - s.dropLoggedAt >= 10_000 {
            logDrop = s.droppedSinceLog
            s.droppedSinceLog = 0
            s.dropLoggedAt = now
        }
    }

    /// Stops: what is queued goes; an attempt in flight finishes and is not retried.
    func retire() {
        let freed = state.withLock { s -> Int in
            s.retired = true
            var n = 0
            while s.queue.popFirst() != nil { n += 1 }
            return n
        }
        if freed > 0 { dispatcher.queuedTotal.wrappingSubtract(freed, ordering: .relaxed) }
    }

    /// One attempt at the current delivery (taking the next one first if there is none), on a delivery thread.
    func runOnce() {
        let taken = state.withLock { s -> (Pending, Int)? in
            if s.retired { s.phase = .idle; s.current = nil; return nil }
            if s.current == nil {
                if s.droppedUnreported > 0, !isFunctions {
                    // The receiver hears how many it missed before the events after them.
                    s.notices += 1
                    let notice = EmulatorEvent(id: s.notices, time: dispatcher.emulatorNow(),
                                               payload: .dropped(count: s.droppedUnreported))
                    s.current = Pending(item: PushItem(key: StoreKey(projectId: projectId), event: notice), droppedCount: s.droppedUnreported)
                    s.droppedUnreported = 0
                } else if let next = s.queue.popFirst() {
                    dispatcher.queuedTotal.wrappingSubtract(1, ordering: .relaxed)
                    s.current = Pending(item: next)
                } else {
                    s.droppedUnreported = 0
                    s.phase = .idle
                    return nil
                }
                s.attempt = 0
            }
            s.attempt += 1
            s.attempts += 1
            s.phase = .running
            return (s.current!, s.attempt)
        }
        guard let (pending, attempt) = taken else { return }
        var failure: String? = nil
        var status: Int? = nil
        for request in dispatcher.requests(for: pending, spec: spec) {
            switch dispatcher.perform(request) {
            case .status(let code):
                status = code
                if !(200..<300).contains(code) { failure = "HTTP \(code)" }
            case .failed(let text):
                failure = text
            }
            if failure != nil { break }
        }
        let limits = dispatcher.limits
        var retryAt: Int64? = nil
        var gaveUp = false
        let again = state.withLock { s -> Bool in
            s.lastStatus = status
            s.lastError = failure
            if failure == nil {
                if pending.droppedCount == nil {
                    s.delivered += 1
                    if pending.item.event.id != 0 { s.lastEventId = pending.item.event.id }
                }
                s.current = nil
            } else if attempt < limits.maxAttempts && !s.retired {
                s.phase = .waiting
                retryAt = dispatcher.monotonicMillis() + dispatcher.backoffMillis(afterAttempt: attempt)
                return false
            } else {
                if pending.droppedCount == nil { s.failed += 1 }
                gaveUp = true
                s.current = nil
            }
            if s.retired || (s.queue.isEmpty && s.droppedUnreported == 0) {
                s.phase = .idle
                return false
            }
            s.phase = .ready
            return true
        }
        let what = pending.droppedCount.map { "dropped notice (\($0))" } ?? "\(pending.item.event.type) \(pending.item.event.id)"
        if let failure {
            dispatcher.log(gaveUp ? .warning : .info, gaveUp ? "webhook delivery given up" : "webhook delivery failed; will retry",
                           [("hook", name), ("url", url), ("event", what), ("attempt", "\(attempt)/\(limits.maxAttempts)"), ("error", failure)])
        } else {
            dispatcher.log(.debug, "webhook delivered", [("hook", name), ("event", what), ("attempt", String(attempt))])
        }
        if let retryAt { dispatcher.retry(self, at: retryAt) }
        if again { dispatcher.makeReady(self) }
    }

    var statusJSON: JSON {
        state.withLock { s in
            var o: JSONObject = ["id": .string(name), "url": .string(url)]
            if case .webhook(let h) = spec, let types = h.types { o["types"] = .array(types.map(JSON.string)) }
            o["queued"] = .int(s.queue.count)
            o["inFlight"] = .bool(s.current != nil)
            o["delivered"] = .int(s.delivered)
            o["failed"] = .int(s.failed)
            o["dropped"] = .int(s.dropped)
            o["attempts"] = .int(s.attempts)
            o.set("lastStatus", s.lastStatus.map { .int($0) })
            o.set("lastError", s.lastError.map(JSON.string))
            o.set("lastEventId", s.lastEventId.map { .int(Int($0)) })
            return .object(o)
        }
    }
}

/// The auth trigger events firebase-tools' Functions emulator accepts on `trigger_multicast`, as its Auth emulator
/// sends them (src/emulator/auth/cloudFunctions.ts) and as Eventarc delivers v2 ones (firebase-functions
/// src/v2/providers/identity.ts unpacks them).
enum AuthTriggerEvent {
    /// `{eventId, eventType: providers/firebase.auth/eventTypes/user.create|delete, resource, params, timestamp, data}`.
    static func legacy(user: UserRecord, created: Bool, key: StoreKey, eventId: String, time: Int64) -> [UInt8] {
        let o: JSONObject = [
            "eventId": .string(eventId),
            "eventType": .string("providers/firebase.auth/eventTypes/user.\(created ? "create" : "delete")"),
            "resource": ["name": .string("projects/\(key.projectId)"), "service": "firebaseauth.googleapis.com"],
            "params": .object(JSONObject()),
            "timestamp": .string(Timestamp.rfc3339(millis: time)),
            "data": .object(userInfo(user)),
        ]
        return Array(JSON.object(o).serializedString.utf8)
    }

    /// A structured CloudEvent `google.firebase.auth.user.v2.created|deleted`: the user in `data.value` (created) or
    /// `data.oldValue` (deleted), the tenant in the `tenantid` extension.
    static func cloudEvent(user: UserRecord, created: Bool, key: StoreKey, eventId: String, time: Int64) -> [UInt8] {
        var o: JSONObject = [
            "specversion": "1.0",
            "id": .string(eventId),
            "source": .string("//firebaseauth.googleapis.com/projects/\(key.projectId)"),
            "type": .string("google.firebase.auth.user.v2.\(created ? "created" : "deleted")"),
            "time": .string(Timestamp.rfc3339(millis: time)),
            "datacontenttype": "application/json",
        ]
        if let t = key.tenantId { o["tenantid"] = .string(t) }
        o["data"] = [created ? "value" : "oldValue": .object(authEventData(user))]
        return Array(JSON.object(o).serializedString.utf8)
    }

    /// The official emulator's `UserInfoPayload` (firebase-functions' `UserRecord` wire shape): absent values left out.
    static func userInfo(_ u: UserRecord) -> JSONObject {
        var o = record(u, creationKey: "creationTime", providerIdKey: "rawId", fullProviders: true)
        o["customClaims"] = .object(u.customClaims)
        o.set("tenantId", u.tenantId.map(JSON.string))
        if !u.mfaInfo.isEmpty { o["mfaInfo"] = .array(u.mfaInfo.map(\.wireJSON)) }
        return o
    }

    /// Eventarc's `AuthEventData` (google.events.firebase.auth.v1): proto JSON names, `metadata.createTime`.
    static func authEventData(_ u: UserRecord) -> JSONObject {
        var o = record(u, creationKey: "createTime", providerIdKey: "uid", fullProviders: false)
        let claims = u.customClaims
        if !claims.isEmpty { o["customClaims"] = .object(claims) }
        return o
    }

    /// What both shapes share: the profile fields (absent ones left out), `metadata` (its creation time under
    /// `creationKey`) and `providerData` (each provider's id under `providerIdKey`; `fullProviders`: with
    /// `federatedId` and `phoneNumber`, as the official emulator's). Never the password hash.
    static func record(_ u: UserRecord, creationKey: String, providerIdKey: String, fullProviders: Bool) -> JSONObject {
        var o: JSONObject = ["uid": .string(u.localId)]
        o.set("email", u.email.map(JSON.string))
        if u.email != nil { o["emailVerified"] = .bool(u.emailVerified) }
        o.set("displayName", u.displayName.map(JSON.string))
        o.set("photoURL", u.photoUrl.map(JSON.string))
        o.set("phoneNumber", u.phoneNumber.map(JSON.string))
        if u.disabled { o["disabled"] = .bool(true) }
        var meta: JSONObject = [creationKey: .string(Timestamp.rfc3339(millis: u.createdAt))]
        meta.set("lastSignInTime", u.lastLoginAt.map { .string(Timestamp.rfc3339(millis: $0)) })
        o["metadata"] = .object(meta)
        o["providerData"] = .array(providers(u).map { p in
            var e: JSONObject = [providerIdKey: .string(p.rawId), "providerId": .string(p.providerId)]
            e.set("displayName", p.displayName.map(JSON.string))
            e.set("email", p.email.map(JSON.string))
            if fullProviders {
                e.set("federatedId", p.federatedId.map(JSON.string))
                e.set("phoneNumber", p.phoneNumber.map(JSON.string))
            }
            e.set("photoURL", p.photoURL.map(JSON.string))
            return .object(e)
        })
        return o
    }

    struct Provider {
        let providerId: String
        let rawId: String
        var displayName: String?
        var email: String?
        var federatedId: String?
        var phoneNumber: String?
        var photoURL: String?
    }

    /// The record's providers (PhoneAuthCore's `providerUserInfo`: `phone` with a number, `password` with an email
    /// and a password), as values.
    static func providers(_ u: UserRecord) -> [Provider] {
        var out: [Provider] = []
        if let p = u.phoneNumber { out.append(Provider(providerId: "phone", rawId: p, phoneNumber: p)) }
        if let e = u.email, u.passwordHash != nil {
            out.append(Provider(providerId: "password", rawId: e, displayName: u.displayName, email: e, federatedId: e, photoURL: u.photoUrl))
        }
        return out
    }
}

extension EmulatorAPI {
    /// `GET /emulator/v1/projects/{p}[/tenants/{t}]/webhooks`: where this store's events are pushed, with counters.
    static func webhooks(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        Reply(app.webhooks.status(key(call)))
    }
}
