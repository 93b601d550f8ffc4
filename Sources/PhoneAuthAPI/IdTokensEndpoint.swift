import EmulatorSupport
import PhoneAuthCore

/// `POST /emulator/v1/projects/{p}[/tenants/{t}]/idTokens`: a test principal in one call (PhoneAuthCore/TestPrincipals.swift).
///
/// `{uid, claims?, phoneNumber?, email?, emailVerified?, displayName?, photoUrl?, signInProvider?, secondFactor?,
/// authTime?, expiresIn?}` → `{idToken, refreshToken, expiresIn, localId, isNewUser}`. The ID token is signed like every
/// sign-in's (the current key, its `kid`, RS256; unsigned with `--token-signing none`) with the claims a sign-in of that
/// user would carry; only `exp` follows `expiresIn` (at most 3600, production's lifetime). Refreshing the refresh token
/// gives ordinary one-hour tokens of the same session (provider, `auth_time`, second factor).
enum IdTokensEndpoint {
    /// The body's members; any other is refused (a misspelt field would otherwise be silently ignored).
    static let members: Set<String> = ["uid", "claims", "phoneNumber", "email", "emailVerified", "displayName", "photoUrl",
                                       "signInProvider", "secondFactor", "authTime", "expiresIn"]
    /// User fields the body may set, through the user field table's request checks.
    static let userFields = ["email", "emailVerified", "displayName", "photoUrl", "phoneNumber"]

    static func mint(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        let key = EmulatorAPI.key(call)
        let request = try principal(call)
        let expiresIn = try call.int("expiresIn") ?? TokenService.tokenLifetimeSeconds
        guard expiresIn >= 1, expiresIn <= TokenService.tokenLifetimeSeconds else {
            throw AuthError.invalidArgument("expiresIn must be from 1 to \(TokenService.tokenLifetimeSeconds) seconds (production's ID token lifetime).")
        }
        let minted = try app.emulator.mintPrincipal(key, request)
        let issuedAt = max(app.emulator.clock.nowSeconds(), minted.authTime)
        var claims = TokenService.claims(for: minted.user, key: key, authTime: minted.authTime, signInProvider: request.signInProvider,
                                         issuedAt: issuedAt, secondFactorId: minted.secondFactorId, secondFactor: minted.secondFactor)
        claims["exp"] = .int(issuedAt + expiresIn)
        let idToken = try app.tokens.sign(claims)
        app.logger.info("minted a test principal", [("project", key.description), ("uid", Identifiers.printable(request.uid, limit: 64)),
                                                    ("provider", request.signInProvider), ("new", minted.isNewUser ? "yes" : "no")])
        return Reply([
            "idToken": .string(idToken),
            "refreshToken": .string(minted.refreshToken),
            "expiresIn": .string(String(expiresIn)),
            "localId": .string(minted.user.localId),
            "isNewUser": .bool(minted.isNewUser),
        ])
    }

    /// The request, checked: known members, a valid uid, the user fields as an admin update reads them, claims as the
    /// Admin API checks them, a known provider and second factor.
    static func principal(_ call: Call) throws(AuthError) -> PrincipalRequest {
        for k in call.body.keys where !members.contains(k) {
            throw AuthError.invalidArgument("Unknown field \"\(Identifiers.printable(k, limit: 64))\": the body takes \(members.sorted().joined(separator: ", ")).")
        }
        guard let uid = try call.string("uid"), !uid.isEmpty else { throw AuthError.invalidArgument("uid is required.") }
        guard Identifiers.isValidLocalID(uid) else { throw Identifiers.invalidLocalID }
        var changes = UserChanges()
        for name in userFields {
            guard let f = call.emulator.userFields[name], let v = try call.requestValue(f) else { continue }
            changes[field: name] = try f.fromRequest(v)
        }
        if let claims = try call.object("claims") {
            changes.customAttributes = try CustomClaims.validate(JSON.object(claims).serializedString)
        }
        let provider = try call.string("signInProvider") ?? Emulator.customTokenProvider
        guard Emulator.isPrincipalProvider(provider) else {
            throw AuthError.invalidArgument("signInProvider must be one of \(Emulator.principalProviders.sorted().joined(separator: ", ")), or oidc.ID / saml.ID.")
        }
        let factor = try call.string("secondFactor")
        if let factor, !Emulator.principalSecondFactors.contains(factor) {
            throw AuthError.invalidArgument("secondFactor must be \"phone\" or \"totp\".")
        }
        return PrincipalRequest(uid: uid, changes: changes, signInProvider: provider, secondFactor: factor, authTime: try call.int("authTime"))
    }
}
