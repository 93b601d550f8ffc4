import EmulatorSupport

// # Reset and snapshots
//
// `POST /emulator/v1/projects/{p}:reset` puts a project and its tenants back to the state the server started with;
// `:snapshot` saves a project's current state under a name and `:restore` puts it back. Both are the same operation —
// replace every store of the project with a given `StoreState` per store — done store by store, each in one store
// transaction (`StoreTransaction.replaceState`, Transaction.swift): memory and, with `--data-dir`, the journal change
// together (one `StateChange.storeReplaced`: the store's rows deleted and the new state's written), a failed commit
// rolls memory back, and the reply waits until every store's change is durable. A project with tenants is therefore
// reset tenant by tenant, not atomically across them; each store is.
//
// What a store's state is: its config and tenant settings, users, pending verification sessions, out-of-band codes and
// refresh tokens. The tables are value types shared copy-on-write, so saving and restoring cost O(1) for them and
// O(the store's refresh tokens) for the token index; a reset of a test-sized project costs a few microseconds plus
// the request (docs/testing.md "Test principals, reset and snapshots" has the measurement). Non-durable state (send windows, abuse counters,
// minted app credentials and pushes, temporary proofs, pending MFA sign-ins) starts afresh, as after a start; inbox
// long-polls stay registered (they get the next code). Events keep their history: each store's stream gets one
// `project.reset` event (with `snapshot` for a restore). Signing keys, the clock (a project reset; `POST
// /emulator/v1:reset` resets it too) and the snapshots themselves are kept.
//
// The starting state ("baseline") is what the config file and flags define plus what `--import` brought, captured once
// at start (`captureBaseline`, or `adoptBaseline` from a scratch emulator the import ran in when a data directory
// holds older state): with `--data-dir`, a reset returns to that, not to what the directory held from earlier runs.
// A project or tenant without a baseline resets to its initial config and nothing else; tenants the baseline does not
// have are deleted, and baseline tenants deleted since are created again. A tenant a restore (or reset) writes has its
// config stored, as a configured tenant: one created on first use is no longer reclaimed at the tenant cap.
//
// Snapshots are kept in memory only (a restart forgets them; what a restore wrote is durable like any write), at most
// `SnapshotRegistry.maxPerProject` per project and `SnapshotRegistry.maxRecords` records (users, sessions, codes,
// refresh tokens) across all of them: past either, `RESOURCE_EXHAUSTED` (delete one first).

/// A store's durable state as a value: what a snapshot keeps, the start-up baseline, and a reset's undo entry.
public struct StoreState: Sendable {
    public internal(set) var config: ProjectConfig
    public internal(set) var tenant: TenantSettings?
    var implicitTenant: Bool
    var users: UserTable
    var phoneIndex: [String: String]
    var emailIndex: [String: String]
    var federatedIndex: [String: String]
    var providerEmailIndex: [String: [String]]
    var sessions: SessionTable
    var oob: OobTable
    /// The store's session sequence when it was taken (a store made again from it continues after its sessions).
    var nextSequence: UInt64
    var refreshTokens: [(String, RefreshTokenRecord)]

    init(_ s: AuthStore, refreshTokens: [(String, RefreshTokenRecord)]) {
        config = s.config
        tenant = s.tenant
        implicitTenant = s.implicitTenant
        users = s.users
        phoneIndex = s.phoneIndex
        emailIndex = s.emailIndex
        federatedIndex = s.federatedIndex
        providerEmailIndex = s.providerEmailIndex
        sessions = s.sessions
        oob = s.oobCodes
        nextSequence = s.nextSequence
        self.refreshTokens = refreshTokens
    }

    /// A store with `config` and nothing else (a project or tenant without a baseline).
    init(empty config: ProjectConfig, tenant: TenantSettings?) {
        self.init(AuthStore(config: config, tenant: tenant), refreshTokens: [])
    }

    public var userCount: Int { users.count }

    /// What it holds, against the snapshot budget: users, sessions, out-of-band codes and refresh tokens.
    var records: Int { users.count + sessions.count + oob.count + refreshTokens.count }

