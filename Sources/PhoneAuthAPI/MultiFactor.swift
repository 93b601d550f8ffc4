import EmulatorSupport
import JWT
import PhoneAuthCore

/// The wire shapes of SMS second factors.
public enum MFAJSON {
    /// The hints a first-factor reply carries: `{mfaEnrollmentId, displayName?, enrolledAt, phoneInfo: "+*******0100"}`.
    static func hints(_ list: [MFAEnrollment]) -> JSON {
        .array(list.map { e in
            var o = JSONObject()
            o.set("displayName", e.displayName.map(JSON.string))
            o["enrolledAt"] = .string(Timestamp.protobufJSON(millis: e.enrolledAt))
            o["mfaEnrollmentId"] = .string(e.mfaEnrollmentId)
            if let masked = e.maskedPhone { o["phoneInfo"] = .string(masked) } else { o["totpInfo"] = .object(JSONObject()) }
            return .object(o)
        })
    }

    /// The fields a first-factor sign-in reply (e.g. `signInWithPassword`) carries instead of tokens when
    /// `Emulator.passFirstFactor` answered `.mfaRequired`: `{mfaPendingCredential, mfaInfo[hints]}`; nil for
    /// `.issueTokens`. Merge them into the reply's `kind`/`localId`/`email` (production sends no `idToken`,
    /// `refreshToken` or `expiresIn` then).
    public static func pendingReply(_ outcome: FirstFactorOutcome) -> JSONObject? {
        guard case .mfaRequired(let credential, let enrollments) = outcome else { return nil }
        return ["mfaPendingCredential": .string(credential), "mfaInfo": hints(enrollments)]
    }
}

extension Call {
    /// Enrollments an admin gives (`mfaInfo` on signUp, `mfa.enrollments` on update): `[{phoneInfo, mfaEnrollmentId?,
    /// displayName?, enrolledAt?}]`, checked by `MultiFactor.enrollments`.
    func adminEnrollments(_ v: JSON, field: String, generateIds: Bool, emulator: Emulator) throws(AuthError) -> [MFAEnrollment] {
        guard case .array(let items) = v else { throw AuthError.invalidJSON("Invalid value at '\(field)', \(v.serializedString.prefix(100))") }
        guard items.count <= 100 else { throw AuthError(.secondFactorLimitExceeded) }
        var parsed: [MultiFactor.AdminEnrollment] = []
        for item in items {
            guard case .object(let o) = item else { throw AuthError.invalidJSON("Invalid value at '\(field)', \(item.serializedString.prefix(100))") }
            var secret: [UInt8]? = nil
            let totp = o["phoneInfo"] == nil && o["totpInfo"]?.objectValue != nil
            if totp, let given = o["totpInfo"]?["sharedSecretKey"] {
                guard let s = MultiFactor.totpSecret(given.stringValue) else {
                    throw AuthError.invalidArgument("totpInfo.sharedSecretKey must be base32 of 10 to 64 bytes.")
                }
                secret = s
            }
            parsed.append(MultiFactor.AdminEnrollment(
                phoneInfo: o["phoneInfo"]?.stringValue, mfaEnrollmentId: o["mfaEnrollmentId"]?.stringValue,
                displayName: o["displayName"]?.stringValue, enrolledAt: o["enrolledAt"]?.stringValue.flatMap(MultiFactor.parseRFC3339),
                isTOTP: totp, totpSecret: secret))
        }
        return try MultiFactor.enrollments(parsed, generateIds: generateIds, now: emulator.clock.nowMillis(), random: emulator.random)
    }

    /// The app-verification fields inside `phoneEnrollmentInfo` / `phoneSignInInfo` (as `sendVerificationCode` takes them).
    static func appCredentials(_ o: JSONObject?) -> AppCredentials {
        var c = AppCredentials()
        guard let o else { return c }
        c.recaptchaToken = o["recaptchaToken"]?.stringValue
        c.captchaResponse = o["captchaResponse"]?.stringValue
        c.iosReceipt = o["iosReceipt"]?.stringValue
        c.iosSecret = o["iosSecret"]?.stringValue
        c.playIntegrityToken = o["playIntegrityToken"]?.stringValue
        c.safetyNetToken = o["safetyNetToken"]?.stringValue
        c.clientType = o["clientType"]?.stringValue
        c.recaptchaVersion = o["recaptchaVersion"]?.stringValue
        return c
    }

