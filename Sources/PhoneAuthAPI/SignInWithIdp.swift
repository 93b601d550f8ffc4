import EmulatorSupport
import JWT
import PhoneAuthCore

/// `accounts:signInWithIdp` (legacy `relyingparty/verifyAssertion`): sign-in, sign-up and link (`idToken`) with a
/// federated credential, taken as the official emulator's tests and the SDKs pass it — `postBody` (or `requestUri`'s
/// query and fragment) carrying `providerId`, `id_token` (JSON claims or a JWT, its signature not checked),
/// `access_token` (the same, for providers the SDKs give only an access token), `oauth_token_secret`, `nonce` (the raw
/// nonce: an ID token's `nonce` claim must be its SHA-256, as production checks) and a SAML response (`SAMLResponse`,
/// JSON). The account is decided in PhoneAuthCore/IdpSignIn.swift.
enum SignInWithIdp {
    static func handle(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        var tenant = try call.tenant()
        try TenantGate.checkEnabled(app, StoreKey(projectId: call.projectId, tenantId: tenant))
        if try call.bool("returnRefreshToken") == true { throw AuthError(.notImplemented, "returnRefreshToken is not implemented yet.") }
        if let p = try call.string("pendingIdToken"), !p.isEmpty { throw AuthError(.notImplemented, "pendingIdToken is not implemented yet.") }
        let credential = try IdpCredential(call)
        var tokenUser: TokenIdentity? = nil
        if let idToken = try call.string("idToken"), !idToken.isEmpty {
            let (identity, _) = try app.verifiedUser(idToken, call: call, tenant: tenant)
            tenant = identity.tenantId
            tokenUser = identity
        }
        let key = StoreKey(projectId: call.projectId, tenantId: tenant)
        let request = SignInRequest.Idp(profile: credential.profile, tokenUser: tokenUser, autoCreate: try call.bool("autoCreate") ?? true,
                                        clientIP: call.request.remoteAddress, credential: credential.forFunctions)
        return try app.signIn(call, key, .idp(request), Answer(credential: credential, tenantId: tenant,
                                                                returnIdpCredential: try call.bool("returnIdpCredential") ?? false))
    }

    struct Answer: SignInAnswer {
        let credential: IdpCredential
        let tenantId: String?
        let returnIdpCredential: Bool

        var signInAttributes: JSONObject? { credential.signInAttributes }

        func reply(_ app: PhoneAuthApp, _ call: Call, _ s: SignedIn, idToken: String) -> Reply {
            var o = credential.responseBase(emailVerified: s.user.email == credential.profile.email
                ? (s.user.email == nil ? nil : s.user.emailVerified) : credential.profile.emailVerified)
            if s.emailRecycled { o["emailRecycled"] = true }
            if s.isNewUser { o["isNewUser"] = true }
            o["localId"] = .string(s.user.localId)
            o.set("tenantId", tenantId.map(JSON.string))
            o["idToken"] = .string(idToken)
            o["refreshToken"] = .string(s.refreshToken)
            o["expiresIn"] = .string(TokenService.tokenLifetimeText)
            return Reply(.object(o))
        }

        func reply(_ app: PhoneAuthApp, _ call: Call, ended outcome: SignInOutcome) throws -> Reply {
            switch outcome {
            case .secondFactorRequired(let user, let first):
                var o = credential.responseBase(emailVerified: user.email == credential.profile.email
                    ? (user.email == nil ? nil : user.emailVerified) : credential.profile.emailVerified)
                o["localId"] = .string(user.localId)
                o.set("tenantId", tenantId.map(JSON.string))
                for (k, v) in MFAJSON.pendingReply(first) ?? [:] { o[k] = v }
                return Reply(.object(o))
            case .needConfirmation(let localId, let verified):
                // The SDKs raise auth/account-exists-with-different-credential on the key's presence.
                var o = credential.responseBase(emailVerified: credential.profile.emailVerified)
                o["needConfirmation"] = true
                o["localId"] = .string(localId)
                o.set("verifiedProvider", verified.map { .array($0.map(JSON.string)) })
                return Reply(.object(o))
            default:
                throw AuthError.internalError("unexpected federated sign-in outcome")
            }
        }

        /// With `returnIdpCredential` (the SDKs' popup and redirect flows), an identity or email that belongs to
        /// another account answers 200 with `errorMessage` and the credential, so the app can sign in to that account
        /// and link it (`auth/credential-already-in-use`, `auth/email-already-in-use` with the credential attached).
        func recover(_ app: PhoneAuthApp, _ call: Call, _ error: AuthError) -> Reply? {
            guard returnIdpCredential, error.code == .federatedUserIdAlreadyLinked || error.code == .emailExists else { return nil }
            var o = credential.responseBase(emailVerified: credential.profile.emailVerified)
            o["errorMessage"] = .string(error.code.rawValue)
            return Reply(.object(o))
        }
    }
}

