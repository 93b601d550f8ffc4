import EmulatorSupport
import JWT
import PhoneAuthCore

/// The key sets of the attestations the emulator issues, apart from the ID-token keys: App Check (RS256, published at
/// `/firebaseappcheck.googleapis.com/v1/jwks`) and Firebase Phone Number Verification (ES256, at
/// `/fpnv.googleapis.com/v1beta/jwks`). Each set is created on first use (or loaded from `--data-dir`), stored
/// durably before it signs, and rotated by `POST /emulator/v1/keys:rotate {"keySet": …}`: the newest signs, up to
/// `TokenService.maxPublishedKeys` stay published, older ones are retired.
public final class AttestationKeys: Sendable {
    public enum Kind: String, Sendable, CaseIterable {
        case appCheck = "appCheck"
        case pnv = "phoneNumberVerification"
    }

    /// Stores a new key (kind, kid, private PEM) durably, keeping the newest `TokenService.maxPublishedKeys`.
    public typealias Store = @Sendable (Kind, String, String) throws -> Void

    private let appCheck: Locked<[SigningKey]>
    private let pnv: Locked<[ES256SigningKey]>
    private let store: Store?
    private let clock: EmulatorClock

    public init(appCheck: [SigningKey] = [], pnv: [ES256SigningKey] = [], clock: EmulatorClock, store: Store? = nil) {
        self.appCheck = Locked(Array(appCheck.prefix(TokenService.maxPublishedKeys)))
        self.pnv = Locked(Array(pnv.prefix(TokenService.maxPublishedKeys)))
        self.clock = clock
        self.store = store
    }

    /// Loads stored keys (newest first) of one kind.
    public static func loadAppCheck(_ pems: [String], clock: EmulatorClock) throws -> [SigningKey] {
        try pems.map { try SigningKey(key: try RSAKey.privateKey(pem: Array($0.utf8)), createdAt: clock.nowSeconds()) }
    }

    public static func loadPNV(_ pems: [String]) throws -> [ES256SigningKey] {
        try pems.map { try ES256SigningKey(key: try ECKey.privateKey(pem: Array($0.utf8))) }
    }

    private func newAppCheckKey() throws -> SigningKey {
        let key = try SigningKey(key: RSAKey.generate(bits: 2048), createdAt: clock.nowSeconds())
        try store?(.appCheck, key.kid, try key.key.privateKeyPEM())
        return key
    }

    private func newPNVKey() throws -> ES256SigningKey {
        let key = try ES256SigningKey(key: ECKey.generate())
        try store?(.pnv, key.kid, try key.key.privateKeyPEM())
        return key
    }

    /// The App Check key that signs now (made on first use: 100–300 ms once, under the set's lock).
    public func currentAppCheck() throws -> SigningKey { try Self.current(appCheck, newAppCheckKey) }
    public func currentPNV() throws -> ES256SigningKey { try Self.current(pnv, newPNVKey) }

    private static func current<K>(_ set: Locked<[K]>, _ make: () throws -> K) throws -> K {
        try set.withLock { keys in
            if let k = keys.first { return k }
            let k = try make()
            keys = [k]
            return k
        }
    }

    /// A published App Check key by `kid` (what a verifier would find in the JWKS).
    public func appCheckKey(kid: String) -> SigningKey? { appCheck.withLock { $0.first { $0.kid == kid } } }

    /// `{"keys": [JWK…]}`, newest first; makes the first key if there is none.
    public func jwks(_ kind: Kind) throws -> JSON {
        switch kind {
        case .appCheck:
            _ = try currentAppCheck()
            return ["keys": .array(appCheck.withLock { $0.map { .object($0.jwk) } })]
        case .pnv:
            _ = try currentPNV()
            return ["keys": .array(pnv.withLock { $0.map { .object($0.jwk) } })]
        }
    }

    /// A new key signs from now on; returns its kid, the published kids and the retired ones.
    public func rotate(_ kind: Kind) throws -> (kid: String, published: [String], retired: [String]) {
        switch kind {
        case .appCheck: try Self.rotate(appCheck, newAppCheckKey, \.kid)
        case .pnv: try Self.rotate(pnv, newPNVKey, \.kid)
        }
    }

    private static func rotate<K>(_ set: Locked<[K]>, _ make: () throws -> K, _ kid: (K) -> String) throws
        -> (kid: String, published: [String], retired: [String])
    {
        let keep = TokenService.maxPublishedKeys
        return try set.withLock { keys in
            let k = try make()
            keys.insert(k, at: 0)
            let retired = keys.count > keep ? keys[keep...].map(kid) : []
            keys = Array(keys.prefix(keep))
            return (kid(k), keys.map(kid), retired)
        }
    }
}
