import EmulatorSupport
import PhoneAuthCore

/// The provider-configuration admin resources of Identity Toolkit v2 (firebase-admin's `create_oidc_provider_config`,
/// `update_saml_provider_config`, …): `/v2/projects/{p}[/tenants/{t}]/{oauthIdpConfigs|inboundSamlConfigs|
/// defaultSupportedIdpConfigs}[/{id}]` — create (`?oauthIdpConfigId=` / `?inboundSamlConfigId=` / `?idpId=`), get,
/// list (`pageSize`, `pageToken`), patch (`updateMask`), delete; and `GET /v2/defaultSupportedIdps`. Stored in the
/// store's config (PhoneAuthCore/IdpConfigs.swift); `enabled: false` turns the provider's sign-in off.
enum IdpConfigEndpoints {
    static func create(_ kind: IdpConfig.Kind) -> Handler {
        { app, call in
            let key = try storeKey(app, call)
            guard let id = call.queryValue(kind.idParameter), !id.isEmpty else { throw AuthError(.missingProviderId) }
            guard IdpConfig.kind(of: id) == kind else { throw invalidId(kind) }
            let fields = try checked(kind, id: id, fields(call.body))
            let stored = try app.emulator.updateConfig(key) { config, _ throws(AuthError) -> IdpConfig in
                guard config.idpConfig(id) == nil else { throw AuthError(.configurationExists) }
                guard config.idpConfigs.count < IdpConfig.maxPerStore else {
                    throw AuthError(.quotaExceeded, "At most \(IdpConfig.maxPerStore) provider configurations per project or tenant.")
                }
                let c = IdpConfig(id: id, fields: fields)
                config.idpConfigs.append(c)
                return c
            }
            return Reply(.object(resource(key, kind, stored)))
        }
    }

    static func get(_ kind: IdpConfig.Kind) -> Handler {
        { app, call in
            let key = try storeKey(app, call)
            let id = try configId(call, kind)
            guard let c = app.emulator.config(key).idpConfig(id) else { throw AuthError(.configurationNotFound) }
            return Reply(.object(resource(key, kind, c)))
        }
    }

    static func list(_ kind: IdpConfig.Kind) -> Handler {
        { app, call in
            let key = try storeKey(app, call)
            var size = 100
            if let s = call.queryValue("pageSize"), !s.isEmpty {
                guard let n = Int(s), n >= 0 else { throw AuthError.invalidArgument("pageSize must be a non-negative integer.") }
                size = n == 0 ? 100 : min(n, 100)
            }
            var all = app.emulator.config(key).idpConfigs.filter { $0.kind == kind }
            if let token = call.queryValue("pageToken"), !token.isEmpty {
                guard let i = all.firstIndex(where: { $0.id == token }) else { throw AuthError.invalidArgument("Invalid page token.") }
                all.removeFirst(i + 1)
            }
            let page = all.prefix(size)
            var o: JSONObject = [kind.rawValue: .array(page.map { .object(resource(key, kind, $0)) })]
            if all.count > size, let last = page.last { o["nextPageToken"] = .string(last.id) }
            return Reply(.object(o))
        }
    }

    static func patch(_ kind: IdpConfig.Kind) -> Handler {
        { app, call in
            let key = try storeKey(app, call)
            let id = try configId(call, kind)
            let body = try fields(call.body)
            let masks = call.queryValue("updateMask").map { $0.split(separator: ",").map { String($0).trimmingSpaces() } }
            let stored = try app.emulator.updateConfig(key) { config, _ throws(AuthError) -> IdpConfig in
                guard let i = config.idpConfigs.firstIndex(where: { $0.id == id }) else { throw AuthError(.configurationNotFound) }
                var merged = config.idpConfigs[i].fields
                if let masks, !masks.isEmpty {
                    for m in masks where !m.isEmpty {
                        let path = m.split(separator: ".").map(String.init)
                        guard path.first != "name" else { continue }
                        merged.setValue(body.value(atPath: path), atPath: path)
                    }
                } else {
                    merged = merged.merging(body)
                }
                config.idpConfigs[i].fields = try checked(kind, id: id, merged)
                return config.idpConfigs[i]
            }
            return Reply(.object(resource(key, kind, stored)))
        }
    }

    static func delete(_ kind: IdpConfig.Kind) -> Handler {
        { app, call in
            let key = try storeKey(app, call)
            let id = try configId(call, kind)
            try app.emulator.updateConfig(key) { config, _ throws(AuthError) in
                guard let i = config.idpConfigs.firstIndex(where: { $0.id == id }) else { throw AuthError(.configurationNotFound) }
                config.idpConfigs.remove(at: i)
            }
            return Reply(.object(JSONObject()))
        }
    }

