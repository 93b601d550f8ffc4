import Dispatch
import EmulatorSupport
import Synchronization

/// One project's or tenant's state behind its own lock (no global lock on the hot path). Writes go through
/// `Emulator.transaction` (see Transaction.swift); reads through `read`.
public final class StoreBox: Sendable {
    public let key: StoreKey
    let state: Locked<GuardedStore>
    /// Orders and commits journal changes (`--data-dir`); nil: in memory only.
    let committer: JournalCommitter?
    /// This store's event log (Events.swift; shared with any earlier store of the same key).
    let events: EventLog
    /// Pending sessions and users across every store (`--max-sessions`, `--max-users-total`): each transaction adds
    /// what it changed.
    let budgets: StoreBudgets
    /// The emulator's user field table (its event diff).
    let userFields: UserFieldTable

    /// `implicit`: a tenant created on first use by a client (reclaimable while it holds nothing).
    init(key: StoreKey, config: ProjectConfig, committer: JournalCommitter?, implicit: Bool = false, events: EventLog, budgets: StoreBudgets,
         userFields: UserFieldTable) {
        self.key = key
        self.committer = committer
        self.events = events
        self.budgets = budgets
        self.userFields = userFields
        state = Locked(GuardedStore(store: AuthStore(config: config, tenant: key.tenantId == nil ? nil : TenantSettings.createdOnFirstUse,
                                                     implicitTenant: implicit && key.tenantId != nil)))
    }

    /// Exclusive access to the store outside any transaction, for its non-durable state (tests): nothing is
    /// journaled or rolled back, and the durable fields cannot be changed here (`AuthStore`: only a transaction can).
    public func withLock<T>(_ body: (inout AuthStore) throws(AuthError) -> T) throws(AuthError) -> T {
        try state.withLock { g throws(AuthError) -> T in try body(&g.store) }
    }

    /// Reads the store. With a journal, what was read may include a transaction not yet durable: inside a request
    /// its reply then waits for that commit (and fails with it); outside one, this waits and reads again if it failed.
    public func read<T>(_ body: (AuthStore) -> T) -> T {
        guard let committer else { return state.withLock { body($0.store) } }
        while true {
            let (value, dep, generation) = state.withLock { g in
                (body(g.store), g.lastTicket, committer.failureGeneration.load(ordering: .acquiring))
            }
            if dep == 0 || committer.isSettled(dep, generation: generation) { return value }
            if let scope = DurabilityScope.current {
                scope.note(dep, generation: generation)
                return value
            }
            if committer.wait(dep, generation: generation) { return value }
        }
    }

    /// The newest pending ticket of this store and the failure generation, read under its lock (`g`).
    func pending(_ g: GuardedStore) -> (ticket: UInt64, generation: UInt64) {
        guard let committer else { return (0, 0) }
        return (g.lastTicket, committer.failureGeneration.load(ordering: .acquiring))
    }

    /// Makes the current request depend on a pending ticket (or, outside a request, waits for it). False only
    /// outside a request, when it was rolled back.
    func depend(on p: (ticket: UInt64, generation: UInt64)) -> Bool {
        guard let committer, p.ticket != 0, !committer.isSettled(p.ticket, generation: p.generation) else { return true }
        if let scope = DurabilityScope.current {
            scope.note(p.ticket, generation: p.generation)
            return true
        }
        return committer.wait(p.ticket, generation: p.generation)
    }

    /// What `attempt` did.
    enum Attempt<T> {
        case ran(T)
        /// The store had left the registry (see Transaction.swift): the body did not run. `implicit`: it was a tenant
        /// created on first use (reclaimed, or deleted), so a write may start over with a fresh store.
        case removed(implicit: Bool)
    }

    /// Runs `body` as one transaction (see Transaction.swift): changes recorded through `tx` reach memory at once and
    /// the journal together; a failed commit rolls them back. An error thrown by `body` does not undo what it recorded
    /// before throwing (a consumed attempt stays consumed): those changes commit, then the error is thrown.
    /// `TENANT_NOT_FOUND` if the store was removed from the registry (`Emulator.transaction(_ key:)` starts over instead).
    func transaction<T>(_ refreshTokens: Locked<RefreshTokenIndex>, _ registry: Locked<StoreRegistry>,
                        _ body: (inout StoreTransaction) throws(AuthError) -> T) throws(AuthError) -> T {
        switch try attempt(refreshTokens, registry, body) {
        case .ran(let value): return value
        case .removed: throw AuthError(.tenantNotFound)
        }
    }

    /// `transaction`, reporting a removed store instead of failing.
    func attempt<T>(_ refreshTokens: Locked<RefreshTokenIndex>, _ registry: Locked<StoreRegistry>,
                    _ body: (inout StoreTransaction) throws(AuthError) -> T) throws(AuthError) -> Attempt<T> {
        var after: [@Sendable () -> Void] = []
        var emitted: EventPayload? = nil
        var moreEmitted: [EventPayload] = []
        var dep: UInt64 = 0
        var generation: UInt64 = 0
        var removedImplicit = false
        let outcome = state.withLock { g -> Result<T, AuthError>? in
            if g.removed {
                removedImplicit = g.store.implicitTenant
                return nil
            }
            let before = budgets.counts(g)
            let (result, recorded) = StoreTransaction.run(on: &g.store, box: self, refreshTokens: refreshTokens, journaled: committer != nil, body)
            var tx = recorded
            if tx.removeStore {
                g.removed = true
                registry.withLock { r in if r.boxes[key] === self { r.remove(key) } }
            }
            budgets.add(from: before, to: g)
            if let c = committer {
                if tx.created { tx.undo.insert(.storeCreated, at: 0) }
                if !tx.changes.isEmpty {
                    let ticket = c.enqueue(self, tx.changes)
                    g.undo.append((ticket, tx.undo))
                    g.lastTicket = ticket
                }
                dep = g.lastTicket
                generation = c.failureGeneration.load(ordering: .acquiring)
            }
            after = tx.afterCommit
            emitted = tx.event
            moreEmitted = tx.moreEvents
            return result
        }
        guard let result = outcome else { return .removed(implicit: removedImplicit) }
        if let c = committer, dep != 0, !c.isSettled(dep, generation: generation) {
            if let e = emitted {
                let log = events, more = moreEmitted
                after.insert({ log.publish(CollectionOfOne(e)); log.publish(more) }, at: 0)
            }
            if let scope = DurabilityScope.current {
                scope.note(dep, generation: generation)
                if !after.isEmpty {
                    let hooks = after
                    c.whenDecided([dep], maxTicket: dep, generation: generation) { ok in if ok { for h in hooks { h() } } }
                }
            } else {
                guard c.wait(dep, generation: generation) else { throw Emulator.notDurable }
                for h in after { h() }
            }
        } else {
            if let e = emitted {
                events.publish(CollectionOfOne(e))
                events.publish(moreEmitted)
            }
            for h in after { h() }
        }
        return .ran(try result.get())
    }
}

