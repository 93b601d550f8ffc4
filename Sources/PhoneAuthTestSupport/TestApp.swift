import EmulatorSupport
import HTTPServer
import JWT
import PhoneAuthAPI
import PhoneAuthCore

/// One RSA-2048 signing key for the whole test run (generating one takes 0.1–0.3 s).
public enum TestKeys {
    public static let signingKey: SigningKey = { try! SigningKey(key: RSAKey.generate(bits: 2048), createdAt: 1_800_000_000) }()
    /// The App Check key (a key of its own, as in production).
    public static let appCheckKey: SigningKey = { try! SigningKey(key: RSAKey.generate(bits: 2048), createdAt: 1_800_000_000) }()
}

/// The app for project "demo-phone" (fictional +16505554567 → 123456) on `clock`, signing inline (no pool) with
/// `TestKeys.signingKey` (rs256) or unsigned (none).
public func makeTestApp(clock: EmulatorClock = EmulatorClock(fixedAtMillis: testEpochMillis), seed: UInt64,
                        signing: TokenSigningMode = .rs256, logger: Logger = .quiet) -> PhoneAuthApp {
    let emulator = makeTestEmulator(projectId: "demo-phone", clock: clock, seed: seed, logger: logger)
    return PhoneAuthApp(emulator: emulator, tokens: TokenService(mode: signing, initialKey: signing == .rs256 ? TestKeys.signingKey : nil),
                        signingPool: nil, logger: logger,
                        attestation: AttestationKeys(appCheck: [TestKeys.appCheckKey], clock: clock))
}

/// Drives an app's responder with raw requests (no sockets). A test case adopts it by having an `app`.
public protocol AppCalling: AnyObject {
    var app: PhoneAuthApp! { get }
}

extension AppCalling {
    /// The status and the body as JSON (null when empty, a string when not JSON; (0, null) when there is no answer
    /// yet, e.g. a long poll).
    public func call(_ method: String, _ target: String, _ body: String? = nil, headers: [(String, String)] = []) -> (Int, JSON) {
        var h = HTTPHeaders()
        for (k, v) in headers { h.add(k, v) }
        let req = HTTPRequest(method: method, target: target, headers: h, body: Array((body ?? "").utf8))
        guard let resp = app.respond(to: req, context: .detached) else { return (0, .null) }
        let json = resp.body.isEmpty ? JSON.null : ((try? JSONParser.parse(resp.body)) ?? .string(String(decoding: resp.body, as: UTF8.self)))
        return (resp.status, json)
    }

    /// `POST /identitytoolkit.googleapis.com/v1/accounts:<op>?key=fake-api-key`.
    public func itk(_ op: String, _ body: String) -> (Int, JSON) {
        call("POST", "/identitytoolkit.googleapis.com/v1/accounts:\(op)?key=fake-api-key", body)
    }

    /// The events of a `…/events?format=jsonl&follow=false…` target, read to the end.
    public func eventLines(_ target: String) -> [JSON] {
        let resp = app.respond(to: HTTPRequest(method: "GET", target: target, headers: HTTPHeaders()), context: .detached)
        guard let source = resp?.stream?.source else { return [] }
        source.attach {}
        var out: [UInt8] = []
        while source.pull(into: &out, limit: 1 << 20) == .more {}
        return String(decoding: out, as: UTF8.self).split(separator: "\n").compactMap { try? JSONParser.parse(String($0)) }
    }

    /// The Google error message of an answer, if any.
    public func message(_ r: (Int, JSON)) -> String? { r.1["error"]?["message"]?.stringValue }
}
