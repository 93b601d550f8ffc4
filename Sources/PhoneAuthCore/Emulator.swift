import Dispatch
import EmulatorSupport
import Synchronization

/// One project's or tenant's state behind its own lock (no global lock on the hot path).
public final class StoreBox: Sendable {
    public let key: StoreKey
    let state: Locked<AuthStore>
    /// `implicit`: a tenant created on first use by a client (reclaimable while it holds nothing).
    init(key: StoreKey, config: ProjectConfig, implicit: Bool = false) {
        self.key = key
        var store = AuthStore(config: config, tenant: key.tenantId == nil ? nil : TenantSettings())
        store.implicitTenant = implicit && key.tenantId != nil
        state = Locked(store)
    }

    /// Runs `body` with exclusive access to the store. Never call out to slow work (signing) inside.
    public func withLock<T>(_ body: (inout AuthStore) throws(AuthError) -> T) throws(AuthError) -> T {
        try state.withLock { s throws(AuthError) -> T in try body(&s) }
    }

    public func read<T>(_ body: (AuthStore) -> T) -> T { state.withLock { body($0) } }
}

/// The outcome of `signInWithPhoneNumber`.
public enum PhoneSignInOutcome: Sendable, Equatable {
    /// Signed in; `refreshToken` was stored in the same durable transaction as the user.
    case signedIn(user: UserRecord, isNewUser: Bool, refreshToken: String, authTime: Int64)
    /// The number belongs to another user: production answers 200 with a temporary proof.
    case conflict(phoneNumber: String, temporaryProof: String)
}

/// The emulator's state: every project and tenant, refresh tokens, the clock and the randomness.
public final class Emulator: Sendable {
    public let clock: EmulatorClock
    public let random: any RandomSource
    public let defaultProjectId: String
    public let logger: Logger
    /// Durable storage (`--data-dir`); nil: in memory only.
    public let journal: (any StateJournal)?
    private let initialConfigs: [String: ProjectConfig]
    private let stores = Locked(StoreRegistry())
    /// `--max-projects`: projects created on first use stop here (`QUOTA_EXCEEDED`).
    public let maxProjects: Int
    /// Tenants per project (created on first use or explicitly), as Identity Platform's quota.
    public let maxTenantsPerProject: Int
    /// Users per project, and per tenant (`--max-users`): creating one more answers `QUOTA_EXCEEDED`.
    public let maxUsersPerProject: Int
    private let refreshTokens = Locked(RefreshTokenIndex())
    /// Registered inbox long-polls across all stores (the waiters themselves live in their store, by number).
    private let waiterTotal = Atomic<Int>(0)
    /// The default project's store, reachable without the registry lock (the hot path).
    private let defaultStore: StoreBox
    /// Long-polls on a project or tenant that does not exist (yet): they wait here, by store and number, without
    /// creating it; a send checks this table only while it is not empty.
    private let orphanWaiters = Locked(OrphanWaiters())
    /// Waiters in `orphanWaiters` (read without its lock on every send).
    private let orphanTotal = Atomic<Int>(0)

    /// - Parameters:
    ///   - projectConfigs: configurations for named projects; any other project starts from `ProjectConfig()`.
    public init(defaultProjectId: String, projectConfigs: [String: ProjectConfig] = [:], clock: EmulatorClock = EmulatorClock(),
                random: any RandomSource = SystemRandom(), logger: Logger = Logger(label: "phone-auth"), journal: (any StateJournal)? = nil,
                maxProjects: Int = Emulator.defaultMaxProjects, maxTenantsPerProject: Int = Emulator.defaultMaxTenantsPerProject,
                maxUsersPerProject: Int = Emulator.defaultMaxUsersPerProject) {
        self.defaultProjectId = defaultProjectId
        self.maxProjects = max(1, maxProjects)
        self.maxTenantsPerProject = max(0, maxTenantsPerProject)
        self.maxUsersPerProject = max(1, maxUsersPerProject)
        self.journal = journal
        self.initialConfigs = projectConfigs
        self.clock = clock
        self.random = random
        self.logger = logger
        let key = StoreKey(projectId: defaultProjectId)
        defaultStore = StoreBox(key: key, config: projectConfigs[defaultProjectId] ?? ProjectConfig())
        stores.withLock { $0.insert(defaultStore) }
    }