/// A count kept across every store against a limit (pending sessions: `--max-sessions`; users: `--max-users-total`).
final class CountBudget: Sendable {
    let limit: Int
    private let total = Atomic<Int>(0)
    init(limit: Int) { self.limit = max(1, limit) }
    var count: Int { total.load(ordering: .relaxed) }
    var isFull: Bool { count >= limit }
    func add(_ delta: Int) { if delta != 0 { total.wrappingAdd(delta, ordering: .relaxed) } }
}

/// The counts every store transaction (and a rollback, and a restore) keeps current: how much it changed its store's
/// pending sessions and users, under that store's lock. A removed store counts as empty.
struct StoreBudgets: Sendable {
    let sessions: CountBudget
    let users: CountBudget

    func counts(_ g: GuardedStore) -> (sessions: Int, users: Int) {
        g.removed ? (0, 0) : (g.store.sessions.count, g.store.users.count)
    }

    func add(from before: (sessions: Int, users: Int), to g: GuardedStore) {
        let after = counts(g)
        sessions.add(after.sessions - before.sessions)
        users.add(after.users - before.users)
    }
}

/// The emulator's state: every project and tenant, refresh tokens, the clock and the randomness.
public final class Emulator: Sendable {
    public let clock: EmulatorClock
    public let random: any RandomSource
    /// Orders refresh tokens by issue (see `newRefreshToken`); starts at the clock's microseconds so a restart goes on
    /// after the tokens it restored.
    private let refreshSequence: Atomic<UInt64>
    public let defaultProjectId: String
    public let logger: Logger
    /// Durable storage (`--data-dir`); nil: in memory only. Every write is a store transaction (Transaction.swift):
    /// memory and journal change together or not at all.
    public let journal: (any StateJournal)?
    /// Orders, batches and commits the journal's changes; nil without a journal.
    let committer: JournalCommitter?
    private let initialConfigs: [String: ProjectConfig]
    private let stores: Locked<StoreRegistry>
    /// `--max-projects`: projects created on first use stop here (`QUOTA_EXCEEDED`).
    public let maxProjects: Int
    /// Tenants per project (created on first use or explicitly), as Identity Platform's quota.
    public let maxTenantsPerProject: Int
    /// Users per project, and per tenant (`--max-users`): creating one more answers `QUOTA_EXCEEDED`.
    public let maxUsersPerProject: Int
    private let refreshTokens: Locked<RefreshTokenIndex>
    /// Registered inbox long-polls across all stores (the waiters themselves live in their store, by number).
    private let waiterTotal = Atomic<Int>(0)
    /// The default project's store, reachable without the registry lock (the hot path).
    private let defaultStore: StoreBox
    /// Long-polls on a project or tenant that does not exist (yet): they wait here, by store and number, without
    /// creating it; a send checks this table only while it is not empty.
    let orphanCodes = OrphanInbox<VerificationSession>()
    /// SMS that arrive later (`phoneAuth.delivery`), until they do (SMSDefense.swift).
    let lateSMS = LateDeliveries()
    /// Out-of-band code long-polls (`oobCodes:wait`) on a project or tenant that does not exist (yet), likewise.
    let orphanOobCodes = OrphanInbox<OobCode>()
    /// Every store's event log, the event ids and the subscriber cap (Events.swift).
    public let events: EventHub
    /// Pending sessions and users in every store, against `--max-sessions` and `--max-users-total`.
    let budgets: StoreBudgets
    var sessionBudget: CountBudget { budgets.sessions }
    /// Named snapshots and the start-up state that resets return to (Snapshots.swift).
    public let snapshots = SnapshotRegistry()
    /// When `makeSessionRoom` last swept every store (emulator clock, milliseconds).
    private let lastFullSweep = Atomic<Int64>(Int64.min / 2)
    /// The user record's fields and their mappings (UserFields.swift); tests may add fields.
    public let userFields: UserFieldTable
    /// The server is reachable by others (it listens beyond loopback, or has an admin token): the abuse limits of
    /// `protection.mode` `AUTO` apply (Protection.swift).
    public let exposed: Bool

    /// - Parameters:
    ///   - projectConfigs: configurations for named projects; any other project starts from `ProjectConfig()`.
    public init(defaultProjectId: String, projectConfigs: [String: ProjectConfig] = [:], clock: EmulatorClock = EmulatorClock(),
                random: any RandomSource = SystemRandom(), logger: Logger = Logger(label: "phone-auth"), journal: (any StateJournal)? = nil,
                maxProjects: Int = Emulator.defaultMaxProjects, maxTenantsPerProject: Int = Emulator.defaultMaxTenantsPerProject,
                maxUsersPerProject: Int = Emulator.defaultMaxUsersPerProject, maxSessions: Int = Emulator.defaultMaxSessions,
                maxUsersTotal: Int = Emulator.defaultMaxUsersTotal,
                exposed: Bool = false, userFields: UserFieldTable = .standard,
                commitHere: (@Sendable (@escaping @Sendable () -> Void) -> Bool)? = nil) {
        self.defaultProjectId = defaultProjectId
        self.maxProjects = max(1, maxProjects)
        self.maxTenantsPerProject = max(0, maxTenantsPerProject)
        self.maxUsersPerProject = max(1, maxUsersPerProject)
        self.exposed = exposed
        self.userFields = userFields
        let budgets = StoreBudgets(sessions: CountBudget(limit: maxSessions), users: CountBudget(limit: maxUsersTotal))
        self.budgets = budgets
        self.journal = journal
        self.initialConfigs = projectConfigs
        self.clock = clock
        self.random = random
        self.logger = logger
        let events = EventHub(clock: clock)
        self.events = events
        refreshSequence = Atomic(UInt64(max(0, clock.nowMillis())) &* 1000)
        let stores = Locked(StoreRegistry()), refreshTokens = Locked(RefreshTokenIndex())
        self.stores = stores
        self.refreshTokens = refreshTokens
        let committer = journal.map { JournalCommitter(journal: $0, logger: logger, refreshTokens: refreshTokens, registry: stores, commitHere: commitHere) }
        self.committer = committer
        let key = StoreKey(projectId: defaultProjectId)
        defaultStore = StoreBox(key: key, config: projectConfigs[defaultProjectId] ?? ProjectConfig(), committer: committer,
                                events: events.log(key, pinned: true), budgets: budgets, userFields: userFields)
        stores.withLock { $0.insert(defaultStore) }
    }

