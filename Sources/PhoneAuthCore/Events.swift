import EmulatorSupport
import Synchronization

// # The event log
//
// Every project and tenant has an `EventLog`: a ring of its last `EventHub.capacityPerStore` events (10,000), each
// with an id from one server-wide counter (so ids increase across all stores and an id names one event) and the
// emulator clock's time. Domain code emits into the transaction that did the thing (`StoreTransaction.emit`): the
// events are published when the transaction is applied — at once without a journal, after the commit with one, never
// when it is rolled back. Events of things outside any store transaction (clock, keys) use `EventHub.emit` / `broadcast`.
//
// Emitting costs a small enum appended under the log's lock: no JSON, no strings (a session id stays 16 bytes) while
// nobody follows the store's stream. While streams follow it, each event is also rendered once per wire format in use
// (SSE, JSON lines), as it is published, into append-only chunks beside the ring; every stream copies those bytes
// (one copy per run of consecutive events), so ten readers cost one rendering and ten copies, not ten renderings.
// Events from before anyone followed (a replay) are rendered by the first reader that needs them and kept the same way.
//
// A subscriber is a cursor into its store's ring, not a copy: a reader that falls behind by more than the ring holds
// loses the oldest events, and its next read starts with how many of the events it asked for (its type filter) it
// missed (`dropped`). So a stuck subscriber costs the emitter no more than any follower (one rendering per event and
// format, shared) and memory stays at one ring per store, with its events' bytes in the formats followed. The emitter
// wakes only subscribers that said they wait (`read` found nothing), once, outside the lock.

/// What happened, with its fields (the event contract: /emulator/v1/projects/{p}/events).
public enum EventPayload: Sendable, Equatable {
    case codeSent(phoneNumber: String, kind: VerificationSession.Kind, session: SessionID, fictional: Bool, code: String)
    case codeVerified(phoneNumber: String, kind: VerificationSession.Kind, session: SessionID)
    case codeRejected(phoneNumber: String, kind: VerificationSession.Kind, session: SessionID, reason: AuthError.Code, attemptsLeft: Int32?)
    case sessionExpired(phoneNumber: String, session: SessionID)
    case userCreated(uid: String, phoneNumber: String?, email: String?, provider: String)
    case userUpdated(uid: String, fields: [String])
    case userDisabled(uid: String)
    case userEnabled(uid: String)
    case userDeleted(uid: String)
    case tokensIssued(uid: String, provider: String, secondFactor: String?)
    case tokensRefreshed(uid: String)
    case tokensRevoked(uid: String)
    case limitHit(limit: AuthError.Code, phoneNumber: String?, ip: String?)
    case appVerificationFailed(reason: AuthError.Code, phoneNumber: String?)
    case configChanged(fields: [String])
    case keysRotated(kid: String, retiredKids: [String])
    case clockChanged(offsetMillis: Int64, now: Int64)
    case mfaEnrolled(uid: String, mfaEnrollmentId: String, phoneNumber: String)
    case mfaWithdrawn(uid: String, mfaEnrollmentId: String)
    case oobSent(email: String, requestType: String, oobCode: String)
    case blockingFunctionCalled(event: String, uri: String, durationMs: Int, outcome: String)
    /// A session cookie was minted for `uid`, valid `expiresIn` seconds (never the cookie itself).
    case sessionCookieCreated(uid: String, expiresIn: Int64)
    /// The project (or tenant) was reset to its starting state, or restored from the named snapshot (Snapshots.swift).
    case projectReset(snapshot: String?)
    /// This subscriber missed `count` events (the ring overwrote them before it read them).
    case dropped(count: Int)

    /// The event's `type`.
    public var type: String {
        switch self {
        case .codeSent: "code.sent"
        case .codeVerified: "code.verified"
        case .codeRejected: "code.rejected"
        case .sessionExpired: "session.expired"
        case .userCreated: "user.created"
        case .userUpdated: "user.updated"
        case .userDisabled: "user.disabled"
        case .userEnabled: "user.enabled"
        case .userDeleted: "user.deleted"
        case .tokensIssued: "tokens.issued"
        case .tokensRefreshed: "tokens.refreshed"
        case .tokensRevoked: "tokens.revoked"
        case .limitHit: "limit.hit"
        case .appVerificationFailed: "appVerification.failed"
        case .configChanged: "config.changed"
        case .keysRotated: "keys.rotated"
        case .clockChanged: "clock.changed"
        case .mfaEnrolled: "mfa.enrolled"
        case .mfaWithdrawn: "mfa.withdrawn"
        case .oobSent: "oob.sent"
        case .blockingFunctionCalled: "blockingFunction.called"
        case .sessionCookieCreated: "sessionCookie.created"
        case .projectReset: "project.reset"
        case .dropped: "dropped"
        }
    }