    public static let defaultMaxProjects = 5000
    public static let defaultMaxTenantsPerProject = 1000
    /// Measured (release build): a phone user costs about 0.7 KB of RSS, an anonymous signUp user with its refresh
    /// token about 1 KB, one with every free-text field at its limit about 5 KB: 200,000 users are 0.15 to 1 GB.
    public static let defaultMaxUsersPerProject = 200_000

    /// The store for a project or tenant, created on first use. A new tenant starts with its project's config.
    /// Callers admit client-supplied keys first (`admit`): this never creates a store for an invalid id (it answers
    /// a detached, unregistered store instead and logs the attempt), but it does not enforce the caps. Only writes
    /// call it (through `withStore`); reads use `existingStore` and answer as for an empty store.
    public func store(_ key: StoreKey) -> StoreBox {
        if key.tenantId == nil && key.projectId == defaultProjectId { return defaultStore }
        if let s = stores.withLock({ $0.boxes[key] }) { return s }
        let config = initialConfig(key)
        guard Identifiers.isValid(key) else {
            logger.error("refused to register a store for an invalid id", [("project", Identifiers.printable(key.projectId, limit: 64)),
                                                                          ("tenant", Identifiers.printable(key.tenantId ?? "", limit: 64))])
            return StoreBox(key: key, config: config)
        }
        if key.tenantId != nil { _ = store(StoreKey(projectId: key.projectId)) }
        return stores.withLock { r in
            if let s = r.boxes[key] { return s }
            let s = StoreBox(key: key, config: config, implicit: true)
            r.insert(s)
            return s
        }
    }

    /// Runs `body` on the store for `key` (created on first use) under its lock. A store reclaimed in between (see
    /// `reclaimTenants`) is never written: the key is looked up again, so no write lands in a detached store.
    public func withStore<T>(_ key: StoreKey, _ body: (inout AuthStore) throws(AuthError) -> T) throws(AuthError) -> T {
        while true {
            let box = store(key)
            var result: T? = nil
            try box.withLock { s throws(AuthError) in
                guard !s.retired else { return }
                result = try body(&s)
            }
            if let result { return result }
        }
    }

