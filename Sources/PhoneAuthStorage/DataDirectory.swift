import CSQLite
import CSystem
import Dispatch
import EmulatorSupport
import PhoneAuthCore
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// `--data-dir`: an SQLite database in WAL mode holding every project's and tenant's users, config, pending
/// sessions, refresh tokens and the signing keys. Each change batch is one transaction, committed before the
/// response that acknowledges it (or anything it changed) is sent (WAL + synchronous=NORMAL survives `kill -9`; `FULL` also power loss).
/// An exclusive `flock` on `DIR/lock` keeps a second server out.
public final class DataDirectory: StateJournal, @unchecked Sendable {
    public enum Durability: String, Sendable { case normal, full }

    public let path: String
    /// The user field table users are written and read with (UserFields.swift).
    public let userFields: UserFieldTable
    private let lockFD: Int32
    private let connection: Locked<SQLiteConnection?>
    /// Background checkpoints: a timer, so commits never copy the WAL into the database.
    private let checkpointQueue = DispatchQueue(label: "phone-auth.checkpoint")
    private let checkpointer: Locked<(any DispatchSourceTimer)?> = Locked(nil)

    public struct OpenError: Error, CustomStringConvertible, Sendable {
        public let description: String
    }

    /// Opens (creating if needed) the directory and its database; refuses a directory another server holds.
    public init(path: String, durability: Durability = .normal, userFields: UserFieldTable = .standard) throws(OpenError) {
        self.path = path
        self.userFields = userFields
        var st = stat()
        if stat(path, &st) != 0 {
            guard mkdir(path, 0o700) == 0 else { throw OpenError(description: "cannot create data directory \(path): \(String(cString: strerror(errno)))") }
        } else if (st.st_mode & S_IFMT) != S_IFDIR {
            throw OpenError(description: "\(path) is not a directory")
        }
        let lockPath = path + "/lock"
        let fd = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw OpenError(description: "cannot use data directory \(path): \(String(cString: strerror(errno)))") }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            Glibc.close(fd)
            throw OpenError(description: "data directory \(path) is in use by another phone-auth-emulator (lock held on \(lockPath))")
        }
        lockFD = fd
        let conn: SQLiteConnection
        do {
            conn = try SQLiteConnection(path: path + "/emulator.sqlite3")
            chmod(path + "/emulator.sqlite3", 0o600)
            // One process owns the directory (the `lock` file above), so SQLite need not lock the file for each
            // transaction: exclusive locking mode keeps its locks for the connection's life and the WAL index in
            // memory (no -shm file, no fcntl calls per commit). Checkpoints use this same connection (below).
            try conn.exec("PRAGMA locking_mode=EXCLUSIVE")
            try conn.exec("PRAGMA journal_mode=WAL")
            try conn.exec("PRAGMA synchronous=\(durability == .full ? "FULL" : "NORMAL")")
            // No checkpoint on the request path: a background timer runs passive checkpoints (below).
            try conn.exec("PRAGMA wal_autocheckpoint=0; PRAGMA cache_size=-32768; PRAGMA journal_size_limit=67108864")
            try conn.exec("""
                CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
                CREATE TABLE IF NOT EXISTS users (project TEXT NOT NULL, tenant TEXT NOT NULL, local_id TEXT NOT NULL, doc TEXT NOT NULL,
                    PRIMARY KEY (project, tenant, local_id)) WITHOUT ROWID;
                CREATE TABLE IF NOT EXISTS sessions (project TEXT NOT NULL, tenant TEXT NOT NULL, session_info TEXT NOT NULL, doc TEXT NOT NULL,
                    PRIMARY KEY (project, tenant, session_info)) WITHOUT ROWID;
                CREATE TABLE IF NOT EXISTS oob_codes (project TEXT NOT NULL, tenant TEXT NOT NULL, code TEXT NOT NULL, doc TEXT NOT NULL,
                    PRIMARY KEY (project, tenant, code)) WITHOUT ROWID;
                CREATE TABLE IF NOT EXISTS configs (project TEXT NOT NULL, tenant TEXT NOT NULL, doc TEXT NOT NULL,
                    PRIMARY KEY (project, tenant)) WITHOUT ROWID;
                CREATE TABLE IF NOT EXISTS refresh_tokens (token TEXT PRIMARY KEY, project TEXT NOT NULL, tenant TEXT NOT NULL,
                    local_id TEXT NOT NULL, doc TEXT NOT NULL) WITHOUT ROWID;
                CREATE INDEX IF NOT EXISTS refresh_tokens_by_user ON refresh_tokens (project, tenant, local_id);
                CREATE TABLE IF NOT EXISTS signing_keys (kid TEXT PRIMARY KEY, pem TEXT NOT NULL, created INTEGER NOT NULL) WITHOUT ROWID;
                CREATE TABLE IF NOT EXISTS attestation_keys (kind TEXT NOT NULL, kid TEXT NOT NULL, pem TEXT NOT NULL,
                    created INTEGER NOT NULL, PRIMARY KEY (kind, kid)) WITHOUT ROWID;
                INSERT OR IGNORE INTO meta (key, value) VALUES ('format', '1');
                """)
            let format = try conn.query("SELECT value FROM meta WHERE key = 'format'").first?.first?.text
            guard format == "1" else { throw SQLiteError(code: 0, message: "unknown data format \(format ?? "?")") }
        } catch {
            flock(fd, LOCK_UN)
            Glibc.close(fd)
            throw OpenError(description: "cannot open the database in \(path): \(error)")
        }
        connection = Locked(conn)
        // Checkpoints every 200 ms on the timer's queue, between commits (they take the connection's lock: the
        // committer thread, never an event loop, waits for one).
        let timer = DispatchSource.makeTimerSource(queue: checkpointQueue)
        timer.schedule(deadline: .now() + 0.2, repeating: 0.2)
        timer.setEventHandler { [weak self] in
            self?.connection.withLock { c in _ = try? c?.exec("PRAGMA wal_checkpoint(PASSIVE)") }
        }
        checkpointer.withLock { $0 = timer }
        timer.resume()
    }

    deinit { close() }

    /// Checkpoints the WAL, closes the database and releases the lock.
    public func close() {
        if let timer = checkpointer.withLock({ $0 }) {
            timer.cancel()
            checkpointQueue.sync {}
        }
        checkpointer.withLock { $0 = nil }
        connection.withLock { c in
            if let conn = c { try? conn.exec("PRAGMA wal_checkpoint(TRUNCATE)") }
            c = nil
        }
        flock(lockFD, LOCK_UN)
        Glibc.close(lockFD)
    }

    private func withConnection<T>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        try connection.withLock { c in
            guard let c else { throw SQLiteError(code: 0, message: "the database is closed") }
            return try body(c)
        }
    }

    private static func t(_ tenant: String?) -> SQLValue { .text(tenant ?? "") }

    // MARK: StateJournal

    /// Writes one batch in one SQLite transaction (all or nothing). The emulator's `JournalCommitter` calls this from
    /// one thread with every change queued since its previous call: that is the group commit, across requests and
    /// projects alike (see PhoneAuthCore/Transaction.swift).
    public func record(_ changes: [StateChange]) throws {
        guard !changes.isEmpty else { return }
        try commit(changes)
    }

    private func commit(_ changes: [StateChange]) throws {
        try withConnection { c in
            try c.run("BEGIN IMMEDIATE", [])
            do {
                for change in changes { try apply(change, c) }
                try c.run("COMMIT", [])
            } catch {
                try? c.exec("ROLLBACK")
                throw error
            }
        }
    }

    private func apply(_ change: StateChange, _ c: SQLiteConnection) throws {
        switch change {
        case .userSaved(let k, let u):
            try c.run("INSERT OR REPLACE INTO users (project, tenant, local_id, doc) VALUES (?, ?, ?, ?)",
                      [.text(k.projectId), Self.t(k.tenantId), .text(u.localId), .text(Codecs.encode(u, fields: userFields))])
        case .userDeleted(let k, let id):
            try c.run("DELETE FROM users WHERE project = ? AND tenant = ? AND local_id = ?", [.text(k.projectId), Self.t(k.tenantId), .text(id)])
            try c.run("DELETE FROM refresh_tokens WHERE project = ? AND tenant = ? AND local_id = ?", [.text(k.projectId), Self.t(k.tenantId), .text(id)])
        case .usersWiped(let k):
            try c.run("DELETE FROM users WHERE project = ? AND tenant = ?", [.text(k.projectId), Self.t(k.tenantId)])
            try c.run("DELETE FROM refresh_tokens WHERE project = ? AND tenant = ?", [.text(k.projectId), Self.t(k.tenantId)])
        case .sessionSaved(let k, let s):
            try c.run("INSERT OR REPLACE INTO sessions (project, tenant, session_info, doc) VALUES (?, ?, ?, ?)",
                      [.text(k.projectId), Self.t(k.tenantId), .text(s.sessionInfo), .text(Codecs.encode(s))])
        case .sessionDeleted(let k, let info):
            try c.run("DELETE FROM sessions WHERE project = ? AND tenant = ? AND session_info = ?", [.text(k.projectId), Self.t(k.tenantId), .text(info)])
        case .sessionsCleared(let k):
            try c.run("DELETE FROM sessions WHERE project = ? AND tenant = ?", [.text(k.projectId), Self.t(k.tenantId)])
        case .configSaved(let k, let config, let tenant):
            try c.run("INSERT OR REPLACE INTO configs (project, tenant, doc) VALUES (?, ?, ?)",
                      [.text(k.projectId), Self.t(k.tenantId), .text(Codecs.encode(config, tenant))])
        case .storeDeleted(let k):
            for table in ["users", "sessions", "configs", "refresh_tokens", "oob_codes"] {
                try c.run("DELETE FROM \(table) WHERE project = ? AND tenant = ?", [.text(k.projectId), Self.t(k.tenantId)])
            }
        case .oobCodeSaved(let k, let code):
            try c.run("INSERT OR REPLACE INTO oob_codes (project, tenant, code, doc) VALUES (?, ?, ?, ?)",
                      [.text(k.projectId), Self.t(k.tenantId), .text(code.code), .text(Codecs.encode(code))])
        case .oobCodeDeleted(let k, let code):
            try c.run("DELETE FROM oob_codes WHERE project = ? AND tenant = ? AND code = ?", [.text(k.projectId), Self.t(k.tenantId), .text(code)])
        case .oobCodesCleared(let k):
            try c.run("DELETE FROM oob_codes WHERE project = ? AND tenant = ?", [.text(k.projectId), Self.t(k.tenantId)])
        case .refreshTokenSaved(let token, let r):
            try c.run("INSERT OR REPLACE INTO refresh_tokens (token, project, tenant, local_id, doc) VALUES (?, ?, ?, ?, ?)",
                      [.text(token), .text(r.projectId), Self.t(r.tenantId), .text(r.localId), .text(Codecs.encode(r))])
        case .storeReplaced(let snap, let tokens):
            let k = snap.key
            try apply(.storeDeleted(k), c)
            if let config = snap.config { try apply(.configSaved(k, config, snap.tenant), c) }
            for u in snap.users { try apply(.userSaved(k, u), c) }
            for chunk in snap.userChunks { for u in chunk { try apply(.userSaved(k, u), c) } }
            for session in snap.sessions { try apply(.sessionSaved(k, session), c) }
            for code in snap.oobCodes { try apply(.oobCodeSaved(k, code), c) }
            for (token, record) in tokens { try apply(.refreshTokenSaved(token, record), c) }
        }
    }

    // MARK: restore

    /// Everything stored, grouped by project and tenant.
    public func loadSnapshot() throws -> (stores: [StoreSnapshot], refreshTokens: [(String, RefreshTokenRecord)]) {
        try withConnection { c in
            var stores: [StoreKey: StoreSnapshot] = [:]
            func key(_ row: [SQLValue]) -> StoreKey { StoreKey(projectId: row[0].text ?? "", tenantId: row[1].text) }
            for row in try c.query("SELECT project, tenant, doc FROM configs") {
                let k = key(row)
                guard let (config, tenant) = row[2].text.flatMap(Codecs.decodeConfig) else { throw SQLiteError(code: 0, message: "unreadable config for \(k)") }
                stores[k, default: StoreSnapshot(key: k)].config = config
                stores[k, default: StoreSnapshot(key: k)].tenant = tenant
            }
            try loadUsers(c, into: &stores)
            for row in try c.query("SELECT project, tenant, doc FROM sessions") {
                let k = key(row)
                guard let s = row[2].text.flatMap(Codecs.decodeSession) else { throw SQLiteError(code: 0, message: "unreadable session in \(k)") }
                stores[k, default: StoreSnapshot(key: k)].sessions.append(s)
            }
            for row in try c.query("SELECT project, tenant, doc FROM oob_codes") {
                let k = key(row)
                guard let o = row[2].text.flatMap(Codecs.decodeOobCode) else { throw SQLiteError(code: 0, message: "unreadable oob code in \(k)") }
                stores[k, default: StoreSnapshot(key: k)].oobCodes.append(o)
            }
            var tokens: [(String, RefreshTokenRecord)] = []
            for row in try c.query("SELECT token, doc FROM refresh_tokens") {
                if let t = row[0].text, let r = row[1].text.flatMap(Codecs.decodeRefreshToken) { tokens.append((t, r)) }
            }
            // Projects before their tenants, so a tenant's first use sees its project's config.
            let ordered = stores.values.sorted { ($0.key.tenantId == nil ? 0 : 1, $0.key.projectId, $0.key.tenantId ?? "") < ($1.key.tenantId == nil ? 0 : 1, $1.key.projectId, $1.key.tenantId ?? "") }
            return (ordered, tokens)
        }
    }

    /// The users table, streamed (rows in primary-key order, so each store's rows come together) and decoded on every
    /// core: this thread steps SQLite and copies the documents into chunks (`UserRowChunk`), worker threads read each
    /// chunk straight into records (`UserRowDecoder`; the generic way, `Codecs.decodeUser`, for a document it does not
    /// take), and the chunks become their store's user-table chunks as they are (`StoreSnapshot.userChunks`; its
    /// `users` when a store's rows came in runs that leave a short chunk before its last). At most two chunks per core (up to 8) wait to be decoded,
    /// so memory holds the records and a few chunks, not a copy of the table.
    private func loadUsers(_ c: SQLiteConnection, into stores: inout [StoreKey: StoreSnapshot]) throws {
        let decoder = UserRowDecoder(userFields)
        let fields = userFields
        // Up to 8 cores: at most 16 chunks (~1 MB of documents each) read and waiting to be decoded.
        let workers = min(8, max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))))
        let slots = DispatchSemaphore(value: 2 * workers)
        let group = DispatchGroup()
        // Chunk number → its records; a chunk with an unreadable document leaves no entry.
        let results = Locked<[Int: ContiguousArray<UserRecord>]>([:])
        var keys: [StoreKey] = []  // each chunk's store
        var chunk = UserRowChunk()
        var project: [UInt8] = [], tenant: [UInt8] = []
        var current: StoreKey? = nil
        func submit() {
            guard !chunk.isEmpty, let k = current else { return }
            let n = keys.count
            keys.append(k)
            let work = chunk
            chunk = UserRowChunk()
            slots.wait()
            DispatchQueue.global().async(group: group) {
                if let users = work.decode(decoder, fields) { results.withLock { $0[n] = users } }
                slots.signal()
            }
        }
        do {
            try c.forEachRow("SELECT project, tenant, doc FROM users") { row in
                let p = row.bytes(0), t = row.bytes(1)
                if current == nil || !p.elementsEqual(project) || !t.elementsEqual(tenant) {
                    submit()
                    project = Array(p)
                    tenant = Array(t)
                    current = StoreKey(projectId: String(decoding: p, as: UTF8.self), tenantId: String(decoding: t, as: UTF8.self))
                }
                chunk.append(row.bytes(2))
                if chunk.count == UserRowChunk.rows { submit() }
            }
            submit()
        } catch {
            group.wait()
            throw error
        }
        group.wait()
        var decoded = results.withLock { r in
            var taken: [Int: ContiguousArray<UserRecord>] = [:]
            swap(&taken, &r)
            return taken
        }
        // Each store's chunks in order. Moved, not copied, into the snapshot (`userChunks`) when every one but the
        // last is full, as the rows of one store come (and a user table's chunks are): copying each record into one
        // array, and again into the table, was a fifth of a 1M restart (perf). Otherwise into `users`.
        var perStore: [StoreKey: [ContiguousArray<UserRecord>]] = [:]
        for (n, k) in keys.enumerated() {
            guard let users = decoded.removeValue(forKey: n) else { throw SQLiteError(code: 0, message: "unreadable user in \(k)") }
            perStore[k, default: []].append(users)
        }
        for (k, chunks) in perStore {
            if chunks.dropLast().allSatisfy({ $0.count == UserTable.chunkSize }) {
                stores[k, default: StoreSnapshot(key: k)].userChunks.append(contentsOf: chunks)
            } else {
                stores[k, default: StoreSnapshot(key: k)].users.append(contentsOf: chunks.joined())
            }
        }
    }

    // MARK: signing keys

    /// Stored signing keys as PEM, newest first.
    public func signingKeys() throws -> [(kid: String, pem: String)] {
        try withConnection { c in
            try c.query("SELECT kid, pem FROM signing_keys ORDER BY created DESC, kid").compactMap { row in
                guard let kid = row[0].text, let pem = row[1].text else { return nil }
                return (kid, pem)
            }
        }
    }

    /// Stores a key as the newest one (its `created` order is kept strictly increasing, whatever the system clock
    /// does) and, with `keepNewest`, deletes all but that many newest keys in the same transaction: retired keys
    /// leave the disk, so a restart never publishes them again.
    public func saveSigningKey(kid: String, pem: String, created: Int64, keepNewest: Int? = nil) throws {
        try withConnection { c in
            try c.run("BEGIN IMMEDIATE", [])
            do {
                let newest = try c.query("SELECT MAX(created) FROM signing_keys WHERE kid != ?", [.text(kid)]).first?.first?.int ?? Int64.min
                let order = newest == Int64.min ? created : max(created, newest &+ 1)
                try c.run("INSERT OR REPLACE INTO signing_keys (kid, pem, created) VALUES (?, ?, ?)", [.text(kid), .text(pem), .int(order)])
                if let keepNewest { try Self.prune(c, keepNewest) }
                try c.run("COMMIT", [])
            } catch {
                try? c.exec("ROLLBACK")
                throw error
            }
        }
    }

    /// The App Check or Phone Number Verification keys (`kind`) as PEM, newest first.
    public func attestationKeys(kind: String) throws -> [String] {
        try withConnection { c in
            try c.query("SELECT pem FROM attestation_keys WHERE kind = ? ORDER BY created DESC, kid", [.text(kind)]).compactMap { $0[0].text }
        }
    }

    /// Stores an App Check or PNV key as the newest of its kind and keeps only the `keepNewest` newest of that kind
    /// (in one transaction, like `saveSigningKey`).
    public func saveAttestationKey(kind: String, kid: String, pem: String, keepNewest: Int) throws {
        try withConnection { c in
            try c.run("BEGIN IMMEDIATE", [])
            do {
                let newest = try c.query("SELECT MAX(created) FROM attestation_keys WHERE kind = ?", [.text(kind)]).first?.first?.int ?? 0
                try c.run("INSERT OR REPLACE INTO attestation_keys (kind, kid, pem, created) VALUES (?, ?, ?, ?)",
                          [.text(kind), .text(kid), .text(pem), .int(newest &+ 1)])
                try c.run("""
                    DELETE FROM attestation_keys WHERE kind = ?1 AND kid NOT IN
                    (SELECT kid FROM attestation_keys WHERE kind = ?1 ORDER BY created DESC, kid LIMIT ?2)
                    """, [.text(kind), .int(Int64(max(1, keepNewest)))])
                try c.run("COMMIT", [])
            } catch {
                try? c.exec("ROLLBACK")
                throw error
            }
        }
    }

    /// Deletes all but the `keepNewest` newest keys; returns how many were deleted.
    @discardableResult
    public func pruneSigningKeys(keepNewest: Int) throws -> Int {
        try withConnection { c in
            let before = try c.query("SELECT COUNT(*) FROM signing_keys").first?.first?.int ?? 0
            try Self.prune(c, keepNewest)
            let after = try c.query("SELECT COUNT(*) FROM signing_keys").first?.first?.int ?? 0
            return Int(before - after)
        }
    }

    private static func prune(_ c: SQLiteConnection, _ keepNewest: Int) throws {
        try c.run("DELETE FROM signing_keys WHERE kid NOT IN (SELECT kid FROM signing_keys ORDER BY created DESC, kid LIMIT ?)",
                  [.int(Int64(max(1, keepNewest)))])
    }
}
