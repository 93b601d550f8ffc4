import EmulatorSupport
import PhoneAuthCore

// The two flows a blocking function can reach, each with one entry point that decides once whether a function runs:
//
// - `signIn(call, key, request, answer)` — every sign-in (PhoneAuthCore/SignIn.swift: plan → hook → commit), then
//   the ID token and the handler's reply (`SignInAnswer`). With no beforeCreate/beforeSignIn configured for the
//   request's events it runs here, as one transaction; with one, the whole sign-in runs on the blocking pool
//   (`BlockingCalls.defer`) and the functions are called between its two transactions with no lock held.
// - `sendSMS(call, key, send)` — every code sent by SMS (`sendVerificationCode`, `mfaEnrollment:start`,
//   `mfaSignIn:start` and the iOS SDK's masked send): with a beforeSendSms configured, the function runs on the
//   blocking pool before anything is stored (an error it answers blocks the send: no session, no inbox entry, nothing
//   counted), then the send.

/// How a sign-in handler answers: the last step of `PhoneAuthApp.signIn`.
protocol SignInAnswer: Sendable {
    /// The reply of a sign-in that issued tokens; `idToken` is minted (with a beforeSignIn's session claims).
    func reply(_ app: PhoneAuthApp, _ call: Call, _ signedIn: SignedIn, idToken: String) throws -> Reply
    /// The reply of one that ended without tokens (a phone-link conflict, a second factor owed). Default: an
    /// internal error (a sign-in that never ends so).
    func reply(_ app: PhoneAuthApp, _ call: Call, ended outcome: SignInOutcome) throws -> Reply
    /// Sees every error the sign-in answers (to log it). Default: nothing.
    func refused(_ app: PhoneAuthApp, _ error: AuthError)
    /// A reply instead of the error (`signInWithIdp`'s `returnIdpCredential`: 200 with `errorMessage`); nil: the error
    /// is answered. Default: nil.
    func recover(_ app: PhoneAuthApp, _ call: Call, _ error: AuthError) -> Reply?
    /// `firebase.sign_in_attributes` for this sign-in's ID token (a SAML response's attribute statements). Default: nil.
    var signInAttributes: JSONObject? { get }
}

extension SignInAnswer {
    func reply(_ app: PhoneAuthApp, _ call: Call, ended outcome: SignInOutcome) throws -> Reply {
        throw AuthError.internalError("unexpected sign-in outcome")
    }
    func refused(_ app: PhoneAuthApp, _ error: AuthError) {}
    func recover(_ app: PhoneAuthApp, _ call: Call, _ error: AuthError) -> Reply? { nil }
    var signInAttributes: JSONObject? { nil }
}

/// One SMS send, as `PhoneAuthApp.sendSMS` runs it (for the store `key`).
protocol SMSSend: Sendable {
    /// Whom beforeSendSms is told about — the number, what the SMS is for, the account — read before anything is
    /// stored; asked only when a function is configured (it may throw what production refuses first). nil: no call
    /// (the send answers its own error).
    func recipient(_ app: PhoneAuthApp, _ key: StoreKey) throws -> SMSRecipient?
    /// The send (`Emulator`) and its reply.
    func send(_ app: PhoneAuthApp, _ call: Call, _ key: StoreKey) throws -> Reply
    /// What the SMS is for (the reCAPTCHA action it is assessed as).
    var kind: VerificationSession.Kind { get }
    /// The app credentials it carries (the reCAPTCHA scores beforeSendSms is told come from them; a beforeSendSms
    /// function's `recaptchaActionOverride` is set on them).
    var credentials: AppCredentials { get set }
}

extension SMSSend {
    /// The same send with a beforeSendSms function's `recaptchaActionOverride`.
    func withOverride(_ o: RecaptchaOverride?) -> Self {
        var s = self
        s.credentials.recaptchaActionOverride = o
        return s
    }
}

struct SMSRecipient: Sendable {
    var phone: String
    var type: BlockingSMSType
    var user: UserRecord?
}

