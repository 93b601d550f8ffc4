import EmulatorSupport
import JWT

/// The subcommands. Each takes the session and its positional arguments.
enum Commands {
    // MARK: phone flow

    static func sendCode(_ s: Session, _ phone: String) throws -> (EmulatorClient, String) {
        let c = try s.client()
        let r = try c.request("POST", "/identitytoolkit.googleapis.com/v1/accounts:sendVerificationCode",
                              body: c.clientBody(["phoneNumber": .string(phone), "targetProjectId": .string(c.project)]), admin: true)
        guard let session = r["sessionInfo"]?.stringValue else { throw APIError(status: 500, message: "no sessionInfo in the reply") }
        return (c, session)
    }

    static func send(_ s: Session, _ a: [String]) throws {
        let (_, session) = try sendCode(s, a[0])
        s.emit(["sessionInfo": .string(session)], rows: [("sessionInfo", session)])
    }

    static func verifyCode(_ c: EmulatorClient, session: String, code: String) throws -> JSON {
        try c.request("POST", "/identitytoolkit.googleapis.com/v1/accounts:signInWithPhoneNumber",
                      body: c.clientBody(["sessionInfo": .string(session), "code": .string(code), "targetProjectId": .string(c.project)]), admin: true)
    }

    static func printSignIn(_ s: Session, _ r: JSON) {
        s.emit(r, rows: [
            ("uid", r["localId"]?.stringValue ?? ""), ("phone", r["phoneNumber"]?.stringValue ?? ""),
            ("new user", r["isNewUser"]?.boolValue == true ? "yes" : "no"), ("expires in", (r["expiresIn"]?.stringValue ?? "?") + " s"),
            ("ID token", r["idToken"]?.stringValue ?? ""), ("refresh token", r["refreshToken"]?.stringValue ?? ""),
        ])
    }

    static func signIn(_ s: Session, _ a: [String]) throws {
        let (c, session) = try sendCode(s, a[0])
        var code = s.args.value("code")
        if code == nil {
            let entries = try c.request("GET", c.emulatorBase + "/verificationCodes", query: [("phoneNumber", a[0])])["verificationCodes"]?.arrayValue ?? []
            let entry = entries.first { $0["sessionInfo"]?.stringValue == session }
            if entry?["fictional"]?.boolValue == true && s.context.stdinIsTerminal {
                s.context.err("Enter the code for \(a[0]): ")
                code = s.context.readLine()?.trimmingWhitespace()
            } else {
                code = entry?["code"]?.stringValue
            }
        }
        guard let code, !code.isEmpty else { throw UsageError("no code given (use --code CODE)") }
        printSignIn(s, try verifyCode(c, session: session, code: code))
    }

    static func verify(_ s: Session, _ a: [String]) throws {
        printSignIn(s, try verifyCode(try s.client(), session: a[0], code: a[1]))
    }

    static func codes(_ s: Session, _ a: [String]) throws {
        let c = try s.client()
        if let wait = s.args.value("wait") {
            guard let seconds = Double(wait), seconds >= 0, seconds <= 300 else { throw UsageError("--wait must be seconds from 0 to 300") }
            guard let phone = s.args.value("phone") else { throw UsageError("--wait needs --phone") }
            let e = try c.request("GET", c.emulatorBase + "/verificationCodes:wait", query: [("phoneNumber", phone), ("timeoutSeconds", wait)],
                                  timeout: seconds + 10)
            s.emit(e, rows: [("phone", e["phoneNumber"]?.stringValue ?? ""), ("code", e["code"]?.stringValue ?? ""),
                             ("sessionInfo", e["sessionInfo"]?.stringValue ?? ""), ("expires", e["expiresAt"]?.stringValue ?? "never")])
            return
        }
        var query: [(String, String)] = []
        if let p = s.args.value("phone") { query.append(("phoneNumber", p)) }
        let r = try c.request("GET", c.emulatorBase + "/verificationCodes", query: query)
        let entries = r["verificationCodes"]?.arrayValue ?? []
        if s.json { s.emit(r, rows: []); return }
        if entries.isEmpty { s.print("no pending codes"); return }
        s.table(["PHONE", "CODE", "FICTIONAL", "ATTEMPTS LEFT", "EXPIRES", "SESSION"], entries.map { e in
            [e["phoneNumber"]?.stringValue ?? "", e["code"]?.stringValue ?? "", e["fictional"]?.boolValue == true ? "yes" : "no",
             e["attemptsLeft"]?.int64Value.map { String($0) } ?? "∞", e["expiresAt"]?.stringValue ?? "never",
             String((e["sessionInfo"]?.stringValue ?? "").prefix(12)) + "…"]
        })
    }

