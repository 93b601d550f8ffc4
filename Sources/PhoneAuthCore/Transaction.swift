import Dispatch
import EmulatorSupport
import Synchronization

// # Store transactions
//
// Every write to a store goes through `Emulator.transaction(_:_:)`: under the store's lock, the body changes the
// store through a `StoreTransaction`, which applies each change to memory at once and, when there is a journal
// (`--data-dir`), records it twice — as the `StateChange` the journal will write, and as an `Undo` entry holding the
// pre-transaction value of what it touched (one user, one session, the config…; never a copy of the store).
//
// Durability is awaited after the lock is released ("early lock release", as in database group commit):
//
// 1. under the store lock the transaction's changes are queued in the `JournalCommitter` and get a ticket (queue
//    order = commit order), its undo entries go to the store's undo log, and the store remembers its newest ticket;
// 2. the lock is released; a single committer thread writes every queued change in one journal transaction (so
//    concurrent writes of the same project share one commit), then publishes "decided through ticket N";
// 3. a request's reply is held until every ticket it depends on is decided: the tickets of its own transactions
//    and the newest pending ticket of every store it read. Handlers never block on disk: `PhoneAuthApp` answers
//    later through the deferred-reply path, on the committer thread, so neither event loops nor pool threads wait.
//
// If a journal commit fails, the committer rolls back, under each affected store's lock, every transaction of that
// store from the failed one on (later ones may have read its state: they fail with it), newest first, then answers
// every request that wrote or read rolled-back state with a 500 (`AuthError.internalError`). A request therefore never
// *answers* with state that is not durable, though another request may see pending state for the microseconds
// before it is committed (it then waits for that commit, and fails with it). Memory after the rollback equals what
// the journal holds. Non-durable state (send windows, minted credentials, temporary proofs, inbox waiters,
// `nextSequence`) is not rolled back: it never reaches the disk.
//
// Why not simply commit under the store lock (with the group committer batching across projects)? Then one
// project's writes serialize on its disk commit and never share one: the bench's flow (all in one project) ran at
// 0.59–0.79× the in-memory flow with `--data-dir`, and a send blocked its event loop for the commit. With the lock
// released before the wait, the same machine measured 0.82–0.97× (noisy, shared 2 cores), a commit carries every
// write queued while the previous one was written, and no thread waits for the disk. The price is the dependency
// tracking above; it is exercised by TransactionFailureTests (every commit of a scripted mix failing in turn).
//
// A store can leave the registry while a writer that looked it up waits for its lock: a deleted tenant (the tenants
// API) or an empty tenant created on first use, reclaimed at the project's tenant cap (`Emulator.reclaimTenants`, a
// transaction like any other: `StoreTransaction.reclaimIfEmpty`). Either way `GuardedStore.removed` is set under the
// lock and no transaction runs on it again. The keyed `Emulator.transaction(_ key:_:)` then starts over with the store
// registered now (a fresh one) when the removed store was a tenant created on first use, and fails with
// `TENANT_NOT_FOUND` when it was an explicit tenant, so no write ever lands in a detached store.
//
// Without a journal there are no tickets, no undo entries and no waiting: a transaction is the lock and the body.
// Hooks registered with `onCommit` run on the committer thread (or inline): they must never wait for the journal.
//
// Outside a request (tests, start-up import) there is no `DurabilityScope`: the transaction then blocks until its
// commit is decided and throws `internalError` if it failed.

/// Everything one project (or tenant) holds. Plain value state; the `Emulator` guards it with a mutex.
///
/// The memory/disk rule, by the type: the durable fields (config, tenant settings, users and their indexes,
/// sessions, out-of-band codes) are `fileprivate(set)`, so only this file writes them — `StoreTransaction`'s methods,
/// which record each change for the journal and for rollback, the rollback itself (`JournalCommitter.apply`) and the
/// journal's restore. Anyone else holding the store `inout` (`StoreBox.withLock`, `Emulator.withLiveStore`) changes
/// non-durable state only: send windows, abuse counters, minted credentials, temporary proofs, pending second
/// factors, inbox waiters and `nextSequence`, none of which reaches the disk.
public struct AuthStore: Sendable {
    public fileprivate(set) var config: ProjectConfig
    public fileprivate(set) var users = UserTable()
    public fileprivate(set) var phoneIndex: [String: String] = [:]
    /// Lowercased email → localId (emails are unique per store); kept by `save`/`deleteUser`.
    public fileprivate(set) var emailIndex: [String: String] = [:]
    /// Federated identity (provider id and raw id) → localId, and a federated identity's lowercased email → the
    /// users linked to it (Providers.swift); kept by `save`/`deleteUser`.
    public fileprivate(set) var federatedIndex: [String: String] = [:]
    public fileprivate(set) var providerEmailIndex: [String: [String]] = [:]
    /// Out-of-band codes (email verification, password reset), OobCodes.swift.
    public fileprivate(set) var oobCodes = OobTable()
    /// The out-of-band codes' inbox long-polls (`oobCodes:wait`).
    public var oob = OobState()
    public fileprivate(set) var sessions = SessionTable()
    public var nextSequence: UInt64 = 0
    /// temporaryProof → phone number (link conflicts); expiring and capped (`Emulator.temporaryProofLifetimeMillis`).
    public var temporaryProofs = ExpiringTable<String>(capacity: Emulator.maxTemporaryProofs)
    /// mfaPendingCredential → who passed the first factor; expiring and capped (`Emulator.mfaPendingLifetimeMillis`).
    public var mfaPending = ExpiringTable<PendingMFA>(capacity: Emulator.maxMFAPending)
    /// TOTP `sessionInfo` → the enrollment between start and finalize; expiring and capped (TOTP.swift).
    public var totpEnrollments = ExpiringTable<PendingTOTPEnrollment>(capacity: TOTP.maxPendingEnrollments)
    /// Set for tenant stores: the tenant's settings.
    public fileprivate(set) var tenant: TenantSettings?
    /// Opt-in send limits' windows.
    public var windows = SendWindows()
    /// Failure counters of the abuse limits (Protection.swift).
    public var protection = ProtectionState()
    /// Minted app credentials, iOS receipts and recorded pushes.
    public var credentials = CredentialState()
    /// Inbox long-polls waiting for a number's next code (`verificationCodes:wait`), by number.
    var waiters: [String: [CodeWaiter]] = [:]
    /// How many waiters are registered in `waiters` (capped by `Emulator.maxWaitersPerStore`).
    var waiterCount = 0
    /// A tenant created on first use by a client request (not by the tenants API, and never configured). Such a
    /// tenant is reclaimed when its project reaches the tenant cap while it holds nothing (`isReclaimable`). Derived
    /// from durable state: configuring a tenant stores its config and settings (`StoreTransaction.setConfig` clears
    /// the flag, a rollback restores it), and a journal restore marks tenants without either implicit.
    public fileprivate(set) var implicitTenant = false

