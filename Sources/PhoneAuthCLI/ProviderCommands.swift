import EmulatorSupport

/// `idp sign-in` and `users create --provider`: federated (Google, Apple, …) test users (issue 25).
extension Commands {
    // MARK: idp sign-in

    /// A provider id as the emulator accepts one: lower-case letters, digits, `.`, `-` and `_`, at most 128, not one
    /// of the providers a record derives from its fields.
    static func checkProviderId(_ id: String) throws(UsageError) -> String {
        guard !id.isEmpty, id.utf8.count <= 128, !["phone", "password", "email"].contains(id),
            id.utf8.allSatisfy({ ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2E || $0 == 0x2D || $0 == 0x5F })
        else { throw UsageError("PROVIDER is a provider id such as google.com, apple.com, github.com or oidc.example (lower-case letters, digits, '.', '-', '_')") }
        return id
    }

    /// 20 random digits: a new subject, so a new user, each time `--sub` is not given.
    static func randomSubject() -> String {
        var g = SystemRandomNumberGenerator()
        return String((0..<20).map { _ in Character(String(g.next(upperBound: UInt8(10)))) })
    }

    /// The `accounts:signInWithIdp` body of `idp sign-in`: what an app's `signInWithCredential` sends, with the
    /// emulator's test convention for the credential (an `id_token` that is a JSON object of claims).
    static func idpSignInBody(provider: String, _ args: Arguments, subject: () -> String) throws(UsageError) -> JSONObject {
        let providerId = try checkProviderId(provider)
        var claims: JSONObject = ["sub": .string(args.value("sub") ?? subject())]
        if claims["sub"] == "" { throw UsageError("--sub may not be empty") }
        if let e = args.value("email") {
            claims["email"] = .string(e)
            claims["email_verified"] = true
        }
        claims.set("name", args.value("name").map(JSON.string))
        claims.set("picture", args.value("picture").map(JSON.string))
        let token = URLEncoding.percentEncode(JSON.object(claims).serializedString)
        return ["requestUri": "http://localhost", "returnSecureToken": true, "returnIdpCredential": true,
                "postBody": .string("id_token=\(token)&providerId=\(URLEncoding.percentEncode(providerId))")]
    }

    static func idpSignIn(_ s: Session, _ a: [String]) throws {
        var body = try idpSignInBody(provider: a[0], s.args, subject: randomSubject)
        let c = try s.client()
        body["targetProjectId"] = .string(c.project)
        let r = try c.request("POST", "/identitytoolkit.googleapis.com/v1/accounts:signInWithIdp", body: c.clientBody(body), admin: true)
        // With returnIdpCredential a linking conflict is a 200 with errorMessage, as the SDK reads it.
        if let e = r["errorMessage"]?.stringValue { throw APIError(status: 200, message: e) }
        s.emit(r, rows: [
            ("uid", r["localId"]?.stringValue ?? ""), ("provider", r["providerId"]?.stringValue ?? a[0]),
            ("federated id", r["federatedId"]?.stringValue ?? ""), ("email", r["email"]?.stringValue ?? "-"),
            ("new user", r["isNewUser"]?.boolValue == true ? "yes" : "no"), ("expires in", (r["expiresIn"]?.stringValue ?? "?") + " s"),
            ("ID token", r["idToken"]?.stringValue ?? ""), ("refresh token", r["refreshToken"]?.stringValue ?? ""),
        ])
    }

    // MARK: users create --provider

    /// `PROVIDER:RAWID[:EMAIL]` → the admin `linkProviderUserInfo` object (the email is the part after the last `:`
    /// when it contains `@`, so a raw id may itself contain `:`).
    static func providerToLink(_ spec: String, displayName: String?) throws(UsageError) -> JSONObject {
        guard let colon = spec.firstIndex(of: ":") else { throw UsageError("--provider is PROVIDER:RAWID[:EMAIL], e.g. google.com:1234567890:ada@example.com") }
        let providerId = try checkProviderId(String(spec[..<colon]))
        var rawId = String(spec[spec.index(after: colon)...])
        var email: String? = nil
        if let last = rawId.lastIndex(of: ":"), rawId[rawId.index(after: last)...].contains("@") {
            email = String(rawId[rawId.index(after: last)...])
            rawId = String(rawId[..<last])
        }
        guard !rawId.isEmpty else { throw UsageError("--provider \(providerId): the raw id (the provider's uid) is empty") }
        var o: JSONObject = ["providerId": .string(providerId), "rawId": .string(rawId)]
        o.set("email", email.map(JSON.string))
        o.set("displayName", displayName.map(JSON.string))
        return o
    }
}
