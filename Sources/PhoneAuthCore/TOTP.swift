import EmulatorSupport

// # TOTP as a second factor (RFC 6238, production's shapes)
//
// `mfaEnrollment:start {totpEnrollmentInfo: {}}` makes a 20-byte secret (production's size: 32 base32 characters)
// and a pending enrollment bound to the signed-in user (`AuthStore.totpEnrollments`, expiring like a pending MFA
// sign-in); `:finalize {totpVerificationInfo: {sessionInfo, verificationCode}}` checks a code of that secret and adds
// the factor (`MFAEnrollment.totp`). `mfaSignIn:finalize {mfaPendingCredential, mfaEnrollmentId, totpVerificationInfo:
// {verificationCode}}` checks a code of the enrollment and issues tokens with `sign_in_second_factor: "totp"`.
//
// Codes are HMAC-SHA1, 30-second steps, 6 digits, counted on the emulator clock (so `clock:advance` moves them). A code
// is accepted for the current step and `adjacentIntervals` steps either side (`mfa.providerConfigs[].
// totpProviderConfig.adjacentIntervals`, 0-10, 5 when unset). A step that verified once is never accepted again for that
// factor, nor any step before it (RFC 6238 §5.2; the pending enrollment's step carries over to the factor): replays
// are refused. The HMAC comes from the caller (PhoneAuthCore has no OpenSSL): the API passes OpenSSL's.

/// HMAC-SHA1 (key, message) → the 20-byte tag.
public typealias HMACSHA1 = @Sendable (_ key: [UInt8], _ message: [UInt8]) -> [UInt8]

/// An enrolled TOTP factor's state: the shared secret and the last step it verified (replays are refused).
public struct TOTPFactor: Sendable, Equatable {
    public var secret: [UInt8]
    /// The newest time step a code signed in with; steps up to it are spent. Enrollment leaves its own step usable once
    /// (it records the step before), so an app or suite that signs in right after enrolling may use the same code.
    public var lastUsedStep: Int64?

    public init(secret: [UInt8], lastUsedStep: Int64? = nil) {
        self.secret = secret
        self.lastUsedStep = lastUsedStep
    }
}

/// A TOTP enrollment between `mfaEnrollment:start` and `:finalize` (`AuthStore.totpEnrollments`, keyed by `sessionInfo`).
public struct PendingTOTPEnrollment: Sendable, Equatable {
    public let localId: String
    public let secret: [UInt8]
    /// Milliseconds: `finalizeEnrollmentTime`.
    public let expiresAt: Int64
    /// Wrong codes left (`phoneAuth.maxCodeAttempts`; nil: no limit).
    public var attemptsLeft: Int32?
}

public enum TOTP {
    public static let periodSeconds: Int64 = 30
    public static let digits = 6
    public static let secretBytes = 20
    /// Production's default number of adjacent intervals a code is also accepted for, and the allowed range.
    public static let defaultAdjacentIntervals = 5
    public static let adjacentIntervalsRange = 0...10
    /// Pending TOTP enrollments one store keeps (the oldest evicted first), and one user keeps.
    public static let maxPendingEnrollments = 1024
    public static let maxPendingEnrollmentsPerUser = 5

    /// The time step of `millis` (RFC 6238 `T`, T0 = 0).
    public static func step(atMillis millis: Int64) -> Int64 { (millis / 1000).quotientFloor(periodSeconds) }

    /// The RFC 4226 code of `secret` at time step `step`, `digits` long (zero padded).
    public static func code(secret: [UInt8], step: Int64, digits: Int = TOTP.digits, hmac: HMACSHA1) -> String {
        var counter = [UInt8](repeating: 0, count: 8)
        var s = UInt64(bitPattern: step)
        for i in (0..<8).reversed() {
            counter[i] = UInt8(s & 0xFF)
            s >>= 8
        }
        let h = hmac(secret, counter)
        guard h.count >= 20 else { return String(repeating: "0", count: digits) }
        let offset = Int(h[h.count - 1] & 0x0F)
        let binary = (UInt32(h[offset] & 0x7F) << 24) | (UInt32(h[offset + 1]) << 16) | (UInt32(h[offset + 2]) << 8) | UInt32(h[offset + 3])
        var modulus: UInt32 = 1
        for _ in 0..<digits { modulus *= 10 }
        let value = String(binary % modulus)
        return String(repeating: "0", count: max(0, digits - value.count)) + value
    }

