import Dispatch
import EmulatorSupport
import PhoneAuthCore
#if canImport(Glibc)
import Glibc
#endif

/// The firebase-tools emulator export layout, so exports move both ways between us and the official emulator:
///
///     DIR/firebase-export-metadata.json   {"version": …, "auth": {"version": …, "path": "auth_export"}}
///     DIR/auth_export/accounts.json       {"kind": "identitytoolkit#DownloadAccountResponse", "users": [...]}
///     DIR/auth_export/accounts-<tenant>.json
///     DIR/auth_export/config.json         the emulator config (official fields plus ours)
///
/// Every file is written to a temporary name, fsynced and renamed, so a crash never leaves half a file.
public enum ExportImport {
    public struct Failure: Error, CustomStringConvertible, Sendable {
        public let description: String
        /// The path is inside the root but deeper, or would create more directories, than an export may.
        public var isDepthLimit = false
    }

    /// Writes the project's users (and each tenant's) and config to `dir`, creating it (the operator's own path:
    /// `--export-on-exit`; symlinks in it are followed, but the files written are never followed).
    @discardableResult
    public static func export(_ app: PhoneAuthApp, projectId: String, to dir: String) throws(Failure) -> (users: Int, tenants: Int) {
        guard !Files.hasNUL(dir) else { throw Failure(description: "invalid export path \(Files.printable(dir))") }
        try makeDirectories(dir)
        let fd: Int32
        do { fd = try Files.openDirectory(dir) } catch { throw Failure(description: "cannot open \(error)") }
        defer { close(fd) }
        return try export(app, projectId: projectId, into: fd, shownAs: dir)
    }

    /// Writes the export into the open directory `dirFD`. `auth_export/` is opened without following symlinks,
    /// every file goes through `Files.writeAtomically(in:)`, and file names come only from constants and
    /// validated tenant ids.
    @discardableResult
    public static func export(_ app: PhoneAuthApp, projectId: String, into dirFD: Int32, shownAs dir: String) throws(Failure) -> (users: Int, tenants: Int) {
        let authFD: Int32
        do { authFD = try Files.openSubdirectory(dirFD, "auth_export") } catch { throw Failure(description: "cannot open \(Files.printable(dir))/auth_export: \(error)") }
        defer { close(authFD) }
        func write(_ fd: Int32, _ name: String, _ json: JSON) throws(Failure) {
            do { try Files.writeAtomically(in: fd, name: name, json.prettySerialized()) } catch {
                throw Failure(description: "cannot write \(Files.printable(dir))/\(fd == authFD ? "auth_export/" : "")\(name): \(error)")
            }
        }
        let version = PhoneAuthApp.version
        try write(dirFD, "firebase-export-metadata.json", ["version": .string(version), "auth": ["version": .string(version), "path": "auth_export"]])
        let root = StoreKey(projectId: projectId)
        var total = 0
        func accounts(_ key: StoreKey, _ name: String) throws(Failure) {
            do { total += try writeAccounts(app, key, into: authFD, name: name) } catch {
                throw Failure(description: "cannot write \(Files.printable(dir))/auth_export/\(name): \(error)")
            }
        }
        try accounts(root, "accounts.json")
        var written = 0
        for t in app.emulator.tenants(of: projectId) {
            // Tenant ids are validated before a tenant can exist; a file name is still only ever built from a valid one.
            guard Identifiers.isValidTenantID(t) else {
                app.logger.warning("export: skipped a tenant with an invalid id", [("tenant", Identifiers.printable(t, limit: 64))])
                continue
            }
            try accounts(StoreKey(projectId: projectId, tenantId: t), "accounts-\(t).json")
            written += 1
        }
        // config.json: what the official emulator reads (signIn.allowDuplicateEmails, emailPrivacyConfig) plus ours.
        try write(authFD, "config.json", app.emulator.config(root).toJSON())
        return (total, written)
    }

