import EmulatorSupport
import PhoneAuthCore

/// `GET/PATCH /identitytoolkit.googleapis.com/v2/projects/{p}/config` (admin), production's Config resource.
/// We model `signIn.phoneNumber` (`enabled`, `testPhoneNumbers`), `smsRegionConfig`, `mfa`, `blockingFunctions` and
/// `emailPrivacyConfig` (`enableImprovedEmailPrivacy`, true for a new project as production's) and `passwordPolicyConfig`
/// (PasswordPolicy.swift; `lastUpdateTime` set when its rules change); other fields are stored
/// and returned as given. PATCH honours `?updateMask=` (comma-separated paths; a masked path absent from the body
/// is cleared); without a mask, the body's fields are merged.
enum AdminConfig {
    static func document(_ c: ProjectConfig, projectId: String) -> JSONObject {
        var doc = c.passthrough
        doc["name"] = .string("projects/\(projectId)/config")
        var signIn = doc["signIn"]?.objectValue ?? JSONObject()
        signIn["phoneNumber"] = ["enabled": .bool(c.phoneEnabled), "testPhoneNumbers": ProjectConfig.testNumbersJSON(c.testPhoneNumbers)]
        doc["signIn"] = .object(signIn)
        doc["smsRegionConfig"] = c.smsRegionJSON
        doc["mfa"] = c.mfa.json
        doc["blockingFunctions"] = c.blockingFunctions.json
        doc["recaptchaConfig"] = c.recaptcha.json
        doc["emailPrivacyConfig"] = ["enableImprovedEmailPrivacy": .bool(c.enableImprovedEmailPrivacy)]
        if c.passwordPolicy.configured { doc["passwordPolicyConfig"] = c.passwordPolicy.json }
        return doc
    }

    static func get(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        Reply(.object(document(app.emulator.config(StoreKey(projectId: call.projectId)), projectId: call.projectId)))
    }

    static func patch(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        let key = StoreKey(projectId: call.projectId)
        let masks = call.queryValues("updateMask").flatMap { $0.split(separator: ",") }.map { $0.trimmingSpaces() }.filter { !$0.isEmpty }
        for m in masks {
            let path = m.split(separator: ".")
            guard !path.isEmpty, path.allSatisfy({ !$0.isEmpty }) else { throw AuthError.invalidArgument("Invalid update mask path: \(m)") }
        }
        // Read, merge and write in one transaction: a concurrent patch never loses this one's fields or vice versa.
        let now = app.emulator.clock.nowMillis()
        let updated = try app.emulator.updateConfig(key) { config, _ throws(AuthError) -> ProjectConfig in
            let old = config.passwordPolicy
            config = try merged(config, body: call.body, masks: masks, projectId: call.projectId)
            config.passwordPolicy = config.passwordPolicy.stamped(after: old, nowMillis: now)
            return config
        }
        return Reply(.object(document(updated, projectId: call.projectId)))
    }

    /// `current` with the PATCH body applied (all given fields, or only the masked paths).
    static func merged(_ current: ProjectConfig, body: JSONObject, masks: [String], projectId: String) throws(AuthError) -> ProjectConfig {
        var doc = document(current, projectId: projectId)
        if masks.isEmpty {
            doc = doc.merging(body, replaceWhole: ["testPhoneNumbers", "smsRegionConfig", "tollFraudScores"])
        } else {
            for m in masks {
                let path = m.split(separator: ".").map(String.init)
                doc.setValue(body.value(atPath: path), atPath: path)
            }
        }
        var updated = current
        do throws(ConfigError) {
            let phone = doc.value(atPath: ["signIn", "phoneNumber"])?.objectValue ?? JSONObject()
            if let e = phone["enabled"] {
                guard case .bool(let b) = e else { throw ConfigError(path: "signIn.phoneNumber.enabled", message: "must be true or false") }
                updated.phoneEnabled = b
            } else {
                updated.phoneEnabled = false
            }
            // Plain `if let`: Optional.map with a typed-throws closure leaked its result (LeakSanitizer, fuzzing).
            updated.testPhoneNumbers = [:]
            if let v = phone["testPhoneNumbers"] {
                updated.testPhoneNumbers = try ProjectConfig.parseTestNumbers(v, path: "signIn.phoneNumber.testPhoneNumbers")
            }
            updated.smsRegion = .allowByDefault(disallowed: [])
            if let v = doc["smsRegionConfig"] { updated.smsRegion = try ProjectConfig.parseSMSRegion(v, path: "smsRegionConfig") }
            updated.mfa = .disabled  // a masked `mfa` absent from the body is cleared
            if let v = doc["mfa"], v != .null { try updated.mfa.apply(v, path: "mfa") }
            updated.recaptcha = RecaptchaSettings()  // a masked `recaptchaConfig` absent from the body is cleared
            if let v = doc["recaptchaConfig"], v != .null { try updated.recaptcha.apply(v, path: "recaptchaConfig") }
            updated.enableImprovedEmailPrivacy = false  // masked and absent from the body: the field's default
            if let v = doc["emailPrivacyConfig"], v != .null { try updated.applyEmailPrivacy(v, path: "emailPrivacyConfig") }
            updated.passwordPolicy = try PasswordPolicy.parse(doc["passwordPolicyConfig"] ?? .null, path: "passwordPolicyConfig")
        } catch {
            throw AuthError.invalidArgument("Invalid config: \(error.description)")
        }
        do throws(BlockingFunctionsConfig.Invalid) {
            updated.blockingFunctions = try BlockingFunctionsConfig.parse(doc["blockingFunctions"] ?? .null)
        } catch {
            throw error.authError
        }
        var rest = doc
        rest["name"] = nil
        rest["smsRegionConfig"] = nil
        rest["mfa"] = nil
        rest["recaptchaConfig"] = nil
        rest["blockingFunctions"] = nil
        rest["emailPrivacyConfig"] = nil
        rest["passwordPolicyConfig"] = nil
        rest.setValue(nil, atPath: ["signIn", "phoneNumber"])
        updated.passthrough = rest
        return updated
    }
}