    /// `withStore` for bodies that cannot fail.
    public func withStoreState<T>(_ key: StoreKey, _ body: (inout AuthStore) -> T) -> T {
        while true {
            let box = store(key)
            let result = box.state.withLock { s -> T? in s.retired ? nil : body(&s) }
            if let result { return result }
        }
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
                throw AuthError("TENANT_NOT_FOUND", http: 404, reason: "notFound")
            }
        }
        let projectExists = existingStore(project) != nil
        let now = clock.nowMillis()
        let check = { (r: inout StoreRegistry) throws(AuthError) in
            if r.boxes[project] == nil && r.projectCount >= self.maxProjects {
                throw AuthError("QUOTA_EXCEEDED", "Too many projects: this emulator holds at most \(self.maxProjects) (--max-projects).")
            }
            if key.tenantId != nil, r.boxes[key] == nil, r.tenantCount(of: key.projectId) >= self.maxTenantsPerProject {
                // Tenants created on first use that hold nothing make room first (only at the cap: O(its tenants)).
                self.reclaimTenants(of: key.projectId, in: &r, now: now)
                if r.tenantCount(of: key.projectId) >= self.maxTenantsPerProject {
                    throw AuthError("QUOTA_EXCEEDED", "Too many tenants: a project holds at most \(self.maxTenantsPerProject) tenants.")
                }
            }
        }
        guard create else {
            try stores.withLock { r throws(AuthError) in try check(&r) }
            return
        }
        let projectConfig = projectExists ? nil : initialConfigs[key.projectId] ?? ProjectConfig()
        let tenantConfig = key.tenantId == nil ? nil : config(project)
        try stores.withLock { r throws(AuthError) in
            try check(&r)
            if r.boxes[project] == nil, let projectConfig { r.insert(StoreBox(key: project, config: projectConfig)) }
            if key.tenantId != nil, r.boxes[key] == nil, let tenantConfig { r.insert(StoreBox(key: key, config: tenantConfig, implicit: !explicit)) }
        }
    }

    /// Removes the project's tenants that were created on first use and hold nothing (`AuthStore.isReclaimable`),
    /// on disk too. Runs under the registry lock, taking each store's lock inside it (the one lock order used:
    /// nothing takes the registry lock while holding a store's). A reclaimed store is marked `retired`, so a writer
    /// that still holds it starts over with a fresh store (`withStore`).
    private func reclaimTenants(of projectId: String, in r: inout StoreRegistry, now: Int64) {
        var gone: [StoreKey] = []
        for t in r.tenants[projectId] ?? [] {
            let key = StoreKey(projectId: projectId, tenantId: t)
            guard let box = r.boxes[key] else { continue }
            let reclaimed = box.state.withLock { s -> Bool in
                guard s.isReclaimable(now: now) else { return false }
                // Expired sessions may be on disk: the store goes from disk before memory forgets it.
                if s.sessions.count > 0 {
                    do { try persist([.storeDeleted(key)]) } catch { return false }
                }
                s.retired = true
                return true
            }
            if reclaimed { gone.append(key) }
        }
        for key in gone { r.remove(key) }
        if !gone.isEmpty { logger.debug("reclaimed empty tenants created on first use", [("project", projectId), ("count", String(gone.count))]) }
    }

    /// Forgets a store entirely (a deleted tenant); the next use starts afresh.
    public func removeStore(_ key: StoreKey) {
        try? persist([.storeDeleted(key)])
        stores.withLock { $0.remove(key) }
    }

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
        var waiting: [CodeWaiter] = []
        let (session, fictional) = try withStore(key) { s throws(AuthError) -> (VerificationSession, Bool) in
            waiting = []
            try Self.checkTenantEnabled(s)
            guard s.config.phoneEnabled else { throw AuthError("OPERATION_NOT_ALLOWED") }
            let settings = s.config.phoneAuth
            if let code = settings.scenarioNumbers[phone.e164]?.onSend { throw Self.scenarioError(code) }
            let preset = s.config.testPhoneNumbers[phone.e164]
            if preset == nil {
                try Self.checkSendPolicy(&s, phone: phone, clientIP: clientIP, credentials: credentials, now: now)
            }
            let code = preset ?? random.digits(settings.codeLength)
            var id = SessionID(bytes: random.bytes(SessionID.byteCount))
            while s.sessions.contains(id) { id = SessionID(bytes: random.bytes(SessionID.byteCount)) }
            let session = VerificationSession(
                id: id, phoneNumber: phone.e164, code: code, createdAt: now,
                expiresAt: settings.sessionTtlSeconds > 0 ? now + Int64(settings.sessionTtlSeconds) * 1000 : nil,
                attemptsLeft: settings.maxCodeAttempts > 0 ? settings.maxCodeAttempts : nil,
                fictional: preset != nil, kind: .signIn, appSignatureHash: autoRetrievalHash.flatMap { $0.isEmpty ? nil : String($0.prefix(64)) },
                sequence: s.nextSequence)
            s.nextSequence += 1
            s.sessions[id] = session
            var changes: [StateChange] = [.sessionSaved(key, session)]
            for gone in s.sweepExpiredSessions(now: now) { changes.append(.sessionDeleted(key, gone.text)) }
            try persist(changes)
            // Long-polls for this number: one hash lookup, none at all when nobody waits.
            if !s.waiters.isEmpty, let ready = s.waiters.removeValue(forKey: phone.e164) {
                s.waiterCount -= ready.count
                waiting = ready
            }
            return (session, preset != nil)
        }
        if fictional {
            logger.debug("Fictional number \(session.phoneNumber) uses its preset code.", [("project", key.description)])
        } else {
            logger.info("To verify the phone number \(session.phoneNumber), use the code \(session.code).", [("project", key.description)])
        }
        if !waiting.isEmpty {
            waiterTotal.wrappingSubtract(waiting.count, ordering: .relaxed)
            for w in waiting { w.fire(session) }
        }
        // Long-polls that began before this store existed (one atomic load when there are none).
        if orphanTotal.load(ordering: .acquiring) > 0 {
            let orphans = orphanWaiters.withLock { $0.take(key, phone: session.phoneNumber) }
            if !orphans.isEmpty {
                orphanTotal.wrappingSubtract(orphans.count, ordering: .releasing)
                waiterTotal.wrappingSubtract(orphans.count, ordering: .relaxed)
                for w in orphans { w.fire(session) }
            }
        }
        return session.sessionInfo
    }

    /// At most this many `verificationCodes:wait` long-polls per project (or tenant) at once.
    public static let maxWaitersPerStore = 1000

    /// Long-polls registered right now, across all projects (for tests and diagnostics).
    public var pendingWaiterCount: Int { waiterTotal.load(ordering: .relaxed) }

    /// The inbox long-poll: answers at once with the newest pending code for `phone`, else with the first one
    /// created within `timeoutSeconds` (nil after the timeout). Never blocks the calling thread. Never creates the
    /// project or tenant: on one that does not exist yet it waits in a small side table (at most
    /// `maxWaitersPerStore` such waiters in all), and the first send there (which creates the store) answers it.
    /// - Returns: the registered waiter (cancel it when the client goes away), or nil when answered at once.
    /// - Throws: `RESOURCE_EXHAUSTED` (429) past `maxWaitersPerStore` waiters in the store.
    @discardableResult
    public func waitForCode(_ key: StoreKey, phone: String, timeoutSeconds: Double,
                            callback: @escaping @Sendable (VerificationSession?) -> Void) throws(AuthError) -> CodeWaiter? {
        let waiter = CodeWaiter(phone: phone, callback: callback)
        let exhausted = AuthError("RESOURCE_EXHAUSTED", "Too many verificationCodes:wait requests are pending for this project (at most \(Self.maxWaitersPerStore)).",
                                  http: 429, reason: "rateLimitExceeded")
        var box: StoreBox
        while true {
            guard let existing = existingStore(key) else {
                guard timeoutSeconds > 0 else { callback(nil); return nil }
                // Registered under the registry lock, so the store cannot appear in between: a send that creates it
                // afterwards finds this waiter in `orphanWaiters`.
                enum Outcome { case orphan, full, exists(StoreBox) }
                let outcome = stores.withLock { r -> Outcome in
                    if let b = r.boxes[key] { return .exists(b) }
                    return orphanWaiters.withLock { o -> Outcome in
                        guard o.count < Self.maxWaitersPerStore else { return .full }
                        o.insert(key, waiter)
                        orphanTotal.wrappingAdd(1, ordering: .releasing)
                        return .orphan
                    }
                }
                switch outcome {
                case .full: throw exhausted
                case .exists: continue
                case .orphan:
                    waiterTotal.wrappingAdd(1, ordering: .relaxed)
                    waiter.setCancelHook { [self] in _ = dropOrphan(key, waiter) }
                    waiter.startTimer(seconds: timeoutSeconds) { [self] in
                        if dropOrphan(key, waiter) { waiter.fire(nil) }
                    }
                    return waiter
                }
            }
            box = existing
            // Check and register under one lock, so a send cannot slip in between.
            enum Registered { case retired, answered(VerificationSession?), waiting }
            let outcome = try box.withLock { s throws(AuthError) -> Registered in
                if s.retired { return .retired }
                if let newest = s.sessions.newest(phone: phone) { return .answered(newest) }
                guard timeoutSeconds > 0 else { return .answered(nil) }
                guard s.waiterCount < Self.maxWaitersPerStore else { throw exhausted }
                s.waiters[phone, default: []].append(waiter)
                s.waiterCount += 1
                return .waiting
            }
            switch outcome {
            case .retired: continue
            case .answered(let session): callback(session); return nil
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
        let removed = box.state.withLock { s -> Bool in
            guard var list = s.waiters.removeValue(forKey: w.phone) else { return false }
            let before = list.count
            list.removeAll { $0 === w }
            if !list.isEmpty { s.waiters[w.phone] = list }
            s.waiterCount -= before - list.count
            return list.count != before
        }
        if removed { waiterTotal.wrappingSubtract(1, ordering: .relaxed) }
        return removed
    }

    /// Unregisters a waiter on a store that did not exist; true if it was still registered.
    private func dropOrphan(_ key: StoreKey, _ w: CodeWaiter) -> Bool {
        let removed = orphanWaiters.withLock { $0.remove(key, w) }
        if removed {
            orphanTotal.wrappingSubtract(1, ordering: .releasing)
            waiterTotal.wrappingSubtract(1, ordering: .relaxed)
        }
        return removed
    }

    /// A Google error chosen by a scenario number (`CODE` or `CODE : detail`).
    static func scenarioError(_ text: String) -> AuthError {
        if let r = text.firstRange(of: " : ") {
            return AuthError(String(text[..<r.lowerBound]), String(text[r.upperBound...]), http: httpStatus(for: String(text[..<r.lowerBound])))
        }
        return AuthError(text, http: httpStatus(for: text))
    }

    static func httpStatus(for code: String) -> Int {
        switch code {
        case "QUOTA_EXCEEDED", "TOO_MANY_ATTEMPTS_TRY_LATER": 400
        case "INTERNAL", "INTERNAL_ERROR": 500
        case "UNAVAILABLE": 503
        default: 400
        }
    }

    // MARK: signInWithPhoneNumber

    /// Verifies a code (or replays a temporary proof) and signs in, creates, links or re-authenticates a user.
    /// - Parameter tokenUser: the verified identity of a request's `idToken` (link / re-auth), already checked.
    public func signInWithPhoneNumber(_ key: StoreKey, sessionInfo: String?, code: String?, temporaryProof: String?,
                                      phoneNumber: String?, tokenUser: TokenIdentity?, operation: String?) throws(AuthError) -> PhoneSignInOutcome {
        let now = clock.nowMillis()
        return try withStore(key) { s throws(AuthError) -> PhoneSignInOutcome in
            try Self.checkTenantEnabled(s)
            var consumed: String? = nil
            var refresh: (String, RefreshTokenRecord)? = nil
            func done(_ user: UserRecord?) throws(AuthError) {
                var changes: [StateChange] = consumed.map { [.sessionDeleted(key, $0)] } ?? []
                if let user {
                    changes.append(.userSaved(key, user))
                    refresh = newRefreshToken(key, localId: user.localId, authTime: now / 1000, signInProvider: "phone")
                    changes.append(.refreshTokenSaved(refresh!.0, refresh!.1))
                }
                try persist(changes)
                if let refresh { refreshTokens.withLock { $0.insert(refresh.0, refresh.1) } }
            }
            let phone: String
            let viaProof: Bool
            if let proof = temporaryProof, !proof.isEmpty {
                guard let raw = phoneNumber, !raw.isEmpty else { throw AuthError("MISSING_PHONE_NUMBER") }
                let p = try PhoneNumber(parsing: raw).e164
                guard s.temporaryProofs.peek(proof, now: now) == p else { throw AuthError("INVALID_TEMPORARY_PROOF") }
                phone = p
                viaProof = true
            } else {
                guard let info = sessionInfo, !info.isEmpty else { throw AuthError("MISSING_SESSION_INFO") }
                guard let code, !code.isEmpty else { throw AuthError("MISSING_CODE") }
                guard let sid = SessionID(info), var session = s.sessions[sid] else { throw AuthError.invalidSessionInfo }
                if let exp = session.expiresAt, now >= exp {
                    s.sessions[sid] = nil
                    try persist([.sessionDeleted(key, sid.text)])
                    throw AuthError.sessionExpired
                }
                if let left = session.attemptsLeft, left <= 0 {
                    s.sessions[sid] = nil
                    try persist([.sessionDeleted(key, sid.text)])
                    throw AuthError.tooManyAttempts
                }
                if let scenario = s.config.phoneAuth.scenarioNumbers[session.phoneNumber]?.onSignIn {
                    throw Self.scenarioError(scenario)
                }
                guard constantTimeEquals(code, session.code) else {
                    if let left = session.attemptsLeft {
                        session.attemptsLeft = left - 1
                        s.sessions[sid] = session
                        try persist([.sessionSaved(key, session)])
                    }
                    throw AuthError.invalidCode
                }
                s.sessions[sid] = nil  // single use, consumed before the account checks (as production)
                consumed = sid.text  // the canonical spelling keys persistence, never the client's text
                phone = session.phoneNumber
                viaProof = false
            }

            let owner = s.user(phone: phone)
            if let tokenUser {
                guard var user = s.users[tokenUser.localId] else { throw AuthError.userNotFound }
                if let owner, owner.localId != user.localId {
                    if viaProof { throw AuthError("PHONE_NUMBER_EXISTS") }
                    let proof = random.token(byteCount: 64)
                    s.temporaryProofs.insert(proof, phone, expiresAt: now + Self.temporaryProofLifetimeMillis, now: now)
                    try done(nil)
                    return .conflict(phoneNumber: phone, temporaryProof: proof)
                }
                guard !user.disabled else { try done(nil); throw AuthError.userDisabled }
                user.phoneNumber = phone
                user.lastLoginAt = now
                s.save(user)
                try done(user)
                return .signedIn(user: user, isNewUser: false, refreshToken: refresh!.0, authTime: now / 1000)
            }
            if var user = owner {
                guard !user.disabled else { try done(nil); throw AuthError.userDisabled }
                user.lastLoginAt = now
                s.save(user)
                try done(user)
                return .signedIn(user: user, isNewUser: false, refreshToken: refresh!.0, authTime: now / 1000)
            }
            if operation == "REAUTH" { try done(nil); throw AuthError.userNotFound }
            if let full = userQuotaError(s) { try done(nil); throw full }
            var user = UserRecord(localId: newUserID(in: s), createdAt: now)
            user.phoneNumber = phone
            user.lastRefreshAt = now
            user.lastLoginAt = now
            user.tenantId = key.tenantId
            s.save(user)
            try done(user)
            return .signedIn(user: user, isNewUser: true, refreshToken: refresh!.0, authTime: now / 1000)
        }
    }

    /// A temporary proof (phone-number link conflict) is good for an hour; a store keeps the newest 256.
    public static let temporaryProofLifetimeMillis: Int64 = 3_600_000
    public static let maxTemporaryProofs = 256

    func newUserID(in s: AuthStore) -> String {
        while true {
            let id = random.userID()
            if s.users[id] == nil { return id }
        }
    }

    // MARK: tokens

    /// The user behind a verified ID token, after the account checks every token use gets.
    public func user(for identity: TokenIdentity) throws(AuthError) -> UserRecord {
        let key = StoreKey(projectId: identity.projectId, tenantId: identity.tenantId)
        // Never creates a store: a token's tenant claim is not a way to make tenants (unsigned tokens exist).
        guard let box = existingStore(key) else { throw AuthError.userNotFound }
        return try box.withLock { s throws(AuthError) -> UserRecord in
            guard let u = s.users[identity.localId] else { throw AuthError.userNotFound }
            guard !u.disabled else { throw AuthError.userDisabled }
            if let vs = u.validSince, identity.issuedAt < vs { throw AuthError.tokenExpired }
            return u
        }
    }

    /// Stores and returns a new opaque refresh token.
    public func issueRefreshToken(_ key: StoreKey, localId: String, authTime: Int64, signInProvider: String) throws(AuthError) -> String {
        let (token, rec) = newRefreshToken(key, localId: localId, authTime: authTime, signInProvider: signInProvider)
        try persist([.refreshTokenSaved(token, rec)])
        refreshTokens.withLock { $0.insert(token, rec) }
        return token
    }

    func newRefreshToken(_ key: StoreKey, localId: String, authTime: Int64, signInProvider: String) -> (String, RefreshTokenRecord) {
        ("AMf-" + random.token(byteCount: 48),
         RefreshTokenRecord(projectId: key.projectId, tenantId: key.tenantId, localId: localId, authTime: authTime,
                            signInProvider: signInProvider, issuedAt: clock.nowSeconds()))
    }

    func restoreRefreshTokens(_ tokens: [(String, RefreshTokenRecord)]) {
        refreshTokens.withLock { m in for (t, r) in tokens { m.insert(t, r) } }
    }

    /// Every refresh token (for tests and exports).
    public var refreshTokenCount: Int { refreshTokens.withLock { $0.byToken.count } }

    /// Index entries removals have visited so far (a test hook: deleting a user must visit only that user's tokens).
    var refreshTokenIndexVisits: Int { refreshTokens.withLock { $0.visited } }

    /// Exchanges a refresh token: the record and the current user (production's checks: deleted, disabled, revoked).
    public func redeemRefreshToken(_ token: String) throws(AuthError) -> (RefreshTokenRecord, UserRecord) {
        guard let rec = refreshTokens.withLock({ $0.byToken[token] }) else { throw AuthError("INVALID_REFRESH_TOKEN") }
        let now = clock.nowMillis()
        let user = try withStore(StoreKey(projectId: rec.projectId, tenantId: rec.tenantId)) { s throws(AuthError) -> UserRecord in
            guard var u = s.users[rec.localId] else { throw AuthError.userNotFound }
            guard !u.disabled else { throw AuthError.userDisabled }
            if let vs = u.validSince, rec.issuedAt < vs { throw AuthError.tokenExpired }
            u.lastRefreshAt = now
            s.users[u.localId] = u
            try persist([.userSaved(StoreKey(projectId: rec.projectId, tenantId: rec.tenantId), u)])
            return u
        }
        return (rec, user)
    }

    /// Drops refresh tokens of a deleted user (or of a whole store when `localId` is nil): O(those tokens), through
    /// the per-user index. `persisting: false` when the caller's own journal change already deleted them on disk.
    public func forgetRefreshTokens(_ key: StoreKey, localId: String?, persisting: Bool = true) {
        if persisting { try? persist([.refreshTokensDeleted(key, localId: localId)]) }
        refreshTokens.withLock { m in
            if let localId { m.removeUser(key, localId) } else { m.removeStore(key) }
        }
    }

    // MARK: emulator API

    /// A store's config; a store that does not exist yet answers what it would start with (nothing is allocated).
    public func config(_ key: StoreKey) -> ProjectConfig { existingStore(key)?.read { $0.config } ?? initialConfig(key) }

    /// Merges a config JSON (the `/emulator/v1/projects/{p}/config` shape) and returns the result.
    public func patchConfig(_ key: StoreKey, _ json: JSON) throws(ConfigError) -> ProjectConfig {
        var current = config(key)
        try current.apply(json)
        let updated = current
        do {
            try withStore(key) { s throws(AuthError) in
                s.config = updated
                s.implicitTenant = false  // configured: kept like a tenant made with the tenants API
                try persist([.configSaved(key, updated, s.tenant)])
            }
        } catch {
            throw ConfigError(path: "", message: error.message)
        }
        return updated
    }

    public func replaceConfig(_ key: StoreKey, _ config: ProjectConfig) throws(AuthError) {
        try withStore(key) { s throws(AuthError) in
            s.config = config
            s.implicitTenant = false
            try persist([.configSaved(key, config, s.tenant)])
        }
    }

    /// Every pending code (optionally one number's) in creation order. O(result). A store that does not exist has none
    /// (and is not created: reads never allocate).
    public func verificationCodes(_ key: StoreKey, phone: String?) -> [VerificationSession] {
        existingStore(key)?.read { $0.pendingSessions(phone: phone) } ?? []
    }

    /// One page of pending codes in creation order: sequence above `after`, at most `limit`. O(limit), plus the
    /// number's earlier sessions when paging one number.
    public func verificationCodes(_ key: StoreKey, phone: String?, after: UInt64?, limit: Int) -> SessionPage {
        existingStore(key)?.read { $0.pendingSessions(phone: phone, after: after, limit: limit) } ?? SessionPage(sessions: [], nextAfter: nil)
    }

    /// Removes pending codes (all, or one number's); their sessions become invalid. Returns how many.
    @discardableResult
    public func clearVerificationCodes(_ key: StoreKey, phone: String? = nil) -> Int {
        withStoreState(key) { s in
            let before = s.sessions.count
            if let phone {
                let gone = s.sessions.removeAll(phone: phone)
                try? persist(gone.map { .sessionDeleted(key, $0.sessionInfo) })
            } else {
                s.sessions.removeAll()
                try? persist([.sessionsCleared(key)])
            }
            return before - s.sessions.count
        }
    }

    /// Deletes every user of a store (the official `DELETE /emulator/v1/projects/{p}/accounts`).
    public func wipeAccounts(_ key: StoreKey) {
        withStoreState(key) { s in
            s.users.removeAll()
            s.phoneIndex.removeAll()
            s.temporaryProofs.removeAll()
            try? persist([.usersWiped(key)])  // deletes the store's refresh tokens on disk too
        }
        forgetRefreshTokens(key, localId: nil, persisting: false)
    }
}

/// Refresh tokens by token (redeem) and by store and user (delete), so removing a user's tokens costs O(its tokens)
/// instead of a scan of every token.
struct RefreshTokenIndex: Sendable {
    var byToken: [String: RefreshTokenRecord] = [:]
    var byUser: [StoreKey: [String: Set<String>]] = [:]
    /// Index entries visited by removals (test hook).
    var visited = 0

    mutating func insert(_ token: String, _ rec: RefreshTokenRecord) {
        if let old = byToken[token] { unlink(token, old) }
        byToken[token] = rec
        byUser[StoreKey(projectId: rec.projectId, tenantId: rec.tenantId), default: [:]][rec.localId, default: []].insert(token)
    }

    private mutating func unlink(_ token: String, _ rec: RefreshTokenRecord) {
        let key = StoreKey(projectId: rec.projectId, tenantId: rec.tenantId)
        byUser[key]?[rec.localId]?.remove(token)
        if byUser[key]?[rec.localId]?.isEmpty == true { byUser[key]?[rec.localId] = nil }
        if byUser[key]?.isEmpty == true { byUser[key] = nil }
    }

    mutating func removeUser(_ key: StoreKey, _ localId: String) {
        guard let tokens = byUser[key]?.removeValue(forKey: localId) else { return }
        if byUser[key]?.isEmpty == true { byUser[key] = nil }
        for t in tokens { byToken[t] = nil }
        visited += tokens.count
    }

    mutating func removeStore(_ key: StoreKey) {
        guard let users = byUser.removeValue(forKey: key) else { return }
        for (_, tokens) in users {
            for t in tokens { byToken[t] = nil }
            visited += tokens.count
        }
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

/// Long-polls on stores that do not exist yet, by store and number.
struct OrphanWaiters: Sendable {
    var byKey: [StoreKey: [String: [CodeWaiter]]] = [:]
    var count = 0

    mutating func insert(_ key: StoreKey, _ w: CodeWaiter) {
        byKey[key, default: [:]][w.phone, default: []].append(w)
        count += 1
    }

    mutating func take(_ key: StoreKey, phone: String) -> [CodeWaiter] {
        guard let list = byKey[key]?.removeValue(forKey: phone) else { return [] }
        if byKey[key]?.isEmpty == true { byKey[key] = nil }
        count -= list.count
        return list
    }

    mutating func remove(_ key: StoreKey, _ w: CodeWaiter) -> Bool {
        guard var list = byKey[key]?[w.phone] else { return false }
        let before = list.count
        list.removeAll { $0 === w }
        guard list.count != before else { return false }
        byKey[key]?[w.phone] = list.isEmpty ? nil : list
        if byKey[key]?.isEmpty == true { byKey[key] = nil }
        count -= before - list.count
        return true
    }
}
