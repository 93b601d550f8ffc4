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
    /// More users, after `users`: in chunks of `UserTable.chunkSize` as a data directory decoded them (the last may
    /// be shorter). A restore into an empty store takes them as the user table's own chunks, copying no record.
    public var userChunks: [ContiguousArray<UserRecord>] = []
    public var sessions: [VerificationSession] = []
    public var oobCodes: [OobCode] = []
    public init(key: StoreKey) { self.key = key }

    /// The users of `users` and `userChunks`.
    public var userCount: Int { userChunks.reduce(users.count) { $0 + $1.count } }
    /// Every user, `users` then `userChunks` (a copy: for reading, not for a restore).
    public var allUsers: [UserRecord] { users + userChunks.joined() }
}
