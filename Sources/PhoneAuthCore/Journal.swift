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
}

/// Where durable changes go (`--data-dir`); nil keeps everything in memory.
public protocol StateJournal: Sendable {
    /// Writes the changes in one transaction; throws if they could not be made durable.
    func record(_ changes: [StateChange]) throws
}

/// Everything a journal holds for one store, for restoring at start.
public struct StoreSnapshot: Sendable {
    public var key: StoreKey
    public var config: ProjectConfig?
    public var tenant: TenantSettings?
    public var users: [UserRecord] = []
    public var sessions: [VerificationSession] = []
    public init(key: StoreKey) { self.key = key }
}

extension Emulator {
    /// Writes `changes` to the journal, if any. Failures become a logged 500 for this request.
    func persist(_ changes: [StateChange]) throws(AuthError) {
        guard let journal, !changes.isEmpty else { return }
        do {
            try journal.record(changes)
        } catch {
            logger.error("could not persist a change", [("error", String(describing: error))])
            throw AuthError.internalError("The change could not be stored durably: \(error)")
        }
    }

    /// Loads stores and refresh tokens from a journal's snapshot (at start, before serving).
    public func restore(_ stores: [StoreSnapshot], refreshTokens: [(String, RefreshTokenRecord)]) {
        for snap in stores {
            let box = store(snap.key)
            box.state.withLock { s in
                // A tenant without a stored config or settings was created on first use (configuring one stores both).
                s.implicitTenant = snap.key.tenantId != nil && snap.config == nil && snap.tenant == nil
                if let c = snap.config { s.config = c }
                if let t = snap.tenant { s.tenant = t }
                for u in snap.users { s.save(u) }
                // In creation order: the session indexes append in O(1) (out-of-order inserts cost a shift each).
                for sess in snap.sessions.sorted(by: { $0.sequence < $1.sequence }) {
                    s.sessions[sess.id] = sess
                    s.nextSequence = max(s.nextSequence, sess.sequence + 1)
                }
            }
        }
        restoreRefreshTokens(refreshTokens)
    }
}
