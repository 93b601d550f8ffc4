import EmulatorSupport
import JWT
import PhoneAuthCore

/// Reading `UserChanges` from a request body (shared by create and update).
extension Call {
    func userChanges(privileged: Bool) throws(AuthError) -> UserChanges {
        var c = UserChanges()
        if let v = try string("displayName") { c.displayName = .set(v) }
        if let v = try string("photoUrl") { c.photoUrl = .set(v) }
        if let v = try string("email") { c.email = v.isEmpty ? .clear : .set(v) }
        if let v = try string("password") { (c.passwordHash, c.salt) = try Passwords.checkedHash(v, random: emulator.random) }
        for attr in try strings("deleteAttribute") {
            switch attr {
            case "DISPLAY_NAME": c.displayName = .clear
            case "PHOTO_URL": c.photoUrl = .clear
            case "EMAIL": c.email = .clear
            case "PASSWORD": c.clearPassword = true
            default: throw AuthError.invalidJSON("Invalid value at 'delete_attribute' (TYPE_ENUM), \"\(attr)\"")
            }
        }
        let adminOnly = ["customAttributes", "disableUser", "disabled", "emailVerified", "createdAt", "lastLoginAt"]
        if !privileged {
            for k in adminOnly where body[k] != nil && body[k] != .null {
                if k == "customAttributes" { throw AuthError(.insufficientPermission) }
                throw AuthError(.operationNotAllowed)
            }
            return c
        }
        if let v = try string("phoneNumber") { c.phoneNumber = v.isEmpty ? .clear : .set(v) }
        if let v = try bool("emailVerified") { c.emailVerified = v }
        if let v = try bool("disableUser") { c.disabled = v } else if let v = try bool("disabled") { c.disabled = v }
        if let v = try string("customAttributes") { c.customAttributes = try CustomClaims.validate(v.isEmpty ? "{}" : v) }
        if let v = try int("validSince") { c.validSince = try TimeField.validSince.check(v) }
        if let v = try int("createdAt") { c.createdAt = try TimeField.createdAt.check(v) }
        if let v = try int("lastLoginAt") { c.lastLoginAt = try TimeField.lastLoginAt.check(v) }
        return c
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

/// Client-supplied account times: epoch milliseconds (`createdAt`, `lastLoginAt`) or seconds (`validSince`) from the
/// epoch to 9999-12-31T23:59:59.999Z, the range a protobuf Timestamp (and RFC 3339) can express. Anything else is
/// refused before it is stored, so every stored time formats, sorts and survives a data-dir restart.
enum TimeField: String {
    case createdAt, lastLoginAt, validSince

    var maximum: Int64 { self == .validSince ? Timestamp.maxSeconds : Timestamp.maxMillis }

    func isValid(_ v: Int64) -> Bool { v >= 0 && v <= maximum }

    /// What an import's per-user error and the 400 say.
    var rangeText: String {
        self == .validSince
            ? "\(rawValue) must be seconds since the epoch from 0 to \(maximum) (9999-12-31T23:59:59Z)"
            : "\(rawValue) must be milliseconds since the epoch from 0 to \(maximum) (9999-12-31T23:59:59.999Z)"
    }

    func check(_ v: Int64) throws(AuthError) -> Int64 {
        guard isValid(v) else { throw AuthError.invalidArgument(rangeText + ".") }
        return v
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
            var changes = try call.userChanges(privileged: true)
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
        let changes = try call.userChanges(privileged: false)
        if let idToken = try call.string("idToken"), !idToken.isEmpty {
            // Link an email/password to the signed-in user: the update and its refresh token are one transaction.
            let (identity, _) = try app.verifiedUser(idToken, call: call, tenant: key.tenantId)
            let k = StoreKey(projectId: call.projectId, tenantId: identity.tenantId)
            let provider = changes.passwordHash != nil ? "password" : identity.signInProvider
            let authTime = app.emulator.clock.nowSeconds()
            let (user, refresh) = try app.emulator.updateUser(k, localId: identity.localId, changes: changes,
                                                              refresh: .init(signInProvider: provider, authTime: authTime))
            let id = try app.idToken(for: user, key: k, signInProvider: provider, authTime: authTime)
            return Reply(.object(o.merging(["idToken": .string(id), "refreshToken": .string(refresh ?? ""), "expiresIn": "3600", "localId": .string(user.localId)])))
        }
        if app.emulator.tenantSettings(key)?.enableAnonymousUser == false, changes.passwordHash == nil {
            throw AuthError(.adminOnlyOperation)
        }
        return try app.signIn(call, key, .signUp(.init(changes: changes)), Answer())
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
        var changes = try call.userChanges(privileged: call.privileged)
        EmailChange.revokeOnChange(app, key: key, localId: localId, &changes)
        if call.privileged, let mfa = try call.object("mfa") {
            // Replaces the list; `enrollments: []` or `mfa: {}` clears it (no `mfa` key leaves it alone).
            let list = mfa["enrollments"] ?? .null
            changes.mfaInfo = list == .null || list.arrayValue?.isEmpty == true
                ? [] : try call.adminEnrollments(list, field: "mfa.enrollments", generateIds: false, emulator: app.emulator)
        }
        let deleteProviders = try call.strings("deleteProvider")
        // A new password (or `returnSecureToken`) on a signed-in user's call issues tokens: in the same transaction.
        let wantsTokens = try call.bool("returnSecureToken") == true
        var grant: Emulator.RefreshGrant? = nil
        if let identity, changes.passwordHash != nil || changes.validSince != nil || wantsTokens {
            grant = .init(signInProvider: changes.passwordHash != nil ? "password" : identity.signInProvider, authTime: identity.authTime)
        }
        let (user, refresh) = try app.emulator.updateUser(key, localId: localId, changes: changes, deleteProviders: deleteProviders, refresh: grant)
        var o: JSONObject = ["kind": "identitytoolkit#SetAccountInfoResponse", "localId": .string(user.localId)]
        o.set("email", user.email.map(JSON.string))
        o.set("displayName", user.displayName.map(JSON.string))
        o.set("photoUrl", user.photoUrl.map(JSON.string))
        o.set("phoneNumber", user.phoneNumber.map(JSON.string))
        if user.email != nil { o["emailVerified"] = .bool(user.emailVerified) }
        o["providerUserInfo"] = UserJSON.render(user)["providerUserInfo"] ?? []
        if let identity, let refresh, let provider = grant?.signInProvider {
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
        let (key, localId, _) = try call.targetAccount(app, unprivilegedError: AuthError(.missingIdToken))
        try app.emulator.deleteUser(key, localId: localId)
        return Reply(["kind": "identitytoolkit#DeleteAccountResponse"])
    }
}
