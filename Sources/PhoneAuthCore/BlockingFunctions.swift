import EmulatorSupport
import Synchronization

// Blocking functions (production's Identity Platform `blockingFunctions` config): the configuration, the JWT claims a
// function receives and the parsing of what it answers. The outgoing call itself (a bounded pool, deadlines, the
// deferred reply) is PhoneAuthAPI/BlockingCalls.swift.

/// The events a blocking function can be registered for. The raw value is production's trigger key and the JWT's
/// `event_type` (firebase-functions maps it to `providers/cloud.auth/eventTypes/user.<event>`).
public enum BlockingEvent: String, Sendable, CaseIterable {
    case beforeCreate, beforeSignIn, beforeSendSms, beforeSendEmail
}

/// `blockingFunctions`: `triggers.<event>.functionUri` and `forwardInboundCredentials.{idToken,accessToken,refreshToken}`.
public struct BlockingFunctionsConfig: Sendable, Equatable {
    /// event → function URI (`http://host[:port]/path`).
    public var triggers: [BlockingEvent: String] = [:]
    /// `forwardInboundCredentials` as given (a flag not given is false and not echoed, as production's proto JSON).
    var forward: [String: Bool] = [:]
    /// A configured `forwardInboundCredentials` block is echoed even when empty.
    var hasForwardBlock = false
    public var forwardIdToken: Bool { forward["idToken"] ?? false }
    public var forwardAccessToken: Bool { forward["accessToken"] ?? false }
    public var forwardRefreshToken: Bool { forward["refreshToken"] ?? false }

    public init() {}

    public var isEmpty: Bool { triggers.isEmpty && !hasForwardBlock }

    /// The longest function URI accepted.
    public static let maxURILength = 2048

    /// Production's resource shape (triggers in a stable order).
    public var json: JSON {
        var o = JSONObject()
        if !triggers.isEmpty {
            var t = JSONObject()
            for e in BlockingEvent.allCases { if let u = triggers[e] { t[e.rawValue] = ["functionUri": .string(u)] } }
            o["triggers"] = .object(t)
        }
        if hasForwardBlock {
            var f = JSONObject()
            for name in ["idToken", "accessToken", "refreshToken"] { if let b = forward[name] { f[name] = .bool(b) } }
            o["forwardInboundCredentials"] = .object(f)
        }
        return .object(o)
    }

    /// A refusal with the official emulator's text (`INVALID_BLOCKING_FUNCTION : ((…))`) and the offending key path.
    public struct Invalid: Error, Sendable {
        public let path: String
        public let message: String
        public var configError: ConfigError { ConfigError(path: path, message: message) }
        public var authError: AuthError { AuthError(.invalidBlockingFunction, message) }
    }

    /// Parses the `blockingFunctions` object. `null` or `{}` is no configuration.
    public static func parse(_ v: JSON, path: String = "blockingFunctions") throws(Invalid) -> BlockingFunctionsConfig {
        var c = BlockingFunctionsConfig()
        if v == .null { return c }
        guard case .object(let o) = v else { throw Invalid(path: path, message: "((blockingFunctions must be an object.))") }
        for (k, v2) in o {
            let p = ProjectConfig.join(path, k)
            switch k {
            case "triggers":
                if v2 == .null { continue }
                guard case .object(let t) = v2 else { throw Invalid(path: p, message: "((triggers must be an object.))") }
                for (event, spec) in t {
                    let pe = ProjectConfig.join(p, event)
                    guard let e = BlockingEvent(rawValue: event) else { throw Invalid(path: pe, message: "((Event type is invalid.))") }
                    let uri = spec.objectValue?["functionUri"]?.stringValue ?? ""
                    try checkURI(uri, path: ProjectConfig.join(pe, "functionUri"))
                    c.triggers[e] = uri
                }
            case "forwardInboundCredentials":
                if v2 == .null { continue }
                guard case .object(let f) = v2 else { throw Invalid(path: p, message: "((forwardInboundCredentials must be an object.))") }
                c.hasForwardBlock = true
                for (name, flag) in f {
                    let pf = ProjectConfig.join(p, name)
                    guard case .bool(let b) = flag else {
                        if flag == .null { continue }
                        throw Invalid(path: pf, message: "((\(name) must be true or false.))")
                    }
                    guard ["idToken", "accessToken", "refreshToken"].contains(name) else {
                        throw Invalid(path: pf, message: "((Unknown field \(name).))")
                    }
                    c.forward[name] = b
                }
            default:
                throw Invalid(path: p, message: "((Unknown field \(k).))")
            }
        }
        if !c.triggers.isEmpty { BlockingFunctionsHint.noteConfigured() }
        return c
    }