    public init(config: ProjectConfig, tenant: TenantSettings? = nil) {
        self.config = config
        self.tenant = tenant
    }

    /// A store for `StoreBox`: `implicitTenant` as it says.
    init(config: ProjectConfig, tenant: TenantSettings?, implicitTenant: Bool) {
        self.init(config: config, tenant: tenant)
        self.implicitTenant = implicitTenant
    }

    public func user(phone: String) -> UserRecord? { phoneIndex[phone].flatMap { users[$0] } }

    /// Builds the users' search index (derived state: nothing durable changes), for the console's search.
    public mutating func buildSearchIndex() { users.buildSearchIndex() }

    /// Saves `user`, keeping the phone index unique and current.
    /// Returns the record it replaced (moved out of the table, not copied: a sign-in saves its user every time).
    @discardableResult
    fileprivate mutating func save(_ user: UserRecord) -> UserRecord? {
        let replaced = users.updateValue(user, forKey: user.localId)
        if let old = replaced?.phoneNumber, old != user.phoneNumber, phoneIndex[old] == user.localId {
            phoneIndex[old] = nil
        }
        if let p = user.phoneNumber { phoneIndex[p] = user.localId }
        if let old = replaced?.email?.lowercased(), old != user.email?.lowercased(), emailIndex[old] == user.localId {
            emailIndex[old] = nil
        }
        if let e = user.email { emailIndex[e.lowercased()] = user.localId }
        if !user.providerUserInfo.isEmpty || !(replaced?.providerUserInfo.isEmpty ?? true) { reindexProviders(old: replaced, new: user) }
        return replaced
    }

    /// The user with this email (any case).
    public func user(email: String) -> UserRecord? { emailIndex[email.lowercased()].flatMap { users[$0] } }

    /// Rebuilds the email index from `users` (after `users` was replaced whole: a rolled-back wipe).
    fileprivate mutating func rebuildEmailIndex() {
        emailIndex = [:]
        for u in users.values { if let e = u.email { emailIndex[e.lowercased()] = u.localId } }
    }

    fileprivate mutating func deleteUser(_ localId: String) {
        guard let u = users.removeValue(forKey: localId) else { return }
        if let p = u.phoneNumber, phoneIndex[p] == localId { phoneIndex[p] = nil }
        if let e = u.email?.lowercased(), emailIndex[e] == localId { emailIndex[e] = nil }
        if !u.providerUserInfo.isEmpty { reindexProviders(old: u, new: nil) }
    }

    /// Keeps the federated indexes current for a user replaced by `new` (nil: deleted).
    fileprivate mutating func reindexProviders(old: UserRecord?, new: UserRecord?) {
        let before = old?.providerUserInfo ?? [], after = new?.providerUserInfo ?? []
        guard before != after else { return }
        if let old {
            for p in before {
                if federatedIndex[p.indexKey] == old.localId { federatedIndex[p.indexKey] = nil }
                if let e = p.email?.lowercased() {
                    providerEmailIndex[e]?.removeAll { $0 == old.localId }
                    if providerEmailIndex[e]?.isEmpty == true { providerEmailIndex[e] = nil }
                }
            }
        }
        if let new {
            for p in after {
                federatedIndex[p.indexKey] = new.localId
                if let e = p.email?.lowercased(), !(providerEmailIndex[e]?.contains(new.localId) ?? false) {
                    providerEmailIndex[e, default: []].append(new.localId)
                }
            }
        }
    }

    /// Loads a journal's users (a restart): into an empty store, the phone and email indexes are built on a second
    /// thread while this one fills the table (restoring a million users took 1.3 s one `save` at a time, half of a
    /// restart); the same result as saving each in turn (a later user's number or email wins, as there).
    fileprivate mutating func restoreUsers(_ records: [UserRecord]) {
        guard users.isEmpty, phoneIndex.isEmpty, emailIndex.isEmpty, records.count >= Self.parallelRestoreMinimum else {
            for u in records { save(u) }
            return
        }
        let built = Locked<(phones: [String: String], emails: [String: String])?>(nil)
        let indexer = NativeThread.start {
            var phones = [String: String](minimumCapacity: records.count), emails: [String: String] = [:]
            for u in records {
                if let p = u.phoneNumber { phones[p] = u.localId }
                if let e = u.email { emails[e.lowercased()] = u.localId }
            }
            built.withLock { $0 = (phones, emails) }
        }
        users.reserveCapacity(records.count)
        for u in records { users.updateValue(u, forKey: u.localId) }
        indexer.join()
        if let b = built.withLock({ $0 }), users.count == records.count {
            phoneIndex = b.phones
            emailIndex = b.emails
        } else {
            // A uid given twice (in a journal only as uids that are one `String` in different bytes: SQLite's keys compare
            // bytes): the indexes of what the table kept.
            phoneIndex = [:]
            for u in users.values { if let p = u.phoneNumber { phoneIndex[p] = u.localId } }
            rebuildEmailIndex()
        }
        rebuildProviderIndexes()
    }

