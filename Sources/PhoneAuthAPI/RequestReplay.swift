import EmulatorSupport
import HTTPServer
import PhoneAuthCore

/// Runs raw bytes the way the server would: the HTTP parser, then every parsed request through the whole app
/// (routing, credentials, JSON decoding of every endpoint's body, handlers) and response serialization, plus the JSON
/// parser on its own. The fuzz target's body, and how the Swift tests replay its corpus and regressions.
public final class RequestReplay: Sendable {
    public static let shared = RequestReplay()
    let app: PhoneAuthApp

    public init() {
        var config = ProjectConfig()
        config.testPhoneNumbers = ["+16505554567": "123456"]
        config.phoneAuth.maxCodeAttempts = 3
        let emulator = Emulator(defaultProjectId: "demo-phone", projectConfigs: ["demo-phone": config],
                                clock: EmulatorClock(fixedAtMillis: 1_800_000_000_000), random: SeededRandom(seed: 1),
                                logger: Logger(label: "replay", level: .critical))
        app = PhoneAuthApp(emulator: emulator, tokens: TokenService(mode: .none, initialKey: nil), signingPool: nil,
                           logger: Logger(label: "replay", level: .critical))
    }

    /// Returns the statuses answered (for tests).
    @discardableResult
    public func run(_ bytes: [UInt8]) -> [Int] {
        _ = try? JSONParser.parse(bytes)
        var parser = HTTPRequestParser()
        var start = 0
        var statuses: [Int] = []
        while start < bytes.count && statuses.count < 64 {
            switch parser.parse(bytes, from: start) {
            case .needMore:
                return statuses
            case .failure(let e):
                statuses.append(e.status)
                return statuses
            case .request(let req, let consumed):
                start += consumed
                if let r = app.respond(to: req, context: .detached) {
                    var out: [UInt8] = []
                    r.serialize(into: &out, keepAlive: req.keepAlive, versionMinor: req.versionMinor, headOnly: req.method == "HEAD")
                    statuses.append(r.status)
                } else {
                    statuses.append(0)
                }
            }
        }
        return statuses
    }
}