    /// Streams the store's users, sorted by uid, into `name` (`{"kind": …, "users": [...]}`, laid out as
    /// `prettySerialized` would), atomically (`Files.AtomicFileWriter`). The users are rendered `renderChunk` at a time
    /// on every core (`ExportRecordWriter`: straight into bytes, no `JSON` built), a few chunks at once, and written out
    /// in order while the next ones render, so memory holds a few chunks, not the file. The users are those of one
    /// moment: the store's table is taken by reference under its lock (a writer meanwhile copies it, the export does
    /// not), its uids already in order (`UserTable.ids`).
    static func writeAccounts(_ app: PhoneAuthApp, _ key: StoreKey, into dirFD: Int32, name: String) throws(Files.IOError) -> Int {
        let users = app.emulator.existingStore(key)?.read { $0.users } ?? UserTable()
        // In uid order already (the table keeps its uids sorted, as `sorted()` orders them).
        let ids = users.ids(after: nil, limit: users.count)
        let file = try Files.AtomicFileWriter(in: dirFD, name: name)
        try file.write(Array("{\n  \"kind\": \"identitytoolkit#DownloadAccountResponse\",\n  \"users\": [".utf8))
        let direct = ExportRecordWriter.knows(app.emulator.userFields)
        let chunks = (ids.count + renderChunk - 1) / renderChunk
        // Up to 8 cores: at most 16 chunks (~26 MB for the bench's users) rendered and waiting at once.
        let workers = min(8, max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))))
        // The file is written on its own queue, a batch behind the rendering: copying 400 MB into the page cache is a
        // second of CPU at a million users, and it overlaps the next batch's rendering instead of waiting for it.
        let writer = DispatchQueue(label: "phone-auth.export-writer")
        let written = DispatchGroup()
        let failure = Locked<Files.IOError?>(nil)
        let sink = ExportSink(file)
        func waitForWriter() throws(Files.IOError) {
            written.wait()
            if let e = failure.withLock({ $0 }) { throw e }
        }
        var next = 0
        while next < chunks {
            let batch = min(chunks - next, 2 * workers)
            let rendered = RenderedChunks(batch)
            let first = next
            DispatchQueue.concurrentPerform(iterations: batch) { j in
                let lo = (first + j) * renderChunk, hi = min(lo + renderChunk, ids.count)
                var out: [UInt8] = []
                out.reserveCapacity((hi - lo) * 512)
                for n in lo..<hi {
                    // Read in place (no copy of the record and its strings' retains).
                    _ = users.withUser(ids[n]) { u in
                        out.append(contentsOf: n == 0 ? "\n    ".utf8 : ",\n    ".utf8)
                        if direct && ExportRecordWriter.canWrite(u) {
                            ExportRecordWriter.write(u, into: &out)
                        } else {
                            exportRecord(app, u).prettySerialized(into: &out, level: 2)
                        }
                    }
                }
                rendered.set(j, out)
            }
            try waitForWriter()
            writer.async(group: written) {
                for j in 0..<batch {
                    do throws(Files.IOError) { try sink.file.write(rendered.take(j)) } catch {
                        failure.withLock { $0 = error }
                        return
                    }
                }
            }
            next += batch
        }
        try waitForWriter()
        try file.write(Array((ids.isEmpty ? "]\n}\n" : "\n  ]\n}\n").utf8))
        try file.commit()
        return ids.count
    }

    /// The export's file, handed to its writer queue (one writer at a time: `writeAccounts` waits for the queue before
    /// it writes itself).
    final class ExportSink: @unchecked Sendable {
        let file: Files.AtomicFileWriter
        init(_ file: Files.AtomicFileWriter) { self.file = file }
    }

    /// Users rendered per chunk (a worker's unit of an export).
    static let renderChunk = 4096

    /// The rendered chunks of one batch, each set by its worker (`concurrentPerform`), then taken in order.
    final class RenderedChunks: @unchecked Sendable {
        private let slots: Locked<[[UInt8]]>
        init(_ n: Int) { slots = Locked(Array(repeating: [], count: n)) }
        func set(_ j: Int, _ bytes: [UInt8]) { slots.withLock { $0[j] = bytes } }
        func take(_ j: Int) -> [UInt8] {
            slots.withLock { s in
                var out: [UInt8] = []
                swap(&out, &s[j])
                return out
            }
        }
    }

    /// A user as `accounts.json` holds it: the admin wire form, with TOTP factors' secrets (`MFAEnrollment.exportJSON`:
    /// no lookup shows them, an import needs them).
    static func exportRecord(_ app: PhoneAuthApp, _ u: UserRecord) -> JSON {
        let record = app.emulator.userFields.render(u)
        guard u.mfaInfo.contains(where: { $0.totp != nil }), case .object(var o) = record else { return record }
        o["mfaInfo"] = .array(u.mfaInfo.map(\.exportJSON))
        return .object(o)
    }

    /// Opens the directory `path` names inside the export root for writing, creating missing directories: a
    /// relative path is taken from the root, an absolute one must lie inside it (`roots` holds the root as
    /// configured and as resolved). `..` components, control characters and symlinks (every component is opened
    /// with `O_NOFOLLOW`, relative to its parent) are refused, and so are paths deeper than `maxPathComponents` or
    /// that would create more than `maxCreatedDirectories` directories. The error is for the server log only.
    static func openInsideRoot(_ path: String, roots: [String]) throws(Failure) -> Int32 {
        guard !path.isEmpty, !Identifiers.containsControlCharacters(path), let root = roots.first else {
            throw Failure(description: "control characters in the path")
        }
        func components(_ p: String) -> [String] { p.split(separator: "/").map(String.init).filter { $0 != "." } }
        var rel = components(path)
        guard !rel.contains("..") else { throw Failure(description: "'..' in the path") }
        if path.hasPrefix("/") {
            guard let base = roots.map(components).first(where: { rel.starts(with: $0) }) else {
                throw Failure(description: "outside the export root \(root)")
            }
            rel.removeFirst(base.count)
        }
        guard rel.count <= maxPathComponents else {
            throw Failure(description: "more than \(maxPathComponents) directories deep", isDepthLimit: true)
        }
        var fd: Int32
        do { fd = try Files.openDirectory(root) } catch { throw Failure(description: "export root: \(error)") }
        // Existing directories first, so a path that would create too many is refused before any is created.
        var i = 0
        while i < rel.count {
            let next: Int32
            do { next = try Files.openSubdirectory(fd, rel[i], create: false) } catch {
                if error.errnoCode == ENOENT { break }
                close(fd)
                throw Failure(description: "\(error) (a symlink, a file, or not a directory)")
            }
            close(fd)
            fd = next
            i += 1
        }
        guard rel.count - i <= maxCreatedDirectories else {
            close(fd)
            throw Failure(description: "would create \(rel.count - i) directories (at most \(maxCreatedDirectories))", isDepthLimit: true)
        }
        for c in rel[i...] {
            let next: Int32
            do { next = try Files.openSubdirectory(fd, c) } catch {
                close(fd)
                throw Failure(description: "\(error) (a symlink, a file, or not creatable)")
            }
            close(fd)
            fd = next
        }
        return fd
    }

    /// An on-demand export path may name at most this many directories below the root…
    static let maxPathComponents = 32
    /// …and create at most this many of them (then `auth_export` inside): `exports/run-1` works, `d/d/d/…` does not.
    static let maxCreatedDirectories = 2

    /// What an import brought: users, the tenants their files named, and the part of `config.json` it applied.
    public struct Imported: Sendable {
        public var users = 0
        public var tenants: [String] = []
        public var configPatch: JSONObject?
    }

    /// Reads an export into the project: a directory written by firebase-tools (or by us) — `accounts.json`,
    /// `accounts-<tenant>.json`, `config.json` — or one file of production's `firebase auth:export` (`.json`:
    /// `{"users": [...]}`, `.csv`). Users keep their localId, phone, claims, disabled flag and timestamps; existing
    /// users with the same localId are replaced. The accounts files are streamed (`JSONRecordReader`,
    /// `CSVRowReader`): memory holds the users kept, not the file. The first bad record stops the import with its file,
    /// index, byte offset and line; what was imported before it stays in this emulator, so a caller that must not
    /// keep half an import imports into a scratch emulator first (PhoneAuthServer does with `--data-dir`).
    @discardableResult
    /// `checking`: which thread checks the records (tests pin each; the server balances).
    public static func importDirectory(_ app: PhoneAuthApp, projectId: String, from dir: String,
                                       checking: ImportChecking = .balanced) throws(Failure) -> Imported {
        let root = StoreKey(projectId: projectId)
        if isRegularFile(dir) {
            let format: AccountsFormat
            if dir.lowercased().hasSuffix(".csv") { format = .csv } else if dir.lowercased().hasSuffix(".json") { format = .json } else {
                throw Failure(description: "\(Files.printable(dir)): a file to import must be a firebase auth:export file ending in .json or .csv")
            }
            var result = Imported()
            result.users = try importAccounts(app, root, path: dir, format: format, checking: checking)
            return result
        }
        var authPath = "auth_export"
        if Files.exists(dir + "/firebase-export-metadata.json") {
            let meta = try readJSON(dir + "/firebase-export-metadata.json")
            guard let auth = meta["auth"]?.objectValue else {
                throw Failure(description: "\(dir)/firebase-export-metadata.json has no \"auth\" entry: this export holds no Auth data")
            }
            if let p = auth["path"]?.stringValue, !p.isEmpty {
                guard !p.contains(".."), !p.hasPrefix("/") else { throw Failure(description: "\(dir)/firebase-export-metadata.json: invalid auth path \(p)") }
                authPath = p
            }
        } else if !Files.exists(dir + "/auth_export") {
            throw Failure(description: "\(dir) is not an emulator export (no firebase-export-metadata.json and no auth_export/)")
        }
        let authDir = dir + "/" + authPath
        guard isDirectory(authDir) else { throw Failure(description: "\(authDir) does not exist or is not a directory") }

        var result = Imported()
        if Files.exists(authDir + "/config.json") {
            let json = try readJSON(authDir + "/config.json")
            guard case .object(let o) = json else { throw Failure(description: "\(authDir)/config.json must hold a JSON object") }
            // Official exports carry fields we do not model (allowDuplicateEmails, emailPrivacyConfig…): keep only ours.
            var ours = JSONObject()
            if let pn = o["signIn"]?["phoneNumber"] { ours["signIn"] = ["phoneNumber": pn] }
            if let r = o["smsRegionConfig"] { ours["smsRegionConfig"] = r }
            if let p = o["phoneAuth"] { ours["phoneAuth"] = p }
            // The official emulator exports its `blockingFunctions` here too (its /emulator/v1 config).
            if let b = o["blockingFunctions"], b != .null { ours["blockingFunctions"] = b }
            if !ours.isEmpty {
                do { _ = try app.emulator.patchConfig(root, .object(ours)) } catch {
                    throw Failure(description: "\(authDir)/config.json: \(error.description)")
                }
                result.configPatch = ours
            }
        }
        var names: [String] = []
        guard let d = opendir(authDir) else { throw Failure(description: "cannot read \(authDir): \(String(cString: strerror(errno)))") }
        while let e = readdir(d) {
            let name = withUnsafeBytes(of: e.pointee.d_name) { String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self) }
            if name.hasPrefix("accounts"), name.hasSuffix(".json") { names.append(name) }
        }
        closedir(d)
        for name in names.sorted() {
            var tenant = String(name.dropFirst("accounts".count).dropLast(".json".count))
            if tenant.hasPrefix("-") { tenant.removeFirst() }
            guard tenant.isEmpty || Identifiers.isValidTenantID(tenant) else {
                throw Failure(description: "\(authDir)/\(Files.printable(name)): invalid tenant id (letters, digits, '-' and '_')")
            }
            let key = StoreKey(projectId: projectId, tenantId: tenant)
            if !tenant.isEmpty {
                do { try app.emulator.admit(key, create: true, explicit: true) } catch { throw Failure(description: "\(authDir)/\(name): \(error.wire.message)") }
                result.tenants.append(tenant)
            }
            result.users += try importAccounts(app, key, path: authDir + "/" + name, format: .json, checking: checking)
        }
        return result
    }

    public enum AccountsFormat: Sendable { case json, csv }

    /// Records go to the store in batches of this many (each one transaction through batchCreate's checks).
    static let importBatch = 1000

    /// Where a record is in its file (for the messages that name it).
    typealias Place = (index: Int, offset: Int, line: Int)

    /// Streams one accounts file into `key`: each record through batchCreate's checks (`BatchAccounts.prepareUsers`
    /// and `commitUsers`, the user field table), `importBatch` at a time. The first bad record — not JSON, not a
    /// user, a problem with a field, a localId seen before in the file — throws, naming the file, the record's index,
    /// byte offset and line.
    static func importAccounts(_ app: PhoneAuthApp, _ key: StoreKey, path: String, format: AccountsFormat,
                               checking: ImportChecking = .balanced) throws(Failure) -> Int {
        let shown = Files.printable(path)
        let source: FileByteSource
        do { source = try FileByteSource(path: path) } catch { throw Failure(description: "cannot read \(error)") }
        // A localId seen before in the file: into an empty store (the usual start), the store itself knows (a user
        // with that id already there came from this file); into one with users (replaced, as documented), a set.
        let store = app.emulator.existingStore(key)
        let startsEmpty = store?.read { $0.users.isEmpty } ?? false
        if startsEmpty {
            // About how many records the file holds (~280 bytes a record for phone, name and claims; more per record
            // reserves less): the tables grow once instead of doubling their way there.
            var st = stat()
            if stat(path, &st) == 0 { app.emulator.reserveUsers(key, min(Int(st.st_size) / 300, app.emulator.maxUsersPerProject)) }
        }
        var seen = Set<String>()
        var total = 0
        func at(_ p: Place) -> String { "\(shown): record \(p.index) (byte \(p.offset), line \(p.line))" }
        func twice(_ id: String, _ p: Place) -> Failure {
            Failure(description: "\(at(p)): localId \(Identifiers.printable(id, limit: 128)) appears twice in the file")
        }
        // A batch's localIds against the earlier batches' (and, in a store that had users, each other), before the
        // batch's own checks: a repeat is named before the batch's other problems. Into an empty store, only for a
        // batch `prepareUsers` refused whole (a localId twice in it, a bad password hash setting), where the batch's
        // first repeat of an earlier localId is named before that; otherwise `findsRepeats` below.
        func checkRepeats(_ ids: [String?], _ places: [Place]) throws(Failure) {
            if startsEmpty, let store {
                let again = store.read { s in ids.firstIndex { id in id.map { s.users[$0] != nil } ?? false } }
                if let i = again { throw twice(ids[i] ?? "", places[i]) }
            } else {
                for (i, id) in ids.enumerated() { if let id, !seen.insert(id).inserted { throw twice(id, places[i]) } }
            }
        }
        /// Into an empty store, a batch `prepareUsers` took (so no localId twice in it; records with a problem of
        /// their own are in its errors) is written refusing existing users: a record not written while its user exists
        /// repeats an earlier batch's localId, found by the write itself instead of a lookup of every localId before
        /// it (`checkRepeats`, 5% of a 1M import), and the batch's first problem in file order is the one named.
        let findsRepeats = startsEmpty && store != nil
        func commit(_ prepared: BatchAccounts.PreparedUsers, _ places: [Place], findsRepeats: Bool = false) throws(Failure) {
            guard !places.isEmpty else { return }
            let errors: [(index: Int, message: String)]
            do { errors = try BatchAccounts.commitUsers(app, key, prepared, allowOverwrite: !findsRepeats) } catch {
                throw Failure(description: "\(at(places[0])) or after: \(error.wire.message)")
            }
            if let e = errors.first {
                // Not written, yet its user exists: an earlier batch's (no record of this batch has its id).
                if findsRepeats, let store, let id = prepared.ids[e.index], store.read({ $0.users.contains(id) }) {
                    throw twice(id, places[e.index])
                }
                throw Failure(description: "\(at(places[e.index])): \(e.message)")
            }
            total += places.count
        }
        // Reading and parsing on a thread of its own, a batch at a time, while this one writes the previous batches
        // (two cores: the import takes about the longer of the two instead of their sum); at most
        // `importBatchesInFlight` batches wait between them. The reader also checks a batch through the user field
        // table when this thread is behind, and leaves that to it when it waits: the two halves of the work balance
        // themselves whatever the records hold.
        let pipe = BatchPipe<ParsedPiece>(capacity: importBatchesInFlight)
        let used = UsedPieces()
        let handoff = Handoff(source)
        let reader = NativeThread.start {
            parseRecords(handoff.value, app: app, key: key, format: format, checking: checking, shown: shown, into: pipe, used: used)
        }
        do throws(Failure) {
            loop: while true {
                let piece = pipe.receive()
                defer { used.give(consume piece) }
                switch piece {
                case .records(let users, let places):
                    let ids = { users.map { $0.objectValue.flatMap { BatchAccounts.stringField($0["localId"]) } } }
                    guard findsRepeats else {
                        try checkRepeats(ids(), places)
                        try commit(try prepare(app, key, users, places, at: at, twice: twice), places)
                        continue
                    }
                    let prepared: BatchAccounts.PreparedUsers
                    do { prepared = try prepare(app, key, users, places, at: at, twice: twice) } catch {
                        try checkRepeats(ids(), places)  // a repeat of an earlier batch's localId is named first
                        throw error
                    }
                    try commit(prepared, places, findsRepeats: true)
                case .prepared(let prepared, let places):
                    if !findsRepeats { try checkRepeats(prepared.ids, places) }
                    try commit(prepared, places, findsRepeats: findsRepeats)
                case .failed(let message): throw Failure(description: message)
                case .end: break loop
                }
            }
        } catch {
            pipe.cancel()
            reader.join()
            throw error
        }
        reader.join()
        return total
    }

    /// A batch through `BatchAccounts.prepareUsers`; a localId twice in it names its second record.
    private static func prepare(_ app: PhoneAuthApp, _ key: StoreKey, _ users: [JSON], _ places: [Place],
                                at: (Place) -> String, twice: (String, Place) -> Failure) throws(Failure) -> BatchAccounts.PreparedUsers {
        do { return try BatchAccounts.prepareUsers(app, key, users) } catch {
            if error.code == .duplicateLocalId, let id = error.detail {
                let same = users.indices.filter { BatchAccounts.stringField(users[$0]["localId"]) == id }
                if same.count > 1 { throw twice(id, places[same[1]]) }
            }
            throw Failure(description: "\(at(places[0])) or after: \(error.wire.message)")
        }
    }

    /// Batches handed from the reading thread to the writing one.
    static let importBatchesInFlight = 4

    /// Which thread of an import checks a batch's records through the user field table.
    public enum ImportChecking: Sendable {
        /// The reader while the writer has a batch waiting, else the writer.
        case balanced
        case reader, writer
    }

    /// Batches the writer is done with, handed back for the reader to free: what the reader allocated is freed on its
    /// own thread (glibc's malloc locks an arena for a free from another thread, and two threads taking turns at one
    /// arena's lock cost the 1M import a tenth of its time, perf). At most the batches in flight wait here.
    final class UsedPieces: Sendable {
        private let pieces = Locked<[ParsedPiece]>([])
        func give(_ piece: consuming ParsedPiece) { pieces.withLock { [piece] in $0.append(piece) } }
        /// Takes what waits (the caller drops it).
        func take() -> [ParsedPiece] { pieces.withLock { p in defer { p.removeAll() }; return p } }
    }

    enum ParsedPiece: Sendable {
        /// Records as read, for the writer to check.
        case records([JSON], [Place])
        /// Records the reader checked (`BatchAccounts.prepareUsers`) while the writer was busy.
        case prepared(BatchAccounts.PreparedUsers, [Place])
        /// The file's first problem (the message names the file, record, byte and line).
        case failed(String)
        case end
    }

    /// The reading thread: each record of the file parsed (JSON) or mapped (CSV) into a batchCreate user, sent
    /// `importBatch` at a time — checked here first when the writer has a batch waiting already; stops at the end,
    /// at the first problem, or when the writer gives up.
    private static func parseRecords(_ source: FileByteSource, app: PhoneAuthApp, key: StoreKey, format: AccountsFormat,
                                     checking: ImportChecking, shown: String, into pipe: BatchPipe<ParsedPiece>, used: UsedPieces) {
        var users: [JSON] = [], places: [Place] = []
        let table = app.emulator.userFields.ownCopy()
        users.reserveCapacity(importBatch)
        places.reserveCapacity(importBatch)
        func send() -> Bool {
            defer { users.removeAll(keepingCapacity: true); places.removeAll(keepingCapacity: true) }
            _ = used.take()
            // A batch that fails the checks goes as read: the writer checks it again and names the problem.
            let here = switch checking {
            case .balanced: pipe.waiting > 0
            case .reader: true
            case .writer: false
            }
            if here, let prepared = try? BatchAccounts.prepareUsers(app, key, users, table: table) {
                // The records' own references go before the writer takes their strings (not while it does: the two
                // cores would write the same reference counts).
                users.removeAll(keepingCapacity: true)
                return pipe.send(.prepared(prepared, places))
            }
            return pipe.send(.records(users, places))
        }
        func put(_ u: JSON, _ p: Place) -> Bool {
            users.append(u)
            places.append(p)
            return users.count < importBatch || send()
        }
        func finish(_ last: ParsedPiece) {
            if !users.isEmpty, !send() { return }
            _ = pipe.send(last)
        }
        switch format {
        case .json:
            let reader = JSONRecordReader(source)
            while true {
                let record: JSONRecordReader.Record?
                do { record = try reader.next() } catch { return finish(.failed("\(shown): \(error)")) }
                guard let r = record else { return finish(.end) }
                guard put(productionRecord(r.value), (r.index, r.offset, r.line)) else { return }
            }
        case .csv:
            let reader = CSVRowReader(source)
            while true {
                let row: CSVRowReader.Row?
                do { row = try reader.next() } catch { return finish(.failed("\(shown): \(error)")) }
                guard let r = row else { return finish(.end) }
                guard r.fields.count >= 28 else {
                    return finish(.failed("\(shown): record \(r.index) (byte \(r.offset), line \(r.line)): \(r.fields.count) columns, expected firebase auth:export's 28"))
                }
                guard put(csvUser(r.fields), (r.index, r.offset, r.line)) else { return }
            }
        }
    }

    /// Production's `firebase auth:export` JSON names the last sign-in `lastSignedInAt`; ours and batchCreate's say
    /// `lastLoginAt`.
    static func productionRecord(_ v: JSON) -> JSON {
        guard case .object(var o) = v, o["lastLoginAt"] == nil, let t = o["lastSignedInAt"] else { return v }
        o["lastLoginAt"] = t
        o["lastSignedInAt"] = nil
        return .object(o)
    }

    /// `firebase auth:export --format=csv`'s columns (firebase-tools' accountExporter): uid, email, emailVerified,
    /// passwordHash, salt, displayName, photoUrl, then rawId/email/displayName/photoUrl of google.com, facebook.com,
    /// twitter.com and github.com, then createdAt, lastSignedInAt, phoneNumber, disabled, customAttributes.
    static let csvProviders = ["google.com", "facebook.com", "twitter.com", "github.com"]

    static func csvUser(_ f: [String]) -> JSON {
        func at(_ i: Int) -> JSON? { i < f.count && !f[i].isEmpty ? .string(f[i]) : nil }
        var o = JSONObject()
        o["localId"] = at(0)
        o["email"] = at(1)
        if f[2] == "true" { o["emailVerified"] = .bool(true) }
        o["passwordHash"] = at(3)
        o["salt"] = at(4)
        o["displayName"] = at(5)
        o["photoUrl"] = at(6)
        var providers: [JSON] = []
        for (n, id) in csvProviders.enumerated() {
            let i = 7 + 4 * n
            guard let raw = at(i) else { continue }
            var p: JSONObject = ["providerId": .string(id), "rawId": raw]
            p["email"] = at(i + 1)
            p["displayName"] = at(i + 2)
            p["photoUrl"] = at(i + 3)
            providers.append(.object(p))
        }
        if !providers.isEmpty { o["providerUserInfo"] = .array(providers) }
        o["createdAt"] = at(23)
        o["lastLoginAt"] = at(24)
        o["phoneNumber"] = at(25)
        if f[26] == "true" { o["disabled"] = .bool(true) }
        o["customAttributes"] = at(27)
        return .object(o)
    }

    // MARK: files

    static func readJSON(_ path: String) throws(Failure) -> JSON {
        let bytes: [UInt8]
        do { bytes = try Files.read(path) } catch { throw Failure(description: "cannot read \(path): \(error)") }
        do { return try JSONParser.parse(bytes, maxDepth: 64) } catch { throw Failure(description: "\(path) is not valid JSON: \(error)") }
    }

    static func isRegularFile(_ path: String) -> Bool {
        var st = stat()
        return !Files.hasNUL(path) && stat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFREG
    }

    static func isDirectory(_ path: String) -> Bool {
        var st = stat()
        return stat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR
    }

    static func makeDirectories(_ path: String) throws(Failure) {
        var current = path.hasPrefix("/") ? "" : "."
        for part in path.split(separator: "/") {
            current += "/" + part
            if isDirectory(current) { continue }
            if mkdir(current, 0o755) != 0 && errno != EEXIST {
                throw Failure(description: "cannot create \(current): \(String(cString: strerror(errno)))")
            }
        }
    }
}