    /// `restoreUsers(records)`, then `chunks` (a data directory's decoded ones): into an empty store, taken as the user
    /// table's own (`UserTable(adopting:)`) while another thread builds the phone and email indexes (from
    /// `parallelRestoreMinimum` users; fewer, this one after the table); else, or if the chunks are not as decoded, one
    /// record at a time. The chunks' buffers are shared with the caller's until it drops them: a write to a chunk
    /// before then copies it.
    fileprivate mutating func restoreUsers(_ records: [UserRecord], chunks: [ContiguousArray<UserRecord>]) {
        guard !chunks.isEmpty else { return restoreUsers(records) }
        guard records.isEmpty, users.isEmpty, phoneIndex.isEmpty, emailIndex.isEmpty else {
            return restoreUsers(records + chunks.joined())
        }
        let n = chunks.reduce(0) { $0 + $1.count }
        @Sendable func indexes() -> (phones: [String: String], emails: [String: String]) {
            var phones = [String: String](minimumCapacity: n), emails: [String: String] = [:]
            for chunk in chunks {
                // The indexed fields only, read in place (a copied record would retain each of its strings).
                chunk.withUnsafeBufferPointer { records in
                    for i in records.indices {
                        if let p = records[i].phoneNumber { phones[p] = records[i].localId }
                        if let e = records[i].email { emails[e.lowercased()] = records[i].localId }
                    }
                }
            }
            return (phones, emails)
        }
        let built = Locked<(phones: [String: String], emails: [String: String])?>(nil)
        let indexer = n >= Self.parallelRestoreMinimum ? NativeThread.start { let b = indexes(); built.withLock { $0 = b } } : nil
        let table = UserTable(adopting: chunks)
        indexer?.join()
        guard let table else {
            // Uids that are one `String` (canonically equivalent) in different bytes (SQLite's keys compare bytes):
            // what `save` keeps of them.
            return restoreUsers(Array(chunks.joined()))
        }
        let b = built.withLock { $0 } ?? indexes()
        users = table
        phoneIndex = b.phones
        emailIndex = b.emails
        rebuildProviderIndexes()
    }

    /// Fewer users than this restore one `save` at a time (a thread costs more than it saves).
    static let parallelRestoreMinimum = 20_000

    /// Rebuilds the federated indexes from `users` (after `users` was replaced whole).
    fileprivate mutating func rebuildProviderIndexes() {
        federatedIndex = [:]
        providerEmailIndex = [:]
        for u in users.values where !u.providerUserInfo.isEmpty { reindexProviders(old: nil, new: u) }
    }

    /// Pending sessions in creation order, optionally for one number: O(result) through the session indexes.
    public func pendingSessions(phone: String? = nil) -> [VerificationSession] {
        pendingSessions(phone: phone, after: nil, limit: .max).sessions
    }

    /// A page of pending sessions in creation order (sequence above `after`, at most `limit`), optionally for one number.
    public func pendingSessions(phone: String?, after: UInt64?, limit: Int) -> SessionPage {
        if let phone { return sessions.page(phone: phone, after: after, limit: limit) }
        return sessions.page(after: after, limit: limit)
    }

    /// Sessions `isReclaimable` inspects one by one; a tenant with more pending sessions is never reclaimed.
    static let reclaimSessionScan = 32

    /// An implicit tenant with no users, no live pending codes, no waiters and no live app credentials: dropping it
    /// loses nothing a client could observe (reads of a missing tenant answer as for an empty one). O(1) amortised.
    fileprivate mutating func isReclaimable(now: Int64) -> Bool {
        guard implicitTenant, users.isEmpty, waiterCount == 0, sessions.count <= Self.reclaimSessionScan else { return false }
        credentials.minted.sweep(now: now)
        credentials.receipts.sweep(now: now)
        guard credentials.minted.isEmpty, credentials.receipts.isEmpty else { return false }
        return sessions.values.allSatisfy { s in s.expiresAt.map { now >= $0 } ?? false }
    }
}

/// What rolls one change of a transaction back: the value it replaced.
enum Undo: Sendable {
    case user(String, UserRecord?)
    case users(UserTable, [String: String])
    case session(SessionID, VerificationSession?)
    case sessions(SessionTable)
    case oobCode(String, OobCode?)
    case oobCodes(OobTable)
    case config(ProjectConfig, TenantSettings?, implicit: Bool)
    case refreshTokenAdded(String)
    case refreshTokensRemoved([(String, RefreshTokenRecord)])
    case storeRemoved
    case storeCreated
    /// The store's whole durable state and refresh tokens before a reset or snapshot restore (Snapshots.swift).
    case state(StoreState)
}

/// A store's state and what its pending transactions would undo, behind the store's lock.
struct GuardedStore: Sendable {
    var store: AuthStore
    /// Undo entries of transactions whose commit is not decided yet, oldest first.
    var undo: [(ticket: UInt64, entries: [Undo])] = []
    /// The newest ticket of a transaction on this store (0: none pending). A reader depends on it.
    var lastTicket: UInt64 = 0
    /// Removed from the registry (a deleted or reclaimed tenant, or a failed create): transactions never run on it
    /// (`StoreBox.attempt` reports it; see "A store can leave the registry" above).
    var removed = false
}

