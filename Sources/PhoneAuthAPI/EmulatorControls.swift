import EmulatorSupport
import JWT
import PhoneAuthCore

/// Emulator-wide controls: the clock, key rotation, minted app credentials and recorded iOS pushes.
enum EmulatorControls {
    static func clockJSON(_ app: PhoneAuthApp) -> JSON {
        let now = app.emulator.clock.nowMillis()
        return [
            "now": .string(Timestamp.rfc3339(millis: now)),
            "nowMillis": .int(now),
            "offsetSeconds": .number(Double(app.emulator.clock.offsetMillis) / 1000),
        ]
    }

    static func clock(_ app: PhoneAuthApp, _ call: Call) throws -> Reply { Reply(clockJSON(app)) }

    /// `clock.changed` on every stream (the clock is server-wide).
    static func clockChanged(_ app: PhoneAuthApp) {
        app.emulator.events.broadcast(.clockChanged(offsetMillis: app.emulator.clock.offsetMillis, now: app.emulator.clock.nowMillis()))
    }

    /// `{"seconds": N}` (0 ≤ N ≤ ten years, fractions allowed): every expiry, token `iat`/`exp` and rate window moves
    /// with it. The total offset stays within a hundred years (`clock:reset` returns to the real time).
    static func advanceClock(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        let maxSeconds = EmulatorClock.maxAdvanceMillis / 1000
        guard let v = call.body["seconds"], case .number(let seconds) = v, seconds.isFinite, seconds >= 0, seconds <= Double(maxSeconds) else {
            throw AuthError.invalidArgument("seconds must be a number from 0 to \(maxSeconds).")
        }
        guard app.emulator.clock.advance(millis: Int64((seconds * 1000).rounded())) else {
            throw AuthError.invalidArgument(
                "The clock offset may not exceed \(EmulatorClock.maxOffsetMillis / 1000) seconds (100 years); POST /emulator/v1/clock:reset returns to the real time.")
        }
        clockChanged(app)
        app.emulator.deliverDueSMS()
        return Reply(clockJSON(app))
    }

    static func resetClock(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        app.emulator.clock.reset()
        clockChanged(app)
        return Reply(clockJSON(app))
    }

    /// Serializes rotations, so the data directory's newest key and the in-memory current key always agree.
    private static let rotation = Locked(0)

    /// A new signing key becomes current; the previous ones stay published so existing tokens still verify, up to
    /// `TokenService.maxPublishedKeys` in all. Older keys are retired: unpublished, pruned from the data directory and
    /// no longer accepted.
    static func rotateKeys(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        guard app.tokens.mode == .rs256 else {
            throw AuthError(.failedPrecondition, "Token signing is 'none': there is no key to rotate.")
        }
        let key = try SigningKey(key: RSAKey.generate(bits: 2048), createdAt: app.emulator.clock.nowSeconds())
        app.tokens.waitForKeys()  // a key generated at start goes in first, so it is never ordered after this one
        let retired = try rotation.withLock { _ in
            try app.saveSigningKey?(key)
            return app.tokens.rotate(to: key)
        }
        app.logger.info("signing key rotated", [("kid", key.kid), ("retired", String(retired.count))])
        app.emulator.events.broadcast(.keysRotated(kid: key.kid, retiredKids: retired.map(\.kid)))
        return Reply([
            "kid": .string(key.kid), "publishedKids": .array(app.tokens.publishedKeys.map { .string($0.kid) }),
            "retiredKids": .array(retired.map { .string($0.kid) }),
        ])
    }

    /// `{"type": "RECAPTCHA" | "PLAY_INTEGRITY"}` → a token that passes `ENFORCE` once, within two minutes.
    /// `{"type": "RECAPTCHA_ENTERPRISE", "score"?: 0.9, "action"?: "sendVerificationCode", "tollFraudScore"?: 0.1}` →
    /// a reCAPTCHA Enterprise test token standing for that assessment (`recaptchaConfig`), single use.
    static func mintCredential(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        let raw = try call.string("type") ?? ""
        if raw.uppercased() == "RECAPTCHA_ENTERPRISE" { return try mintEnterprise(app, call) }
        guard let type = MintedCredentialType(rawValue: raw.uppercased()) else {
            throw AuthError.invalidArgument("type must be \"RECAPTCHA\", \"RECAPTCHA_ENTERPRISE\" or \"PLAY_INTEGRITY\".")
        }
        let (token, exp) = app.emulator.mintAppCredential(EmulatorAPI.key(call), type: type)
        return Reply(["type": .string(type.rawValue), "token": .string(token), "expiresAt": .string(Timestamp.rfc3339(millis: exp))])
    }

    static func mintEnterprise(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        func score(_ name: String) throws -> Double? {
            guard let v = call.body[name], v != .null else { return nil }
            guard case .number(let d) = v, d.isFinite, d >= 0, d <= 1 else { throw AuthError.invalidArgument("\(name) must be a number from 0.0 to 1.0.") }
            return d
        }
        let action = try call.string("action")
        if let a = action, a.isEmpty || a.utf8.count > 100 || !a.utf8.allSatisfy({ ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x5F || $0 == 0x2F }) {
            throw AuthError.invalidArgument("action must be 1 to 100 letters, digits, '_' or '/'.")
        }
        let t = EnterpriseToken(score: try score("score") ?? 0.9, action: action, tollFraudScore: try score("tollFraudScore"))
        let (token, exp) = app.emulator.mintEnterpriseToken(EmulatorAPI.key(call), t)
        var o: JSONObject = ["type": "RECAPTCHA_ENTERPRISE", "token": .string(token), "score": .number(t.score)]
        o.set("action", t.action.map(JSON.string))
        o.set("tollFraudScore", t.tollFraudScore.map(JSON.number))
        o["expiresAt"] = .string(Timestamp.rfc3339(millis: exp))
        return Reply(.object(o))
    }

    static func pushNotifications(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        let pushes = app.emulator.pushNotifications(EmulatorAPI.key(call))
        return Reply(["pushNotifications": .array(pushes.map { p in
            ["appToken": .string(p.appToken), "receipt": .string(p.receipt), "secret": .string(p.secret),
             "createdAt": .string(Timestamp.rfc3339(millis: p.createdAt))]
        })])
    }
}
