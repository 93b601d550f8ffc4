import EmulatorSupport
import PhoneAuthCore

/// `accounts:signInWithPhoneNumber` (and legacy `relyingparty/verifyPhoneNumber`): sign-in, sign-up, link
/// (`idToken`), re-auth (`operation: "REAUTH"`) and the `temporaryProof` conflict path.
enum SignInWithPhoneNumber {
    static func handle(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        var tenant = try call.tenant()
        let idToken = try call.string("idToken")
        var tokenUser: TokenIdentity? = nil
        if let idToken, !idToken.isEmpty {
            let (identity, _) = try app.verifiedUser(idToken, call: call, tenant: tenant)
            tenant = identity.tenantId
            tokenUser = identity
        }
        let key = StoreKey(projectId: call.projectId, tenantId: tenant)
        let outcome = try app.emulator.signInWithPhoneNumber(
            key, sessionInfo: try call.string("sessionInfo"), code: try call.string("code"),
            temporaryProof: try call.string("temporaryProof"), phoneNumber: try call.string("phoneNumber"),
            tokenUser: tokenUser, operation: try call.string("operation"))
        var o = JSONObject()
        switch outcome {
        case .conflict(let phone, let proof):
            o["phoneNumber"] = .string(phone)
            o["temporaryProof"] = .string(proof)
            o["temporaryProofExpiresIn"] = "3600"
        case .signedIn(let user, let isNewUser, let refreshToken, let authTime):
            let claims = TokenService.claims(for: user, key: key, authTime: authTime, signInProvider: "phone", issuedAt: app.emulator.clock.nowSeconds())
            let idToken = try app.tokens.sign(claims)
            if call.legacy { o["kind"] = "identitytoolkit#VerifyPhoneNumberResponse" }
            o["idToken"] = .string(idToken)
            o["refreshToken"] = .string(refreshToken)
            o["expiresIn"] = .string(String(TokenService.tokenLifetimeSeconds))
            o["localId"] = .string(user.localId)
            o["isNewUser"] = .bool(isNewUser)
            o["phoneNumber"] = .string(user.phoneNumber ?? "")
        }
        return Reply(.object(o))
    }
}
