import EmulatorSupport
import JWT
import PhoneAuthCore

/// Reading `UserChanges` from a request body (shared by create and update), through the user field table: each field
/// the caller may set (`UserField.access`) under its request keys, `deleteAttribute`, and the password.
extension Call {
    /// `policyKey`: the project or tenant whose password policy a new password must meet.
    func userChanges(privileged: Bool, policyKey: StoreKey) throws(AuthError) -> UserChanges {
        let table = emulator.userFields
        var c = UserChanges()
        let mine: UserField.Access = privileged ? .admin : .client
        for f in table.fields where f.access.contains(.client) {
            if let v = try requestValue(f) { c[field: f.name] = try f.fromRequest(v) }
        }
        if let v = try string("password") {
            let (hash, salt) = try Passwords.checkedHash(v, policy: emulator.config(policyKey).passwordPolicy, random: emulator.random)
            c.password = PasswordChange(hash: hash, salt: salt)
        }
        for attr in try strings("deleteAttribute") {
            if attr == "PASSWORD" {
                if c.password == nil { c.password = .remove } else { c.password?.clear = true }
            } else if let f = table.fields.first(where: { $0.deleteAttribute == attr }) {
                c[field: f.name] = .clear
            } else {
                throw AuthError.invalidJSON("Invalid value at 'delete_attribute' (TYPE_ENUM), \"\(attr)\"")
            }
        }
        let adminOnly = table.fields.filter { !$0.access.contains(.client) && $0.access.contains(.admin) }
        if !privileged {
            // A field the user may not set: refused (claims with INSUFFICIENT_PERMISSION before anything else), or ignored.
            let present = adminOnly.filter { f in f.clientRefusal != nil && f.requestKeys.contains { body[$0] != nil && body[$0] != .null } }
            if present.contains(where: { $0.clientRefusal == .insufficientPermission }) { throw AuthError(.insufficientPermission) }
            if let f = present.first, let code = f.clientRefusal { throw AuthError(code) }
            return c
        }
        for f in adminOnly where f.access.contains(mine) {
            if let v = try requestValue(f) { c[field: f.name] = try f.fromRequest(v) }
        }
        return c
    }

    /// The first of `f`'s request keys the body has, read as the field's kind (with the wire's type errors).
    func requestValue(_ f: UserField) throws(AuthError) -> JSON? {
        for key in f.requestKeys {
            switch f.requestKind {
            case .string: if let v = try string(key) { return .string(v) }
            case .bool: if let v = try bool(key) { return .bool(v) }
            case .int64: if let v = try int(key) { return .exactInt(v) }
            }
        }
        return nil
    }

    /// An integer field given as a JSON number or a decimal string (proto JSON int64).
    func int(_ name: String) throws(AuthError) -> Int64? {
        guard let v = body[name] else { return nil }
        switch v {
        case .null: return nil
        case .number: if let n = v.int64Value { return n }
        case .string(let s): if let n = Int64(s) { return n }
        default: break
        }
        throw AuthError.invalidJSON("Invalid value at '\(name)' (TYPE_INT64), \(v.serializedString.prefix(100))")
    }
}

/// `accounts:signUp` (legacy `signupNewUser`) and admin `POST /v1/projects/{p}/accounts`.
/// Admin: creates a user with the given fields (no tokens). Client: an empty body makes an anonymous user;
/// `email` + `password` make (or, with `idToken`, link) a password account.
enum SignUp {
    static func handle(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        let key = try call.storeKey()
        var o: JSONObject = ["kind": "identitytoolkit#SignupNewUserResponse"]
        if call.privileged, (try call.string("idToken")) == nil {
            var changes = try call.userChanges(privileged: true, policyKey: key)
            if let mfa = call.body["mfaInfo"], mfa != .null {
                guard mfa.arrayValue != nil else { throw AuthError.invalidJSON("/mfaInfo must be array") }
                changes.mfaInfo = try call.adminEnrollments(mfa, field: "mfaInfo", generateIds: true, emulator: app.emulator)
            }
            if changes.disabled == nil, let d = try call.bool("disabled") { changes.disabled = d }
            let user = try app.emulator.createUser(key, localId: try call.string("localId"), changes: changes)
            o["localId"] = .string(user.localId)
            o.set("email", user.email.map(JSON.string))
            o.set("displayName", user.displayName.map(JSON.string))
            return Reply(.object(o))
        }
        if try call.string("localId") != nil { throw AuthError(.unexpectedParameter, "User ID") }
        try EmailSignUp.check(app, call, key)
        let changes = try call.userChanges(privileged: false, policyKey: key)
        if let idToken = try call.string("idToken"), !idToken.isEmpty {
            // Link an email/password to the signed-in user: the update and its refresh token are one transaction.
            let (identity, _) = try app.verifiedUser(idToken, call: call, tenant: key.tenantId)
            let k = StoreKey(projectId: call.projectId, tenantId: identity.tenantId)
            let provider = changes.passwordHash != nil ? "password" : identity.signInProvider
            let authTime = app.emulator.clock.nowSeconds()
            let (user, refresh) = try app.emulator.updateUser(k, localId: identity.localId, changes: changes,
                                                              refresh: .init(signInProvider: provider, authTime: authTime))
            let id = try app.idToken(for: user, key: k, signInProvider: provider, authTime: authTime)
            o.set("email", user.email.map(JSON.string))
            o.set("displayName", user.displayName.map(JSON.string))
            return Reply(.object(o.merging(["idToken": .string(id), "refreshToken": .string(refresh ?? ""), "expiresIn": "3600", "localId": .string(user.localId)])))
        }
        if app.emulator.tenantSettings(key)?.enableAnonymousUser == false, changes.passwordHash == nil {
            throw AuthError(.adminOnlyOperation)
        }
        return try app.signIn(call, key, .signUp(.init(changes: changes, clientIP: call.request.remoteAddress)), Answer())
    }

