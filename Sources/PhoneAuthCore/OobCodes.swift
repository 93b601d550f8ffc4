import EmulatorSupport
import Synchronization

/// An out-of-band code: what production would have emailed (a verification or password-reset link). No email is
/// sent; the code and its link go to the log and to the inbox (`/emulator/v1/projects/{p}/oobCodes`).
public struct OobCode: Sendable, Equatable {
    public enum RequestType: String, Sendable, CaseIterable {
        case verifyEmail = "VERIFY_EMAIL"
        case passwordReset = "PASSWORD_RESET"
        case verifyAndChangeEmail = "VERIFY_AND_CHANGE_EMAIL"
        /// An email link sign-in (`accounts:signInWithEmailLink`): no account needed.
        case emailSignIn = "EMAIL_SIGNIN"
        /// Sent to the old address after an email change (never on request): `accounts:update {oobCode}` restores it.
        case recoverEmail = "RECOVER_EMAIL"

        /// The link's `mode` parameter.
        public var mode: String {
            switch self {
            case .verifyEmail: "verifyEmail"
            case .passwordReset: "resetPassword"
            case .verifyAndChangeEmail: "verifyAndChangeEmail"
            case .emailSignIn: "signIn"
            case .recoverEmail: "recoverEmail"
            }
        }

        /// The request type a client names by the proto enum's number (the Android SDK sends `6`).
        public init?(wire: String) {
            switch wire {
            case "1": self = .passwordReset
            case "4": self = .verifyEmail
            case "5": self = .recoverEmail
            case "6": self = .emailSignIn
            case "7": self = .verifyAndChangeEmail
            default: self.init(rawValue: wire)
            }
        }

        /// How long a code stays good (production: a password reset link 1 hour, an email sign-in link 6 hours, email
        /// verification 3 days).
        public var lifetimeMillis: Int64 {
            switch self {
            case .passwordReset: 3_600_000
            case .emailSignIn: 6 * 3_600_000
            case .verifyEmail, .verifyAndChangeEmail, .recoverEmail: 3 * 86_400_000
            }
        }
    }

    public let code: String
    /// The account's email when the code was made (lowercased).
    public let email: String
    /// VERIFY_AND_CHANGE_EMAIL: the address the account moves to; RECOVER_EMAIL: the address it moved to (`email` is
    /// the one it restores).
    public let newEmail: String?
    public let requestType: RequestType
    /// The link as the log and inbox show it (built from the request's host).
    public let link: String
    public let createdAt: Int64
    public let expiresAt: Int64
    /// Creation order within the store.
    public let sequence: UInt64

    public init(code: String, email: String, newEmail: String?, requestType: RequestType, link: String, createdAt: Int64,
                expiresAt: Int64, sequence: UInt64) {
        self.code = code
        self.email = email
        self.newEmail = newEmail
        self.requestType = requestType
        self.link = link
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.sequence = sequence
    }
}

/// A store's out-of-band codes: by code, by email (creation order) and in creation order overall, capped at
/// `capacity` (the oldest is deleted first, see `StoreTransaction.save(_: OobCode)`). Every operation is O(1) amortized
/// except per-email removal, O(codes of that email).
public struct OobTable: Sendable {
    /// At most this many codes per project (or tenant).
    public static let capacity = 10_000

    private var byCode: [String: OobCode] = [:]
    private var byEmail: [String: [String]] = [:]
    /// Creation order; an item is stale when its code was removed (or re-made) since.
    private var order: [(code: String, sequence: UInt64)] = []
    private var head = 0
    /// Next sequence number (never reused within a store's life).
    public private(set) var nextSequence: UInt64 = 0

    public init() {}

    public var count: Int { byCode.count }
    public subscript(code: String) -> OobCode? { byCode[code] }

    /// The oldest live code.
    public var oldest: OobCode? {
        var i = head
        while i < order.count {
            if let c = byCode[order[i].code], c.sequence == order[i].sequence { return c }
            i += 1
        }
        return nil
    }

    mutating func insert(_ c: OobCode) {
        byCode[c.code] = c
        byEmail[c.email, default: []].append(c.code)
        order.append((c.code, c.sequence))
        nextSequence = max(nextSequence, c.sequence &+ 1)
    }

    mutating func remove(_ code: String) -> OobCode? {
        guard let c = byCode.removeValue(forKey: code) else { return nil }
        byEmail[c.email]?.removeAll { $0 == code }
        if byEmail[c.email]?.isEmpty == true { byEmail[c.email] = nil }
        while head < order.count, byCode[order[head].code]?.sequence != order[head].sequence { head += 1 }
        if head > 64, head * 2 > order.count {
            order.removeFirst(head)
            head = 0
        }
        return c
    }

    /// Codes in creation order, all or one email's (any case).
    public func list(email: String? = nil) -> [OobCode] {
        if let email { return (byEmail[email.lowercased()] ?? []).compactMap { byCode[$0] } }
        return order[head...].compactMap { item in byCode[item.code].flatMap { $0.sequence == item.sequence ? $0 : nil } }
    }