    public static let defaultMaxProjects = 5000
    /// Pending verification sessions in all stores: at about 220 bytes each (bench/run), 2 million are ~450 MB.
    public static let defaultMaxSessions = 2_000_000
    /// Users in all projects and tenants together (each store also has `--max-users`): 2 million are 1.4–2 GB today.
    public static let defaultMaxUsersTotal = 2_000_000
    public static let defaultMaxTenantsPerProject = 1000
    /// Measured (release build): a phone user costs about 0.7 KB of RSS, an anonymous signUp user with its refresh
    /// token about 1 KB, one with every free-text field at its limit about 5 KB: 200,000 users are 0.15 to 1 GB.
    public static let defaultMaxUsersPerProject = 200_000

    /// The store for a project or tenant, created on first use (a tenant made here is implicit: see
    /// `AuthStore.implicitTenant`). A new tenant starts with its project's config. Callers admit client-supplied keys
    /// first (`admit`): this never creates a store for an invalid id (it answers a detached, unregistered store
    /// instead and logs the attempt), but it does not enforce the caps. Only writes call it (through
    /// `transaction(_ key:_:)`); reads use `existingStore` and answer as for an empty store.
    public func store(_ key: StoreKey) -> StoreBox {
        if key.tenantId == nil && key.projectId == defaultProjectId { return defaultStore }
        if let s = stores.withLock({ $0.boxes[key] }) { return s }
        let config = initialConfig(key)
        guard Identifiers.isValid(key) else {
            logger.error("refused to register a store for an invalid id", [("project", Identifiers.printable(key.projectId, limit: 64)),
                                                                          ("tenant", Identifiers.printable(key.tenantId ?? "", limit: 64))])
            return StoreBox(key: key, config: config, committer: committer, events: EventLog(key: key, hub: events, pinned: true),
                            budgets: StoreBudgets(sessions: CountBudget(limit: budgets.sessions.limit), users: CountBudget(limit: budgets.users.limit)),
                            userFields: userFields)  // never registered
        }
        if key.tenantId != nil { _ = store(StoreKey(projectId: key.projectId)) }
        return stores.withLock { r in
            if let s = r.boxes[key] { return s }
            let s = newBox(key, config: config, implicit: true)
            r.insert(s)
            return s
        }
    }

    /// A new store for `key` (not registered here), with this emulator's journal, event log and session budget.
    func newBox(_ key: StoreKey, config: ProjectConfig, implicit: Bool = false) -> StoreBox {
        StoreBox(key: key, config: config, committer: committer, implicit: implicit, events: events.log(key, pinned: true),
                 budgets: budgets, userFields: userFields)
    }

    /// Every existing store for `tenantId` (nil: the projects themselves), the default project's first.
    func existingStores(tenantId: String?) -> [StoreBox] {
        let registered = stores.withLock { r in r.boxes.values.filter { $0.key.tenantId == tenantId && $0 !== defaultStore } }
        if tenantId == nil { return [defaultStore] + registered }
        return registered
    }

    /// The store if it exists; never creates one (reads of never-used projects answer from defaults).
    public func existingStore(_ key: StoreKey) -> StoreBox? {
        if key.tenantId == nil && key.projectId == defaultProjectId { return defaultStore }
        return stores.withLock { $0.boxes[key] }
    }

    /// The config a store for `key` starts with: the configured one for a project, else defaults; a tenant
    /// starts from its project's current config.
    func initialConfig(_ key: StoreKey) -> ProjectConfig {
        if key.tenantId != nil { return config(StoreKey(projectId: key.projectId)) }
        return initialConfigs[key.projectId] ?? ProjectConfig()
    }

    /// Admits a client-supplied store key: both ids valid (`INVALID_ARGUMENT` / `INVALID_TENANT_ID`); a new
    /// project within `maxProjects`; a new tenant allowed by its project's `tenants.createOnFirstUse`
    /// (`TENANT_NOT_FOUND` otherwise, unless `explicit`) and within `maxTenantsPerProject` (`QUOTA_EXCEEDED`).
    /// With `create` the store exists afterwards (the caps are exact); without, nothing is allocated.
    public func admit(_ key: StoreKey, create: Bool, explicit: Bool = false) throws(AuthError) {
        _ = try Identifiers.projectID(key.projectId)
        _ = try Identifiers.tenantID(key.tenantId)
        if existingStore(key) != nil { return }
        let project = StoreKey(projectId: key.projectId)
        if key.tenantId != nil {
            if !explicit && !config(project).tenantPolicy.createOnFirstUse {
                throw AuthError(.tenantNotFound)
            }
        }
        let projectExists = existingStore(project) != nil
        let projectConfig = create && !projectExists ? initialConfigs[key.projectId] ?? ProjectConfig() : nil
        let tenantConfig = create && key.tenantId != nil ? config(project) : nil
        // Checks the caps and, with `create`, registers the stores. False: the project's tenant cap is reached.
        let attempt = { () throws(AuthError) -> Bool in
            try self.stores.withLock { r throws(AuthError) -> Bool in
                if r.boxes[project] == nil && r.projectCount >= self.maxProjects {
                    throw AuthError(.quotaExceeded, "Too many projects: this emulator holds at most \(self.maxProjects) (--max-projects).")
                }
                if key.tenantId != nil, r.boxes[key] == nil, r.tenantCount(of: key.projectId) >= self.maxTenantsPerProject { return false }
                if r.boxes[project] == nil, let projectConfig { r.insert(self.newBox(project, config: projectConfig)) }
                if key.tenantId != nil, r.boxes[key] == nil, let tenantConfig {
                    r.insert(self.newBox(key, config: tenantConfig, implicit: !explicit))
                }
                return true
            }
        }
        if try attempt() { return }
        // At the cap, tenants created on first use that hold nothing make room first (O(the project's tenants), only
        // at the cap), then the admission is tried once more.
        if try reclaimTenants(of: key.projectId) > 0, try attempt() { return }
        throw AuthError(.quotaExceeded, "Too many tenants: a project holds at most \(maxTenantsPerProject) tenants.")
    }

