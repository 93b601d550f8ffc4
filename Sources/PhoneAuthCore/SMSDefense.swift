import Dispatch
import EmulatorSupport
import Synchronization

// reCAPTCHA SMS defense (`recaptchaConfig`, production's RecaptchaConfig of the v2 Config and Tenant resources) and
// the carriers' failures (`phoneAuth.delivery`): what a send for a number that is not fictional passes through after
// app verification. Both are off by default, and "off" is one comparison on the send path.

/// `recaptchaConfig`: production's fields, plus two emulator fields (`tollFraudScores`, `includeFictionalNumbers`).
public struct RecaptchaSettings: Sendable, Equatable {
    public enum State: String, Sendable, CaseIterable { case off = "OFF", audit = "AUDIT", enforce = "ENFORCE" }
    /// A managed rule: a score bound and its action (production knows only `BLOCK`).
    public struct Rule: Sendable, Equatable {
        public var score: Double
        public var action: String
        public init(score: Double, action: String = "BLOCK") {
            self.score = score
            self.action = action
        }
    }
    public var phoneEnforcementState: State = .off
    public var emailPasswordEnforcementState: State = .off
    public var useSmsTollFraudProtection = false
    public var useSmsBotScore = false
    public var useAccountDefender = false
    /// `tollFraudManagedRules`: `{startScore, action}` — a toll-fraud risk score at or above `startScore` (0.0 the
    /// safest, 1.0 the riskiest) takes the action.
    public var tollFraudManagedRules: [Rule] = []
    /// `managedRules`: `{endScore, action}` — a bot score at or below `endScore` (0.0 likely a bot, 1.0 likely a
    /// human) takes the action.
    public var managedRules: [Rule] = []
    /// `recaptchaKeys`, stored and returned as given.
    public var recaptchaKeys: [JSON] = []
    /// Emulator: the toll-fraud risk score of a number or a prefix (`+1900` → 0.9), the longest matching key wins.
    public var tollFraudScores: [String: Double] = [:]
    /// Emulator: fictional numbers are assessed too (they are exempt by default, like every other send policy).
    public var includeFictionalNumbers = false
    public init() {}

    public static let maxRules = 20
    public static let maxScoreEntries = 1000

    public var phoneDefenseOn: Bool { phoneEnforcementState != .off }

    /// The toll-fraud score configured for `phone` (longest matching prefix), if any.
    public func configuredTollFraudScore(_ phone: String) -> Double? { PrefixMatch.longest(tollFraudScores, phone) }

    public var json: JSON {
        var o = JSONObject()
        o["phoneEnforcementState"] = .string(phoneEnforcementState.rawValue)
        o["emailPasswordEnforcementState"] = .string(emailPasswordEnforcementState.rawValue)
        o["useSmsTollFraudProtection"] = .bool(useSmsTollFraudProtection)
        o["useSmsBotScore"] = .bool(useSmsBotScore)
        o["useAccountDefender"] = .bool(useAccountDefender)
        o["tollFraudManagedRules"] = .array(tollFraudManagedRules.map { ["startScore": .number($0.score), "action": .string($0.action)] })
        o["managedRules"] = .array(managedRules.map { ["endScore": .number($0.score), "action": .string($0.action)] })
        if !recaptchaKeys.isEmpty { o["recaptchaKeys"] = .array(recaptchaKeys) }
        if !tollFraudScores.isEmpty {
            var s = JSONObject()
            for k in tollFraudScores.keys.sorted() { s[k] = .number(tollFraudScores[k]!) }
            o["tollFraudScores"] = .object(s)
        }
        if includeFictionalNumbers { o["includeFictionalNumbers"] = true }
        return .object(o)
    }

