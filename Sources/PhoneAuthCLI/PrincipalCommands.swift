import EmulatorSupport

/// `token mint`, `reset`, `snapshot save|restore|list|delete` (issue 26: test principals, reset and snapshots).
extension Commands {
    // MARK: token mint

    /// Checks the flags of `token mint` (no server needed) and returns the `idTokens` body.
    static func tokenMintBody(_ args: Arguments, uid: String) throws(UsageError) -> JSONObject {
        var body: JSONObject = ["uid": .string(uid)]
        if let text = args.value("claims") {
            guard case .object(let claims)? = try? JSONParser.parse(text) else { throw UsageError("--claims must be a JSON object, e.g. '{\"role\":\"admin\"}'") }
            body["claims"] = .object(claims)
        }
        body.set("phoneNumber", args.value("phone").map(JSON.string))
        body.set("email", args.value("email").map(JSON.string))
        if args.has("email-verified") {
            guard body["email"] != nil else { throw UsageError("--email-verified needs --email") }
            body["emailVerified"] = true
        }
        body.set("displayName", args.value("display-name").map(JSON.string))
        body.set("signInProvider", args.value("provider").map(JSON.string))
        body.set("secondFactor", args.value("second-factor").map(JSON.string))
        for (flag, member) in [("expires-in", "expiresIn"), ("auth-time", "authTime")] {
            guard let v = args.value(flag) else { continue }
            guard let n = Int64(v) else { throw UsageError("--\(flag) must be whole seconds") }
            body[member] = .int(n)
        }
        return body
    }

    static func tokenMint(_ s: Session, _ a: [String]) throws {
        let body = try tokenMintBody(s.args, uid: a[0])
        let c = try s.client()
        let r = try c.request("POST", c.emulatorBase + "/idTokens", body: .object(body))
        s.emit(r, rows: [
            ("uid", r["localId"]?.stringValue ?? ""), ("new user", r["isNewUser"]?.boolValue == true ? "yes" : "no"),
            ("expires in", (r["expiresIn"]?.stringValue ?? "?") + " s"),
            ("ID token", r["idToken"]?.stringValue ?? ""), ("refresh token", r["refreshToken"]?.stringValue ?? ""),
        ])
    }

    // MARK: reset and snapshots

    /// The client for a reset or snapshot command, which covers the project with its tenants (`--tenant` is refused).
    static func projectClient(_ s: Session) throws -> EmulatorClient {
        if s.args.value("tenant") != nil { throw UsageError("a reset or snapshot covers the project with all its tenants: drop --tenant") }
        return try s.client()
    }

    static func projectBase(_ c: EmulatorClient) -> String { "/emulator/v1/projects/\(c.project)" }

    static func stateRows(_ r: JSON) -> [(String, String)] {
        let tenants = r["tenants"]?.arrayValue?.compactMap(\.stringValue) ?? []
        return [("project", r["projectId"]?.stringValue ?? ""), ("users", String(r["users"]?.int64Value ?? 0)),
                ("tenants", tenants.isEmpty ? "none" : tenants.joined(separator: ", "))]
    }

    static func reset(_ s: Session, _ a: [String]) throws {
        let c = try projectClient(s)
        if s.args.has("all") {
            let r = try c.request("POST", "/emulator/v1:reset", body: .object([:]))
            if s.json { s.emit(r, rows: []); return }
            let projects = r["projects"]?.arrayValue ?? []
            s.table(["PROJECT", "USERS", "TENANTS"], projects.map { p in
                [p["projectId"]?.stringValue ?? "", String(p["users"]?.int64Value ?? 0), String(p["tenants"]?.arrayValue?.count ?? 0)]
            })
            s.print("clock: \(r["clock"]?["now"]?.stringValue ?? "?")")
            return
        }
        let r = try c.request("POST", projectBase(c) + ":reset", body: .object([:]))
        s.emit(r, rows: stateRows(r))
    }

    static func snapshotSave(_ s: Session, _ a: [String]) throws {
        let c = try projectClient(s)
        let r = try c.request("POST", projectBase(c) + ":snapshot", body: ["name": .string(a[0])])
        s.emit(r, rows: [("snapshot", r["name"]?.stringValue ?? ""), ("users", String(r["users"]?.int64Value ?? 0)),
                         ("tenants", String(r["tenants"]?.arrayValue?.count ?? 0)), ("created", r["createdAt"]?.stringValue ?? "")])
    }

    static func snapshotRestore(_ s: Session, _ a: [String]) throws {
        let c = try projectClient(s)
        let r = try c.request("POST", projectBase(c) + ":restore", body: ["name": .string(a[0])])
        s.emit(r, rows: [("snapshot", a[0])] + stateRows(r))
    }

    static func snapshotList(_ s: Session, _ a: [String]) throws {
        let c = try projectClient(s)
        let r = try c.request("GET", projectBase(c) + "/snapshots")
        let list = r["snapshots"]?.arrayValue ?? []
        if s.json { s.emit(r, rows: []); return }
        if list.isEmpty { s.print("no snapshots"); return }
        s.table(["NAME", "CREATED", "USERS", "TENANTS"], list.map { e in
            [e["name"]?.stringValue ?? "", e["createdAt"]?.stringValue ?? "", String(e["users"]?.int64Value ?? 0), String(e["tenants"]?.arrayValue?.count ?? 0)]
        })
    }

    static func snapshotDelete(_ s: Session, _ a: [String]) throws {
        let c = try projectClient(s)
        _ = try c.request("DELETE", projectBase(c) + "/snapshots/" + URLEncoding.percentEncode(a[0]))
        s.emit(["deleted": .string(a[0])], rows: [("deleted", a[0])])
    }
}
