import EmulatorSupport
import PhoneAuthCore

/// `GET /emulator/v1/projects/{p}[/tenants/{t}]/users?q=&pageSize=&pageToken=`: the console's user search. A user
/// matches when `q` (ASCII case insensitive) starts its uid, its email or the email's domain, its phone number (typed
/// as people write one: spaces, dots, hyphens and parentheses ignored, with or without `+` and the country code) or a
/// word of its display name. The matches come in the order of the store's search index (UserSearchIndex.swift: by the
/// matching text, then uid), a page at a time: O(log n + page) however many users the store holds or match. The
/// index is built by the first search of a store (0.6–1.2 s at a million users, under the store's lock; from 20,000
/// users on the signing pool, not an event loop) and kept by every write after. An empty `q` (the console's first page) is a
/// page of the ordered uids. The reply says how long the search took (`Server-Timing: search;dur=<ms>`), how many
/// users matched (`matched`; past 1,000 matching words the number of matching words, an upper bound, with
/// `matchedEstimated: true`) and how many the project has.
enum UserSearch {
    static let defaultPageSize = 50
    static let maxPageSize = 1000
    static let maxQueryBytes = 256
    /// From this many users a search that must build the index first does it off the event loop.
    static let offLoopBuild = 20_000

    static func handle(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        let started = ContinuousClock.now
        var size = defaultPageSize
        if let v = call.queryValue("pageSize") {
            guard let n = Int(v), (1...maxPageSize).contains(n) else {
                throw AuthError.invalidArgument("pageSize must be between 1 and \(maxPageSize).")
            }
            size = n
        }
        let q = (call.queryValue("q") ?? "").trimmingSpaces()
        guard q.utf8.count <= maxQueryBytes else { throw AuthError.invalidArgument("q is longer than \(maxQueryBytes) bytes.") }
        let after = call.queryValue("pageToken").flatMap { $0.isEmpty ? nil : $0 }
        let key = StoreKey(projectId: call.projectId, tenantId: try call.queryTenant())
        var total = 0, matched = 0, estimated = false
        var found: [UserRecord] = [], next: String?
        if q.isEmpty {
            if let box = app.emulator.existingStore(key) {
                // Everyone matches: the page is the ordered uids' next `size + 1` (O(page), not a pass over all).
                found = box.read { s -> [UserRecord] in
                    total = s.users.count
                    return s.users.ids(after: after, limit: size + 1).compactMap { s.users[$0] }
                }
                matched = total
                if found.count > size { next = found[size - 1].localId }
            }
        } else {
            var cursor: SearchKey?
            if let after {
                guard let c = SearchKey(token: after) else { throw AuthError.invalidArgument("pageToken is not one this search returned.") }
                cursor = c
            }
            if let box = app.emulator.existingStore(key) {
                let unbuilt = box.read { s in (!s.users.hasSearchIndex && !s.users.isEmpty, s.users.count) }
                if unbuilt.0 {
                    if unbuilt.1 >= offLoopBuild { try call.beforeCostlyWork() }
                    // Under the store's lock: the store's other requests wait for it (0.6 s at a million users, once),
                    // and a second first search finds it built. (Built from a copy outside the lock, every write of
                    // the build's second made the copy stale and copied the chunk it touched: under a sign-in load
                    // most of the records, for nothing.)
                    try box.withLock { (s: inout AuthStore) throws(AuthError) in s.buildSearchIndex() }
                }
                let prefixes = UserTable.queryPrefixes(q)
                let page = box.read { s in
                    total = s.users.count
                    return s.users.search(prefixes: prefixes, after: cursor, limit: size)
                }
                found = page.matches.map(\.user)
                matched = page.matched
                estimated = page.estimated
                if page.more, let last = page.matches.last { next = last.key.token }
            }
        }
        var o = JSONObject()
        o["users"] = .array(found.prefix(size).map { app.emulator.userFields.render($0, forClient: true) })
        if let next { o["nextPageToken"] = .string(next) }
        o["matched"] = .int(matched)
        if estimated { o["matchedEstimated"] = .bool(true) }
        o["total"] = .int(total)
        let elapsed = started.duration(to: .now)
        let ms = Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15
        let timing = (ms * 1000).rounded() / 1000
        return Reply(.object(o), headers: [("Server-Timing", "search;dur=\(timing)")])
    }
}
