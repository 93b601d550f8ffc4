import EmulatorSupport
import PhoneAuthCore

/// `accounts:sendOobCode` (legacy `getOobConfirmationCode`) and admin `…/accounts:sendOobCode` (firebase-admin's
/// `generate_password_reset_link` / `generate_email_verification_link`). No email is sent: the link is logged and
/// lands in the inbox (`GET /emulator/v1/projects/{p}/oobCodes`). `returnOobLink` (admin only) returns it.
enum SendOobCode {
    static func handle(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        var key = try call.storeKey()
        try TenantGate.checkEnabled(app, key)
        guard let rawType = try call.string("requestType"), !rawType.isEmpty, rawType != "OOB_REQ_TYPE_UNSPECIFIED" else {
            throw AuthError(.missingReqType)
        }
        let returnLink = try call.bool("returnOobLink") ?? false
        if returnLink && !call.privileged { throw AuthError(.insufficientPermission) }
        let continueUrl = try call.string("continueUrl").flatMap { $0.isEmpty ? nil : $0 }
        if let continueUrl, !CreateAuthUri.isAbsoluteURI(continueUrl) {
            throw AuthError(.invalidContinueUri, "((expected an absolute URI with valid scheme and host))")
        }
        // The link carries it (encoded, up to 3 bytes a byte) into the inbox, the log and --data-dir, once per code.
        if let continueUrl, continueUrl.utf8.count > maxContinueUrlBytes {
            throw AuthError(.invalidContinueUri, "((the continue URL is longer than \(maxContinueUrlBytes) bytes))")
        }
        guard rawType != "0" else { throw AuthError(.missingReqType) }
        guard let type = OobCode.RequestType(wire: rawType) else {
            throw AuthError.invalidJSON("Invalid value at 'request_type' (TYPE_ENUM), \"\(rawType.prefix(100))\"")
        }
        /// The account's email: the body's (PASSWORD_RESET; admin `returnOobLink` without `idToken`), else the
        /// `idToken` user's (whose tenant the call takes when the body names none).
        func accountEmail(fromToken: Bool) throws(AuthError) -> String {
            let idToken = try call.string("idToken").flatMap { $0.isEmpty ? nil : $0 }
            if fromToken && (idToken != nil || !returnLink) {
                guard let idToken else { throw AuthError(.missingIdToken) }
                let (identity, user) = try app.verifiedUser(idToken, call: call, tenant: key.tenantId)
                if key.tenantId == nil, let t = identity.tenantId {
                    // No `tenantId` in the body: the token's tenant is the call's (as the official emulator).
                    key = StoreKey(projectId: key.projectId, tenantId: t)
                    try TenantGate.checkEnabled(app, key)
                }
                guard let e = user.email else { throw AuthError(.missingEmail) }
                return e
            }
            guard let e = try call.string("email"), !e.isEmpty else { throw AuthError(.missingEmail) }
            guard Identifiers.isValidEmail(e) else { throw AuthError(.invalidEmail) }
            guard app.emulator.user(key, email: e) != nil else { throw AuthError(type == .passwordReset ? .emailNotFound : .userNotFound) }
            return e
        }
        var newEmail: String? = nil
        let email: String
        switch type {
        case .passwordReset:
            // Email enumeration protection: an unknown email is answered as a known one (nothing is stored or sent).
            if !call.privileged, app.emulator.config(key).enableImprovedEmailPrivacy, let e = try call.string("email"),
               Identifiers.isValidEmail(e), app.emulator.user(key, email: e) == nil {
                return Reply(["kind": "identitytoolkit#GetOobConfirmationCodeResponse", "email": .string(e.lowercased())])
            }
            email = try accountEmail(fromToken: false)
        case .verifyEmail:
            email = try accountEmail(fromToken: true)
        case .verifyAndChangeEmail:
            guard let n = try call.string("newEmail"), !n.isEmpty else { throw AuthError(.missingNewEmail) }
            guard Identifiers.isValidEmail(n) else { throw AuthError(.invalidEmail) }
            newEmail = n
            email = try accountEmail(fromToken: true)
        case .emailSignIn:
            // No account needed: the link signs one up. A tenant may turn email links off.
            if app.emulator.tenantSettings(key)?.enableEmailLinkSignin == false { throw AuthError(.operationNotAllowed) }
            guard let e = try call.string("email"), !e.isEmpty else { throw AuthError(.missingEmail) }
            guard Identifiers.isValidEmail(e) else { throw AuthError(.invalidEmail) }
            email = e
        case .recoverEmail:
            // Sent by an email change (accounts:update, VERIFY_AND_CHANGE_EMAIL), never on request.
            throw AuthError(.invalidReqType, "RECOVER_EMAIL codes are sent to the old address when an email changes, not on request.")
        }
        let storeKey = key
        let link = link(call, type: type, tenant: storeKey.tenantId, continueUrl: continueUrl)
        let target = email, moveTo = newEmail
        // beforeSendEmail (when configured) decides before anything is stored.
        return try app.sendEmail(call, storeKey, to: email, type: type, user: app.emulator.user(storeKey, email: target)) {
            let code = try app.emulator.createOobCode(storeKey, email: target, newEmail: moveTo, type: type, link: link, check: { s throws(AuthError) in
                if type == .emailSignIn { return }
                guard s.user(email: target) != nil else { throw AuthError(type == .passwordReset ? .emailNotFound : .userNotFound) }
                if let moveTo, s.user(email: moveTo) != nil { throw AuthError(.emailExists) }
            })
            var o: JSONObject = ["kind": "identitytoolkit#GetOobConfirmationCodeResponse", "email": .string(code.email)]
            if returnLink {
                o["oobCode"] = .string(code.code)
                o["oobLink"] = .string(code.link)
            }
            return Reply(.object(o))
        }
    }

