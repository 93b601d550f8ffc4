import EmulatorSupport
import PhoneAuthCore

/// `POST /v2/accounts:revokeToken` (the JS SDK's `revokeAccessToken(auth, token)`, the iOS SDK's
/// `revokeToken(withAuthorizationCode:)`): revokes an Apple token of the signed-in user. Production passes the token
/// (or, for `CODE`, the token it exchanges the code for) to Apple; no Apple is reached here, so any token is accepted,
/// nothing is stored, and the revocation is an `idpToken.revoked` event (uid, provider, token type — never the token).
/// Answers `{}`, as production.
enum RevokeToken {
    /// `TokenType` by name or by its proto number.
    static let tokenTypes: [String: String] = [
        "REFRESH_TOKEN": "REFRESH_TOKEN", "ACCESS_TOKEN": "ACCESS_TOKEN", "CODE": "CODE",
        "1": "REFRESH_TOKEN", "2": "ACCESS_TOKEN", "3": "CODE",
    ]

    static func handle(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        let key = try call.storeKey()
        try TenantGate.checkEnabled(app, key)
        guard let providerId = try call.string("providerId"), !providerId.isEmpty else { throw AuthError(.missingProviderId) }
        // Production: "Currently only supports Apple Idp".
        guard providerId == "apple.com" else {
            throw AuthError(.invalidProviderId, "Only apple.com tokens can be revoked.")
        }
        let rawType = try tokenTypeText(call)
        guard let rawType, rawType != "TOKEN_TYPE_UNSPECIFIED", rawType != "0" else {
            throw AuthError.invalidArgument("tokenType is required: REFRESH_TOKEN, ACCESS_TOKEN or CODE.")
        }
        guard let tokenType = tokenTypes[rawType] else {
            throw AuthError.invalidJSON("Invalid value at 'token_type' (TYPE_ENUM), \"\(rawType.prefix(100))\"")
        }
        guard let token = try call.string("token"), !token.isEmpty else { throw AuthError.invalidArgument("token is required.") }
        if tokenType == "CODE" {
            // An authorization code is exchanged with the redirect URI of the authorization request.
            guard let uri = try call.string("redirectUri"), !uri.isEmpty else {
                throw AuthError.invalidArgument("redirectUri is required when tokenType is CODE.")
            }
            guard isAcceptableRedirect(uri) else {
                throw AuthError.invalidArgument("redirectUri must be an https URI with a domain name, not an IP address or localhost.")
            }
        } else if let uri = try call.string("redirectUri"), !uri.isEmpty, !isAcceptableRedirect(uri) {
            throw AuthError.invalidArgument("redirectUri must be an https URI with a domain name, not an IP address or localhost.")
        }
        let (identity, user) = try app.verifiedUser(try call.string("idToken"), call: call, tenant: key.tenantId)
        let userKey = StoreKey(projectId: call.projectId, tenantId: identity.tenantId)
        app.emulator.events.emit(userKey, .idpTokenRevoked(uid: user.localId, providerId: providerId, tokenType: tokenType))
        app.logger.info("revoked an apple.com \(tokenType) for \(user.localId)", [("project", userKey.description)])
        return Reply(.object([:]))
    }

    /// `tokenType` as text: a name, or a proto enum number.
    static func tokenTypeText(_ call: Call) throws(AuthError) -> String? {
        switch call.body["tokenType"] {
        case nil, .null?: return nil
        case .number(let d)?: return d == d.rounded() && abs(d) < 1e6 ? String(Int(d)) : String(d)
        default: return try call.string("tokenType")
        }
    }

    /// Production's rule for `redirectUri`: HTTPS, a domain name, no IP address and no localhost.
    static func isAcceptableRedirect(_ uri: String) -> Bool {
        guard uri.utf8.count <= 2048, uri.lowercased().hasPrefix("https://") else { return false }
        let rest = uri.dropFirst(8)
        var host = rest.prefix(while: { $0 != "/" && $0 != "?" && $0 != "#" })
        if host.contains("@") { return false }
        if host.hasPrefix("[") { return false }  // an IPv6 literal
        if let colon = host.lastIndex(of: ":") { host = host[..<colon] }
        let h = host.lowercased()
        guard !h.isEmpty, h.contains("."), h != "localhost", !h.hasSuffix(".localhost") else { return false }
        // A dotted IPv4 literal is all digits and dots.
        if h.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }) { return false }
        return h.unicodeScalars.allSatisfy { ($0.value >= 0x61 && $0.value <= 0x7A) || ($0.value >= 0x30 && $0.value <= 0x39) || $0 == "-" || $0 == "." }
    }
}
