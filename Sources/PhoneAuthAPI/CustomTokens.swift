import EmulatorSupport
import JWT
import PhoneAuthCore

/// `accounts:signInWithCustomToken` (legacy `relyingparty/verifyCustomToken`): exchanges a custom token minted by a
/// backend (an admin SDK's `createCustomToken`) for an ID token and a refresh token, creating the user if absent.
///
/// Accepted in every signing mode: unsigned tokens (`alg: none`, what admin SDKs mint with
/// `FIREBASE_AUTH_EMULATOR_HOST` set) and RS256 tokens signed by a service account. The signature of an RS256 token
/// is not checked (a Google service account's public key cannot be fetched offline); everything else is: `aud`,
/// `iat`/`exp` on the emulator clock (at most an hour apart), `uid`, `claims`, `tenant_id`, and the service account's
/// project when `iss` names one (`CREDENTIAL_MISMATCH`). With `--token-signing none` the server is as lenient as the
/// official emulator: fake JSON tokens (`{"uid":…}`) are accepted, `user_id` may stand for `uid`, a numeric uid is
/// read as its digits, and `iat`/`exp` are checked only when present.
enum CustomTokens {
    static let audience = "https://identitytoolkit.googleapis.com/google.identity.identitytoolkit.v1.IdentityToolkit"
    /// Production's maximum custom token lifetime (`exp - iat`), what admin SDKs mint.
    static let maxLifetimeSeconds: Int64 = 3600
    /// How far in the future `iat` may be (clock skew between the minting backend and the emulator clock).
    static let allowedSkewSeconds: Int64 = 300
    /// Production's uid limit: 1 to 128 characters (and, as every uid here, at most 128 bytes: `Identifiers`).
    static let maxUIDCharacters = 128

    /// A token that passed every check.
    struct Checked: Sendable, Equatable {
        let grant: CustomTokenGrant
        /// The token's `tenant_id` (nil: none): must be the call's tenant.
        let tenantId: String?
        /// `RS256`, `none`, or `json` (a fake JSON token, `--token-signing none` only).
        let format: String
    }

    static func invalid(_ detail: String) -> AuthError { AuthError(.invalidCustomToken, detail) }

    /// Parses and checks a custom token against the call's project and the emulator clock. Never trusts a value's
    /// size or type: everything it echoes is truncated and printable.
    static func check(_ token: String?, projectId: String, nowSeconds: Int64, lenient: Bool) throws(AuthError) -> Checked {
        guard let token, !token.isEmpty else { throw AuthError(.missingCustomToken) }
        let payload: JSONObject
        let format: String
        if lenient && token.hasPrefix("{") {
            guard token.utf8.count < 64 * 1024, case .object(let o)? = try? JSONParser.parse(token, maxDepth: 32) else {
                throw invalid("((Auth Emulator only accepts strict JSON or JWTs as fake custom tokens.))")
            }
            payload = o
            format = "json"
        } else {
            guard let jwt = DecodedJWT(token) else { throw invalid("Invalid assertion format. 3 dot separated segments required.") }
            switch jwt.algorithm {
            case "none":
                guard jwt.signature.isEmpty else { throw invalid("An unsigned token (alg none) has an empty signature.") }
            case "RS256":
                guard !jwt.signature.isEmpty else { throw invalid("The RS256 token has no signature.") }
            default:
                let alg = jwt.header["alg"].map { Identifiers.printable($0.serializedString, limit: 40) } ?? "(none)"
                throw invalid("Unsupported algorithm \(alg): custom tokens are RS256, or unsigned (alg none) from an admin SDK in emulator mode.")
            }
            payload = jwt.payload
            format = jwt.algorithm ?? "none"
            guard payload["aud"]?.stringValue == audience else {
                let aud = payload["aud"].map { Identifiers.printable($0.stringValue ?? $0.serializedString, limit: 100) } ?? "(none)"
                throw invalid("((Invalid aud (audience): \(aud) Note: Firebase ID Tokens / third-party tokens cannot be used with signInWithCustomToken.))")
            }
            if case .string(let iss)? = payload["iss"], let owner = serviceAccountProject(iss), owner != projectId {
                throw AuthError(.credentialMismatch, "The custom token was signed by a service account of another project.")
            }
        }

        // Times: whole seconds on the emulator clock.
        func seconds(_ name: String) throws(AuthError) -> Int64? {
            guard let v = payload[name], !v.isNull else { return nil }
            guard let n = v.int64Value, (0...Timestamp.maxSeconds).contains(n) else { throw invalid("\(name) must be whole seconds since the epoch.") }
            return n
        }
        let iat = try seconds("iat"), exp = try seconds("exp")
        if !lenient {
            guard iat != nil else { throw invalid("The token has no iat (issued-at time).") }
            guard exp != nil else { throw invalid("The token has no exp (expiration time).") }
        }
        if let iat {
            guard iat <= nowSeconds + allowedSkewSeconds else { throw invalid("Token used too early: iat is in the future of the emulator clock.") }
        }
        if let iat, let exp {
            guard exp > iat else { throw invalid("exp is not after iat.") }
            guard exp - iat <= maxLifetimeSeconds else { throw invalid("The token lifetime (exp - iat) exceeds \(maxLifetimeSeconds) seconds.") }
        }
        if let exp {
            guard nowSeconds < exp else { throw invalid("Token expired: exp is not after the emulator clock.") }
        }

        let uid = try Self.uid(payload, lenient: lenient)

        let tenant: String?
        switch payload["tenant_id"] {
        case nil, .null?: tenant = nil
        case .string(let t)?: tenant = t.isEmpty ? nil : t
        default: throw invalid("tenant_id must be a string.")
        }

        var developerClaims: String? = nil
        if let c = payload["claims"], !c.isNull {
            guard case .object(let o) = c else { throw AuthError(.invalidClaims) }
            if !o.isEmpty { developerClaims = try CustomClaims.validate(JSON.object(o).serializedString) }
        }
        return Checked(grant: CustomTokenGrant(uid: uid, developerClaims: developerClaims), tenantId: tenant, format: format)
    }

