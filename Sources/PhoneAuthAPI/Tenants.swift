import EmulatorSupport
import PhoneAuthCore

/// `/identitytoolkit.googleapis.com/v2/projects/{p}/tenants[/{t}]`: create, list, get, update, delete (admin).
/// The Tenant resource as production: `name`, `displayName`, `allowPasswordSignup`, `enableEmailLinkSignin`,
/// `disableAuth`, `enableAnonymousUser`, `testPhoneNumbers`, `mfaConfig`, `emailPrivacyConfig`, `recaptchaConfig`,
/// `passwordPolicyConfig`, plus any other field, stored as given.
enum Tenants {
    static func resource(_ app: PhoneAuthApp, _ key: StoreKey) -> JSONObject {
        resource(key, app.emulator.tenantSettings(key) ?? TenantSettings(), app.emulator.config(key))
    }

    static func resource(_ key: StoreKey, _ t: TenantSettings, _ config: ProjectConfig) -> JSONObject {
        var o = t.extra
        o["name"] = .string("projects/\(key.projectId)/tenants/\(key.tenantId ?? "")")
        o["tenantId"] = .string(key.tenantId ?? "")
        o.set("displayName", t.displayName.map(JSON.string))
        o["allowPasswordSignup"] = .bool(t.allowPasswordSignup)
        o["enableEmailLinkSignin"] = .bool(t.enableEmailLinkSignin)
        o["disableAuth"] = .bool(t.disableAuth)
        o["enableAnonymousUser"] = .bool(t.enableAnonymousUser)
        o["testPhoneNumbers"] = ProjectConfig.testNumbersJSON(config.testPhoneNumbers)
        o["mfaConfig"] = config.mfa.json
        o["emailPrivacyConfig"] = ["enableImprovedEmailPrivacy": .bool(config.enableImprovedEmailPrivacy)]
        if config.recaptcha != RecaptchaSettings() { o["recaptchaConfig"] = config.recaptcha.json }
        if !config.blockingFunctions.isEmpty { o["blockingFunctions"] = config.blockingFunctions.json }
        if config.passwordPolicy.configured { o["passwordPolicyConfig"] = config.passwordPolicy.json }
        return o
    }

    /// Applies resource fields (all given ones, or only the masked paths) onto the tenant: read, merge and write of
    /// its settings and config in one transaction. `creating`: the tenant was just admitted for a create; an
    /// invalid body (or a failed commit) unregisters it again. Without a mask every settable field is replaced
    /// (production's `tenants.patch`: a field the body leaves out takes its proto default, `false`/empty); a create
    /// takes our defaults instead (password and anonymous sign-in on). Returns the resulting resource.
    static func apply(_ app: PhoneAuthApp, _ key: StoreKey, body: JSONObject, masks: [String]?, creating: Bool = false) throws -> JSONObject {
        let now = app.emulator.clock.nowMillis()
        return try app.emulator.updateTenant(key, creating: creating) { config, tenant throws(AuthError) -> JSONObject in
            let old = config.passwordPolicy
            (tenant, config) = try merged(key, tenant, config, body: body, masks: masks, creating: creating)
            config.passwordPolicy = config.passwordPolicy.stamped(after: old, nowMillis: now)
            return resource(key, tenant, config)
        }
    }

    static func merged(_ key: StoreKey, _ current: TenantSettings, _ currentConfig: ProjectConfig, body: JSONObject,
                       masks: [String]?, creating: Bool = false) throws(AuthError) -> (TenantSettings, ProjectConfig) {
        var doc = resource(key, current, currentConfig)
        if let masks, !masks.isEmpty {
            for m in masks {
                let path = m.split(separator: ".").map(String.init)
                // Only a path into objects sets anything: `displayName.0` or `mfaConfig.enabledProviders.x`
                // (indexing a string or a list) leaves the tenant as it is, as the official emulator.
                guard throughObjects(doc, path), throughObjects(body, path) else { continue }
                doc.setValue(body.value(atPath: path), atPath: path)
            }
        } else {
            doc = body
        }
        var t = TenantSettings()
        var extra = doc
        for k in ["name", "tenantId", "displayName", "allowPasswordSignup", "enableEmailLinkSignin", "disableAuth", "enableAnonymousUser", "testPhoneNumbers",
                  "mfaConfig", "blockingFunctions", "emailPrivacyConfig", "recaptchaConfig", "passwordPolicyConfig"] {
            extra[k] = nil
        }
        func flag(_ k: String, _ d: Bool) throws(AuthError) -> Bool {
            guard let v = doc[k], v != .null else { return d }
            guard let b = v.boolValue else { throw AuthError.invalidJSON("Invalid value at '\(k)' (TYPE_BOOL), \(v.serializedString.prefix(60))") }
            return b
        }
        if let n = doc["displayName"], n != .null {
            guard let s = n.stringValue, isValidDisplayName(s) else {
                throw AuthError(.invalidTenantDisplayName, "Display name must start with a letter and have 4 to 20 letters, digits or hyphens.")
            }
            t.displayName = s
        }
        t.allowPasswordSignup = try flag("allowPasswordSignup", creating)
        t.enableEmailLinkSignin = try flag("enableEmailLinkSignin", false)
        t.disableAuth = try flag("disableAuth", false)
        t.enableAnonymousUser = try flag("enableAnonymousUser", creating)
        t.extra = extra
        var config = currentConfig
        do throws(ConfigError) {
            config.testPhoneNumbers = [:]
            if let v = doc["testPhoneNumbers"] { config.testPhoneNumbers = try ProjectConfig.parseTestNumbers(v, path: "testPhoneNumbers") }
            config.mfa = .disabled  // a masked `mfaConfig` absent from the body is cleared
            if let v = doc["mfaConfig"], v != .null { try config.mfa.apply(v, path: "mfaConfig") }
            config.enableImprovedEmailPrivacy = ProjectConfig().enableImprovedEmailPrivacy
            if let v = doc["emailPrivacyConfig"], v != .null {
                try config.applyEmailPrivacy(v, path: "emailPrivacyConfig")
            }
            config.recaptcha = RecaptchaSettings()
            if let v = doc["recaptchaConfig"], v != .null { try config.recaptcha.apply(v, path: "recaptchaConfig") }
            config.passwordPolicy = try PasswordPolicy.parse(doc["passwordPolicyConfig"] ?? .null, path: "passwordPolicyConfig")
        } catch {
            throw AuthError.invalidArgument("Invalid tenant: \(error.description)")
        }
        do throws(BlockingFunctionsConfig.Invalid) {
            config.blockingFunctions = try BlockingFunctionsConfig.parse(doc["blockingFunctions"] ?? .null)
        } catch {
            throw error.authError
        }
        return (t, config)
    }