    /// Removes the project's tenants that were created on first use and hold nothing (`AuthStore.isReclaimable`):
    /// each in its own transaction (`StoreTransaction.reclaimIfEmpty`), so it leaves the journal with its memory
    /// (rolled back together if the commit fails) and a request's reply waits until that is durable. The registry
    /// lock is not held meanwhile (transactions take it inside a store's lock). A writer that still holds a reclaimed
    /// store starts over with a fresh one (`transaction(_ key:_:)`). Returns how many were reclaimed.
    func reclaimTenants(of projectId: String) throws(AuthError) -> Int {
        let now = clock.nowMillis()
        let boxes = stores.withLock { r in
            (r.tenants[projectId] ?? []).compactMap { r.boxes[StoreKey(projectId: projectId, tenantId: $0)] }
        }
        var reclaimed = 0
        for box in boxes {
            let attempt = try box.attempt(refreshTokens, stores) { tx throws(AuthError) -> Bool in tx.reclaimIfEmpty(now: now) }
            if case .ran(true) = attempt { reclaimed += 1 }
        }
        if reclaimed > 0 {
            logger.debug("reclaimed empty tenants created on first use", [("project", projectId), ("count", String(reclaimed))])
        }
        return reclaimed
    }

    /// Runs `body` as one transaction on `box` (see `StoreBox.transaction` and Transaction.swift).
    public func transaction<T>(_ box: StoreBox, _ body: (inout StoreTransaction) throws(AuthError) -> T) throws(AuthError) -> T {
        try box.transaction(refreshTokens, stores, body)
    }

    /// Runs `body` as one transaction on the store for `key`, created on first use: the way writes reach a store.
    /// If that store leaves the registry before the transaction holds its lock (see Transaction.swift), the body has
    /// not run: for a tenant created on first use (reclaimed at the cap, or deleted) the write starts over with the
    /// store registered now, a fresh one; for an explicit tenant deleted meanwhile it fails with `TENANT_NOT_FOUND`.
    public func transaction<T>(_ key: StoreKey, _ body: (inout StoreTransaction) throws(AuthError) -> T) throws(AuthError) -> T {
        try transaction(key, startingWith: store(key), body)
    }

    /// `transaction(_ key:_:)` starting with `box`, a store looked up earlier (tests hold a stale one here).
    func transaction<T>(_ key: StoreKey, startingWith box: StoreBox, _ body: (inout StoreTransaction) throws(AuthError) -> T) throws(AuthError) -> T {
        var box = box
        while true {
            switch try box.attempt(refreshTokens, stores, body) {
            case .ran(let value): return value
            case .removed(implicit: true): box = store(key)
            case .removed(implicit: false): throw AuthError(.tenantNotFound)
            }
        }
    }

    /// Changes non-durable state (minted credentials, receipts, pushes) of the store for `key`, created on first use,
    /// under its lock: nothing is journaled. A store removed from the registry meanwhile is never written: the key is
    /// looked up again.
    func withLiveStore<T>(_ key: StoreKey, _ body: (inout AuthStore) -> T) -> T {
        while true {
            if let result = store(key).state.withLock({ g -> T? in g.removed ? nil : body(&g.store) }) { return result }
        }
    }

    /// A journal commit failed and the change was rolled back (the reply is a 500).
    public static let notDurable = AuthError.internalError("The change could not be stored durably; it was rolled back.")

    /// Calls `body(true)` once everything `scope` depends on is durable, `body(false)` if some of it was rolled back;
    /// at once (on this thread) without a journal or when nothing is pending, else later on the committer thread.
    public func whenDurable(_ scope: DurabilityScope, _ body: @escaping @Sendable (Bool) -> Void) {
        let d = scope.deps.withLock { $0 }
        guard let committer, !d.tickets.isEmpty, !committer.isSettled(d.maxTicket, generation: d.generation) else { return body(true) }
        committer.whenDecided(d.tickets, maxTicket: d.maxTicket, generation: d.generation, body)
    }

    /// Journal commits made so far (each holds every change queued while the previous one was written).
    public var journalCommits: Int { committer?.commits.load(ordering: .relaxed) ?? 0 }

    /// Keys of every store created so far.
    public var storeKeys: [StoreKey] { stores.withLock { Array($0.boxes.keys) } }

    /// Tenant ids of a project (every tenant store created so far), sorted.
    public func tenantIDs(of projectId: String) -> [String] { stores.withLock { $0.tenants[projectId].map { $0.sorted() } ?? [] } }

    /// How many project stores exist.
    public var projectCount: Int { stores.withLock { $0.projectCount } }

    // MARK: sendVerificationCode

    /// Creates a verification session and returns its `sessionInfo`.
    /// Fictional numbers skip app verification, regions and limits; others pass `checkSendPolicy`.
    public func sendVerificationCode(_ key: StoreKey, phoneNumber raw: String?, autoRetrievalHash: String? = nil,
                                     clientIP: String? = nil, credentials: AppCredentials = AppCredentials()) throws(AuthError) -> String {
        let phone = try PhoneNumber(parsing: raw)
        let now = clock.nowMillis()
        makeSessionRoom(now: now)
        let session = try transaction(key) { tx throws(AuthError) -> VerificationSession in
            try tx.checkTenantEnabled()
            guard tx.store.config.phoneEnabled else { throw AuthError(.operationNotAllowed) }
            if tx.phoneUserHasSecondFactors(phone.e164) { throw Self.phoneFirstFactorOfMFAUser }
            return try createSession(&tx, phone: phone, kind: .signIn, owner: nil,
                                     appSignatureHash: autoRetrievalHash.flatMap { $0.isEmpty ? nil : String($0.prefix(64)) },
                                     clientIP: clientIP, credentials: credentials, now: now)
        }
        logCode(session, key: key)
        return session.sessionInfo
    }