/// A write in progress on one store. Read the store through `store`; change durable state only through the methods
/// below, which apply the change to memory at once and record it for the journal and for rollback. Non-durable
/// state (`windows`, `credentials`, `temporaryProofs`, `nextSequence`) is changed directly.
///
/// It borrows the store for its body's duration and cannot outlive it, by its type: only `run` makes one, inside
/// `withUnsafeMutablePointer` on the store, and consumes it there before that scope ends; the body gets it `inout`
/// and can neither copy it (it is not copyable) nor keep it (it would have to put another one back, and only `run`
/// makes them). So its pointer to the store is never used outside the scope it is valid in. Reads go through that
/// pointer in place (`tx.store.users[id]` copies nothing: passing a copy of the store to a function once cost two
/// dozen retains and releases per request, and moving the 800-byte store into the transaction and back cost 3.4k
/// instructions per sign-in flow in memcpy, callgrind).
public struct StoreTransaction: ~Copyable {
    /// The store's key (read from `box`: a `StoreKey` stored in this non-copyable struct crashed Swift 6.3.1's
    /// compiler under `-sanitize=thread`, "Invalid bitcast" in its mutating accessors; scripts/sanitizers).
    public var key: StoreKey { box.key }
    /// The store this transaction runs on (hooks that run after the commit find it here).
    let box: StoreBox
    /// The store, borrowed for the body (valid inside `run`'s `withUnsafeMutablePointer` only, where `self` lives).
    private let p: UnsafeMutablePointer<AuthStore>
    private let refreshTokens: Locked<RefreshTokenIndex>
    /// Record changes and undo entries (a journal exists).
    let journaled: Bool
    /// What the body recorded.
    private(set) var recorded = Recorded()

    /// What a transaction leaves for `StoreBox.attempt` once its body has run.
    struct Recorded {
        var changes: [StateChange] = []
        var undo: [Undo] = []
        var created = false
        var removeStore = false
        /// Runs once the transaction's changes are durable (at once without a journal), outside the lock.
        var afterCommit: [@Sendable () -> Void] = []
        /// Events published once the transaction is applied (Events.swift): the first without an array.
        var event: EventPayload? = nil
        var moreEvents: [EventPayload] = []
    }

    private init(box: StoreBox, store: UnsafeMutablePointer<AuthStore>, refreshTokens: Locked<RefreshTokenIndex>, journaled: Bool) {
        self.box = box
        self.p = store
        self.refreshTokens = refreshTokens
        self.journaled = journaled
    }

    /// Runs `body` as a transaction on `store` (under its lock, held by the caller). Returns the body's result and
    /// what it recorded; the transaction itself ends here.
    static func run<T>(on store: inout AuthStore, box: StoreBox, refreshTokens: Locked<RefreshTokenIndex>, journaled: Bool,
                       _ body: (inout StoreTransaction) throws(AuthError) -> T) -> (Result<T, AuthError>, Recorded) {
        withUnsafeMutablePointer(to: &store) { p in
            var tx = StoreTransaction(box: box, store: p, refreshTokens: refreshTokens, journaled: journaled)
            let result: Result<T, AuthError>
            do throws(AuthError) { result = .success(try body(&tx)) } catch { result = .failure(error) }
            return (result, tx.finish())
        }
    }

    private consuming func finish() -> Recorded { recorded }

    /// The store as it is now, read-only (in place).
    public var store: AuthStore { unsafeAddress { UnsafePointer(p) } }

    /// Applies `changes` onto `user` through `table` (its checks read this store's indexes), the store read where it
    /// is: passed by value, a store borrowed through the pointer was copied whole first.
    func apply(_ changes: UserChanges, to user: inout UserRecord, table: UserFieldTable, now: Int64) throws(AuthError) {
        try table.apply(changes, to: &user, inPlace: &p.pointee, now: now)
    }

    /// `PROJECT_DISABLED` when the tenant has auth turned off.
    func checkTenantEnabled() throws(AuthError) {
        if store.tenant?.disableAuth == true { throw AuthError(.projectDisabled) }
    }

    /// The user with this phone number (`AuthStore.user(phone:)` read in place).
    public func user(phone: String) -> UserRecord? {
        guard let id = store.phoneIndex[phone] else { return nil }
        return store.users[id]
    }

    /// Whether the user with this phone number has second factors, read in place (no copy of the user: every send
    /// asks).
    public func phoneUserHasSecondFactors(_ phone: String) -> Bool {
        guard let id = store.phoneIndex[phone] else { return false }
        return store.users.withUser(id) { !$0.mfaInfo.isEmpty } ?? false
    }

    // MARK: non-durable state

    public var windows: SendWindows {
        get { p.pointee.windows }
        nonmutating _modify { yield &p.pointee.windows }
    }
    public var credentials: CredentialState {
        get { p.pointee.credentials }
        nonmutating _modify { yield &p.pointee.credentials }
    }
    public var protection: ProtectionState {
        get { p.pointee.protection }
        nonmutating _modify { yield &p.pointee.protection }
    }
    public var temporaryProofs: ExpiringTable<String> {
        get { p.pointee.temporaryProofs }
        nonmutating _modify { yield &p.pointee.temporaryProofs }
    }
    public var mfaPending: ExpiringTable<PendingMFA> {
        get { p.pointee.mfaPending }
        nonmutating _modify { yield &p.pointee.mfaPending }
    }
    public var totpEnrollments: ExpiringTable<PendingTOTPEnrollment> {
        get { p.pointee.totpEnrollments }
        nonmutating _modify { yield &p.pointee.totpEnrollments }
    }
    public var nextSequence: UInt64 {
        get { p.pointee.nextSequence }
        nonmutating _modify { yield &p.pointee.nextSequence }
    }

    // MARK: users

    /// Saves a user (keeping the phone index current).
    /// Returns the record it replaced (nil for a new user).
    @discardableResult
    public mutating func save(_ user: UserRecord) -> UserRecord? {
        let replaced = p.pointee.save(user)
        if journaled {
            recorded.undo.append(.user(user.localId, replaced))
            recorded.changes.append(.userSaved(key, user))
        }
        return replaced
    }

    /// Deletes a user and its refresh tokens; false if there was none.
    @discardableResult
    public mutating func deleteUser(_ localId: String) -> Bool {
        guard let old = p.pointee.users[localId] else { return false }
        // The stored uid from here on: `localId` may be another byte form of the same `String` (NFC, NFD), one key
        // in memory but not on disk, where SQLite compares bytes (the row would stay, and come back at a restart).
        let id = old.localId
        p.pointee.deleteUser(id)
        let gone = refreshTokens.withLock { $0.removeUser(key, id) }
        if journaled {
            recorded.undo.append(.user(id, old))
            if !gone.isEmpty { recorded.undo.append(.refreshTokensRemoved(gone)) }
            recorded.changes.append(.userDeleted(key, id))  // deletes the user's refresh tokens on disk too
        }
        return true
    }