/// A federated credential as the request gives it, checked, with the profile it asserts.
struct IdpCredential: Sendable {
    var profile: IdpProfile
    /// What the client posted (`id_token`, `access_token`, `oauth_token_secret`): echoed as production does.
    var idToken: String?
    var accessToken: String?
    var tokenSecret: String?
    /// The provider's profile as the SDKs read it (`getAdditionalUserInfo(...).profile`): JSON text.
    var rawUserInfo: String?
    var firstName: String?
    var lastName: String?
    /// `google.com`: the prefixed form production answers; else the raw id.
    var federatedId: String
    /// A SAML response's attribute statements (`firebase.sign_in_attributes`).
    var signInAttributes: JSONObject?

    /// What blocking functions get (the response's access token, a fake one when the client sent none).
    var forFunctions: FederatedCredential {
        FederatedCredential(rawUserInfo: rawUserInfo, idToken: idToken, accessToken: oauthAccessToken, tokenSecret: tokenSecret,
                            signInAttributes: signInAttributes)
    }

    var oauthAccessToken: String { accessToken ?? "FirebaseAuthEmulatorFakeAccessToken_" + profile.providerId }

    /// At most this many bytes of a credential's merged parameters are echoed in an error.
    static let maxEchoedBytes = 2048

    init(_ call: Call) throws(AuthError) {
        guard let requestUri = try call.string("requestUri"), !requestUri.isEmpty else {
            throw AuthError(.missingRequestUri)
        }
        guard CreateAuthUri.isAbsoluteURI(requestUri) else { throw AuthError(.invalidRequestUri) }
        let params = Self.parameters(requestUri: requestUri, postBody: try call.string("postBody"))
        func param(_ name: String) -> String? {
            guard let v = params.pairs.first(where: { $0.0 == name })?.1, !v.isEmpty else { return nil }
            return v
        }
        guard let providerId = param("providerId")?.lowercased() else {
            throw AuthError(.invalidCredentialOrProviderId, "Invalid IdP response/credential: " + Self.echo(params.url))
        }
        guard ProviderUserInfo.isValidProviderId(providerId) else { throw AuthError(.invalidProviderId, "Provider Id is not supported.") }
        idToken = param("id_token")
        accessToken = param("access_token")
        tokenSecret = param("oauth_token_secret")
        let idClaims = try Self.claims(idToken)
        var fromAccessToken: JSONObject? = nil
        if idClaims == nil { fromAccessToken = try Self.claims(accessToken) }
        guard let claims = idClaims ?? fromAccessToken else {
            if let idToken {
                throw AuthError(.invalidIdpResponse, "Unable to parse id_token: \(Self.echo(idToken)) ((Auth Emulator only accepts strict JSON or JWTs as fake id_tokens.))")
            }
            if accessToken != nil {
                if providerId == "google.com" || providerId == "apple.com" {
                    throw AuthError(.notImplemented,
                                    "The Auth Emulator only support sign-in with \(providerId) using id_token, not access_token. Please update your code to use id_token.")
                }
                throw AuthError(.notImplemented, "The Auth Emulator does not support \(providerId) sign-in with credentials.")
            }
            throw AuthError(.notImplemented, "The Auth Emulator only supports sign-in with credentials (id_token required).")
        }
        if let idClaims { try Self.checkNonce(idClaims, rawNonce: param("nonce")) }
        var nameId: String? = nil
        if let saml = param("SAMLResponse") {
            guard let parsed = try? JSONParser.parse(Array(saml.utf8), maxDepth: 16) else {
                throw AuthError(.invalidIdpResponse, "((SAMLResponse is not valid JSON.))")
            }
            guard let assertion = parsed["assertion"]?.objectValue else {
                throw AuthError(.invalidIdpResponse, "((Missing assertion in SAMLResponse.))")
            }
            guard let subject = assertion["subject"]?.objectValue else {
                throw AuthError(.invalidIdpResponse, "((Missing assertion.subject in SAMLResponse.))")
            }
            guard let n = subject["nameId"]?.stringValue, !n.isEmpty else {
                throw AuthError(.invalidIdpResponse, "((Missing assertion.subject.nameId in SAMLResponse.))")
            }
            nameId = n
            signInAttributes = assertion["attributeStatements"]?.objectValue
        }
        profile = try Self.profile(providerId: providerId, claims: claims, samlNameId: nameId)
        let sub = profile.rawId
        switch providerId {
        case "google.com":
            federatedId = "https://accounts.google.com/" + sub
            firstName = claims["given_name"]?.stringValue
            lastName = claims["family_name"]?.stringValue
            var info = JSONObject()
            let scopes = "openid https://www.googleapis.com/auth/userinfo.profile"
            info["granted_scopes"] = .string(profile.email == nil ? scopes : scopes + " https://www.googleapis.com/auth/userinfo.email")
            info["id"] = .string(sub)
            info.set("name", profile.displayName.map(JSON.string))
            info.set("given_name", firstName.map(JSON.string))
            info.set("family_name", lastName.map(JSON.string))
            info["verified_email"] = .bool(profile.emailVerified)
            info["locale"] = "en"
            info.set("email", profile.email.map(JSON.string))
            info.set("picture", profile.photoUrl.map(JSON.string))
            rawUserInfo = JSON.object(info).serializedString
        case _ where providerId.hasPrefix("saml."):
            federatedId = sub
            rawUserInfo = signInAttributes.map { JSON.object($0).serializedString }
        default:
            federatedId = sub
            rawUserInfo = JSON.object(claims).serializedString
        }
    }

