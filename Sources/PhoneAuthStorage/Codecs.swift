import EmulatorSupport
import PhoneAuthCore

/// Storage encodings of the core records (JSON documents, versioned by field presence).
enum Codecs {
    /// An Int64 field, exactly (`JSON.exactInt`: decimal strings past 2^53; rows stay readable by older versions).
    static func int(_ v: Int64) -> JSON { .exactInt(v) }
    static func int(_ v: UInt64) -> JSON { .exactInt(v) }

    /// Reads what `int` wrote, and numbers from older rows (`JSON.exactInt64`: saturating).
    static func int64(_ v: JSON?) -> Int64? { v?.exactInt64 }

    /// A user's journal document: the user field table's journal form (PhoneAuthCore/UserFields.swift).
    static func encode(_ u: UserRecord, fields: UserFieldTable = .standard) -> String {
        JSON.object(fields.journalObject(u)).serializedString
    }

    static func decodeUser(_ text: String, fields: UserFieldTable = .standard) -> UserRecord? {
        guard case .object(let o)? = try? JSONParser.parse(text) else { return nil }
        return fields.record(fromJournal: o)
    }

    static func encode(_ s: VerificationSession) -> String {
        var o: JSONObject = ["sessionInfo": .string(s.sessionInfo), "phoneNumber": .string(s.phoneNumber), "code": .string(s.code),
                             "createdAt": int(s.createdAt), "fictional": .bool(s.fictional), "kind": .string(s.kind.rawValue),
                             "sequence": int(s.sequence)]
        o.set("expiresAt", s.expiresAt.map(int))
        o.set("attemptsLeft", s.attemptsLeft.map { .int($0) })
        o.set("appSignatureHash", s.appSignatureHash.map(JSON.string))
        o.set("owner", s.owner.map(JSON.string))
        if let d = s.delivery {
            o.set("language", d.language.map(JSON.string))
            o.set("deliverAt", d.deliverAt.map(int))
            if d.lost { o["lost"] = true }
        }
        return JSON.object(o).serializedString
    }

    static func decodeSession(_ text: String) -> VerificationSession? {
        guard case .object(let o)? = try? JSONParser.parse(text), let id = o["sessionInfo"]?.stringValue.flatMap(SessionID.init),
            let phone = o["phoneNumber"]?.stringValue, let code = o["code"]?.stringValue, let created = int64(o["createdAt"])
        else { return nil }
        var s = VerificationSession(
            id: id, phoneNumber: phone, code: code, createdAt: created, expiresAt: int64(o["expiresAt"]),
            attemptsLeft: o["attemptsLeft"]?.int64Value.map { Int($0) }, fictional: o["fictional"]?.boolValue ?? false,
            kind: VerificationSession.Kind(rawValue: o["kind"]?.stringValue ?? "") ?? .signIn,
            appSignatureHash: o["appSignatureHash"]?.stringValue, sequence: UInt64(max(0, int64(o["sequence"]) ?? 0)))
        s.owner = o["owner"]?.stringValue
        let language = o["language"]?.stringValue.flatMap { SMSText.language(forLocale: $0) }
        let deliverAt = int64(o["deliverAt"])
        let lost = o["lost"]?.boolValue ?? false
        if language != nil || deliverAt != nil || lost { s.delivery = SMSDelivery(language: language, deliverAt: deliverAt, lost: lost) }
        return s
    }

    static func encode(_ c: OobCode) -> String {
        var o: JSONObject = ["oobCode": .string(c.code), "email": .string(c.email), "requestType": .string(c.requestType.rawValue),
                             "oobLink": .string(c.link), "createdAt": int(c.createdAt), "expiresAt": int(c.expiresAt), "sequence": int(c.sequence)]
        o.set("newEmail", c.newEmail.map(JSON.string))
        return JSON.object(o).serializedString
    }

    static func decodeOobCode(_ text: String) -> OobCode? {
        guard case .object(let o)? = try? JSONParser.parse(text), let code = o["oobCode"]?.stringValue, let email = o["email"]?.stringValue,
            let type = o["requestType"]?.stringValue.flatMap(OobCode.RequestType.init(rawValue:)), let link = o["oobLink"]?.stringValue,
            let created = int64(o["createdAt"]), let expires = int64(o["expiresAt"])
        else { return nil }
        return OobCode(code: code, email: email, newEmail: o["newEmail"]?.stringValue, requestType: type, link: link, createdAt: created,
                       expiresAt: expires, sequence: UInt64(max(0, int64(o["sequence"]) ?? 0)))
    }

    static func encode(_ r: RefreshTokenRecord) -> String {
        var o: JSONObject = ["projectId": .string(r.projectId), "localId": .string(r.localId), "authTime": int(r.authTime),
                             "signInProvider": .string(r.signInProvider), "issuedAt": int(r.issuedAt)]
        o.set("tenantId", r.tenantId.map(JSON.string))
        o.set("secondFactorId", r.secondFactorId.map(JSON.string))
        o.set("extraClaims", r.extraClaims.map(JSON.string))
        o.set("secondFactor", r.secondFactor.map(JSON.string))
        return JSON.object(o).serializedString
    }

    static func decodeRefreshToken(_ text: String) -> RefreshTokenRecord? {
        guard case .object(let o)? = try? JSONParser.parse(text), let p = o["projectId"]?.stringValue, let l = o["localId"]?.stringValue
        else { return nil }
        return RefreshTokenRecord(projectId: p, tenantId: o["tenantId"]?.stringValue, localId: l, authTime: int64(o["authTime"]) ?? 0,
                                  signInProvider: o["signInProvider"]?.stringValue ?? "phone", issuedAt: int64(o["issuedAt"]) ?? 0,
                                  secondFactorId: o["secondFactorId"]?.stringValue, extraClaims: o["extraClaims"]?.stringValue,
                                  secondFactor: o["secondFactor"]?.stringValue)
    }

    static func encode(_ c: ProjectConfig, _ t: TenantSettings?) -> String {
        var o: JSONObject = ["config": c.toJSON(), "passthrough": .object(c.passthrough)]
        if let t {
            var to: JSONObject = ["disableAuth": .bool(t.disableAuth), "allowPasswordSignup": .bool(t.allowPasswordSignup),
                                  "enableEmailLinkSignin": .bool(t.enableEmailLinkSignin), "enableAnonymousUser": .bool(t.enableAnonymousUser),
                                  "extra": .object(t.extra)]
            to.set("displayName", t.displayName.map(JSON.string))
            o["tenant"] = .object(to)
        }
        return JSON.object(o).serializedString
    }

    static func decodeConfig(_ text: String) -> (ProjectConfig, TenantSettings?)? {
        guard case .object(let o)? = try? JSONParser.parse(text), let cj = o["config"] else { return nil }
        var c = ProjectConfig()
        do { try c.apply(cj) } catch { return nil }
        c.passthrough = o["passthrough"]?.objectValue ?? JSONObject()
        var t: TenantSettings? = nil
        if let to = o["tenant"]?.objectValue {
            var ts = TenantSettings()
            ts.displayName = to["displayName"]?.stringValue
            ts.disableAuth = to["disableAuth"]?.boolValue ?? false
            ts.allowPasswordSignup = to["allowPasswordSignup"]?.boolValue ?? true
            ts.enableEmailLinkSignin = to["enableEmailLinkSignin"]?.boolValue ?? false
            ts.enableAnonymousUser = to["enableAnonymousUser"]?.boolValue ?? true
            ts.extra = to["extra"]?.objectValue ?? JSONObject()
            t = ts
        }
        return (c, t)
    }
}
