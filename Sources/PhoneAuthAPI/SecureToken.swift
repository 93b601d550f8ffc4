import EmulatorSupport
import PhoneAuthCore

/// `POST /securetoken.googleapis.com/v1/token`: form or JSON, snake_case or camelCase. The new ID token goes in
/// both `access_token` (what the SDKs read) and `id_token`.
enum SecureToken {
    static func grant(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        guard let grantType = try call.string("grantType"), !grantType.isEmpty else { throw AuthError(.missingGrantType) }
        guard grantType == "refresh_token" else { throw AuthError(.invalidGrantType) }
        guard let token = try call.string("refreshToken"), !token.isEmpty else { throw AuthError(.missingRefreshToken) }
        let (record, user) = try app.emulator.redeemRefreshToken(token)
        let key = StoreKey(projectId: record.projectId, tenantId: record.tenantId)
        let claims = TokenService.claims(for: user, key: key, authTime: record.authTime, signInProvider: record.signInProvider,
                                         issuedAt: app.emulator.clock.nowSeconds(), secondFactorId: record.secondFactorId,
                                         extraClaims: record.extraClaimsObject, secondFactor: record.secondFactor)
        let idToken = try app.tokens.sign(claims)
        return Reply([
            "access_token": .string(idToken),
            "expires_in": .string(String(TokenService.tokenLifetimeSeconds)),
            "token_type": "Bearer",
            "refresh_token": .string(token),
            "id_token": .string(idToken),
            "user_id": .string(user.localId),
            "project_id": .string(PhoneAuthApp.projectNumber),
        ])
    }
}