    /// The newest code for an email.
    public func newest(email: String) -> OobCode? { byEmail[email.lowercased()]?.last.flatMap { byCode[$0] } }
}

/// Out-of-band state of a store: the durable codes and the non-durable long-polls waiting for them.
public struct OobState: Sendable {
    /// `oobCodes:wait` long-polls, by lowercased email.
    var waiters: [String: [InboxWaiter<OobCode>]] = [:]
    var waiterCount = 0
    public init() {}
}

extension Emulator {
    /// Makes an out-of-band code for `email` (lowercased) in one transaction with `check`, which sees the store first
    /// (it throws to refuse: `EMAIL_NOT_FOUND`, `EMAIL_EXISTS`…). `link` builds the link from the code. Logged, never emailed.
    public func createOobCode(_ key: StoreKey, email: String, newEmail: String?, type: OobCode.RequestType,
                              link: @Sendable (String) -> String,
                              check: (AuthStore) throws(AuthError) -> Void = { _ throws(AuthError) in }) throws(AuthError) -> OobCode {
        let now = clock.nowMillis()
        let box = store(key)
        let code = try transaction(box) { tx throws(AuthError) -> OobCode in
            try tx.checkTenantEnabled()
            try check(tx.store)
            return makeOobCode(&tx, email: email, newEmail: newEmail, type: type, now: now, link: link)
        }
        logOobCode(key, code)
        return code
    }

    /// Makes and saves a code inside `tx` (creation order, the cap, waiters, the `oob.sent` event). The caller logs it
    /// (`logOobCode`) once the transaction is applied.
    func makeOobCode(_ tx: inout StoreTransaction, email: String, newEmail: String?, type: OobCode.RequestType, now: Int64,
                     link: (String) -> String) -> OobCode {
        var text = random.alphanumeric(Self.oobCodeLength)
        while tx.store.oobCodes[text] != nil { text = random.alphanumeric(Self.oobCodeLength) }
        // Expired codes at the front go first (amortized O(1)); the cap evicts the oldest live ones.
        while let oldest = tx.store.oobCodes.oldest, oldest.expiresAt <= now { tx.deleteOobCode(oldest.code) }
        let c = OobCode(code: text, email: email.lowercased(), newEmail: newEmail?.lowercased(), requestType: type, link: link(text),
                        createdAt: now, expiresAt: now + type.lifetimeMillis, sequence: tx.store.oobCodes.nextSequence)
        tx.save(c)
        tx.emit(.oobSent(email: c.email, requestType: c.requestType.rawValue, oobCode: c.code))
        if tx.store.oob.waiters[c.email] != nil {
            let box = tx.box
            tx.onCommit { [self] in fireOobWaiters(box, c) }
        }
        if orphanOobCodes.isWaiting {
            let key = tx.key
            tx.onCommit { [self] in for w in orphanOobCodes.take(key, c.email) { w.fire(c) } }
        }
        return c
    }

    /// The log line production's email would have been (the official emulator's wording).
    func logOobCode(_ key: StoreKey, _ code: OobCode) {
        let what: String
        switch code.requestType {
        case .verifyEmail: what = "To verify the email address \(code.email), follow this link: \(code.link)"
        case .passwordReset: what = "To reset the password for \(code.email), follow this link: \(code.link)&newPassword=NEW_PASSWORD_HERE"
        case .verifyAndChangeEmail: what = "To verify and change the email address from \(code.email) to \(code.newEmail ?? ""), follow this link: \(code.link)"
        case .emailSignIn: what = "To sign in as \(code.email), follow this link: \(code.link)"
        case .recoverEmail: what = "To reset your email address to \(code.email), follow this link: \(code.link)"
        }
        logger.info(what, [("project", key.description)])
    }

    /// Out-of-band codes are 40 characters of [A-Za-z0-9] (about 238 bits).
    public static let oobCodeLength = 40

    /// Uses up a code in one transaction with `body`, which applies it (the code is deleted first, so it is single-use
    /// even when `body` throws). `INVALID_OOB_CODE` when unknown; `EXPIRED_OOB_CODE` (and deleted) when expired.
    /// With `consume: false` only checks it (`resetPassword` without `newPassword`).
    public func useOobCode<T>(_ key: StoreKey, code: String, consume: Bool = true,
                              _ body: (inout StoreTransaction, OobCode) throws(AuthError) -> T) throws(AuthError) -> T {
        let now = clock.nowMillis()
        guard let box = existingStore(key) else { throw AuthError(.invalidOobCode) }
        return try transaction(box) { tx throws(AuthError) -> T in
            try tx.checkTenantEnabled()
            let c = try liveOobCode(&tx, code, now: now)
            if consume { tx.deleteOobCode(code) }
            return try body(&tx, c)
        }
    }

    /// A pending code: `INVALID_OOB_CODE` when unknown; `EXPIRED_OOB_CODE` (and deleted) when expired.
    func liveOobCode(_ tx: inout StoreTransaction, _ code: String, now: Int64) throws(AuthError) -> OobCode {
        guard let c = tx.store.oobCodes[code] else { throw AuthError(.invalidOobCode) }
        if now >= c.expiresAt {
            tx.deleteOobCode(code)
            throw AuthError(.expiredOobCode)
        }
        return c
    }