    /// The signed-up user's tokens (PhoneAuthCore/SignUp.swift: the user, its sign-in time and its refresh token in
    /// one transaction).
    struct Answer: SignInAnswer {
        func reply(_ app: PhoneAuthApp, _ call: Call, _ s: SignedIn, idToken: String) -> Reply {
            var o: JSONObject = ["kind": "identitytoolkit#SignupNewUserResponse"]
            o["idToken"] = .string(idToken)
            o["refreshToken"] = .string(s.refreshToken)
            o["expiresIn"] = .string(String(TokenService.tokenLifetimeSeconds))
            o["localId"] = .string(s.user.localId)
            o.set("email", s.user.email.map(JSON.string))
            // The user's name as saved (the request's, or a blocking function's), as production's SignUpResponse.
            o.set("displayName", s.user.displayName.map(JSON.string))
            return Reply(.object(o))
        }
    }
}

extension Call {
    /// The account a call acts on: the user of its `idToken`, or (admin only) its `localId`. Without either, an
    /// unprivileged call gets `unprivilegedError`.
    func targetAccount(_ app: PhoneAuthApp, unprivilegedError: AuthError) throws -> (key: StoreKey, localId: String, identity: TokenIdentity?) {
        let key = try storeKey()
        if let idToken = try string("idToken"), !idToken.isEmpty {
            let (id, _) = try app.verifiedUser(idToken, call: self, tenant: key.tenantId)
            return (StoreKey(projectId: projectId, tenantId: id.tenantId), id.localId, id)
        }
        guard privileged else { throw unprivilegedError }
        guard let id = try string("localId"), !id.isEmpty else { throw AuthError(.missingLocalId) }
        return (key, id, nil)
    }
}