    /// Applies a `recaptchaConfig` object: fields present replace; unknown keys are refused.
    public mutating func apply(_ v: JSON, path: String) throws(ConfigError) {
        guard case .object(let o) = v else { throw ConfigError(path: path, message: "must be an object, not \(v.typeName)") }
        for (k, v2) in o {
            let p = path.isEmpty ? k : "\(path).\(k)"
            switch k {
            case "phoneEnforcementState": phoneEnforcementState = try Self.state(v2, p)
            case "emailPasswordEnforcementState": emailPasswordEnforcementState = try Self.state(v2, p)
            case "useSmsTollFraudProtection": useSmsTollFraudProtection = try Self.bool(v2, p)
            case "useSmsBotScore": useSmsBotScore = try Self.bool(v2, p)
            case "useAccountDefender": useAccountDefender = try Self.bool(v2, p)
            case "includeFictionalNumbers": includeFictionalNumbers = try Self.bool(v2, p)
            case "tollFraudManagedRules": tollFraudManagedRules = try Self.rules(v2, p, scoreKey: "startScore")
            case "managedRules": managedRules = try Self.rules(v2, p, scoreKey: "endScore")
            case "recaptchaKeys":
                guard case .array(let a) = v2, a.count <= Self.maxRules, a.allSatisfy({ $0.objectValue != nil }) else {
                    throw ConfigError(path: p, message: "must be an array of at most \(Self.maxRules) objects")
                }
                recaptchaKeys = a
            case "tollFraudScores":
                guard case .object(let m) = v2, m.count <= Self.maxScoreEntries else {
                    throw ConfigError(path: p, message: "must be an object of at most \(Self.maxScoreEntries) numbers or prefixes")
                }
                var out: [String: Double] = [:]
                for (prefix, sv) in m {
                    let pp = "\(p).\(prefix)"
                    guard PrefixMatch.isPrefix(prefix) else { throw ConfigError(path: pp, message: "must be + and 1 to 15 digits") }
                    out[prefix] = try Self.score(sv, pp, discrete: false)
                }
                tollFraudScores = out
            default: throw ConfigError(path: p, message: "unknown key")
            }
        }
        if !phoneDefenseOn && (useSmsBotScore || useSmsTollFraudProtection) {
            throw ConfigError(path: path, message: "useSmsBotScore and useSmsTollFraudProtection can only be true when phoneEnforcementState is AUDIT or ENFORCE")
        }
    }

    static func state(_ v: JSON, _ p: String) throws(ConfigError) -> State {
        guard let s = v.stringValue, let st = State(rawValue: s.uppercased()) else {
            throw ConfigError(path: p, message: "must be \"OFF\", \"AUDIT\" or \"ENFORCE\"")
        }
        return st
    }

    static func bool(_ v: JSON, _ p: String) throws(ConfigError) -> Bool {
        guard case .bool(let b) = v else { throw ConfigError(path: p, message: "must be true or false, not \(v.typeName)") }
        return b
    }

    /// A score from 0.0 to 1.0; `discrete`: at production's 11 values (0.0, 0.1, … 1.0).
    static func score(_ v: JSON, _ p: String, discrete: Bool) throws(ConfigError) -> Double {
        guard case .number(let d) = v, d.isFinite, d >= 0, d <= 1 else { throw ConfigError(path: p, message: "must be a number from 0.0 to 1.0") }
        if discrete, abs(d * 10 - (d * 10).rounded()) > 1e-9 {
            throw ConfigError(path: p, message: "must be one of 0.0, 0.1, … 1.0")
        }
        return d
    }

    static func rules(_ v: JSON, _ p: String, scoreKey: String) throws(ConfigError) -> [Rule] {
        guard case .array(let items) = v, items.count <= maxRules else {
            throw ConfigError(path: p, message: "must be an array of at most \(maxRules) rules")
        }
        var out: [Rule] = []
        for (i, item) in items.enumerated() {
            let ip = "\(p)[\(i)]"
            guard case .object(let o) = item else { throw ConfigError(path: ip, message: "must be an object {\(scoreKey), action}") }
            for k in o.keys where k != scoreKey && k != "action" { throw ConfigError(path: "\(ip).\(k)", message: "unknown key") }
            let score = try Self.score(o[scoreKey] ?? .number(0), "\(ip).\(scoreKey)", discrete: true)
            let action = o["action"]?.stringValue ?? "BLOCK"
            guard action == "BLOCK" else { throw ConfigError(path: "\(ip).action", message: "must be \"BLOCK\"") }
            out.append(Rule(score: score, action: action))
        }
        return out
    }
}

/// `+digits` keys matched as prefixes of E.164 numbers.
enum PrefixMatch {
    static func isPrefix(_ s: String) -> Bool {
        let u = Array(s.utf8)
        return u.count >= 2 && u.count <= 16 && u[0] == 0x2B && u.dropFirst().allSatisfy { $0 >= 0x30 && $0 <= 0x39 }
    }

    /// The value of the longest key that `phone` starts with (at most 15 lookups).
    static func longest<V>(_ table: [String: V], _ phone: String) -> V? {
        guard !table.isEmpty else { return nil }
        var s = Substring(phone)
        while s.utf8.count >= 2 {
            if let v = table[String(s)] { return v }
            s = s.dropLast()
        }
        return nil
    }
}

