import EmulatorSupport
import PhoneAuthCore

/// Client `signUp` with an email and password (or linking them with `idToken`): production's checks, in the official
/// emulator's order, before the account is written.
enum EmailSignUp {
    static func check(_ app: PhoneAuthApp, _ call: Call, _ key: StoreKey) throws(AuthError) {
        let email = try call.string("email"), password = try call.string("password")
        let idToken = try call.string("idToken")
        guard (idToken?.isEmpty == false) || email != nil || password != nil else { return }
        guard let email, !email.isEmpty else { throw AuthError(.missingEmail) }
        guard let password, !password.isEmpty else { throw AuthError(.missingPassword) }
        if app.emulator.tenantSettings(key)?.allowPasswordSignup == false { throw AuthError(.operationNotAllowed) }
        guard Identifiers.isValidEmail(email) else { throw AuthError(.invalidEmail) }
        if app.emulator.user(key, email: email) != nil { throw AuthError(.emailExists) }
        try Passwords.check(password, policy: app.emulator.config(key).passwordPolicy)
    }
}

/// A tenant with `disableAuth` answers `PROJECT_DISABLED` before anything in the request is looked at (production's
/// and the official emulator's first check of the email endpoints: a wrong password or an unknown email there is not
/// `INVALID_LOGIN_CREDENTIALS`).
enum TenantGate {
    static func checkEnabled(_ app: PhoneAuthApp, _ key: StoreKey) throws(AuthError) {
        if app.emulator.tenantSettings(key)?.disableAuth == true { throw AuthError(.projectDisabled) }
    }
}

/// `accounts:update` changing a user's email: the new address is unverified and older tokens are revoked
/// (`validSince` = now), as production does; the same address is no change.
enum EmailChange {
    static func revokeOnChange(_ app: PhoneAuthApp, key: StoreKey, localId: String, _ changes: inout UserChanges) {
        guard case .set(let email) = changes.email else { return }
        let current = app.emulator.existingStore(key)?.read { $0.users[localId]?.email }
        guard current?.lowercased() != email.lowercased() else { return }
        if changes.emailVerified == nil { changes.emailVerified = false }
        if changes.validSince == nil { changes.validSince = app.emulator.clock.nowSeconds() }
    }
}

/// `accounts:signInWithPassword` (legacy `verifyPassword`). Unknown email and wrong password are both
/// `INVALID_LOGIN_CREDENTIALS` (production with email enumeration protection, the default since 2023), or
/// `EMAIL_NOT_FOUND` / `INVALID_PASSWORD` with `emailPrivacyConfig.enableImprovedEmailPrivacy: false`. The password is
/// hashed here, outside the store's lock; the sign-in then checks in one transaction that the hash is still current.
enum SignInWithPassword {
    static func handle(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        let key = try call.storeKey()
        try TenantGate.checkEnabled(app, key)
        if app.emulator.tenantSettings(key)?.allowPasswordSignup == false { throw AuthError(.passwordLoginDisabled) }
        guard let email = try call.string("email") else { throw AuthError(.missingEmail) }
        guard Identifiers.isValidEmail(email) else { throw AuthError(.invalidEmail) }
        guard let password = try call.string("password"), !password.isEmpty else { throw AuthError(.missingPassword) }
        let improved = app.emulator.config(key).enableImprovedEmailPrivacy
        guard let user = app.emulator.user(key, email: email) else { throw AuthError(improved ? .invalidLoginCredentials : .emailNotFound) }
        guard !user.disabled else { throw AuthError(.userDisabled) }
        let wrong = AuthError(improved ? .invalidLoginCredentials : .invalidPassword)
        guard let hash = user.passwordHash else { throw wrong }
        // Locked after too many wrong passwords while the abuse limits are on (Protection.swift): the right one too.
        try app.emulator.checkPasswordLockout(key, localId: user.localId)
        // On an event loop only a password verified before (a salted SHA-256) and a sign-in that signs nothing (an
        // enrolled user's MFA-required answer); PBKDF2 and signatures run on the signing pool.
        if !Passwords.knownMatch(password, hash: hash, salt: user.salt) { try call.beforeCostlyWork() }
        guard Passwords.matches(password, hash: hash, salt: user.salt, algorithm: user.passwordHashAlgorithm) else {
            app.emulator.countWrongPassword(key, localId: user.localId)
            throw wrong
        }
        // The enforced password policy: a password that misses a requirement cannot sign in with
        // `forceUpgradeOnSignin` (production's "require" mode), else signs in and is told what it misses ("notify").
        let policy = app.emulator.config(key).passwordPolicy
        let missing = policy.enforced ? policy.missing(password) : []
        if !missing.isEmpty, policy.forceUpgradeOnSignin { throw PasswordPolicy.refusal(missing) }
        // beforeSignIn runs here unless a second factor follows (then mfaSignIn:finalize runs it, as production); an
        // enrolled user's MFA-required answer signs nothing and is answered on the loop.
        // An imported hash is replaced by ours in the sign-in's transaction (production rehashes on sign-in).
        let request = SignInRequest.Password(localId: user.localId, verifiedHash: hash,
                                             secondFactorExpected: app.emulator.secondFactorLikelyRequired(key, user: user),
                                             upgrade: Passwords.upgrade(password, user: user, random: app.emulator.random))
        return try app.signIn(call, key, .password(request), Answer(email: email, notifications: missing))
    }