/// `accounts:update` (legacy `setAccountInfo`) and admin `…/accounts:update`.
enum UpdateAccount {
    static func handle(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        if let reply = try ApplyActionCode.handleIfPresent(app, call) { return reply }
        let (key, localId, identity) = try call.targetAccount(app, unprivilegedError: AuthError(.invalidReqType, "Unsupported request parameters."))
        var changes = try call.userChanges(privileged: call.privileged, policyKey: key)
        EmailChange.revokeOnChange(app, key: key, localId: localId, &changes)
        if call.privileged, let mfa = try call.object("mfa") {
            // Replaces the list; `enrollments: []` or `mfa: {}` clears it (no `mfa` key leaves it alone).
            if mfa["enrollments"] == .null { throw AuthError.invalidJSON("/mfa/enrollments must be array") }
            let list = mfa["enrollments"] ?? .null
            changes.mfaInfo = list == .null || list.arrayValue?.isEmpty == true
                ? [] : try call.adminEnrollments(list, field: "mfa.enrollments", generateIds: false, emulator: app.emulator)
        }
        let deleteProviders = try call.strings("deleteProvider")
        // `linkProviderUserInfo` (firebase-admin's update_user(provider_to_link=…)): admin only, as production — a user
        // linking an identity of someone else's would receive that person's later sign-ins.
        var linkProvider: ProviderUserInfo? = nil
        if let link = try call.object("linkProviderUserInfo") {
            guard call.privileged else { throw AuthError(.insufficientPermission) }
            guard let p = link["providerId"]?.stringValue, !p.isEmpty else { throw AuthError(.missingProviderId) }
            guard let r = link["rawId"]?.stringValue, !r.isEmpty else { throw AuthError(.missingRawId) }
            guard ProviderUserInfo.isValidProviderId(p) else { throw AuthError(.invalidProviderId) }
            guard r.utf8.count <= ProviderUserInfo.maxRawIdLength, !Identifiers.containsControlCharacters(r) else {
                throw AuthError.invalidArgument("rawId must be at most \(ProviderUserInfo.maxRawIdLength) bytes without control characters.")
            }
            for k in ["displayName", "photoUrl", "email", "screenName"] {
                if let t = link[k]?.stringValue, t.utf16.count > UserFieldLimits.photoUrl { throw AuthError.invalidArgument("linkProviderUserInfo.\(k) is too long.") }
            }
            linkProvider = ProviderUserInfo(providerId: p, rawId: r, displayName: link["displayName"]?.stringValue,
                                            photoUrl: link["photoUrl"]?.stringValue, email: link["email"]?.stringValue?.lowercased(),
                                            screenName: link["screenName"]?.stringValue)
        }
        // A new password (or `returnSecureToken`) on a signed-in user's call issues tokens: in the same transaction.
        let wantsTokens = try call.bool("returnSecureToken") == true
        var grant: Emulator.RefreshGrant? = nil
        if let identity, changes.passwordHash != nil || changes.validSince != nil || wantsTokens {
            // The session keeps its sign-in provider: setting a password does not make a custom-token (or any other)
            // session a password one — but an anonymous one that gains an email and password is upgraded, as signUp's
            // link (and the official emulator) makes it.
            let upgraded = identity.signInProvider == "anonymous" && changes.passwordHash != nil
            grant = .init(signInProvider: upgraded ? "password" : identity.signInProvider, authTime: identity.authTime)
        }
        // A user changing their own email (not an anonymous session, not an admin) is sent a RECOVER_EMAIL code at the
        // old address, in the update's transaction; a beforeSendEmail function, when configured, is asked first.
        let anonymous = identity?.signInProvider == "anonymous"
        let recovery = identity == nil || anonymous ? nil : SendOobCode.link(call, type: .recoverEmail, tenant: key.tenantId)
        let finalChanges = changes, finalLink = linkProvider, finalGrant = grant
        let update: @Sendable () throws -> Reply = {
            let (user, refresh) = try app.emulator.updateUser(key, localId: localId, changes: finalChanges, deleteProviders: deleteProviders,
                                                              linkProvider: finalLink, anonymousSession: anonymous, recoveryLink: recovery,
                                                              refresh: finalGrant)
            return try answer(app, key, user, refresh: refresh, identity: identity, provider: finalGrant?.signInProvider)
        }
        if recovery != nil, case .set(let newEmail) = changes.email, let current = app.emulator.existingStore(key)?.read({ $0.users[localId] }),
           let old = current.email, old.lowercased() != newEmail.lowercased() {
            return try app.sendEmail(call, key, to: old, type: .recoverEmail, user: current, update)
        }
        return try update()
    }

    static func answer(_ app: PhoneAuthApp, _ key: StoreKey, _ user: UserRecord, refresh: String?, identity: TokenIdentity?,
                       provider: String?) throws -> Reply {
        var o: JSONObject = ["kind": "identitytoolkit#SetAccountInfoResponse", "localId": .string(user.localId)]
        o.set("email", user.email.map(JSON.string))
        o.set("displayName", user.displayName.map(JSON.string))
        o.set("photoUrl", user.photoUrl.map(JSON.string))
        o.set("phoneNumber", user.phoneNumber.map(JSON.string))
        if user.email != nil { o["emailVerified"] = .bool(user.emailVerified) }
        o["providerUserInfo"] = app.emulator.userFields.render(user)["providerUserInfo"] ?? []
        if let identity, let refresh, let provider {
            o["idToken"] = .string(try app.idToken(for: user, key: key, signInProvider: provider, authTime: identity.authTime))
            o["refreshToken"] = .string(refresh)
            o["expiresIn"] = .string(String(TokenService.tokenLifetimeSeconds))
        }
        return Reply(.object(o))
    }
}

/// `accounts:delete` (legacy `deleteAccount`) and admin `…/accounts:delete`.
enum DeleteAccount {
    static func handle(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        // An admin names the user by localId; an ID token alone is MISSING_LOCAL_ID there (the official emulator's).
        if call.privileged, (try call.string("localId") ?? "").isEmpty {
            _ = try call.storeKey()
            throw AuthError(.missingLocalId)
        }
        let (key, localId, _) = try call.targetAccount(app, unprivilegedError: AuthError(.missingIdToken))
        try app.emulator.deleteUser(key, localId: localId)
        return Reply(["kind": "identitytoolkit#DeleteAccountResponse"])
    }
}
