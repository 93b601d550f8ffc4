import EmulatorSupport

/// `GET /emulator/openapi.json`: an OpenAPI 3.0 description of every route, generated from the route table
/// (`Router.rows`), so it cannot drift from what is served. Each routed path is one path item (an optional
/// `[/tenants/{tenant}]` group gives two, a v3 name a third) and each row one operation in it: its parameters (the
/// path's, the `key` query of API-key routes, the `?name=` query parameters its doc names), its security (API key
/// in the query or `x-goog-api-key`, admin `Bearer`), its request body (a schema from `OpenAPI.bodies` where one is
/// written, else `type: object`) and its answers (the route's media types, and the Google error envelope for every
/// 4xx). `Tests/Interop/test_openapi.py` validates it and fuzzes every operation with it (schemathesis).
enum OpenAPI {
    /// The document, serialized once.
    static let bytes: [UInt8] = document(Router.table).serialized()

    static func handle(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        Reply(json: bytes)
    }

    // MARK: request bodies

    /// Request body fields by path template (the route table's `template`): `name:type` separated by spaces, where
    /// the type is `s` (string), `b` (boolean), `i` (int64: a number or its decimal text), `n` (number), `o`
    /// (object), `[s]` / `[o]` (lists), or `A|B|C` (one of these strings). Fields not listed are still accepted
    /// (`additionalProperties` is left open, as the handlers ignore unknown fields). A route with a body and no
    /// entry is described as `type: object`.
    static let bodies: [String: String] = {
        let signUp = "email:s password:s displayName:s photoUrl:s idToken:s emailVerified:b phoneNumber:s disabled:b localId:s mfaInfo:[o] tenantId:s captchaResponse:s clientType:s recaptchaVersion:s"
        let lookup = "idToken:s localId:[s] email:[s] phoneNumber:[s] federatedUserId:[o] initialEmail:[s] tenantId:s"
        let update = "idToken:s localId:s email:s password:s displayName:s photoUrl:s phoneNumber:s deleteAttribute:[s] deleteProvider:[s] emailVerified:b disableUser:b validSince:i customAttributes:s oobCode:s returnSecureToken:b mfa:o linkProviderUserInfo:o tenantId:s"
        let delete = "idToken:s localId:s tenantId:s"
        let oob = "requestType:PASSWORD_RESET|VERIFY_EMAIL|EMAIL_SIGNIN|VERIFY_AND_CHANGE_EMAIL email:s idToken:s newEmail:s continueUrl:s canHandleCodeInApp:b returnOobLink:b iOSBundleId:s androidPackageName:s linkDomain:s tenantId:s captchaResp:s clientType:s recaptchaVersion:s"
        let batchCreate = "users:[o] hashAlgorithm:s signerKey:s saltSeparator:s rounds:i memoryCost:i parallelization:i blockSize:i dkLen:i passwordHashOrder:s cpuMemCost:i sanityCheck:b allowOverwrite:b tenantId:s"
        let query = "returnUserInfo:b limit:i offset:i expression:[o] sortBy:SORT_BY_FIELD_UNSPECIFIED|USER_ID|NAME|CREATED_AT|LAST_LOGIN_AT|USER_EMAIL order:ORDER_UNSPECIFIED|ASC|DESC tenantId:s"
        let v1 = "/identitytoolkit.googleapis.com/v1/accounts:", admin = "/identitytoolkit.googleapis.com/v1/projects/{project}[/tenants/{tenant?}]/accounts"
        let v2 = "/identitytoolkit.googleapis.com/v2/projects/{project}[/tenants/{tenant}]/"
        let emulator = "/emulator/v1/projects/{project}"
        let appCheck = "/firebaseappcheck.googleapis.com/v1/projects/{project}/apps/{app}:"
        let oauth = "name:s clientId:s issuer:s displayName:s enabled:b clientSecret:s responseType:o"
        let saml = "name:s displayName:s enabled:b idpConfig:o spConfig:o"
        let idp = "name:s enabled:b clientId:s clientSecret:s"
        let tenant = "displayName:s allowPasswordSignup:b enableEmailLinkSignin:b disableAuth:b enableAnonymousUser:b mfaConfig:o testPhoneNumbers:o smsRegionConfig:o recaptchaConfig:o passwordPolicyConfig:o emailPrivacyConfig:o"
        return [
            v1 + "sendVerificationCode": "phoneNumber:s recaptchaToken:s iosReceipt:s iosSecret:s autoRetrievalInfo:o playIntegrityToken:s safetyNetToken:s captchaResponse:s clientType:s recaptchaVersion:s tenantId:s",
            v1 + "signInWithPhoneNumber": "sessionInfo:s code:s phoneNumber:s temporaryProof:s idToken:s operation:s tenantId:s",
            v1 + "lookup": lookup,
            v1 + "signUp": signUp,
            v1 + "update": update,
            v1 + "delete": delete,
            v1 + "verifyClient": "appToken:s isSandbox:b",
            v1 + "signInWithPassword": "email:s password:s returnSecureToken:b tenantId:s captchaResponse:s clientType:s recaptchaVersion:s",
            v1 + "createAuthUri": "identifier:s continueUri:s providerId:s sessionId:s tenantId:s",
            v1 + "sendOobCode": oob,
            v1 + "resetPassword": "oobCode:s newPassword:s email:s tenantId:s",
            v1 + "signInWithCustomToken": "token:s returnSecureToken:b tenantId:s",
            v1 + "signInWithIdp": "requestUri:s postBody:s idToken:s returnSecureToken:b returnIdpCredential:b sessionId:s pendingToken:s tenantId:s",
            v1 + "signInWithEmailLink": "email:s oobCode:s idToken:s tenantId:s",
            "/securetoken.googleapis.com/v1/token": "grant_type:refresh_token refresh_token:s",
            "/identitytoolkit.googleapis.com/v2/accounts/mfaEnrollment:start": "idToken:s phoneEnrollmentInfo:o totpEnrollmentInfo:o tenantId:s",
            "/identitytoolkit.googleapis.com/v2/accounts/mfaEnrollment:finalize": "idToken:s phoneVerificationInfo:o totpVerificationInfo:o displayName:s tenantId:s",
            "/identitytoolkit.googleapis.com/v2/accounts/mfaEnrollment:withdraw": "idToken:s mfaEnrollmentId:s tenantId:s",
            "/identitytoolkit.googleapis.com/v2/accounts/mfaSignIn:start": "mfaPendingCredential:s mfaEnrollmentId:s phoneSignInInfo:o tenantId:s",
            "/identitytoolkit.googleapis.com/v2/accounts/mfaSignIn:finalize": "mfaPendingCredential:s mfaEnrollmentId:s phoneVerificationInfo:o totpVerificationInfo:o tenantId:s",
            admin: signUp,
            admin + ":lookup": lookup,
            admin + ":update": update,
            admin + ":delete": delete,
            admin + ":sendOobCode": oob,
            admin + ":batchDelete": "localIds:[s] force:b tenantId:s",
            admin + ":query": query,
            "/identitytoolkit.googleapis.com/v1/projects/{project}:queryAccounts": query,
            admin + ":batchCreate": batchCreate,
            RouteRow.legacyPrefix + "uploadAccount": batchCreate + " targetProjectId:s",
            RouteRow.legacyPrefix + "downloadAccount": "maxResults:i nextPageToken:s targetProjectId:s",
            "/identitytoolkit.googleapis.com/v1/projects/{project}[/tenants/{tenant}]:createSessionCookie": "idToken:s validDuration:i tenantId:s",
            v2 + "oauthIdpConfigs": oauth, v2 + "oauthIdpConfigs/{config}": oauth,
            v2 + "inboundSamlConfigs": saml, v2 + "inboundSamlConfigs/{config}": saml,
            v2 + "defaultSupportedIdpConfigs": idp, v2 + "defaultSupportedIdpConfigs/{config}": idp,
            "/identitytoolkit.googleapis.com/v2/projects/{project}/tenants": tenant,
            "/identitytoolkit.googleapis.com/v2/projects/{project}/tenants/{tenant}": tenant,
            "/emulator/v1/clock:advance": "seconds:n",
            "/emulator/v1/keys:rotate": "keySet:appCheck|phoneNumberVerification",
            emulator + ":export": "path:s",
            emulator + "[/tenants/{tenant}]/appCredentials": "type:RECAPTCHA|PLAY_INTEGRITY|RECAPTCHA_ENTERPRISE|APP_CHECK|PNV score:n action:s tollFraudScore:n appId:s ttlSeconds:i phoneNumber:s",
            emulator + "[/tenants/{tenant}]/idTokens": "uid:s claims:o phoneNumber:s email:s signInProvider:s secondFactor:s authTime:i expiresIn:i",
            emulator + ":snapshot": "name:s",
            emulator + ":restore": "name:s",
            appCheck + "exchangeDebugToken": "debugToken:s",
            "/content-firebaseappcheck.googleapis.com/v1/projects/{project}/apps/{app}:exchangeDebugToken": "debugToken:s",
            appCheck + "exchangeRecaptchaEnterpriseToken": "recaptchaEnterpriseToken:s",
            appCheck + "exchangeRecaptchaV3Token": "recaptchaV3Token:s",
        ]
    }()

