import EmulatorSupport
import JWT

/// A command that could not finish for a reason the server did not answer as an error (e.g. no code in the inbox):
/// printed as `error: …`, exit code 1.
struct CommandFailure: Error, CustomStringConvertible, Sendable {
    let description: String
    init(_ d: String) { description = d }
}

/// `users create`, `oob-codes` and `mfa …`: email + password accounts and SMS second factors (issue 13).
extension Commands {
    // MARK: users create

    /// Checks the flags of `users create` (no server needed) and returns the admin signUp body.
    static func userCreateBody(_ args: Arguments) throws(UsageError) -> JSONObject {
        let email = args.value("email"), password = args.value("password"), phone = args.value("phone")
        let providers = args.options["provider"] ?? []
        guard email != nil || phone != nil || !providers.isEmpty else {
            throw UsageError("give --phone, or --email with --password, or --provider PROVIDER:RAWID[:EMAIL], or several")
        }
        if password != nil && email == nil { throw UsageError("--password needs --email") }
        if email != nil && password == nil { throw UsageError("--email needs --password") }
        if args.has("email-verified") && email == nil { throw UsageError("--email-verified needs --email") }
        var body = JSONObject()
        body.set("localId", args.value("uid").map(JSON.string))
        body.set("email", email.map(JSON.string))
        body.set("password", password.map(JSON.string))
        body.set("phoneNumber", phone.map(JSON.string))
        body.set("displayName", args.value("display-name").map(JSON.string))
        if args.has("email-verified") { body["emailVerified"] = true }
        return body
    }

    static func usersCreate(_ s: Session, _ a: [String]) throws {
        let body = try userCreateBody(s.args)
        let links = try (s.args.options["provider"] ?? []).map { spec throws(UsageError) in try providerToLink(spec, displayName: s.args.value("display-name")) }
        let c = try s.client()
        let r = try c.request("POST", c.adminBase + "/accounts", body: .object(body), admin: true)
        guard let uid = r["localId"]?.stringValue else { throw APIError(status: 500, message: "no localId in the reply") }
        // Each identity as firebase-admin's update_user(provider_to_link=…) links it.
        for link in links {
            _ = try c.request("POST", c.adminBase + "/accounts:update", body: ["localId": .string(uid), "linkProviderUserInfo": .object(link)], admin: true)
        }
        // The record as stored (the server's normalized email and phone, createdAt).
        let u = try lookupUser(c, uid: uid)
        s.emit(u, rows: userRows(u))
    }

    /// Admin `accounts:lookup` of one uid; 404 `USER_NOT_FOUND` when there is none.
    static func lookupUser(_ c: EmulatorClient, uid: String) throws -> JSON {
        let body: JSONObject = ["localId": [.string(uid)]]
        let r = try c.request("POST", c.adminBase + "/accounts:lookup", body: .object(body), admin: true)
        guard let u = r["users"]?.arrayValue?.first else { throw APIError(status: 404, message: "USER_NOT_FOUND") }
        return u
    }

    // MARK: oob-codes

    /// `--timeout` (seconds, 0 to 300), only with `--wait`; `--wait` needs `--email`.
    static func oobWaitTimeout(_ args: Arguments) throws(UsageError) -> String? {
        if let t = args.value("timeout") {
            guard args.has("wait") else { throw UsageError("--timeout goes with --wait") }
            guard let v = Double(t), v >= 0, v <= 300 else { throw UsageError("--timeout must be seconds from 0 to 300") }
        }
        if args.has("wait") && args.value("email") == nil { throw UsageError("--wait needs --email") }
        return args.has("wait") ? (args.value("timeout") ?? "30") : nil
    }

    static func oobRows(_ e: JSON) -> [(String, String)] {
        var rows: [(String, String)] = [("email", e["email"]?.stringValue ?? ""), ("requestType", e["requestType"]?.stringValue ?? "")]
        if let n = e["newEmail"]?.stringValue { rows.append(("newEmail", n)) }
        rows += [("oobCode", e["oobCode"]?.stringValue ?? ""), ("oobLink", e["oobLink"]?.stringValue ?? "")]
        return rows
    }

