import EmulatorSupport
import PhoneAuthCore

/// The fixed start of every test clock: 2027-01-15T08:00:00Z.
public let testEpochMillis: Int64 = 1_800_000_000_000

extension Logger {
    /// A logger that writes nothing (tests that do not look at logs).
    public static var quiet: Logger { Logger(label: "t", level: .critical) }
}

/// An emulator on an injected clock and seeded randomness with the fictional number +16505554567 → 123456 in
/// `projectId` (default "p"); `configure` changes that project's config.
public func makeTestEmulator(projectId: String = "p", clock: EmulatorClock = EmulatorClock(fixedAtMillis: testEpochMillis), seed: UInt64,
                             logger: Logger = .quiet, journal: (any StateJournal)? = nil, maxProjects: Int = Emulator.defaultMaxProjects,
                             configure: (inout ProjectConfig) -> Void = { _ in }) -> Emulator {
    var config = ProjectConfig()
    config.testPhoneNumbers = ["+16505554567": "123456"]
    configure(&config)
    return Emulator(defaultProjectId: projectId, projectConfigs: [projectId: config], clock: clock, random: SeededRandom(seed: seed),
                    logger: logger, journal: journal, maxProjects: maxProjects)
}

extension Emulator {
    /// Stores `user` as it is, in a transaction like any write (journaled and rolled back like one): for tests that
    /// set up a state no endpoint makes directly (a disabled user, a revocation time).
    public func testSave(_ user: UserRecord, in key: StoreKey) throws(AuthError) {
        _ = try transaction(key) { tx throws(AuthError) in tx.save(user) }
    }

    /// Changes the stored user `uid` of `key`'s store in one transaction (see `testSave`).
    public func testUpdateUser(_ uid: String, in key: StoreKey, _ change: (inout UserRecord) -> Void) throws(AuthError) {
        _ = try transaction(key) { tx throws(AuthError) in
            guard var user = tx.store.users[uid] else { throw AuthError(.userNotFound) }
            change(&user)
            tx.save(user)
        }
    }
}
