import EmulatorSupport

// # Federated providers on a user
//
// A user's `providerUserInfo` on the wire lists `phone` while it has a number, `password` while it has an email and a
// password (or signs in by email link), and one entry per federated identity (google.com, apple.com, oidc.*, saml.*…)
// linked to it: those are stored (`UserRecord.providerUserInfo`), the first two derived from the record's fields.
// Every store indexes the stored entries by provider and raw id (`AuthStore.federatedIndex`: a sign-in finds its user
// in O(1)) and by their email (`providerEmailIndex`: `createAuthUri` lists a user found by a provider's email).

/// One federated identity linked to a user, as lookups show it: `{providerId, rawId, federatedId, displayName,
/// photoUrl, email, screenName}` (the official emulator's key order; absent keys left out).
public struct ProviderUserInfo: Sendable, Equatable {
    public var providerId: String
    /// The identity provider's id of the user (`sub`).
    public var rawId: String
    /// Production and the official emulator store the raw id here too (not the prefixed form a sign-in answers).
    public var federatedId: String?
    public var displayName: String?
    public var photoUrl: String?
    public var email: String?
    public var screenName: String?
    public var phoneNumber: String?

    public init(providerId: String, rawId: String, federatedId: String? = nil, displayName: String? = nil, photoUrl: String? = nil,
                email: String? = nil, screenName: String? = nil, phoneNumber: String? = nil) {
        self.providerId = providerId
        self.rawId = rawId
        self.federatedId = federatedId
        self.displayName = displayName
        self.photoUrl = photoUrl
        self.email = email
        self.screenName = screenName
        self.phoneNumber = phoneNumber
    }

    /// The wire (and journal) form.
    public var json: JSON {
        var o: JSONObject = ["providerId": .string(providerId), "rawId": .string(rawId)]
        o.set("federatedId", federatedId.map(JSON.string))
        o.set("displayName", displayName.map(JSON.string))
        o.set("photoUrl", photoUrl.map(JSON.string))
        o.set("email", email.map(JSON.string))
        o.set("screenName", screenName.map(JSON.string))
        o.set("phoneNumber", phoneNumber.map(JSON.string))
        return .object(o)
    }

    /// Reads `json`; nil without a provider id and a raw id.
    public init?(json v: JSON) {
        guard let p = v["providerId"]?.stringValue, !p.isEmpty, let r = v["rawId"]?.stringValue, !r.isEmpty else { return nil }
        self.init(providerId: p, rawId: r, federatedId: v["federatedId"]?.stringValue, displayName: v["displayName"]?.stringValue,
                  photoUrl: v["photoUrl"]?.stringValue, email: v["email"]?.stringValue, screenName: v["screenName"]?.stringValue,
                  phoneNumber: v["phoneNumber"]?.stringValue)
    }

    /// A blocking function's `provider_data` entry.
    var blockingJSON: JSON {
        var o: JSONObject = ["provider_id": .string(providerId), "uid": .string(rawId)]
        o.set("display_name", displayName.map(JSON.string))
        o.set("photo_url", photoUrl.map(JSON.string))
        o.set("email", email.map(JSON.string))
        o.set("phone_number", phoneNumber.map(JSON.string))
        return .object(o)
    }

    /// The key of the federated index.
    public static func indexKey(_ providerId: String, _ rawId: String) -> String { providerId + "\u{1F}" + rawId }
    var indexKey: String { Self.indexKey(providerId, rawId) }

    /// Provider ids a federated entry may not take: those are derived from the record's fields.
    public static let derived: Set<String> = ["phone", "password", "email"]

    /// A provider id a client may sign in with or an admin may link: lower-case letters, digits, `.`, `-` and `_`,
    /// at most 128 characters, not a derived one.
    public static func isValidProviderId(_ id: String) -> Bool {
        !id.isEmpty && id.utf8.count <= 128 && !derived.contains(id)
            && id.utf8.allSatisfy { ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2E || $0 == 0x2D || $0 == 0x5F }
    }

    /// Bounds a federated entry's text (the raw id as a uid, the rest as the user's own free text) and its count.
    public static let maxRawIdLength = 256
    public static let maxPerUser = 32
}

extension AuthStore {
    /// The user a federated identity is linked to.
    public func user(providerId: String, rawId: String) -> UserRecord? {
        federatedIndex[ProviderUserInfo.indexKey(providerId, rawId)].flatMap { users[$0] }
    }

    /// Users with a federated identity whose email is `email` (any case), oldest link first.
    public func users(providerEmail email: String) -> [UserRecord] {
        (providerEmailIndex[email.lowercased()] ?? []).compactMap { users[$0] }
    }
}

extension UserRecord {
    /// Links a federated identity: replaces the entry of the same provider in place, else appends it.
    public mutating func link(_ p: ProviderUserInfo) {
        if let i = providerUserInfo.firstIndex(where: { $0.providerId == p.providerId }) { providerUserInfo[i] = p } else { providerUserInfo.append(p) }
    }

    /// The sign-in methods `createAuthUri` lists for this user (the official emulator's order over the wire's
    /// providers): `password` and `emailLink` for the password provider, each federated provider id; never `phone`.
    public var signInMethods: (allProviders: [String], signinMethods: [String]) {
        var all: [String] = [], methods: [String] = []
        if email != nil && (passwordHash != nil || emailLinkSignin) {
            all.append("password")
            if passwordHash != nil { methods.append("password") }
            if emailLinkSignin { methods.append("emailLink") }
        }
        for p in providerUserInfo where !all.contains(p.providerId) {
            all.append(p.providerId)
            methods.append(p.providerId)
        }
        return (all, methods)
    }
}
