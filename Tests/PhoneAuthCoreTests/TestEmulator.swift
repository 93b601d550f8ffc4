import EmulatorSupport
@testable import PhoneAuthCore

/// An emulator for project "p" on a manual clock with the fictional number +16505554567 → 123456.
func makeTestEmulator(clock: EmulatorClock, seed: UInt64, configure: (inout ProjectConfig) -> Void = { _ in }) -> Emulator {
    var config = ProjectConfig()
    config.testPhoneNumbers = ["+16505554567": "123456"]
    configure(&config)
    return Emulator(defaultProjectId: "p", projectConfigs: ["p": config], clock: clock, random: SeededRandom(seed: seed),
                    logger: Logger(label: "t", level: .critical))
}