    /// The token's `uid`: a string of 1 to 128 characters. Lenient (the official emulator): `user_id` in its place,
    /// an integral number read as its digits. A missing one is `MISSING_IDENTIFIER` in every mode.
    static func uid(_ payload: JSONObject, lenient: Bool) throws(AuthError) -> String {
        func text(_ v: JSON?) -> String? {
            switch v {
            case .string(let s)?: return s
            case .number?: return lenient ? v?.int64Value.map { String($0) } : nil
            default: return nil
            }
        }
        let raw = text(payload["uid"]) ?? (lenient ? text(payload["user_id"]) : nil)
        // No uid: MISSING_IDENTIFIER, production's answer too (what the SDKs surface as auth/missing-identifier).
        guard let uid = raw, !uid.isEmpty else {
            switch payload["uid"] {
            case nil, .null?, .string?: throw AuthError(.missingIdentifier)
            default: throw invalid("uid must be a non-empty string.")
            }
        }
        guard uid.unicodeScalars.count <= maxUIDCharacters, Identifiers.isValidLocalID(uid) else {
            throw invalid("uid must be a string of 1 to \(maxUIDCharacters) characters (at most \(Identifiers.maxIDBytes) bytes, no control characters).")
        }
        return uid
    }

    /// The project a service account's email names: `name@<project>.iam.gserviceaccount.com` or
    /// `<project>@appspot.gserviceaccount.com`; nil for any other issuer (the emulator's fake account, a project
    /// number's default compute account), which is then not compared.
    static func serviceAccountProject(_ iss: String) -> String? {
        guard iss.utf8.count <= 320, let at = iss.lastIndex(of: "@") else { return nil }
        let local = iss[..<at], domain = iss[iss.index(after: at)...]
        let iam = ".iam.gserviceaccount.com"
        if domain.hasSuffix(iam), domain.count > iam.count { return String(domain.dropLast(iam.count)) }
        if domain == "appspot.gserviceaccount.com", !local.isEmpty { return String(local) }
        return nil
    }

    /// Validated claims text as an object (empty for none).
    static func claimsObject(_ text: String?) -> JSONObject {
        guard let text, case .object(let o)? = try? JSONParser.parse(text, maxDepth: 32) else { return JSONObject() }
        return o
    }