    struct Answer: SignInAnswer {
        /// As the request gave it: the reply's `email` when the user has none.
        let email: String
        /// The requirements of the enforced password policy the password misses (`userNotifications`).
        var notifications: [PasswordPolicy.Requirement] = []

        /// Production's `userNotifications`: `[{notificationCode, notificationMessage}]`, only when there are some.
        func addNotifications(_ o: inout JSONObject) {
            guard !notifications.isEmpty else { return }
            o["userNotifications"] = .array(notifications.map {
                ["notificationCode": .string($0.notificationCode), "notificationMessage": .string($0.message)]
            })
        }

        func reply(_ app: PhoneAuthApp, _ call: Call, _ s: SignedIn, idToken: String) -> Reply {
            var o: JSONObject = ["kind": "identitytoolkit#VerifyPasswordResponse", "localId": .string(s.user.localId),
                                 "email": .string(s.user.email ?? email.lowercased()), "displayName": .string(s.user.displayName ?? ""),
                                 "idToken": .string(idToken), "registered": true, "refreshToken": .string(s.refreshToken),
                                 "expiresIn": .string(String(TokenService.tokenLifetimeSeconds))]
            o.set("photoUrl", s.user.photoUrl.map(JSON.string))
            addNotifications(&o)
            return Reply(.object(o))
        }

        /// An enrolled user: no tokens yet, the MFA-required shape (the SDKs raise auth/multi-factor-auth-required).
        func reply(_ app: PhoneAuthApp, _ call: Call, ended outcome: SignInOutcome) throws -> Reply {
            guard case .secondFactorRequired(let u, let first) = outcome else { throw AuthError.internalError("unexpected password sign-in outcome") }
            var o: JSONObject = ["kind": "identitytoolkit#VerifyPasswordResponse", "localId": .string(u.localId),
                                 "email": .string(u.email ?? email.lowercased()), "displayName": .string(u.displayName ?? ""),
                                 "registered": true]
            for (k, v) in MFAJSON.pendingReply(first) ?? [:] { o[k] = v }
            addNotifications(&o)
            return Reply(.object(o))
        }
    }
}