    /// The journal's form: every row the store will have (`storeConfig` false: no config row).
    func journalSnapshot(_ key: StoreKey, storeConfig: Bool) -> StoreSnapshot {
        var snap = StoreSnapshot(key: key)
        if storeConfig {
            snap.config = config
            snap.tenant = tenant
        }
        snap.users = Array(users.values)
        snap.sessions = sessions.values
        snap.oobCodes = oob.list()
        return snap
    }
}

/// The named snapshots of every project and the start-up baseline, behind one lock (snapshots are rare, small calls).
public final class SnapshotRegistry: Sendable {
    /// Snapshots one project keeps at most.
    public static let maxPerProject = 32
    /// Records (users, sessions, out-of-band codes, refresh tokens) all snapshots hold together at most: one full
    /// project at `--max-users`' default, or thousands of test-sized ones (about 1 KB each: 200 MB at most).
    public static let maxRecords = 200_000
    /// A snapshot's name: 1 to 64 letters, digits, `-`, `_` or `.`.
    public static let maxNameLength = 64

    struct Saved: Sendable {
        let name: String
        let createdAt: Int64
        let stores: [StoreKey: StoreState]
        var records: Int { stores.values.reduce(0) { $0 + $1.records } }
    }

    private struct State: Sendable {
        var byProject: [String: [Saved]] = [:]
        var records = 0
        var baseline: [StoreKey: StoreState] = [:]
    }
    private let state = Locked(State())
    /// This registry's caps (the statics; tests lower them).
    let perProject: Int
    let recordLimit: Int

    public init(maxPerProject: Int = SnapshotRegistry.maxPerProject, maxRecords: Int = SnapshotRegistry.maxRecords) {
        perProject = maxPerProject
        recordLimit = maxRecords
    }

    /// `INVALID_ARGUMENT` unless `name` is a valid snapshot name.
    public static func checkName(_ name: String?) throws(AuthError) -> String {
        guard let name, !name.isEmpty, name.utf8.count <= maxNameLength,
              name.utf8.allSatisfy({ b in (b >= 0x30 && b <= 0x39) || ((b | 0x20) >= 0x61 && (b | 0x20) <= 0x7A) || b == 0x2D || b == 0x5F || b == 0x2E })
        else { throw AuthError.invalidArgument("name must be 1 to \(maxNameLength) letters, digits, '-', '_' or '.'.") }
        return name
    }

    /// Keeps `s` (replacing a snapshot of the same name), within the caps.
    func save(_ projectId: String, _ s: Saved) throws(AuthError) {
        let records = s.records
        try state.withLock { st throws(AuthError) in
            var list = st.byProject[projectId] ?? []
            let replaced = list.firstIndex { $0.name == s.name }
            if replaced == nil, list.count >= perProject {
                throw AuthError(.resourceExhausted, "A project keeps at most \(perProject) snapshots: delete one first (DELETE /emulator/v1/projects/\(projectId)/snapshots/NAME).")
            }
            let freed = replaced.map { list[$0].records } ?? 0
            guard st.records - freed + records <= recordLimit else {
                throw AuthError(.resourceExhausted, "Snapshots hold at most \(recordLimit) users, codes and refresh tokens in all: this one has \(records); delete some first.")
            }
            if let i = replaced { list.remove(at: i) }
            list.append(s)
            st.byProject[projectId] = list
            st.records += records - freed
        }
    }

    func get(_ projectId: String, _ name: String) -> Saved? {
        state.withLock { $0.byProject[projectId]?.first { $0.name == name } }
    }

    /// A project's snapshots, oldest first.
    func list(_ projectId: String) -> [Saved] { state.withLock { $0.byProject[projectId] ?? [] } }

    /// False if there was none.
    func delete(_ projectId: String, _ name: String) -> Bool {
        state.withLock { st in
            guard let i = st.byProject[projectId]?.firstIndex(where: { $0.name == name }) else { return false }
            st.records -= st.byProject[projectId]![i].records
            st.byProject[projectId]!.remove(at: i)
            if st.byProject[projectId]!.isEmpty { st.byProject[projectId] = nil }
            return true
        }
    }

