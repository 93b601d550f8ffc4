import EmulatorSupport
import PhoneAuthCore

/// `GET /v2/recaptchaConfig` (never 501: the JS and iOS SDKs call it before every phone flow) and the old
/// `GET /v1/recaptchaParams`.
enum RecaptchaConfig {
    static func handle(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        let tenant = try call.queryTenant()
        let config = app.emulator.config(StoreKey(projectId: call.projectId, tenantId: tenant))
        let phoneState = config.phoneAuth.appVerification == .enforce ? "ENFORCE" : "OFF"
        return Reply([
            "recaptchaKey": .string("projects/\(call.projectId)/keys/phone-auth-emulator"),
            "recaptchaEnforcementState": [
                ["provider": "EMAIL_PASSWORD_PROVIDER", "enforcementState": "OFF"],
                ["provider": "PHONE_PROVIDER", "enforcementState": .string(phoneState)],
            ],
            "useSmsBotScore": false,
            "useSmsTollFraudProtection": false,
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
