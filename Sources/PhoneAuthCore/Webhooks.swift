import EmulatorSupport
import Synchronization

// # Events pushed: webhooks and the Functions emulator's auth triggers
//
// A project's (or tenant's) config block `events` names where its committed events are pushed:
//
//     "events": {
//       "webhooks": [{"id": "ci", "url": "http://127.0.0.1:8300/hook", "types": ["user.*"], "secret": "whsec_…"}],
//       "functionsEmulator": {"url": "http://127.0.0.1:5001", "projectId": "demo-phone", "formats": ["v1", "v2"]}
//     }
//
// This file holds the configuration (parsed and rendered with the rest of `ProjectConfig`), the bounded queue a
// destination's events wait in, and the hint that keeps a server without any of this at one atomic load per publish.
// The delivery itself (threads, HTTP, signatures, retries) is PhoneAuthAPI/WebhookDelivery.swift; events reach it
// through `EventHub`'s push sink (Events.swift), on commit, in each store's order.

/// One webhook: where to POST, which event types, and the Standard Webhooks signing secret.
public struct WebhookSpec: Sendable, Hashable {
    /// Names the hook in logs and `GET …/webhooks` (given, else `hook-<n>` by position).
    public var id: String
    public var url: String
    /// The type patterns as given (nil: every type), and the filter they make.
    public var types: [String]?
    public var filter: EventFilter
    /// `whsec_<base64>` as given, and the HMAC key it encodes.
    public var secret: String
    public var key: [UInt8]

    public static func == (a: WebhookSpec, b: WebhookSpec) -> Bool {
        a.id == b.id && a.url == b.url && a.types == b.types && a.secret == b.secret
    }
    public func hash(into h: inout Hasher) {
        h.combine(id)
        h.combine(url)
        h.combine(types)
        h.combine(secret)
    }

    public var json: JSON {
        var o: JSONObject = ["id": .string(id), "url": .string(url)]
        if let types { o["types"] = .array(types.map(JSON.string)) }
        o["secret"] = .string(secret)
        return .object(o)
    }
}

/// firebase-tools' Functions emulator: `user.created` / `user.deleted` become its auth triggers.
public struct FunctionsEmulatorSpec: Sendable, Hashable {
    /// Its base URL (`http://127.0.0.1:5001`); events go to `<url>/functions/projects/<projectId>/trigger_multicast`.
    public var url: String
    /// The project the Functions emulator runs (its `--project`); nil: the store's own project.
    public var projectId: String?
    /// `v1`: the legacy background event (`providers/firebase.auth/eventTypes/user.create`, firebase-functions
    /// `auth.user().onCreate`); `v2`: the CloudEvent `google.firebase.auth.user.v2.created` (firebase-functions ≥ 7.3
    /// `identity.onUserCreated`). Both by default: the Functions emulator ignores a format no function listens to.
    public var formats: Set<Format>

    public enum Format: String, Sendable, CaseIterable, Hashable { case v1, v2 }

    public var json: JSON {
        var o: JSONObject = ["url": .string(url)]
        if let projectId { o["projectId"] = .string(projectId) }
        o["formats"] = .array(Format.allCases.filter(formats.contains).map { .string($0.rawValue) })
        return .object(o)
    }
}

/// The `events` block of a project's (or tenant's) config.
public struct EventsPushConfig: Sendable, Hashable {
    public var webhooks: [WebhookSpec] = []
    public var functionsEmulator: FunctionsEmulatorSpec?
    public init() {}

    /// Webhooks per project or tenant.
    public static let maxWebhooks = 8
    /// The longest id.
    public static let maxIdLength = 64
    /// Secret sizes the Standard Webhooks spec allows (decoded bytes).
    public static let secretBytes = 24...64

    public var isEmpty: Bool { webhooks.isEmpty && functionsEmulator == nil }

    public var json: JSON {
        var o: JSONObject = ["webhooks": .array(webhooks.map(\.json))]
        if let f = functionsEmulator { o["functionsEmulator"] = f.json }
        return .object(o)
    }

    /// Applies an `events` object onto `self`: a key given replaces that key (`webhooks` whole); `null` clears it.
    public mutating func apply(_ v: JSON, path: String) throws(ConfigError) {
        if v == .null { self = EventsPushConfig(); return }
        for (k, v2) in try ProjectConfig.object(v, path) {
            let p = ProjectConfig.join(path, k)
            switch k {
            case "webhooks": webhooks = try Self.parseWebhooks(v2, path: p)
            case "functionsEmulator": functionsEmulator = v2 == .null ? nil : try Self.parseFunctions(v2, path: p)
            default: throw ConfigError(path: p, message: "unknown key (known: webhooks, functionsEmulator)")
            }
        }
        if !isEmpty { PushHint.noteConfigured() }
        PushHint.noteParsed()
    }

