import Dispatch
import EmulatorSupport
import JWT
import PhoneAuthCore
import Synchronization

/// How ID tokens are signed.
public enum TokenSigningMode: String, Sendable {
    /// Real RS256 signatures with published keys (default).
    case rs256
    /// Unsigned `alg: none` tokens exactly like the official emulator (what Node firebase-admin accepts in emulator mode).
    case none
}

/// Signs and verifies ID tokens; owns the published key set (the current key first, older ones still published).
public final class TokenService: Sendable {
    public static let tokenLifetimeSeconds: Int64 = 3600
    /// `expiresIn` as replies carry it.
    public static let tokenLifetimeText = String(tokenLifetimeSeconds)
    /// Keys published at once: the current key and up to four previous ones. Older keys are retired: dropped from the
    /// key documents and from the data directory, and tokens they signed are refused (`INVALID_ID_TOKEN`).
    public static let maxPublishedKeys = 5
    public let mode: TokenSigningMode
    private let keys: Locked<[SigningKey]>
    /// Entered while a key is being generated in the background; anything that needs a key waits on it.
    private let pending = DispatchGroup()

    public init(mode: TokenSigningMode, initialKey: SigningKey?) {
        self.mode = mode
        keys = Locked(initialKey.map { [$0] } ?? [])
    }

    /// Several published keys, the first one current (restored from a data directory).
    public init(mode: TokenSigningMode, keys published: [SigningKey]) {
        self.mode = mode
        keys = Locked(Array(published.prefix(Self.maxPublishedKeys)))
    }

    /// Generates the first key on its own thread, so the server listens at once (key generation takes 0.1–0.3 s).
    /// Signing, verification and the key documents wait until it is ready; `store` runs before it is used.
    public func generateInitialKey(createdAt: Int64, store: (@Sendable (SigningKey) throws -> Void)?, onError: @escaping @Sendable (Error) -> Void) {
        pending.enter()
        DispatchQueue.global(qos: .userInitiated).async { [self] in
            defer { pending.leave() }
            do {
                let key = try SigningKey(key: RSAKey.generate(bits: 2048), createdAt: createdAt)
                try store?(key)
                keys.withLock { $0.insert(key, at: 0) }
            } catch {
                onError(error)
            }
        }
    }

    /// Blocks until a background key generation (if any) has finished. Never called on an event loop: the routes
    /// that need keys run on the signing pool.
    public func waitForKeys() { pending.wait() }

    /// Whether a key exists already (false only while the first one is being generated): signing will not wait.
    public var hasKeys: Bool { keys.withLock { !$0.isEmpty } }

    /// Published keys, current first.
    public var publishedKeys: [SigningKey] {
        if let k = keys.withLock({ $0.isEmpty ? nil : $0 }) { return k }
        waitForKeys()
        return keys.withLock { $0 }
    }
    public var currentKey: SigningKey? { publishedKeys.first }

    /// Makes `key` current; the previous keys stay published (at most `keep` in all). Returns the retired keys.
    @discardableResult
    public func rotate(to key: SigningKey, keep: Int = TokenService.maxPublishedKeys) -> [SigningKey] {
        keys.withLock { k in
            k.insert(key, at: 0)
            guard k.count > max(1, keep) else { return [] }
            let retired = Array(k[max(1, keep)...])
            k.removeLast(k.count - max(1, keep))
            return retired
        }
    }