    /// The step within `adjacent` steps of `now`'s, after `lastUsed`, whose code is `code` (nearest first); nil when
    /// none. `code` must be `digits` ASCII digits.
    public static func verify(_ code: String, secret: [UInt8], nowMillis: Int64, adjacent: Int, lastUsed: Int64?, hmac: HMACSHA1) -> Int64? {
        guard code.utf8.count == digits, code.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        let current = step(atMillis: nowMillis)
        var candidates: [Int64] = [current]
        for d in 0..<Int64(max(0, adjacent)) { candidates += [current - d - 1, current + d + 1] }
        var found: Int64? = nil
        for s in candidates where s >= 0 && (lastUsed.map { s > $0 } ?? true) {
            // Every candidate is computed and compared in constant time, so timing does not tell which step matched.
            if constantTimeEquals(self.code(secret: secret, step: s, hmac: hmac), code), found == nil { found = s }
        }
        return found
    }

    // MARK: base32 (RFC 4648 §6, upper case, no padding: what authenticator apps and the SDKs take)

    static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567".utf8)

    public static func base32(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count * 8 + 4) / 5)
        var buffer: UInt32 = 0, bits = 0
        for b in bytes {
            buffer = (buffer << 8) | UInt32(b)
            bits += 8
            while bits >= 5 {
                out.append(alphabet[Int((buffer >> UInt32(bits - 5)) & 31)])
                bits -= 5
            }
        }
        if bits > 0 { out.append(alphabet[Int((buffer << UInt32(5 - bits)) & 31)]) }
        return String(decoding: out, as: UTF8.self)
    }

    /// Decodes base32 (either case, `=` padding and spaces ignored); nil for any other character or more than 64 bytes.
    public static func base32Decode(_ s: String) -> [UInt8]? {
        guard s.utf8.count <= 128 else { return nil }
        var out: [UInt8] = []
        var buffer: UInt32 = 0, bits = 0
        for c in s.utf8 {
            if c == UInt8(ascii: "=") || c == UInt8(ascii: " ") { continue }
            let u = (c >= 0x61 && c <= 0x7A) ? c - 0x20 : c
            guard let v = alphabet.firstIndex(of: u) else { return nil }
            buffer = (buffer << 5) | UInt32(v)
            bits += 5
            if bits >= 8 {
                out.append(UInt8((buffer >> UInt32(bits - 8)) & 0xFF))
                bits -= 8
            }
        }
        return out.isEmpty ? nil : out
    }
}

extension Int64 {
    /// Division rounding toward negative infinity (a clock before 1970 still has steps).
    func quotientFloor(_ d: Int64) -> Int64 {
        let q = self / d
        return (self % d != 0 && (self < 0) != (d < 0)) ? q - 1 : q
    }
}

extension Emulator {
    static let totpDisabled = AuthError(.operationNotAllowed, "TOTP based MFA not enabled.")

    static func checkTOTPEnabled(_ s: AuthStore) throws(AuthError) {
        guard s.config.mfa.totpEnabled else { throw totpDisabled }
    }

    /// `OPERATION_NOT_ALLOWED : TOTP based MFA not enabled.` when the project or tenant has no enabled TOTP provider
    /// config (`PROJECT_DISABLED` first for a disabled tenant); reads only.
    public func checkTOTPEnabled(_ key: StoreKey) throws(AuthError) {
        try checkMFAProvider(key, Self.totpDisabled) { $0.totpEnabled }
    }

    /// What `mfaEnrollment:start` answers for TOTP (`totpSessionInfo`).
    public struct TOTPEnrollmentStart: Sendable {
        public let sessionInfo: String
        public let secret: [UInt8]
        /// Milliseconds: `finalizeEnrollmentTime`.
        public let finalizeBy: Int64
    }

