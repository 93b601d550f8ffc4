import EmulatorSupport
import PhoneAuthCore

/// `GET /emulator/v1/projects/{p}[/tenants/{t}]/users?q=&pageSize=&pageToken=`: the console's user search. One
/// pass over the project's users under its read lock, no copy and no full sort: a user matches when `q` (case
/// insensitive) is part of its uid, email, phone number (spaces, dots, hyphens and parentheses in `q` ignored) or
/// display name; the page is the `pageSize` smallest matching uids after `pageToken`, kept in a bounded heap, so a
/// search costs O(users · log pageSize) however many match (a substring has no index: at 1M users ~130 ms of CPU). An
/// empty `q` (the console's first page) is a page of the ordered uids: O(page). The reply says how long the search took
/// (`Server-Timing: search;dur=<ms>`), how many users matched and how many the project has.
enum UserSearch {
    static let defaultPageSize = 50
    static let maxPageSize = 1000
    static let maxQueryBytes = 256

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
        let matcher = Matcher(q)
        var total = 0, matched = 0
        var heap = BoundedMaxHeap(capacity: size + 1)
        var found: [UserRecord] = []
        if let box = app.emulator.existingStore(key) {
            found = box.read { s -> [UserRecord] in
                total = s.users.count
                if matcher.needle.isEmpty {
                    // Everyone matches: the page is the ordered uids' next `size + 1` (O(page), not a pass over all).
                    matched = total
                    return s.users.ids(after: after, limit: size + 1).compactMap { s.users[$0] }
                }
                for (id, u) in s.users where matcher.matches(u) {
                    matched += 1
                    if let a = after, id <= a { continue }
                    heap.offer(id)
                }
                return heap.sorted().compactMap { s.users[$0] }
            }
        }
        var o = JSONObject()
        o["users"] = .array(found.prefix(size).map { app.emulator.userFields.render($0, forClient: true) })
        if found.count > size, let last = found.prefix(size).last { o["nextPageToken"] = .string(last.localId) }
        o["matched"] = .int(matched)
        o["total"] = .int(total)
        let elapsed = started.duration(to: .now)
        let ms = Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15
        let timing = (ms * 1000).rounded() / 1000
        return Reply(.object(o), headers: [("Server-Timing", "search;dur=\(timing)")])
    }

    /// The test a user passes: ASCII case-insensitive substring search on bytes (no `String` comparisons per user).
    struct Matcher {
        let needle: [UInt8]
        /// `q` as phone digits (`+1 (650) 555` → `+1650555`), when it reads as part of a phone number.
        let phone: [UInt8]?

        init(_ q: String) {
            needle = Array(q.utf8).map(Self.lower)
            let stripped = q.utf8.filter { !" -.()".utf8.contains($0) }
            phone = !stripped.isEmpty && stripped.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || $0 == UInt8(ascii: "+") }) ? Array(stripped) : nil
        }

        func matches(_ u: UserRecord) -> Bool {
            if needle.isEmpty { return true }
            if Self.contains(u.localId, needle) { return true }
            if let e = u.email, Self.contains(e, needle) { return true }
            if let p = u.phoneNumber, Self.contains(p, phone ?? needle) { return true }
            if let d = u.displayName, Self.contains(d, needle) { return true }
            return false
        }

        @inline(__always) static func lower(_ b: UInt8) -> UInt8 { b >= 0x41 && b <= 0x5A ? b | 0x20 : b }

        static func contains(_ haystack: String, _ needle: [UInt8]) -> Bool {
            var h = haystack
            return h.withUTF8 { hb -> Bool in
                let n = needle.count
                guard n <= hb.count else { return false }
                if n == 0 { return true }
                let first = needle[0]
                var i = 0
                while i + n <= hb.count {
                    if lower(hb[i]) == first {
                        var j = 1
                        while j < n && lower(hb[i + j]) == needle[j] { j += 1 }
                        if j == n { return true }
                    }
                    i += 1
                }
                return false
            }
        }
    }

    /// The `capacity` smallest strings offered, in O(log capacity) per offer.
    struct BoundedMaxHeap {
        let capacity: Int
        var items: [String] = []

        init(capacity: Int) {
            self.capacity = capacity
            items.reserveCapacity(min(capacity, 1024))
        }

        mutating func offer(_ s: String) {
            if items.count < capacity {
                items.append(s)
                var i = items.count - 1
                while i > 0 {
                    let p = (i - 1) / 2
                    guard items[p] < items[i] else { break }
                    items.swapAt(p, i)
                    i = p
                }
            } else if let top = items.first, s < top {
                items[0] = s
                var i = 0
                while true {
                    let l = 2 * i + 1, r = l + 1
                    var m = i
                    if l < items.count && items[l] > items[m] { m = l }
                    if r < items.count && items[r] > items[m] { m = r }
                    if m == i { break }
                    items.swapAt(i, m)
                    i = m
                }
            }
        }

        func sorted() -> [String] { items.sorted() }
    }
}