    static func oobCodes(_ s: Session, _ a: [String]) throws {
        let timeout = try oobWaitTimeout(s.args)
        let c = try s.client()
        if let timeout, let email = s.args.value("email") {
            let e = try c.request("GET", c.emulatorBase + "/oobCodes:wait", query: [("email", email), ("timeoutSeconds", timeout)],
                                  timeout: (Double(timeout) ?? 30) + 10)
            s.emit(e, rows: oobRows(e))
            return
        }
        var query: [(String, String)] = []
        if let e = s.args.value("email") { query.append(("email", e)) }
        let r = try c.request("GET", c.emulatorBase + "/oobCodes", query: query)
        if s.json { s.emit(r, rows: []); return }
        let codes = r["oobCodes"]?.arrayValue ?? []
        if codes.isEmpty { s.print("no out-of-band codes"); return }
        s.table(["EMAIL", "REQUEST TYPE", "OOB CODE", "OOB LINK"], codes.map { e in
            [e["email"]?.stringValue ?? "", e["requestType"]?.stringValue ?? "", e["oobCode"]?.stringValue ?? "", e["oobLink"]?.stringValue ?? ""]
        })
    }

    // MARK: mfa list / unenroll (admin)

    /// `+1*******4567`: every digit but the last four hidden (as the server's hints show the number).
    static func maskPhone(_ phone: String) -> String {
        var seen = 0
        var out: [Character] = []
        for ch in phone.reversed() {
            if ch.isASCII, ch.isNumber {
                seen += 1
                out.append(seen > 4 ? "*" : ch)
            } else {
                out.append(ch)
            }
        }
        return String(out.reversed())
    }

    /// An enrollment's full number: `unobfuscatedPhoneInfo`, else `phoneInfo`.
    static func enrollmentPhone(_ e: JSON) -> String { e["unobfuscatedPhoneInfo"]?.stringValue ?? e["phoneInfo"]?.stringValue ?? "" }

    /// A TOTP factor (`totpInfo`) rather than a number.
    static func isTOTP(_ e: JSON) -> Bool { e["phoneInfo"] == nil && e["totpInfo"] != nil }

    static func enrollmentRows(_ e: JSON) -> [(String, String)] {
        let phone = enrollmentPhone(e)
        return [("enrollment id", e["mfaEnrollmentId"]?.stringValue ?? ""), ("type", isTOTP(e) ? "totp" : "phone"),
                ("phone", isTOTP(e) ? "-" : phone), ("masked", isTOTP(e) ? "-" : maskPhone(phone)),
                ("display name", e["displayName"]?.stringValue ?? "-"), ("enrolled at", e["enrolledAt"]?.stringValue ?? "")]
    }

    static func mfaList(_ s: Session, _ a: [String]) throws {
        let c = try s.client()
        let u = try lookupUser(c, uid: a[0])
        let list = u["mfaInfo"]?.arrayValue ?? []
        if s.json { s.emit(["localId": u["localId"] ?? .string(a[0]), "mfaInfo": .array(list)], rows: []); return }
        if list.isEmpty { s.print("no second factors"); return }
        s.table(["ENROLLMENT ID", "TYPE", "PHONE", "MASKED", "DISPLAY NAME", "ENROLLED AT"], list.map { e in enrollmentRows(e).map(\.1) })
    }

    static func mfaUnenroll(_ s: Session, _ a: [String]) throws {
        let (uid, id) = (a[0], a[1])
        let c = try s.client()
        let list = try lookupUser(c, uid: uid)["mfaInfo"]?.arrayValue ?? []
        guard list.contains(where: { $0["mfaEnrollmentId"]?.stringValue == id }) else {
            throw APIError(status: 400, message: "MFA_ENROLLMENT_NOT_FOUND")
        }
        // What firebase-admin's updateUser({multiFactor: {enrolledFactors}}) sends: the whole list minus that one.
        let rest: [JSON] = list.filter { $0["mfaEnrollmentId"]?.stringValue != id }.map { e in
            // A TOTP factor is kept by its id (the server keeps its secret).
            var o: JSONObject = ["mfaEnrollmentId": e["mfaEnrollmentId"] ?? .null]
            if isTOTP(e) { o["totpInfo"] = .object(JSONObject()) } else { o["phoneInfo"] = .string(enrollmentPhone(e)) }
            o.set("displayName", e["displayName"])
            o.set("enrolledAt", e["enrolledAt"])
            return .object(o)
        }
        let body: JSONObject = ["localId": .string(uid), "mfa": ["enrollments": .array(rest)]]
        _ = try c.request("POST", c.adminBase + "/accounts:update", body: .object(body), admin: true)
        s.emit(["localId": .string(uid), "removed": .string(id), "remaining": .int(Int64(rest.count))],
               rows: [("uid", uid), ("removed", id), ("second factors left", String(rest.count))])
    }