    /// The checks enrollment start and finalize share: enabled, the user, an MFA-capable first factor, a verified email.
    private func checkTOTPEnrollable(_ tx: inout StoreTransaction, _ identity: TokenIdentity) throws(AuthError) -> UserRecord {
        try tx.checkTenantEnabled()
        try Self.checkTOTPEnabled(tx.store)
        guard let user = tx.store.users[identity.localId] else { throw AuthError(.userNotFound) }
        guard !MultiFactor.ineligibleProviders.contains(identity.signInProvider) else { throw Self.unsupportedFirstFactorForMFA }
        guard user.email != nil, user.emailVerified else {
            throw AuthError(.unverifiedEmail, "Need to verify email first before enrolling second factors.")
        }
        return user
    }

    /// `mfaEnrollment:start {totpEnrollmentInfo: {}}`: a fresh 20-byte secret and a pending enrollment for the signed-in
    /// user, good for `mfaPendingLifetimeMillis`. A user keeps at most `TOTP.maxPendingEnrollmentsPerUser` (older ones go).
    public func startTOTPEnrollment(_ key: StoreKey, identity: TokenIdentity) throws(AuthError) -> TOTPEnrollmentStart {
        let now = clock.nowMillis()
        return try transaction(key) { tx throws(AuthError) -> TOTPEnrollmentStart in
            let user = try checkTOTPEnrollable(&tx, identity)
            guard user.mfaInfo.count < MultiFactor.maxEnrollments else { throw AuthError(.secondFactorLimitExceeded) }
            let mine = tx.store.totpEnrollments.keys(now: now) { $0.localId == user.localId }
            for old in mine.prefix(max(0, mine.count - (TOTP.maxPendingEnrollmentsPerUser - 1))) { _ = tx.totpEnrollments.take(old, now: now) }
            let secret = random.bytes(TOTP.secretBytes)
            let sessionInfo = random.token(byteCount: 48)
            let max = tx.store.config.phoneAuth.maxCodeAttempts
            let expires = now + Self.mfaPendingLifetimeMillis
            tx.totpEnrollments.insert(sessionInfo, PendingTOTPEnrollment(localId: user.localId, secret: secret, expiresAt: expires,
                                                                        attemptsLeft: max > 0 ? Int32(clamping: max) : nil),
                                      expiresAt: expires, now: now)
            return TOTPEnrollmentStart(sessionInfo: sessionInfo, secret: secret, finalizeBy: expires)
        }
    }

    /// `mfaEnrollment:finalize {totpVerificationInfo: {sessionInfo, verificationCode}}`: a code of the pending secret
    /// adds the TOTP factor (its step is spent) and revokes the user's older sessions, as the SMS finalize. Unknown,
    /// expired, used or another user's session: `INVALID_SESSION_INFO`; a wrong code `INVALID_CODE` (an attempt used;
    /// out of attempts `TOO_MANY_ATTEMPTS_TRY_LATER` and the session is gone).
    public func finalizeTOTPEnrollment(_ key: StoreKey, identity: TokenIdentity, sessionInfo: String?, code: String?, displayName: String?,
                                       hmac: HMACSHA1) throws(AuthError) -> MFATokens {
        let now = clock.nowMillis()
        return try transaction(key) { tx throws(AuthError) -> MFATokens in
            _ = try checkTOTPEnrollable(&tx, identity)
            guard let sessionInfo, !sessionInfo.isEmpty else { throw AuthError(.missingSessionInfo) }
            guard let code, !code.isEmpty else { throw AuthError(.missingCode) }
            guard sessionInfo.utf8.count <= 512, let pending = tx.store.totpEnrollments.peek(sessionInfo, now: now),
                  pending.localId == identity.localId else { throw AuthError(.invalidSessionInfo) }
            if let left = pending.attemptsLeft, left <= 0 {
                _ = tx.totpEnrollments.take(sessionInfo, now: now)
                throw AuthError(.tooManyAttemptsTryLater)
            }
            guard let step = TOTP.verify(code, secret: pending.secret, nowMillis: now, adjacent: tx.store.config.mfa.totpAdjacentIntervals,
                                         lastUsed: nil, hmac: hmac) else {
                tx.totpEnrollments.update(sessionInfo, now: now) { p in p.attemptsLeft = p.attemptsLeft.map { $0 - 1 } }
                throw AuthError(.invalidCode)
            }
            guard let user = tx.store.users[identity.localId] else { throw AuthError(.userNotFound) }
            guard user.mfaInfo.count < MultiFactor.maxEnrollments else { throw AuthError(.secondFactorLimitExceeded) }
            _ = tx.totpEnrollments.take(sessionInfo, now: now)
            return addSecondFactor(&tx, user, identity: identity, now: now) { id in
                MFAEnrollment(mfaEnrollmentId: id, totp: TOTPFactor(secret: pending.secret, lastUsedStep: step - 1), displayName: displayName, enrolledAt: now)
            }
        }
    }