    /// One field's schema from its `OpenAPI.bodies` type.
    static func fieldSchema(_ type: Substring) -> JSON {
        switch type {
        case "s": return ["type": "string"]
        case "b": return ["type": "boolean"]
        case "n": return ["type": "number"]
        case "i": return ["oneOf": [["type": "integer", "format": "int64"], ["type": "string", "pattern": "^-?[0-9]+$"]]]
        case "o": return ["type": "object"]
        case "[s]": return ["type": "array", "items": ["type": "string"]]
        case "[o]": return ["type": "array", "items": ["type": "object"]]
        default: return ["type": "string", "enum": .array(type.split(separator: "|").map { .string(String($0)) })]
        }
    }

    /// A request body's schema: `type: object` with the fields `OpenAPI.bodies` names for this template.
    static func bodySchema(_ template: String) -> JSON {
        var schema: JSONObject = ["type": "object"]
        if let fields = bodies[template] {
            var properties = JSONObject()
            for field in fields.split(separator: " ") {
                guard let colon = field.firstIndex(of: ":") else { continue }
                properties[String(field[..<colon])] = fieldSchema(field[field.index(after: colon)...])
            }
            schema["properties"] = .object(properties)
        }
        return .object(schema)
    }

    // MARK: answers

    /// What a route answers besides JSON, by template (everything else answers `application/json`).
    static let mediaTypes: [String: [String]] = [
        "/": ["application/json", "text/html"],
        "/console": ["text/html"],
        "/console/{file?}": ["text/html", "text/javascript", "text/css", "image/png", "image/svg+xml", "application/json"],
        "/emulator/action": ["application/json", "text/html"],
        "/emulator/auth/handler": ["text/html"],
        "/emulator/auth/iframe": ["text/html"],
        "/emulator/auth/assets/{file}": ["text/javascript", "text/css"],
        "/emulator/v1/projects/{project}[/tenants/{tenant}]/events": ["text/event-stream", "application/x-ndjson"],
    ]