    // MARK: mfa enroll / sign-in (client calls, as an app does)

    /// `--email` and `--password`, both required.
    static func passwordCredentials(_ args: Arguments) throws(UsageError) -> (String, String) {
        guard let email = args.value("email"), !email.isEmpty else { throw UsageError("--email is required") }
        guard let password = args.value("password") else { throw UsageError("--password is required") }
        return (email, password)
    }

    static func signInWithPassword(_ c: EmulatorClient, _ email: String, _ password: String) throws -> JSON {
        try c.itk("signInWithPassword", ["email": .string(email), "password": .string(password), "returnSecureToken": true])
    }

    /// The code of `session`: `explicit` (`--code`), else the newest inbox entry of that session for `phone`. A fictional
    /// number's code is asked for when stdin is a terminal, as `sign-in` does.
    static func inboxCode(_ s: Session, _ c: EmulatorClient, phone: String, session: String, explicit: String?) throws -> String {
        if let explicit, !explicit.isEmpty { return explicit }
        var entry: JSON? = nil
        var token: String? = nil
        var pages = 0
        repeat {
            var q = [("phoneNumber", phone)]
            if let token { q.append(("pageToken", token)) }
            let page = try c.request("GET", c.emulatorBase + "/verificationCodes", query: q)
            if let e = (page["verificationCodes"]?.arrayValue ?? []).last(where: { $0["sessionInfo"]?.stringValue == session }) { entry = e }
            token = page["nextPageToken"]?.stringValue
            pages += 1
        } while token != nil && pages < 1000
        guard let entry, let code = entry["code"]?.stringValue else {
            throw CommandFailure("no code for this session in the inbox of \(phone) (give it with --code)")
        }
        if entry["fictional"]?.boolValue == true && s.context.stdinIsTerminal {
            s.context.err("Enter the code for \(Terminal.safe(phone)): ")
            guard let typed = s.context.readLine()?.trimmingWhitespace(), !typed.isEmpty else { throw UsageError("no code given (use --code CODE)") }
            return typed
        }
        return code
    }

    struct SecondFactor {
        let localId: String
        let enrollmentId: String
        let tokens: JSON
    }