    /// Deletes every user of the store and their refresh tokens (temporary proofs go too).
    public mutating func wipeUsers() {
        let users = p.pointee.users, phones = p.pointee.phoneIndex
        p.pointee.users = UserTable()
        p.pointee.phoneIndex = [:]
        p.pointee.emailIndex = [:]
        p.pointee.federatedIndex = [:]
        p.pointee.providerEmailIndex = [:]
        p.pointee.temporaryProofs.removeAll()
        let gone = refreshTokens.withLock { $0.removeStore(key) }
        if journaled {
            recorded.undo.append(.users(users, phones))
            if !gone.isEmpty { recorded.undo.append(.refreshTokensRemoved(gone)) }
            recorded.changes.append(.usersWiped(key))  // deletes the store's refresh tokens on disk too
        }
    }

    // MARK: sessions

    public mutating func save(_ session: VerificationSession) {
        if journaled {
            recorded.undo.append(.session(session.id, p.pointee.sessions[session.id]))
            recorded.changes.append(.sessionSaved(key, session))
        }
        p.pointee.sessions[session.id] = session
    }

    /// Deletes a session (keyed on disk by its canonical text, never a client's spelling).
    public mutating func deleteSession(_ id: SessionID) {
        guard journaled else {
            p.pointee.sessions.remove(id)
            return
        }
        guard let old = p.pointee.sessions[id] else { return }
        p.pointee.sessions.remove(id)
        recorded.undo.append(.session(id, old))
        recorded.changes.append(.sessionDeleted(key, id.text))
    }

    /// Removes one number's pending sessions (all with nil); returns how many.
    public mutating func clearSessions(phone: String?) -> Int {
        if let phone {
            let gone = p.pointee.sessions.removeAll(phone: phone)
            if journaled {
                for session in gone {
                    recorded.undo.append(.session(session.id, session))
                    recorded.changes.append(.sessionDeleted(key, session.sessionInfo))
                }
            }
            return gone.count
        }
        let before = p.pointee.sessions
        p.pointee.sessions.removeAll()
        if journaled {
            recorded.undo.append(.sessions(before))
            recorded.changes.append(.sessionsCleared(key))
        }
        return before.count
    }

    /// Every 256th send sweeps one shard of expired sessions (a full pass every 16,384 sends).
    mutating func sweepExpiredSessions(now: Int64) {
        guard p.pointee.nextSequence & 255 == 0 else { return }
        dropExpired(p.pointee.sessions.sweepNextShardSessions(now: now))
    }

    /// The session cap's sweep: expired sessions from the oldest on, at most `maxVisits` looked at
    /// (`SessionTable.sweepExpiredOldest`).
    mutating func sweepOldestExpiredSessions(now: Int64, maxVisits: Int) {
        dropExpired(p.pointee.sessions.sweepExpiredOldest(now: now, maxVisits: maxVisits))
    }

    private mutating func dropExpired(_ sessions: [VerificationSession]) {
        for gone in sessions {
            if journaled {
                recorded.undo.append(.session(gone.id, gone))
                recorded.changes.append(.sessionDeleted(key, gone.sessionInfo))
            }
            emit(.sessionExpired(phoneNumber: gone.phoneNumber, session: gone.id))
        }
    }

    // MARK: out-of-band codes

    /// Stores an out-of-band code; past `OobTable.capacity` the oldest ones are deleted (durably, with this one).
    public mutating func save(_ oob: OobCode) {
        while p.pointee.oobCodes.count >= OobTable.capacity, let oldest = p.pointee.oobCodes.oldest {
            deleteOobCode(oldest.code)
        }
        if journaled {
            recorded.undo.append(.oobCode(oob.code, p.pointee.oobCodes[oob.code]))
            recorded.changes.append(.oobCodeSaved(key, oob))
        }
        _ = p.pointee.oobCodes.remove(oob.code)
        p.pointee.oobCodes.insert(oob)
    }

    /// Deletes an out-of-band code (used, expired or evicted).
    public mutating func deleteOobCode(_ code: String) {
        guard let old = p.pointee.oobCodes.remove(code) else { return }
        if journaled {
            recorded.undo.append(.oobCode(code, old))
            recorded.changes.append(.oobCodeDeleted(key, code))
        }
    }

    /// Deletes every out-of-band code (all, or one email's); returns how many.
    public mutating func clearOobCodes(email: String?) -> Int {
        if let email {
            let gone = p.pointee.oobCodes.list(email: email)
            for c in gone { deleteOobCode(c.code) }
            return gone.count
        }
        let before = p.pointee.oobCodes
        p.pointee.oobCodes = OobTable()
        if journaled {
            recorded.undo.append(.oobCodes(before))
            recorded.changes.append(.oobCodesCleared(key))
        }
        return before.count
    }

    // MARK: config

    /// Replaces the config (and, for a tenant, its settings) in one durable change. A configured tenant is kept like
    /// one made with the tenants API (never reclaimed), here and after a restart (its config is on disk).
    public mutating func setConfig(_ config: ProjectConfig, tenant: TenantSettings?) {
        if journaled {
            recorded.undo.append(.config(p.pointee.config, p.pointee.tenant, implicit: p.pointee.implicitTenant))
            recorded.changes.append(.configSaved(key, config, tenant))
        }
        p.pointee.config = config
        p.pointee.tenant = tenant
        p.pointee.implicitTenant = false
    }

    public mutating func setConfig(_ config: ProjectConfig) { setConfig(config, tenant: p.pointee.tenant) }

    // MARK: refresh tokens