    /// The request's language for the SMS text: `X-Firebase-Locale` (what the SDKs send for `languageCode`), if it
    /// looks like a language tag.
    var smsLocale: String? {
        guard let v = request.headers["x-firebase-locale"], !v.isEmpty, v.utf8.count <= 35,
              v.utf8.allSatisfy({ ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2D || $0 == 0x5F })
        else { return nil }
        return String(v)
    }

    /// `phoneVerificationInfo` (`missing` when absent); Android's `androidVerificationProof` is 501, as the official emulator.
    func phoneVerificationInfo(missing: AuthError) throws(AuthError) -> JSONObject {
        guard let info = try object("phoneVerificationInfo") else { throw missing }
        if let proof = info["androidVerificationProof"], proof != .null {
            throw AuthError(.notImplemented, "androidVerificationProof is unsupported!")
        }
        return info
    }
}

/// `v2/accounts/mfaEnrollment:{start,finalize,withdraw}` and `v2/accounts/mfaSignIn:{start,finalize}`.
enum MFAEndpoints {
    /// The signed-in user of the call's `idToken` and the store it lives in. A token of another tenant than the body's
    /// `tenantId` is `TENANT_ID_MISMATCH` before the MFA state is looked at (the official emulator resolves the tenant
    /// from the token first); other token errors come after `OPERATION_NOT_ALLOWED`, as before.
    static func signedIn(_ app: PhoneAuthApp, _ call: Call, totp: Bool = false) throws -> (StoreKey, TokenIdentity) {
        let key = try call.storeKey()
        let token = try call.string("idToken")
        let verified = Result { () throws(AuthError) -> TokenIdentity in
            try app.tokens.verify(token, projectId: call.projectId, nowSeconds: app.emulator.clock.nowSeconds())
        }
        if let t = key.tenantId, case .success(let claimed) = verified, claimed.tenantId != t { throw AuthError(.tenantIdMismatch) }
        if totp { try app.emulator.checkTOTPEnabled(key) } else { try app.emulator.checkMFAEnabled(key) }
        let identity = try verified.get()
        _ = try app.emulator.user(for: identity)
        return (StoreKey(projectId: call.projectId, tenantId: identity.tenantId), identity)
    }

    static func tokens(_ app: PhoneAuthApp, _ key: StoreKey, _ t: MFATokens) throws -> Reply {
        let idToken = try app.idToken(for: t.user, key: key, signInProvider: t.signInProvider, authTime: t.authTime, secondFactorId: t.secondFactorId,
                                      secondFactor: t.secondFactor, sessionClaims: nil)
        return Reply(["idToken": .string(idToken), "refreshToken": .string(t.refreshToken)])
    }

    /// `{idToken, phoneEnrollmentInfo: {phoneNumber, recaptchaToken?, …}, tenantId?}` → `{phoneSessionInfo: {sessionInfo}}`.
    static func enrollmentStart(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        if call.body["phoneEnrollmentInfo"] == nil, try call.object("totpEnrollmentInfo") != nil { return try totpEnrollmentStart(app, call) }
        let (key, identity) = try signedIn(app, call)
        let info = try call.object("phoneEnrollmentInfo")
        var credentials = Call.appCredentials(info)
        credentials.locale = call.smsLocale
        return try app.sendSMS(call, key, EnrollmentCode(identity: identity, info: info, credentials: credentials))
    }

    /// `mfaEnrollment:start`'s send: beforeSendSms is told the number as given (an invalid one is refused first) and
    /// the signed-in user.
    struct EnrollmentCode: SMSSend {
        let identity: TokenIdentity
        let info: JSONObject?
        var credentials: AppCredentials

        var kind: VerificationSession.Kind { .mfaEnrollment }

        func recipient(_ app: PhoneAuthApp, _ key: StoreKey) throws -> SMSRecipient? {
            let phone = try PhoneNumber(parsing: info?["phoneNumber"]?.stringValue).e164
            return SMSRecipient(phone: phone, type: .mfaEnrollment, user: try app.emulator.user(for: identity))
        }

        func send(_ app: PhoneAuthApp, _ call: Call, _ key: StoreKey) throws -> Reply {
            let sessionInfo = try app.emulator.startMFAEnrollment(
                key, identity: identity, hasEnrollmentInfo: info != nil, phoneNumber: info?["phoneNumber"]?.stringValue,
                clientIP: call.request.remoteAddress, credentials: credentials)
            return Reply(["phoneSessionInfo": ["sessionInfo": .string(sessionInfo)]])
        }
    }