/// `POST /emulator/v1/projects/{p}:export {"path": "…"}`: an on-demand export in the firebase-tools layout, written
/// only inside the export root (`--export-root`, default the server's working directory). Errors name no path:
/// the details go to the server log (escaped).
enum ExportEndpoint {
    static let outsideRoot = AuthError(.invalidArgument, "path must be a directory inside the export root")
    static let tooDeep = AuthError(.invalidArgument,
                                   "path may be at most \(ExportImport.maxPathComponents) directories deep and create at most \(ExportImport.maxCreatedDirectories) of them")

    static func handle(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        guard let path = try call.string("path"), !path.isEmpty else { throw AuthError.invalidArgument("path is required.") }
        let fd: Int32
        do { fd = try ExportImport.openInsideRoot(path, roots: app.exportRoots) } catch {
            // The logger escapes (per format) and cuts metadata values to 200; the detail can quote a path component.
            app.logger.warning("export refused: \(LogEscaping.truncate(error.description, to: 300))", [("path", path)])
            throw error.isDepthLimit ? tooDeep : outsideRoot
        }
        defer { close(fd) }
        do {
            let (users, tenants) = try ExportImport.export(app, projectId: call.projectId, into: fd, shownAs: path)
            return Reply(["path": .string(path), "users": .int(users), "tenants": .int(tenants)])
        } catch {
            app.logger.error("export failed: \(error.description)")
            throw AuthError.internalError("The export could not be written; the emulator's log says why.")
        }
    }
}