    /// Records all snapshots hold.
    public var records: Int { state.withLock { $0.records } }

    func setBaseline(_ states: [StoreKey: StoreState]) { state.withLock { $0.baseline = states } }

    /// The baseline's stores of a project (the project's own, and its tenants').
    func baseline(of projectId: String) -> [StoreKey: StoreState] {
        state.withLock { $0.baseline.filter { $0.key.projectId == projectId } }
    }

    var baselineProjects: [String] { state.withLock { Array(Set($0.baseline.keys.map(\.projectId))) } }
}

/// A project after a reset or restore.
public struct ProjectStateSummary: Sendable, Equatable {
    public let projectId: String
    /// Users in the project itself.
    public let users: Int
    /// Its tenants, sorted.
    public let tenants: [String]
}

/// One saved snapshot, as listed.
public struct SnapshotInfo: Sendable, Equatable {
    public let name: String
    /// Emulator clock, milliseconds.
    public let createdAt: Int64
    /// Users in the project itself, and in all its tenants.
    public let users: Int
    public let tenants: [String]
    /// What it counts against `SnapshotRegistry.maxRecords`.
    public let records: Int
}

extension Emulator {
    // MARK: the baseline

    /// The state of every store now, each read in its store's transaction (consistent with its refresh tokens).
    func storeStates(projectId: String? = nil) throws(AuthError) -> [StoreKey: StoreState] {
        var states: [StoreKey: StoreState] = [:]
        let keys = projectId.map { p in [StoreKey(projectId: p)] + tenantIDs(of: p).map { StoreKey(projectId: p, tenantId: $0) } } ?? storeKeys
        for key in keys {
            guard let box = existingStore(key) else { continue }
            do {
                states[key] = try transaction(box) { tx throws(AuthError) in tx.currentState() }
            } catch {
                if error.code == .tenantNotFound { continue }  // a tenant deleted meanwhile
                throw error
            }
        }
        return states
    }

    /// Makes this emulator's state now the one resets return to (at start, once the import is in).
    public func captureBaseline() throws(AuthError) { snapshots.setBaseline(try storeStates()) }

    /// Makes `other`'s state the one resets return to: an emulator without a journal the import ran in, when this
    /// one's data directory holds state from earlier runs that is not part of the start.
    public func adoptBaseline(from other: Emulator) throws(AuthError) { snapshots.setBaseline(try other.storeStates()) }

    // MARK: reset, snapshot, restore

    /// Puts the project and its tenants back to the baseline.
    public func resetProject(_ projectId: String) throws(AuthError) -> ProjectStateSummary {
        try replaceProject(projectId, with: snapshots.baseline(of: projectId), snapshot: nil)
    }

    /// Resets every project that exists (or has a baseline).
    public func resetAll() throws(AuthError) -> [ProjectStateSummary] {
        let projects = Set(storeKeys.filter { $0.tenantId == nil }.map(\.projectId)).union(snapshots.baselineProjects)
        var out: [ProjectStateSummary] = []
        for p in projects.sorted() { out.append(try resetProject(p)) }
        return out
    }

    /// Saves the project's state (its own store's and every tenant's) under `name`, replacing one of that name.
    public func saveSnapshot(_ projectId: String, name: String) throws(AuthError) -> SnapshotInfo {
        let name = try SnapshotRegistry.checkName(name)
        // Read as outside a request: pending commits are waited for (a snapshot never keeps state a failed commit
        // rolls back; that read fails instead).
        let read = DurabilityScope.$current.withValue(nil) { () -> Result<[StoreKey: StoreState], AuthError> in
            do throws(AuthError) { return .success(try storeStates(projectId: projectId)) } catch { return .failure(error) }
        }
        var stores = try read.get()
        let project = StoreKey(projectId: projectId)
        if stores[project] == nil { stores[project] = StoreState(empty: initialConfig(project), tenant: nil) }
        let saved = SnapshotRegistry.Saved(name: name, createdAt: clock.nowMillis(), stores: stores)
        try snapshots.save(projectId, saved)
        return Self.info(saved, projectId)
    }

