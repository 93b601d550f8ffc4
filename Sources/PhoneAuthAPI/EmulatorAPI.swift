import EmulatorSupport
import PhoneAuthCore

/// `/emulator/v1/projects/{p}[/tenants/{t}]/…`: the emulator-only API (no credentials, like the official one).
enum EmulatorAPI {
    static func key(_ call: Call) -> StoreKey { StoreKey(projectId: call.projectId, tenantId: call.pathTenant) }

    static func getConfig(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        Reply(app.emulator.config(key(call)).toJSON())
    }

    /// Merges the fields given (objects merge; `testPhoneNumbers` and `scenarioNumbers` are replaced whole).
    static func patchConfig(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        do {
            return Reply(try app.emulator.patchConfig(key(call), .object(call.body)).toJSON())
        } catch {
            throw AuthError.invalidArgument("Invalid config: \(error.description)")
        }
    }

    /// Codes per page of `GET …/verificationCodes` unless `pageSize` says otherwise, and the most it may say.
    static let defaultPageSize = 1000
    static let maxPageSize = 10_000

    /// Pending codes in creation order, official shape plus our fields; `?phoneNumber=` filters (any spelling of the
    /// number). Paged: at most `pageSize` (default 1000, at most 10,000) codes; when more follow, the reply has
    /// `nextPageToken`, to pass back as `pageToken`. A small inbox gets exactly the official reply.
    static func listCodes(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        var phone: String? = nil
        if let raw = call.queryValue("phoneNumber") { phone = try PhoneNumber(parsing: raw).e164 }
        var limit = defaultPageSize
        if let v = call.queryValue("pageSize") {
            guard let n = Int(v), n >= 1, n <= maxPageSize else {
                throw AuthError.invalidArgument("pageSize must be between 1 and \(maxPageSize).")
            }
            limit = n
        }
        var after: UInt64? = nil
        if let t = call.queryValue("pageToken"), !t.isEmpty {
            guard t.utf8.count <= 20, t.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let v = UInt64(t) else {
                throw AuthError.invalidArgument("Invalid pageToken.")
            }
            after = v
        }
        let page = app.emulator.verificationCodes(key(call), phone: phone, after: after, limit: limit)
        var o: JSONObject = ["verificationCodes": .array(page.sessions.map(render))]
        if let next = page.nextAfter { o["nextPageToken"] = .string(String(next)) }
        return Reply(.object(o))
    }

    static func render(_ s: VerificationSession) -> JSON {
        var o: JSONObject = ["phoneNumber": .string(s.phoneNumber), "sessionInfo": .string(s.sessionInfo), "code": .string(s.code)]
        o["createdAt"] = .string(Timestamp.rfc3339(millis: s.createdAt))
        o["expiresAt"] = s.expiresAt.map { .string(Timestamp.rfc3339(millis: $0)) } ?? .null
        o["attemptsLeft"] = s.attemptsLeft.map { .int($0) } ?? .null
        o["fictional"] = .bool(s.fictional)
        o["kind"] = .string(s.kind.inboxName)
        o["message"] = .string(s.message)
        if let l = s.delivery?.language { o["language"] = .string(l) }
        if let at = s.delivery?.deliverAt { o["deliveredAt"] = .string(Timestamp.rfc3339(millis: at)) }
        return .object(o)
    }

    /// Long-poll: the newest pending code for `phoneNumber`, or the first one created within `timeoutSeconds`
    /// (default 30, at most 300); 404 `NOT_FOUND` after the timeout. Holds no thread while waiting; at most
    /// `Emulator.maxWaitersPerStore` per project (then 429 `RESOURCE_EXHAUSTED`); cancelled when the client leaves.
    static func waitForCode(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        guard let raw = call.queryValue("phoneNumber") else { throw AuthError.invalidArgument("phoneNumber is required.") }
        let phone = try PhoneNumber(parsing: raw).e164
        var timeout = 30.0
        if let t = call.queryValue("timeoutSeconds") {
            guard let v = Double(t), v >= 0, v <= 300 else { throw AuthError.invalidArgument("timeoutSeconds must be between 0 and 300.") }
            timeout = v
        }
        app.emulator.deliverDueSMS()
        let complete = call.complete
        let seconds = timeout
        let waiter = try app.emulator.waitForCode(key(call), phone: phone, timeoutSeconds: seconds) { session in
            if let session {
                complete(Reply(render(session)))
            } else {
                let e = AuthError.notFound("No verification code for \(phone) arrived within \(seconds) seconds.")
                complete(Reply(error: e))
            }
        }
        // A client that goes away stops waiting at once (no waiter or timer outlives its connection).
        if let waiter { call.onClose { waiter.cancel() } }
        return .deferred
    }

    static func clearCodes(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        var phone: String? = nil
        if let raw = call.queryValue("phoneNumber") { phone = try PhoneNumber(parsing: raw).e164 }
        let n = try app.emulator.clearVerificationCodes(key(call), phone: phone)
        return Reply(["deleted": .int(n)])
    }

    static func wipeAccounts(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        try app.emulator.wipeAccounts(key(call))
        return Reply(.object([:]))
    }
}
