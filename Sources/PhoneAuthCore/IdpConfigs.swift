import EmulatorSupport

// # Identity-provider configurations
//
// Production keeps one configuration per federated provider of a project or tenant: `defaultSupportedIdpConfigs`
// (google.com, apple.com, …), `oauthIdpConfigs` (`oidc.*`) and `inboundSamlConfigs` (`saml.*`), each with an
// `enabled` switch. Here they live in the store's config (`idpConfigs` in the config file and the emulator's config
// API, keyed by provider id), are served by the v2 admin resources (PhoneAuthAPI/IdpConfigEndpoints.swift), and
// travel with the config (journal, export). A provider whose configuration says `enabled: false` refuses sign-in
// (`OPERATION_NOT_ALLOWED`); one with no configuration signs in, as on the official emulator (production would refuse
// it: there, every provider must be configured first).

/// One provider's configuration: its id and the resource's fields as stored (without `name`).
public struct IdpConfig: Sendable, Equatable {
    public enum Kind: String, Sendable, CaseIterable {
        case defaultSupported = "defaultSupportedIdpConfigs"
        case oauth = "oauthIdpConfigs"
        case saml = "inboundSamlConfigs"

        /// The query parameter a create names the id with.
        public var idParameter: String {
            switch self {
            case .defaultSupported: "idpId"
            case .oauth: "oauthIdpConfigId"
            case .saml: "inboundSamlConfigId"
            }
        }
    }

    public var id: String
    public var fields: JSONObject

    public init(id: String, fields: JSONObject) {
        self.id = id
        self.fields = fields
    }

    public var kind: Kind? { Self.kind(of: id) }

    /// Refuses sign-in only when explicitly off.
    public var refusesSignIn: Bool { fields["enabled"]?.boolValue == false }

    /// The providers production's `defaultSupportedIdps` lists.
    public static let defaultSupportedIds: [String] = [
        "apple.com", "facebook.com", "gc.apple.com", "github.com", "google.com", "linkedin.com", "microsoft.com",
        "playgames.google.com", "twitter.com", "yahoo.com",
    ]

    /// Which resource a provider id belongs to; nil: none (not a provider id production configures).
    public static func kind(of id: String) -> Kind? {
        guard ProviderUserInfo.isValidProviderId(id) else { return nil }
        if id.hasPrefix("oidc.") { return id.utf8.count > 5 ? .oauth : nil }
        if id.hasPrefix("saml.") { return id.utf8.count > 5 ? .saml : nil }
        return defaultSupportedIds.contains(id) ? .defaultSupported : nil
    }

    /// At most this many configurations per project or tenant, each at most this many bytes of JSON.
    public static let maxPerStore = 256
    public static let maxBytes = 64 * 1024
}

extension ProjectConfig {
    /// The configuration of `providerId`, if any.
    public func idpConfig(_ providerId: String) -> IdpConfig? { idpConfigs.first { $0.id == providerId } }

    /// `OPERATION_NOT_ALLOWED` for a provider configured off.
    public func checkProviderEnabled(_ providerId: String) throws(AuthError) {
        if idpConfig(providerId)?.refusesSignIn == true {
            throw AuthError(.operationNotAllowed, "The identity provider configuration is disabled.")
        }
    }

    /// The config file's `idpConfigs`: `{providerId: {fields}}`, replaced whole.
    static func parseIdpConfigs(_ v: JSON, path: String) throws(ConfigError) -> [IdpConfig] {
        let o = try object(v, path)
        guard o.count <= IdpConfig.maxPerStore else { throw ConfigError(path: path, message: "at most \(IdpConfig.maxPerStore) providers") }
        var out: [IdpConfig] = []
        for (id, fields) in o {
            let p = join(path, id)
            guard IdpConfig.kind(of: id) != nil else {
                throw ConfigError(path: p, message: "not a configurable provider id (oidc.*, saml.* or one of \(IdpConfig.defaultSupportedIds.joined(separator: ", ")))")
            }
            var f = try object(fields, p)
            f["name"] = nil
            if let e = f["enabled"], e.boolValue == nil { throw ConfigError(path: join(p, "enabled"), message: "must be a boolean") }
            guard JSON.object(f).serialized().count <= IdpConfig.maxBytes else { throw ConfigError(path: p, message: "larger than \(IdpConfig.maxBytes) bytes") }
            out.append(IdpConfig(id: id, fields: f))
        }
        return out
    }

    var idpConfigsJSON: JSON {
        var o = JSONObject()
        for c in idpConfigs { o[c.id] = .object(c.fields) }
        return .object(o)
    }
}