    /// The link of a `type` code in the inbox and the log: `http://<Host>/emulator/action?mode=…&oobCode=…` (the
    /// official emulator's shape), with the continue URL and the tenant.
    static func link(_ call: Call, type: OobCode.RequestType, tenant: String?, continueUrl: String? = nil) -> @Sendable (String) -> String {
        let base = linkBase(call)
        return { code in
            var q = "mode=\(type.mode)&lang=en&oobCode=\(code)&apiKey=fake-api-key"
            if let continueUrl { q += "&continueUrl=" + URLEncoding.percentEncode(continueUrl) }
            if let tenant { q += "&tenantId=" + URLEncoding.percentEncode(tenant) }
            return base + "/emulator/action?" + q
        }
    }

    /// The longest continue URL a link may carry (production documents no limit; browsers' practical one).
    static let maxContinueUrlBytes = 2048

    /// `http://<Host>` of the request (the `WebBoundary` admitted it), else `http://localhost`.
    static func linkBase(_ call: Call) -> String {
        let host = call.request.headers["Host"] ?? ""
        let ok = !host.isEmpty && host.utf8.count <= 255 && host.utf8.allSatisfy { c in
            (c >= 0x30 && c <= 0x39) || ((c | 0x20) >= 0x61 && (c | 0x20) <= 0x7A) || c == 0x2E || c == 0x2D || c == 0x3A || c == 0x5B || c == 0x5D
        }
        return "http://" + (ok ? host : "localhost")
    }
}

/// `accounts:resetPassword` (legacy `resetPassword`): with `newPassword`, a PASSWORD_RESET code sets the password;
/// without, any code is only checked (`verifyPasswordResetCode` / `checkActionCode`). Answers `{email, requestType}`.
enum ResetPassword {
    static func handle(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        let key = try call.storeKey()
        try TenantGate.checkEnabled(app, key)
        if app.emulator.tenantSettings(key)?.allowPasswordSignup == false { throw AuthError(.passwordLoginDisabled) }
        guard let oobCode = try call.string("oobCode"), !oobCode.isEmpty else { throw AuthError(.missingOobCode) }
        let code: OobCode
        if let newPassword = try call.string("newPassword"), !newPassword.isEmpty {
            // The code's type is checked before the (costly) hash only through the transaction; a weak password first.
            let (hash, salt) = try Passwords.checkedHash(newPassword, policy: app.emulator.config(key).passwordPolicy, random: app.emulator.random)
            (code, _) = try app.emulator.resetPassword(key, code: oobCode, passwordHash: hash, salt: salt)
        } else {
            code = try app.emulator.checkOobCode(key, code: oobCode)
        }
        var o: JSONObject = ["kind": "identitytoolkit#ResetPasswordResponse", "requestType": .string(code.requestType.rawValue)]
        // An email-link code names no account (the official emulator's answer has no email then).
        if code.requestType != .emailSignIn { o["email"] = .string(code.email) }
        o.set("newEmail", code.newEmail.map(JSON.string))
        return Reply(.object(o))
    }
}