    static func parseWebhooks(_ v: JSON, path: String) throws(ConfigError) -> [WebhookSpec] {
        if v == .null { return [] }
        guard case .array(let items) = v else { throw ConfigError(path: path, message: "must be an array of webhooks") }
        guard items.count <= maxWebhooks else {
            throw ConfigError(path: path, message: "at most \(maxWebhooks) webhooks per project or tenant")
        }
        var out: [WebhookSpec] = []
        var ids = Set<String>()
        for (i, item) in items.enumerated() {
            let p = "\(path)[\(i)]"
            let o = try ProjectConfig.object(item, p)
            for k in o.keys where !["id", "url", "types", "secret"].contains(k) {
                throw ConfigError(path: ProjectConfig.join(p, k), message: "unknown key (known: id, url, types, secret)")
            }
            let id = try o["id"].map { v throws(ConfigError) in try checkId(v, ProjectConfig.join(p, "id")) } ?? "hook-\(i + 1)"
            guard ids.insert(id).inserted else { throw ConfigError(path: ProjectConfig.join(p, "id"), message: "\"\(id)\" is used twice") }
            guard let u = o["url"] else { throw ConfigError(path: ProjectConfig.join(p, "url"), message: "is required") }
            let url = try checkURL(u, ProjectConfig.join(p, "url"))
            guard let s = o["secret"] else {
                throw ConfigError(path: ProjectConfig.join(p, "secret"), message: "is required: whsec_ followed by 24 to 64 random bytes in base64")
            }
            let (secret, key) = try checkSecret(s, ProjectConfig.join(p, "secret"))
            var types: [String]? = nil
            var filter = EventFilter()
            if let t = o["types"], t != .null {
                let pt = ProjectConfig.join(p, "types")
                guard case .array(let list) = t, list.allSatisfy({ $0.stringValue != nil }) else {
                    throw ConfigError(path: pt, message: "must be an array of event types (e.g. \"user.created\") or prefixes (\"user.*\")")
                }
                let names = list.compactMap(\.stringValue)
                guard !names.isEmpty else { throw ConfigError(path: pt, message: "must name at least one type (leave it out for every type)") }
                do { filter = try EventFilter(parsing: names) } catch { throw ConfigError(path: pt, message: error.detail ?? error.description) }
                types = names
            }
            out.append(WebhookSpec(id: id, url: url, types: types, filter: filter, secret: secret, key: key))
        }
        return out
    }

    static func parseFunctions(_ v: JSON, path: String) throws(ConfigError) -> FunctionsEmulatorSpec {
        let o = try ProjectConfig.object(v, path)
        for k in o.keys where !["url", "projectId", "formats"].contains(k) {
            throw ConfigError(path: ProjectConfig.join(path, k), message: "unknown key (known: url, projectId, formats)")
        }
        guard let u = o["url"] else { throw ConfigError(path: ProjectConfig.join(path, "url"), message: "is required (e.g. http://127.0.0.1:5001)") }
        var url = try checkURL(u, ProjectConfig.join(path, "url"))
        while url.hasSuffix("/") { url.removeLast() }
        var spec = FunctionsEmulatorSpec(url: url, projectId: nil, formats: Set(FunctionsEmulatorSpec.Format.allCases))
        if let pv = o["projectId"], pv != .null {
            let pp = ProjectConfig.join(path, "projectId")
            let id = try ProjectConfig.string(pv, pp)
            do { _ = try Identifiers.projectID(id) } catch { throw ConfigError(path: pp, message: "not a valid project id") }
            spec.projectId = id
        }
        if let fv = o["formats"], fv != .null {
            let pf = ProjectConfig.join(path, "formats")
            guard case .array(let list) = fv, !list.isEmpty else { throw ConfigError(path: pf, message: "must be a non-empty array of \"v1\" and \"v2\"") }
            var formats = Set<FunctionsEmulatorSpec.Format>()
            for f in list {
                guard let name = f.stringValue, let format = FunctionsEmulatorSpec.Format(rawValue: name) else {
                    throw ConfigError(path: pf, message: "each format is \"v1\" (legacy background events) or \"v2\" (CloudEvents)")
                }
                formats.insert(format)
            }
            spec.formats = formats
        }
        return spec
    }

    /// An `http://` URL, as blocking functions take them (`https://` cannot be called: this emulator has no TLS client).
    static func checkURL(_ v: JSON, _ path: String) throws(ConfigError) -> String {
        let url = try ProjectConfig.string(v, path)
        if url.lowercased().hasPrefix("https://") {
            throw ConfigError(path: path, message: "only http:// URLs can be called (this emulator has no TLS client); serve the receiver over plain HTTP")
        }
        do { try BlockingFunctionsConfig.checkURI(url, path: path) } catch {
            throw ConfigError(path: path, message: "must be an absolute http:// URL with a host (at most \(BlockingFunctionsConfig.maxURILength) characters)")
        }
        return url
    }