    /// Whether every step of `path` before the last names an object (or nothing) in `o`.
    static func throughObjects(_ o: JSONObject, _ path: [String]) -> Bool {
        (1..<max(path.count, 1)).allSatisfy { n in
            guard let v = o.value(atPath: Array(path.prefix(n))) else { return true }
            return v.objectValue != nil
        }
    }

    static func isValidDisplayName(_ s: String) -> Bool {
        guard (4...20).contains(s.count), let f = s.unicodeScalars.first, (f >= "a" && f <= "z") || (f >= "A" && f <= "Z") else { return false }
        return s.unicodeScalars.allSatisfy { ($0 >= "a" && $0 <= "z") || ($0 >= "A" && $0 <= "Z") || ($0 >= "0" && $0 <= "9") || $0 == "-" }
    }

    static func create(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        // Production's shape, `<display-name>-<5 random>`, from ASCII letters, digits and '-' only (a valid tenant id).
        let base = String((call.body["displayName"]?.stringValue ?? "tenant").lowercased().unicodeScalars
            .filter { ($0 >= "a" && $0 <= "z") || ($0 >= "0" && $0 <= "9") || $0 == "-" }.prefix(20).map(Character.init))
        var id = ""
        repeat {
            id = "\(base.isEmpty ? "tenant" : base)-\(app.emulator.random.alphanumeric(5).lowercased())"
        } while app.emulator.existingStore(StoreKey(projectId: call.projectId, tenantId: id)) != nil
        let key = StoreKey(projectId: call.projectId, tenantId: id)
        try app.emulator.admit(key, create: true, explicit: true)
        // A tenant made here has SMS MFA off unless the body turns it on (production and the official emulator).
        var body = call.body
        if body["mfaConfig"] == nil || body["mfaConfig"] == .null { body["mfaConfig"] = MFAConfig.disabled.json }
        return Reply(.object(try apply(app, key, body: body, masks: nil, creating: true)))
    }

    static func list(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        let size = Int(call.queryValue("pageSize") ?? "20") ?? 20
        guard (1...1000).contains(size) else { throw AuthError.invalidArgument("pageSize must be between 1 and 1000.") }
        var ids = app.emulator.tenants(of: call.projectId)
        if let token = call.queryValue("pageToken"), !token.isEmpty { ids = ids.filter { $0 > token } }
        let page = Array(ids.prefix(size))
        var o: JSONObject = ["tenants": .array(page.map { .object(resource(app, StoreKey(projectId: call.projectId, tenantId: $0))) })]
        if ids.count > size, let last = page.last { o["nextPageToken"] = .string(last) }
        return Reply(.object(o))
    }

    static func existing(_ app: PhoneAuthApp, _ call: Call) throws -> StoreKey {
        guard let t = call.pathTenant, app.emulator.existingStore(StoreKey(projectId: call.projectId, tenantId: t)) != nil else {
            throw AuthError(.tenantNotFound)
        }
        return StoreKey(projectId: call.projectId, tenantId: t)
    }

    static func get(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        Reply(.object(resource(app, try existing(app, call))))
    }

    static func patch(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        let key = try existing(app, call)
        let masks = call.queryValues("updateMask").flatMap { $0.split(separator: ",") }.map { $0.trimmingSpaces() }.filter { !$0.isEmpty }
        return Reply(.object(try apply(app, key, body: call.body, masks: masks)))
    }

    static func delete(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        try app.emulator.deleteTenant(try existing(app, call))
        return Reply(.object([:]))
    }
}