    /// Every code is sent through here, first factor and second: scenario numbers, fictional numbers with their preset
    /// codes, the send policy for every other number (`checkSendPolicy`: app verification, regions, limits, quota),
    /// the session budget (`--max-sessions`), the journal, the event, the expiry sweep and the inbox's long-polls.
    func createSession(_ tx: inout StoreTransaction, phone: PhoneNumber, kind: VerificationSession.Kind, owner: String?,
                       appSignatureHash: String?, clientIP: String?, credentials: AppCredentials, now: Int64) throws(AuthError) -> VerificationSession {
        let settings = tx.store.config.phoneAuth
        if let code = settings.scenarioNumbers[phone.e164]?.onSend { throw Self.scenarioError(code) }
        let preset = tx.store.config.testPhoneNumbers[phone.e164]
        // reCAPTCHA SMS defense: one comparison while it is OFF. A send whose Enterprise token passed needs no other
        // app credential; one that did not (AUDIT) falls back to `appVerification`, as the SDKs fall back to v2.
        var recaptchaPassed = false
        if tx.store.config.recaptcha.phoneEnforcementState != .off, preset == nil || tx.store.config.recaptcha.includeFictionalNumbers {
            recaptchaPassed = try checkRecaptcha(&tx, phone: phone.e164, kind: kind, credentials: credentials, now: now)
        }
        if preset == nil {
            try checkSendPolicy(&tx, phone: phone, clientIP: clientIP, credentials: credentials, skipAppVerification: recaptchaPassed, now: now)
        }
        let delivery = credentials.locale == nil && tx.store.config.phoneAuth.delivery.isEmpty
            ? nil : try smsDelivery(&tx, phone: phone.e164, credentials: credentials, fictional: preset != nil, now: now)
        if sessionBudget.isFull {
            // `makeSessionRoom` ran before this transaction; this store's oldest expired sessions may still make room.
            tx.sweepOldestExpiredSessions(now: now, maxVisits: 256)
            if sessionBudget.isFull {
                tx.emit(.limitHit(limit: .quotaExceeded, phoneNumber: phone.e164, ip: clientIP))
                throw AuthError(.quotaExceeded, "Too many pending verification codes: this emulator holds at most \(sessionBudget.limit) (--max-sessions).")
            }
        }
        var id = SessionID(bytes: random.bytes(SessionID.byteCount))
        while tx.store.sessions.contains(id) { id = SessionID(bytes: random.bytes(SessionID.byteCount)) }
        var session = VerificationSession(
            id: id, phoneNumber: phone.e164, code: preset ?? random.digits(settings.codeLength), createdAt: now,
            expiresAt: settings.sessionTtlSeconds > 0 ? now + Int64(settings.sessionTtlSeconds) * 1000 : nil,
            attemptsLeft: settings.maxCodeAttempts > 0 ? settings.maxCodeAttempts : nil,
            fictional: preset != nil, kind: kind, appSignatureHash: appSignatureHash, sequence: tx.nextSequence)
        session.owner = owner
        session.delivery = delivery
        tx.nextSequence += 1
        tx.save(session)
        tx.sweepExpiredSessions(now: now)
        if session.isDelivered(now: now) {
            tx.emit(.codeSent(phoneNumber: session.phoneNumber, kind: kind, session: id, fictional: session.fictional, code: session.code))
            notifyWaiters(&tx, session)
        } else if let at = delivery?.deliverAt, delivery?.lost == false {
            let key = tx.key, late = session
            tx.onCommit { [self] in scheduleLate(key, late, at: at) }
        }
        return session
    }

    /// The log line of a sent code: the code itself for numbers that are not fictional (as firebase-tools logs it).
    func logCode(_ s: VerificationSession, key: StoreKey) {
        let project = [("project", key.description)]
        guard !s.fictional else { return logger.debug("Fictional number \(s.phoneNumber) uses its preset code.", project) }
        if let d = s.delivery, d.lost { return logger.info("The SMS to \(s.phoneNumber) is lost (phoneAuth.delivery).", project) }
        switch s.kind {
        case .signIn: logger.info("To verify the phone number \(s.phoneNumber), use the code \(s.code).", project)
        case .mfaEnrollment: logger.info("To enroll MFA with \(s.phoneNumber), use the code \(s.code).", project)
        case .mfaSignIn: logger.info("To sign in with MFA using \(s.phoneNumber), use the code \(s.code).", project)
        }
    }

    /// Pending sessions in every store right now (`--max-sessions` counts these).
    public var pendingSessionTotal: Int { sessionBudget.count }

    /// At the session cap, before a send's transaction (no store lock held): the expired sessions of every store go,
    /// each store in its own transaction (journaled like any expiry). At most once per second of the emulator clock,
    /// so sends refused at the cap cost a full sweep only that often; the send's own store is swept again inside its
    /// transaction.
    func makeSessionRoom(now: Int64) {
        guard sessionBudget.isFull else { return }
        let last = lastFullSweep.load(ordering: .relaxed)
        guard now < last || now >= last &+ 1000,
              lastFullSweep.compareExchange(expected: last, desired: now, ordering: .relaxed).exchanged else { return }
        for box in stores.withLock({ Array($0.boxes.values) }) {
            _ = try? box.attempt(refreshTokens, stores) { tx throws(AuthError) in tx.sweepOldestExpiredSessions(now: now, maxVisits: .max) }
        }
    }

    /// Registers the hooks that answer the long-polls waiting for `session`'s number once it is durable (never with a
    /// code a failed commit rolls back): one hash lookup, none at all when nobody waits; and those that began before
    /// this store existed (one atomic load when there are none: the store is registered by now, so no more can join).
    func notifyWaiters(_ tx: inout StoreTransaction, _ session: VerificationSession) {
        if !tx.store.waiters.isEmpty, tx.store.waiters[session.phoneNumber] != nil {
            let box = tx.box
            tx.onCommit { [self] in fireWaiters(box, session) }
        }
        if orphanCodes.isWaiting {
            let key = tx.key
            tx.onCommit { [self] in
                let orphans = orphanCodes.take(key, session.phoneNumber)
                waiterTotal.wrappingSubtract(orphans.count, ordering: .relaxed)
                for w in orphans { w.fire(session) }
            }
        }
    }

