import EmulatorSupport

// # The user record's fields, declared once
//
// Every field of `UserRecord` is one `UserField` row below, holding what each mapping of the record needs: its name
// (the wire name of lookups, `batchCreate` and firebase-tools' `accounts.json`, of update requests and of the event
// diff), its journal key, who may set it (a client's `accounts:update`, an admin's create/update, an import), whether
// a user's own lookup shows it, its ID-token claim and its place in a blocking function's `user_record`. The mappings
// walk the table:
//
// - `render` — the wire JSON (`accounts:lookup`, `batchGet`, `query`, exports), in the table's order;
// - `journalObject` / `record(fromJournal:)` — the journal codec (`--data-dir`);
// - `importChanges` — `batchCreate` and firebase-tools import: each present field parsed, with the per-user message;
// - `requestChanges` — `accounts:update` and admin create: each field the caller may set (`deleteAttribute` too);
// - `apply` — changes onto a record, with each field's checks (limits, uniqueness, normal forms);
// - `changedFields` — the names `user.updated` reports;
// - `blockingRecord` — a blocking function's `user_record`.
//
// So a new field is one row (plus its stored property): it round-trips through the wire, the journal, export/import and
// the event diff (`UserFieldTableTests` shows it with a field that exists only in a test: rows may keep their value in
// `UserRecord.extensions`). ID-token claims keep their measured fast path (`TokenService.claimsJSON`, bytes written
// directly); `claim` names which claim a field feeds, and the claims tests hold the two equal.
//
// The password is not a stored field: a request's `password`, an import's hash formats and `deleteAttribute:
// PASSWORD` become `UserChanges.password`, which sets `passwordHash`, `salt`, `passwordHashAlgorithm`,
// `passwordUpdatedAt` (and `validSince`) together after every field (`Emulator.apply`).

/// One field of the user record and every mapping it takes part in. A class: the mappings walk the table for every
/// user of every request, and copying a row struct (a dozen closures and strings) cost a retain and a release of each
/// per row visited (a quarter of an import's instructions, callgrind).
public final class UserField: Sendable {
    /// Who may set a field.
    public struct Access: OptionSet, Sendable {
        public let rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }
        /// A signed-in user's own `accounts:update` (and client `signUp`).
        public static let client = Access(rawValue: 1)
        /// Admin `accounts` (create) and `accounts:update`.
        public static let admin = Access(rawValue: 2)
        /// `batchCreate` and firebase-tools `accounts.json`.
        public static let importing = Access(rawValue: 4)
        public static let everyone: Access = [.client, .admin, .importing]
        public static let adminAndImport: Access = [.admin, .importing]
    }

    /// What a request value is read as (`Call.string/bool/int` in the API, with their wire errors).
    public enum RequestKind: Sendable { case string, bool, int64 }

    /// The wire name: lookups, imports, update requests and `user.updated`.
    public let name: String
    public let journalKey: String
    /// The name `user.updated` reports; nil: changes are not reported (sign-in times, the salt…).
    public let event: String?
    public let access: Access
    /// A client request setting it without the access: this error (nil: the key is ignored, as production does).
    public let clientRefusal: AuthError.Code?
    /// Request keys, first found wins (`disableUser` before `disabled`); empty: not settable by a plain key.
    public let requestKeys: [String]
    public let requestKind: RequestKind
    /// `deleteAttribute` value that clears it.
    public let deleteAttribute: String?
    /// The ID-token claim it feeds (written by `TokenService`), for documentation and the claims tests.
    public let claim: String?
    /// Where it goes in a blocking function's `user_record` (dotted path; nil: not sent).
    public let blockingPath: String?

    /// The canonical value (what the journal stores); nil when absent.
    public let value: @Sendable (UserRecord) -> JSON?
    /// Sets the canonical value (nil: clears) without checks: the journal and `apply` after its checks.
    public let assign: @Sendable (inout UserRecord, JSON?) -> Void
    /// The wire value (lookups, exports); nil leaves it out. `forClient`: a user's own lookup.
    public let wire: @Sendable (UserRecord, _ forClient: Bool) -> JSON?
    /// A blocking function's value; nil leaves it out.
    public let blockingValue: @Sendable (UserRecord) -> JSON?
    /// A request's value (already read as `requestKind`) as the change it asks for: checks its format and range.
    public let fromRequest: @Sendable (JSON) throws(AuthError) -> FieldChange<JSON>
    /// An import's value as a change (`nil`: left as is); `.failure` carries the per-user message. `item` is the whole
    /// record (some checks look at other fields), `context` supplies randomness and the time.
    public let fromImport: @Sendable (JSON, JSONObject, UserFieldInput) -> Result<FieldChange<JSON>?, UserFieldError>
    /// Checks a change against the record and its store before it is applied, and gives the value to store (normal
    /// forms: a canonical phone number, a lowercased email). Default: the limit check only.
    public let admit: @Sendable (FieldChange<JSON>, UserRecord, AuthStore) throws(AuthError) -> FieldChange<JSON>
    /// Further changes a change brings (clearing the email clears `emailVerified`).
    public let alsoClears: [String]

    public init(_ name: String, journalKey: String? = nil, event: String? = nil, access: Access = [], clientRefusal: AuthError.Code? = nil,
                requestKeys: [String]? = nil, requestKind: RequestKind = .string, deleteAttribute: String? = nil, claim: String? = nil,
                blockingPath: String? = nil, alsoClears: [String] = [],
                value: @escaping @Sendable (UserRecord) -> JSON?, assign: @escaping @Sendable (inout UserRecord, JSON?) -> Void,
                wire: (@Sendable (UserRecord, Bool) -> JSON?)? = nil, blockingValue: (@Sendable (UserRecord) -> JSON?)? = nil,
                fromRequest: (@Sendable (JSON) throws(AuthError) -> FieldChange<JSON>)? = nil,
                fromImport: (@Sendable (JSON, JSONObject, UserFieldInput) -> Result<FieldChange<JSON>?, UserFieldError>)? = nil,
                admit: (@Sendable (FieldChange<JSON>, UserRecord, AuthStore) throws(AuthError) -> FieldChange<JSON>)? = nil) {
        self.name = name
        self.journalKey = journalKey ?? name
        self.event = event
        self.access = access
        self.clientRefusal = clientRefusal
        self.requestKeys = requestKeys ?? (access.isEmpty ? [] : [name])
        self.requestKind = requestKind
        self.deleteAttribute = deleteAttribute
        self.claim = claim
        self.blockingPath = blockingPath
        self.alsoClears = alsoClears
        self.value = value
        self.assign = assign
        self.wire = wire ?? { u, _ in value(u) }
        self.blockingValue = blockingValue ?? value
        // `if let`, not `??`: the autoclosure of `??` over a typed-throws function type crashes the 6.3 compiler.
        if let fromRequest { self.fromRequest = fromRequest } else { self.fromRequest = Self.setAsGiven }
        self.fromImport = fromImport ?? { v, _, _ in .success(.set(v)) }
        if let admit { self.admit = admit } else { self.admit = Self.admitAsGiven }
    }

    @Sendable static func setAsGiven(_ v: JSON) throws(AuthError) -> FieldChange<JSON> { .set(v) }
    @Sendable static func admitAsGiven(_ c: FieldChange<JSON>, _ u: UserRecord, _ s: AuthStore) throws(AuthError) -> FieldChange<JSON> { c }
}