/// A minted reCAPTCHA Enterprise test token: the assessment it stands for.
public struct EnterpriseToken: Sendable, Equatable {
    /// The bot score (1.0 likely a human, 0.0 likely a bot).
    public var score: Double
    /// The action it was executed for (`sendVerificationCode`, `mfaSmsEnrollment`, `mfaSmsSignIn`); nil: any.
    public var action: String?
    /// Its toll-fraud risk score (used when the config gives none for the number); nil: 0.0.
    public var tollFraudScore: Double?
    public init(score: Double, action: String?, tollFraudScore: Double?) {
        self.score = score
        self.action = action
        self.tollFraudScore = tollFraudScore
    }
}

/// What a beforeSendSms function answered about the reCAPTCHA verdict.
public enum RecaptchaOverride: String, Sendable { case allow = "ALLOW", block = "BLOCK" }

/// One assessment: the verdict ENFORCE acts on, AUDIT records.
public struct RecaptchaAssessment: Sendable, Equatable {
    /// The error that refuses the send (nil: allowed).
    public var refusal: AuthError.Code?
    /// `PASSED`, the token error, `BOT_SCORE`, `TOLL_FRAUD_SCORE`, `OVERRIDE_ALLOW`, `OVERRIDE_BLOCK`.
    public var reason: String
    public var botScore: Double?
    public var tollFraudScore: Double?
}

extension Emulator {
    /// The reCAPTCHA action the SDKs execute for a send of `kind`.
    static func recaptchaAction(_ kind: VerificationSession.Kind) -> String {
        switch kind {
        case .signIn: "sendVerificationCode"
        case .mfaEnrollment: "mfaSmsEnrollment"
        case .mfaSignIn: "mfaSmsSignIn"
        }
    }

    static let clientTypes: Set<String> = ["CLIENT_TYPE_WEB", "CLIENT_TYPE_ANDROID", "CLIENT_TYPE_IOS"]

    /// Assesses a send as reCAPTCHA SMS defense does: the request's Enterprise fields, the token (single use, consumed
    /// here unless `peek`), then the bot and toll-fraud scores against the managed rules, then a beforeSendSms override.
    static func assessRecaptcha(_ rc: RecaptchaSettings, _ state: inout CredentialState, _ c: AppCredentials, phone: String,
                                kind: VerificationSession.Kind, now: Int64, peek: Bool = false) -> RecaptchaAssessment {
        func refuse(_ code: AuthError.Code) -> RecaptchaAssessment {
            RecaptchaAssessment(refusal: code, reason: code.rawValue, botScore: nil, tollFraudScore: nil)
        }
        let token = c.captchaResponse.flatMap { $0.isEmpty || $0 == "NO_RECAPTCHA" ? nil : $0 }
        if let v = c.recaptchaVersion, !v.isEmpty, v != "RECAPTCHA_ENTERPRISE" { return refuse(.invalidRecaptchaVersion) }
        guard let token else { return refuse(.missingRecaptchaToken) }
        guard let type = c.clientType, !type.isEmpty else { return refuse(.missingClientType) }
        guard clientTypes.contains(type) else { return refuse(.invalidReqType) }
        guard let v = c.recaptchaVersion, !v.isEmpty else { return refuse(.missingRecaptchaVersion) }
        guard let minted = state.enterprise.peek(token, now: now) else { return refuse(.invalidRecaptchaToken) }
        if !peek { _ = state.enterprise.take(token, now: now) }
        if let a = minted.action, a != recaptchaAction(kind) { return refuse(.invalidRecaptchaAction) }
        let toll = rc.configuredTollFraudScore(phone) ?? minted.tollFraudScore ?? 0
        var out = RecaptchaAssessment(refusal: nil, reason: "PASSED", botScore: minted.score, tollFraudScore: toll)
        if rc.useSmsBotScore, rc.managedRules.contains(where: { $0.action == "BLOCK" && minted.score <= $0.score + 1e-9 }) {
            out.refusal = .invalidAppCredential
            out.reason = "BOT_SCORE"
        } else if rc.useSmsTollFraudProtection, rc.tollFraudManagedRules.contains(where: { $0.action == "BLOCK" && toll >= $0.score - 1e-9 }) {
            out.refusal = .invalidAppCredential
            out.reason = "TOLL_FRAUD_SCORE"
        }
        return out
    }