    /// `{idToken, displayName?, phoneVerificationInfo: {sessionInfo, code}}` → `{idToken, refreshToken}` with the new factor.
    static func enrollmentFinalize(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        if call.body["phoneVerificationInfo"] == nil, try call.object("totpVerificationInfo") != nil { return try totpEnrollmentFinalize(app, call) }
        let (key, identity) = try signedIn(app, call)
        if MultiFactor.ineligibleProviders.contains(identity.signInProvider) {
            throw AuthError(.unsupportedFirstFactor, "MFA is not available for the given first factor.")
        }
        let info = try call.phoneVerificationInfo(missing: AuthError(.invalidArgument, "((Missing phoneVerificationInfo.))"))
        let displayName = try call.string("displayName")
        if let n = displayName, Identifiers.containsControlCharacters(n) || n.utf8.count > 256 {
            throw AuthError.invalidArgument("displayName must be at most 256 bytes without control characters.")
        }
        let t = try app.emulator.finalizeMFAEnrollment(key, identity: identity, sessionInfo: info["sessionInfo"]?.stringValue,
                                                       code: info["code"]?.stringValue, displayName: displayName,
                                                       clientIP: call.request.remoteAddress)
        return try tokens(app, key, t)
    }

    /// `{idToken, mfaEnrollmentId}` → `{idToken, refreshToken}` without second-factor claims.
    static func withdraw(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        let key = try call.storeKey()
        // A tenant with auth off answers that first (the official emulator's order); withdrawing needs no MFA config.
        try TenantGate.checkEnabled(app, key)
        let (identity, _) = try app.verifiedUser(try call.string("idToken"), call: call, tenant: key.tenantId)
        let k = StoreKey(projectId: call.projectId, tenantId: identity.tenantId)
        return try tokens(app, k, try app.emulator.withdrawMFA(k, identity: identity, mfaEnrollmentId: try call.string("mfaEnrollmentId")))
    }

    /// `{mfaPendingCredential, mfaEnrollmentId, phoneSignInInfo?: {recaptchaToken?, …}, tenantId?}` →
    /// `{phoneResponseInfo: {sessionInfo}}`.
    static func signInStart(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        let key = try call.storeKey()
        try app.emulator.checkMFAEnabled(key)
        let info = try call.object("phoneSignInInfo")
        var credentials = Call.appCredentials(info)
        credentials.locale = call.smsLocale
        return try app.sendSMS(call, key, SignInCode(pendingCredential: try call.string("mfaPendingCredential"),
                                                     mfaEnrollmentId: try call.string("mfaEnrollmentId"),
                                                     credentials: credentials, shape: .mfaSignInStart))
    }

    /// An MFA sign-in code for the pending credential's enrollment — for `mfaSignIn:start`, and for the iOS SDK's
    /// masked `sendVerificationCode` once resolved to its pending sign-in — sent by `Emulator.startMFASignIn`.
    /// beforeSendSms is told the enrolled number and its user when the credential and enrollment resolve (else the
    /// send answers its own error, and no function is called).
    struct SignInCode: SMSSend {
        let pendingCredential: String?
        let mfaEnrollmentId: String?
        var credentials: AppCredentials
        var kind: VerificationSession.Kind { .mfaSignIn }
        /// The reply's shape: `mfaSignIn:start`'s, or `sendVerificationCode`'s.
        let shape: Shape
        enum Shape { case mfaSignInStart, sendVerificationCode }

        func recipient(_ app: PhoneAuthApp, _ key: StoreKey) -> SMSRecipient? {
            guard let user = app.emulator.pendingMFAUser(key, pendingCredential: pendingCredential),
                  let phone = user.mfaInfo.first(where: { $0.mfaEnrollmentId == mfaEnrollmentId })?.phoneInfo else { return nil }
            return SMSRecipient(phone: phone, type: .mfaSignIn, user: user)
        }

        func send(_ app: PhoneAuthApp, _ call: Call, _ key: StoreKey) throws -> Reply {
            let sessionInfo = try app.emulator.startMFASignIn(key, pendingCredential: pendingCredential, mfaEnrollmentId: mfaEnrollmentId,
                                                              clientIP: call.request.remoteAddress, credentials: credentials)
            switch shape {
            case .mfaSignInStart: return Reply(["phoneResponseInfo": ["sessionInfo": .string(sessionInfo)]])
            case .sendVerificationCode: return SendVerificationCode.reply(call, sessionInfo)
            }
        }
    }

