import EmulatorSupport
import Synchronization

// # The event log
//
// Every project and tenant has an `EventLog`: a ring of its newest events, each with an id from one server-wide
// counter (so ids increase across all stores and an id names one event) and the emulator clock's time. Domain code
// emits into the transaction that did the thing (`StoreTransaction.emit`): the events are published when the
// transaction is applied — at once without a journal, after the commit with one, never when it is rolled back. Events
// of things outside any store transaction (clock, keys) use `EventHub.emit` / `broadcast`.
//
// Emitting costs a small enum appended under the log's lock: no JSON, no strings (a session id stays 16 bytes) while
// nobody follows the store's stream. While streams follow it, each event is also rendered once per wire format in use
// (SSE, JSON lines), as it is published, into append-only chunks beside the ring; every stream copies those bytes
// (one copy per run of consecutive events), so ten readers cost one rendering and ten copies, not ten renderings.
// Events from before anyone followed (a replay) are rendered by the first reader that needs them and kept the same way.
//
// The wire rendering (SSE and JSON-lines bytes, `EventWireFormat`) lives here, in the domain, on purpose: it is the
// one exception to "the API layer renders what goes on the wire". An event is rendered once, as it is published
// under the log's lock, into the chunks every stream shares; rendering in PhoneAuthAPI would mean rendering per stream
// (or a renderer injected into every log and called under its lock, for the same bytes). Measured (docs/performance.md, "Event
// streams with ten readers"), `perf record` comparing sends with and without ten readers: the readers' share went
// from about 3 µs to under 1 µs of server CPU per event once each event was rendered once here and its bytes shared.
// The API still decides everything else about a stream (route, filters, replay, headers, limits:
// PhoneAuthAPI/EventStream.swift).
//
// History is bounded by bytes and by age, not only by count, because a client can make stores (tenants on first use)
// and fill each: a store's history holds at most `EventHub.bytesPerStore` (512 KiB: its ring slots, the strings its
// events keep outside them, every chunk of rendered bytes a slot refers to, whole), at most `capacityPerStore` events,
// and nothing older than `maxAgeMillis` (24 h on the emulator clock) that no connected reader still has to read; all
// stores together hold at most `bytesInAll` (32 MiB): past it the oldest events server-wide go, whichever stores they
// are in. Nothing is allocated ahead: an empty log has no ring (it grows from 4 slots by doubling and shrinks by half
// when a quarter full), no references in a format nobody rendered, no chunk (the first is 2 KiB, each next one twice
// the last, up to 32 KiB); the hub's table lets go of a log that has neither history nor subscribers and that only the
// table holds, so a log lives as long as its store and its history (a tenant removed leaves nothing once its history
// is gone, nor does a name only subscribed to).
//
// A subscriber is a cursor into its store's ring, not a copy: a reader that falls behind by more than the bounds keep
// loses the oldest events, and its next read starts with how many of the events it asked for (its type filter) it
// missed (`dropped`), whichever bound evicted them. So a stuck subscriber costs the emitter no more than any follower
// (one rendering per event and format, shared) and memory stays within the bounds. The emitter wakes only subscribers
// that said they wait (`read` found nothing), once, outside the lock.

