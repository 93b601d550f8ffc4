import EmulatorSupport

/// One durable change to the emulator's state. A journal writes each batch atomically before the request that
/// caused it is acknowledged.
public enum StateChange: Sendable {
    case userSaved(StoreKey, UserRecord)
    case userDeleted(StoreKey, String)
    case usersWiped(StoreKey)
    case sessionSaved(StoreKey, VerificationSession)
    case sessionDeleted(StoreKey, String)
    case sessionsCleared(StoreKey)
    case configSaved(StoreKey, ProjectConfig, TenantSettings?)
    case storeDeleted(StoreKey)
    case refreshTokenSaved(String, RefreshTokenRecord)
    case refreshTokensDeleted(StoreKey, localId: String?)
    case oobCodeSaved(StoreKey, OobCode)
    case oobCodeDeleted(StoreKey, String)
    case oobCodesCleared(StoreKey)
    /// A store's whole state replaced (reset, snapshot restore): its rows deleted, then these written (a nil config:
    /// no config row).
    case storeReplaced(StoreSnapshot, refreshTokens: [(String, RefreshTokenRecord)])
}

/// Where durable changes go (`--data-dir`); nil keeps everything in memory.
///
/// The emulator calls `record` from one thread at a time (its `JournalCommitter`), with every change queued since
/// the previous call, in order: one call is one group commit, of many requests and projects.
public protocol StateJournal: Sendable {
    /// Writes the changes in one transaction, all or none; throws if they could not be made durable (the emulator
    /// then rolls the same changes back in memory and answers the requests that made or saw them with a 500).
    func record(_ changes: [StateChange]) throws
}

/// Everything a journal holds for one store, for restoring at start.
public struct StoreSnapshot: Sendable {
    public var key: StoreKey
    public var config: ProjectConfig?
    public var tenant: TenantSettings?
    public var users: [UserRecord] = []
    public var sessions: [VerificationSession] = []
    public var oobCodes: [OobCode] = []
    public init(key: StoreKey) { self.key = key }
}

extension Emulator {
    /// Loads stores and refresh tokens from a journal's snapshot (at start, before serving).
    public func restore(_ stores: [StoreSnapshot], refreshTokens: [(String, RefreshTokenRecord)]) {
        for snap in stores {
            let box = store(snap.key)
            box.state.withLock { g in
                let before = box.budgets.counts(g)
                defer { box.budgets.add(from: before, to: g) }
                // A tenant without a stored config or settings was created on first use (configuring one stores both).
                g.store.implicitTenant = snap.key.tenantId != nil && snap.config == nil && snap.tenant == nil
                if let c = snap.config { g.store.config = c }
                if let t = snap.tenant { g.store.tenant = t }
                for u in snap.users { g.store.save(u) }
                // In creation order: the session indexes append in O(1) (out-of-order inserts cost a shift each).
                for sess in snap.sessions.sorted(by: { $0.sequence < $1.sequence }) {
                    g.store.sessions[sess.id] = sess
                    g.store.nextSequence = max(g.store.nextSequence, sess.sequence + 1)
                }
                for code in snap.oobCodes.sorted(by: { $0.sequence < $1.sequence }) { g.store.oob.table.insert(code) }
            }
        }
        restoreRefreshTokens(refreshTokens)
    }
}
