import EmulatorSupport
import PhoneAuthCore

/// `accounts:signInWithPhoneNumber` (and legacy `relyingparty/verifyPhoneNumber`): sign-in, sign-up, link
/// (`idToken`), re-auth (`operation: "REAUTH"`) and the `temporaryProof` conflict path (PhoneAuthCore/PhoneSignIn.swift).
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
        let request = SignInRequest.Phone(sessionInfo: try call.string("sessionInfo"), code: try call.string("code"),
                                          temporaryProof: try call.string("temporaryProof"), phoneNumber: try call.string("phoneNumber"),
                                          tokenUser: consume tokenUser, operation: try call.string("operation"), clientIP: call.request.remoteAddress)
        return try app.signIn(call, key, .phone(consume request), Answer())
    }

    struct Answer: SignInAnswer {
        func reply(_ app: PhoneAuthApp, _ call: Call, _ s: SignedIn, idToken: String) -> Reply {
            // Written member by member (every phone sign-in answers this).
            var o = JSONObjectBytes(capacity: idToken.utf8.count + s.refreshToken.utf8.count + 192)
            if call.legacy { o.string("kind", "identitytoolkit#VerifyPhoneNumberResponse") }
            o.string("idToken", idToken)
            o.string("refreshToken", s.refreshToken)
            o.string("expiresIn", TokenService.tokenLifetimeText)
            o.string("localId", s.user.localId)
            o.bool("isNewUser", s.isNewUser)
            o.string("phoneNumber", s.user.phoneNumber ?? "")
            return Reply(json: o.finish())
        }

        func reply(_ app: PhoneAuthApp, _ call: Call, ended outcome: SignInOutcome) throws -> Reply {
            guard case .phoneLinkConflict(let phone, let proof) = outcome else { throw AuthError.internalError("unexpected phone sign-in outcome") }
            var o = JSONObject()
            o["phoneNumber"] = .string(phone)
            o["temporaryProof"] = .string(proof)
            o["temporaryProofExpiresIn"] = "3600"
            return Reply(.object(o))
        }
    }
}
