import PhoneAuthCore
import PhoneAuthStorage
import PhoneAuthTestSupport

/// A restart of `dir` in a test: the data directory opened, a test emulator journaling into it, and the state it
/// holds restored (what `PhoneAuthServer.start` does with `--data-dir`).
func reopenDataDirectory(_ dir: String, seed: UInt64 = 7) throws -> (DataDirectory, Emulator) {
    let d = try DataDirectory(path: dir)
    let e = makeTestEmulator(seed: seed, journal: d)
    let snap = try d.loadSnapshot()
    e.restore(snap.stores, refreshTokens: snap.refreshTokens)
    return (d, e)
}