    /// Stores a refresh token; it is durable with the rest of the transaction (or not at all).
    public mutating func insertRefreshToken(_ token: String, _ record: RefreshTokenRecord) {
        refreshTokens.withLock { $0.insert(token, record) }
        if journaled {
            recorded.undo.append(.refreshTokenAdded(token))
            recorded.changes.append(.refreshTokenSaved(token, record))
        }
    }

    // MARK: the whole state (reset and snapshot restore: Snapshots.swift)

    /// The store's durable state and its refresh tokens, as they are now (O(1) for the tables, which are shared
    /// copy-on-write; O(the store's refresh tokens)).
    func currentState() -> StoreState {
        StoreState(p.pointee, refreshTokens: refreshTokens.withLock { $0.tokens(of: key) })
    }

    /// Replaces the store's durable state — config and tenant settings, users, pending sessions, out-of-band codes —
    /// and its refresh tokens with `state`, as one durable change (the journal deletes the store's rows and writes
    /// `state`'s). `storeConfig` false: no config row is written (the config file's applies after a restart; an
    /// implicit tenant stays implicit). Non-durable state is left to the caller.
    mutating func replaceState(with state: StoreState, storeConfig: Bool) {
        let gone = refreshTokens.withLock { index in
            let gone = index.removeStore(key)
            for (t, r) in state.refreshTokens { index.insert(t, r) }
            return gone
        }
        if journaled {
            recorded.undo.append(.state(StoreState(p.pointee, refreshTokens: gone)))
            recorded.changes.append(.storeReplaced(state.journalSnapshot(key, storeConfig: storeConfig), refreshTokens: state.refreshTokens))
        }
        state.apply(to: &p.pointee)
    }

    // MARK: the store itself

    /// This transaction brought the store into being (an explicit tenant create): a failed commit unregisters it.
    public mutating func markCreated() { recorded.created = true }

    /// Deletes the store (a tenant) with all its users, sessions, config and refresh tokens; it leaves the registry.
    mutating func deleteStore() {
        let gone = refreshTokens.withLock { $0.removeStore(key) }
        recorded.removeStore = true
        if journaled {
            if !gone.isEmpty { recorded.undo.append(.refreshTokensRemoved(gone)) }
            recorded.undo.append(.storeRemoved)
            recorded.changes.append(.storeDeleted(key))
        }
    }

    /// Deletes the store, as `deleteStore` (from the journal too: expired sessions may be on disk), if it is an empty
    /// tenant created on first use (`AuthStore.isReclaimable`). True if it did.
    mutating func reclaimIfEmpty(now: Int64) -> Bool {
        guard p.pointee.isReclaimable(now: now) else { return false }
        deleteStore()
        return true
    }

    /// Runs `body` once the changes are durable (never if the commit fails), outside the store lock.
    public mutating func onCommit(_ body: @escaping @Sendable () -> Void) { recorded.afterCommit.append(body) }

    /// Emits an event of this store: published when the transaction is applied (with a journal: once it is durable;
    /// never if it is rolled back), also when the body then throws (what it recorded commits; see `StoreBox.attempt`).
    public mutating func emit(_ payload: EventPayload) {
        if recorded.event == nil { recorded.event = payload } else { recorded.moreEvents.append(payload) }
    }

}

/// What a request depends on: tickets it wrote and the pending tickets of stores it read. `PhoneAuthApp` binds one
/// per request (with a journal) and holds the reply until `Emulator.whenDurable` says those are decided.
public final class DurabilityScope: Sendable {
    @TaskLocal public static var current: DurabilityScope?

    struct Deps {
        var tickets: [UInt64] = []
        var maxTicket: UInt64 = 0
        /// The committer's failure generation when the first dependency was taken.
        var generation: UInt64 = 0
    }
    let deps = Locked(Deps())

    public init() {}

    func note(_ ticket: UInt64, generation: UInt64) {
        deps.withLock { d in
            if d.tickets.isEmpty { d.generation = generation }
            if d.tickets.last != ticket { d.tickets.append(ticket) }
            d.maxTicket = max(d.maxTicket, ticket)
        }
    }

    /// True when the request depends on nothing pending.
    public var isEmpty: Bool { deps.withLock { $0.tickets.isEmpty } }
}

/// Orders, batches and commits journal changes on one thread; rolls back and reports failures.
final class JournalCommitter: Sendable {
    let journal: any StateJournal
    let logger: Logger
    private let refreshTokens: Locked<RefreshTokenIndex>
    private let registry: Locked<StoreRegistry>

    private struct Entry {
        let ticket: UInt64
        let box: StoreBox
        let changes: [StateChange]
    }
    private struct Waiter {
        let maxTicket: UInt64
        let tickets: [UInt64]
        let generation: UInt64
        let callback: @Sendable (Bool) -> Void
    }
    private struct State {
        var nextTicket: UInt64 = 1
        var queue: [Entry] = []
        var running = false
        /// `holding`: transactions queue, nothing is written until `release` (one commit for all of them).
        var held = false
        var waiters: [Waiter] = []
        /// Tickets rolled back but still queued: skipped when their turn comes.
        var poisoned: Set<UInt64> = []
        /// Recent failures: generation → the tickets rolled back.
        var failures: [(generation: UInt64, tickets: Set<UInt64>)] = []
    }
    private let state = Locked(State())
    /// Every ticket up to this one is decided (committed or rolled back).
    private let decided = Atomic<UInt64>(0)
    /// Bumped by each failed commit, under the affected stores' locks.
    let failureGeneration = Atomic<UInt64>(0)
    private static let keptFailures = 1024
    private let thread = DispatchQueue(label: "phone-auth.journal")
    /// Commits made and changes written (diagnostics and tests).
    let commits = Atomic<Int>(0)

    /// Runs a commit batch later on the calling thread when it can (an event loop, after the requests at hand: the
    /// batch holds what they wrote, and no thread is woken for it); false: the committer's own queue runs it.
    private let commitHere: (@Sendable (@escaping @Sendable () -> Void) -> Bool)?