    /// The answer's common members, in production's order: the provider's profile and the credential.
    func responseBase(emailVerified: Bool?) -> JSONObject {
        var o: JSONObject = ["kind": "identitytoolkit#VerifyAssertionResponse", "context": "", "providerId": .string(profile.providerId)]
        o.set("displayName", profile.displayName.map(JSON.string))
        o.set("fullName", profile.displayName.map(JSON.string))
        o.set("screenName", profile.screenName.map(JSON.string))
        o.set("email", profile.email.map(JSON.string))
        o.set("emailVerified", emailVerified.map(JSON.bool))
        o.set("photoUrl", profile.photoUrl.map(JSON.string))
        o.set("firstName", firstName.map(JSON.string))
        o.set("lastName", lastName.map(JSON.string))
        o.set("rawUserInfo", rawUserInfo.map(JSON.string))
        o["federatedId"] = .string(federatedId)
        o["oauthAccessToken"] = .string(oauthAccessToken)
        o.set("oauthIdToken", idToken.map(JSON.string))
        o.set("oauthTokenSecret", tokenSecret.map(JSON.string))
        return o
    }

    // MARK: parsing

    /// `requestUri`'s query, then `postBody`'s parameters over it, then its fragment's over both (the official
    /// emulator's normalisation); and the merged URL, as an error shows it.
    static func parameters(requestUri: String, postBody: String?) -> (pairs: [(String, String)], url: String) {
        var base = Substring(requestUri), fragment: Substring = "", query: Substring = ""
        if let h = base.firstIndex(of: "#") {
            fragment = base[base.index(after: h)...]
            base = base[..<h]
        }
        if let q = base.firstIndex(of: "?") {
            query = base[base.index(after: q)...]
            base = base[..<q]
        }
        // O(parameters): a body may carry hundreds of thousands of them.
        var pairs: [(String, String)?] = []
        var first: [String: Int] = [:], later: [String: [Int]] = [:]
        for (k, v) in URLEncoding.parsePairs(query) {
            if first[k] == nil { first[k] = pairs.count } else { later[k, default: []].append(pairs.count) }
            pairs.append((k, v))
        }
        // For each name of `more`, URLSearchParams.set(name, more.get(name)): its first value (the official emulator's
        // loop); in the merged list the first of the name takes the value and the others go.
        func set(_ more: [(String, String)]) {
            var seen = Set<String>()
            for (k, v) in more where seen.insert(k).inserted {
                guard let i = first[k] else { first[k] = pairs.count; pairs.append((k, v)); continue }
                pairs[i]?.1 = v
                for j in later.removeValue(forKey: k) ?? [] { pairs[j] = nil }
            }
        }
        if let postBody { set(URLEncoding.parsePairs(postBody)) }
        set(URLEncoding.parsePairs(fragment))
        let merged = pairs.compactMap { $0 }
        if let r = base.firstRange(of: "://"), !base[r.upperBound...].contains("/") { base += "/" }
        let q = merged.map { formEncode($0.0) + "=" + formEncode($0.1) }.joined(separator: "&")
        return (merged, q.isEmpty ? String(base) : base + "?" + q)
    }

