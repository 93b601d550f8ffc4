import EmulatorSupport
import Synchronization

/// The app-verification credentials a `sendVerificationCode` request may carry.
public struct AppCredentials: Sendable, Equatable {
    public var recaptchaToken: String?
    /// Enterprise token; `"NO_RECAPTCHA"` means none.
    public var captchaResponse: String?
    public var iosReceipt: String?
    public var iosSecret: String?
    public var playIntegrityToken: String?
    public var safetyNetToken: String?
    /// reCAPTCHA Enterprise: `clientType` (`CLIENT_TYPE_WEB`, …) and `recaptchaVersion` (`RECAPTCHA_ENTERPRISE`).
    public var clientType: String?
    public var recaptchaVersion: String?
    /// What a beforeSendSms function answered about the reCAPTCHA verdict (set by the API after the call).
    public var recaptchaActionOverride: RecaptchaOverride?
    /// The request's language (`X-Firebase-Locale`), for the SMS text.
    public var locale: String?
    public init() {}
}

/// A credential this emulator minted (`POST /emulator/v1/projects/{p}/appCredentials`).
public enum MintedCredentialType: String, Sendable, CaseIterable {
    case recaptcha = "RECAPTCHA"
    case playIntegrity = "PLAY_INTEGRITY"
}

/// A silent push that iOS `verifyClient` would have sent.
public struct PushNotification: Sendable, Equatable {
    public let appToken: String
    public let receipt: String
    public let secret: String
    public let createdAt: Int64
}

/// Sliding-window event times for the opt-in send limits. The per-number and per-address windows are bounded tables
/// whose entries expire with their last send (a refused send stores nothing): however many numbers a client tries,
/// memory stays bounded.
public struct SendWindows: Sendable {
    /// Numbers (or addresses) whose windows a store keeps at most (the oldest evicted first).
    public static let capacity = 65_536
    public var perPhone = KeyedWindows()
    public var perIP = KeyedWindows()
    public var quota: [Int64] = []

    static func count(_ times: inout [Int64], now: Int64, windowMillis: Int64) -> Int {
        times.removeAll { $0 <= now - windowMillis }
        return times.count
    }

    /// Each key's send times within its window.
    public struct KeyedWindows: Sendable {
        var table = ExpiringTable<[Int64]>(capacity: SendWindows.capacity)

        /// Sends of `key` within the window ending now.
        func count(_ key: String, now: Int64, windowMillis: Int64) -> Int {
            (table.peek(key, now: now) ?? []).count { $0 > now - windowMillis }
        }

        /// Records a send of `key` now; the entry lives until the window after its last send ends.
        mutating func record(_ key: String, now: Int64, windowMillis: Int64) {
            var times = table.peek(key, now: now) ?? []
            times.removeAll { $0 <= now - windowMillis }
            times.append(now)
            table.insert(key, times, expiresAt: now + windowMillis, now: now)
        }
    }
}

/// Credential state kept per project (or tenant). Everything here is created without credentials, so it expires
/// (on the emulator clock) and is capped per store, the oldest evicted first.
public struct CredentialState: Sendable {
    /// Unconsumed minted credentials a store keeps.
    public static let maxMinted = 256
    /// Unused iOS receipts a store keeps.
    public static let maxReceipts = 256
    /// Recorded silent pushes a store keeps (`GET …/pushNotifications`).
    public static let maxPushes = 50

    /// token → type
    public var minted = ExpiringTable<MintedCredentialType>(capacity: maxMinted)
    /// Minted reCAPTCHA Enterprise test tokens → the assessment each stands for.
    public var enterprise = ExpiringTable<EnterpriseToken>(capacity: maxMinted)
    /// iOS receipt → secret
    public var receipts = ExpiringTable<String>(capacity: maxReceipts)
    /// receipt → the push that carried it
    public var pushes = ExpiringTable<PushNotification>(capacity: maxPushes)
}

extension Emulator {
    static let regionBlocked = AuthError(.operationNotAllowed, "SMS unable to be sent until this region enabled by the app developer")
    /// Minted tokens, iOS receipts and their pushes live this long (reCAPTCHA tokens expire after two minutes in
    /// production).
    public static let credentialLifetimeMillis: Int64 = 120_000
    /// The longest `appToken` `verifyClient` takes: APNs device tokens are hex, 64 characters today and at most 200
    /// (100 bytes) as Apple documents.
    public static let maxAppTokenLength = 200