    static func checkId(_ v: JSON, _ path: String) throws(ConfigError) -> String {
        let id = try ProjectConfig.string(v, path)
        guard (1...maxIdLength).contains(id.utf8.count),
              id.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x2D || $0 == 0x5F })
        else { throw ConfigError(path: path, message: "1 to \(maxIdLength) letters, digits, - or _") }
        return id
    }

    /// `whsec_` and the base64 of 24 to 64 bytes (the Standard Webhooks secret format).
    static func checkSecret(_ v: JSON, _ path: String) throws(ConfigError) -> (String, [UInt8]) {
        let s = try ProjectConfig.string(v, path)
        let bad = ConfigError(path: path, message: "must be whsec_ followed by the base64 of \(secretBytes.lowerBound) to \(secretBytes.upperBound) random bytes")
        guard s.hasPrefix("whsec_"), s.utf8.count <= 200, let key = Base64URL.decode(s.dropFirst(6)), secretBytes.contains(key.count) else { throw bad }
        return (s, key)
    }
}

/// A process-wide hint that some configuration has named a webhook or the Functions emulator: until then the push
/// sink answers every publish with no route after one atomic load. Set when such a config is parsed; never reset.
public enum PushHint {
    static let configured = Atomic<Bool>(false)
    static let changes = Atomic<UInt64>(0)
    @inline(__always) public static var mayBeConfigured: Bool { configured.load(ordering: .relaxed) }
    public static func noteConfigured() { configured.store(true, ordering: .relaxed) }
    /// Bumped whenever an `events` block is parsed (a PATCH, the config file, an import, the journal): routes resolved
    /// before are looked at again.
    public static var generation: UInt64 { changes.load(ordering: .acquiring) }
    static func noteParsed() { changes.wrappingAdd(1, ordering: .releasing) }
}

/// What waits in a destination's queue: an event of a store, or a deleted user's record for the auth triggers.
public struct PushItem: Sendable {
    public let key: StoreKey
    public let event: EmulatorEvent
    /// `user.deleted` for the Functions emulator: the record as it was (the store no longer has it).
    public let deletedUser: UserRecord?

    public init(key: StoreKey, event: EmulatorEvent, deletedUser: UserRecord? = nil) {
        self.key = key
        self.event = event
        self.deletedUser = deletedUser
    }
}

/// A first-in first-out queue of at most `capacity` items that drops its oldest when full: O(1) either way.
public struct BoundedQueue<Element> {
    public let capacity: Int
    private var ring: [Element?] = []
    private var head = 0
    public private(set) var count = 0

    public init(capacity: Int) { self.capacity = max(1, capacity) }

    public var isEmpty: Bool { count == 0 }

    /// Appends `e`; when full, the oldest leaves first and is returned.
    @discardableResult
    public mutating func append(_ e: Element) -> Element? {
        if count == capacity {
            // Full (the ring has grown to the capacity): the oldest is overwritten.
            let oldest = ring[head]
            ring[head] = e
            head = (head + 1) % ring.count
            return oldest
        }
        if count == ring.count { grow() }
        ring[(head + count) % ring.count] = e
        count += 1
        return nil
    }

    /// The oldest item, removed.
    public mutating func popFirst() -> Element? {
        guard count > 0 else { return nil }
        let e = ring[head]
        ring[head] = nil
        head = (head + 1) % ring.count
        count -= 1
        if count == 0 {
            head = 0
            if ring.count > 64 { ring = [] }  // a drained queue gives its memory back
        }
        return e
    }

    /// Slots allocated (tests: memory follows what is queued, up to the capacity).
    public var allocated: Int { ring.count }

    /// Doubles the ring (at most to the capacity), the items moved to its front.
    private mutating func grow() {
        let size = Swift.min(capacity, Swift.max(16, ring.count * 2))
        var items = [Element?](repeating: nil, count: size)
        for i in 0..<count { items[i] = ring[(head + i) % ring.count] }
        ring = items
        head = 0
    }
}

/// A sink that also takes deleted users' records (for the Functions emulator's `user.delete` trigger, which carries the
/// whole record; the event carries only the uid, and the store no longer has it when the event is published).
public protocol DeletedUserSink: EventPushSink {
    /// After the deletion committed, outside every store lock: O(1), never blocks.
    func userDeleted(_ key: StoreKey, _ user: UserRecord)
}

extension StoreTransaction {
    /// Hands `user`'s record (being deleted in this transaction) to the auth triggers once the deletion commits.
    /// Nothing at all unless some config names the Functions emulator (or a webhook).
    mutating func noteDeletedUser(_ user: UserRecord) {
        guard PushHint.mayBeConfigured, let sink = box.events.pushTarget as? any DeletedUserSink else { return }
        let key = box.key
        onCommit { sink.userDeleted(key, user) }
    }
}
