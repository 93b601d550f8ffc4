import EmulatorSupport
import JWT
import PhoneAuthCore

/// `GET /emulator/v1/projects/{p}[/tenants/{t}]/totpCode`: what no authenticator app gives a test suite, the code a TOTP
/// factor accepts now (on the emulator clock). `?localId=UID[&mfaEnrollmentId=ID]` (the user's first TOTP factor when
/// no id is given) or `?sessionInfo=S` (a pending enrollment, between `mfaEnrollment:start` and `:finalize`) →
/// `{code, timeStep, periodSec, validFrom, validUntil, used, localId, mfaEnrollmentId?}`. `used`: the step already
/// verified once for this factor, so the code is refused until `validUntil` (advance the clock). The secret is never
/// answered.
enum TOTPCodeEndpoint {
    static func handle(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        let key = EmulatorAPI.key(call)
        func bounded(_ name: String) throws(AuthError) -> String? {
            guard let v = call.queryValue(name), !v.isEmpty else { return nil }
            guard v.utf8.count <= 512, !Identifiers.containsControlCharacters(v) else { throw AuthError.invalidArgument("\(name) is not valid.") }
            return v
        }
        let localId: String, enrollmentId: String?, now: Emulator.CurrentTOTPCode
        if let session = try bounded("sessionInfo") {
            (localId, now) = try app.emulator.currentTOTPCode(key, sessionInfo: session, hmac: hmacSHA1)
            enrollmentId = nil
        } else if let uid = try bounded("localId") {
            let found = try app.emulator.currentTOTPCode(key, localId: uid, mfaEnrollmentId: try bounded("mfaEnrollmentId"), hmac: hmacSHA1)
            (localId, enrollmentId, now) = (uid, found.0, found.1)
        } else {
            throw AuthError.invalidArgument("Give localId (and mfaEnrollmentId) or sessionInfo.")
        }
        var o: JSONObject = ["code": .string(now.code), "timeStep": .int(now.step), "periodSec": .int(TOTP.periodSeconds),
                             "validFrom": .string(Timestamp.rfc3339(millis: now.validFrom)),
                             "validUntil": .string(Timestamp.rfc3339(millis: now.validUntil)), "used": .bool(now.used),
                             "localId": .string(localId)]
        o.set("mfaEnrollmentId", enrollmentId.map(JSON.string))
        return Reply(.object(o))
    }
}