    /// The two pages that answer a refusal as the official emulator's pages do, not with the envelope: the inbox
    /// links' page (`{"authEmulator": {"error", "instructions"}}`) and the provider page (the same JSON, pretty-printed,
    /// as `text/html`). Every other route refuses with `errorSchema`.
    static let pageErrors: [String: JSON] = [
        "/emulator/action": ["application/json": ["schema": ["type": "object", "required": ["authEmulator"],
                                                            "properties": ["authEmulator": ["type": "object"]]]],
                             "text/html": ["schema": ["type": "string"]]],
        "/emulator/auth/handler": ["text/html": ["schema": ["type": "string"]]],
    ]

    /// The Google error envelope every refused request gets.
    static let errorSchema: JSON = [
        "type": "object", "required": ["error"],
        "properties": ["error": [
            "type": "object", "required": ["code", "message", "errors", "status"],
            "properties": [
                "code": ["type": "integer"],
                "message": ["type": "string"],
                "errors": ["type": "array", "items": [
                    "type": "object", "required": ["message", "domain", "reason"],
                    "properties": ["message": ["type": "string"], "domain": ["type": "string"], "reason": ["type": "string"]],
                ]],
                "status": ["type": "string"],
            ],
        ]],
    ]

    // MARK: the document

    /// The OpenAPI path of a compiled pattern: `{tenant?}` → `{tenant}` (an OpenAPI path parameter is always
    /// present; this one may be empty).
    static func openAPIPath(_ path: String) -> String {
        var out = ""
        var inParam = false
        for c in path {
            if c == "{" { inParam = true } else if c == "}" { inParam = false }
            if inParam && c == "?" { continue }
            out.append(c)
        }
        return out
    }