    /// `GET /v2/defaultSupportedIdps`: the providers a `defaultSupportedIdpConfigs` may name.
    static func supported(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        Reply(["defaultSupportedIdps": .array(IdpConfig.defaultSupportedIds.map { id in
            ["idpId": .string(id), "description": .string(descriptions[id] ?? id)]
        })])
    }

    static let descriptions = [
        "apple.com": "Apple", "facebook.com": "Facebook", "gc.apple.com": "Game Center", "github.com": "GitHub", "google.com": "Google",
        "linkedin.com": "LinkedIn", "microsoft.com": "Microsoft", "playgames.google.com": "Play Games", "twitter.com": "Twitter",
        "yahoo.com": "Yahoo",
    ]

    // MARK: helpers

    /// The project, or a tenant that exists (the v2 resources never create one).
    static func storeKey(_ app: PhoneAuthApp, _ call: Call) throws(AuthError) -> StoreKey {
        let key = StoreKey(projectId: call.projectId, tenantId: call.pathTenant)
        if key.tenantId != nil, app.emulator.tenantSettings(key) == nil { throw AuthError(.tenantNotFound) }
        return key
    }

    static func configId(_ call: Call, _ kind: IdpConfig.Kind) throws(AuthError) -> String {
        guard let id = call.params.config, !id.isEmpty else { throw AuthError(.missingProviderId) }
        guard IdpConfig.kind(of: id) == kind else { throw invalidId(kind) }
        return id
    }

    static func invalidId(_ kind: IdpConfig.Kind) -> AuthError {
        switch kind {
        case .oauth: AuthError(.invalidProviderId, "OIDC provider ids start with \"oidc.\".")
        case .saml: AuthError(.invalidProviderId, "SAML provider ids start with \"saml.\".")
        case .defaultSupported: AuthError(.invalidProviderId, "Supported providers: \(IdpConfig.defaultSupportedIds.joined(separator: ", ")).")
        }
    }

    static func fields(_ body: JSONObject) throws(AuthError) -> JSONObject {
        var f = body
        f["name"] = nil
        guard JSON.object(f).serialized().count <= IdpConfig.maxBytes else {
            throw AuthError(.invalidConfig, "A provider configuration is at most \(IdpConfig.maxBytes) bytes.")
        }
        return f
    }

    /// A resource's required fields, as production checks them.
    static func checked(_ kind: IdpConfig.Kind, id: String, _ f: JSONObject) throws(AuthError) -> JSONObject {
        if let e = f["enabled"], e != .null, e.boolValue == nil { throw AuthError.invalidJSON("Invalid value at 'enabled' (TYPE_BOOL), \(e.serializedString.prefix(60))") }
        if let d = f["displayName"], d != .null, d.stringValue == nil { throw AuthError.invalidJSON("Invalid value at 'display_name' (TYPE_STRING)") }
        func text(_ v: JSON?) -> String? { v?.stringValue.flatMap { $0.isEmpty ? nil : $0 } }
        switch kind {
        case .oauth:
            guard text(f["clientId"]) != nil else { throw AuthError(.missingOauthClientId) }
            guard let issuer = text(f["issuer"]) else { throw AuthError(.missingIssuer) }
            guard CreateAuthUri.isAbsoluteURI(issuer) else { throw AuthError(.invalidConfig, "Invalid issuer URL.") }
            if f.value(atPath: ["responseType", "code"])?.boolValue == true, text(f["clientSecret"]) == nil {
                throw AuthError(.invalidConfig, "A code flow needs a clientSecret.")
            }
        case .saml:
            guard case .object(let idp)? = f["idpConfig"], text(idp["idpEntityId"]) != nil, let sso = text(idp["ssoUrl"]) else {
                throw AuthError(.invalidConfig, "idpConfig needs idpEntityId and ssoUrl.")
            }
            guard CreateAuthUri.isAbsoluteURI(sso) else { throw AuthError(.invalidConfig, "Invalid ssoUrl.") }
            guard case .object(let sp)? = f["spConfig"], text(sp["spEntityId"]) != nil, let cb = text(sp["callbackUri"]) else {
                throw AuthError(.missingSamlRelyingPartyConfig)
            }
            guard CreateAuthUri.isAbsoluteURI(cb) else { throw AuthError(.invalidConfig, "Invalid callbackUri.") }
        case .defaultSupported:
            break
        }
        return f
    }

    static func resource(_ key: StoreKey, _ kind: IdpConfig.Kind, _ c: IdpConfig) -> JSONObject {
        var o: JSONObject = ["name": .string("projects/\(key.projectId)\(key.tenantId.map { "/tenants/\($0)" } ?? "")/\(kind.rawValue)/\(c.id)")]
        for (k, v) in c.fields { o[k] = v }
        return o
    }
}