    /// Answers the long-polls waiting for `session`'s number with `session`.
    private func fireWaiters(_ box: StoreBox, _ session: VerificationSession) {
        let waiting = box.state.withLock { g -> [CodeWaiter] in
            guard let ready = g.store.waiters.removeValue(forKey: session.phoneNumber) else { return [] }
            g.store.waiterCount -= ready.count
            return ready
        }
        guard !waiting.isEmpty else { return }
        waiterTotal.wrappingSubtract(waiting.count, ordering: .relaxed)
        for w in waiting { w.fire(session) }
    }

    /// At most this many `verificationCodes:wait` long-polls per project (or tenant) at once.
    public static let maxWaitersPerStore = 1000

    /// Long-polls registered right now, across all projects (for tests and diagnostics).
    public var pendingWaiterCount: Int { waiterTotal.load(ordering: .relaxed) }

    /// The inbox long-poll: answers at once with the newest pending code for `phone`, else with the first one
    /// created within `timeoutSeconds` (nil after the timeout). Never blocks the calling thread. A code is revealed
    /// only once its session is durable (at once: the reply depends on the store's pending commit; later: waiters are
    /// fired by the send's commit hook). Never creates the project or tenant: on one that does not exist yet it waits
    /// in a small side table (at most `maxWaitersPerStore` such waiters in all), and the first send there (which
    /// creates the store) answers it.
    /// - Returns: the registered waiter (cancel it when the client goes away), or nil when answered at once.
    /// - Throws: `RESOURCE_EXHAUSTED` (429) past `maxWaitersPerStore` waiters in the store (or on missing stores).
    @discardableResult
    public func waitForCode(_ key: StoreKey, phone: String, timeoutSeconds: Double,
                            callback: @escaping @Sendable (VerificationSession?) -> Void) throws(AuthError) -> CodeWaiter? {
        let waiter = CodeWaiter(phone: phone, callback: callback)
        let exhausted = AuthError(.resourceExhausted, "Too many verificationCodes:wait requests are pending for this project (at most \(Self.maxWaitersPerStore)).")
        var box: StoreBox
        while true {
            guard let existing = existingStore(key) else {
                guard timeoutSeconds > 0 else { callback(nil); return nil }
                guard try waitAsOrphan(orphanCodes, key, waiter, timeoutSeconds: timeoutSeconds, exhausted: exhausted, onDrop: { [self] in
                    waiterTotal.wrappingSubtract(1, ordering: .relaxed)
                }) else { continue }
                waiterTotal.wrappingAdd(1, ordering: .relaxed)
                return waiter
            }
            box = existing
            // Check and register under one lock, so a send cannot slip in between.
            enum Registered { case removed, answered(VerificationSession, (ticket: UInt64, generation: UInt64)), none, waiting }
            let outcome = try box.state.withLock { g throws(AuthError) -> Registered in
                if g.removed { return .removed }  // deleted or reclaimed meanwhile: look the key up again
                if let newest = g.store.sessions.newest(phone: phone, deliveredBy: clock.nowMillis()) { return .answered(newest, box.pending(g)) }
                guard timeoutSeconds > 0 else { return .none }
                guard g.store.waiterCount < Self.maxWaitersPerStore else { throw exhausted }
                g.store.waiters[phone, default: []].append(waiter)
                g.store.waiterCount += 1
                return .waiting
            }
            switch outcome {
            case .removed: continue
            case .answered(let newest, let pending):
                guard box.depend(on: pending) else { throw Emulator.notDurable }
                callback(newest)
                return nil
            case .none: callback(nil); return nil
            case .waiting: break
            }
            break
        }
        waiterTotal.wrappingAdd(1, ordering: .relaxed)
        let registeredIn = box
        // Both closures are released when the waiter finishes (fired, timed out or cancelled).
        waiter.setCancelHook { [self] in _ = dropWaiter(registeredIn, waiter) }
        waiter.startTimer(seconds: timeoutSeconds) { [self] in
            if dropWaiter(registeredIn, waiter) { waiter.fire(nil) }
        }
        return waiter
    }

    /// Unregisters a waiter; true if it was still registered.
    private func dropWaiter(_ box: StoreBox, _ w: CodeWaiter) -> Bool {
        let removed = box.state.withLock { g -> Bool in
            guard var list = g.store.waiters.removeValue(forKey: w.phone) else { return false }
            let before = list.count
            list.removeAll { $0 === w }
            if !list.isEmpty { g.store.waiters[w.phone] = list }
            g.store.waiterCount -= before - list.count
            return list.count != before
        }
        if removed { waiterTotal.wrappingSubtract(1, ordering: .relaxed) }
        return removed
    }

    /// Registers a long-poll on a store that does not exist yet, under the registry lock (so the store cannot appear
    /// in between: whatever creates it and sends there finds the waiter in `inbox`), with its timer and cancel hook;
    /// `onDrop` runs when it leaves unanswered. False: the store exists by now (look again). Throws `exhausted` past
    /// `maxWaitersPerStore` such waiters in all. Reads never create a project: this is how a wait on one does not.
    func waitAsOrphan<V: Sendable>(_ inbox: OrphanInbox<V>, _ key: StoreKey, _ waiter: InboxWaiter<V>, timeoutSeconds: Double,
                                   exhausted: AuthError, onDrop: @escaping @Sendable () -> Void = {}) throws(AuthError) -> Bool {
        // nil: the store exists; else whether there was room.
        let registered = stores.withLock { r -> Bool? in
            if r.boxes[key] != nil { return nil }
            return inbox.insert(key, waiter, limit: Self.maxWaitersPerStore)
        }
        switch registered {
        case false?: throw exhausted
        case nil: return false
        case true?:
            waiter.setCancelHook { if inbox.remove(key, waiter) { onDrop() } }
            waiter.startTimer(seconds: timeoutSeconds) {
                if inbox.remove(key, waiter) {
                    onDrop()
                    waiter.fire(nil)
                }
            }
            return true
        }
    }

    /// A Google error chosen by a scenario number (`CODE` or `CODE : detail`); ErrorWire gives it its HTTP status.
    static func scenarioError(_ text: String) -> AuthError {
        if let r = text.firstRange(of: " : ") {
            return AuthError(.init(String(text[..<r.lowerBound])), String(text[r.upperBound...]))
        }
        return AuthError(.init(text))
    }