    /// App verification, region policy and limits for a non-fictional number, in production's order, then the abuse
    /// limit on sends per address (Protection.swift). Runs inside the send's transaction; records the send in the
    /// windows when everything passes.
    func checkSendPolicy(_ tx: inout StoreTransaction, phone: PhoneNumber, clientIP: String?, credentials: AppCredentials,
                         skipAppVerification: Bool = false, now: Int64) throws(AuthError) {
        let settings = tx.store.config.phoneAuth
        if settings.appVerification == .enforce && !skipAppVerification {
            do throws(AuthError) { try Self.verifyApp(&tx.credentials, credentials, now: now) } catch {
                tx.emit(.appVerificationFailed(reason: error.code, phoneNumber: phone.e164))
                throw error
            }
        }
        guard tx.store.config.smsRegion.allows(region: phone.region) else { throw Self.regionBlocked }
        let perPhone = settings.perPhoneNumber, perIP = settings.perIp, quota = settings.smsQuota
        if perPhone.max > 0, tx.windows.perPhone.count(phone.e164, now: now, windowMillis: Int64(perPhone.perSeconds) * 1000) >= perPhone.max {
            tx.emit(.limitHit(limit: .tooManyAttemptsTryLater, phoneNumber: phone.e164, ip: nil))
            throw AuthError(.tooManyAttemptsTryLater)
        }
        if perIP.max > 0, let ip = clientIP,
           tx.windows.perIP.count(ip, now: now, windowMillis: Int64(perIP.perSeconds) * 1000) >= perIP.max {
            tx.emit(.limitHit(limit: .tooManyAttemptsTryLater, phoneNumber: phone.e164, ip: ip))
            throw AuthError(.tooManyAttemptsTryLater)
        }
        if quota.max > 0 {
            let n = SendWindows.count(&tx.windows.quota, now: now, windowMillis: Int64(quota.perSeconds) * 1000)
            if n >= quota.max {
                tx.emit(.limitHit(limit: .quotaExceeded, phoneNumber: phone.e164, ip: nil))
                throw AuthError(.quotaExceeded, "Exceeded quota.")
            }
        }
        try countSend(&tx, phone: phone.e164, clientIP: clientIP, now: now)
        if perPhone.max > 0 { tx.windows.perPhone.record(phone.e164, now: now, windowMillis: Int64(perPhone.perSeconds) * 1000) }
        if perIP.max > 0, let ip = clientIP { tx.windows.perIP.record(ip, now: now, windowMillis: Int64(perIP.perSeconds) * 1000) }
        if quota.max > 0 { tx.windows.quota.append(now) }
    }

    /// `ENFORCE`: one valid credential is required. Valid ones are single use.
    static func verifyApp(_ state: inout CredentialState, _ c: AppCredentials, now: Int64) throws(AuthError) {
        func take(_ token: String?, _ type: MintedCredentialType) -> Bool {
            guard let token, state.minted.peek(token, now: now) == type else { return false }
            return state.minted.take(token, now: now) != nil
        }
        let captcha = c.captchaResponse.flatMap { $0 == "NO_RECAPTCHA" || $0.isEmpty ? nil : $0 }
        let recaptcha = [c.recaptchaToken, captcha].compactMap { $0 }.filter { !$0.isEmpty }
        let play = [c.playIntegrityToken, c.safetyNetToken].compactMap { $0 }.filter { !$0.isEmpty }
        let hasIOS = !(c.iosReceipt ?? "").isEmpty || !(c.iosSecret ?? "").isEmpty
        if recaptcha.isEmpty && play.isEmpty && !hasIOS { throw AuthError(.missingAppCredential) }
        for t in recaptcha where take(t, .recaptcha) { return }
        for t in play where take(t, .playIntegrity) { return }
        if hasIOS, let r = c.iosReceipt, let secret = state.receipts.peek(r, now: now), let given = c.iosSecret,
            constantTimeEquals(given, secret)
        {
            _ = state.receipts.take(r, now: now)
            return
        }
        if !recaptcha.isEmpty && play.isEmpty && !hasIOS { throw AuthError(.captchaCheckFailed, "Recaptcha verification failed - MALFORMED") }
        throw AuthError(.invalidAppCredential)
    }

    /// Mints a reCAPTCHA or Play Integrity token that passes `ENFORCE` once.
    public func mintAppCredential(_ key: StoreKey, type: MintedCredentialType) -> (token: String, expiresAt: Int64) {
        let now = clock.nowMillis()
        let prefix = type == .recaptcha ? "emu-recaptcha-" : "emu-play-integrity-"
        let token = prefix + random.token(byteCount: 32)
        let exp = now + Self.credentialLifetimeMillis
        withLiveStore(key) { $0.credentials.minted.insert(token, type, expiresAt: exp, now: now) }
        return (token, exp)
    }

    /// iOS `verifyClient`: records the silent push `{appToken, receipt, secret}` and returns the receipt.
    /// The app token must look like an APNs device token: at most `maxAppTokenLength` printable ASCII characters
    /// (`INVALID_APP_CREDENTIAL` otherwise, which makes the iOS SDK fall back to reCAPTCHA as in production).
    public func verifyClient(_ key: StoreKey, appToken: String?) throws(AuthError) -> String {
        guard let appToken, !appToken.isEmpty else { throw AuthError(.missingIosAppToken) }
        guard appToken.utf8.count <= Self.maxAppTokenLength, appToken.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw AuthError(.invalidAppCredential)
        }
        let now = clock.nowMillis()
        let receipt = random.token(byteCount: 32)
        let secret = random.token(byteCount: 12)
        let exp = now + Self.credentialLifetimeMillis
        withLiveStore(key) { s in
            s.credentials.receipts.insert(receipt, secret, expiresAt: exp, now: now)
            s.credentials.pushes.insert(receipt, PushNotification(appToken: appToken, receipt: receipt, secret: secret, createdAt: now),
                                        expiresAt: exp, now: now)
        }
        return receipt
    }

    /// Recorded pushes whose receipts have not expired, oldest first (at most `CredentialState.maxPushes`). A store
    /// that does not exist has none (and is not created).
    public func pushNotifications(_ key: StoreKey) -> [PushNotification] {
        let now = clock.nowMillis()
        return existingStore(key)?.read { $0.credentials.pushes.values(now: now) } ?? []
    }
}