    /// The ID token claims production issues for this user (custom claims first, reserved claims and the user's own
    /// identity fields win: `email`, `phone_number`… come from the record, after the custom claims, and a claim of that
    /// name is dropped when the user lacks the field — as production and the official emulator write them).
    /// `secondFactorId`: the session passed this SMS second factor (`sign_in_second_factor: "phone"`, `second_factor_identifier`);
    /// `secondFactor` names another kind (`totp`: a minted test principal's).
    /// `extraClaims`: the session's own claims (a custom token's `claims`), over the user's custom claims, under the
    /// reserved ones (the official emulator's order). `signInAttributes`: a SAML sign-in's attribute statements
    /// (`firebase.sign_in_attributes`, in that sign-in's token only).
    public static func claims(for user: UserRecord, key: StoreKey, authTime: Int64, signInProvider: String, issuedAt: Int64,
                              secondFactorId: String? = nil, extraClaims: JSONObject = JSONObject(), secondFactor: String? = nil,
                              signInAttributes: JSONObject? = nil) -> JSONObject {
        var c = JSONObject()
        c.set("name", user.displayName.map(JSON.string))
        c.set("picture", user.photoUrl.map(JSON.string))
        for (k, v) in user.customClaims where Self.mayCarry(k) { c[k] = v }
        for (k, v) in extraClaims where Self.mayCarry(k) { c[k] = v }
        c["iss"] = .string("https://securetoken.google.com/\(key.projectId)")
        c["aud"] = .string(key.projectId)
        c["auth_time"] = .int(authTime)
        c["user_id"] = .string(user.localId)
        c["sub"] = .string(user.localId)
        c["iat"] = .int(issuedAt)
        c["exp"] = .int(issuedAt + tokenLifetimeSeconds)
        c.set("email", user.email.map(JSON.string))
        // With an email, as production; without one only when something (a blocking function, an admin) verified it.
        if user.email != nil || user.emailVerified { c["email_verified"] = .bool(user.emailVerified) }
        c.set("phone_number", user.phoneNumber.map(JSON.string))
        if signInProvider == "anonymous" { c["provider_id"] = "anonymous" }
        var identities = JSONObject()
        if let p = user.phoneNumber { identities["phone"] = [.string(p)] }
        if let e = user.email { identities["email"] = [.string(e)] }
        for p in user.providerUserInfo { identities[p.providerId] = .array((identities[p.providerId]?.arrayValue ?? []) + [.string(p.rawId)]) }
        var fb = JSONObject()
        fb["identities"] = .object(identities)
        fb["sign_in_provider"] = .string(signInProvider)
        if let secondFactorId {
            fb["second_factor_identifier"] = .string(secondFactorId)
            fb["sign_in_second_factor"] = .string(secondFactor ?? "phone")
        }
        fb.set("tenant", key.tenantId.map(JSON.string))
        fb.set("sign_in_attributes", signInAttributes.map(JSON.object))
        c["firebase"] = .object(fb)
        return c
    }

    /// `claims(for:…)` serialized, written straight into bytes for a user without custom claims and a session without
    /// extra claims (every phone sign-in of such a user): no `JSONObject` to build and serialize per token. The bytes
    /// are those `JSON.object(claims(…)).serialized()` gives (a test compares them across users, tenants and factors);
    /// nil when the user has custom claims (`claims` handles their merge rules) or federated identities.
    static func claimsJSON(for user: UserRecord, key: StoreKey, authTime: Int64, signInProvider: String, issuedAt: Int64,
                           secondFactorId: String? = nil, secondFactor: String? = nil) -> [UInt8]? {
        guard user.customAttributes == nil, user.providerUserInfo.isEmpty else { return nil }
        var c = JSONObjectBytes(capacity: 768)
        if let v = user.displayName { c.string("name", v) }
        if let v = user.photoUrl { c.string("picture", v) }
        c.string("iss", prefix: "https://securetoken.google.com/", key.projectId)
        c.string("aud", key.projectId)
        c.int("auth_time", authTime)
        c.string("user_id", user.localId)
        c.string("sub", user.localId)
        c.int("iat", issuedAt)
        c.int("exp", issuedAt + tokenLifetimeSeconds)
        if let e = user.email { c.string("email", e) }
        if user.email != nil || user.emailVerified { c.bool("email_verified", user.emailVerified) }
        if let p = user.phoneNumber { c.string("phone_number", p) }
        if signInProvider == "anonymous" { c.string("provider_id", "anonymous") }
        c.object("firebase") { fb in
            fb.object("identities") { ids in
                if let p = user.phoneNumber { ids.strings("phone", [p]) }
                if let e = user.email { ids.strings("email", [e]) }
            }
            fb.string("sign_in_provider", signInProvider)
            if let secondFactorId {
                fb.string("second_factor_identifier", secondFactorId)
                fb.string("sign_in_second_factor", secondFactor ?? "phone")
            }
            if let t = key.tenantId { fb.string("tenant", t) }
        }
        return c.finish()
    }

    /// ID token fields that describe the user: a session's extra claims never set them, even when the user lacks
    /// them (the official emulator writes these after the extra claims, dropping the absent ones).
    static let userFields: Set<String> = ["email", "email_verified", "phone_number", "provider_id", "user_id"]

