import EmulatorSupport
import PhoneAuthCore

/// `GET /emulator/action`: where the inbox's links lead (`mode=signIn|resetPassword|verifyEmail|verifyAndChangeEmail`),
/// as the official emulator's page answers them — a redirect to the link's continue URL, or a JSON page saying what
/// happened or what to do. A person clicks them; so does a test's HTTP client.
///
/// Unlike the official emulator (which redirects to whatever `continueUrl` the request carries, code or not), a
/// redirect goes only to the continue URL the code's own link was made with, and only while the code is pending: the
/// emulator is no open redirect for any page to bounce a browser through.
enum EmulatorAction {
    static func handle(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        guard let apiKey = call.queryValue("apiKey"), !apiKey.isEmpty else {
            return page(400, ["error": "missing apiKey query parameter",
                              "instructions": "Please modify the URL to specify an apiKey, such as ...&apiKey=YOUR_API_KEY"])
        }
        guard let oobCode = call.queryValue("oobCode"), !oobCode.isEmpty else {
            return page(400, ["error": "missing oobCode query parameter",
                              "instructions": "Please modify the URL to specify an oobCode, such as ...&oobCode=YOUR_OOB_CODE"])
        }
        let tenant = try Identifiers.tenantID(call.queryValue("tenantId").flatMap { $0.isEmpty ? nil : $0 })
        let preferred = app.apiKeyProjects[apiKey] ?? app.emulator.defaultProjectId
        let key = app.emulator.store(holdingOobCode: oobCode, tenantId: tenant, preferred: preferred)
            ?? StoreKey(projectId: preferred, tenantId: tenant)
        let pending = app.emulator.oobCode(key, code: oobCode)
        let continueUrl = pending.flatMap { linkContinueUrl($0) }
        switch call.queryValue("mode") ?? "" {
        case "signIn":
            guard let pending, pending.requestType == .emailSignIn else {
                return page(400, ["error": "Your request to sign in has expired or the link has already been used.",
                                  "instructions": "Try signing in again."])
            }
            guard let continueUrl else {
                return page(400, ["error": "Missing continueUrl query parameter",
                                  "instructions": "To sign in, append &continueUrl=YOUR_APP_URL to the link."])
            }
            // The app finishes the sign-in: the link's parameters go along (the code is not used here).
            return redirect(to: adding(call.query.filter { $0.0 != "continueUrl" }, to: continueUrl))
        case "resetPassword":
            let expired = page(400, ["error": "Your request to reset your password has expired or the link has already been used.",
                                     "instructions": "Try resetting your password again."])
            guard let pending, pending.requestType == .passwordReset else { return expired }
            let template = JSON.string(pending.link + "&newPassword=NEW_PASSWORD_HERE")
            guard let newPassword = call.queryValue("newPassword"), !newPassword.isEmpty else {
                return page(400, ["error": "missing newPassword query parameter",
                                  "instructions": .string("To reset the password for \(pending.email), send an HTTP GET request to the following URL."),
                                  "instructions2": "You may use a web browser or any HTTP client, such as curl.", "urlTemplate": template])
            }
            guard newPassword != "NEW_PASSWORD_HERE" else {
                return page(400, ["error": "newPassword must be something other than 'NEW_PASSWORD_HERE'",
                                  "instructions": "The string 'NEW_PASSWORD_HERE' is just a placeholder.",
                                  "instructions2": "Please change the URL to specify a new password instead.", "urlTemplate": template])
            }
            let (hash, salt) = try Passwords.checkedHash(newPassword, random: app.emulator.random)
            guard let (code, _) = try unlessUsed({ () throws(AuthError) in
                try app.emulator.resetPassword(key, code: oobCode, passwordHash: hash, salt: salt)
            }) else { return expired }
            if let continueUrl { return redirect(to: continueUrl) }
            return page(200, ["success": "The password has been successfully updated.", "email": .string(code.email)])
        case "verifyEmail", "verifyAndChangeEmail":
            let verify = call.queryValue("mode") == "verifyEmail"
            let expected: OobCode.RequestType = verify ? .verifyEmail : .verifyAndChangeEmail
            let expired = verify
                ? page(400, ["error": "Your request to verify your email has expired or the link has already been used.",
                             "instructions": "Try verifying your email again."])
                : page(400, ["error": "Your request to change your email has expired or the link has already been used.",
                             "instructions": "Try changing your email again."])
            guard let pending, pending.requestType == expected else { return expired }
            guard let (code, user) = try unlessUsed({ () throws(AuthError) in try app.emulator.applyOobCode(key, code: pending.code) }) else {
                return expired
            }
            if let continueUrl { return redirect(to: continueUrl) }
            return verify
                ? page(200, ["success": "The email has been successfully verified.", "email": .string(user.email ?? code.email)])
                : page(200, ["success": "The email has been successfully changed.", "newEmail": .string(code.newEmail ?? user.email ?? "")])
        case "recoverEmail":
            // No flow here sends a recovery link (production mails one after an email change).
            guard pending != nil else {
                return page(400, ["error": "Your request to revert your email has expired or the link has already been used."])
            }
            return page(400, ["error": "Requested mode does not match the OOB code provided.",
                              "instructions": "If you're trying to test the reverting email flow, try changing the email again to generate a new link."])
        default:
            return page(400, ["error": "Invalid mode"])
        }
    }

    /// `body`'s result; nil when the code was used up or expired meanwhile.
    static func unlessUsed<T>(_ body: () throws(AuthError) -> T) throws(AuthError) -> T? {
        do {
            return try body()
        } catch {
            if error.code == .invalidOobCode || error.code == .expiredOobCode { return nil }
            throw error
        }
    }

    /// `{"authEmulator": {…}}`, indented, as the official emulator's pages.
    static func page(_ status: Int, _ body: JSONObject) -> Reply {
        Reply(status: status, raw: JSON.object(["authEmulator": .object(body)]).prettySerialized(), contentType: "application/json; charset=utf-8")
    }

    static func redirect(to url: String) -> Reply {
        Reply(status: 303, raw: Array("See Other. Redirecting to \(url)".utf8), contentType: "text/plain; charset=utf-8",
              headers: [("Location", url), ("Cache-Control", "no-store")])
    }

    /// The continue URL a code's link was made with (checked absolute, without control characters, when it was).
    static func linkContinueUrl(_ code: OobCode) -> String? {
        guard let q = code.link.firstIndex(of: "?") else { return nil }
        return URLEncoding.parsePairs(code.link[code.link.index(after: q)...]).first { $0.0 == "continueUrl" }?.1
    }

    /// `url` with each parameter set in its query (the first of a name replaced, others appended), its fragment kept.
    static func adding(_ params: [(String, String)], to url: String) -> String {
        var base = Substring(url), fragment = ""
        if let h = base.firstIndex(of: "#") {
            fragment = String(base[h...])
            base = base[..<h]
        }
        var pairs: [(String, String)] = []
        if let q = base.firstIndex(of: "?") {
            pairs = URLEncoding.parsePairs(base[base.index(after: q)...])
            base = base[..<q]
        }
        for (k, v) in params {
            if let i = pairs.firstIndex(where: { $0.0 == k }) { pairs[i].1 = v } else { pairs.append((k, v)) }
        }
        let query = pairs.map { URLEncoding.percentEncode($0.0) + "=" + URLEncoding.percentEncode($0.1) }.joined(separator: "&")
        return String(base) + (query.isEmpty ? "" : "?" + query) + fragment
    }
}
