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
        if app.blocking.anyTrigger(app, key, [.beforeCreate, .beforeSignIn]) {
            return try withBlockingFunctions(app, call, key, tokenUser: tokenUser)
        }
        let outcome = try app.emulator.signInWithPhoneNumber(
            key, sessionInfo: try call.string("sessionInfo"), code: try call.string("code"),
            temporaryProof: try call.string("temporaryProof"), phoneNumber: try call.string("phoneNumber"),
            tokenUser: tokenUser, operation: try call.string("operation"), clientIP: call.request.remoteAddress)
        return try reply(app, call, key, outcome, sessionClaims: nil)
    }

    /// The same flow with beforeCreate/beforeSignIn functions: verify (one transaction), call them off the loop with
    /// no lock held, then save (a second transaction that re-checks). BlockingCalls.swift.
    static func withBlockingFunctions(_ app: PhoneAuthApp, _ call: Call, _ key: StoreKey, tokenUser: TokenIdentity?) throws -> Reply {
        let (sessionInfo, code, proof, phone, operation) = (try call.string("sessionInfo"), try call.string("code"), try call.string("temporaryProof"),
                                                            try call.string("phoneNumber"), try call.string("operation"))
        return try app.blocking.defer(app, call) {
            let plan = try app.emulator.beginPhoneSignIn(key, sessionInfo: sessionInfo, code: code, temporaryProof: proof, phoneNumber: phone,
                                                         tokenUser: tokenUser, operation: operation, clientIP: call.request.remoteAddress)
            var changes = BlockingFunctions.Outcome()
            if case .signIn(let user, let isNew, _) = plan {
                changes = try app.blocking.signInHooks(app, call, key, user: user, isNew: isNew, method: .phone)
            }
            let outcome = try app.emulator.finishPhoneSignIn(key, plan, changes: changes)
            return try reply(app, call, key, outcome, sessionClaims: changes.sessionClaims)
        }
    }

    static func reply(_ app: PhoneAuthApp, _ call: Call, _ key: StoreKey, _ outcome: PhoneSignInOutcome, sessionClaims: JSONObject?) throws -> Reply {
        switch outcome {
        case .conflict(let phone, let proof):
            var o = JSONObject()
            o["phoneNumber"] = .string(phone)
            o["temporaryProof"] = .string(proof)
            o["temporaryProofExpiresIn"] = "3600"
            return Reply(.object(o))
        case .signedIn(let user, let isNewUser, let refreshToken, let authTime):
            let idToken = try app.idToken(for: user, key: key, signInProvider: "phone", authTime: authTime, sessionClaims: sessionClaims)
            // Written member by member (every phone sign-in answers this).
            var o = JSONObjectBytes(capacity: idToken.utf8.count + refreshToken.utf8.count + 192)
            if call.legacy { o.string("kind", "identitytoolkit#VerifyPhoneNumberResponse") }
            o.string("idToken", idToken)
            o.string("refreshToken", refreshToken)
            o.string("expiresIn", TokenService.tokenLifetimeText)
            o.string("localId", user.localId)
            o.bool("isNewUser", isNewUser)
            o.string("phoneNumber", user.phoneNumber ?? "")
            return Reply(json: o.finish())
        }
    }
}