    /// After a password sign-in answered `mfaPendingCredential` + `mfaInfo` hints: `mfaSignIn:start` for `enrollment`
    /// (else the first hint), the code from the inbox, `mfaSignIn:finalize`.
    static func completeSecondFactor(_ s: Session, _ c: EmulatorClient, _ first: JSON, enrollment: String?, code: String?) throws -> SecondFactor {
        guard let pending = first["mfaPendingCredential"]?.stringValue, let uid = first["localId"]?.stringValue else {
            throw APIError(status: 500, message: "no mfaPendingCredential in the reply")
        }
        let hints = first["mfaInfo"]?.arrayValue ?? []
        guard let id = enrollment ?? hints.first?["mfaEnrollmentId"]?.stringValue else {
            throw CommandFailure("the sign-in asked for a second factor but named none")
        }
        if enrollment == nil && hints.count > 1 && !s.json {
            let masked = hints.first?["phoneInfo"]?.stringValue ?? "TOTP"
            s.context.err("using the first second factor, \(Terminal.safe(id)) (\(Terminal.safe(masked))); choose another with --enrollment ID")
        }
        if let hint = hints.first(where: { $0["mfaEnrollmentId"]?.stringValue == id }), isTOTP(hint) {
            // TOTP: no start; the code from --code or the emulator's current-code helper.
            let theCode = try code ?? totpCode(c, uid: uid, enrollment: id)
            let tokens = try c.v2("mfaSignIn:finalize", ["mfaPendingCredential": .string(pending), "mfaEnrollmentId": .string(id),
                                                         "totpVerificationInfo": ["verificationCode": .string(theCode)]])
            return SecondFactor(localId: uid, enrollmentId: id, tokens: tokens)
        }
        let start = try c.v2("mfaSignIn:start", ["mfaPendingCredential": .string(pending), "mfaEnrollmentId": .string(id)])
        guard let session = start["phoneResponseInfo"]?["sessionInfo"]?.stringValue else {
            throw APIError(status: 500, message: "no phoneResponseInfo.sessionInfo in the reply")
        }
        // The hints carry masked numbers; the inbox is filtered by the full one (admin lookup).
        let enrollments = try lookupUser(c, uid: uid)["mfaInfo"]?.arrayValue ?? []
        guard let e = enrollments.first(where: { $0["mfaEnrollmentId"]?.stringValue == id }) else {
            throw APIError(status: 400, message: "MFA_ENROLLMENT_NOT_FOUND")
        }
        let theCode = try inboxCode(s, c, phone: enrollmentPhone(e), session: session, explicit: code)
        let tokens = try c.v2("mfaSignIn:finalize", ["mfaPendingCredential": .string(pending),
                                                     "phoneVerificationInfo": ["sessionInfo": .string(session), "code": .string(theCode)]])
        return SecondFactor(localId: uid, enrollmentId: id, tokens: tokens)
    }

    /// The code a TOTP factor accepts now (`GET …/totpCode`); a step already spent is waited out on the emulator clock
    /// by asking for the next one only if the server says so (`used`): the caller sees an error otherwise.
    static func totpCode(_ c: EmulatorClient, uid: String? = nil, enrollment: String? = nil, session: String? = nil) throws -> String {
        var q: [(String, String)] = []
        if let uid { q.append(("localId", uid)) }
        if let enrollment { q.append(("mfaEnrollmentId", enrollment)) }
        if let session { q.append(("sessionInfo", session)) }
        let r = try c.request("GET", c.emulatorBase + "/totpCode", query: q)
        guard let code = r["code"]?.stringValue else { throw APIError(status: 500, message: "no code in the reply") }
        if r["used"]?.boolValue == true {
            throw CommandFailure("this step's code was already used; the next one is valid from \(r["validUntil"]?.stringValue ?? "the next step") (advance the clock: phone-auth clock advance 30)")
        }
        return code
    }

    /// `mfa totp-code UID [ENROLLMENT_ID]`: the current code of the user's TOTP factor (the first one without an id).
    static func mfaTotpCode(_ s: Session, _ a: [String]) throws {
        let c = try s.client()
        var q = [("localId", a[0])]
        if a.count > 1 { q.append(("mfaEnrollmentId", a[1])) }
        let r = try c.request("GET", c.emulatorBase + "/totpCode", query: q)
        if !s.json, let code = r["code"]?.stringValue {
            s.print(Terminal.safe(code))
            if r["used"]?.boolValue == true { s.context.err("(already used for this factor: valid again from the next step, \(Terminal.safe(r["validUntil"]?.stringValue ?? "")))") }
            return
        }
        s.emit(r, rows: [])
    }