    init(journal: any StateJournal, logger: Logger, refreshTokens: Locked<RefreshTokenIndex>, registry: Locked<StoreRegistry>,
         commitHere: (@Sendable (@escaping @Sendable () -> Void) -> Bool)? = nil) {
        self.commitHere = commitHere
        self.journal = journal
        self.logger = logger
        self.refreshTokens = refreshTokens
        self.registry = registry
    }

    /// True when `ticket` is known committed without asking: decided, and no commit failed since `generation` was
    /// taken (a failure bumps the generation before it publishes its tickets as decided). False: ask `whenDecided`.
    func isSettled(_ ticket: UInt64, generation: UInt64) -> Bool {
        ticket <= decided.load(ordering: .acquiring) && failureGeneration.load(ordering: .acquiring) == generation
    }

    /// Queues a transaction's changes; called under `box`'s lock, so a store's tickets follow its lock order.
    func enqueue(_ box: StoreBox, _ changes: [StateChange]) -> UInt64 {
        let (ticket, start) = state.withLock { s -> (UInt64, Bool) in
            let t = s.nextTicket
            s.nextTicket += 1
            s.queue.append(Entry(ticket: t, box: box, changes: changes))
            if s.running || s.held { return (t, false) }
            s.running = true
            return (t, true)
        }
        if start, !(commitHere?({ [self] in drain() }) ?? false) { thread.async { [self] in drain() } }
        return ticket
    }

    /// Runs `body` with commits held: what its transactions queue is written by one journal commit after it (all or
    /// none), not as it comes; if `body` throws, none of it is written and memory goes back to before it (as after a
    /// failed commit). Its transactions must not wait for their commit (a `DurabilityScope` is bound), and nothing else
    /// may write meanwhile (one caller: the start-up import, before the server answers anyone).
    func holding<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        state.withLock { s in s.held = true }
        let result: Result<T, E>
        do throws(E) { result = .success(try body()) } catch { result = .failure(error) }
        if case .failure = result {
            // Undone in memory, and skipped when their turn comes (their waiters learn they were rolled back).
            let queued = state.withLock { $0.queue }
            rollBack(queued)
            state.withLock { s in for e in queued { s.poisoned.insert(e.ticket) } }
        }
        let start = state.withLock { s -> Bool in
            s.held = false
            guard !s.running, !s.queue.isEmpty else { return false }
            s.running = true
            return true
        }
        if start { thread.async { [self] in drain() } }
        return try result.get()
    }

    /// Calls `callback(true)` once every ticket in `deps` is committed, `false` once one of them was rolled back.
    /// Runs at once (on this thread) when they are already decided, else on the committer thread.
    func whenDecided(_ tickets: [UInt64], maxTicket: UInt64, generation: UInt64, _ callback: @escaping @Sendable (Bool) -> Void) {
        let ready = state.withLock { s -> Bool? in
            if decided.load(ordering: .acquiring) >= maxTicket { return outcome(s, tickets, generation) }
            s.waiters.append(Waiter(maxTicket: maxTicket, tickets: tickets, generation: generation, callback: callback))
            return nil
        }
        if let ready { callback(ready) }
    }

    /// Blocks until `ticket` is decided; true if it committed.
    func wait(_ ticket: UInt64, generation: UInt64) -> Bool {
        let done = DispatchSemaphore(value: 0)
        let result = Atomic<Bool>(false)
        whenDecided([ticket], maxTicket: ticket, generation: generation) { ok in
            result.store(ok, ordering: .releasing)
            done.signal()
        }
        done.wait()
        return result.load(ordering: .acquiring)
    }

    private func outcome(_ s: State, _ tickets: [UInt64], _ generation: UInt64) -> Bool {
        let now = failureGeneration.load(ordering: .acquiring)
        if now == generation { return true }
        // Older failures than we keep: assume the worst (only after more than `keptFailures` failed commits).
        if let oldest = s.failures.first, oldest.generation > generation + 1 { return false }
        for f in s.failures where f.generation > generation {
            if tickets.contains(where: f.tickets.contains) { return false }
        }
        return true
    }

    private func drain() {
        while true {
            let (batch, skipped) = state.withLock { s -> ([Entry], UInt64) in
                // Held (`holding`): what is queued now waits for its release, which drains it in one commit.
                if s.held { s.running = false; return ([], 0) }
                let all = s.queue
                s.queue = []
                if all.isEmpty { s.running = false; return ([], 0) }
                if s.poisoned.isEmpty { return (all, 0) }
                var keep: [Entry] = []
                for e in all {
                    if s.poisoned.remove(e.ticket) == nil { keep.append(e) }
                }
                return (keep, all.last!.ticket)
            }
            if batch.isEmpty && skipped == 0 { return }
            var last = skipped
            if let end = batch.last?.ticket { last = max(last, end) }
            if !batch.isEmpty {
                do {
                    try journal.record(batch.flatMap(\.changes))
                    commits.wrappingAdd(1, ordering: .relaxed)
                    // Committed: their undo entries go now (a wipe's holds every old user), not at the store's next write.
                    var seen = Set<ObjectIdentifier>()
                    for e in batch where seen.insert(ObjectIdentifier(e.box)).inserted {
                        e.box.state.withLock { g in g.undo.removeAll { $0.ticket <= last } }
                    }
                } catch {
                    logger.error("could not persist changes; rolled them back", [("error", String(describing: error))])
                    rollBack(batch)
                }
            }
            let ready = state.withLock { s -> [(Waiter, Bool)] in
                decided.store(last, ordering: .releasing)
                var fire: [(Waiter, Bool)] = []
                var keep: [Waiter] = []
                for w in s.waiters {
                    if w.maxTicket <= last { fire.append((w, outcome(s, w.tickets, w.generation))) } else { keep.append(w) }
                }
                s.waiters = keep
                return fire
            }
            for (w, ok) in ready { w.callback(ok) }
        }
    }

    /// A failed batch: each affected store loses every transaction from its first one in the batch on, newest first
    /// (later queued ones of that store may have read what is rolled back: they are skipped when their turn comes).
    private func rollBack(_ batch: [Entry]) {
        var first: [ObjectIdentifier: (StoreBox, UInt64)] = [:]
        for e in batch where first[ObjectIdentifier(e.box)] == nil { first[ObjectIdentifier(e.box)] = (e.box, e.ticket) }
        var failed: [(generation: UInt64, tickets: Set<UInt64>)] = []
        for (box, from) in first.values {
            box.state.withLock { g in
                // A new generation per store, taken under its lock before any undo: a reader that saw this store's
                // pending state took an older one, so `outcome` finds its ticket below.
                let generation = failureGeneration.wrappingAdd(1, ordering: .acquiringAndReleasing).newValue
                var tickets = Set<UInt64>()
                let before = box.budgets.counts(g)
                defer { box.budgets.add(from: before, to: g) }
                while let top = g.undo.last, top.ticket >= from {
                    g.undo.removeLast()
                    tickets.insert(top.ticket)
                    for u in top.entries.reversed() { apply(u, to: &g, box: box) }
                }
                g.lastTicket = 0  // what is left is committed
                failed.append((generation, tickets))
            }
        }
        let batchTickets = Set(batch.map(\.ticket))
        state.withLock { s in
            for f in failed {
                s.poisoned.formUnion(f.tickets.subtracting(batchTickets))
                s.failures.append(f)
            }
            if s.failures.count > Self.keptFailures { s.failures.removeFirst(s.failures.count - Self.keptFailures) }
        }
    }

    private func apply(_ u: Undo, to g: inout GuardedStore, box: StoreBox) {
        switch u {
        case .user(let id, let old?): g.store.save(old); _ = id
        case .user(let id, nil): g.store.deleteUser(id)
        case .users(let users, let phones):
            g.store.users = users
            g.store.phoneIndex = phones
            g.store.rebuildEmailIndex()
            g.store.rebuildProviderIndexes()
        case .session(let id, let old): g.store.sessions[id] = old
        case .sessions(let table): g.store.sessions = table
        case .oobCode(let code, let old?): _ = g.store.oobCodes.remove(code); g.store.oobCodes.insert(old)
        case .oobCode(let code, nil): _ = g.store.oobCodes.remove(code)
        case .oobCodes(let table): g.store.oobCodes = table
        case .config(let c, let t, let implicit):
            g.store.config = c
            g.store.tenant = t
            g.store.implicitTenant = implicit
        case .refreshTokenAdded(let token): refreshTokens.withLock { $0.remove(token) }
        case .refreshTokensRemoved(let tokens): refreshTokens.withLock { m in for (t, r) in tokens { m.insert(t, r) } }
        case .storeRemoved:
            g.removed = false
            registry.withLock { r in if r.boxes[box.key] == nil { r.insert(box) } }
        case .storeCreated:
            g.removed = true
            registry.withLock { r in if r.boxes[box.key] === box { r.remove(box.key) } }
        case .state(let before):
            before.apply(to: &g.store)
            refreshTokens.withLock { index in
                _ = index.removeStore(box.key)
                for (t, r) in before.refreshTokens { index.insert(t, r) }
            }
        }
    }
}