    /// URLSearchParams' serialization (what the official emulator's message shows): `*-._` and alphanumerics as they
    /// are, a space as `+`, every other byte `%XX`.
    static func formEncode(_ s: String) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(s.utf8.count)
        for b in s.utf8 {
            switch b {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "*"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"):
                out.append(b)
            case UInt8(ascii: " "): out.append(UInt8(ascii: "+"))
            default: out += [UInt8(ascii: "%"), hex[Int(b >> 4)], hex[Int(b & 15)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The claims of a fake ID token: JSON text starting with `{`, else a JWT (its signature not checked); nil when
    /// neither (or absent). Both need a string `sub`.
    static func claims(_ token: String?) throws(AuthError) -> JSONObject? {
        guard let token else { return nil }
        let claims: JSONObject
        if token.utf8.first == UInt8(ascii: "{") {
            guard case .object(let o)? = try? JSONParser.parse(Array(token.utf8), maxDepth: 16) else {
                throw AuthError(.invalidIdpResponse, "Unable to parse id_token: \(echo(token)) ((Auth Emulator failed to parse fake id_token as strict JSON.))")
            }
            claims = o
        } else {
            guard let jwt = DecodedJWT(token) else { return nil }
            claims = jwt.payload
        }
        guard let sub = claims["sub"], sub != .null, sub != .string(""), sub != .bool(false), sub != .number(0) else {
            throw AuthError(.invalidIdpResponse,
                            "Invalid Idp Response: id_token missing required fields. ((Missing \"sub\" field. This field is required and must be a unique identifier.))")
        }
        guard let s = sub.stringValue else { throw AuthError(.invalidIdpResponse, "((The \"sub\" field must be a string.))") }
        guard s.utf8.count <= ProviderUserInfo.maxRawIdLength, !Identifiers.containsControlCharacters(s) else {
            throw AuthError(.invalidIdpResponse, "((The \"sub\" field must be at most \(ProviderUserInfo.maxRawIdLength) bytes, without control characters.))")
        }
        return claims
    }

    /// Production's nonce check (Apple, OIDC, Google with a nonce): an ID token's `nonce` claim must be the hex
    /// SHA-256 of the raw nonce the request carries.
    static func checkNonce(_ claims: JSONObject, rawNonce: String?) throws(AuthError) {
        guard let claimed = claims["nonce"]?.stringValue, !claimed.isEmpty else { return }
        guard let rawNonce else { throw AuthError(.missingOrInvalidNonce, "Nonce is missing in the request.") }
        let hex = sha256(Array(rawNonce.utf8)).map { b in
            let digits = Array("0123456789abcdef".utf8)
            return String(decoding: [digits[Int(b >> 4)], digits[Int(b & 15)]], as: UTF8.self)
        }.joined()
        guard claimed.lowercased() == hex else {
            throw AuthError(.missingOrInvalidNonce,
                            "The nonce in ID Token \"\(echo(claimed))\" does not match the SHA256 hash of the raw nonce \"\(echo(rawNonce))\" in the request.")
        }
    }

    /// The profile the claims assert: `name`, `picture`, `screen_name`, `email` (lower-cased) and `email_verified`
    /// (`true` or `"true"`); a SAML response's name id is the email when it is one, and SAML emails count as verified.
    static func profile(providerId: String, claims: JSONObject, samlNameId: String?) throws(AuthError) -> IdpProfile {
        func text(_ key: String, limit: Int) throws(AuthError) -> String? {
            guard let v = claims[key]?.stringValue, !v.isEmpty else { return nil }
            guard v.utf16.count <= limit else { throw AuthError(.invalidIdpResponse, "((The \"\(key)\" claim is longer than \(limit) characters.))") }
            return v
        }
        var email = try text("email", limit: 320)?.lowercased()
        var verified: Bool
        switch claims["email_verified"] {
        case .bool(let b)?: verified = b
        case .string(let s)?: verified = s.lowercased() == "true"
        default: verified = false
        }
        if providerId.hasPrefix("saml.") {
            if let n = samlNameId, Identifiers.isValidEmail(n) { email = n }
            verified = true
        }
        if let e = email, !Identifiers.isValidEmail(e) {
            throw AuthError(.invalidIdpResponse, "((The \"email\" claim is not an email address.))")
        }
        return IdpProfile(providerId: providerId, rawId: claims["sub"]?.stringValue ?? "", displayName: try text("name", limit: UserFieldLimits.displayName),
                          photoUrl: try text("picture", limit: UserFieldLimits.photoUrl), screenName: try text("screen_name", limit: UserFieldLimits.displayName),
                          email: email, emailVerified: verified)
    }

    /// Client text in an error message: bounded.
    static func echo(_ s: String) -> String {
        s.utf8.count <= maxEchoedBytes ? s : String(decoding: s.utf8.prefix(maxEchoedBytes), as: UTF8.self) + "…"
    }
}
