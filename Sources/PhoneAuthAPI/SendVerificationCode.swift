import EmulatorSupport
import PhoneAuthCore

/// `accounts:sendVerificationCode` (and legacy `relyingparty/sendVerificationCode`).
///
/// Request: `{phoneNumber, recaptchaToken?, captchaResponse?, clientType?, recaptchaVersion?, iosReceipt?, iosSecret?,
/// playIntegrityToken?, safetyNetToken?, autoRetrievalInfo?: {appSignatureHash}, tenantId?}`. Reply: `{sessionInfo}`.
enum SendVerificationCode {
    static func handle(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        let key = try call.storeKey()
        // Built in place: the send carries what the request gave (no copy of the credentials on the hot path).
        var send = Code(phone: try call.string("phoneNumber"),
                        autoRetrievalHash: try call.object("autoRetrievalInfo")?["appSignatureHash"]?.stringValue)
        send.credentials.recaptchaToken = try call.string("recaptchaToken")
        send.credentials.captchaResponse = try call.string("captchaResponse")
        send.credentials.iosReceipt = try call.string("iosReceipt")
        send.credentials.iosSecret = try call.string("iosSecret")
        send.credentials.playIntegrityToken = try call.string("playIntegrityToken")
        send.credentials.safetyNetToken = try call.string("safetyNetToken")
        send.credentials.clientType = try call.string("clientType")
        send.credentials.recaptchaVersion = try call.string("recaptchaVersion")
        send.credentials.locale = call.smsLocale
        if let masked = send.phone, MultiFactor.isMasked(masked) {
            // The iOS SDK in testing mode starts an MFA sign-in here, with the masked hint: it is sent as that pending
            // sign-in's `mfaSignIn:start` would be (`Emulator.resolveMaskedMFASignIn`), or refused as production
            // refuses a masked number — always with the abuse limits on (a server others reach): the hint carries
            // no credential, so anyone could spend another user's pending sign-in with it.
            guard !app.emulator.protectionApplies(key),
                  let (credential, enrollmentId) = app.emulator.resolveMaskedMFASignIn(key, maskedPhone: masked) else {
                throw AuthError(.invalidPhoneNumber, "Invalid format.")
            }
            return try app.sendSMS(call, key, MFAEndpoints.SignInCode(pendingCredential: credential, mfaEnrollmentId: enrollmentId,
                                                                     credentials: send.credentials, shape: .sendVerificationCode))
        }
        return try app.sendSMS(call, key, send)
    }

    /// A first-factor code: beforeSendSms is told the number (an invalid one is refused first) and the account that
    /// has it, if any.
    struct Code: SMSSend {
        let phone: String?
        let autoRetrievalHash: String?
        var credentials = AppCredentials()
        var kind: VerificationSession.Kind { .signIn }

        func recipient(_ app: PhoneAuthApp, _ key: StoreKey) throws -> SMSRecipient? {
            let e164 = try PhoneNumber(parsing: phone).e164
            return SMSRecipient(phone: e164, type: .signIn, user: app.emulator.existingStore(key)?.read { $0.user(phone: e164) })
        }

        func send(_ app: PhoneAuthApp, _ call: Call, _ key: StoreKey) throws -> Reply {
            reply(call, try app.emulator.sendVerificationCode(key, phoneNumber: phone, autoRetrievalHash: autoRetrievalHash,
                                                              clientIP: call.request.remoteAddress, credentials: credentials))
        }
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
