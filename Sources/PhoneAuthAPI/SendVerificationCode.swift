import EmulatorSupport
import PhoneAuthCore

/// `accounts:sendVerificationCode` (and legacy `relyingparty/sendVerificationCode`).
///
/// Request: `{phoneNumber, recaptchaToken?, captchaResponse?, clientType?, recaptchaVersion?, iosReceipt?, iosSecret?,
/// playIntegrityToken?, safetyNetToken?, autoRetrievalInfo?: {appSignatureHash}, tenantId?}`. Reply: `{sessionInfo}`.
enum SendVerificationCode {
    static func handle(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        let key = try call.storeKey()
        let phone = try call.string("phoneNumber")
        let hash = try call.object("autoRetrievalInfo")?["appSignatureHash"]?.stringValue
        var creds = AppCredentials()
        creds.recaptchaToken = try call.string("recaptchaToken")
        creds.captchaResponse = try call.string("captchaResponse")
        creds.iosReceipt = try call.string("iosReceipt")
        creds.iosSecret = try call.string("iosSecret")
        creds.playIntegrityToken = try call.string("playIntegrityToken")
        creds.safetyNetToken = try call.string("safetyNetToken")
        if let masked = phone, MultiFactor.isMasked(masked) {
            // The iOS SDK in testing mode starts an MFA sign-in here, with the masked hint: it is sent as that pending
            // sign-in's `mfaSignIn:start` would be (`Emulator.resolveMaskedMFASignIn`), or refused as production
            // refuses a masked number — always with the abuse limits on (a server others reach): the hint carries
            // no credential, so anyone could spend another user's pending sign-in with it.
            guard !app.emulator.protectionApplies(key),
                  let (credential, enrollmentId) = app.emulator.resolveMaskedMFASignIn(key, maskedPhone: masked) else {
                throw AuthError(.invalidPhoneNumber, "Invalid format.")
            }
            return try MFAEndpoints.sendSignInCode(app, call, key, pendingCredential: credential, mfaEnrollmentId: enrollmentId,
                                                   credentials: creds) { sessionInfo in reply(call, sessionInfo) }
        }
        if app.blocking.anyTrigger(app, key, [.beforeSendSms]) {
            // beforeSendSms: the function runs off the loop before anything is stored; an error it answers (an
            // HttpsError) blocks the send: no session, no inbox entry, nothing counted.
            let e164 = try PhoneNumber(parsing: phone).e164
            let owner = app.emulator.existingStore(key)?.read { $0.user(phone: e164) }
            let creds = creds
            return try app.blocking.defer(app, call) {
                try app.blocking.beforeSendSms(app, call, key, phone: e164, type: .signIn, user: owner)
                return reply(call, try app.emulator.sendVerificationCode(
                    key, phoneNumber: phone, autoRetrievalHash: hash, clientIP: call.request.remoteAddress, credentials: creds))
            }
        }
        let sessionInfo = try app.emulator.sendVerificationCode(
            key, phoneNumber: phone, autoRetrievalHash: hash, clientIP: call.request.remoteAddress, credentials: creds)
        return reply(call, sessionInfo)
    }

    static func reply(_ call: Call, _ sessionInfo: String) -> Reply {
        var o = JSONObjectBytes(capacity: sessionInfo.utf8.count + (call.legacy ? 96 : 32))
        if call.legacy { o.string("kind", "identitytoolkit#SendVerificationCodeResponse") }
        o.string("sessionInfo", sessionInfo)
        return Reply(json: o.finish())
    }
}

/// `accounts:verifyClient` (v1 and legacy v3), the first step of iOS app verification: records the silent push
/// `{appToken, receipt, secret}` (readable at `/emulator/v1/projects/{p}/pushNotifications`) and returns the receipt.
enum VerifyClient {
    static func handle(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        if call.foreignOrigin { throw ForeignOriginRefusal(.verifyClientOriginNotAllowed) }
        let receipt = try app.emulator.verifyClient(try call.storeKey(), appToken: try call.string("appToken"))
        var o: JSONObject = [:]
        if call.legacy { o["kind"] = "identitytoolkit#VerifyClientResponse" }
        o["receipt"] = .string(receipt)
        o["suggestedTimeout"] = "5"
        return Reply(.object(o))
    }
}
