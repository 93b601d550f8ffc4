import EmulatorSupport
import PhoneAuthCore

extension PhoneAuthApp {
    /// Signs a fresh ID token for `user` (its refresh token comes from the transaction that saved the user).
    func idToken(for user: UserRecord, key: StoreKey, signInProvider: String, authTime: Int64, secondFactorId: String? = nil) throws -> String {
        try idToken(for: user, key: key, signInProvider: signInProvider, authTime: authTime, secondFactorId: secondFactorId, secondFactor: nil,
                    sessionClaims: nil)
    }

    /// Verifies a request's `idToken` against this call's project and tenant, then runs the account checks.
    func verifiedUser(_ token: String?, call: Call, tenant: String?) throws(AuthError) -> (TokenIdentity, UserRecord) {
        let identity = try tokens.verify(token, projectId: call.projectId, nowSeconds: emulator.clock.nowSeconds())
        if let tenant, identity.tenantId != tenant { throw AuthError(.tenantIdMismatch) }
        let user = try emulator.user(for: identity)
        return (identity, user)
    }
}