    /// An absolute `http://` URI with a host (the official emulator's check, plus: only plain HTTP, which is what we
    /// can call; a function is normally on this machine, e.g. the Functions emulator on :5001).
    static func checkURI(_ uri: String, path: String) throws(Invalid) {
        let bad = Invalid(path: path, message: "((Expected an absolute URI with valid scheme and host.))")
        guard !uri.isEmpty, uri.utf8.count <= maxURILength,
              uri.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F }) else { throw bad }
        let lower = uri.lowercased()
        if lower.hasPrefix("https://") {
            throw Invalid(path: path, message: "((Only http:// function URIs are supported by this emulator; serve the function over plain HTTP, e.g. the Functions emulator.))")
        }
        guard lower.hasPrefix("http://") else { throw bad }
        let rest = uri.dropFirst(7)
        let authority = rest.prefix(while: { $0 != "/" && $0 != "?" && $0 != "#" })
        guard !authority.isEmpty, !authority.contains("@") else { throw bad }
        var host = Substring(authority)
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else { throw bad }
            let after = host[host.index(after: close)...]
            guard after.isEmpty || (after.hasPrefix(":") && validPort(after.dropFirst())) else { throw bad }
            host = host[host.index(after: host.startIndex)..<close]
        } else if let colon = host.lastIndex(of: ":") {
            guard validPort(host[host.index(after: colon)...]) else { throw bad }
            host = host[..<colon]
        }
        guard !host.isEmpty else { throw bad }
    }

    static func validPort(_ s: Substring) -> Bool {
        guard !s.isEmpty, s.count <= 5, s.allSatisfy({ $0.isASCII && $0.isNumber }), let n = Int(s) else { return false }
        return (1...65535).contains(n)
    }
}

/// A process-wide hint that some configuration has named a blocking function: until then, flows skip the
/// config lookup entirely (no lock, no allocation). Set when a config with a trigger is parsed (PATCH, config
/// file, import, journal replay); never reset (then each flow reads its store's config, which is cheap).
public enum BlockingFunctionsHint {
    static let configured = Atomic<Bool>(false)
    @inline(__always) public static var mayBeConfigured: Bool { configured.load(ordering: .relaxed) }
    public static func noteConfigured() { configured.store(true, ordering: .relaxed) }
}

/// How a sign-in reached the user, as `sign_in_method` names it: a fixed name, or a federated provider's id.
public struct BlockingSignInMethod: RawRepresentable, Sendable, Equatable {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let phone = Self(rawValue: "phone"), password = Self(rawValue: "password"), anonymous = Self(rawValue: "anonymous")
    public static let custom = Self(rawValue: "custom"), emailLink = Self(rawValue: "emailLink")
    /// A federated provider (`google.com`, `oidc.x`…).
    public static func provider(_ id: String) -> Self { Self(rawValue: id) }
}

/// What a federated sign-in hands its blocking functions besides the user: the provider's raw profile
/// (`raw_user_info`, from which firebase-functions builds `additionalUserInfo`), its tokens (sent as
/// `oauth_id_token`/`oauth_access_token`/`oauth_token_secret` only where `forwardInboundCredentials` says) and a SAML
/// response's attributes.
public struct FederatedCredential: Sendable, Equatable {
    public var rawUserInfo: String?
    public var idToken: String?
    public var accessToken: String?
    public var tokenSecret: String?
    public var signInAttributes: JSONObject?
    public init(rawUserInfo: String? = nil, idToken: String? = nil, accessToken: String? = nil, tokenSecret: String? = nil,
                signInAttributes: JSONObject? = nil) {
        self.rawUserInfo = rawUserInfo
        self.idToken = idToken
        self.accessToken = accessToken
        self.tokenSecret = tokenSecret
        self.signInAttributes = signInAttributes
    }
}

