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

    /// Pending codes, official shape plus our fields; `?phoneNumber=` filters (any spelling of the number).
    static func listCodes(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        let phone = try call.queryValue("phoneNumber").map { raw throws(AuthError) in try PhoneNumber(parsing: raw).e164 }
        let sessions = app.emulator.verificationCodes(key(call), phone: phone)
        return Reply(["verificationCodes": .array(sessions.map(render))])
    }

    static func render(_ s: VerificationSession) -> JSON {
        var o: JSONObject = ["phoneNumber": .string(s.phoneNumber), "sessionInfo": .string(s.sessionInfo), "code": .string(s.code)]
        o["createdAt"] = .string(Timestamp.rfc3339(millis: s.createdAt))
        o["expiresAt"] = s.expiresAt.map { .string(Timestamp.rfc3339(millis: $0)) } ?? .null
        o["attemptsLeft"] = s.attemptsLeft.map { .int($0) } ?? .null
        o["fictional"] = .bool(s.fictional)
        o["kind"] = .string(s.kind.rawValue)
        o["message"] = .string(s.message)
        return .object(o)
    }

    static func clearCodes(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        let phone = try call.queryValue("phoneNumber").map { raw throws(AuthError) in try PhoneNumber(parsing: raw).e164 }
        let n = app.emulator.clearVerificationCodes(key(call), phone: phone)
        return Reply(["deleted": .int(n)])
    }

    static func wipeAccounts(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        app.emulator.wipeAccounts(key(call))
        return Reply(.object([:]))
    }
}