    /// Whether a custom, session or blocking-function claim of this name may appear in an ID token: not a reserved
    /// claim, not one of the user's identity fields (`userFields`).
    static func mayCarry(_ name: String) -> Bool { !CustomClaims.reserved.contains(name) && !userFields.contains(name) }

    /// Signs (or, in `none` mode, serializes) the claims.
    public func sign(_ claims: JSONObject) throws -> String {
        try sign(payloadJSON: JSON.object(claims).serialized())
    }

    /// Signs (or, in `none` mode, encodes) a payload already serialized (`claimsJSON`).
    public func sign(payloadJSON: [UInt8]) throws -> String {
        switch mode {
        case .none:
            return JWTSerializer.unsigned(payloadJSON: payloadJSON)
        case .rs256:
            guard let k = currentKey else { throw AuthError.internalError("No signing key.") }
            return try k.sign(payloadJSON: payloadJSON)
        }
    }

    /// Checks an incoming ID token: format, signature (any published key), project, expiry against `now`.
    /// Account checks (exists, disabled, revoked) follow in `Emulator.user(for:)`.
    public func verify(_ token: String?, projectId: String, nowSeconds: Int64) throws(AuthError) -> TokenIdentity {
        guard let token, !token.isEmpty else { throw AuthError(.missingIdToken) }
        guard let jwt = DecodedJWT(token) else { throw AuthError(.invalidIdToken) }
        switch jwt.algorithm {
        case "RS256":
            let keys = publishedKeys
            let candidates = jwt.keyID.map { kid in keys.filter { $0.kid == kid } } ?? keys
            guard candidates.contains(where: { $0.verify(jwt) }) else { throw AuthError(.invalidIdToken) }
        case "none":
            guard mode == .none, jwt.signature.isEmpty else { throw AuthError(.invalidIdToken) }
        default:
            throw AuthError(.invalidIdToken)
        }
        let p = jwt.payload
        // Times are whole seconds within what a timestamp can express (0 … year 9999); anything else, including
        // numbers beyond Int64, is a malformed token, never arithmetic on a huge value.
        func seconds(_ v: JSON?) -> Int64? { v?.int64Value.flatMap { (0...Timestamp.maxSeconds).contains($0) ? $0 : nil } }
        guard let sub = Self.subject(p), let iat = seconds(p["iat"]), let exp = seconds(p["exp"]) else { throw AuthError(.invalidIdToken) }
        let authTime: Int64
        if let raw = p["auth_time"] {
            guard let t = seconds(raw) else { throw AuthError(.invalidIdToken) }
            authTime = t
        } else {
            authTime = iat
        }
        guard p["aud"]?.stringValue == projectId, p["iss"]?.stringValue == "https://securetoken.google.com/\(projectId)" else {
            throw AuthError(.invalidIdToken)
        }
        guard nowSeconds < exp else { throw AuthError(.tokenExpired) }
        let fb = p["firebase"]?.objectValue
        return TokenIdentity(
            projectId: projectId, tenantId: fb?["tenant"]?.stringValue, localId: sub, issuedAt: iat,
            authTime: authTime, signInProvider: fb?["sign_in_provider"]?.stringValue ?? "phone")
    }

    /// The uid a token names, as firebase-admin and google-auth require it in every mode: `sub` a non-empty string of
    /// at most 128 characters; `user_id`, when present, the same string. Nil otherwise (`INVALID_ID_TOKEN`): a
    /// token without `sub` is never accepted through `user_id` alone.
    static func subject(_ claims: JSONObject) -> String? {
        guard case .string(let sub)? = claims["sub"], !sub.isEmpty, sub.unicodeScalars.count <= 128 else { return nil }
        if let uid = claims["user_id"] {
            guard case .string(let u) = uid, u == sub else { return nil }
        }
        return sub
    }

    /// `{kid: PEM certificate}` as Google's x509 metadata endpoint.
    public var x509Document: JSON {
        var o = JSONObject()
        for k in publishedKeys { o[k.kid] = .string(k.certificatePEM) }
        return .object(o)
    }

    /// `{"keys":[JWK…]}`
    public var jwksDocument: JSON { ["keys": .array(publishedKeys.map { .object($0.jwk) })] }
}