    /// The handler: check the token, then the sign-in pipeline (PhoneAuthCore/CustomTokenSignIn.swift).
    static func signIn(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        // Custom tokens are forgeable here (unsigned ones are accepted, an RS256 signature is not checked): a foreign
        // web page may not exchange one (it could sign in as any user), as unsigned ID tokens (`PhoneAuthApp`).
        if call.foreignOrigin { throw ForeignOriginRefusal(.customTokenOriginNotAllowed) }
        // For the same reason, with --admin-token (the server is reachable by others) another machine exchanges one
        // only with the admin token: minting a session for any uid is an administrator's power. Loopback callers (the
        // backend and tests on this machine) are unaffected.
        if app.adminToken != nil, !call.privileged, !WebBoundary.isLoopbackHost(call.request.remoteAddress) {
            throw AuthError.customTokenNeedsAdminToken
        }
        let checked: Checked
        let key: StoreKey
        do {
            // A tenant with auth turned off answers that before the token is looked at (the official emulator's order).
            if let t = try call.readTenant() { try TenantGate.checkEnabled(app, StoreKey(projectId: call.projectId, tenantId: t)) }
            checked = try check(try call.string("token"), projectId: call.projectId, nowSeconds: app.emulator.clock.nowSeconds(),
                                lenient: app.tokens.mode == .none)
            // The token's tenant is the call's (path or body `tenantId`): compared before anything is created.
            guard try call.readTenant() == checked.tenantId else { throw AuthError(.tenantIdMismatch) }
            key = StoreKey(projectId: call.projectId, tenantId: try call.tenant())
        } catch let error as AuthError {
            app.logger.info("custom token refused", [("project", call.projectId), ("error", Identifiers.printable(error.description, limit: 200))])
            throw error
        }
        let answer = Answer(key: key, uid: Identifiers.printable(checked.grant.uid, limit: 64), format: checked.format)
        return try app.signIn(call, key, .customToken(.init(grant: checked.grant, clientIP: call.request.remoteAddress)), answer)
    }

    /// The reply (its ID token carries the token's developer claims, then a beforeSignIn's session claims; neither sets
    /// a reserved claim or one of the user's identity fields) and the log lines.
    struct Answer: SignInAnswer {
        let key: StoreKey
        /// Printable, for the log.
        let uid: String
        let format: String

        func reply(_ app: PhoneAuthApp, _ call: Call, _ s: SignedIn, idToken: String) -> Reply {
            app.logger.info(s.isNewUser ? "custom token sign-in: new user" : "custom token sign-in",
                            [("project", key.description), ("uid", uid), ("token", format)])
            var o = JSONObject()
            if call.legacy { o["kind"] = "identitytoolkit#VerifyCustomTokenResponse" }
            o["idToken"] = .string(idToken)
            o["refreshToken"] = .string(s.refreshToken)
            o["expiresIn"] = .string(String(TokenService.tokenLifetimeSeconds))
            o["isNewUser"] = .bool(s.isNewUser)
            return Reply(.object(o))
        }

        func refused(_ app: PhoneAuthApp, _ error: AuthError) {
            app.logger.info("custom token sign-in refused", [("project", key.description), ("uid", uid), ("error", error.code.rawValue)])
        }
    }
}

extension AuthError {
    /// With `--admin-token` (the server is reachable by others), a custom token from another machine without the admin
    /// token: minting a session for any uid is an administrator's power (403).
    static let customTokenNeedsAdminToken = AuthError(
        .permissionDenied,
        "Custom tokens are not verified here, so with --admin-token set signInWithCustomToken from another machine needs \"Authorization: Bearer <admin token>\" (loopback callers need nothing).")

    /// A custom token from a web page whose origin the browser boundary does not allow (403, no CORS headers).
    static let customTokenOriginNotAllowed = AuthError(
        .permissionDenied,
        "Origin not allowed: custom tokens are not verified here (unsigned ones are accepted, RS256 signatures are not checked), so signInWithCustomToken is accepted only without an Origin or from http(s)://localhost, 127.0.0.1, [::1], the server's own address and origins added with --allow-origin.")
}