/// What an email is for (`email_type`, firebase-functions' `EmailType`: production names `EMAIL_SIGN_IN` and
/// `PASSWORD_RESET`; the other kinds of code carry their request type's name).
public struct BlockingEmailType: RawRepresentable, Sendable, Equatable {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(_ type: OobCode.RequestType) {
        switch type {
        case .emailSignIn: rawValue = "EMAIL_SIGN_IN"
        default: rawValue = type.rawValue
        }
    }
}

/// What an SMS is for (`sms_type`, firebase-functions' `SmsType`).
public enum BlockingSMSType: String, Sendable {
    case signIn = "SIGNIN", mfaEnrollment = "MULTI_FACTOR_ENROLLMENT", mfaSignIn = "MULTI_FACTOR_SIGN_IN"
}

/// Everything about one event that goes into the function's JWT.
public struct BlockingEventContext: Sendable {
    public var event: BlockingEvent
    public var projectId: String
    public var tenantId: String?
    public var user: UserRecord?
    public var signInMethod: BlockingSignInMethod?
    /// `"phone"` when the event follows an SMS second factor.
    public var secondFactor: String?
    public var ipAddress: String
    public var userAgent: String?
    public var locale: String?
    /// beforeSendSms: the number the SMS goes to and what it is for.
    public var phoneNumber: String?
    public var smsType: BlockingSMSType?
    /// beforeSendSms: the reCAPTCHA bot score of the send, when SMS defense assessed it (`recaptcha_score`).
    public var recaptchaScore: Double?
    /// beforeSendEmail: the address the email goes to and what it is for (`email`, `email_type`).
    public var email: String?
    public var emailType: BlockingEmailType?
    /// Forwarded credentials (only those `forwardInboundCredentials` turns on are sent).
    public var idToken: String?
    public var refreshToken: String?
    /// A federated sign-in's credential and raw profile.
    public var federated: FederatedCredential?

    public init(event: BlockingEvent, projectId: String, tenantId: String?, user: UserRecord?, ipAddress: String) {
        self.event = event
        self.projectId = projectId
        self.tenantId = tenantId
        self.user = user
        self.ipAddress = ipAddress
    }
}

/// The JWT payload and the reply parsing.
public enum BlockingFunctions {
    /// Production's deadline: a function must answer within 7 seconds.
    public static let defaultTimeoutMillis = 7000
    /// The largest reply body read from a function.
    public static let maxReplyBytes = 256 * 1024

    /// The claims firebase-functions' identity handlers decode (`parseAuthUserRecord`, `parseAuthEventContext`):
    /// `metadata` times are seconds (the handlers multiply by 1000), `sub` is the uid.
    public static func claims(_ ctx: BlockingEventContext, uri: String, config: BlockingFunctionsConfig, nowSeconds: Int64,
                              timeoutSeconds: Int64, eventId: String, fields: UserFieldTable = .standard) -> JSONObject {
        var c = JSONObject()
        c["iss"] = .string("https://securetoken.google.com/\(ctx.projectId)")
        c["aud"] = .string(uri)
        c["iat"] = .int(nowSeconds)
        c["exp"] = .int(nowSeconds + max(1, timeoutSeconds))
        c["event_id"] = .string(eventId)
        c["event_type"] = .string(ctx.event.rawValue)
        c["ip_address"] = .string(ctx.ipAddress)
        c.set("user_agent", ctx.userAgent.map(JSON.string))
        c.set("locale", ctx.locale.map(JSON.string))
        if let u = ctx.user {
            c["sub"] = .string(u.localId)
            c["user_record"] = .object(userRecord(u, tenantId: ctx.tenantId, fields: fields))
        }
        c.set("tenant_id", ctx.tenantId.map(JSON.string))
        c.set("sign_in_method", ctx.signInMethod.map { .string($0.rawValue) })
        c.set("sign_in_second_factor", ctx.secondFactor.map(JSON.string))
        c.set("phone_number", ctx.phoneNumber.map(JSON.string))
        c.set("sms_type", ctx.smsType.map { .string($0.rawValue) })
        c.set("recaptcha_score", ctx.recaptchaScore.map(JSON.number))
        c.set("email", ctx.email.map(JSON.string))
        c.set("email_type", ctx.emailType.map { .string($0.rawValue) })
        if let f = ctx.federated {
            c.set("raw_user_info", f.rawUserInfo.map(JSON.string))
            c.set("sign_in_attributes", f.signInAttributes.map(JSON.object))
            if config.forwardAccessToken {
                c.set("oauth_access_token", f.accessToken.map(JSON.string))
                c.set("oauth_token_secret", f.tokenSecret.map(JSON.string))
            }
        }
        if config.forwardIdToken, let t = ctx.federated?.idToken ?? ctx.idToken { c["oauth_id_token"] = .string(t) }
        if config.forwardRefreshToken, let t = ctx.refreshToken { c["oauth_refresh_token"] = .string(t) }
        return c
    }