    /// `{mfaPendingCredential, phoneVerificationInfo: {sessionInfo, code}, tenantId?}` → `{idToken, refreshToken}`.
    static func signInFinalize(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        let key = try call.storeKey()
        if call.body["phoneVerificationInfo"] == nil, call.body["totpVerificationInfo"] != nil { try app.emulator.checkTOTPEnabled(key) } else {
            try app.emulator.checkMFAEnabled(key)
        }
        guard let pending = try call.string("mfaPendingCredential"), !pending.isEmpty else {
            throw AuthError(.mfaMissingCredential, "Please set MFA Pending Credential.")
        }
        if call.body["phoneVerificationInfo"] == nil, try call.object("totpVerificationInfo") != nil { return try totpSignInFinalize(app, call, key, pending) }
        let info = try call.phoneVerificationInfo(missing: AuthError(.invalidArgument, "MFA provider not supported!"))
        let request = SignInRequest.MFAFinalize(pendingCredential: pending, sessionInfo: info["sessionInfo"]?.stringValue,
                                                code: info["code"]?.stringValue, clientIP: call.request.remoteAddress)
        return try app.signIn(call, key, .mfaFinalize(request), FinalizeAnswer())
    }

    /// `mfaSignIn:finalize`'s tokens (with the second factor's claims, and a beforeSignIn's session claims).
    struct FinalizeAnswer: SignInAnswer {
        func reply(_ app: PhoneAuthApp, _ call: Call, _ s: SignedIn, idToken: String) -> Reply {
            Reply(["idToken": .string(idToken), "refreshToken": .string(s.refreshToken)])
        }
    }
}

/// TOTP second factors (PhoneAuthCore/TOTP.swift has the flow).
extension MFAEndpoints {
    /// `{idToken, totpEnrollmentInfo: {}, tenantId?}` → `{totpSessionInfo: {sharedSecretKey, verificationCodeLength,
    /// hashingAlgorithm, periodSec, sessionInfo, finalizeEnrollmentTime}}`.
    static func totpEnrollmentStart(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        let (key, identity) = try signedIn(app, call, totp: true)
        let s = try app.emulator.startTOTPEnrollment(key, identity: identity)
        return Reply(["totpSessionInfo": [
            "sharedSecretKey": .string(TOTP.base32(s.secret)),
            "verificationCodeLength": .int(Int64(TOTP.digits)),
            "hashingAlgorithm": "SHA1",
            "periodSec": .int(TOTP.periodSeconds),
            "sessionInfo": .string(s.sessionInfo),
            "finalizeEnrollmentTime": .string(Timestamp.protobufJSON(millis: s.finalizeBy)),
        ]])
    }

    /// `{idToken, displayName?, totpVerificationInfo: {sessionInfo, verificationCode}}` → `{idToken, refreshToken}`.
    static func totpEnrollmentFinalize(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        let (key, identity) = try signedIn(app, call, totp: true)
        let info = try call.object("totpVerificationInfo") ?? JSONObject()
        let displayName = try call.string("displayName")
        if let n = displayName, Identifiers.containsControlCharacters(n) || n.utf8.count > 256 {
            throw AuthError.invalidArgument("displayName must be at most 256 bytes without control characters.")
        }
        let t = try app.emulator.finalizeTOTPEnrollment(key, identity: identity, sessionInfo: info["sessionInfo"]?.stringValue,
                                                        code: info["verificationCode"]?.stringValue, displayName: displayName, hmac: hmacSHA1)
        return try tokens(app, key, t)
    }

    /// `{mfaPendingCredential, mfaEnrollmentId, totpVerificationInfo: {verificationCode}, tenantId?}` → `{idToken, refreshToken}`.
    static func totpSignInFinalize(_ app: PhoneAuthApp, _ call: Call, _ key: StoreKey, _ pending: String) throws -> Reply {
        let info = try call.object("totpVerificationInfo") ?? JSONObject()
        let request = SignInRequest.TOTPFinalize(pendingCredential: pending, mfaEnrollmentId: try call.string("mfaEnrollmentId"),
                                                 code: info["verificationCode"]?.stringValue, hmac: hmacSHA1, clientIP: call.request.remoteAddress)
        return try app.signIn(call, key, .totpFinalize(request), FinalizeAnswer())
    }
}