    /// reCAPTCHA SMS defense for one send (inside its transaction): records the verdict as an event; ENFORCE refuses
    /// what it blocks, AUDIT only records it. True when the send passed with an Enterprise token.
    func checkRecaptcha(_ tx: inout StoreTransaction, phone: String, kind: VerificationSession.Kind, credentials: AppCredentials,
                        now: Int64) throws(AuthError) -> Bool {
        let rc = tx.store.config.recaptcha
        var a = Self.assessRecaptcha(rc, &tx.credentials, credentials, phone: phone, kind: kind, now: now)
        let tokenError = a.refusal != nil && a.reason != "BOT_SCORE" && a.reason != "TOLL_FRAUD_SCORE"
        if !tokenError, let o = credentials.recaptchaActionOverride {
            a.refusal = o == .block ? .invalidAppCredential : nil
            a.reason = o == .block ? "OVERRIDE_BLOCK" : "OVERRIDE_ALLOW"
        }
        let blocks = a.refusal != nil
        let enforced = rc.phoneEnforcementState == .enforce
        tx.emit(.recaptchaAssessed(phoneNumber: phone, action: Self.recaptchaAction(kind), state: rc.phoneEnforcementState.rawValue,
                                   verdict: blocks ? (enforced ? "BLOCKED" : "WOULD_BLOCK") : "ALLOWED", reason: a.reason,
                                   botScore: a.botScore, tollFraudScore: a.tollFraudScore))
        if enforced, let code = a.refusal {
            throw AuthError(code, code == .invalidAppCredential ? "reCAPTCHA SMS defense blocked the send (\(a.reason))." : nil)
        }
        return !blocks
    }

    /// The scores beforeSendSms is told (the token is only looked at, not consumed): nil when the defense does not
    /// apply to the send.
    public func recaptchaScores(_ key: StoreKey, phone: String, kind: VerificationSession.Kind, credentials: AppCredentials)
        -> (botScore: Double?, tollFraudScore: Double?)? {
        guard let store = existingStore(key) else { return nil }
        let now = clock.nowMillis()
        return store.read { s -> (Double?, Double?)? in
            let rc = s.config.recaptcha
            guard rc.phoneDefenseOn, rc.includeFictionalNumbers || s.config.testPhoneNumbers[phone] == nil else { return nil }
            var state = s.credentials
            let a = Self.assessRecaptcha(rc, &state, credentials, phone: phone, kind: kind, now: now, peek: true)
            return (a.botScore, a.tollFraudScore)
        }
    }

    /// Mints a reCAPTCHA Enterprise test token that stands for an assessment with these scores (single use, two minutes).
    public func mintEnterpriseToken(_ key: StoreKey, _ t: EnterpriseToken) -> (token: String, expiresAt: Int64) {
        let now = clock.nowMillis()
        let token = "emu-recaptcha-enterprise-" + random.token(byteCount: 32)
        let exp = now + Self.credentialLifetimeMillis
        withLiveStore(key) { $0.credentials.enterprise.insert(token, t, expiresAt: exp, now: now) }
        return (token, exp)
    }
}

// MARK: delivery

/// How the carrier treats SMS to a number or prefix (`phoneAuth.delivery`).
public enum SMSDeliveryRule: Sendable, Equatable {
    /// Arrives `seconds` after the send (on the emulator clock).
    case delay(seconds: Int)
    /// Never arrives, though the send answered 200.
    case lost
    /// The carrier refuses it: the send fails as production's does for such numbers (503 `Error code: 39`).
    case rejected

    public static let maxEntries = 1000
    public static let maxDelaySeconds = 86_400

    public var json: JSON {
        switch self {
        case .delay(let s): ["delaySeconds": .int(s)]
        case .lost: ["outcome": "LOST"]
        case .rejected: ["outcome": "REJECTED"]
        }
    }