    /// The store holding a pending code, for a link that names only a tenant (`/emulator/action`: its `apiKey` is the
    /// official emulator's `fake-api-key`): `preferred` first, then every other project's store for that tenant.
    public func store(holdingOobCode code: String, tenantId: String?, preferred: String) -> StoreKey? {
        let first = StoreKey(projectId: preferred, tenantId: tenantId)
        if existingStore(first)?.read({ $0.oobCodes[code] != nil }) == true { return first }
        return existingStores(tenantId: tenantId).first { $0.key != first && $0.read { $0.oobCodes[code] != nil } }?.key
    }

    /// A pending (unexpired) code. Never creates a store.
    public func oobCode(_ key: StoreKey, code: String) -> OobCode? {
        let now = clock.nowMillis()
        return existingStore(key)?.read { $0.oobCodes[code] }.flatMap { now < $0.expiresAt ? $0 : nil }
    }

    /// Pending out-of-band codes in creation order (all, or one email's). Never creates a store.
    public func oobCodes(_ key: StoreKey, email: String?) -> [OobCode] {
        existingStore(key)?.read { $0.oobCodes.list(email: email) } ?? []
    }

    /// Deletes pending out-of-band codes (all, or one email's); returns how many. Never creates a store.
    @discardableResult
    public func clearOobCodes(_ key: StoreKey, email: String?) throws(AuthError) -> Int {
        guard let box = existingStore(key) else { return 0 }
        return try transaction(box) { tx throws(AuthError) -> Int in tx.clearOobCodes(email: email) }
    }

    private func fireOobWaiters(_ box: StoreBox, _ code: OobCode) {
        let waiting = box.state.withLock { g -> [InboxWaiter<OobCode>] in
            guard let ready = g.store.oob.waiters.removeValue(forKey: code.email) else { return [] }
            g.store.oob.waiterCount -= ready.count
            return ready
        }
        for w in waiting { w.fire(code) }
    }

    /// The out-of-band inbox long-poll: answers at once with the newest pending code for `email`, else with the first
    /// one made within `timeoutSeconds` (nil after the timeout). Never blocks the calling thread; at most
    /// `maxWaitersPerStore` per store (`RESOURCE_EXHAUSTED`). Returns the waiter to cancel when the client leaves.
    @discardableResult
    public func waitForOobCode(_ key: StoreKey, email: String, timeoutSeconds: Double,
                               callback: @escaping @Sendable (OobCode?) -> Void) throws(AuthError) -> InboxWaiter<OobCode>? {
        let email = email.lowercased()
        let waiter = InboxWaiter<OobCode>(key: email, callback: callback)
        let exhausted = AuthError(.resourceExhausted, "Too many oobCodes:wait requests are pending for this project (at most \(Self.maxWaitersPerStore)).")
        // A read never creates the project or tenant: on one that does not exist yet the poll waits beside the
        // registry, and the first code made there (which creates the store) answers it.
        var found = existingStore(key)
        while found == nil {
            guard timeoutSeconds > 0 else { callback(nil); return nil }
            if try waitAsOrphan(orphanOobCodes, key, waiter, timeoutSeconds: timeoutSeconds, exhausted: exhausted) { return waiter }
            found = existingStore(key)
        }
        guard let box = found else { return nil }
        var pending: (ticket: UInt64, generation: UInt64) = (0, 0)
        let newest = try box.state.withLock { g throws(AuthError) -> OobCode? in
            if let newest = g.store.oobCodes.newest(email: email) {
                pending = box.pending(g)
                return newest
            }
            guard timeoutSeconds > 0 else { return nil }
            guard g.store.oob.waiterCount < Self.maxWaitersPerStore else { throw exhausted }
            g.store.oob.waiters[email, default: []].append(waiter)
            g.store.oob.waiterCount += 1
            return nil
        }
        if let newest {
            guard box.depend(on: pending) else { throw Emulator.notDurable }
            callback(newest)
            return nil
        }
        guard timeoutSeconds > 0 else { callback(nil); return nil }
        waiter.setCancelHook { [self] in _ = dropOobWaiter(box, waiter) }
        waiter.startTimer(seconds: timeoutSeconds) { [self] in
            if dropOobWaiter(box, waiter) { waiter.fire(nil) }
        }
        return waiter
    }

    private func dropOobWaiter(_ box: StoreBox, _ w: InboxWaiter<OobCode>) -> Bool {
        box.state.withLock { g -> Bool in
            guard var list = g.store.oob.waiters.removeValue(forKey: w.key) else { return false }
            let before = list.count
            list.removeAll { $0 === w }
            if !list.isEmpty { g.store.oob.waiters[w.key] = list }
            g.store.oob.waiterCount -= before - list.count
            return list.count != before
        }
    }

    /// Oob long-polls registered in a store right now (tests).
    public func pendingOobWaiters(_ key: StoreKey) -> Int { existingStore(key)?.state.withLock { $0.store.oob.waiterCount } ?? 0 }
}