    /// Puts a saved snapshot back (`NOT_FOUND` for an unknown name).
    public func restoreSnapshot(_ projectId: String, name: String) throws(AuthError) -> ProjectStateSummary {
        let name = try SnapshotRegistry.checkName(name)
        guard let saved = snapshots.get(projectId, name) else { throw Self.noSnapshot(projectId, name) }
        return try replaceProject(projectId, with: saved.stores, snapshot: name)
    }

    public func snapshotList(_ projectId: String) -> [SnapshotInfo] { snapshots.list(projectId).map { Self.info($0, projectId) } }

    public func deleteSnapshot(_ projectId: String, name: String) throws(AuthError) {
        let name = try SnapshotRegistry.checkName(name)
        guard snapshots.delete(projectId, name) else { throw Self.noSnapshot(projectId, name) }
    }

    static func noSnapshot(_ projectId: String, _ name: String) -> AuthError {
        AuthError.notFound("No snapshot named \(name) in project \(projectId).")
    }

    static func info(_ s: SnapshotRegistry.Saved, _ projectId: String) -> SnapshotInfo {
        SnapshotInfo(name: s.name, createdAt: s.createdAt, users: s.stores.values.reduce(0) { $0 + $1.userCount },
                     tenants: s.stores.keys.compactMap(\.tenantId).sorted(), records: s.records)
    }

    /// Replaces every store of the project with `target`'s (a missing project entry: its initial config, nothing else):
    /// tenants `target` lacks are deleted first (so its own fit the tenant cap), then the project, then each tenant,
    /// created again if it is gone. One transaction per store; each emits `project.reset`.
    func replaceProject(_ projectId: String, with target: [StoreKey: StoreState], snapshot: String?) throws(AuthError) -> ProjectStateSummary {
        let project = StoreKey(projectId: projectId)
        let event = EventPayload.projectReset(snapshot: snapshot)
        for t in tenantIDs(of: projectId) {
            let key = StoreKey(projectId: projectId, tenantId: t)
            guard target[key] == nil, let box = existingStore(key) else { continue }
            do {
                try transaction(box) { tx throws(AuthError) in
                    tx.emit(event)
                    tx.deleteStore()
                }
            } catch {
                if error.code != .tenantNotFound { throw error }  // deleted meanwhile: gone already
            }
        }
        let own = target[project] ?? StoreState(empty: initialConfig(project), tenant: nil)
        let initial = initialConfig(project)
        try transaction(project) { tx throws(AuthError) in
            tx.replaceState(with: own, storeConfig: own.config != initial)
            tx.clearTransientState()
            tx.emit(event)
        }
        for (key, saved) in target.sorted(by: { ($0.key.tenantId ?? "") < ($1.key.tenantId ?? "") }) where key.tenantId != nil {
            let created = existingStore(key) == nil
            if created { try admit(key, create: true, explicit: true) }
            // Its config is stored: a tenant created on first use keeps its own config from now on (after a restart
            // it would otherwise start again from its project's config, which the restore may have changed), and is
            // kept like a configured one.
            var state = saved
            state.implicitTenant = false
            try transaction(key) { tx throws(AuthError) in
                if created { tx.markCreated() }
                tx.replaceState(with: state, storeConfig: true)
                tx.clearTransientState()
                tx.emit(event)
            }
        }
        return ProjectStateSummary(projectId: projectId, users: own.userCount, tenants: tenantIDs(of: projectId))
    }
}

extension StoreTransaction {
    /// Non-durable state as a new store has it: send windows, abuse counters, minted credentials and pushes,
    /// temporary proofs, pending MFA sign-ins. (Inbox long-polls stay.)
    mutating func clearTransientState() {
        windows = SendWindows()
        protection = ProtectionState()
        credentials = CredentialState()
        temporaryProofs.removeAll()
        mfaPending.removeAll()
        totpEnrollments.removeAll()
    }
}