    // MARK: users

    /// An unused random uid.
    func newUserID(in users: UserTable) -> String {
        while true {
            let id = random.userID()
            if users[id] == nil { return id }
        }
    }

    // MARK: tokens

    /// The user behind a verified ID token, after the account checks every token use gets.
    public func user(for identity: TokenIdentity) throws(AuthError) -> UserRecord {
        let key = StoreKey(projectId: identity.projectId, tenantId: identity.tenantId)
        // Never creates a store: a token's tenant claim is not a way to make tenants (unsigned tokens exist).
        guard let box = existingStore(key) else { throw AuthError(.userNotFound) }
        let user = box.read { $0.users[identity.localId] }
        guard let u = user else { throw AuthError(.userNotFound) }
        guard !u.disabled else { throw AuthError(.userDisabled) }
        if let vs = u.validSince, identity.issuedAt < vs { throw AuthError(.tokenExpired) }
        return u
    }

    /// Stores and returns a new opaque refresh token (its own transaction; sign-ins and sign-ups issue theirs
    /// inside the transaction that saves the user).
    public func issueRefreshToken(_ key: StoreKey, localId: String, authTime: Int64, signInProvider: String) throws(AuthError) -> String {
        let (token, rec) = newRefreshToken(key, localId: localId, authTime: authTime, signInProvider: signInProvider)
        try transaction(key) { tx throws(AuthError) in tx.insertRefreshToken(token, rec) }
        return token
    }

    func newRefreshToken(_ key: StoreKey, localId: String, authTime: Int64, signInProvider: String,
                         secondFactorId: String? = nil, extraClaims: String? = nil, secondFactor: String? = nil) -> (String, RefreshTokenRecord) {
        (Self.refreshTokenText(sequence: refreshSequence.wrappingAdd(1, ordering: .relaxed).newValue, random: random.bytes(48)),
         RefreshTokenRecord(projectId: key.projectId, tenantId: key.tenantId, localId: localId, authTime: authTime,
                            signInProvider: signInProvider, issuedAt: clock.nowSeconds(), secondFactorId: secondFactorId,
                            extraClaims: extraClaims, secondFactor: secondFactor))
    }