/// `accounts:update {oobCode}` (the SDKs' `applyActionCode`): VERIFY_EMAIL verifies, VERIFY_AND_CHANGE_EMAIL changes
/// the email (and sends the old address a RECOVER_EMAIL code), RECOVER_EMAIL restores the old one. Nil when the body
/// has no `oobCode` (an ordinary update).
enum ApplyActionCode {
    static func handleIfPresent(_ app: PhoneAuthApp, _ call: Call) throws -> Reply? {
        guard let oobCode = try call.string("oobCode"), !oobCode.isEmpty else { return nil }
        let key = try call.storeKey()
        return try apply(app, call, key, oobCode) { code, user in
            var o: JSONObject = ["kind": "identitytoolkit#SetAccountInfoResponse", "localId": .string(user.localId)]
            o.set("email", user.email.map(JSON.string))
            o["emailVerified"] = .bool(user.emailVerified)
            o.set("displayName", user.displayName.map(JSON.string))
            o.set("photoUrl", user.photoUrl.map(JSON.string))
            o["providerUserInfo"] = app.emulator.userFields.render(user)["providerUserInfo"] ?? []
            o.set("newEmail", code.newEmail.map(JSON.string))
            return Reply(.object(o))
        }
    }

    /// Applies a code (the API's `applyActionCode` and the action page): a VERIFY_AND_CHANGE_EMAIL code sends the
    /// old address its RECOVER_EMAIL code, after a beforeSendEmail function (when configured) allowed it.
    /// `used`: the answer when the code is unknown, used up or expired (the action page's), instead of the error.
    static func apply(_ app: PhoneAuthApp, _ call: Call, _ key: StoreKey, _ oobCode: String, used: Reply? = nil,
                      _ answer: @escaping @Sendable (OobCode, UserRecord) throws -> Reply) throws -> Reply {
        let recovery = SendOobCode.link(call, type: .recoverEmail, tenant: key.tenantId)
        let work: @Sendable () throws -> Reply = {
            let applied: (OobCode, UserRecord)
            if let used {
                guard let a = try EmulatorAction.unlessUsed({ () throws(AuthError) in
                    try app.emulator.applyOobCode(key, code: oobCode, recoveryLink: recovery)
                }) else { return used }
                applied = a
            } else {
                applied = try app.emulator.applyOobCode(key, code: oobCode, recoveryLink: recovery)
            }
            return try answer(applied.0, applied.1)
        }
        guard let pending = app.emulator.oobCode(key, code: oobCode), pending.requestType == .verifyAndChangeEmail,
              let moveTo = pending.newEmail, app.emulator.user(key, email: moveTo) == nil else { return try work() }
        return try app.sendEmail(call, key, to: pending.email, type: .recoverEmail, user: app.emulator.user(key, email: pending.email), work)
    }
}

/// The out-of-band inbox: `GET/DELETE /emulator/v1/projects/{p}[/tenants/{t}]/oobCodes` (the official shape,
/// `{"oobCodes":[{email, oobCode, oobLink, requestType, newEmail?}]}`, plus `?email=`) and `oobCodes:wait`.
enum OobInbox {
    static func key(_ call: Call) -> StoreKey { StoreKey(projectId: call.projectId, tenantId: call.pathTenant) }

    static func emailFilter(_ call: Call) throws(AuthError) -> String? {
        guard let e = call.queryValue("email") else { return nil }
        guard Identifiers.isValidEmail(e) else { throw AuthError(.invalidEmail) }
        return e
    }

    static func list(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        let codes = app.emulator.oobCodes(key(call), email: try emailFilter(call))
        return Reply(["oobCodes": .array(codes.map(render))])
    }

    static func clear(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        let n = try app.emulator.clearOobCodes(key(call), email: try emailFilter(call))
        return Reply(["deleted": .int(n)])
    }

    static func render(_ c: OobCode) -> JSON {
        var o: JSONObject = ["email": .string(c.email), "oobCode": .string(c.code), "oobLink": .string(c.link),
                             "requestType": .string(c.requestType.rawValue)]
        o.set("newEmail", c.newEmail.map(JSON.string))
        return .object(o)
    }

    /// Long-poll: the newest pending code for `email`, or the first one made within `timeoutSeconds` (default 30, at
    /// most 300); 404 `NOT_FOUND` after the timeout. Holds no thread; capped per project (429); cancelled on close.
    static func wait(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        guard let email = try emailFilter(call) else { throw AuthError.invalidArgument("email is required.") }
        var timeout = 30.0
        if let t = call.queryValue("timeoutSeconds") {
            guard let v = Double(t), v >= 0, v <= 300 else { throw AuthError.invalidArgument("timeoutSeconds must be between 0 and 300.") }
            timeout = v
        }
        let k = key(call)
        try app.emulator.admit(k, create: false)
        let complete = call.complete
        let seconds = timeout
        let waiter = try app.emulator.waitForOobCode(k, email: email, timeoutSeconds: seconds) { code in
            if let code {
                complete(Reply(render(code)))
            } else {
                let e = AuthError.notFound("No out-of-band code for \(email.lowercased()) arrived within \(seconds) seconds.")
                complete(Reply(error: e))
            }
        }
        if let waiter { call.onClose { waiter.cancel() } }
        return .deferred
    }
}
