import EmulatorSupport
import PhoneAuthCore

/// `GET /v2/recaptchaConfig` (never 501: the JS and iOS SDKs call it before every phone flow) and the old
/// `GET /v1/recaptchaParams`.
enum RecaptchaConfig {
    /// The project's (or the `tenantId` query's tenant's) `recaptchaConfig` as the SDKs read it: `recaptchaKey` (always,
    /// so the JS SDK never logs its "Failed to initialize reCAPTCHA Enterprise config"), the phone and email/password
    /// states, and the two SMS flags. With no `recaptchaConfig` the phone state follows `appVerification` as before.
    /// `clientType` and `version`, when given, must be production's values (`INVALID_REQ_TYPE`,
    /// `INVALID_RECAPTCHA_VERSION`).
    static func handle(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        let tenant = try call.queryTenant()
        if let t = call.queryValue("clientType"), !t.isEmpty, !["CLIENT_TYPE_WEB", "CLIENT_TYPE_ANDROID", "CLIENT_TYPE_IOS"].contains(t) {
            throw AuthError(.invalidReqType)
        }
        if let v = call.queryValue("version"), !v.isEmpty, v != "RECAPTCHA_ENTERPRISE" { throw AuthError(.invalidRecaptchaVersion) }
        let config = app.emulator.config(StoreKey(projectId: call.projectId, tenantId: tenant))
        let rc = config.recaptcha
        let phoneState = rc.phoneDefenseOn ? rc.phoneEnforcementState.rawValue : config.phoneAuth.appVerification == .enforce ? "ENFORCE" : "OFF"
        return Reply([
            "recaptchaKey": .string("projects/\(call.projectId)/keys/phone-auth-emulator"),
            "recaptchaEnforcementState": [
                ["provider": "EMAIL_PASSWORD_PROVIDER", "enforcementState": .string(rc.emailPasswordEnforcementState.rawValue)],
                ["provider": "PHONE_PROVIDER", "enforcementState": .string(phoneState)],
            ],
            "useSmsBotScore": .bool(rc.useSmsBotScore),
            "useSmsTollFraudProtection": .bool(rc.useSmsTollFraudProtection),
        ])
    }

    static func legacyParams(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        Reply([
            "kind": "identitytoolkit#GetRecaptchaParamResponse",
            "recaptchaStoken": "This-is-a-fake-token__Dont-send-this-to-the-Recaptcha-service__The-Auth-Emulator-does-not-support-Recaptcha",
            "recaptchaSiteKey": "Fake-key__Do-not-send-this-to-Recaptcha_",
        ])
    }
}