/// An import's per-user problem (it goes back in `batchCreate`'s `error[{index, message}]`).
public struct UserFieldError: Error, Sendable, Equatable {
    public let message: String
    public init(_ message: String) { self.message = message }
}

/// What parsing an imported field may need besides the value.
public struct UserFieldInput: Sendable {
    public var random: any RandomSource
    public var now: Int64
    /// Claims texts already found valid in this batch of records (nil: each is checked on its own).
    public var claims: ValidClaims?
    public init(random: any RandomSource, now: Int64, claims: ValidClaims? = nil) {
        self.random = random
        self.now = now
        self.claims = claims
    }
}

/// The custom claims texts of one import batch that passed `CustomClaims.validate`: the users of an export often
/// share their claims (a role, a tier), and parsing the same text again for each was the largest single cost of
/// checking an imported record (~3.8 k instructions of ~12 k, callgrind). Texts are matched byte for byte
/// (`ExactText`: `String`'s `==` would take a canonically equivalent text of another UTF-16 length for it); at most
/// `limit` are kept.
public final class ValidClaims: Sendable {
    static let limit = 1024
    private let valid = Locked(Set<ExactText>())
    public init() {}

    /// `CustomClaims.validate(text)`, once per distinct text.
    func validate(_ text: String) throws(AuthError) -> String {
        if valid.withLock({ $0.contains(ExactText(text)) }) { return text }
        let checked = try CustomClaims.validate(text)
        valid.withLock { s in if s.count < Self.limit { s.insert(ExactText(checked)) } }
        return checked
    }
}

extension FieldChange {
    public func map<U: Sendable & Equatable>(_ f: (T) -> U?) -> FieldChange<U> {
        switch self {
        case .unchanged: return .unchanged
        case .clear: return .clear
        case .set(let v): return f(v).map(FieldChange<U>.set) ?? .unchanged
        }
    }
}

// MARK: the table

/// The rows, in the wire's order (Google's field order in lookups; also the order `user.updated` lists them).
public struct UserFieldTable: Sendable {
    public private(set) var fields: [UserField]
    private var byName: FieldNameIndex
    /// Makes the rows anew (`ownCopy`).
    private let make: @Sendable () -> [UserField]