    // MARK: users

    static func userRows(_ u: JSON) -> [(String, String)] {
        var rows: [(String, String)] = [("uid", u["localId"]?.stringValue ?? "")]
        if let p = u["phoneNumber"]?.stringValue { rows.append(("phone", p)) }
        if let e = u["email"]?.stringValue {
            rows.append(("email", e))
            rows.append(("email verified", u["emailVerified"]?.boolValue == true ? "yes" : "no"))
        }
        if let m = u["mfaInfo"]?.arrayValue, !m.isEmpty { rows.append(("second factors", String(m.count))) }
        if let n = u["displayName"]?.stringValue { rows.append(("name", n)) }
        for p in u["providerUserInfo"]?.arrayValue ?? [] {
            guard let id = p["providerId"]?.stringValue, id != "phone", id != "password" else { continue }
            rows.append(("provider", ([id, p["rawId"]?.stringValue ?? ""] + (p["email"]?.stringValue.map { [$0] } ?? [])).joined(separator: " ")))
        }
        rows.append(("disabled", u["disabled"]?.boolValue == true ? "yes" : "no"))
        if let c = u["customAttributes"]?.stringValue { rows.append(("claims", c)) }
        if let t = u["createdAt"] { rows.append(("created", millisText(t))) }
        if let t = u["lastLoginAt"] { rows.append(("last sign-in", millisText(t))) }
        if let v = u["validSince"] { rows.append(("tokens valid since", secondsText(v))) }
        return rows
    }

    /// A time the server sent (epoch milliseconds, as a string or number) as RFC 3339; whatever cannot be one
    /// (out of range, not an integer) is shown as it came. Never traps.
    static func millisText(_ v: JSON) -> String {
        guard let ms = v.stringValue.flatMap({ Int64($0) }) ?? v.int64Value else { return v.stringValue ?? v.serializedString }
        return Timestamp.rfc3339IfRepresentable(millis: ms) ?? "\(ms) (out of range)"
    }

    /// The same for epoch seconds (`validSince`, `iat`, `exp`).
    static func secondsText(_ v: JSON) -> String {
        guard let s = v.stringValue.flatMap({ Int64($0) }) ?? v.int64Value else { return v.stringValue ?? v.serializedString }
        return Timestamp.millis(fromSeconds: s).flatMap { Timestamp.rfc3339IfRepresentable(millis: $0) } ?? "\(s) (out of range)"
    }

    static func usersList(_ s: Session, _ a: [String]) throws {
        let c = try s.client()
        let limit = try s.args.value("limit").map { v throws -> Int in
            guard let n = Int(v), n > 0 else { throw UsageError("--limit must be a positive number") }
            return n
        } ?? Int.max
        var users: [JSON] = []
        var token: String? = nil
        repeat {
            var q = [("maxResults", "1000")]
            if let token { q.append(("nextPageToken", token)) }
            let page = try c.request("GET", c.adminBase + "/accounts:batchGet", query: q, admin: true)
            users += page["users"]?.arrayValue ?? []
            token = page["nextPageToken"]?.stringValue
        } while token != nil && users.count < limit
        users = Array(users.prefix(limit))
        if s.json { s.emit(["users": .array(users)], rows: []); return }
        if users.isEmpty { s.print("no users"); return }
        s.table(["UID", "PHONE", "DISABLED", "CLAIMS", "CREATED"], users.map { u in
            [u["localId"]?.stringValue ?? "", u["phoneNumber"]?.stringValue ?? "-", u["disabled"]?.boolValue == true ? "yes" : "no",
             u["customAttributes"]?.stringValue ?? "-", u["createdAt"].map(millisText) ?? ""]
        })
    }

    static func usersGet(_ s: Session, _ a: [String]) throws {
        let c = try s.client()
        let body: JSONObject = a[0].hasPrefix("+") ? ["phoneNumber": [.string(a[0])]] : ["localId": [.string(a[0])]]
        let r = try c.request("POST", c.adminBase + "/accounts:lookup", body: .object(body), admin: true)
        guard let u = r["users"]?.arrayValue?.first else { throw APIError(status: 404, message: "USER_NOT_FOUND") }
        s.emit(u, rows: userRows(u))
    }

    static func usersDelete(_ s: Session, _ a: [String]) throws {
        let c = try s.client()
        _ = try c.request("POST", c.adminBase + "/accounts:delete", body: ["localId": .string(a[0])], admin: true)
        s.emit(["deleted": .string(a[0])], rows: [("deleted", a[0])])
    }