    /// `user_record` in the wire shape (snake_case, as `DecodedPayloadUserRecord`): the user field table's blocking
    /// form (UserFields.swift).
    public static func userRecord(_ u: UserRecord, tenantId: String?, fields: UserFieldTable = .standard) -> JSONObject {
        fields.blockingRecord(u, tenantId: tenantId)
    }

    /// What a function asked for: user fields to change and, for beforeSignIn, claims for this sign-in's ID token.
    public struct Outcome: Sendable, Equatable {
        public var displayName: String?? = nil
        public var photoUrl: String?? = nil
        public var disabled: Bool? = nil
        public var emailVerified: Bool? = nil
        /// Canonical custom-claims text (validated as the Admin API validates claims).
        public var customAttributes: String? = nil
        public var sessionClaims: JSONObject? = nil
        /// `recaptchaActionOverride` (`ALLOW`/`BLOCK`): beforeSendSms overriding reCAPTCHA SMS defense's verdict;
        /// beforeSendEmail allowing or blocking the email.
        public var recaptchaActionOverride: RecaptchaOverride? = nil
        public init() {}

        public var changesUser: Bool { displayName != nil || photoUrl != nil || disabled != nil || emailVerified != nil || customAttributes != nil }

        /// Applies the user fields onto `u`.
        public func apply(to u: inout UserRecord) {
            if let d = displayName { u.displayName = d }
            if let p = photoUrl { u.photoUrl = p }
            if let d = disabled { u.disabled = d }
            if let e = emailVerified { u.emailVerified = e }
            if let c = customAttributes { u.customAttributes = c == "{}" ? nil : c }
        }

        /// `later` on top of `self` (beforeCreate's changes, then beforeSignIn's).
        public func then(_ later: Outcome) -> Outcome {
            var o = self
            if let v = later.displayName { o.displayName = v }
            if let v = later.photoUrl { o.photoUrl = v }
            if let v = later.disabled { o.disabled = v }
            if let v = later.emailVerified { o.emailVerified = v }
            if let v = later.customAttributes { o.customAttributes = v }
            if let v = later.sessionClaims { o.sessionClaims = v }
            return o
        }
    }

    /// `BLOCKING_FUNCTION_ERROR_RESPONSE : detail`; `serverFault`: the function could not be used at all (it timed out,
    /// was unreachable or answered non-JSON), the official emulator's InternalError (500) rather than a 400.
    static func replyError(_ detail: String, serverFault: Bool = false) -> AuthError {
        AuthError(.blockingFunctionErrorResponse, detail, serverFault: serverFault)
    }