    public init(_ fields: [UserField]) {
        self.init(fields, make: { fields })
    }

    private init(_ fields: [UserField], make: @escaping @Sendable () -> [UserField]) {
        self.fields = fields
        self.make = make
        byName = FieldNameIndex(fields.map(\.name))
    }

    /// The table with `field` added at the end (tests: a field that exists only there).
    public func adding(_ field: UserField) -> UserFieldTable {
        let make = self.make
        return UserFieldTable(fields + [field], make: { make() + [field] })
    }

    /// The same table made of rows of its own (fields, closures, their captures), for a thread that runs it a million
    /// times beside another thread running the original (a start-up import's reader): a row both use has its reference
    /// count written by both cores, and the cache line that holds it moves between them at every retain. The standard
    /// rows are made anew; a row given to `adding` or to `init(_:)` is the same object in the copy.
    public func ownCopy() -> UserFieldTable { UserFieldTable(make(), make: make) }

    public subscript(name: String) -> UserField? { byName[name].map { fields[$0] } }

    /// The record's fields.
    public static let standard = UserFieldTable(UserFields.makeRows(), make: UserFields.makeRows)
}

/// Field name → row, for the table's lookups by name (every key of every imported record, every field of every
/// change): open addressing over FNV-1a of the name's bytes, a few dozen instructions where hashing a `String` into a
/// `Dictionary` (SipHash) cost a few hundred (callgrind: 15% of an import).
struct FieldNameIndex: Sendable {
    private let names: [String]
    /// Row number + 1 per slot (0: empty); a power-of-two count at least four times the rows.
    private let slots: [Int32]
    private let mask: Int

    init(_ names: [String]) {
        self.names = names
        var size = 16
        while size < names.count * 4 { size *= 2 }
        mask = size - 1
        var slots = [Int32](repeating: 0, count: size)
        for (i, n) in names.enumerated() {
            var s = Self.hash(n) & (size - 1)
            var duplicate = false
            while slots[s] != 0 {
                if names[Int(slots[s]) - 1] == n { duplicate = true; break }  // the first row of a name wins
                s = (s + 1) & (size - 1)
            }
            if !duplicate { slots[s] = Int32(i + 1) }
        }
        self.slots = slots
    }

    subscript(name: String) -> Int? {
        var s = Self.hash(name) & mask
        while true {
            let v = slots[s]
            if v == 0 { return nil }
            if names[Int(v) - 1] == name { return Int(v) - 1 }
            s = (s + 1) & mask
        }
    }

    @inline(__always) static func hash(_ name: String) -> Int {
        // On the contiguous bytes (every native string): walking `utf8` by index cost ~20 instructions a byte.
        if let h = name.utf8.withContiguousStorageIfAvailable(hash(bytes:)) { return h }
        return Array(name.utf8).withUnsafeBufferPointer(hash(bytes:))
    }

    @inline(__always) static func hash(bytes: UnsafeBufferPointer<UInt8>) -> Int {
        var h: UInt32 = 2_166_136_261
        for b in bytes { h = (h ^ UInt32(b)) &* 16_777_619 }
        return Int(h)
    }
}

/// The standard rows (`UserFieldTable.standard`) and the value helpers they are made of.
public enum UserFields {
    /// What production shows a user's own lookup instead of a password hash ("REDACTED", base64).
    public static let redactedPasswordHash = "UkVEQUNURUQ="