    static func claimsSet(_ s: Session, _ a: [String]) throws {
        guard case .object? = try? JSONParser.parse(a[1]) else { throw UsageError("JSON must be an object, e.g. '{\"role\":\"admin\"}'") }
        let c = try s.client()
        _ = try c.request("POST", c.adminBase + "/accounts:update", body: ["localId": .string(a[0]), "customAttributes": .string(a[1])], admin: true)
        s.emit(["localId": .string(a[0]), "customClaims": (try? JSONParser.parse(a[1])) ?? .null], rows: [("uid", a[0]), ("claims", a[1])])
    }

    // MARK: tokens

    static func decode(_ token: String) throws -> DecodedJWT {
        guard let jwt = DecodedJWT(token.trimmingWhitespace()) else { throw UsageError("not a JWT (expected three base64url parts with JSON header and claims)") }
        return jwt
    }

    static func tokenDecode(_ s: Session, _ a: [String]) throws {
        let jwt = try decode(a[0])
        if s.json { s.emit(["header": .object(jwt.header), "claims": .object(jwt.payload)], rows: []); return }
        // Keys and values come from the token: terminal-safe before they are printed.
        s.print("header:")
        for (k, v) in jwt.header { s.print("  \(Terminal.safe(k)): \(Terminal.safe(v.serializedString))") }
        s.print("claims:")
        for (k, v) in jwt.payload {
            if ["iat", "exp", "auth_time", "nbf"].contains(k), let t = v.int64Value {
                s.print("  \(k): \(t) (\(secondsText(v)))")
            } else {
                s.print("  \(Terminal.safe(k)): \(Terminal.safe(v.serializedString))")
            }
        }
    }

    static func tokenVerify(_ s: Session, _ a: [String]) throws {
        let jwt = try decode(a[0])
        let c = try s.client()
        var checks: [(String, Bool, String)] = []
        // Signature against the emulator's JWKS.
        if jwt.algorithm == "RS256" {
            let keys = try c.request("GET", "/www.googleapis.com/service_accounts/v1/jwk/securetoken@system.gserviceaccount.com")["keys"]?.arrayValue ?? []
            let jwk = keys.first { $0["kid"]?.stringValue == jwt.keyID }
            var ok = false
            if let jwk, let n = jwk["n"]?.stringValue.flatMap(Base64URL.decode), let e = jwk["e"]?.stringValue.flatMap(Base64URL.decode),
                let key = try? RSAKey.publicKey(modulus: n, exponent: e)
            {
                ok = key.verifySHA256(signature: jwt.signature, message: jwt.signingInput)
            }
            checks.append(("signature", ok, jwk == nil ? "no published key with kid \(jwt.keyID ?? "-")" : ok ? "RS256, kid \(jwt.keyID ?? "")" : "does not match kid \(jwt.keyID ?? "")"))
        } else {
            checks.append(("signature", false, "alg is \(jwt.algorithm ?? "missing"): the token is not signed"))
        }
        let aud = jwt.payload["aud"]?.stringValue ?? ""
        let iss = jwt.payload["iss"]?.stringValue ?? ""
        checks.append(("aud", aud == c.project, aud == c.project ? aud : "\(aud.isEmpty ? "(none)" : aud), expected \(c.project)"))
        let wantIss = "https://securetoken.google.com/\(c.project)"
        checks.append(("iss", iss == wantIss, iss == wantIss ? iss : "\(iss.isEmpty ? "(none)" : iss), expected \(wantIss)"))
        let now = (try c.request("GET", "/emulator/v1/clock")["nowMillis"]?.int64Value ?? Timestamp.systemMillis()) / 1000
        if let exp = jwt.payload["exp"]?.int64Value, !(1...Timestamp.maxSeconds).contains(exp) {
            // Beyond 9999-12-31 (or not after the epoch) no verifier can represent it: a forged or broken token.
            checks.append(("exp", false, "\(exp) is out of range (1 to \(Timestamp.maxSeconds), 9999-12-31T23:59:59Z)"))
        } else if let exp = jwt.payload["exp"]?.int64Value {
            // Saturating: a forged exp may be anywhere in Int64.
            let left = exp.subtractingReportingOverflow(now), ago = now.subtractingReportingOverflow(exp)
            let detail = now < exp ? "valid for \(left.overflow ? "∞" : String(left.partialValue)) s more" : "expired \(ago.overflow ? "∞" : String(ago.partialValue)) s ago"
            checks.append(("exp", now < exp, detail + " (emulator clock)"))
        } else {
            checks.append(("exp", false, "missing or not an integer"))
        }
        let sub = jwt.payload["sub"]?.stringValue ?? ""
        checks.append(("sub", !sub.isEmpty && sub.count <= 128, sub.isEmpty ? "missing" : sub))
        let valid = checks.allSatisfy(\.1)
        s.failed = !valid
        if s.json {
            var o = JSONObject()
            o["valid"] = .bool(valid)
            o["checks"] = .object(JSONObject(checks.map { ($0.0, ["ok": .bool($0.1), "detail": .string($0.2)]) }))
            o["claims"] = .object(jwt.payload)
            s.emit(.object(o), rows: [])
        } else {
            for (name, ok, detail) in checks { s.print("\(ok ? "ok  " : "FAIL") \(name.padding(9)) \(Terminal.safe(detail))") }
            s.print(valid ? "valid" : "INVALID")
        }
    }