    /// The code a TOTP factor (or a pending TOTP enrollment) accepts now, for tests (the emulator API and CLI).
    public struct CurrentTOTPCode: Sendable, Equatable {
        public let code: String
        public let step: Int64
        /// Milliseconds: the step's bounds on the emulator clock.
        public let validFrom: Int64
        public let validUntil: Int64
        /// The step has already verified once for this factor: the code is refused until the next step.
        public let used: Bool
    }

    static func currentCode(_ secret: [UInt8], lastUsed: Int64?, now: Int64, hmac: HMACSHA1) -> CurrentTOTPCode {
        let step = TOTP.step(atMillis: now)
        let from = step * TOTP.periodSeconds * 1000
        return CurrentTOTPCode(code: TOTP.code(secret: secret, step: step, hmac: hmac), step: step, validFrom: from,
                               validUntil: from + TOTP.periodSeconds * 1000, used: lastUsed.map { step <= $0 } ?? false)
    }

    /// The current code of `localId`'s TOTP factor `mfaEnrollmentId` (nil: its first TOTP factor). `USER_NOT_FOUND`,
    /// `MFA_ENROLLMENT_NOT_FOUND` when there is no such TOTP factor.
    public func currentTOTPCode(_ key: StoreKey, localId: String, mfaEnrollmentId: String?, hmac: HMACSHA1) throws(AuthError) -> (String, CurrentTOTPCode) {
        let now = clock.nowMillis()
        guard let user = existingStore(key)?.read({ $0.users[localId] }) else { throw AuthError(.userNotFound) }
        guard let e = user.mfaInfo.first(where: { $0.totp != nil && (mfaEnrollmentId == nil || $0.mfaEnrollmentId == mfaEnrollmentId) }),
              let totp = e.totp else { throw AuthError(.mfaEnrollmentNotFound) }
        return (e.mfaEnrollmentId, Self.currentCode(totp.secret, lastUsed: totp.lastUsedStep, now: now, hmac: hmac))
    }

    /// The current code of a pending TOTP enrollment (`sessionInfo` of `mfaEnrollment:start`); `INVALID_SESSION_INFO`
    /// when unknown or expired.
    public func currentTOTPCode(_ key: StoreKey, sessionInfo: String, hmac: HMACSHA1) throws(AuthError) -> (String, CurrentTOTPCode) {
        let now = clock.nowMillis()
        guard sessionInfo.utf8.count <= 512, let p = existingStore(key)?.read({ $0.totpEnrollments.peek(sessionInfo, now: now) }) else {
            throw AuthError(.invalidSessionInfo)
        }
        return (p.localId, Self.currentCode(p.secret, lastUsed: nil, now: now, hmac: hmac))
    }
}

extension SignInRequest {
    /// `mfaSignIn:finalize` with `mfaEnrollmentId` and `totpVerificationInfo.verificationCode`.
    public struct TOTPFinalize: Sendable {
        public var pendingCredential: String
        public var mfaEnrollmentId: String?
        public var code: String?
        public var hmac: HMACSHA1
        public var clientIP: String?

        public init(pendingCredential: String, mfaEnrollmentId: String?, code: String?, hmac: @escaping HMACSHA1, clientIP: String? = nil) {
            self.pendingCredential = pendingCredential
            self.mfaEnrollmentId = mfaEnrollmentId
            self.code = code
            self.hmac = hmac
            self.clientIP = clientIP
        }
    }
}