    /// The rows, made anew at each call (`UserFieldTable.ownCopy`).
    @Sendable static func makeRows() -> [UserField] { [
        UserField("email", event: "email", access: .everyone, deleteAttribute: "EMAIL", claim: "email", blockingPath: "email",
                  alsoClears: ["emailVerified"],
                  value: { $0.email.map(JSON.string) }, assign: { $0.email = $1?.stringValue },
                  fromRequest: { v throws(AuthError) in v.stringValue == "" ? .clear : .set(v) },
                  fromImport: { v, _, _ in
                      guard let s = text(v) else { return .success(nil) }
                      return s.contains("@") ? .success(.set(.string(s))) : .failure(UserFieldError("email is invalid"))
                  },
                  admit: { c, user, store throws(AuthError) in
                      guard case .set(let v) = c, let e = v.stringValue else { return c }
                      guard Identifiers.isValidEmail(e) else { throw AuthError(.invalidEmail) }
                      let lower = e.lowercased()
                      if let owner = store.emailIndex[lower], owner != user.localId { throw AuthError(.emailExists) }
                      return .set(.string(lower))  // stored canonical (lower case), as production and the official emulator
                  }),
        UserField("emailVerified", event: "emailVerified", access: .adminAndImport, clientRefusal: .operationNotAllowed, requestKind: .bool,
                  claim: "email_verified", blockingPath: "email_verified",
                  value: { .bool($0.emailVerified) }, assign: { $0.emailVerified = $1?.boolValue ?? false },
                  wire: { u, _ in u.email == nil ? nil : .bool(u.emailVerified) },
                  fromImport: { v, _, _ in .success(v.boolValue.map { .set(.bool($0)) }) }),
        text("displayName", deleteAttribute: "DISPLAY_NAME", claim: "name", blocking: "display_name", limit: UserFieldLimits.displayName,
             code: .invalidDisplayName, \.displayName),
        text("photoUrl", deleteAttribute: "PHOTO_URL", claim: "picture", blocking: "photo_url", limit: UserFieldLimits.photoUrl,
             code: .invalidPhotoUrl, \.photoUrl),
        UserField("phoneNumber", event: "phoneNumber", access: .adminAndImport, claim: "phone_number", blockingPath: "phone_number",
                  value: { $0.phoneNumber.map(JSON.string) }, assign: { $0.phoneNumber = $1?.stringValue },
                  fromRequest: { v throws(AuthError) in v.stringValue == "" ? .clear : .set(v) },
                  fromImport: { v, _, _ in
                      guard let s = text(v) else { return .success(nil) }
                      return (try? PhoneNumber(parsing: s)) != nil ? .success(.set(.string(s))) : .failure(UserFieldError("phone number format is invalid"))
                  },
                  admit: { c, user, store throws(AuthError) in
                      guard case .set(let v) = c else { return c }
                      let phone = try PhoneNumber(parsing: v.stringValue).e164
                      if let owner = store.phoneIndex[phone], owner != user.localId { throw AuthError(.phoneNumberExists) }
                      return .set(.string(phone))
                  }),
        UserField("disabled", event: "disabled", access: .adminAndImport, clientRefusal: .operationNotAllowed, requestKeys: ["disableUser", "disabled"],
                  requestKind: .bool, blockingPath: "disabled",
                  value: { .bool($0.disabled) }, assign: { $0.disabled = $1?.boolValue ?? false },
                  wire: { u, _ in u.disabled ? .bool(true) : nil },
                  fromImport: { v, _, _ in .success(v.boolValue.map { .set(.bool($0)) }) }),
        UserField("providerUserInfo", event: "providerUserInfo", access: .importing, blockingPath: "provider_data",
                  value: { u in u.providerUserInfo.isEmpty ? nil : .array(u.providerUserInfo.map(\.json)) },
                  assign: { u, v in u.providerUserInfo = (v?.arrayValue ?? []).compactMap(ProviderUserInfo.init(json:)) },
                  wire: { u, _ in .array(ProviderInfo.wire(u)) }, blockingValue: { u in .array(ProviderInfo.blocking(u)) },
                  fromImport: { v, _, _ in ProviderInfo.importEntries(v) },
                  admit: { c, user, store throws(AuthError) in
                      guard case .set(let v) = c else { return c }
                      for p in (v.arrayValue ?? []).compactMap(ProviderUserInfo.init(json:)) {
                          if let owner = store.federatedIndex[p.indexKey], owner != user.localId { throw AuthError(.federatedUserIdAlreadyLinked) }
                      }
                      return c
                  }),
        UserField("customAttributes", event: "customAttributes", access: .adminAndImport, clientRefusal: .insufficientPermission,
                  blockingPath: "custom_claims",
                  value: { $0.customAttributes.map(JSON.string) }, assign: { $0.customAttributes = $1?.stringValue },
                  wire: { u, _ in u.customAttributes.flatMap { $0.isEmpty || $0 == "{}" ? nil : .string($0) } },
                  blockingValue: { u in let c = u.customClaims; return c.isEmpty ? nil : .object(c) },
                  fromRequest: { v throws(AuthError) in
                      let text = v.stringValue ?? ""
                      return .set(.string(try CustomClaims.validate(text.isEmpty ? "{}" : text)))
                  },
                  fromImport: { v, _, input in
                      guard let s = text(v) else { return .success(nil) }
                      do throws(AuthError) {
                          let checked: String
                          if let memo = input.claims { checked = try memo.validate(s) } else { checked = try CustomClaims.validate(s) }
                          return .success(.set(.string(checked)))
                      } catch {
                          // batchCreate's per-user messages, as production's and the official emulator's.
                          switch error.code {
                          case .forbiddenClaim: return .failure(UserFieldError("Custom claims provided include a reserved claim."))
                          case .claimsTooLarge: return .failure(UserFieldError("Custom claims provided are too large."))
                          default: return .failure(UserFieldError("Invalid custom claims provided."))
                          }
                      }
                  },
                  admit: { c, _, _ throws(AuthError) in
                      guard case .set(let v) = c, let s = v.stringValue else { return c }
                      guard s.utf16.count <= CustomClaims.maxLength else { throw AuthError(.claimsTooLarge) }
                      return s == "{}" ? .clear : c
                  }),
        time("validSince", .validSince, event: "validSince", blocking: "tokens_valid_after_time", \.validSince, blockingScale: 1),
        time("lastLoginAt", .lastLoginAt, event: nil, blocking: "metadata.last_sign_in_time", \.lastLoginAt, blockingScale: 1000),
        UserField("createdAt", event: "createdAt", access: .adminAndImport, clientRefusal: .operationNotAllowed, requestKind: .int64,
                  blockingPath: "metadata.creation_time",
                  value: { .exactInt($0.createdAt) }, assign: { u, v in if let t = v?.exactInt64 { u.createdAt = t } },
                  wire: { u, _ in .string(String(u.createdAt)) }, blockingValue: { u in .int(u.createdAt / 1000) },
                  fromRequest: { v throws(AuthError) in .set(.exactInt(try TimeField.createdAt.check(v.exactInt64 ?? -1))) },
                  fromImport: { v, _, _ in importTime(v, .createdAt) }),
        UserField("lastRefreshAt", value: { $0.lastRefreshAt.map(JSON.exactInt) }, assign: { $0.lastRefreshAt = $1?.exactInt64 },
                  wire: { u, _ in u.lastRefreshAt.map { .string(Timestamp.protobufJSON(millis: $0)) } }, blockingValue: { _ in nil }),
        UserField("tenantId", blockingPath: "tenant_id",
                  value: { $0.tenantId.map(JSON.string) }, assign: { $0.tenantId = $1?.stringValue }),
        UserField("passwordHash", event: "password",
                  value: { $0.passwordHash.map(JSON.string) }, assign: { $0.passwordHash = $1?.stringValue },
                  wire: { u, forClient in u.passwordHash.map { .string(forClient ? redactedPasswordHash : $0) } }, blockingValue: { _ in nil }),
        UserField("salt", value: { $0.salt.map(JSON.string) }, assign: { $0.salt = $1?.stringValue },
                  wire: { u, forClient in forClient || u.passwordHash == nil ? nil : u.salt.map(JSON.string) }, blockingValue: { _ in nil }),
        UserField("passwordUpdatedAt", value: { $0.passwordUpdatedAt.map(JSON.exactInt) }, assign: { $0.passwordUpdatedAt = $1?.exactInt64 },
                  wire: { u, _ in u.passwordHash == nil ? nil : u.passwordUpdatedAt.map { .int($0) } }, blockingValue: { _ in nil }),
        // An imported foreign hash's algorithm (ImportedPasswordHash.swift): shown with the hash to admins and in exports,
        // so an export imports back and keeps signing in; set only with the password (`UserChanges.password`).
        UserField(passwordHashAlgorithm, value: { $0.passwordHashAlgorithm }, assign: { $0.passwordHashAlgorithm = $1 },
                  wire: { u, forClient in forClient || u.passwordHash == nil ? nil : u.passwordHashAlgorithm }, blockingValue: { _ in nil }),
        UserField("emailLinkSignin", event: "emailLinkSignin", access: .importing,
                  value: { $0.emailLinkSignin ? .bool(true) : nil }, assign: { $0.emailLinkSignin = $1?.boolValue ?? false },
                  blockingValue: { _ in nil }, fromImport: { v, _, _ in .success(v.boolValue.map { .set(.bool($0)) }) }),
        UserField("screenName", event: "screenName", access: .importing,
                  value: { $0.screenName.map(JSON.string) }, assign: { $0.screenName = $1?.stringValue }, blockingValue: { _ in nil },
                  fromImport: { v, _, _ in .success(text(v).map { .set(.string($0)) }) }),
        UserField("mfaInfo", event: "mfaInfo", access: .importing, blockingPath: "multi_factor.enrolled_factors",
                  value: { u in u.mfaInfo.isEmpty ? nil : .array(u.mfaInfo.map(\.journalJSON)) },
                  assign: { u, v in u.mfaInfo = (v?.arrayValue ?? []).compactMap(MFAEnrollment.init(journal:)) },
                  wire: { u, _ in u.mfaInfo.isEmpty ? nil : .array(u.mfaInfo.map(\.wireJSON)) },
                  blockingValue: { u in u.mfaInfo.isEmpty ? nil : .array(u.mfaInfo.map(\.blockingJSON)) },
                  fromImport: { v, item, input in
                      MultiFactor.importEnrollments(v, email: text(item["email"]), emailVerified: item["emailVerified"]?.boolValue ?? false, input: input)
                          .map { $0.map { list in .set(.array(list.map(\.journalJSON))) } }
                  },
                  admit: { c, u, _ throws(AuthError) in
                      guard case .set(.array(let items)) = c else { return c }
                      return .set(.array(try MultiFactor.resolveKeptTOTP(items, current: u.mfaInfo)))
                  }),
        // Set by the domain when the email first changes (Emulator.noteEmailChange), never by a request; imports keep it.
        UserField("initialEmail", event: "initialEmail", access: .importing,
                  value: { $0.initialEmail.map(JSON.string) }, assign: { $0.initialEmail = $1?.stringValue }, blockingValue: { _ in nil },
                  fromImport: { v, _, _ in
                      guard let s = text(v) else { return .success(nil) }
                      return Identifiers.isValidEmail(s) ? .success(.set(.string(s.lowercased()))) : .failure(UserFieldError("initialEmail is invalid"))
                  }),
    ] }

