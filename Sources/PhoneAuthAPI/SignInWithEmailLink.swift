import EmulatorSupport
import PhoneAuthCore

/// `accounts:signInWithEmailLink` (legacy `relyingparty/emailLinkSignin`): sign-in, sign-up, link (`idToken`) and
/// re-auth with an EMAIL_SIGNIN code from `sendOobCode` (PhoneAuthCore/EmailLinkSignIn.swift), in the official
/// emulator's order of checks: `PROJECT_DISABLED`, `OPERATION_NOT_ALLOWED` (a tenant with email links off), the ID
/// token, `MISSING_EMAIL`, `MISSING_OOB_CODE`, then the code.
enum SignInWithEmailLink {
    static func handle(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        var tenant = try call.tenant()
        let first = StoreKey(projectId: call.projectId, tenantId: tenant)
        try TenantGate.checkEnabled(app, first)
        if app.emulator.tenantSettings(first)?.enableEmailLinkSignin == false { throw AuthError(.operationNotAllowed) }
        var tokenUser: TokenIdentity? = nil
        if let idToken = try call.string("idToken"), !idToken.isEmpty {
            let (identity, _) = try app.verifiedUser(idToken, call: call, tenant: tenant)
            tenant = identity.tenantId
            tokenUser = identity
        }
        guard let email = try call.string("email"), !email.isEmpty else { throw AuthError(.missingEmail) }
        guard let oobCode = try call.string("oobCode"), !oobCode.isEmpty else { throw AuthError(.missingOobCode) }
        guard Identifiers.isValidEmail(email) else { throw AuthError(.invalidEmail) }
        let key = StoreKey(projectId: call.projectId, tenantId: tenant)
        let request = SignInRequest.EmailLink(email: email, oobCode: oobCode, tokenUser: tokenUser, clientIP: call.request.remoteAddress)
        return try app.signIn(call, key, .emailLink(request), Answer(email: request.email))
    }

    struct Answer: SignInAnswer {
        let email: String

        /// `isNewUser` is always there (false for an existing user), as production's; no `tenantId`.
        func reply(_ app: PhoneAuthApp, _ call: Call, _ s: SignedIn, idToken: String) -> Reply {
            Reply(["kind": "identitytoolkit#EmailLinkSigninResponse", "email": .string(email), "localId": .string(s.user.localId),
                   "isNewUser": .bool(s.isNewUser), "idToken": .string(idToken), "refreshToken": .string(s.refreshToken),
                   "expiresIn": .string(TokenService.tokenLifetimeText)])
        }

        func reply(_ app: PhoneAuthApp, _ call: Call, ended outcome: SignInOutcome) throws -> Reply {
            guard case .secondFactorRequired(let user, let first) = outcome else { throw AuthError.internalError("unexpected email-link sign-in outcome") }
            var o: JSONObject = ["kind": "identitytoolkit#EmailLinkSigninResponse", "email": .string(email), "localId": .string(user.localId),
                                 "isNewUser": false]
            for (k, v) in MFAJSON.pendingReply(first) ?? [:] { o[k] = v }
            return Reply(.object(o))
        }
    }
}
