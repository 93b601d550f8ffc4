import EmulatorSupport
import PhoneAuthCore

/// `GET /identitytoolkit.googleapis.com/v2/passwordPolicy` (`?tenantId=`): the project's or tenant's password policy as
/// the SDKs read it (the JS SDK's `validatePassword` and its re-fetch after `auth/password-does-not-meet-requirements`):
/// `customStrengthOptions`, `allowedNonAlphanumericCharacters`, `enforcementState`, `forceUpgradeOnSignin` and
/// `schemaVersion` 1. A project with no `passwordPolicyConfig` answers `OFF` with no options (the SDK then applies its
/// 6-character minimum). The official emulator answers 501 here.
enum PasswordPolicyEndpoint {
    static func handle(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        let tenant = try call.queryTenant()
        return Reply(app.emulator.config(StoreKey(projectId: call.projectId, tenantId: tenant)).passwordPolicy.publicJSON)
    }
}

extension PasswordPolicy {
    /// A v2 PATCH's policy: `lastUpdateTime` moves to now when the rules changed.
    func stamped(after old: PasswordPolicy, nowMillis: Int64) -> PasswordPolicy {
        guard !sameRules(as: old) else { return self }
        var p = self
        p.lastUpdateTime = p.configured ? Timestamp.protobufJSON(millis: nowMillis) : nil
        return p
    }
}