    // MARK: row makers

    /// A free-text field anyone may set (`deleteAttribute` clears it), bounded in UTF-16 units.
    static func text(_ name: String, deleteAttribute: String, claim: String, blocking: String, limit: Int, code: AuthError.Code,
                     _ path: WritableKeyPath<UserRecord, String?> & Sendable) -> UserField {
        UserField(name, event: name, access: .everyone, deleteAttribute: deleteAttribute, claim: claim, blockingPath: blocking,
                  value: { $0[keyPath: path].map(JSON.string) }, assign: { $0[keyPath: path] = $1?.stringValue },
                  fromImport: { v, _, _ in .success(text(v).map { .set(.string($0)) }) },
                  admit: { c, _, _ throws(AuthError) in
                      if case .set(let v) = c, let s = v.stringValue {
                          let n = s.utf16.count
                          guard n <= limit else { throw AuthError(code, "\(name) must be at most \(limit) characters (got \(n)).") }
                      }
                      return c
                  })
    }

    /// An admin-set time (milliseconds, or seconds for `validSince`): a number or a decimal string, in range.
    static func time(_ name: String, _ range: TimeField, event: String?, blocking: String,
                     _ path: WritableKeyPath<UserRecord, Int64?> & Sendable, blockingScale: Int64) -> UserField {
        UserField(name, event: event, access: .adminAndImport, clientRefusal: range == .validSince ? nil : .operationNotAllowed, requestKind: .int64,
                  blockingPath: blocking,
                  value: { $0[keyPath: path].map(JSON.exactInt) }, assign: { $0[keyPath: path] = $1?.exactInt64 },
                  wire: { u, _ in u[keyPath: path].map { .string(String($0)) } },
                  blockingValue: { u in u[keyPath: path].map { .int($0 / blockingScale) } },
                  fromRequest: { v throws(AuthError) in .set(.exactInt(try range.check(v.exactInt64 ?? -1))) },
                  fromImport: { v, _, _ in importTime(v, range) })
    }