    public static func parse(_ v: JSON, path: String) throws(ConfigError) -> [String: SMSDeliveryRule] {
        guard case .object(let o) = v, o.count <= maxEntries else {
            throw ConfigError(path: path, message: "must be an object of at most \(maxEntries) numbers or prefixes")
        }
        var out: [String: SMSDeliveryRule] = [:]
        for (prefix, rv) in o {
            let p = "\(path).\(prefix)"
            guard PrefixMatch.isPrefix(prefix) else { throw ConfigError(path: p, message: "must be + and 1 to 15 digits") }
            guard case .object(let r) = rv, r.count == 1, let (k, x) = r.entries.first.map({ ($0.key, $0.value) }) else {
                throw ConfigError(path: p, message: "must be {\"delaySeconds\": N} or {\"outcome\": \"LOST\" | \"REJECTED\"}")
            }
            switch k {
            case "delaySeconds":
                guard let n = x.int64Value, n > 0, n <= Int64(maxDelaySeconds) else {
                    throw ConfigError(path: "\(p).delaySeconds", message: "must be an integer from 1 to \(maxDelaySeconds)")
                }
                out[prefix] = .delay(seconds: Int(n))
            case "outcome":
                switch x.stringValue?.uppercased() {
                case "LOST": out[prefix] = .lost
                case "REJECTED": out[prefix] = .rejected
                default: throw ConfigError(path: "\(p).outcome", message: "must be \"LOST\" or \"REJECTED\"")
                }
            default: throw ConfigError(path: "\(p).\(k)", message: "unknown key")
            }
        }
        return out
    }
}

/// How one SMS travels, kept beside its session only when it is not the plain case (delivered at once, in English).
public struct SMSDelivery: Sendable, Equatable {
    /// The language of its text (`SMSText.language`); nil: English.
    public var language: String?
    /// When it arrives; nil: at the send.
    public var deliverAt: Int64?
    /// Never arrives.
    public var lost = false
    public init(language: String? = nil, deliverAt: Int64? = nil, lost: Bool = false) {
        self.language = language
        self.deliverAt = deliverAt
        self.lost = lost
    }
}

/// The SMS text per language. English is production's wording as the emulator has always shown it; the others are
/// the emulator's own translations (production's templates per language are not published).
public enum SMSText {
    static let templates: [String: (before: String, after: String)] = [
        "en": ("", " is your verification code."),
        "de": ("", " ist Ihr Bestätigungscode."),
        "es": ("", " es tu código de verificación."),
        "fr": ("", " est votre code de validation."),
        "it": ("", " è il tuo codice di verifica."),
        "ja": ("", " は確認コードです。"),
        "ko": ("인증 코드는 ", "입니다."),
        "nl": ("", " is je verificatiecode."),
        "pl": ("", " to Twój kod weryfikacyjny."),
        "pt": ("", " é seu código de verificação."),
        "ru": ("", " — ваш код подтверждения."),
        "tr": ("", " doğrulama kodunuzdur."),
        "zh": ("", " 是您的验证码。"),
    ]

    /// The languages with a template.
    public static var languages: [String] { templates.keys.sorted() }

    /// The template language for a locale (`X-Firebase-Locale` / `languageCode`: `pt-BR`, `fr_FR`, `de`): its primary
    /// subtag if there is a template for it; nil (English) otherwise.
    public static func language(forLocale locale: String?) -> String? {
        guard let locale, !locale.isEmpty, locale.utf8.count <= 35 else { return nil }
        let primary = locale.split(whereSeparator: { $0 == "-" || $0 == "_" }).first.map { $0.lowercased() } ?? ""
        guard primary != "en", templates[primary] != nil else { return nil }
        return primary
    }

    public static func text(code: String, language: String?) -> String {
        let t = language.flatMap { templates[$0] } ?? templates["en"]!
        return t.before + code + t.after
    }
}

/// Codes whose SMS arrives later (`phoneAuth.delivery` `delaySeconds`), across all stores, soonest first: what
/// `Emulator.deliverDueSMS` publishes (the `code.sent` event, the inbox long-polls) once the emulator clock reaches them.
/// Bounded: past `capacity` the soonest entry goes without its event (its code still shows in the inbox when due).
/// `isEmpty` is one atomic load, what a clock advance pays while no SMS is late.
/// One timer is armed at a time, for the soonest entry (a later one re-arms for the next), so however many late SMS
/// wait, they hold no more than a timer or two.
final class LateDeliveries: Sendable {
    static let capacity = 10_000
    private struct State {
        var entries: [(at: Int64, key: StoreKey, session: VerificationSession)] = []
        /// The due time the armed timer is for (nil: none armed), and its generation (a timer armed since replaces
        /// it: the older one then stops when it fires).
        var armedFor: Int64?
        var generation: UInt64 = 0
    }
    private let state = Locked(State())
    private let count = Atomic<Int>(0)