    /// Parses a 2xx reply body (the official emulator's rules: `userRecord.updateMask` required when `userRecord` is
    /// present; `displayName`/`photoUrl` coerced to text; `disabled`/`emailVerified` truthiness; `customClaims`
    /// validated as the Admin API does; `sessionClaims` only for beforeSignIn; unknown mask entries ignored).
    public static func parseReply(_ body: [UInt8], event: BlockingEvent) throws(AuthError) -> Outcome {
        let text = String(decoding: body, as: UTF8.self)
        let parsed: JSON
        do { parsed = try JSONParser.parse(text, maxDepth: 32) } catch {
            throw replyError("((Response body is not valid JSON.))", serverFault: true)
        }
        var out = Outcome()
        if event == .beforeSendSms || event == .beforeSendEmail, case .object(let top) = parsed,
           let r = top["recaptchaActionOverride"]?.stringValue {
            out.recaptchaActionOverride = RecaptchaOverride(rawValue: r)
        }
        guard case .object(let o) = parsed, let ur = o["userRecord"], ur != .null else { return out }
        guard case .object(let record) = ur, let maskValue = record["updateMask"], let mask = maskValue.stringValue, !mask.isEmpty else {
            throw replyError("((Response UserRecord is missing updateMask.))")
        }
        for field in mask.split(separator: ",").map({ $0.trimmingSpaces() }) {
            switch field {
            case "displayName", "photoUrl", "photoURL":
                let s = coerceText(record[field] ?? (field == "photoUrl" ? record["photoURL"] : field == "photoURL" ? record["photoUrl"] : nil))
                if let s {
                    let limit = field == "displayName" ? UserFieldLimits.displayName : UserFieldLimits.photoUrl
                    guard s.utf16.count <= limit else { throw replyError("((Response has an over-long \(field).))") }
                }
                if field == "displayName" { out.displayName = .some(s) } else { out.photoUrl = .some(s) }
            case "disabled": out.disabled = truthy(record["disabled"])
            case "emailVerified": out.emailVerified = truthy(record["emailVerified"])
            case "customClaims":
                let v = record["customClaims"] ?? .null
                let text: String
                if case .object = v { text = v.serializedString } else if v == .null { text = "{}" } else { throw AuthError(.invalidClaims) }
                out.customAttributes = try CustomClaims.validate(text)
            case "sessionClaims":
                guard event == .beforeSignIn else { continue }
                guard case .object(let s)? = record["sessionClaims"] else {
                    if record["sessionClaims"] == nil || record["sessionClaims"] == .null { continue }
                    throw replyError("((Response has malformed session claims.))")
                }
                guard s.keys.allSatisfy({ !CustomClaims.reserved.contains($0) }),
                      JSON.object(s).serializedString.utf16.count <= CustomClaims.maxLength else {
                    throw replyError("((Response has malformed session claims.))")
                }
                out.sessionClaims = s
            default: continue
            }
        }
        return out
    }

    static func coerceText(_ v: JSON?) -> String? {
        switch v {
        case .string(let s)?: return s
        case .bool(let b)?: return b ? "true" : "false"
        case .number(let d)?: return v?.int64Value.map { String($0) } ?? String(d)
        default: return nil
        }
    }

    static func truthy(_ v: JSON?) -> Bool {
        switch v {
        case .bool(let b)?: return b
        case .number(let d)?: return d != 0 && !d.isNaN
        case .string(let s)?: return !s.isEmpty
        case .array?, .object?: return true
        default: return false
        }
    }

    /// `BLOCKING_FUNCTION_ERROR_RESPONSE` for a non-2xx answer, with the function's body (HttpsError JSON) as the
    /// official emulator words it; a long body is cut (the message goes to the client).
    public static func httpError(uri: String, status: Int, body: [UInt8]) -> AuthError {
        var text = String(decoding: body.prefix(2048), as: UTF8.self)
        if body.count > 2048 { text += "…" }
        return replyError("((HTTP request to \(uri) returned HTTP error \(status): \(text)))")
    }

    public static func deadlineExceeded(uri: String) -> AuthError {
        replyError("((Deadline exceeded making request to \(uri).))", serverFault: true)
    }
    public static func requestFailed(uri: String) -> AuthError { replyError("((Failed to make request to \(uri).))", serverFault: true) }
}

extension ProjectConfig {
    /// The blocking functions of `event` for a store: its own trigger, else (a tenant) the project's.
    public static func blockingTrigger(_ event: BlockingEvent, own: ProjectConfig, project: ProjectConfig?) -> (String, BlockingFunctionsConfig)? {
        if let u = own.blockingFunctions.triggers[event] { return (u, own.blockingFunctions) }
        if let p = project, let u = p.blockingFunctions.triggers[event] { return (u, p.blockingFunctions) }
        return nil
    }
}