    /// A string, or a number written as one (imports coerce them, as firebase-tools does).
    public static func text(_ v: JSON?) -> String? {
        switch v {
        case .string(let s)?: return s
        case .number?: return v?.int64Value.map { String($0) }
        default: return nil
        }
    }

    /// An integer given as a number or a decimal string.
    public static func integer(_ v: JSON?) -> Int64? {
        switch v {
        case .number?: return v?.int64Value
        case .string(let s)?: return Int64(s)
        default: return nil
        }
    }

    static func importTime(_ v: JSON, _ range: TimeField) -> Result<FieldChange<JSON>?, UserFieldError> {
        if v == .null || v == "" { return .success(nil) }
        guard let t = integer(v), range.isValid(t) else { return .failure(UserFieldError(range.rangeText)) }
        return .success(.set(.exactInt(t)))
    }
}

/// Client-supplied account times: epoch milliseconds (`createdAt`, `lastLoginAt`) or seconds (`validSince`) from the
/// epoch to 9999-12-31T23:59:59.999Z, the range a protobuf Timestamp (and RFC 3339) can express. Anything else is
/// refused before it is stored, so every stored time formats, sorts and survives a data-dir restart.
public enum TimeField: String, Sendable {
    case createdAt, lastLoginAt, validSince

    var maximum: Int64 { self == .validSince ? Timestamp.maxSeconds : Timestamp.maxMillis }

    public func isValid(_ v: Int64) -> Bool { v >= 0 && v <= maximum }

    /// What an import's per-user error and the 400 say.
    public var rangeText: String {
        self == .validSince
            ? "\(rawValue) must be seconds since the epoch from 0 to \(maximum) (9999-12-31T23:59:59Z)"
            : "\(rawValue) must be milliseconds since the epoch from 0 to \(maximum) (9999-12-31T23:59:59.999Z)"
    }

    public func check(_ v: Int64) throws(AuthError) -> Int64 {
        guard isValid(v) else { throw AuthError.invalidArgument(rangeText + ".") }
        return v
    }
}

// MARK: the mappings

