import EmulatorSupport
import JWT
import PhoneAuthCore

/// App Check for Authentication: tokens in production's form (RS256, their own key set), the debug-token exchange at
/// production's REST path, the JWKS, and the check every client call passes under `appCheck.enforcement`.
enum AppCheckEndpoints {
    static let issuerPrefix = "https://firebaseappcheck.googleapis.com/"
    static var issuer: String { issuerPrefix + PhoneAuthApp.projectNumber }

    /// The app a token is minted for when none is named: the first registered app, else a web app id derived from
    /// the project id (stable across runs).
    static func defaultAppID(projectId: String, _ config: AppCheckConfig) -> String {
        if let first = config.apps.first { return first }
        let hex = Array("0123456789abcdef".utf8)
        var tail: [UInt8] = []
        for b in sha256(Array(projectId.utf8)).prefix(11) { tail.append(hex[Int(b >> 4)]); tail.append(hex[Int(b & 15)]) }
        return "1:\(PhoneAuthApp.projectNumber):web:" + String(decoding: tail, as: UTF8.self)
    }

    /// An app id this store accepts: well-formed, of the project number, registered when `apps` is set.
    static func checkApp(_ appId: String, _ config: AppCheckConfig) throws(AuthError) {
        guard AppCheck.isValidAppID(appId) else {
            throw AuthError.invalidArgument("\(WebBoundary.printable(String(appId.prefix(100)))) is not a Firebase app id (1:<project number>:web|android|ios:<hex>).")
        }
        guard AppCheck.projectNumber(ofAppID: appId) == PhoneAuthApp.projectNumber else {
            throw AuthError(.appAttestationFailed, "App attestation failed: the app belongs to another project number (the emulator's is \(PhoneAuthApp.projectNumber)).")
        }
        guard config.apps.isEmpty || config.apps.contains(appId) else {
            throw AuthError(.appAttestationFailed, "App attestation failed: the app is not registered (appCheck.apps).")
        }
    }

    /// Signs a token for `appId`, valid `ttlSeconds` on the emulator clock.
    static func mint(_ app: PhoneAuthApp, projectId: String, appId: String, provider: String, ttlSeconds: Int) throws -> (token: String, exp: Int64) {
        let now = app.emulator.clock.nowSeconds()
        let exp = now + Int64(ttlSeconds)
        let payload: JSONObject = [
            "sub": .string(appId),
            "aud": [.string("projects/" + PhoneAuthApp.projectNumber), .string("projects/" + projectId)],
            "provider": .string(provider),
            "iss": .string(issuer),
            "exp": .int(exp),
            "iat": .int(now),
            "jti": .string(app.emulator.random.token(byteCount: 16)),
        ]
        return (try app.attestation.currentAppCheck().sign(payload: payload), exp)
    }

    /// `POST /firebaseappcheck.googleapis.com/v1/projects/{p}/apps/{app}:exchangeDebugToken` `{debugToken}` (the
    /// SDKs send `debug_token`) → `{token, ttl: "3600s"}`.
    static func exchangeDebugToken(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        let appId = call.params.app ?? ""
        let config = app.emulator.appCheckConfig(StoreKey(projectId: call.projectId))
        try checkApp(appId, config)
        guard let debugToken = try call.string("debugToken"), !debugToken.isEmpty else {
            throw AuthError.invalidArgument("debug_token is required.")
        }
        guard AppCheck.isValidDebugToken(debugToken), config.debugTokens.isEmpty || config.debugTokens.contains(debugToken) else {
            throw AuthError(.appAttestationFailed, "App attestation failed.")
        }
        let ttl = config.tokenTtlSeconds
        let (token, _) = try mint(app, projectId: call.projectId, appId: appId, provider: "debug", ttlSeconds: ttl)
        return Reply(["token": .string(token), "ttl": .string("\(ttl)s")])
    }

    /// `:exchangeRecaptchaEnterpriseToken {recaptchaEnterpriseToken}` / `:exchangeRecaptchaV3Token {recaptchaV3Token}`:
    /// a reCAPTCHA token the emulator minted (`appCredentials {type: RECAPTCHA}`, single use) → `{token, ttl}`.
    static func exchangeRecaptcha(field: String, provider: String) -> Handler {
        { app, call in
            let appId = call.params.app ?? ""
            let key = StoreKey(projectId: call.projectId)
            let config = app.emulator.appCheckConfig(key)
            try checkApp(appId, config)
            guard let given = try call.string(field), !given.isEmpty else { throw AuthError.invalidArgument("\(field) is required.") }
            guard app.emulator.consumeMintedCredential(key, given, type: .recaptcha) else { throw AuthError(.appAttestationFailed, "App attestation failed.") }
            let ttl = config.tokenTtlSeconds
            let (token, _) = try mint(app, projectId: call.projectId, appId: appId, provider: provider, ttlSeconds: ttl)
            return Reply(["token": .string(token), "ttl": .string("\(ttl)s")])
        }
    }