    var isEmpty: Bool { count.load(ordering: .relaxed) == 0 }

    /// Adds an entry; the generation of the timer to arm for `at` when one must be (none is armed for an earlier time).
    func add(_ at: Int64, _ key: StoreKey, _ session: VerificationSession) -> UInt64? {
        state.withLock { s in
            let i = s.entries.firstIndex { $0.at > at } ?? s.entries.endIndex
            s.entries.insert((at, key, session), at: i)
            if s.entries.count > Self.capacity { s.entries.removeFirst() }
            count.store(s.entries.count, ordering: .relaxed)
            guard s.armedFor.map({ at < $0 }) ?? true else { return nil }
            s.armedFor = at
            s.generation &+= 1
            return s.generation
        }
    }

    /// Takes the entries due by `now`.
    func takeDue(_ now: Int64) -> [(key: StoreKey, session: VerificationSession)] {
        state.withLock { s in
            let n = s.entries.firstIndex { $0.at > now } ?? s.entries.endIndex
            let due = s.entries[..<n].map { ($0.key, $0.session) }
            s.entries.removeFirst(n)
            count.store(s.entries.count, ordering: .relaxed)
            return due
        }
    }

    /// The timer of `generation` fired: the due time and generation of the next one (the soonest entry left), if any
    /// and if that timer is still the current one.
    func rearm(_ generation: UInt64) -> (at: Int64, generation: UInt64)? {
        state.withLock { s in
            guard s.generation == generation else { return nil }
            s.armedFor = s.entries.first?.at
            guard let at = s.armedFor else { return nil }
            s.generation &+= 1
            return (at, s.generation)
        }
    }
}

extension Emulator {
    /// Publishes the late SMS whose time has come: the `code.sent` event and the answers to the inbox long-polls, as a
    /// send that arrives at once has them at the send. A session consumed, cleared or expired meanwhile is skipped.
    /// Called by a timer at each late SMS's due time (system clock), after every clock advance, and by inbox reads.
    public func deliverDueSMS() {
        guard !lateSMS.isEmpty else { return }
        for (key, session) in lateSMS.takeDue(clock.nowMillis()) {
            guard existingStore(key) != nil else { continue }
            _ = try? transaction(key) { tx throws(AuthError) in
                guard let current = tx.store.sessions[session.id], current.sequence == session.sequence else { return }
                tx.emit(.codeSent(phoneNumber: current.phoneNumber, kind: current.kind, session: current.id, fictional: false, code: current.code))
                notifyWaiters(&tx, current)
            }
        }
    }

    /// The carrier's treatment of a send to a number that is not fictional (`phoneAuth.delivery`), and its language.
    /// Throws the carrier's refusal.
    func smsDelivery(_ tx: inout StoreTransaction, phone: String, credentials: AppCredentials, fictional: Bool, now: Int64) throws(AuthError) -> SMSDelivery? {
        let language = SMSText.language(forLocale: credentials.locale)
        var d = SMSDelivery(language: language)
        if !fictional, !tx.store.config.phoneAuth.delivery.isEmpty, let rule = PrefixMatch.longest(tx.store.config.phoneAuth.delivery, phone) {
            switch rule {
            case .rejected:
                tx.emit(.smsDelivery(phoneNumber: phone, outcome: "REJECTED", deliverAt: nil))
                throw AuthError(.smsNotDelivered)
            case .lost:
                d.lost = true
                tx.emit(.smsDelivery(phoneNumber: phone, outcome: "LOST", deliverAt: nil))
            case .delay(let seconds):
                let at = now + Int64(seconds) * 1000
                d.deliverAt = at
                tx.emit(.smsDelivery(phoneNumber: phone, outcome: "DELAYED", deliverAt: at))
            }
        }
        return d == SMSDelivery() ? nil : d
    }

    /// After the commit of a late SMS's session: remembered until due, with a timer for the system clock's time.
    func scheduleLate(_ key: StoreKey, _ session: VerificationSession, at: Int64) {
        if let generation = lateSMS.add(at, key, session) { armLateTimer(at, generation) }
    }

    private func armLateTimer(_ at: Int64, _ generation: UInt64) {
        let delayMillis = max(0, at - clock.nowMillis())
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(Int(min(delayMillis, Int64(Int32.max))) + 5)) { [self] in
            deliverDueSMS()
            if let next = lateSMS.rearm(generation) { armLateTimer(next.at, next.generation) }
        }
    }
}