extension UserFieldTable {
    /// The record as `accounts:lookup`, `batchGet`, `query` and exports render it. `forClient`: a user's own lookup
    /// (production shows a placeholder instead of the password hash, and no salt).
    public func render(_ u: UserRecord, forClient: Bool = false) -> JSON {
        var o = JSONObject()
        o["localId"] = .string(u.localId)
        for f in fields { if let v = f.wire(u, forClient) { o[f.name] = v } }
        return .object(o)
    }

    /// The journal's document of a record.
    public func journalObject(_ u: UserRecord) -> JSONObject {
        var o = JSONObject()
        o["localId"] = .string(u.localId)
        for f in fields { if let v = f.value(u) { o[f.journalKey] = v } }
        return o
    }

    /// A record from its journal document; nil without `localId` and `createdAt`.
    public func record(fromJournal o: JSONObject) -> UserRecord? {
        guard let id = o["localId"]?.stringValue, let created = o["createdAt"]?.exactInt64 else { return nil }
        var u = UserRecord(localId: id, createdAt: created)
        for f in fields { if let v = o[f.journalKey], v != .null { f.assign(&u, v) } }
        return u
    }

    /// The names `user.updated` reports for what changed from `old` to `new`, in the table's order.
    public func changedFields(from old: UserRecord, to new: UserRecord) -> [String] {
        fields.compactMap { f in f.event.flatMap { f.value(old) != f.value(new) ? $0 : nil } }
    }

    /// A blocking function's `user_record` (snake_case, firebase-functions' `DecodedPayloadUserRecord`).
    public func blockingRecord(_ u: UserRecord, tenantId: String?) -> JSONObject {
        var r = JSONObject()
        r["uid"] = .string(u.localId)
        for f in fields {
            guard let path = f.blockingPath else { continue }
            var value = f.blockingValue(u)
            if f.name == "tenantId" { value = (tenantId ?? u.tenantId).map(JSON.string) }
            guard let value else { continue }
            let parts = path.split(separator: ".").map(String.init)
            if parts.count == 1 { r[path] = value; continue }
            var inner = r[parts[0]]?.objectValue ?? JSONObject()
            inner[parts[1]] = value
            r[parts[0]] = .object(inner)
        }
        return r
    }

    /// An imported record's changes (`batchCreate`, firebase-tools `accounts.json`): every field imports may set that
    /// is present, checked; the first problem is the user's message.
    public func importChanges(_ item: JSONObject, input: UserFieldInput) -> Result<UserChanges, UserFieldError> {
        var c = UserChanges()
        // The record's own keys (a handful), found by name, then taken in the table's order: a record costs what it
        // holds, not the whole table (an import of a million users runs this a million times). A key given twice
        // counts once, with its first value (as `item[name]` reads it).
        var present: [(index: Int, value: JSON)] = []
        present.reserveCapacity(item.count)
        for (k, v) in item {
            guard let i = byName[k], fields[i].access.contains(.importing), !present.contains(where: { $0.index == i }) else { continue }
            present.append((i, v))
        }
        present.sort { $0.index < $1.index }
        c.reserve(present.count)
        for (i, v) in present {
            let f = fields[i]
            switch f.fromImport(v, item, input) {
            case .success(let change?): c.appendNew(field: f.name, change)
            case .success(nil): break
            case .failure(let e): return .failure(e)
            }
        }
        return .success(c)
    }

    /// Applies `changes` onto `user` (a record of `store`): each field's checks first, in the table's order, then the
    /// values; the password last (it may move `validSince`).
    public func apply(_ changes: UserChanges, to user: inout UserRecord, in store: AuthStore, now: Int64) throws(AuthError) {
        var s = store
        try apply(changes, to: &user, inPlace: &s, now: now)
    }

    /// `apply`, reading the store where it is (`StoreTransaction.apply`): `inout` only so that it is passed by address
    /// — handing a store borrowed through a pointer to a function by value copied all of it (two dozen retains and
    /// releases, ~3 k instructions per imported user, callgrind). Nothing here writes it.
    func apply(_ changes: UserChanges, to user: inout UserRecord, inPlace store: inout AuthStore, now: Int64) throws(AuthError) {
        if let h = changes.password?.hash {
            let n = h.utf16.count
            guard n <= UserFieldLimits.passwordHash else {
                throw AuthError(.invalidPasswordHash, "passwordHash must be at most \(UserFieldLimits.passwordHash) characters (got \(n)).")
            }
        }
        // The changed fields only, in the table's order.
        var changed: [(index: Int, change: FieldChange<JSON>)] = []
        changed.reserveCapacity(changes.fields.count)
        for (name, c) in changes.fields where c != .unchanged { if let i = byName[name] { changed.append((i, c)) } }
        changed.sort { $0.index < $1.index }
        var admitted: [(UserField, FieldChange<JSON>)] = []
        admitted.reserveCapacity(changed.count)
        for (i, c) in changed {
            let f = fields[i]
            admitted.append((f, try f.admit(c, user, store)))
        }
        for (f, c) in admitted {
            switch c {
            case .unchanged: continue
            case .clear:
                f.assign(&user, nil)
                for other in f.alsoClears { self[other]?.assign(&user, nil) }
            case .set(let v): f.assign(&user, v)
            }
        }
        if let p = changes.password {
            if p.clear { user.setPassword(hash: nil, salt: nil, algorithm: nil) }
            if let h = p.hash {
                user.setPassword(hash: h, salt: p.salt, algorithm: p.algorithm)
                user.passwordUpdatedAt = p.updatedAt ?? now
                if p.revokesTokens { user.validSince = now / 1000 }
            }
        }
    }
}