extension SignInRequest.TOTPFinalize: SignInMethod {
    /// Without blocking functions nothing is decided before the commit. With them (beforeSignIn after the second
    /// factor): whether the pending credential and the code are good right now, reading only (nothing is spent until
    /// the commit checks again). Nil when they are not: the commit answers the precise error and counts the attempt.
    func plan(_ e: Emulator, _ tx: inout StoreTransaction, now: Int64, hooked: Bool) throws(AuthError) -> SignInStep<SignInCandidate?> {
        guard hooked, let code, pendingCredential.utf8.count <= 512, let p = tx.store.mfaPending.peek(pendingCredential, now: now),
              let user = tx.store.users[p.localId], !user.disabled,
              let totp = user.mfaInfo.first(where: { $0.mfaEnrollmentId == mfaEnrollmentId })?.totp,
              TOTP.verify(code, secret: totp.secret, nowMillis: now, adjacent: tx.store.config.mfa.totpAdjacentIntervals,
                          lastUsed: totp.lastUsedStep, hmac: hmac) != nil
        else { return .proceed(nil) }
        return .proceed(SignInCandidate(user: user, isNew: false, method: BlockingSignInMethod(rawValue: p.signInProvider), secondFactor: "totp"))
    }

    func candidate(_ decision: SignInCandidate?) -> SignInCandidate? { decision }

    /// Checks the pending credential, the enrollment (`MFA_ENROLLMENT_NOT_FOUND` unless it is one of the user's TOTP
    /// factors) and the code within the adjacent intervals and after the factor's last spent step (`INVALID_CODE`). A
    /// wrong code counts against the pending sign-in: after `phoneAuth.maxCodeAttempts` of them (and, with the abuse
    /// limits on, `protection.failedCodesPerMfaSignIn`) it is revoked (`TOO_MANY_ATTEMPTS_TRY_LATER`). A good code
    /// spends its step, consumes the credential and issues tokens with `sign_in_second_factor: "totp"`.
    func commit(_ e: Emulator, _ tx: inout StoreTransaction, _ decision: consuming SignInCandidate?, changes: BlockingFunctions.Outcome?,
                now: Int64) throws(AuthError) -> SignInOutcome {
        try e.beginMFACommit(&tx, decision, changes, Emulator.checkTOTPEnabled)
        let (pending, _) = try Emulator.pending(&tx, pendingCredential, now: now)
        guard let mfaEnrollmentId, !mfaEnrollmentId.isEmpty else {
            throw AuthError(.missingMfaEnrollmentId, "No second factor identifier is provided.")
        }
        guard let code, !code.isEmpty else { throw AuthError(.missingCode) }
        guard var user = tx.store.users[pending.localId] else { throw AuthError(.invalidMfaPendingCredential) }
        guard let i = user.mfaInfo.firstIndex(where: { $0.mfaEnrollmentId == mfaEnrollmentId }), let totp = user.mfaInfo[i].totp else {
            throw AuthError(.mfaEnrollmentNotFound)
        }
        let maxWrong = Int32(clamping: tx.store.config.phoneAuth.maxCodeAttempts)
        let abuseLimit = e.activeProtection(tx).map { Int32(clamping: $0.failedCodesPerMfaSignIn) } ?? 0
        func exhausted(_ failed: Int32) -> Bool { (maxWrong > 0 && failed >= maxWrong) || (abuseLimit > 0 && failed >= abuseLimit) }
        if exhausted(pending.failedCodes) {
            _ = tx.mfaPending.take(pendingCredential, now: now)
            tx.emit(.limitHit(limit: .tooManyAttemptsTryLater, phoneNumber: nil, ip: clientIP))
            throw AuthError(.tooManyAttemptsTryLater)
        }
        guard let step = TOTP.verify(code, secret: totp.secret, nowMillis: now, adjacent: tx.store.config.mfa.totpAdjacentIntervals,
                                     lastUsed: totp.lastUsedStep, hmac: hmac) else {
            tx.mfaPending.update(pendingCredential, now: now) { $0.failedCodes &+= 1 }
            throw AuthError(.invalidCode)
        }
        if !user.disabled { user.mfaInfo[i].totp?.lastUsedStep = step }
        // The spent step is not a change `user.updated` reports.
        return try e.finishMFASignIn(&tx, user, found: user, pendingCredential: pendingCredential, pending, changes: changes,
                                     enrollment: user.mfaInfo[i], now: now)
    }
}