    /// The `?name=` / `&name=` query parameters a row's doc names (the doc is what docs/endpoints.md shows).
    static func documentedQuery(_ doc: String) -> [String] {
        var names: [String] = []
        let chars = Array(doc.utf8)
        var i = 0
        while i < chars.count {
            if chars[i] == UInt8(ascii: "?") || chars[i] == UInt8(ascii: "&") {
                var j = i + 1
                while j < chars.count, Self.isNameByte(chars[j], first: j == i + 1) { j += 1 }
                if j > i + 1, j < chars.count, chars[j] == UInt8(ascii: "=") {
                    let name = String(decoding: chars[(i + 1)..<j], as: UTF8.self)
                    if !names.contains(name) { names.append(name) }
                }
                i = j
            } else {
                i += 1
            }
        }
        return names
    }

    static func isNameByte(_ b: UInt8, first: Bool) -> Bool {
        (b >= 0x61 && b <= 0x7A) || (b >= 0x41 && b <= 0x5A) || (!first && (b >= 0x30 && b <= 0x39 || b == UInt8(ascii: "_")))
    }

    static func security(_ access: Access) -> JSON {
        switch access {
        case .client: [["apiKeyQuery": []], ["apiKeyHeader": []], ["bearer": []]]
        case .apiKey: [["apiKeyQuery": []], ["apiKeyHeader": []]]
        case .admin, .adminPath: [["bearer": []]]
        case .emulator: [[:], ["bearer": []]]
        case .open: []
        }
    }

    static func pathParameter(_ name: PathParams.Name, allowEmpty: Bool) -> JSON {
        var schema: JSONObject = ["type": "string"]
        switch name {
        case .project, .tenant:
            schema["pattern"] = .string(allowEmpty ? "^[A-Za-z0-9_-]{0,128}$" : "^[A-Za-z0-9_-]{1,128}$")
        case .file where allowEmpty: break
        default: schema["minLength"] = 1
        }
        var p: JSONObject = ["name": .string(name.rawValue), "in": "path", "required": true, "schema": .object(schema)]
        if allowEmpty { p["description"] = "may be empty (the top-level project, or the default file)" }
        return .object(p)
    }