    /// Every type, for validating filters.
    public static let types: [String] = [
        "code.sent", "code.verified", "code.rejected", "session.expired", "user.created", "user.updated", "user.disabled",
        "user.enabled", "user.deleted", "tokens.issued", "tokens.refreshed", "tokens.revoked", "limit.hit",
        "appVerification.failed", "config.changed", "keys.rotated", "clock.changed", "mfa.enrolled", "mfa.withdrawn",
        "oob.sent", "blockingFunction.called", "sessionCookie.created", "project.reset", "dropped",
    ]

    static func kindName(_ k: VerificationSession.Kind) -> String {
        switch k {
        case .signIn: "signIn"
        case .mfaEnrollment: "mfaEnrollment"
        case .mfaSignIn: "mfaSignIn"
        }
    }

    /// Writes the type-specific members, each preceded by a comma, in the contract's order (absent ones left out):
    /// straight into the frame, with no JSON values or arrays made (this runs once per event a stream carries).
    public func writeFields(into out: inout [UInt8]) {
        func key(_ k: StaticString) {
            out.append(UInt8(ascii: ","))
            out.append(UInt8(ascii: "\""))
            k.withUTF8Buffer { out.append(contentsOf: $0) }
            out.append(UInt8(ascii: "\""))
            out.append(UInt8(ascii: ":"))
        }
        func string(_ k: StaticString, _ v: String) { key(k); JSON.writeString(v, into: &out) }
        func optional(_ k: StaticString, _ v: String?) { if let v { string(k, v) } }
        func int(_ k: StaticString, _ v: Int64) { key(k); JSON.writeInt(v, into: &out) }
        func strings(_ k: StaticString, _ v: [String]) { key(k); JSON.writeStrings(v, into: &out) }
        func session(_ id: SessionID) {
            key("sessionInfo")
            out.append(UInt8(ascii: "\""))
            id.appendText(to: &out)
            out.append(UInt8(ascii: "\""))
        }
        switch self {
        case .codeSent(let phone, let kind, let id, let fictional, let code):
            string("phoneNumber", phone); string("kind", Self.kindName(kind)); session(id)
            key("fictional"); out.append(contentsOf: (fictional ? "true" : "false").utf8)
            if !fictional { string("code", code) }
        case .codeVerified(let phone, let kind, let id):
            string("phoneNumber", phone); string("kind", Self.kindName(kind)); session(id)
        case .codeRejected(let phone, let kind, let id, let reason, let left):
            string("phoneNumber", phone); string("kind", Self.kindName(kind)); session(id); string("reason", reason.rawValue)
            if let left { int("attemptsLeft", Int64(left)) }
        case .sessionExpired(let phone, let id):
            string("phoneNumber", phone); session(id)
        case .userCreated(let uid, let phone, let email, let provider):
            string("uid", uid); optional("phoneNumber", phone); optional("email", email); string("provider", provider)
        case .userUpdated(let uid, let fields):
            string("uid", uid); strings("fields", fields)
        case .userDisabled(let uid), .userEnabled(let uid), .userDeleted(let uid), .tokensRefreshed(let uid), .tokensRevoked(let uid):
            string("uid", uid)
        case .tokensIssued(let uid, let provider, let second):
            string("uid", uid); string("provider", provider); optional("secondFactor", second)
        case .limitHit(let limit, let phone, let ip):
            string("limit", limit.rawValue); optional("phoneNumber", phone); optional("ip", ip)
        case .appVerificationFailed(let reason, let phone):
            string("reason", reason.rawValue); optional("phoneNumber", phone)
        case .configChanged(let fields):
            strings("fields", fields)
        case .keysRotated(let kid, let retired):
            string("kid", kid); strings("retiredKids", retired)
        case .clockChanged(let offset, let now):
            int("offsetMillis", offset)
            key("now"); out.append(UInt8(ascii: "\"")); Timestamp.appendRFC3339(millis: now, into: &out); out.append(UInt8(ascii: "\""))
        case .mfaEnrolled(let uid, let id, let phone):
            string("uid", uid); string("mfaEnrollmentId", id); string("phoneNumber", phone)
        case .mfaWithdrawn(let uid, let id):
            string("uid", uid); string("mfaEnrollmentId", id)
        case .oobSent(let email, let type, let code):
            string("email", email); string("requestType", type); string("oobCode", code)
        case .blockingFunctionCalled(let event, let uri, let ms, let outcome):
            string("event", event); string("uri", uri); int("durationMs", Int64(ms)); string("outcome", outcome)
        case .sessionCookieCreated(let uid, let seconds):
            string("uid", uid); int("expiresIn", seconds)
        case .projectReset(let snapshot):
            optional("snapshot", snapshot)
        case .dropped(let count):
            int("count", Int64(count))
        }
    }
}