    static func mfaEnroll(_ s: Session, _ a: [String]) throws {
        let (email, password) = try passwordCredentials(s.args)
        let totp = s.args.has("totp")
        let phone = s.args.value("phone") ?? ""
        guard totp || !phone.isEmpty else { throw UsageError("--phone PHONE or --totp is required") }
        let c = try s.client()
        let first = try signInWithPassword(c, email, password)
        guard let uid = first["localId"]?.stringValue else { throw APIError(status: 500, message: "no localId in the reply") }
        let before = Set((first["mfaInfo"]?.arrayValue ?? []).compactMap { $0["mfaEnrollmentId"]?.stringValue })
        var idToken = first["idToken"]?.stringValue
        if idToken == nil, first["mfaPendingCredential"] != nil {
            // Already enrolled: the existing second factor first (its code from the inbox), as an app must.
            idToken = try completeSecondFactor(s, c, first, enrollment: s.args.value("enrollment"), code: nil).tokens["idToken"]?.stringValue
        }
        guard let idToken else { throw APIError(status: 500, message: "no idToken in the reply") }
        var body: JSONObject = ["idToken": .string(idToken)]
        var secret: String? = nil
        if totp {
            let start = try c.v2("mfaEnrollment:start", ["idToken": .string(idToken), "totpEnrollmentInfo": .object(JSONObject())])
            guard let session = start["totpSessionInfo"]?["sessionInfo"]?.stringValue else {
                throw APIError(status: 500, message: "no totpSessionInfo.sessionInfo in the reply")
            }
            secret = start["totpSessionInfo"]?["sharedSecretKey"]?.stringValue
            let code = try s.args.value("code") ?? totpCode(c, session: session)
            body["totpVerificationInfo"] = ["sessionInfo": .string(session), "verificationCode": .string(code)]
        } else {
            let start = try c.v2("mfaEnrollment:start", ["idToken": .string(idToken), "phoneEnrollmentInfo": ["phoneNumber": .string(phone)]])
            guard let session = start["phoneSessionInfo"]?["sessionInfo"]?.stringValue else {
                throw APIError(status: 500, message: "no phoneSessionInfo.sessionInfo in the reply")
            }
            let code = try inboxCode(s, c, phone: phone, session: session, explicit: s.args.value("code"))
            body["phoneVerificationInfo"] = ["sessionInfo": .string(session), "code": .string(code)]
        }
        body.set("displayName", s.args.value("display-name").map(JSON.string))
        let tokens = try c.v2("mfaEnrollment:finalize", body)
        // The new factor as the user's own lookup shows it: the one that was not there before.
        let me = try c.itk("lookup", ["idToken": tokens["idToken"] ?? .string(idToken)])
        let list = me["users"]?.arrayValue?.first?["mfaInfo"]?.arrayValue ?? []
        guard let e = list.first(where: { !before.contains($0["mfaEnrollmentId"]?.stringValue ?? "") }) ?? list.last else {
            throw CommandFailure("the enrollment finished but the user's lookup shows no second factor")
        }
        var o: JSONObject = ["localId": .string(uid), "mfaEnrollment": e]
        // The shared secret, for an authenticator app (shown once, as production's start answer does).
        o.set("sharedSecretKey", secret.map(JSON.string))
        o.set("idToken", tokens["idToken"])
        o.set("refreshToken", tokens["refreshToken"])
        s.emit(.object(o), rows: [("uid", uid)] + enrollmentRows(e))
    }

    static func mfaSignIn(_ s: Session, _ a: [String]) throws {
        let (email, password) = try passwordCredentials(s.args)
        let c = try s.client()
        let first = try signInWithPassword(c, email, password)
        guard first["mfaPendingCredential"] != nil else {
            throw CommandFailure("\(email) has no second factor: the password alone signed in (enroll one with 'phone-auth mfa enroll')")
        }
        let r = try completeSecondFactor(s, c, first, enrollment: s.args.value("enrollment"), code: s.args.value("code"))
        let idToken = r.tokens["idToken"]?.stringValue ?? ""
        let firebase = DecodedJWT(idToken)?.payload["firebase"]
        let factor = firebase?["sign_in_second_factor"]?.stringValue
        let identifier = firebase?["second_factor_identifier"]?.stringValue
        var o: JSONObject = ["localId": .string(r.localId), "mfaEnrollmentId": .string(r.enrollmentId)]
        o.set("signInSecondFactor", factor.map(JSON.string))
        o.set("secondFactorIdentifier", identifier.map(JSON.string))
        o.set("idToken", r.tokens["idToken"])
        o.set("refreshToken", r.tokens["refreshToken"])
        s.emit(.object(o), rows: [
            ("uid", r.localId), ("enrollment id", r.enrollmentId),
            ("sign_in_second_factor", factor ?? "(missing)"), ("second_factor_identifier", identifier ?? "(missing)"),
            ("ID token", idToken), ("refresh token", r.tokens["refreshToken"]?.stringValue ?? ""),
        ])
        if factor != "phone" && factor != "totp" { s.failed = true }
    }
}