    static func jwks(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        Reply(try app.attestation.jwks(.appCheck), headers: [PublicKeys.cacheControl])
    }

    /// Verifies an `X-Firebase-AppCheck` token as a backend would: our key, RS256, issuer, audience naming the
    /// project, not expired on the emulator clock, a registered app. Returns the app id, or nil.
    static func verify(_ app: PhoneAuthApp, _ token: String, projectId: String, _ config: AppCheckConfig) -> String? {
        guard let jwt = DecodedJWT(token), jwt.algorithm == "RS256", jwt.header["typ"]?.stringValue == "JWT",
              let kid = jwt.keyID, let key = app.attestation.appCheckKey(kid: kid), key.verify(jwt),
              jwt.payload["iss"]?.stringValue == issuer,
              case .array(let aud)? = jwt.payload["aud"], aud.contains(.string("projects/" + projectId)),
              let exp = jwt.payload["exp"]?.int64Value, exp > app.emulator.clock.nowSeconds(),
              let sub = jwt.payload["sub"]?.stringValue, (try? checkApp(sub, config)) != nil
        else { return nil }
        return sub
    }

    /// The check before a client call's handler (`RouteRow.appCheckProtected`, callers without admin credentials):
    /// `OFF` costs one atomic load while no config ever enabled App Check (`AppCheckConfig.mayBeEnabled`), else one
    /// read of the store's enforcement; `UNENFORCED` verifies, counts and records; `ENFORCED` also
    /// refuses a missing or invalid token.
    static func gate(_ app: PhoneAuthApp, _ call: Call, operation: Substring) throws(AuthError) {
        guard AppCheckConfig.mayBeEnabled else { return }
        let key = call.namedStoreKey()
        guard app.emulator.appCheckEnforcement(key) != .off else { return }
        let config = app.emulator.appCheckConfig(key)
        let header = call.request.headers["x-firebase-appcheck"] ?? ""
        let appId = header.isEmpty ? nil : verify(app, header, projectId: call.projectId, config)
        let outcome: AppCheck.Outcome = header.isEmpty ? .missing : appId == nil ? .invalid : .verified
        let refuse = config.enforcement == .enforced && outcome != .verified
        app.emulator.recordAppCheck(key, outcome: outcome, appId: appId, refused: refuse, method: String(operation))
        if refuse { throw AuthError(.appCheckTokenInvalid) }
    }
}

/// Firebase Phone Number Verification test tokens: ES256, `iss` the project number's, `aud` naming number and id,
/// `sub` the verified number (https://firebase.google.com/docs/phone-number-verification/verify-tokens).
enum PNVTokens {
    static let issuerPrefix = "https://fpnv.googleapis.com/projects/"

    static func mint(_ app: PhoneAuthApp, _ key: StoreKey, phoneNumber raw: String, ttlSeconds: Int?) throws -> (token: String, exp: Int64, phoneNumber: String) {
        let phone: PhoneNumber
        do { phone = try PhoneNumber(parsing: raw) } catch {
            throw AuthError.invalidArgument("phoneNumber: \(error.description)")
        }
        guard app.emulator.isPNVTestNumber(key, phone.e164) else {
            throw AuthError.invalidArgument(
                "\(phone.e164) is not a test number: PNV tokens are issued for fictional numbers (testPhoneNumbers) and phoneNumberVerification.testNumbers.")
        }
        let ttl = ttlSeconds ?? app.emulator.config(key).pnv.tokenTtlSeconds
        let now = app.emulator.clock.nowSeconds()
        let exp = now + Int64(ttl)
        let iss = issuerPrefix + PhoneAuthApp.projectNumber
        let payload: JSONObject = [
            "iss": .string(iss), "aud": [.string(iss), .string(issuerPrefix + key.projectId)],
            "sub": .string(phone.e164), "iat": .int(now), "exp": .int(exp),
        ]
        return (try app.attestation.currentPNV().sign(payload: payload), exp, phone.e164)
    }

    static func jwks(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        Reply(try app.attestation.jwks(.pnv), headers: [PublicKeys.cacheControl])
    }
}