/// What happened, with its fields (the event contract: /emulator/v1/projects/{p}/events).
public enum EventPayload: Sendable, Equatable {
    case codeSent(phoneNumber: String, kind: VerificationSession.Kind, session: SessionID, fictional: Bool, code: String)
    case codeVerified(phoneNumber: String, kind: VerificationSession.Kind, session: SessionID)
    case codeRejected(phoneNumber: String, kind: VerificationSession.Kind, session: SessionID, reason: AuthError.Code, attemptsLeft: Int32?)
    case sessionExpired(phoneNumber: String, session: SessionID)
    case userCreated(uid: String, phoneNumber: String?, email: String?, provider: String)
    case userUpdated(uid: String, fields: [String])
    /// A federated identity (`google.com`, `oidc.x`, …) was linked to an existing user.
    case userLinked(uid: String, provider: String)
    case userDisabled(uid: String)
    case userEnabled(uid: String)
    case userDeleted(uid: String)
    case tokensIssued(uid: String, provider: String, secondFactor: String?)
    case tokensRefreshed(uid: String)
    case tokensRevoked(uid: String)
    case limitHit(limit: AuthError.Code, phoneNumber: String?, ip: String?)
    case appVerificationFailed(reason: AuthError.Code, phoneNumber: String?)
    /// reCAPTCHA SMS defense assessed a send: `verdict` `ALLOWED`, `BLOCKED` (ENFORCE) or `WOULD_BLOCK` (AUDIT).
    /// (Boxed: the event stays as small as the others.)
    indirect case recaptchaAssessed(phoneNumber: String, action: String, state: String, verdict: String, reason: String, botScore: Double?,
                           tollFraudScore: Double?)
    /// The carrier's treatment of an SMS (`phoneAuth.delivery`): `DELAYED` (arrives at `deliverAt`), `LOST`, `REJECTED`.
    case smsDelivery(phoneNumber: String, outcome: String, deliverAt: Int64?)
    case configChanged(fields: [String])
    case keysRotated(kid: String, retiredKids: [String])
    case clockChanged(offsetMillis: Int64, now: Int64)
    case mfaEnrolled(uid: String, mfaEnrollmentId: String, phoneNumber: String?)
    case mfaWithdrawn(uid: String, mfaEnrollmentId: String)
    case oobSent(email: String, requestType: String, oobCode: String)
    /// `accounts:revokeToken`: a federated provider's token revoked for a user (the token itself is never kept).
    case idpTokenRevoked(uid: String, providerId: String, tokenType: String)
    case blockingFunctionCalled(event: String, uri: String, durationMs: Int, outcome: String)
    /// A session cookie was minted for `uid`, valid `expiresIn` seconds (never the cookie itself).
    case sessionCookieCreated(uid: String, expiresIn: Int64)
    /// A client call's App Check token, checked under `UNENFORCED` or `ENFORCED` (`outcome` verified/missing/invalid).
    case appCheckChecked(outcome: String, appId: String?, refused: Bool, method: String)
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
        case .userLinked: "user.linked"
        case .userDisabled: "user.disabled"
        case .userEnabled: "user.enabled"
        case .userDeleted: "user.deleted"
        case .tokensIssued: "tokens.issued"
        case .tokensRefreshed: "tokens.refreshed"
        case .tokensRevoked: "tokens.revoked"
        case .limitHit: "limit.hit"
        case .appVerificationFailed: "appVerification.failed"
        case .recaptchaAssessed: "recaptcha.assessed"
        case .smsDelivery: "sms.delivery"
        case .configChanged: "config.changed"
        case .keysRotated: "keys.rotated"
        case .clockChanged: "clock.changed"
        case .mfaEnrolled: "mfa.enrolled"
        case .mfaWithdrawn: "mfa.withdrawn"
        case .oobSent: "oob.sent"
        case .idpTokenRevoked: "idpToken.revoked"
        case .blockingFunctionCalled: "blockingFunction.called"
        case .sessionCookieCreated: "sessionCookie.created"
        case .appCheckChecked: "appCheck.checked"
        case .projectReset: "project.reset"
        case .dropped: "dropped"
        }
    }

    /// Every type, for validating filters.
    public static let types: [String] = [
        "code.sent", "code.verified", "code.rejected", "session.expired", "user.created", "user.updated", "user.linked", "user.disabled",
        "user.enabled", "user.deleted", "tokens.issued", "tokens.refreshed", "tokens.revoked", "limit.hit",
        "appVerification.failed", "recaptcha.assessed", "sms.delivery", "config.changed", "keys.rotated", "clock.changed", "mfa.enrolled", "mfa.withdrawn",
        "oob.sent", "idpToken.revoked", "blockingFunction.called", "sessionCookie.created", "appCheck.checked", "project.reset", "dropped",
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
        case .userLinked(let uid, let provider):
            string("uid", uid); string("provider", provider)
        case .userDisabled(let uid), .userEnabled(let uid), .userDeleted(let uid), .tokensRefreshed(let uid), .tokensRevoked(let uid):
            string("uid", uid)
        case .tokensIssued(let uid, let provider, let second):
            string("uid", uid); string("provider", provider); optional("secondFactor", second)
        case .limitHit(let limit, let phone, let ip):
            string("limit", limit.rawValue); optional("phoneNumber", phone); optional("ip", ip)
        case .appVerificationFailed(let reason, let phone):
            string("reason", reason.rawValue); optional("phoneNumber", phone)
        case .recaptchaAssessed(let phone, let action, let state, let verdict, let reason, let bot, let toll):
            string("phoneNumber", phone); string("action", action); string("enforcementState", state); string("verdict", verdict)
            string("reason", reason)
            if let bot { key("botScore"); JSON.writeNumber(bot, into: &out) }
            if let toll { key("tollFraudScore"); JSON.writeNumber(toll, into: &out) }
        case .smsDelivery(let phone, let outcome, let at):
            string("phoneNumber", phone); string("outcome", outcome)
            if let at { key("deliverAt"); out.append(UInt8(ascii: "\"")); Timestamp.appendRFC3339(millis: at, into: &out); out.append(UInt8(ascii: "\"")) }
        case .configChanged(let fields):
            strings("fields", fields)
        case .keysRotated(let kid, let retired):
            string("kid", kid); strings("retiredKids", retired)
        case .clockChanged(let offset, let now):
            int("offsetMillis", offset)
            key("now"); out.append(UInt8(ascii: "\"")); Timestamp.appendRFC3339(millis: now, into: &out); out.append(UInt8(ascii: "\""))
        case .mfaEnrolled(let uid, let id, let phone):
            // A TOTP factor has no number (and its secret is never in an event): `factorId` says which kind.
            string("uid", uid); string("mfaEnrollmentId", id); optional("phoneNumber", phone); string("factorId", phone == nil ? "totp" : "phone")
        case .mfaWithdrawn(let uid, let id):
            string("uid", uid); string("mfaEnrollmentId", id)
        case .oobSent(let email, let type, let code):
            string("email", email); string("requestType", type); string("oobCode", code)
        case .idpTokenRevoked(let uid, let provider, let type):
            string("uid", uid); string("providerId", provider); string("tokenType", type)
        case .blockingFunctionCalled(let event, let uri, let ms, let outcome):
            string("event", event); string("uri", uri); int("durationMs", Int64(ms)); string("outcome", outcome)
        case .sessionCookieCreated(let uid, let seconds):
            string("uid", uid); int("expiresIn", seconds)
        case .appCheckChecked(let outcome, let appId, let refused, let method):
            string("outcome", outcome); optional("appId", appId)
            key("refused"); out.append(contentsOf: (refused ? "true" : "false").utf8)
            string("method", method)
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

/// Server-wide: the id counter, the subscriber cap, every store's log, and the bounds their history shares.
public final class EventHub: Sendable {
    /// Events a store's history keeps at most.
    public static let capacityPerStore = 10_000
    /// Bytes a store's history may hold: its ring, the strings its events keep outside it, and the chunks of bytes
    /// rendered for streams (about 3,000 events nobody rendered, or 700 rendered in both wire formats).
    public static let bytesPerStore = 512 * 1024
    /// Bytes the histories of all stores may hold together: past it the oldest events server-wide go first, whichever
    /// store they are in (1,000 tenants share it as one store does).
    public static let bytesInAll = 32 * 1024 * 1024
    /// Events older than this on the emulator clock leave history (none a connected reader has not read yet).
    public static let maxAgeMillis: Int64 = 24 * 3_600_000
    /// Subscribers (open event streams) in all.
    public static let maxSubscribers = 64

    public let capacity: Int
    public let bytesPerStore: Int
    public let bytesInAll: Int
    public let maxAgeMillis: Int64
    public let maxSubscribers: Int
    let clock: EmulatorClock
    let ids = Atomic<UInt64>(0)
    /// Bytes the history of every log in the table holds (the sum of their `bytes`; next to `ids`, which every publish
    /// touches too).
    let total = Atomic<Int>(0)
    /// When every log was last trimmed for age (emulator clock; see `settle`), and how often.
    let lastSweep: Atomic<Int64>
    let sweepEvery: Int64
    /// Set while one thread brings `total` back under `bytesInAll` (the others go on publishing).
    let enforcing = Atomic<Bool>(false)
    let subscriberCount = Atomic<Int>(0)
    /// Slots a store's ring grows to at most: the event cap, within half the store's bytes (with the references of
    /// both formats, three quarters: the ring alone never takes a store's budget; one the bytes leave a quarter full
    /// shrinks).
    let maxSlots: Int
    /// The largest chunk of rendered bytes a log fills (its first is 2 KiB; each next one twice the last).
    let maxChunk: Int
    private let logs = Locked(LogTable())

    /// Where published events are pushed besides the ring (webhooks: PhoneAuthAPI/WebhookDelivery.swift); set once.
    private let pushSink = AtomicLazyReference<EventPushSinkBox>()

    /// Installs the push sink (the first one stays). Every publish then asks it for a route first.
    public func setPushSink(_ sink: any EventPushSink) { _ = pushSink.storeIfNil(EventPushSinkBox(sink)) }

    /// The push sink, if one is installed (one atomic load).
    public var pushTarget: (any EventPushSink)? { pushSink.load()?.sink }

    public init(clock: EmulatorClock, capacity: Int = EventHub.capacityPerStore, maxSubscribers: Int = EventHub.maxSubscribers,
                bytesPerStore: Int = EventHub.bytesPerStore, bytesInAll: Int = EventHub.bytesInAll,
                maxAgeMillis: Int64 = EventHub.maxAgeMillis) {
        self.clock = clock
        self.capacity = max(1, capacity)
        self.maxSubscribers = max(0, maxSubscribers)
        self.bytesPerStore = max(1024, bytesPerStore)
        self.bytesInAll = max(self.bytesPerStore, bytesInAll)
        self.maxAgeMillis = max(1, maxAgeMillis)
        maxSlots = max(1, min(self.capacity, self.bytesPerStore / 2 / EventLog.slotBytes))
        maxChunk = max(512, min(32 * 1024, self.bytesPerStore / 16))
        lastSweep = Atomic(clock.nowMillis())
        sweepEvery = max(1000, self.maxAgeMillis / 16)
    }

    /// The log of a store (created on first use). The table holds every log; one without history or subscribers that
    /// nothing else holds (its store is gone, or it was a name only subscribed to) is removed when the table is pruned
    /// (`prune`): so a tenant removed leaves nothing behind once its history is gone. `pinned`: the caller is a store,
    /// which holds it (that alone keeps it).
    func log(_ key: StoreKey, pinned: Bool) -> EventLog {
        logs.withLock { t in
            if let l = t.entries[key] { return l }
            if t.entries.count >= t.pruneAt { t.prune() }
            let l = EventLog(key: key, hub: self, registered: true)
            t.entries[key] = l
            return l
        }
    }

    /// Removes the logs nothing but the table holds that have neither history nor subscribers. O(the table); runs
    /// when the table has doubled since (so O(1) per log made) and with the age sweep.
    func prune() { logs.withLock { $0.prune() } }

    /// The logs with history or subscribers (what the global bound and the age sweep look at).
    func heldLogs() -> [EventLog] {
        logs.withLock { t in t.entries.values.filter { $0.held.load(ordering: .relaxed) } }
    }

    /// Logs in the table (tests: those of removed stores, or unused names, leave).
    var tableEntries: Int { logs.withLock { $0.entries.count } }

    /// Bytes every store's history holds now (what `bytesInAll` bounds).
    public var retainedBytes: Int { total.load(ordering: .relaxed) }

    /// `now` less the maximum age: events published before it have aged out.
    func ageCutoff(_ now: Int64) -> Int64 {
        let (v, overflow) = now.subtractingReportingOverflow(maxAgeMillis)
        return overflow ? .min : v
    }

    /// After a log grew (outside its lock): brings the total back under `bytesInAll` if it passed it, and trims every
    /// log for age now and then (a store nobody writes to gives its old events back too). O(1) but for those two,
    /// which are amortized: each frees an eighth of the total or follows `maxAgeMillis / 16` of emulator time (or the
    /// clock going back).
    @inline(__always) func settle(now: Int64) {
        if total.load(ordering: .relaxed) > bytesInAll { enforceTotal() }
        let last = lastSweep.load(ordering: .relaxed)
        let (since, overflow) = now.subtractingReportingOverflow(last)
        if overflow || since < 0 || since >= sweepEvery { sweep(now: now, last: last) }
    }

    /// Trims every log for age, and prunes the table (one thread at a time: the one that moved `lastSweep`).
    func sweep(now: Int64, last: Int64) {
        guard lastSweep.compareExchange(expected: last, desired: now, ordering: .relaxed).exchanged else { return }
        for l in heldLogs() { l.trim(now: now) }
        prune()
    }

    /// Evicts the oldest events server-wide (by id: publication order), whichever stores they are in, until the total
    /// is an eighth under `bytesInAll`: every event below a cutoff id goes, the cutoff moved forward by the share of
    /// bytes still to free (ids are about as dense in bytes as one another; where they are not, another pass moves it
    /// on). One pass takes each log's lock once, one at a time (never while holding another, nor the table's), and
    /// evicts what it can there in one batch: O(logs + events evicted) per pass, and a pass moves the cutoff over at
    /// least a sixteenth of the ids that remain. Subscribers that had not read an evicted event are told (`dropped`), as when a ring
    /// overwrites it.
    func enforceTotal() {
        guard !enforcing.exchange(true, ordering: .acquiring) else { return }
        defer { enforcing.store(false, ordering: .releasing) }
        guard total.load(ordering: .relaxed) > bytesInAll else { return }
        let target = bytesInAll - bytesInAll / 8
        let held = heldLogs()
        guard var cutoff = held.lazy.compactMap(\.oldestId).min() else { return }
        let end = ids.load(ordering: .relaxed) &+ 1
        while cutoff < end {
            let current = total.load(ordering: .relaxed)
            guard current > target else { return }
            let share = max(1.0 / 16, Double(current - target) / Double(current))
            cutoff += max(1, UInt64(Double(end - cutoff) * share))
            for l in held { l.evict(before: cutoff) }
        }
    }

    /// Publishes an event of `key` now (for things that happen outside a store transaction; inside one, use
    /// `StoreTransaction.emit`, which publishes only once the transaction is applied).
    public func emit(_ key: StoreKey, _ payload: EventPayload) {
        log(key, pinned: false).publish(CollectionOfOne(payload))
    }

    /// Publishes a server-wide event (clock, keys) on every store's stream that exists (the table pruned first, so a
    /// removed store's empty log is not filled again). O(the table), as the broadcast is.
    public func broadcast(_ payload: EventPayload) {
        let all = logs.withLock { t in
            t.prune()
            return Array(t.entries.values)
        }
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

/// Every store's log by key (`EventHub.log`).
struct LogTable {
    var entries: [StoreKey: EventLog] = [:]
    /// The table is pruned when it reaches this size.
    var pruneAt = 64

    /// Removes the logs that only the table holds (no store, no subscription, no caller: nobody can reach them but
    /// through the table, under its lock) and that have no history (read under the log's lock: the table's lock is
    /// taken before a log's, never after).
    mutating func prune() {
        for key in Array(entries.keys) where isKnownUniquelyReferenced(&entries[key]!) {
            if entries[key]!.isVacant { entries[key] = nil }
        }
        pruneAt = Swift.max(64, 2 * entries.count)
    }
}

/// Receives every published event besides the ring (webhooks, PhoneAuthAPI/WebhookDelivery.swift).
public protocol EventPushSink: AnyObject, Sendable {
    /// Where `key`'s events go now; nil: nowhere (the usual case, and it must then be cheap). Called for each publish
    /// before the log's lock is taken, never under a store's lock.
    func route(_ key: StoreKey) -> (any EventPushRoute)?
}

/// One store's destinations for its events.
public protocol EventPushRoute: Sendable {
    /// One event, in the log's order, under the log's lock: O(1), never blocks, takes no store's or log's lock.
    func push(_ event: EmulatorEvent, _ key: StoreKey)
}

final class EventPushSinkBox: Sendable {
    let sink: any EventPushSink
    init(_ sink: any EventPushSink) { self.sink = sink }
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
    /// The first chunk's size (each next one a log fills is twice the last, up to `EventHub.maxChunk`; an event larger
    /// than that gets a chunk of its own size).
    static let firstSize = 2 * 1024
    /// What a chunk costs beside its bytes (the object, the allocation's header): counted in its log's bytes.
    static let overhead = 64
    let base: UnsafeMutableRawPointer
    let capacity: Int
    /// The chunk's number in its log: what a reader compares, without touching the reference count.
    let id: UInt64
    /// Bytes written: changed only under the log's lock; the bytes below it never change.
    var count = 0
    /// Ring slots referring to it (under the log's lock): at 0 the log no longer holds it (unless it is the format's
    /// open chunk), and its bytes leave the log's count.
    var refs = 0

    init(id: UInt64, capacity: Int) {
        self.id = id
        self.capacity = capacity
        base = .allocate(byteCount: capacity, alignment: 16)
    }

    var cost: Int { capacity + Self.overhead }

    deinit { base.deallocate() }
}

/// Where one event's bytes are (no chunk: not rendered in that format yet).
struct WireRef: Sendable {
    var chunk: WireChunk? = nil
    var chunkID: UInt64 = 0
    var start: Int32 = 0
    var end: Int32 = 0
}

extension EventPayload {
    /// Bytes its strings keep outside the event (an estimate from above: UTF-8 of more than 15 bytes is on the heap
    /// with a 32-byte header, in 16-byte steps; an array of strings adds its buffer). O(its fields); no allocation.
    var outOfLineBytes: Int {
        func s(_ v: String) -> Int {
            let n = v.utf8.count
            return n <= 15 ? 0 : (n + 32 + 15) & ~15
        }
        func o(_ v: String?) -> Int { v.map(s) ?? 0 }
        func a(_ v: [String]) -> Int {
            guard !v.isEmpty else { return 0 }
            var n = 32 + 16 * v.count
            for x in v { n += s(x) }
            return n
        }
        switch self {
        case .codeSent(let phone, _, _, _, let code): return s(phone) + s(code)
        case .codeVerified(let phone, _, _), .sessionExpired(let phone, _), .codeRejected(let phone, _, _, _, _): return s(phone)
        case .userCreated(let uid, let phone, let email, let provider): return s(uid) + o(phone) + o(email) + s(provider)
        case .userUpdated(let uid, let fields): return s(uid) + a(fields)
        case .userLinked(let uid, let provider): return s(uid) + s(provider)
        case .userDisabled(let uid), .userEnabled(let uid), .userDeleted(let uid), .tokensRefreshed(let uid), .tokensRevoked(let uid),
             .sessionCookieCreated(let uid, _):
            return s(uid)
        case .tokensIssued(let uid, let provider, let second): return s(uid) + s(provider) + o(second)
        case .limitHit(_, let phone, let ip): return o(phone) + o(ip)
        case .appVerificationFailed(_, let phone): return o(phone)
        case .recaptchaAssessed(let phone, let action, let state, let verdict, let reason, _, _):
            return s(phone) + s(action) + s(state) + s(verdict) + s(reason)
        case .smsDelivery(let phone, let outcome, _): return s(phone) + s(outcome)
        case .configChanged(let fields): return a(fields)
        case .keysRotated(let kid, let retired): return s(kid) + a(retired)
        case .clockChanged, .dropped: return 0
        case .mfaEnrolled(let uid, let id, let phone): return s(uid) + s(id) + o(phone)
        case .mfaWithdrawn(let uid, let id): return s(uid) + s(id)
        case .oobSent(let email, let type, let code): return s(email) + s(type) + s(code)
        case .idpTokenRevoked(let uid, let provider, let type): return s(uid) + s(provider) + s(type)
        case .blockingFunctionCalled(let event, let uri, _, let outcome): return s(event) + s(uri) + s(outcome)
        case .projectReset(let snapshot): return o(snapshot)
        case .appCheckChecked(let outcome, let appId, _, let method): return s(outcome) + o(appId) + s(method)
        }
    }
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

/// One store's history of events and its subscribers.
public final class EventLog: Sendable {
    public let key: StoreKey
    private unowned let hub: EventHub
    /// Whether its bytes count in the hub's total (a log of the hub's table; not a detached store's).
    private let registered: Bool
    /// Whether it has history or subscribers (the logs the global bound and the age sweep look at). Written under the
    /// state's lock.
    let held = Atomic<Bool>(false)

    /// An empty ring slot (holds nothing outside itself).
    static let vacant = EmulatorEvent(id: 0, time: 0, payload: .dropped(count: 0))
    /// A ring slot: the event, and what it keeps outside it (`EventPayload.outOfLineBytes`, counted once).
    static let slotBytes = MemoryLayout<EmulatorEvent>.stride + MemoryLayout<UInt32>.stride
    static let refBytes = MemoryLayout<WireRef>.stride
    /// The smallest ring (a store with a few events holds a few slots).
    static let minSlots = 4

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

    /// One wire format's bytes of a log's events (`State.sse`, `State.jsonl`).
    struct Rendering {
        /// Each event as the wire carries it in this format, beside `ring` (as long; empty until something is rendered
        /// in it): rendered once when published while live subscribers use the format (or by the first reader, for
        /// events from before), copied by every reader.
        var refs: [WireRef] = []
        /// The chunk being filled (kept while the log has events or followers in the format: at most one partly
        /// filled chunk per format per store).
        var open: WireChunk? = nil
        /// Live (following) subscribers in this format: a publish renders in it while there are some.
        var live = 0

        /// Rendered at `slot` (without touching a chunk's reference count).
        @inline(__always) func has(_ slot: Int) -> Bool { !refs.isEmpty && refs[slot].chunkID != 0 }

        /// Clears the reference at `slot` (rendered there): a chunk no slot refers to any more (and not open) leaves
        /// `bytes`.
        @inline(__always) mutating func unref(_ slot: Int, bytes: inout Int) {
            guard let c = refs[slot].chunk else { return }
            refs[slot] = WireRef()
            c.refs -= 1
            if c.refs == 0 && c !== open { bytes -= c.cost }
        }

        /// Stores `b` as `slot`'s bytes, after what the open chunk holds (a new chunk, twice the last up to
        /// `maxChunk`, when it is full).
        mutating func store(_ b: UnsafeRawBufferPointer, slot: Int, slots: Int, maxChunk: Int, chunks: inout UInt64, bytes: inout Int) {
            if refs.isEmpty {
                refs = Array(repeating: WireRef(), count: slots)
                bytes += slots * EventLog.refBytes
            }
            var target: WireChunk
            if let c = open, c.capacity - c.count >= b.count {
                target = c
            } else {
                if let full = open, full.refs == 0 { bytes -= full.cost }  // no slot refers to it: it goes
                let size = Swift.max(b.count, open.map { Swift.min(maxChunk, Swift.max(WireChunk.firstSize, 2 * $0.capacity)) } ?? WireChunk.firstSize)
                chunks &+= 1
                target = WireChunk(id: chunks, capacity: size)
                bytes += target.cost
                open = target
            }
            let start = target.count
            if let p = b.baseAddress, b.count > 0 { (target.base + start).copyMemory(from: p, byteCount: b.count) }
            target.count = start + b.count
            target.refs += 1
            refs[slot] = WireRef(chunk: target, chunkID: target.id, start: Int32(start), end: Int32(target.count))
        }

        /// Drops the open chunk if no slot refers to it (the log is empty and nobody follows in the format).
        mutating func close(bytes: inout Int) {
            guard let c = open else { return }
            open = nil
            if c.refs == 0 { bytes -= c.cost }
        }
    }

    struct State {
        /// Sequence number `q` (per log) at `ring[q % ring.count]` for `first ..< next`, the other slots `vacant`.
        /// Grows by doubling up to `EventHub.maxSlots`, shrinks by half when a quarter full, and is nothing while the
        /// log is empty.
        var ring: [EmulatorEvent] = []
        /// Beside `ring`: the bytes each event keeps outside its slot (what it added to `bytes`).
        var costs: [UInt32] = []
        /// Events retained.
        var count = 0
        /// The sequence number of the oldest retained event.
        var first: UInt64 = 0
        /// The events' bytes per wire format (`EventWireFormat.sse`, `.jsonl`).
        var sse = Rendering()
        var jsonl = Rendering()
        /// Chunks made so far (their ids).
        var chunks: UInt64 = 0
        /// Reused for rendering under the lock (while anyone follows).
        var scratch: [UInt8] = []
        var subs: [ObjectIdentifier: Sub] = [:]
        /// Subscribers with `needsWake` set: a publish looks at the subscribers only when some wait.
        var waiting = 0
        /// At most every subscriber's cursor: an evicted event can concern a subscriber only when it is at or past
        /// this (readers keep up under load, so publishes do not walk the subscribers for every event).
        var lowestCursor: UInt64 = .max
        /// What the history holds: the ring's slots, the strings its events keep outside it, and every chunk a slot
        /// (or an open chunk) refers to, whole.
        var bytes = 0

        var next: UInt64 { first + UInt64(count) }

        func slot(_ seq: UInt64) -> Int { Int(seq % UInt64(ring.count)) }

        /// The oldest retained event (`count > 0`).
        var oldest: EmulatorEvent { ring[slot(first)] }

        var ringBytes: Int { ring.count * EventLog.slotBytes + (sse.refs.count + jsonl.refs.count) * EventLog.refBytes }

        /// Room for one more event: a larger ring, or the oldest event out when it is as large as it grows.
        @inline(__always) mutating func makeRoom(maxSlots: Int) {
            guard count == ring.count else { return }
            if ring.count < maxSlots {
                resize(Swift.min(maxSlots, Swift.max(EventLog.minSlots, ring.count * 2)))
            } else {
                evictOldest(vacate: false)
            }
        }

        /// Appends `event` (after `makeRoom`), which keeps `cost` bytes outside its slot; returns its slot.
        @inline(__always) mutating func append(_ event: EmulatorEvent, cost: UInt32) -> Int {
            let s = slot(next)
            ring[s] = event
            costs[s] = cost
            count += 1
            bytes += Int(cost)
            return s
        }

        /// Moves the retained events into a ring of `capacity` slots (0: none), with their references.
        mutating func resize(_ capacity: Int) {
            let before = ringBytes
            if capacity == 0 {
                ring = []
                costs = []
                sse.refs = []
                jsonl.refs = []
            } else {
                var r = Array(repeating: EventLog.vacant, count: capacity)
                var c = Array(repeating: UInt32(0), count: capacity)
                var s1: [WireRef] = sse.refs.isEmpty ? [] : Array(repeating: WireRef(), count: capacity)
                var s2: [WireRef] = jsonl.refs.isEmpty ? [] : Array(repeating: WireRef(), count: capacity)
                var q = first
                while q < next {
                    let from = slot(q), to = Int(q % UInt64(capacity))
                    r[to] = ring[from]
                    c[to] = costs[from]
                    if !s1.isEmpty { s1[to] = sse.refs[from] }
                    if !s2.isEmpty { s2[to] = jsonl.refs[from] }
                    q += 1
                }
                ring = r
                costs = c
                sse.refs = s1
                jsonl.refs = s2
            }
            bytes += ringBytes - before
        }

        /// The oldest event leaves: subscribers that had not read it missed it (`dropped`, if they asked for it).
        /// `vacate` false: the caller fills its slot at once (`makeRoom`).
        @inline(__always) mutating func evictOldest(vacate: Bool = true) {
            let seq = first, s = slot(seq)
            if !subs.isEmpty && lowestCursor <= seq { passOver(seq, type: ring[s].type) }
            bytes -= Int(costs[s])
            if vacate { ring[s] = EventLog.vacant }
            if sse.has(s) { sse.unref(s, bytes: &bytes) }
            if jsonl.has(s) { jsonl.unref(s, bytes: &bytes) }
            first += 1
            count -= 1
        }

        /// Event `seq` leaves: the subscribers whose cursor is at or before it move past it, counting it as missed
        /// if they asked for its `type` (and a replay had it to read).
        mutating func passOver(_ seq: UInt64, type: String) {
            var lowest = UInt64.max
            for k in Array(subs.keys) {
                guard var sub = subs[k] else { continue }
                if sub.cursor <= seq {
                    if sub.filter.matches(type) && (sub.until.map { seq < $0 } ?? true) { sub.dropped += 1 }
                    sub.cursor = seq + 1
                    subs[k] = sub
                }
                lowest = Swift.min(lowest, sub.cursor)
            }
            lowestCursor = lowest
        }

        /// Stores `b` as event `slot`'s bytes in `format`.
        mutating func store(_ b: UnsafeRawBufferPointer, format: EventWireFormat, slot: Int, maxChunk: Int) {
            if format == .sse {
                sse.store(b, slot: slot, slots: ring.count, maxChunk: maxChunk, chunks: &chunks, bytes: &bytes)
            } else {
                jsonl.store(b, slot: slot, slots: ring.count, maxChunk: maxChunk, chunks: &chunks, bytes: &bytes)
            }
        }

        /// Evicts events published before `cutoff`, oldest first, but none a subscriber has not read yet (a reader
        /// that is behind loses events to the byte bounds only: a clock advance alone takes nothing from it).
        mutating func trimAge(before cutoff: Int64) {
            while count > 0 && oldest.time < cutoff {
                if !subs.isEmpty && lowestCursor <= first {
                    lowestCursor = subs.values.reduce(UInt64.max) { Swift.min($0, $1.cursor) }
                    if lowestCursor <= first { return }
                }
                evictOldest()
            }
        }

        /// Evicts the oldest events while the history holds more than `budget` bytes (the newest always stays).
        mutating func trimBytes(_ budget: Int) {
            while count > 1 && bytes > budget { evictOldest() }
        }

        /// Gives back what the history no longer needs: a ring a quarter full shrinks by half; an empty log keeps
        /// nothing (no ring, and no open chunk where nobody follows).
        @inline(__always) mutating func fit() {
            guard count <= ring.count / 4 else { return }  // most calls: one comparison
            shrink()
        }

        mutating func shrink() {
            if count == 0 {
                if !ring.isEmpty { resize(0) }
                if sse.live == 0 { sse.close(bytes: &bytes) }
                if jsonl.live == 0 { jsonl.close(bytes: &bytes) }
            } else if ring.count > EventLog.minSlots {
                resize(Swift.max(EventLog.minSlots, count * 2))
            }
        }
    }
    private let state: Locked<State>

    init(key: StoreKey, hub: EventHub, pinned: Bool = false, registered: Bool = false) {
        self.key = key
        self.hub = hub
        self.registered = registered
        state = Locked(State())
    }

    /// After a change under the lock: sets `held`.
    private func updateHeld(_ s: State) {
        let h = s.count > 0 || !s.subs.isEmpty
        assert(h || s.bytes == 0, "a log without history or subscribers holds nothing (\(s.bytes) bytes)")
        if held.load(ordering: .relaxed) != h { held.store(h, ordering: .relaxed) }
    }

    /// Applies a change of bytes to the hub's total (after the lock).
    private func settled(_ delta: Int, _ hub: EventHub) {
        if registered && delta != 0 { hub.total.wrappingAdd(delta, ordering: .relaxed) }
    }

    /// Chunks made for rendered bytes so far (tests: nothing is rendered while nobody follows).
    var chunksMade: UInt64 { state.withLock { $0.chunks } }

    /// Bytes its history holds (tests and diagnostics; what `EventHub.bytesPerStore` bounds).
    public var bytes: Int { state.withLock { $0.bytes } }

    /// Slots of its ring (tests: it grows with the events and gives them back).
    var ringSlots: Int { state.withLock { $0.ring.count } }

    /// Neither history nor subscribers.
    var isVacant: Bool { state.withLock { $0.count == 0 && $0.subs.isEmpty } }

    /// The id of its oldest retained event, if any.
    var oldestId: UInt64? { state.withLock { $0.count > 0 ? $0.oldest.id : nil } }

    /// Retained events (tests and diagnostics), those aged out first removed.
    public var retained: [EmulatorEvent] {
        trim(now: hub.clock.nowMillis())
        return state.withLock { s in (s.first..<s.next).map { s.ring[s.slot($0)] } }
    }

    /// Evicts what aged out by `now` (see `State.trimAge`).
    func trim(now: Int64) {
        let hub = self.hub
        let cutoff = hub.ageCutoff(now)
        let delta = state.withLock { s -> Int in
            guard s.count > 0 && s.oldest.time < cutoff else { return 0 }
            let before = s.bytes
            s.trimAge(before: cutoff)
            s.fit()
            updateHeld(s)
            return s.bytes - before
        }
        settled(delta, hub)
    }

    /// For the global bound: evicts the events with ids below `bound`.
    func evict(before bound: UInt64) {
        let delta = state.withLock { s -> Int in
            guard s.count > 0 && s.oldest.id < bound else { return 0 }
            let before = s.bytes
            while s.count > 0 && s.oldest.id < bound { s.evictOldest() }
            s.fit()
            updateHeld(s)
            return s.bytes - before
        }
        settled(delta, hub)
    }

    /// Appends events with fresh ids and the clock's time, then evicts what the bounds no longer allow (the ring's
    /// slots, the store's bytes, the age); wakes waiting subscribers (after the lock), and settles the global bound.
    /// O(1) amortized per event: eviction takes each event once, the ring grows and shrinks by halves, and chunks
    /// are allocated at most once per `maxChunk / 2` bytes rendered.
    func publish<C: Collection>(_ payloads: C) where C.Element == EventPayload {
        guard !payloads.isEmpty else { return }
        let hub = self.hub  // one strong reference (each use of an unowned one takes and drops one)
        // Asked before the lock (it may read a config); pushed to under it, so a route sees the log's order.
        let route = hub.pushTarget?.route(key)
        let now = hub.clock.nowMillis()
        let maxSlots = hub.maxSlots, maxChunk = hub.maxChunk, budget = hub.bytesPerStore, cutoff = hub.ageCutoff(now)
        var wakes: [@Sendable () -> Void] = []
        let delta = state.withLock { s -> Int in
            let before = s.bytes
            for p in payloads {
                s.makeRoom(maxSlots: maxSlots)
                let cost = UInt32(clamping: p.outOfLineBytes)
                let event = EmulatorEvent(id: hub.ids.wrappingAdd(1, ordering: .relaxed).newValue, time: now, payload: p)
                route?.push(event, key)
                let slot = s.append(event, cost: cost)
                // Rendered now, once, in each format live readers use (none listening: nothing rendered).
                if s.sse.live > 0 || s.jsonl.live > 0 {
                    for f in EventWireFormat.allCases where (f == .sse ? s.sse.live : s.jsonl.live) > 0 {
                        var scratch = s.scratch
                        s.scratch = []
                        scratch.removeAll(keepingCapacity: true)
                        event.render(key, format: f, into: &scratch)
                        scratch.withUnsafeBytes { s.store($0, format: f, slot: slot, maxChunk: maxChunk) }
                        s.scratch = scratch
                    }
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
            if s.oldest.time < cutoff { s.trimAge(before: cutoff) }
            if s.bytes > budget { s.trimBytes(budget) }
            s.fit()
            updateHeld(s)
            return s.bytes - before
        }
        settled(delta, hub)
        for w in wakes { w() }
        if registered { hub.settle(now: now) }
    }

    func subscribe(since: UInt64?, filter: EventFilter, follow: Bool, format: EventWireFormat?) -> EventSubscription {
        let sub = EventSubscription(log: self)
        let hub = self.hub
        let cutoff = hub.ageCutoff(hub.clock.nowMillis())
        let delta = state.withLock { s -> Int in
            let before = s.bytes
            // What aged out goes before the new reader could be said to wait for it.
            if s.count > 0 && s.oldest.time < cutoff {
                s.trimAge(before: cutoff)
                s.fit()
            }
            var cursor = s.next
            if let since {
                // The first retained event with a larger id (ids increase along the ring).
                var lo = s.first, hi = s.next
                while lo < hi {
                    let mid = lo + (hi - lo) / 2
                    if s.ring[s.slot(mid)].id <= since { lo = mid + 1 } else { hi = mid }
                }
                cursor = lo
            }
            s.subs[ObjectIdentifier(sub)] = Sub(cursor: cursor, until: follow ? nil : s.next, filter: filter,
                                                format: follow ? format : nil)
            if follow, let f = format {
                if f == .sse { s.sse.live += 1 } else { s.jsonl.live += 1 }
            }
            s.lowestCursor = min(s.lowestCursor, cursor)
            updateHeld(s)
            return s.bytes - before
        }
        settled(delta, hub)
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
            // The format's references (none: this reader takes events): read only here, so not copied.
            let refs = format == .sse ? s.sse.refs : format == .jsonl ? s.jsonl.refs : []
            scan: while me.cursor < end && taken < max && scanned < scanLimit {
                let slot = s.slot(me.cursor)
                if all || me.filter.matches(s.ring[slot].type) {
                    if !refs.isEmpty && refs[slot].chunkID != 0 {
                        if !events.isEmpty { break scan }  // render those first, to keep the order
                        let chunkID = refs[slot].chunkID, start = refs[slot].start
                        if lastChunkID == chunkID, rendered[rendered.count - 1].end == start {
                            rendered[rendered.count - 1].end = refs[slot].end  // the bytes right after
                        } else {
                            rendered.append(refs[slot])
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
    /// are skipped). Bytes that would take the store past its budget are not kept (each reader renders them): keeping
    /// them would evict older events.
    func keep(_ events: [EmulatorEvent], sequence: [UInt64], format: EventWireFormat, bytes: [UInt8], ends: [Int]) {
        guard !events.isEmpty else { return }
        let hub = self.hub
        let budget = hub.bytesPerStore, maxChunk = hub.maxChunk
        let delta = state.withLock { s -> Int in
            // The format's bytes, moved out while they change (not copied) and back.
            var r = Rendering()
            if format == .sse { swap(&r, &s.sse) } else { swap(&r, &s.jsonl) }
            let refBytes = r.refs.isEmpty ? s.ring.count * EventLog.refBytes : 0
            let before = s.bytes
            if s.bytes + bytes.count + WireChunk.overhead + refBytes <= budget {
                let shared = r.live > 0
                let open = r.open
                if !shared {
                    // Nobody follows in this format (a replay): one chunk of just these bytes, and the format's open
                    // chunk stays open for the next follower (replacing it would pin a new one per follow again).
                    s.chunks &+= 1
                    let c = WireChunk(id: s.chunks, capacity: Swift.max(1, bytes.count))
                    s.bytes += c.cost
                    r.open = c
                }
                bytes.withUnsafeBytes { all in
                    var start = 0
                    for k in events.indices {
                        let q = sequence[k]
                        defer { start = ends[k] }
                        guard q >= s.first, q < s.next else { continue }
                        let slot = s.slot(q)
                        if s.ring[slot].id == events[k].id && !r.has(slot) {
                            r.store(UnsafeRawBufferPointer(rebasing: all[start..<ends[k]]), slot: slot, slots: s.ring.count,
                                    maxChunk: maxChunk, chunks: &s.chunks, bytes: &s.bytes)
                        }
                    }
                }
                if !shared, let mine = r.open {
                    r.open = open
                    if mine.refs == 0 { s.bytes -= mine.cost }  // every event had gone or was rendered meanwhile
                }
            }
            if format == .sse { swap(&r, &s.sse) } else { swap(&r, &s.jsonl) }
            s.trimBytes(budget)
            return s.bytes - before
        }
        settled(delta, hub)
        if registered && hub.total.load(ordering: .relaxed) > hub.bytesInAll { hub.enforceTotal() }
    }

    func cancel(_ sub: EventSubscription) -> Bool {
        let (removed, delta) = state.withLock { s -> (Bool, Int) in
            guard let gone = s.subs.removeValue(forKey: ObjectIdentifier(sub)) else { return (false, 0) }
            if gone.needsWake { s.waiting -= 1 }
            // The format's open chunk stays when its last follower leaves while the log has events: the next follower
            // appends to it (a chunk per follow would make one per event for a store followed and left over and over).
            if let f = gone.format {
                if f == .sse { s.sse.live -= 1 } else { s.jsonl.live -= 1 }
            }
            if s.sse.live == 0 && s.jsonl.live == 0 { s.scratch = [] }  // only publishes for followers render into it
            if s.subs.isEmpty { s.lowestCursor = .max }
            let before = s.bytes
            s.fit()
            updateHeld(s)
            return (true, s.bytes - before)
        }
        settled(delta, hub)
        return removed
    }

    fileprivate var hubRef: EventHub { hub }

    /// The hub's push sink (Webhooks.swift hands it deleted users' records).
    var pushTarget: (any EventPushSink)? { hub.pushTarget }
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
        if fields.contains("events") { onCommit { PushHint.noteParsed() } }  // push routes are resolved again
    }
}
