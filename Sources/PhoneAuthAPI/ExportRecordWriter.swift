import EmulatorSupport
import PhoneAuthCore

/// A user's `accounts.json` entry written straight into bytes: the bytes `ExportImport.exportRecord(app, u)
/// .prettySerialized(into:level: 2)` gives (the standard user field table's `render`, TOTP secrets as `exportJSON`),
/// without the `JSONObject`, the `JSON` values and the walk over them that building it costs (an export of a million
/// users spent most of its time there). The rare nested values (`mfaInfo`, an imported hash's
/// `passwordHashAlgorithm`) still go through `JSON`, written in place.
///
/// It knows the standard table's fields, in its order, and their wire rules (UserFields.swift: `emailVerified` only with
/// an email, `disabled` only when true, claims unless `{}`, the salt and password times only with a hash…); a table
/// with other fields, or a record holding values of fields it does not know (`UserRecord.extensions`), goes the
/// generic way (`canWrite` says which). `ExportRecordWriterTests` holds the two equal, field kind by field kind.
enum ExportRecordWriter {
    /// The standard table's field names, in order: the writer's own order below must stay this one.
    static let standardNames = UserFieldTable.standard.fields.map(\.name)

    /// Whether the table is the one this writer knows (checked once per export).
    static func knows(_ table: UserFieldTable) -> Bool { table.fields.map(\.name) == standardNames }

    /// Whether `u` holds only what the writer writes (no extension values but an imported hash's algorithm).
    @inline(__always)
    static func canWrite(_ u: UserRecord) -> Bool {
        u.extensions.isEmpty || (u.extensions.count == 1 && u.extensions[UserFields.passwordHashAlgorithm] != nil)
    }

