import EmulatorSupport
import JWT
import PhoneAuthCore

/// `POST /v1/projects/{p}[/tenants/{t}]:createSessionCookie` (admin): a session cookie from a valid ID token.
///
/// The cookie is the ID token's claims with production's issuer (`https://session.firebase.google.com/{p}`),
/// `aud` the project, `iat` now and `exp = iat + validDuration` on the emulator clock. It is signed like ID tokens
/// (our current key, `kid` in the header); the same certificates are published at production's session-cookie key
/// URL (`/www.googleapis.com/identitytoolkit/v3/relyingparty/publicKeys`), so firebase-admin in emulator mode and a
/// production-mode verifier pointed at that URL both accept it. `--token-signing none`: unsigned, as the official
/// emulator's.
enum SessionCookies {
    /// Production's bounds: five minutes to fourteen days (`INVALID_DURATION` outside).
    static let minValidSeconds: Int64 = 5 * 60
    static let maxValidSeconds: Int64 = 14 * 24 * 3600

    static func issuer(_ projectId: String) -> String { "https://session.firebase.google.com/\(projectId)" }

    /// `validDuration` (int64: a number or its decimal string). Absent or 0 is the maximum, as the official emulator.
    static func validDuration(_ call: Call) throws(AuthError) -> Int64 {
        let seconds: Int64
        switch call.body["validDuration"] {
        case nil, .null?:
            return maxValidSeconds
        case .number(let d)?:
            guard let n = JSON.number(d).int64Value else { throw invalidDuration(JSON.number(d).serializedString) }
            seconds = n
        case .string(let s)?:
            guard s.utf8.count <= 20, let n = Int64(s) else { throw invalidDuration(s) }
            seconds = n
        case let other?:
            throw invalidDuration(other.serializedString)
        }
        if seconds == 0 { return maxValidSeconds }
        guard (minValidSeconds...maxValidSeconds).contains(seconds) else { throw AuthError(.invalidDuration) }
        return seconds
    }

    static func invalidDuration(_ text: String) -> AuthError {
        AuthError.invalidJSON("Invalid value at 'valid_duration' (TYPE_INT64), \(Identifiers.printable(text, limit: 100))")
    }

    static func create(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        do {
            return try mint(app, call)
        } catch let error as AuthError {
            app.logger.info("session cookie refused", [("project", call.projectId), ("error", Identifiers.printable(error.description, limit: 200))])
            throw error
        }
    }

    static func mint(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        let tenant = try call.readTenant()
        guard let idToken = try call.string("idToken"), !idToken.isEmpty else { throw AuthError(.missingIdToken) }
        let duration = try validDuration(call)
        // The ID token: signature, project, expiry on the emulator clock, then the account (exists, enabled, not revoked).
        let (identity, user) = try app.verifiedUser(idToken, call: call, tenant: tenant)
        guard identity.tenantId == tenant else { throw AuthError(.tenantIdMismatch) }
        guard let jwt = DecodedJWT(idToken) else { throw AuthError(.invalidIdToken) }
        let now = app.emulator.clock.nowSeconds()
        var claims = jwt.payload
        claims["iss"] = .string(issuer(call.projectId))
        claims["aud"] = .string(call.projectId)
        claims["iat"] = .int(now)
        claims["exp"] = .int(now + duration)
        let cookie = try app.tokens.sign(claims)
        let key = StoreKey(projectId: call.projectId, tenantId: tenant)
        app.emulator.events.emit(key, .sessionCookieCreated(uid: user.localId, expiresIn: duration))
        app.logger.info("session cookie created", [("project", key.description),
                                                   ("uid", Identifiers.printable(user.localId, limit: 64)), ("validSeconds", String(duration))])
        return Reply(["sessionCookie": .string(cookie)])
    }
}
