import EmulatorSupport
import PhoneAuthCore

extension PhoneAuthApp {
    /// Signs a fresh ID token for `user` (its refresh token comes from the transaction that saved the user).
    func idToken(for user: UserRecord, key: StoreKey, signInProvider: String, authTime: Int64, secondFactorId: String? = nil) throws -> String {
        try idToken(for: user, key: key, signInProvider: signInProvider, authTime: authTime, secondFactorId: secondFactorId, sessionClaims: nil)
    }

    /// Verifies a request's `idToken` against this call's project and tenant, then runs the account checks.
    func verifiedUser(_ token: String?, call: Call, tenant: String?) throws(AuthError) -> (TokenIdentity, UserRecord) {
        let identity = try tokens.verify(token, projectId: call.projectId, nowSeconds: emulator.clock.nowSeconds())
        if let tenant, identity.tenantId != tenant { throw AuthError(.tenantIdMismatch) }
        let user = try emulator.user(for: identity)
        return (identity, user)
    }
}

/// The user record as `accounts:lookup`, `batchGet` and exports render it (strings for times, `rawId` on providers).
enum UserJSON {
    static func render(_ u: UserRecord) -> JSON { render(u, forClient: false) }

    /// `forClient`: a user's own lookup (`idToken`), where production shows a placeholder instead of the password hash
    /// and no salt; admin lookups, listings and exports carry `passwordHash` and `salt` (what an import needs).
    static func render(_ u: UserRecord, forClient: Bool) -> JSON {
        var o = JSONObject()
        o["localId"] = .string(u.localId)
        o.set("email", u.email.map(JSON.string))
        if u.email != nil { o["emailVerified"] = .bool(u.emailVerified) }
        o.set("displayName", u.displayName.map(JSON.string))
        o.set("photoUrl", u.photoUrl.map(JSON.string))
        o.set("phoneNumber", u.phoneNumber.map(JSON.string))
        if u.disabled { o["disabled"] = true }
        var providers: [JSON] = []
        if let p = u.phoneNumber {
            providers.append(["providerId": "phone", "rawId": .string(p), "phoneNumber": .string(p)])
        }
        // The `password` provider exists only while the account has a password (production, the official emulator):
        // an admin-created or imported user with an email and no password hash has none.
        if let e = u.email, u.passwordHash != nil {
            var pe: JSONObject = ["providerId": "password", "rawId": .string(e), "email": .string(e), "federatedId": .string(e)]
            pe.set("displayName", u.displayName.map(JSON.string))
            pe.set("photoUrl", u.photoUrl.map(JSON.string))
            providers.append(.object(pe))
        }
        o["providerUserInfo"] = .array(providers)
        if let c = u.customAttributes, !c.isEmpty, c != "{}" { o["customAttributes"] = .string(c) }
        o.set("validSince", u.validSince.map { .string(String($0)) })
        o.set("lastLoginAt", u.lastLoginAt.map { .string(String($0)) })
        o["createdAt"] = .string(String(u.createdAt))
        o.set("lastRefreshAt", u.lastRefreshAt.map { .string(Timestamp.protobufJSON(millis: $0)) })
        o.set("tenantId", u.tenantId.map(JSON.string))
        if let h = u.passwordHash {
            o["passwordHash"] = .string(forClient ? Passwords.redacted : h)
            if !forClient { o.set("salt", u.salt.map(JSON.string)) }
            o.set("passwordUpdatedAt", u.passwordUpdatedAt.map { .int($0) })
        }
        if !u.mfaInfo.isEmpty { o["mfaInfo"] = MFAJSON.enrollments(u.mfaInfo) }
        return .object(o)
    }
}