    /// Appends the record as it appears two levels deep in the pretty export (`{` to `}`, no newline after).
    static func write(_ u: UserRecord, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "{"))
        key("\n      \"localId\": ", &out)
        JSON.writeString(u.localId, into: &out)
        if let e = u.email { key(",\n      \"email\": ", &out); JSON.writeString(e, into: &out) }
        if u.email != nil { key(",\n      \"emailVerified\": ", &out); out.append(contentsOf: u.emailVerified ? trueBytes : falseBytes) }
        if let v = u.displayName { key(",\n      \"displayName\": ", &out); JSON.writeString(v, into: &out) }
        if let v = u.photoUrl { key(",\n      \"photoUrl\": ", &out); JSON.writeString(v, into: &out) }
        if let v = u.phoneNumber { key(",\n      \"phoneNumber\": ", &out); JSON.writeString(v, into: &out) }
        if u.disabled { key(",\n      \"disabled\": ", &out); out.append(contentsOf: trueBytes) }
        key(",\n      \"providerUserInfo\": ", &out)
        providers(u, into: &out)
        if let c = u.customAttributes, !c.isEmpty, c != "{}" { key(",\n      \"customAttributes\": ", &out); JSON.writeString(c, into: &out) }
        if let t = u.validSince { key(",\n      \"validSince\": ", &out); quotedInt(t, into: &out) }
        if let t = u.lastLoginAt { key(",\n      \"lastLoginAt\": ", &out); quotedInt(t, into: &out) }
        key(",\n      \"createdAt\": ", &out)
        quotedInt(u.createdAt, into: &out)
        if let t = u.lastRefreshAt { key(",\n      \"lastRefreshAt\": ", &out); JSON.writeString(Timestamp.protobufJSON(millis: t), into: &out) }
        if let v = u.tenantId { key(",\n      \"tenantId\": ", &out); JSON.writeString(v, into: &out) }
        if let h = u.passwordHash {
            key(",\n      \"passwordHash\": ", &out)
            JSON.writeString(h, into: &out)
            if let s = u.salt { key(",\n      \"salt\": ", &out); JSON.writeString(s, into: &out) }
            // `.int`: a JSON number (a double), as the generic path writes it.
            if let t = u.passwordUpdatedAt { key(",\n      \"passwordUpdatedAt\": ", &out); JSON.writeNumber(Double(t), into: &out) }
            if let a = u.passwordHashAlgorithm {
                key(",\n      \"passwordHashAlgorithm\": ", &out)
                a.prettySerialized(into: &out, level: 3)
            }
        }
        if u.emailLinkSignin { key(",\n      \"emailLinkSignin\": ", &out); out.append(contentsOf: trueBytes) }
        if let v = u.screenName { key(",\n      \"screenName\": ", &out); JSON.writeString(v, into: &out) }
        if !u.mfaInfo.isEmpty {
            key(",\n      \"mfaInfo\": ", &out)
            JSON.array(u.mfaInfo.map(\.exportJSON)).prettySerialized(into: &out, level: 3)
        }
        if let v = u.initialEmail { key(",\n      \"initialEmail\": ", &out); JSON.writeString(v, into: &out) }
        out.append(contentsOf: "\n    }".utf8)
    }

    /// A member's key: static text (the comma before it, a newline, the indentation, the quoted key and `: `).
    @inline(__always)
    private static func key(_ k: StaticString, _ out: inout [UInt8]) {
        k.withUTF8Buffer { out.append(contentsOf: $0) }
    }

    private static let trueBytes: [UInt8] = Array("true".utf8)
    private static let falseBytes: [UInt8] = Array("false".utf8)

    @inline(__always)
    private static func quotedInt(_ v: Int64, into out: inout [UInt8]) {
        out.append(0x22)
        JSON.writeInt(v, into: &out)
        out.append(0x22)
    }

    /// `providerUserInfo` (ProviderInfo.wire): `phone` with a number, `password` with an email and a password or
    /// email-link sign-in, then the federated entries; members five levels deep.
    private static func providers(_ u: UserRecord, into out: inout [UInt8]) {
        var first = true
        func open(_ out: inout [UInt8]) {
            out.append(contentsOf: first ? "[\n        {".utf8 : ",\n        {".utf8)
            first = false
        }
        func member(_ k: StaticString, _ v: String, _ out: inout [UInt8], first: Bool = false) {
            if !first { out.append(UInt8(ascii: ",")) }
            k.withUTF8Buffer { out.append(contentsOf: $0) }
            JSON.writeString(v, into: &out)
        }
        if let p = u.phoneNumber {
            open(&out)
            member("\n          \"providerId\": ", "phone", &out, first: true)
            member("\n          \"rawId\": ", p, &out)
            member("\n          \"phoneNumber\": ", p, &out)
            out.append(contentsOf: "\n        }".utf8)
        }
        if let e = u.email, u.passwordHash != nil || u.emailLinkSignin {
            open(&out)
            member("\n          \"providerId\": ", "password", &out, first: true)
            member("\n          \"rawId\": ", e, &out)
            member("\n          \"email\": ", e, &out)
            member("\n          \"federatedId\": ", e, &out)
            if let v = u.displayName { member("\n          \"displayName\": ", v, &out) }
            if let v = u.photoUrl { member("\n          \"photoUrl\": ", v, &out) }
            out.append(contentsOf: "\n        }".utf8)
        }
        for p in u.providerUserInfo {
            // ProviderUserInfo.json's order.
            open(&out)
            member("\n          \"providerId\": ", p.providerId, &out, first: true)
            member("\n          \"rawId\": ", p.rawId, &out)
            if let v = p.federatedId { member("\n          \"federatedId\": ", v, &out) }
            if let v = p.displayName { member("\n          \"displayName\": ", v, &out) }
            if let v = p.photoUrl { member("\n          \"photoUrl\": ", v, &out) }
            if let v = p.email { member("\n          \"email\": ", v, &out) }
            if let v = p.screenName { member("\n          \"screenName\": ", v, &out) }
            if let v = p.phoneNumber { member("\n          \"phoneNumber\": ", v, &out) }
            out.append(contentsOf: "\n        }".utf8)
        }
        out.append(contentsOf: first ? "[]".utf8 : "\n      ]".utf8)
    }
}