    // MARK: config

    static func configGet(_ s: Session, _ a: [String]) throws {
        let c = try s.client()
        let r = try c.request("GET", c.emulatorBase + "/config")
        s.emit(r, rows: []) ; if !s.json { s.print(Terminal.json(r.prettyString.trimmingWhitespace())) }
    }

    static func configSet(_ s: Session, _ a: [String]) throws {
        guard case .object? = try? JSONParser.parse(a[0]) else { throw UsageError("JSON must be an object, e.g. '{\"phoneAuth\":{\"codeLength\":6}}'") }
        let c = try s.client()
        let r = try c.request("PATCH", c.emulatorBase + "/config", body: try JSONParser.parse(a[0]))
        s.emit(r, rows: []); if !s.json { s.print(Terminal.json(r.prettyString.trimmingWhitespace())) }
    }

    static func currentTestNumbers(_ c: EmulatorClient) throws -> JSONObject {
        try c.request("GET", c.emulatorBase + "/config")["signIn"]?["phoneNumber"]?["testPhoneNumbers"]?.objectValue ?? JSONObject()
    }

    static func putTestNumbers(_ s: Session, _ c: EmulatorClient, _ numbers: JSONObject) throws {
        let r = try c.request("PATCH", c.emulatorBase + "/config", body: ["signIn": ["phoneNumber": ["testPhoneNumbers": .object(numbers)]]])
        showTestNumbers(s, r["signIn"]?["phoneNumber"]?["testPhoneNumbers"]?.objectValue ?? JSONObject())
    }

    static func showTestNumbers(_ s: Session, _ numbers: JSONObject) {
        if s.json { s.emit(["testPhoneNumbers": .object(numbers)], rows: []); return }
        if numbers.isEmpty { s.print("no fictional numbers"); return }
        s.table(["PHONE", "CODE"], numbers.map { [$0.key, $0.value.stringValue ?? ""] })
    }

    static func testNumbersList(_ s: Session, _ a: [String]) throws {
        showTestNumbers(s, try currentTestNumbers(try s.client()))
    }

    static func testNumbersAdd(_ s: Session, _ a: [String]) throws {
        let c = try s.client()
        var n = try currentTestNumbers(c)
        n[a[0]] = .string(a[1])
        try putTestNumbers(s, c, n)
    }

    static func testNumbersRemove(_ s: Session, _ a: [String]) throws {
        let c = try s.client()
        var n = try currentTestNumbers(c)
        let target = n.keys.first { $0 == a[0] || $0 == "+" + a[0].filter(\.isNumber) }
        guard let target else { throw APIError(status: 404, message: "NOT_FOUND : \(a[0]) is not a fictional number") }
        n[target] = nil
        try putTestNumbers(s, c, n)
    }

    // MARK: maintenance

    static func health(_ s: Session, _ a: [String]) throws {
        let c = EmulatorClient(baseURL: s.baseURL, project: "", apiKey: "", tenant: nil)
        let r = try c.request("GET", "/", timeout: 5)
        let ready = r["authEmulator"]?["ready"]?.boolValue == true
        s.failed = !ready
        s.emit(r, rows: [("emulator", s.baseURL), ("ready", ready ? "yes" : "no"),
                         ("version", r["phoneAuthEmulator"]?["version"]?.stringValue ?? "?"),
                         ("project", r["phoneAuthEmulator"]?["projectId"]?.stringValue ?? "?")])
    }
}

extension String {
    func padding(_ n: Int) -> String { count >= n ? self : self + String(repeating: " ", count: n - count) }
}