extension StoreState {
    /// Puts the durable state into `s`; the session sequence never goes back (here: it writes durable fields).
    fileprivate func apply(to s: inout AuthStore) {
        s.config = config
        s.tenant = tenant
        s.implicitTenant = implicitTenant
        s.users = users
        s.phoneIndex = phoneIndex
        s.emailIndex = emailIndex
        s.federatedIndex = federatedIndex
        s.providerEmailIndex = providerEmailIndex
        s.sessions = sessions
        s.oobCodes = oob
        s.nextSequence = max(s.nextSequence, nextSequence)
    }
}

// MARK: restoring (writes durable fields, so it lives with the type that declares them)

extension Emulator {
    /// Room for `n` more users (and their phone numbers) in the store's tables, when it holds none yet: an import
    /// that knows about how many it brings grows them once instead of doubling its way there. Changes no state.
    public func reserveUsers(_ key: StoreKey, _ n: Int) {
        guard n > 0, let box = existingStore(key) else { return }
        box.state.withLock { g in
            guard g.store.users.isEmpty else { return }
            g.store.users.reserveCapacity(n)
            g.store.phoneIndex.reserveCapacity(n)
        }
    }

    /// Loads stores and refresh tokens from a journal's snapshot (at start, before serving).
    /// A late SMS still on its way when the journal was written arrives at its time after the restart too (its
    /// `code.sent` event and the inbox long-polls then); one due while the server was down is in the inbox already.
    public func restore(_ stores: [StoreSnapshot], refreshTokens: [(String, RefreshTokenRecord)]) {
        let now = clock.nowMillis()
        for snap in stores {
            for sess in snap.sessions {
                if let d = sess.delivery, !d.lost, let at = d.deliverAt, at > now { scheduleLate(snap.key, sess, at: at) }
            }
            let box = store(snap.key)
            box.state.withLock { g in
                let before = box.budgets.counts(g)
                defer { box.budgets.add(from: before, to: g) }
                // A tenant without a stored config or settings was created on first use (configuring one stores both).
                g.store.implicitTenant = snap.key.tenantId != nil && snap.config == nil && snap.tenant == nil
                if let c = snap.config { g.store.config = c }
                if let t = snap.tenant { g.store.tenant = t }
                g.store.restoreUsers(snap.users, chunks: snap.userChunks)
                // In creation order: the session indexes append in O(1) (out-of-order inserts cost a shift each).
                for sess in snap.sessions.sorted(by: { $0.sequence < $1.sequence }) {
                    g.store.sessions[sess.id] = sess
                    g.store.nextSequence = max(g.store.nextSequence, sess.sequence + 1)
                }
                for code in snap.oobCodes.sorted(by: { $0.sequence < $1.sequence }) { g.store.oobCodes.insert(code) }
            }
        }
        restoreRefreshTokens(refreshTokens)
    }
}