    /// 11 characters whose byte order is the number's order (64 symbols in ASCII order, 6 bits each). A refresh token
    /// is this issue sequence then 48 random bytes: still unguessable, but a journal stores new tokens at the end of
    /// its B-trees (the token table and the by-user index) instead of on a random page each, so a batch of sign-ins
    /// writes a few pages instead of one or two per sign-in.
    static func sortable(_ n: UInt64) -> String {
        var out: [UInt8] = []
        appendSortable(n, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    private static func appendSortable(_ n: UInt64, to out: inout [UInt8]) {
        let start = out.count
        out.append(contentsOf: repeatElement(0, count: 11))
        var v = n
        let symbols: StaticString = "-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz"
        symbols.withUTF8Buffer { s in
            for i in stride(from: start + 10, through: start, by: -1) {
                out[i] = s[Int(v & 63)]
                v >>= 6
            }
        }
    }

    /// `AMf-`, the sortable issue sequence, the random bytes in base64url: written into one buffer (it was three
    /// strings joined, each from its own array).
    static func refreshTokenText(sequence: UInt64, random: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(15 + (random.count + 2) / 3 * 4)
        out.append(contentsOf: "AMf-".utf8)
        appendSortable(sequence, to: &out)
        Base64URL.append(random, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    func restoreRefreshTokens(_ tokens: [(String, RefreshTokenRecord)]) {
        refreshTokens.withLock { m in for (t, r) in tokens { m.insert(t, r) } }
    }

    /// Every refresh token (for tests and exports).
    public var refreshTokenCount: Int { refreshTokens.withLock { $0.byToken.count } }

    /// Every refresh token and its record (tests compare memory with what a journal restores).
    public var allRefreshTokens: [String: RefreshTokenRecord] { refreshTokens.withLock { $0.byToken } }

    /// Index entries removals have visited so far (a test hook: deleting a user must visit only that user's tokens).
    var refreshTokenIndexVisits: Int { refreshTokens.withLock { $0.visited } }

    /// Exchanges a refresh token: the record and the current user (production's checks: deleted, disabled, revoked).
    public func redeemRefreshToken(_ token: String) throws(AuthError) -> (RefreshTokenRecord, UserRecord) {
        guard let rec = refreshTokens.withLock({ $0.byToken[token] }) else { throw AuthError(.invalidRefreshToken) }
        let now = clock.nowMillis()
        let user = try transaction(StoreKey(projectId: rec.projectId, tenantId: rec.tenantId)) { tx throws(AuthError) -> UserRecord in
            guard var u = tx.store.users[rec.localId] else { throw AuthError(.userNotFound) }
            guard !u.disabled else { throw AuthError(.userDisabled) }
            if let vs = u.validSince, rec.issuedAt < vs { throw AuthError(.tokenExpired) }
            u.lastRefreshAt = now
            tx.save(u)
            tx.emit(.tokensRefreshed(uid: u.localId))
            return u
        }
        return (rec, user)
    }

    // MARK: emulator API

    /// A store's config; a store that does not exist yet answers what it would start with (nothing is allocated).
    public func config(_ key: StoreKey) -> ProjectConfig { existingStore(key)?.read { $0.config } ?? initialConfig(key) }

    /// Merges a config JSON (the `/emulator/v1/projects/{p}/config` shape) and returns the result: read, merge and
    /// write in one transaction, so concurrent patches never lose each other's fields.
    public func patchConfig(_ key: StoreKey, _ json: JSON) throws(ConfigError) -> ProjectConfig {
        let outcome: Result<ProjectConfig, ConfigError>
        do throws(AuthError) {
            outcome = try transaction(key) { tx throws(AuthError) -> Result<ProjectConfig, ConfigError> in
                var updated = tx.store.config
                do throws(ConfigError) { try updated.apply(json) } catch { return .failure(error) }
                tx.emitConfigChange(from: tx.store.config, to: updated)
                tx.setConfig(updated)
                return .success(updated)
            }
        } catch {
            throw ConfigError(path: "", message: error.description)
        }
        return try outcome.get()
    }

    /// Read-modify-write of a store's config and tenant settings in one transaction: `body` sees the current values
    /// and may change both (or throw, changing nothing).
    public func updateConfig<T>(_ key: StoreKey, _ body: (inout ProjectConfig, inout TenantSettings?) throws(AuthError) -> T) throws(AuthError) -> T {
        try transaction(key) { tx throws(AuthError) -> T in
            var config = tx.store.config, tenant = tx.store.tenant
            let result = try body(&config, &tenant)
            if config != tx.store.config || tenant != tx.store.tenant {
                tx.emitConfigChange(from: tx.store.config, to: config, tenantChanged: tenant != tx.store.tenant)
                tx.setConfig(config, tenant: tenant)
            }
            return result
        }
    }


    /// Every pending code (optionally one number's) in creation order. O(result). A store that does not exist has none
    /// (and is not created: reads never allocate).
    /// An SMS that has not arrived (late or lost, `phoneAuth.delivery`) is not in the inbox.
    public func verificationCodes(_ key: StoreKey, phone: String?) -> [VerificationSession] {
        deliverDueSMS()
        let now = clock.nowMillis()
        return (existingStore(key)?.read { $0.pendingSessions(phone: phone) } ?? []).filter { $0.isDelivered(now: now) }
    }

    /// One page of pending codes in creation order: sequence above `after`, at most `limit`. O(limit), plus the
    /// number's earlier sessions when paging one number.
    public func verificationCodes(_ key: StoreKey, phone: String?, after: UInt64?, limit: Int) -> SessionPage {
        deliverDueSMS()
        let now = clock.nowMillis()
        var page = existingStore(key)?.read { $0.pendingSessions(phone: phone, after: after, limit: limit) } ?? SessionPage(sessions: [], nextAfter: nil)
        if page.sessions.contains(where: { $0.delivery != nil }) { page.sessions.removeAll { !$0.isDelivered(now: now) } }
        return page
    }

    /// Removes pending codes (all, or one number's); their sessions become invalid. Returns how many.
    @discardableResult
    public func clearVerificationCodes(_ key: StoreKey, phone: String? = nil) throws(AuthError) -> Int {
        try transaction(key) { tx throws(AuthError) -> Int in tx.clearSessions(phone: phone) }
    }

    /// Deletes every user of a store and their refresh tokens (the official `DELETE /emulator/v1/projects/{p}/accounts`).
    public func wipeAccounts(_ key: StoreKey) throws(AuthError) {
        try transaction(key) { tx throws(AuthError) in tx.wipeUsers() }
    }
}

/// Refresh tokens by token (redeem) and by store and user (delete), so removing a user's tokens costs O(its tokens)
/// instead of a scan of every token. A user's tokens are kept in issue order, in an array: every sign-in appends one
/// (no hashing of the token a second time, no growing set to rehash); a single token leaves only when its issue is
/// rolled back (the newest, found from the end) or the same token is inserted again (a journal replay).
struct RefreshTokenIndex: Sendable {
    var byToken: [String: RefreshTokenRecord] = [:]
    var byUser: [StoreKey: [String: [String]]] = [:]
    /// Index entries visited by removals (test hook).
    var visited = 0

    mutating func insert(_ token: String, _ rec: RefreshTokenRecord) {
        if let old = byToken.updateValue(rec, forKey: token) { unlink(token, old) }
        byUser[StoreKey(projectId: rec.projectId, tenantId: rec.tenantId), default: [:]][rec.localId, default: []].append(token)
    }

    private mutating func unlink(_ token: String, _ rec: RefreshTokenRecord) {
        let key = StoreKey(projectId: rec.projectId, tenantId: rec.tenantId)
        if let i = byUser[key]?[rec.localId]?.lastIndex(of: token) { byUser[key]?[rec.localId]?.remove(at: i) }
        if byUser[key]?[rec.localId]?.isEmpty == true { byUser[key]?[rec.localId] = nil }
        if byUser[key]?.isEmpty == true { byUser[key] = nil }
    }

    /// Removes one token (a rolled-back issue).
    mutating func remove(_ token: String) {
        guard let rec = byToken.removeValue(forKey: token) else { return }
        unlink(token, rec)
    }

    /// Removes a user's tokens and returns them (for rollback).
    mutating func removeUser(_ key: StoreKey, _ localId: String) -> [(String, RefreshTokenRecord)] {
        guard let tokens = byUser[key]?.removeValue(forKey: localId) else { return [] }
        if byUser[key]?.isEmpty == true { byUser[key] = nil }
        visited += tokens.count
        return tokens.compactMap { t in byToken.removeValue(forKey: t).map { (t, $0) } }
    }

    /// A store's tokens (a snapshot's, Snapshots.swift).
    func tokens(of key: StoreKey) -> [(String, RefreshTokenRecord)] {
        guard let users = byUser[key] else { return [] }
        return users.values.flatMap { $0.compactMap { t in byToken[t].map { (t, $0) } } }
    }

    /// Removes a store's tokens and returns them (for rollback).
    mutating func removeStore(_ key: StoreKey) -> [(String, RefreshTokenRecord)] {
        guard let users = byUser.removeValue(forKey: key) else { return [] }
        var gone: [(String, RefreshTokenRecord)] = []
        for (_, tokens) in users {
            for t in tokens { if let r = byToken.removeValue(forKey: t) { gone.append((t, r)) } }
            visited += tokens.count
        }
        return gone
    }
}

/// Every store by key, with per-project tenant sets so the caps are checked in O(1).
struct StoreRegistry: Sendable {
    var boxes: [StoreKey: StoreBox] = [:]
    var tenants: [String: Set<String>] = [:]
    var projectCount = 0

    func tenantCount(of projectId: String) -> Int { tenants[projectId]?.count ?? 0 }

    mutating func insert(_ box: StoreBox) {
        guard boxes.updateValue(box, forKey: box.key) == nil else { return }
        if let t = box.key.tenantId { tenants[box.key.projectId, default: []].insert(t) } else { projectCount += 1 }
    }

    mutating func remove(_ key: StoreKey) {
        guard boxes.removeValue(forKey: key) != nil else { return }
        if let t = key.tenantId {
            tenants[key.projectId]?.remove(t)
            if tenants[key.projectId]?.isEmpty == true { tenants[key.projectId] = nil }
        } else {
            projectCount -= 1
        }
    }
}

