import EmulatorSupport
import PhoneAuthCore

/// `accounts:lookup` (legacy `getAccountInfo`): with an `idToken` the caller's own record; as admin by
/// `localId[]`, `phoneNumber[]` or `email[]`. No match → 200 without `users` (what production sends).
enum Lookup {
    static func handle(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        var o: JSONObject = ["kind": "identitytoolkit#GetAccountInfoResponse"]
        let idToken = try call.string("idToken")
        if let idToken, !idToken.isEmpty {
            let (_, user) = try app.verifiedUser(idToken, call: call, tenant: try call.readTenant())
            o["users"] = [app.emulator.userFields.render(user, forClient: true)]
            return Reply(.object(o))
        }
        guard call.privileged else { throw AuthError(.missingIdToken) }
        let key = try call.readStoreKey()
        let localIds = try call.strings("localId")
        let phones = try call.strings("phoneNumber")
        let emails = Set(try call.strings("email").map { $0.lowercased() })
        // `federatedUserId: [{providerId, rawId}]` (firebase-admin's get_user_by_provider_uid); incomplete entries skipped.
        let federated: [(String, String)] = (call.body["federatedUserId"]?.arrayValue ?? []).compactMap { v in
            guard let p = v["providerId"]?.stringValue, let r = v["rawId"]?.stringValue, !p.isEmpty, !r.isEmpty else { return nil }
            return (p, r)
        }
        let users = app.emulator.existingStore(key)?.read { s -> [UserRecord] in
            var seen = Set<String>()
            var out: [UserRecord] = []
            func add(_ u: UserRecord?) { if let u, seen.insert(u.localId).inserted { out.append(u) } }
            for id in localIds { add(s.users[id]) }
            for p in phones { add((try? PhoneNumber(parsing: p)).flatMap { s.user(phone: $0.e164) }) }
            for e in emails.sorted() { add(s.user(email: e)) }  // the email index: O(emails)
            for (p, r) in federated { add(s.user(providerId: p, rawId: r)) }  // the federated index
            return out
        } ?? []
        if !users.isEmpty { o["users"] = .array(users.map { app.emulator.userFields.render($0) }) }
        return Reply(.object(o))
    }
}