/// One published event.
public struct EmulatorEvent: Sendable, Equatable {
    /// Server-wide, strictly increasing (0 only for a `dropped` notice, which is not in any ring).
    public let id: UInt64
    /// The emulator clock when it was published (epoch milliseconds).
    public let time: Int64
    public let payload: EventPayload

    public var type: String { payload.type }

    public init(id: UInt64, time: Int64, payload: EventPayload) {
        self.id = id
        self.time = time
        self.payload = payload
    }

    /// The event's JSON object (`{"id", "type", "time", "project", "tenant"?, …fields}`) written into `out`, member by
    /// member (no object built: this runs once per event a stream carries). `withId: false` leaves the id out (a
    /// `dropped` notice).
    public func writeJSON(_ key: StoreKey, withId: Bool = true, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "{"))
        if withId {
            out.append(contentsOf: #""id":"#.utf8)
            JSON.writeInt(id, into: &out)
            out.append(UInt8(ascii: ","))
        }
        out.append(contentsOf: #""type":""#.utf8)
        out.append(contentsOf: payload.type.utf8)  // a fixed name: nothing to escape
        out.append(contentsOf: #"","time":""#.utf8)
        Timestamp.appendRFC3339(millis: time, into: &out)
        out.append(contentsOf: #"","project":"#.utf8)
        JSON.writeString(key.projectId, into: &out)
        if let t = key.tenantId {
            out.append(contentsOf: #","tenant":"#.utf8)
            JSON.writeString(t, into: &out)
        }
        payload.writeFields(into: &out)
        out.append(UInt8(ascii: "}"))
    }

    /// The contract's object, as a value (tests, tools): `writeJSON`'s bytes parsed, so the two never differ.
    public func json(_ key: StoreKey) -> JSON {
        var out: [UInt8] = []
        writeJSON(key, into: &out)
        return (try? JSONParser.parse(out)) ?? .null
    }
}

/// Which event types a subscriber wants: exact names, or prefixes (`user.*`). Empty: all.
public struct EventFilter: Sendable, Equatable {
    public private(set) var exact: Set<String> = []
    public private(set) var prefixes: [String] = []
    public init() {}

    /// At most this many patterns per filter.
    public static let maxPatterns = 32

    /// Parses `?type=` values (each may be a comma-separated list). A pattern is a known type, or letters and dots
    /// ending in `*` (a prefix); anything else is `INVALID_ARGUMENT`.
    public init(parsing values: [String]) throws(AuthError) {
        var seen = 0
        for v in values {
            for raw in v.split(separator: ",", omittingEmptySubsequences: true) {
                let p = raw.trimmingSpaces()
                if p.isEmpty { continue }
                seen += 1
                guard seen <= Self.maxPatterns else {
                    throw AuthError.invalidArgument("At most \(Self.maxPatterns) type filters.")
                }
                if p.hasSuffix("*") {
                    let prefix = String(p.dropLast())
                    guard prefix.utf8.count <= 64, prefix.utf8.allSatisfy({ Self.isNameByte($0) }) else {
                        throw AuthError.invalidArgument("Invalid type filter: a type (e.g. code.sent) or a prefix ending in * (e.g. user.*).")
                    }
                    if prefix.isEmpty { self = EventFilter(); return }  // `*`: everything
                    prefixes.append(prefix)
                } else {
                    guard EventPayload.types.contains(p) else {
                        throw AuthError.invalidArgument("Unknown event type \"\(Identifiers.printable(p, limit: 64))\"; known: \(EventPayload.types.joined(separator: ", ")).")
                    }
                    exact.insert(p)
                }
            }
        }
    }

    static func isNameByte(_ b: UInt8) -> Bool {
        (b >= 0x61 && b <= 0x7A) || (b >= 0x41 && b <= 0x5A) || b == UInt8(ascii: ".")
    }

    public var isAll: Bool { exact.isEmpty && prefixes.isEmpty }

    public func matches(_ type: String) -> Bool {
        if isAll || exact.contains(type) { return true }
        for p in prefixes where type.hasPrefix(p) { return true }
        return false
    }
}

/// Server-wide: the id counter, the subscriber cap, and every store's log.
public final class EventHub: Sendable {
    /// Events a store's ring keeps.
    public static let capacityPerStore = 10_000
    /// Subscribers (open event streams) in all.
    public static let maxSubscribers = 64

    public let capacity: Int
    public let maxSubscribers: Int
    let clock: EmulatorClock
    let ids = Atomic<UInt64>(0)
    let subscriberCount = Atomic<Int>(0)
    private let logs = Locked<[StoreKey: EventLog]>([:])

    public init(clock: EmulatorClock, capacity: Int = EventHub.capacityPerStore, maxSubscribers: Int = EventHub.maxSubscribers) {
        self.clock = clock
        self.capacity = max(1, capacity)
        self.maxSubscribers = max(0, maxSubscribers)
    }

    /// The log of a store (created on first use). `pinned`: a store holds it (never reclaimed while empty).
    func log(_ key: StoreKey, pinned: Bool) -> EventLog {
        logs.withLock { m in
            if let l = m[key] {
                if pinned { l.pin() }
                return l
            }
            let l = EventLog(key: key, hub: self, pinned: pinned)
            m[key] = l
            return l
        }
    }

    /// A log with no store, no events and no subscriber is dropped (subscriptions to names never used cost nothing).
    func release(_ log: EventLog) {
        logs.withLock { m in
            if m[log.key] === log, log.isDisposable { m[log.key] = nil }
        }
    }

    /// Publishes an event of `key` now (for things that happen outside a store transaction; inside one, use
    /// `StoreTransaction.emit`, which publishes only once the transaction is applied).
    public func emit(_ key: StoreKey, _ payload: EventPayload) {
        log(key, pinned: false).publish(CollectionOfOne(payload))
    }

    /// Publishes a server-wide event (clock, keys) on every store's stream that exists.
    public func broadcast(_ payload: EventPayload) {
        let all = logs.withLock { Array($0.values) }
        for l in all { l.publish(CollectionOfOne(payload)) }
    }

    /// Open subscriptions, across stores.
    public var subscribers: Int { subscriberCount.load(ordering: .relaxed) }

    /// Subscribes to `key`'s events. `since`: replay the retained events with a larger id first (nil: start live).
    /// `follow` false: the subscription ends after what is retained now. `wake` is called (from any thread, outside
    /// every lock) when an event arrives for a reader that found nothing.
    /// - Throws: `RESOURCE_EXHAUSTED` past `maxSubscribers`.
    /// `format`: how the subscriber carries events (a stream): while any live subscriber of a store uses a format, its
    /// events are rendered in it once, as they are published, and every such subscriber copies the bytes.
    public func subscribe(_ key: StoreKey, since: UInt64?, filter: EventFilter, follow: Bool,
                          format: EventWireFormat? = nil) throws(AuthError) -> EventSubscription {
        let taken = subscriberCount.wrappingAdd(1, ordering: .relaxed).newValue
        guard taken <= maxSubscribers else {
            subscriberCount.wrappingSubtract(1, ordering: .relaxed)
            throw AuthError(.resourceExhausted, "Too many event streams are open (at most \(maxSubscribers)).")
        }
        let l = log(key, pinned: false)
        return l.subscribe(since: since, filter: filter, follow: follow, format: format)
    }
}

/// How a stream carries events (the bytes a log keeps per event and format).
public enum EventWireFormat: Int, Sendable, CaseIterable {
    /// Server-Sent Events blocks.
    case sse
    /// One JSON object per line.
    case jsonl
}

/// Events as the wire carries them, appended one after another (under their log's lock) into a fixed buffer: bytes a
/// chunk holds never change, so a reader that took a reference under the lock copies them after it, and a reader
/// taking consecutive events copies them with one copy.
final class WireChunk: @unchecked Sendable {
    /// The usual size (an event larger than this gets a chunk of its own size).
    static let size = 128 * 1024
    let base: UnsafeMutableRawPointer
    let capacity: Int
    /// The chunk's number in its log: what a reader compares, without touching the reference count.
    let id: UInt64
    /// Bytes written: changed only under the log's lock; the bytes below it never change.
    var count = 0

    init(id: UInt64, capacity: Int) {
        self.id = id
        self.capacity = capacity
        base = .allocate(byteCount: capacity, alignment: 16)
    }

    deinit { base.deallocate() }
}

/// Where one event's bytes are (no chunk: not rendered in that format yet).
struct WireRef: Sendable {
    var chunk: WireChunk? = nil
    var chunkID: UInt64 = 0
    var start: Int32 = 0
    var end: Int32 = 0
}

extension EmulatorEvent {
    /// The event as a stream carries it: an SSE block (`id:`, `event:`, `data:`) or one JSON line. A `dropped`
    /// notice is not a logged event: it has no id (and no `id:` line, so `Last-Event-ID` stays on the last event).
    public func render(_ key: StoreKey, format: EventWireFormat, into out: inout [UInt8]) {
        var withId = true
        if case .dropped = payload { withId = false }
        switch format {
        case .jsonl:
            writeJSON(key, withId: withId, into: &out)
            out.append(0x0A)
        case .sse:
            if withId {
                out.append(contentsOf: "id: ".utf8)
                JSON.writeInt(id, into: &out)
                out.append(0x0A)
            }
            out.append(contentsOf: "event: ".utf8)
            out.append(contentsOf: type.utf8)
            out.append(contentsOf: "\ndata: ".utf8)
            writeJSON(key, withId: withId, into: &out)
            out.append(0x0A)
            out.append(0x0A)
        }
    }
}

/// One store's ring of events and its subscribers.
public final class EventLog: Sendable {
    public let key: StoreKey
    private unowned let hub: EventHub

    struct Sub {
        var cursor: UInt64
        /// Ends here (`follow=false`); nil: live.
        var until: UInt64?
        var dropped = 0
        var needsWake = false
        var wake: (@Sendable () -> Void)? = nil
        let filter: EventFilter
        /// The format it carries events in (nil: it takes events, not bytes).
        let format: EventWireFormat?
    }

    struct State {
        /// `ring[seq % capacity]`; grows to `capacity`.
        var ring: [EmulatorEvent] = []
        /// Each event as the wire carries it, per `EventWireFormat`, beside `ring`: rendered once when published while
        /// live subscribers use the format (or by the first reader, for events from before), copied by every reader.
        var rendered: [[WireRef]] = Array(repeating: [], count: EventWireFormat.allCases.count)
        /// The chunk being filled, per format (kept while the ring references it or a follower may come back: at most
        /// one partly filled chunk per format per store).
        var chunk: [WireChunk?] = Array(repeating: nil, count: EventWireFormat.allCases.count)
        /// Chunks made so far (their ids).
        var chunks: UInt64 = 0
        /// Live (following) subscribers per format: a publish renders in the formats that have some.
        var live: [Int] = Array(repeating: 0, count: EventWireFormat.allCases.count)
        /// Reused for rendering under the lock.
        var scratch: [UInt8] = []
        /// The sequence number (per log) of the oldest retained event.
        var first: UInt64 = 0
        var subs: [ObjectIdentifier: Sub] = [:]
        /// Subscribers with `needsWake` set: a publish looks at the subscribers only when some wait.
        var waiting = 0
        /// At most every subscriber's cursor: an evicted event can concern a subscriber only when it is at or past
        /// this (readers keep up under load, so publishes do not walk the subscribers for every event).
        var lowestCursor: UInt64 = .max
        var pinned: Bool
        var next: UInt64 { first + UInt64(ring.count) }

        /// Stores `bytes` as event `slot`'s in format `f`, after what the format's chunk holds (a new chunk when it
        /// is full).
        mutating func store(_ bytes: UnsafeRawBufferPointer, format f: Int, slot: Int) {
            var c = chunk[f]
            if c == nil || c!.capacity - c!.count < bytes.count {
                chunks &+= 1
                c = WireChunk(id: chunks, capacity: Swift.max(WireChunk.size, bytes.count))
                chunk[f] = c
            }
            let target = c!
            let start = target.count
            if let b = bytes.baseAddress, bytes.count > 0 { (target.base + start).copyMemory(from: b, byteCount: bytes.count) }
            target.count = start + bytes.count
            rendered[f][slot] = WireRef(chunk: target, chunkID: target.id, start: Int32(start), end: Int32(target.count))
        }
    }
    private let state: Locked<State>

    init(key: StoreKey, hub: EventHub, pinned: Bool) {
        self.key = key
        self.hub = hub
        state = Locked(State(pinned: pinned))
    }

    func pin() { state.withLock { $0.pinned = true } }

    var isDisposable: Bool { state.withLock { !$0.pinned && $0.ring.isEmpty && $0.subs.isEmpty } }

    /// Chunks made for rendered bytes so far (tests: nothing is rendered while nobody follows).
    var chunksMade: UInt64 { state.withLock { $0.chunks } }

    /// Retained events (tests and diagnostics).
    public var retained: [EmulatorEvent] {
        state.withLock { s in (s.first..<s.next).map { s.ring[Int($0 % UInt64(hub.capacity))] } }
    }

    /// Appends events with fresh ids and the clock's time; wakes waiting subscribers (after the lock).
    func publish<C: Collection>(_ payloads: C) where C.Element == EventPayload {
        guard !payloads.isEmpty else { return }
        let time = hub.clock.nowMillis()
        let cap = hub.capacity
        var wakes: [@Sendable () -> Void] = []
        state.withLock { s in
            for p in payloads {
                let event = EmulatorEvent(id: hub.ids.wrappingAdd(1, ordering: .relaxed).newValue, time: time, payload: p)
                if s.ring.count < cap {
                    s.ring.append(event)
                    for f in s.rendered.indices { s.rendered[f].append(WireRef()) }
                } else {
                    let slot = Int(s.first % UInt64(cap))
                    if !s.subs.isEmpty && s.lowestCursor <= s.first {
                        // The oldest event leaves: readers that had not read it missed it.
                        let gone = s.ring[slot], seq = s.first
                        var lowest = UInt64.max
                        for k in Array(s.subs.keys) {
                            guard var sub = s.subs[k] else { continue }
                            if sub.cursor <= seq {
                                if sub.filter.matches(gone.type) && (sub.until.map { seq < $0 } ?? true) { sub.dropped += 1 }
                                sub.cursor = seq + 1
                                s.subs[k] = sub
                            }
                            lowest = min(lowest, sub.cursor)
                        }
                        s.lowestCursor = lowest
                    }
                    s.ring[slot] = event
                    for f in s.rendered.indices where s.rendered[f][slot].chunkID != 0 { s.rendered[f][slot] = WireRef() }
                    s.first += 1
                }
                // Rendered now, once, in each format live readers use (none listening: nothing rendered).
                for f in EventWireFormat.allCases where s.live[f.rawValue] > 0 {
                    let slot = Int((s.next - 1) % UInt64(cap))
                    var scratch = s.scratch
                    s.scratch = []
                    scratch.removeAll(keepingCapacity: true)
                    event.render(key, format: f, into: &scratch)
                    scratch.withUnsafeBytes { s.store($0, format: f.rawValue, slot: slot) }
                    s.scratch = scratch
                }
                if s.waiting > 0 {
                    for (k, var sub) in s.subs where sub.needsWake && sub.until == nil && sub.filter.matches(p.type) {
                        sub.needsWake = false
                        s.waiting -= 1
                        if let w = sub.wake { wakes.append(w) }
                        s.subs[k] = sub
                    }
                }
            }
        }
        for w in wakes { w() }
    }

    func subscribe(since: UInt64?, filter: EventFilter, follow: Bool, format: EventWireFormat?) -> EventSubscription {
        let sub = EventSubscription(log: self)
        state.withLock { s in
            var cursor = s.next
            if let since {
                // The first retained event with a larger id (ids increase along the ring).
                var lo = s.first, hi = s.next
                let cap = UInt64(hub.capacity)
                while lo < hi {
                    let mid = lo + (hi - lo) / 2
                    if s.ring[Int(mid % cap)].id <= since { lo = mid + 1 } else { hi = mid }
                }
                cursor = lo
            }
            s.subs[ObjectIdentifier(sub)] = Sub(cursor: cursor, until: follow ? nil : s.next, filter: filter,
                                                format: follow ? format : nil)
            if follow, let f = format { s.live[f.rawValue] += 1 }
            s.lowestCursor = min(s.lowestCursor, cursor)
        }
        return sub
    }

    func setWake(_ sub: EventSubscription, _ wake: (@Sendable () -> Void)?) {
        state.withLock { s in s.subs[ObjectIdentifier(sub)]?.wake = wake }
    }

    /// Up to `max` matching events after `sub`'s cursor. With a `format`, events already rendered in it are appended
    /// to `out` here (in order; the batch stops before a rendered event that follows unrendered ones), and only the
    /// others come back, for the caller to render and `keep`; a subscriber that missed events then gets the count
    /// alone first (`dropped`, no events), so its notice precedes what follows.
    func read(_ sub: EventSubscription, max: Int, format: EventWireFormat?, into out: inout [UInt8]) -> EventSubscription.Batch {
        let cap = UInt64(hub.capacity)
        let scanLimit = 4096
        // Rendered bytes are taken by reference under the lock (one per run of consecutive bytes in a chunk) and
        // copied after it: readers on other loops and the emitters wait for the lock, not for the copies.
        var rendered: [WireRef] = []
        var lastChunkID: UInt64 = 0
        defer {
            for r in rendered {
                if let c = r.chunk {
                    out.append(contentsOf: UnsafeRawBufferPointer(start: c.base + Int(r.start), count: Int(r.end - r.start)))
                }
            }
        }
        return state.withLock { s -> EventSubscription.Batch in
            guard var me = s.subs[ObjectIdentifier(sub)] else { return .init(events: [], sequence: [], dropped: 0, status: .finished) }
            let dropped = me.dropped
            me.dropped = 0
            if dropped > 0 && format != nil {
                // Its notice goes before any bytes appended below: report it alone.
                s.subs[ObjectIdentifier(sub)] = me
                return .init(events: [], sequence: [], dropped: dropped, status: .more)
            }
            var events: [EmulatorEvent] = []
            var sequence: [UInt64] = []
            var taken = 0
            if me.cursor < s.first { me.cursor = s.first }
            let end = min(s.next, me.until ?? s.next)
            var scanned = 0
            let all = me.filter.isAll
            scan: while me.cursor < end && taken < max && scanned < scanLimit {
                let slot = Int(me.cursor % cap)
                if all || me.filter.matches(s.ring[slot].type) {
                    if let f = format?.rawValue, s.rendered[f][slot].chunkID != 0 {
                        if !events.isEmpty { break scan }  // render those first, to keep the order
                        let chunkID = s.rendered[f][slot].chunkID, start = s.rendered[f][slot].start
                        if lastChunkID == chunkID, rendered[rendered.count - 1].end == start {
                            rendered[rendered.count - 1].end = s.rendered[f][slot].end  // the bytes right after
                        } else {
                            rendered.append(s.rendered[f][slot])
                            lastChunkID = chunkID
                        }
                    } else {
                        events.append(s.ring[slot])
                        sequence.append(me.cursor)
                    }
                    taken += 1
                }
                me.cursor += 1
                scanned += 1
            }
            let status: EventSubscription.Status
            if me.cursor < end {
                status = .more
            } else if me.until != nil {
                status = .finished
            } else {
                status = taken == 0 && dropped == 0 ? .waiting : .more
                if status == .waiting && !me.needsWake {
                    me.needsWake = true
                    s.waiting += 1
                }
            }
            s.subs[ObjectIdentifier(sub)] = me
            return .init(events: events, sequence: sequence, dropped: dropped, status: status)
        }
    }

    /// Keeps the bytes of events a reader just rendered, in `format`, for the next readers: `bytes` holds them in
    /// order, event `k` ending at `ends[k]` (those no longer in the ring at their `sequence`, or rendered meanwhile,
    /// are skipped).
    func keep(_ events: [EmulatorEvent], sequence: [UInt64], format: EventWireFormat, bytes: [UInt8], ends: [Int]) {
        guard !events.isEmpty else { return }
        let cap = UInt64(hub.capacity)
        state.withLock { s in
            let f = format.rawValue
            let shared = s.live[f] > 0
            let open = s.chunk[f]
            if !shared {
                // Nobody follows in this format (a replay): one chunk of just these bytes, and the format's open chunk
                // stays open for the next follower (replacing it would pin a new one per follow again).
                s.chunks &+= 1
                s.chunk[f] = WireChunk(id: s.chunks, capacity: Swift.max(1, bytes.count))
            }
            defer { if !shared { s.chunk[f] = open } }
            bytes.withUnsafeBytes { all in
                var start = 0
                for k in events.indices {
                    let q = sequence[k]
                    defer { start = ends[k] }
                    guard q >= s.first, q < s.next else { continue }
                    let slot = Int(q % cap)
                    if s.ring[slot].id == events[k].id && s.rendered[f][slot].chunkID == 0 {
                        s.store(UnsafeRawBufferPointer(rebasing: all[start..<ends[k]]), format: f, slot: slot)
                    }
                }
            }
        }
    }

    func cancel(_ sub: EventSubscription) -> Bool {
        let removed = state.withLock { s -> Bool in
            guard let gone = s.subs.removeValue(forKey: ObjectIdentifier(sub)) else { return false }
            if gone.needsWake { s.waiting -= 1 }
            // The format's open chunk stays when its last follower leaves: the next follower appends to it (a chunk
            // per follow would pin 128 KiB per event for a store followed and left over and over).
            if let f = gone.format { s.live[f.rawValue] -= 1 }
            if s.subs.isEmpty { s.lowestCursor = .max }
            return true
        }
        if removed { hub.release(self) }
        return removed
    }

    fileprivate var hubRef: EventHub { hub }
}

/// A reader of one store's events (an open stream). Cancel it when done (the stream closes it).
public final class EventSubscription: Sendable {
    public let log: EventLog
    private let cancelled = Atomic<Bool>(false)

    init(log: EventLog) { self.log = log }

    public enum Status: Sendable, Equatable {
        /// More is ready now: read again.
        case more
        /// Nothing now: `wake` will be called when something arrives.
        case waiting
        /// A `follow=false` subscription read everything it was to read (or it was cancelled).
        case finished
    }

    public struct Batch: Sendable {
        /// Events to render (with a format: those nobody rendered yet; `keep` them once rendered).
        public let events: [EmulatorEvent]
        /// Each event's place in the log (for `keep`).
        public let sequence: [UInt64]
        /// Events this subscriber missed since its last read (report it first; such a batch has no events).
        public let dropped: Int
        public let status: Status
    }

    /// What to call when an event arrives after a read that found nothing (nil: nobody to wake).
    public func setWake(_ wake: (@Sendable () -> Void)?) { log.setWake(self, wake) }

    /// Up to `max` events after the last read (matching the filter).
    public func read(max: Int) -> Batch {
        var none: [UInt8] = []
        return log.read(self, max: max, format: nil, into: &none)
    }

    /// Up to `max` events after the last read: those already rendered in `format` are appended to `out`, the others
    /// returned to render (then `keep`).
    public func read(max: Int, format: EventWireFormat, into out: inout [UInt8]) -> Batch {
        log.read(self, max: max, format: format, into: &out)
    }

    /// Keeps the bytes of events this reader rendered (in order, event `k` ending at `ends[k]` of `bytes`) for the
    /// other readers.
    public func keep(_ events: [EmulatorEvent], sequence: [UInt64], format: EventWireFormat, bytes: [UInt8], ends: [Int]) {
        log.keep(events, sequence: sequence, format: format, bytes: bytes, ends: ends)
    }

    /// Ends the subscription (idempotent): it leaves the log and frees its slot under the server cap.
    public func cancel() {
        guard !cancelled.exchange(true, ordering: .acquiringAndReleasing) else { return }
        _ = log.cancel(self)
        log.hubRef.subscriberCount.wrappingSubtract(1, ordering: .relaxed)
    }

    deinit { cancel() }
}

extension StoreTransaction {
    /// Emits what changed between two versions of a user: `user.updated` (the changed fields), `user.disabled` /
    /// `user.enabled`, `tokens.revoked` (a later `validSince`). Login and refresh times are not "changes".
    mutating func emitUserChanges(from old: UserRecord, to new: UserRecord) {
        let fields = box.userFields.changedFields(from: old, to: new)
        if !fields.isEmpty { emit(.userUpdated(uid: new.localId, fields: fields)) }
        if old.disabled != new.disabled { emit(new.disabled ? .userDisabled(uid: new.localId) : .userEnabled(uid: new.localId)) }
        if let v = new.validSince, v > (old.validSince ?? Int64.min) { emit(.tokensRevoked(uid: new.localId)) }
    }

    /// Emits `config.changed` with the top-level config keys whose value changed (nothing when none did).
    mutating func emitConfigChange(from old: ProjectConfig, to new: ProjectConfig, tenantChanged: Bool = false) {
        var fields: [String] = []
        if old != new, case .object(let a) = old.toJSON(), case .object(let b) = new.toJSON() {
            for (k, v) in b where a[k] != v { fields.append(k) }
            for (k, _) in a where b[k] == nil { fields.append(k) }
        }
        if tenantChanged { fields.append("tenant") }
        if !fields.isEmpty { emit(.configChanged(fields: fields)) }
    }
}
