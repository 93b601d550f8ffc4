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
        let sessionInfo = try app.emulator.sendVerificationCode(key, phoneNumber: phone, autoRetrievalHash: hash)
        var o: JSONObject = [:]
        if call.pathParams["legacy"] != nil { o["kind"] = "identitytoolkit#SendVerificationCodeResponse" }
        o["sessionInfo"] = .string(sessionInfo)
        return Reply(.object(o))
    }
}