    /// One operation: a row at one of its paths.
    static func operation(_ row: RouteRow, _ pattern: RouteTable.Pattern, id: String) -> JSON {
        var parameters: [JSON] = []
        for segment in pattern.segments {
            if case .param(let name, let allowEmpty, _) = segment { parameters.append(pathParameter(name, allowEmpty: allowEmpty)) }
        }
        if row.access == .client || row.access == .apiKey {
            parameters.append(["name": "key", "in": "query", "required": .bool(row.access == .apiKey),
                               "description": "the API key (any value; or the `x-goog-api-key` header)",
                               "schema": ["type": "string", "minLength": 1]])
        }
        for name in documentedQuery(row.doc) where name != "key" {
            parameters.append(["name": .string(name), "in": "query", "required": false, "schema": ["type": "string"]])
        }
        var responses = JSONObject()
        var ok = JSONObject()
        for type in mediaTypes[row.template] ?? ["application/json"] {
            ok[type] = type == "application/json" ? ["schema": ["type": "object"]] : ["schema": ["type": "string"]]
        }
        responses["200"] = ["description": "success", "content": .object(ok)]
        if row.template == "/emulator/action" { responses["302"] = ["description": "a redirect to the link's continue URL"] }
        if row.template.hasPrefix("/console") || row.template.hasPrefix("/emulator/auth/assets") {
            responses["304"] = ["description": "not modified (`If-None-Match`)"]
        }
        if let page = pageErrors[row.template] {
            responses["4XX"] = ["description": "the official emulator's page answer", "content": page]
        } else {
            responses["4XX"] = ["description": "the Google error envelope", "content": ["application/json": ["schema": ["$ref": "#/components/schemas/Error"]]]]
        }
        var op: JSONObject = [
            "operationId": .string(id),
            "summary": .string(row.doc),
            "tags": .array([.string(String(pattern.path.split(separator: "/").first ?? ""))]),
            "parameters": .array(parameters),
            "security": security(row.access),
            "responses": .object(responses),
        ]
        if pattern.legacy { op["description"] = .string("The iOS SDK's v3 name of `\(row.template)`; answers carry `kind`.") }
        if row.body != .none {
            let schema = bodySchema(row.template)
            var content: JSONObject = ["application/json": ["schema": schema]]
            if row.body == .jsonOrForm { content["application/x-www-form-urlencoded"] = ["schema": schema] }
            op["requestBody"] = ["required": false, "content": .object(content)]
        }
        return .object(op)
    }

    /// A unique, readable operation id: the method and the path's letters and digits.
    static func operationId(_ method: String, _ path: String, taken: inout Set<String>) -> String {
        var base = method.lowercased()
        var gap = true
        for c in path {
            if c.isASCII && (c.isLetter || c.isNumber) { if gap { base.append("_") }; base.append(c); gap = false } else { gap = true }
        }
        var id = base, n = 2
        while !taken.insert(id).inserted { id = base + "_\(n)"; n += 1 }
        return id
    }

    static func document(_ table: RouteTable) -> JSON {
        var paths = JSONObject()
        var taken = Set<String>()
        for pattern in table.patterns {
            let row = table.rows[pattern.row]
            let path = openAPIPath(pattern.path)
            var item = paths[path]?.objectValue ?? JSONObject()
            item[row.method.lowercased()] = operation(row, pattern, id: operationId(row.method, path, taken: &taken))
            paths[path] = .object(item)
        }
        return [
            "openapi": "3.0.3",
            "info": [
                "title": "phone-auth-emulator",
                "version": .string(PhoneAuthApp.version),
                "description": "Everything the emulator serves, generated from its route table (docs/endpoints.md is generated from the same rows). Paths start with the production host they emulate (`/identitytoolkit.googleapis.com/v1/…`): point a client's host at the emulator.",
            ],
            "servers": [["url": "/"]],
            "paths": .object(paths),
            "components": [
                "schemas": ["Error": errorSchema],
                "securitySchemes": [
                    "apiKeyQuery": ["type": "apiKey", "in": "query", "name": "key"],
                    "apiKeyHeader": ["type": "apiKey", "in": "header", "name": "x-goog-api-key"],
                    "bearer": ["type": "http", "scheme": "bearer",
                               "description": "admin: `owner` (or an OAuth `ya29.` token); with `--admin-token`, that token"],
                ],
            ],
        ]
    }
}
