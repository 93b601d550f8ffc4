import EmulatorSupport

/// `credentials mint` and `app-check status` (issue 28: one place to mint every attestation a phone flow touches).
extension Commands {
    static let credentialTypes = ["recaptcha": "RECAPTCHA", "recaptcha-enterprise": "RECAPTCHA_ENTERPRISE", "play-integrity": "PLAY_INTEGRITY",
                                  "app-check": "APP_CHECK", "pnv": "PNV"]

    /// Checks the flags of `credentials mint` (no server needed) and returns the `appCredentials` body.
    static func credentialsMintBody(_ args: Arguments, type raw: String) throws(UsageError) -> JSONObject {
        guard let type = credentialTypes[raw.lowercased()] else {
            throw UsageError("TYPE must be recaptcha, recaptcha-enterprise, play-integrity, app-check or pnv")
        }
        var body: JSONObject = ["type": .string(type)]
        if let app = args.value("app-id") {
            guard type == "APP_CHECK" else { throw UsageError("--app-id is for app-check") }
            body["appId"] = .string(app)
        }
        if let phone = args.value("phone") {
            guard type == "PNV" else { throw UsageError("--phone is for pnv") }
            body["phoneNumber"] = .string(phone)
        } else if type == "PNV" {
            throw UsageError("pnv needs --phone (a fictional number or one of phoneNumberVerification.testNumbers)")
        }
        // reCAPTCHA SMS defense: the score the assessment reports, the action it was made for, a toll-fraud score.
        for (flag, field) in [("score", "score"), ("toll-fraud-score", "tollFraudScore")] {
            guard let v = args.value(flag) else { continue }
            guard type == "RECAPTCHA_ENTERPRISE" else { throw UsageError("--\(flag) is for recaptcha-enterprise") }
            guard let d = Double(v), d.isFinite, d >= 0, d <= 1 else { throw UsageError("--\(flag) must be a number from 0.0 to 1.0") }
            body[field] = .number(d)
        }
        if let action = args.value("action") {
            guard type == "RECAPTCHA_ENTERPRISE" else { throw UsageError("--action is for recaptcha-enterprise") }
            body["action"] = .string(action)
        }
        if let ttl = args.value("ttl") {
            guard type == "APP_CHECK" || type == "PNV" else { throw UsageError("--ttl is for app-check and pnv") }
            guard let n = Int64(ttl), n > 0 else { throw UsageError("--ttl must be whole seconds") }
            body["ttlSeconds"] = .int(n)
        }
        return body
    }

    static func credentialsMint(_ s: Session, _ a: [String]) throws {
        let body = try credentialsMintBody(s.args, type: a[0])
        let c = try s.client()
        let r = try c.request("POST", c.emulatorBase + "/appCredentials", body: .object(body))
        var rows: [(String, String)] = [("type", r["type"]?.stringValue ?? "")]
        if let app = r["appId"]?.stringValue { rows.append(("app", app)) }
        if let phone = r["phoneNumber"]?.stringValue { rows.append(("phone number", phone)) }
        if let score = r["score"]?.doubleValue { rows.append(("score", String(score))) }
        if let action = r["action"]?.stringValue { rows.append(("action", action)) }
        if let score = r["tollFraudScore"]?.doubleValue { rows.append(("toll-fraud score", String(score))) }
        rows.append(("expires", r["expiresAt"]?.stringValue ?? ""))
        rows.append(("token", r["token"]?.stringValue ?? ""))
        s.emit(r, rows: rows)
    }

    static func appCheckStatus(_ s: Session, _ a: [String]) throws {
        let c = try s.client()
        let r = try c.request("GET", c.emulatorBase + "/appCheck")
        let m = r["metrics"]
        func n(_ k: String) -> String { String(m?[k]?.int64Value ?? 0) }
        s.emit(r, rows: [("enforcement", r["enforcement"]?.stringValue ?? ""), ("token TTL", "\(r["tokenTtlSeconds"]?.int64Value ?? 0) s"),
                         ("verified", n("verified")), ("missing", n("missing")), ("invalid", n("invalid")), ("refused", n("refused"))])
    }
}