extension PhoneAuthApp {
    /// The one entry point of every sign-in handler (see the top of this file).
    func signIn<A: SignInAnswer>(_ call: Call, _ key: StoreKey, _ request: SignInRequest, _ answer: A) throws -> Reply {
        do {
            guard BlockingFunctionsHint.mayBeConfigured && blocking.anyTrigger(self, key, request.blockingEvents) else {
                // An `.adaptive` route (`signInWithPassword`) moves to the signing pool before it changes or signs anything.
                if request.expectsTokens { try call.beforeCostlyWork() }
                return try answerSignIn(call, key, try emulator.signIn(key, request), answer)
            }
            return try blocking.defer(self, call) { [self] in
                do {
                    let outcome = try emulator.signIn(key, request) { candidate throws(AuthError) in
                        try self.blocking.signInHooks(self, call, key, candidate)
                    }
                    return try answerSignIn(call, key, outcome, answer)
                } catch let error as AuthError {
                    if let r = answer.recover(self, call, error) { return r }
                    answer.refused(self, error)
                    throw error
                }
            }
        } catch let error as AuthError {
            if let r = answer.recover(self, call, error) { return r }
            answer.refused(self, error)
            throw error
        }
    }

    /// The tokens step: the ID token of a `SignedIn`, and the handler's reply.
    private func answerSignIn<A: SignInAnswer>(_ call: Call, _ key: StoreKey, _ outcome: SignInOutcome, _ answer: A) throws -> Reply {
        guard case .signedIn(let s) = outcome else { return try answer.reply(self, call, ended: outcome) }
        return try answer.reply(self, call, s, idToken: try idToken(for: s, key: key, signInAttributes: answer.signInAttributes))
    }

    /// A sign-in's ID token: a custom token's developer claims, then a beforeSignIn's session claims (in this token
    /// only), under the reserved claims and the user's identity fields.
    func idToken(for s: SignedIn, key: StoreKey, signInAttributes: JSONObject? = nil) throws -> String {
        var extra = s.sessionClaims
        if let developer = s.developerClaims {
            var claims = CustomTokens.claimsObject(developer)
            for (k, v) in s.sessionClaims ?? [:] { claims[k] = v }
            extra = claims
        }
        return try idToken(for: s.user, key: key, signInProvider: s.signInProvider, authTime: s.authTime, secondFactorId: s.secondFactorId,
                           secondFactor: s.secondFactor, sessionClaims: extra, signInAttributes: signInAttributes)
    }

    /// An ID token, with extra claims for this sign-in only (session claims, never stored; reserved claim names were
    /// refused when they were parsed).
    func idToken(for user: UserRecord, key: StoreKey, signInProvider: String, authTime: Int64, secondFactorId: String? = nil,
                 secondFactor: String? = nil, sessionClaims: JSONObject?, signInAttributes: JSONObject? = nil) throws -> String {
        let issuedAt = emulator.clock.nowSeconds()
        if sessionClaims?.isEmpty ?? true, signInAttributes == nil,
           let payload = TokenService.claimsJSON(for: user, key: key, authTime: authTime, signInProvider: signInProvider,
                                                 issuedAt: issuedAt, secondFactorId: secondFactorId, secondFactor: secondFactor) {
            return try tokens.sign(payloadJSON: payload)
        }
        // Extra claims go in under the user's identity fields, as a custom token's claims do.
        let claims = TokenService.claims(for: user, key: key, authTime: authTime, signInProvider: signInProvider, issuedAt: issuedAt,
                                         secondFactorId: secondFactorId, extraClaims: sessionClaims ?? JSONObject(), secondFactor: secondFactor,
                                         signInAttributes: signInAttributes)
        return try tokens.sign(claims)
    }

    /// The one entry point of every SMS send (see the top of this file).
    func sendSMS<S: SMSSend>(_ call: Call, _ key: StoreKey, _ sms: S) throws -> Reply {
        guard blocking.anyTrigger(self, key, [.beforeSendSms]), let to = try sms.recipient(self, key) else { return try sms.send(self, call, key) }
        let scores = emulator.recaptchaScores(key, phone: to.phone, kind: sms.kind, credentials: sms.credentials)
        return try blocking.defer(self, call) { [self] in
            let o = try blocking.beforeSendSms(self, call, key, phone: to.phone, type: to.type, user: to.user, recaptchaScore: scores?.botScore)
            return try (scores != nil && o != nil ? sms.withOverride(o) : sms).send(self, call, key)
        }
    }
}