/// The providers a record has on the wire (`providerUserInfo`) and for blocking functions (`provider_data`): `phone`
/// while it has a number, `password` while it has an email and a password or signs in by email link (production and
/// the official emulator: an admin-created or imported user with an email and nothing else has none), then the
/// federated identities linked to it, in link order (Providers.swift).
enum ProviderInfo {
    static func wire(_ u: UserRecord) -> [JSON] {
        var providers: [JSON] = []
        if let p = u.phoneNumber { providers.append(["providerId": "phone", "rawId": .string(p), "phoneNumber": .string(p)]) }
        if let e = u.email, u.passwordHash != nil || u.emailLinkSignin {
            var pe: JSONObject = ["providerId": "password", "rawId": .string(e), "email": .string(e), "federatedId": .string(e)]
            pe.set("displayName", u.displayName.map(JSON.string))
            pe.set("photoUrl", u.photoUrl.map(JSON.string))
            providers.append(.object(pe))
        }
        for p in u.providerUserInfo { providers.append(p.json) }
        return providers
    }

    static func blocking(_ u: UserRecord) -> [JSON] {
        var providers: [JSON] = []
        if let p = u.phoneNumber { providers.append(["provider_id": "phone", "uid": .string(p), "phone_number": .string(p)]) }
        if let e = u.email, u.passwordHash != nil || u.emailLinkSignin {
            var o: JSONObject = ["provider_id": "password", "uid": .string(e), "email": .string(e)]
            o.set("display_name", u.displayName.map(JSON.string))
            o.set("photo_url", u.photoUrl.map(JSON.string))
            providers.append(.object(o))
        }
        for p in u.providerUserInfo { providers.append(p.blockingJSON) }
        return providers
    }

    /// An import's `providerUserInfo` (admin `import_users(provider_data=…)`, firebase-tools exports): `phone` and
    /// `password` entries are skipped (derived), each other entry needs `providerId` and `rawId` (the official
    /// emulator's per-user messages); the list replaces the user's federated identities.
    static func importEntries(_ v: JSON) -> Result<FieldChange<JSON>?, UserFieldError> {
        guard v != .null else { return .success(nil) }
        guard case .array(let items) = v else { return .failure(UserFieldError("providerUserInfo must be an array")) }
        var out: [JSON] = []
        var seen = Set<String>()
        for item in items {
            guard case .object(let o) = item else { return .failure(UserFieldError("providerUserInfo entries must be objects")) }
            let providerId = o["providerId"]?.stringValue ?? ""
            if providerId == "password" || providerId == "phone" { continue }
            let rawId = UserFields.text(o["rawId"]) ?? ""
            guard !providerId.isEmpty, !rawId.isEmpty else {
                if o["federatedId"] != nil {
                    return .failure(UserFieldError("((Parsing federatedId is not implemented in Auth Emulator; please specify providerId AND rawId as a workaround.))"))
                }
                return .failure(UserFieldError("federatedId or (providerId & rawId) is required"))
            }
            guard ProviderUserInfo.isValidProviderId(providerId), rawId.utf8.count <= ProviderUserInfo.maxRawIdLength,
                  !Identifiers.containsControlCharacters(rawId) else {
                return .failure(UserFieldError("providerUserInfo has an invalid providerId or rawId"))
            }
            for k in ["displayName", "photoUrl", "email", "screenName"] {
                if let t = o[k]?.stringValue, t.utf16.count > UserFieldLimits.photoUrl { return .failure(UserFieldError("providerUserInfo \(k) is too long")) }
            }
            guard seen.insert(ProviderUserInfo.indexKey(providerId, rawId)).inserted else { continue }
            var entry = o
            entry["rawId"] = .string(rawId)
            if let p = ProviderUserInfo(json: .object(entry)) { out.append(p.json) }
        }
        guard out.count <= ProviderUserInfo.maxPerUser else { return .failure(UserFieldError("too many linked providers")) }
        return .success(out.isEmpty ? .clear : .set(.array(out)))
    }
}
