import EmulatorSupport
import PhoneAuthCore

/// `GET /emulator/action`: where the inbox's links lead (`mode=signIn|resetPassword|verifyEmail|verifyAndChangeEmail|recoverEmail`),
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
                // A browser's navigation gets a form; a test's HTTP client (and the official emulator) this JSON page.
                if Console.prefersHTML(call.request.headers["accept"]) { return resetForm(pending) }
                return page(400, ["error": "missing newPassword query parameter",
                                  "instructions": .string("To reset the password for \(pending.email), send an HTTP GET request to the following URL."),
                                  "instructions2": "You may use a web browser or any HTTP client, such as curl.", "urlTemplate": template])
            }
            guard newPassword != "NEW_PASSWORD_HERE" else {
                return page(400, ["error": "newPassword must be something other than 'NEW_PASSWORD_HERE'",
                                  "instructions": "The string 'NEW_PASSWORD_HERE' is just a placeholder.",
                                  "instructions2": "Please change the URL to specify a new password instead.", "urlTemplate": template])
            }
            let (hash, salt) = try Passwords.checkedHash(newPassword, policy: app.emulator.config(key).passwordPolicy, random: app.emulator.random)
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
            return try ApplyActionCode.apply(app, call, key, pending.code, used: expired) { code, user in
                if let continueUrl { return redirect(to: continueUrl) }
                return verify
                    ? page(200, ["success": "The email has been successfully verified.", "email": .string(user.email ?? code.email)])
                    : page(200, ["success": "The email has been successfully changed.", "newEmail": .string(code.newEmail ?? user.email ?? "")])
            }
        case "recoverEmail":
            // The link an email change sent the old address (accounts:update, VERIFY_AND_CHANGE_EMAIL).
            let retry = "If you're trying to test the reverting email flow, try changing the email again to generate a new link."
            let expired = page(400, ["error": "Your request to revert your email has expired or the link has already been used.",
                                     "instructions": .string(retry)])
            guard let pending else { return expired }
            guard pending.requestType == .recoverEmail else {
                return page(400, ["error": "Requested mode does not match the OOB code provided.", "instructions": .string(retry)])
            }
            return try ApplyActionCode.apply(app, call, key, pending.code, used: expired) { _, user in
                if let continueUrl { return redirect(to: continueUrl) }
                return page(200, ["success": "The email has been successfully reset.", "email": .string(user.email ?? pending.email)])
            }
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

    /// The reset page a person sees: a form with the new password that sends the same `GET` (the link's own
    /// parameters, then `newPassword`), which answers as the JSON pages or the 303 to the code's continue URL do.
    /// Everything from the link and the email is HTML-escaped; no script; the form goes only to this server.
    static func resetForm(_ code: OobCode) -> Reply {
        let pairs = code.link.firstIndex(of: "?").map { URLEncoding.parsePairs(code.link[code.link.index(after: $0)...]) } ?? []
        var html = #"<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">"#
            + "<title>Reset your password</title></head><body><h1>Reset your password</h1>"
            + #"<p>for <b id="email">\#(htmlEscaped(code.email))</b></p><form id="reset" method="get" action="/emulator/action">"#
        for (name, value) in pairs where name != "newPassword" {
            html += #"<input type="hidden" name="\#(htmlEscaped(name))" value="\#(htmlEscaped(value))">"#
        }
        html += #"<p><label for="newPassword">New password</label> <input id="newPassword" name="newPassword" type="password" "#
            + #"autocomplete="new-password" required autofocus> <button id="save" type="submit">Save</button></p></form></body></html>"#
        return Reply(status: 200, raw: Array(html.utf8), contentType: ProviderPage.htmlType,
                     headers: ProviderPage.headers(csp: resetFormCSP, cache: "no-store") + [("Referrer-Policy", "no-referrer")])
    }

    /// No script, style or request of any kind; the form may go here, and on through the 303 (Chromium checks
    /// `form-action` on a submission's redirects too) to the code's continue URL, which is http(s).
    static let resetFormCSP = "default-src 'none'; form-action 'self' http: https:; base-uri 'none'"

    /// `s` with `&`, `<`, `>`, `"` and `'` as character references.
    static func htmlEscaped(_ s: String) -> String {
        var out = ""
        out.reserveCapacity(s.utf8.count)
        for c in s.unicodeScalars {
            switch c {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.unicodeScalars.append(c)
            }
        }
        return out
    }

    /// A 303 to `url`, with what a URL may not carry raw percent-encoded (see `escapingUnsafe`).
    static func redirect(to url: String) -> Reply {
        let url = escapingUnsafe(url)
        return Reply(status: 303, raw: Array("See Other. Redirecting to \(url)".utf8), contentType: "text/plain; charset=utf-8",
                     headers: [("Location", url), ("Cache-Control", "no-store")])
    }

    /// `s` with every byte outside printable ASCII, space and `"` `<` `>` `` ` `` percent-encoded (as a browser encodes
    /// them in a path, query or fragment), so a `Location` header is plain ASCII whatever the continue URL holds.
    /// Everything else, `%` escapes included, stays as written.
    static func escapingUnsafe(_ s: String) -> String {
        guard s.utf8.contains(where: unsafe) else { return s }
        let hex = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(s.utf8.count + 16)
        for b in s.utf8 {
            if unsafe(b) {
                out += [UInt8(ascii: "%"), hex[Int(b >> 4)], hex[Int(b & 15)]]
            } else {
                out.append(b)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func unsafe(_ b: UInt8) -> Bool {
        b <= 0x20 || b >= 0x7F || b == UInt8(ascii: "\"") || b == UInt8(ascii: "<") || b == UInt8(ascii: ">") || b == UInt8(ascii: "`")
    }

    /// The continue URL a code's link was made with (checked absolute, without control characters, when it was).
    static func linkContinueUrl(_ code: OobCode) -> String? {
        guard let q = code.link.firstIndex(of: "?") else { return nil }
        return URLEncoding.parsePairs(code.link[code.link.index(after: q)...]).first { $0.0 == "continueUrl" }?.1
    }

    /// `url` with each parameter set in its query: the first of that name already there is replaced, others appended
    /// (a name given twice: the last value). The rest of its query stays as written (`y=a+b`, `flag`), and its
    /// fragment too. Linear in the query and the parameters.
    static func adding(_ params: [(String, String)], to url: String) -> String {
        var base = Substring(url), fragment = Substring("")
        if let h = base.firstIndex(of: "#") {
            fragment = base[h...]
            base = base[..<h]
        }
        var pieces: [String] = []
        if let q = base.firstIndex(of: "?") {
            pieces = base[base.index(after: q)...].split(separator: "&").map(String.init)
            base = base[..<q]
        }
        var slot: [String: Int] = [:]
        for (i, piece) in pieces.enumerated() {
            let name = URLEncoding.percentDecode(piece.prefix { $0 != "=" })
            if slot[name] == nil { slot[name] = i }
        }
        for (k, v) in params {
            let encoded = URLEncoding.percentEncode(k) + "=" + URLEncoding.percentEncode(v)
            if let i = slot[k] {
                pieces[i] = encoded
            } else {
                slot[k] = pieces.count
                pieces.append(encoded)
            }
        }
        return String(base) + (pieces.isEmpty ? "" : "?" + pieces.joined(separator: "&")) + fragment
    }
}