/// `accounts:createAuthUri` (legacy `createAuthUri`; the JS SDK's `fetchSignInMethodsForEmail`): whether an email
/// has an account and how it signs in — only with `enableImprovedEmailPrivacy: false`; with email enumeration
/// protection (the default) the answer is the same for every email. Empty lists are omitted, as production's proto
/// JSON does.
enum CreateAuthUri {
    static func handle(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        let key = try call.storeKey()
        try TenantGate.checkEnabled(app, key)
        if let providerId = try call.string("providerId"), !providerId.isEmpty {
            return try providerAuthUri(app, call, providerId: providerId)
        }
        guard let identifier = try call.string("identifier"), !identifier.isEmpty else { throw AuthError(.missingIdentifier) }
        guard let continueUri = try call.string("continueUri"), !continueUri.isEmpty else { throw AuthError(.missingContinueUri) }
        guard Identifiers.isValidEmail(identifier) else { throw AuthError(.invalidIdentifier) }
        guard isAbsoluteURI(continueUri) else { throw AuthError(.invalidContinueUri) }
        var sessionId = try call.string("sessionId") ?? ""
        if sessionId.isEmpty { sessionId = app.emulator.random.alphanumeric(27) }
        var o: JSONObject = ["kind": "identitytoolkit#CreateAuthUriResponse"]
        let config = app.emulator.config(key)
        guard !config.enableImprovedEmailPrivacy else {
            o["sessionId"] = .string(sessionId)
            return Reply(.object(o))
        }
        // The user with that email, else one with a federated identity of that email (the official emulator's order).
        let user = app.emulator.existingStore(key)?.read { s in s.user(email: identifier) ?? s.users(providerEmail: identifier).first }
        o["registered"] = .bool(user != nil)
        if let methods = user?.signInMethods {
            // With several accounts per email an identity provider's account is another account: only the email's
            // own methods are listed (the official emulator's answer).
            let keep: (String) -> Bool = { !config.allowDuplicateEmails || $0 == "password" || $0 == "emailLink" }
            let all = methods.allProviders.filter(keep), signin = methods.signinMethods.filter(keep)
            if !all.isEmpty { o["allProviders"] = .array(all.map(JSON.string)) }
            if !signin.isEmpty { o["signinMethods"] = .array(signin.map(JSON.string)) }
        }
        o["sessionId"] = .string(sessionId)
        return Reply(.object(o))
    }

    /// `scheme://host…` with an RFC 3986 scheme and a non-empty host.
    /// With a `providerId` (production: the identity provider's sign-in URL for a redirect flow): `authUri` is the
    /// emulator's provider page for that provider, as the SDKs open it (`/emulator/auth/handler`), with the continue
    /// URL as `redirectUrl` and the `sessionId`.
    static func providerAuthUri(_ app: PhoneAuthApp, _ call: Call, providerId: String) throws(AuthError) -> Reply {
        guard let continueUri = try call.string("continueUri"), !continueUri.isEmpty else { throw AuthError(.missingContinueUri) }
        guard isAbsoluteURI(continueUri), continueUri.utf8.count <= 2048 else { throw AuthError(.invalidContinueUri) }
        let provider = providerId.lowercased()
        guard ProviderUserInfo.isValidProviderId(provider) else { throw AuthError(.invalidProviderId, "Provider Id is not supported.") }
        var sessionId = try call.string("sessionId") ?? ""
        if sessionId.isEmpty { sessionId = app.emulator.random.alphanumeric(27) }
        let host = call.request.headers["host"].flatMap { h in h.isEmpty || Identifiers.containsControlCharacters(h) ? nil : h } ?? "127.0.0.1"
        var query = [("apiKey", call.apiKey ?? "fake-api-key"), ("providerId", provider), ("authType", "signInViaRedirect"),
                     ("redirectUrl", continueUri), ("sessionId", sessionId)]
        if let t = try Identifiers.tenantID(try call.string("tenantId")) { query.append(("tid", t)) }
        let authUri = "http://" + host + "/emulator/auth/handler?" + query.map { $0.0 + "=" + URLEncoding.percentEncode($0.1) }.joined(separator: "&")
        return Reply(["kind": "identitytoolkit#CreateAuthUriResponse", "authUri": .string(authUri), "providerId": .string(provider),
                      "sessionId": .string(sessionId)])
    }

    static func isAbsoluteURI(_ s: String) -> Bool {
        guard !Identifiers.containsControlCharacters(s), let r = s.firstRange(of: "://") else { return false }
        let scheme = Array(s[..<r.lowerBound].utf8)
        func letter(_ c: UInt8) -> Bool { (c | 0x20) >= 0x61 && (c | 0x20) <= 0x7A }
        guard let first = scheme.first, letter(first),
              scheme.allSatisfy({ letter($0) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2B || $0 == 0x2D || $0 == 0x2E })
        else { return false }
        let rest = s[r.upperBound...]
        let host = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        return !host.isEmpty
    }
}
