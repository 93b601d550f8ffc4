import CSystem

/// The kernel's cryptographically secure random bytes: glibc's `arc4random_buf` (glibc 2.36 and later: ChaCha20 keyed
/// and re-keyed from `getrandom(2)`), else `getrandom(2)` itself (CSystem's `csys_random_bytes`; a failure aborts, it
/// never returns fewer or guessable bytes). The layers above never call C for randomness: `PhoneAuthCore`'s
/// `SystemRandom` draws from here.
public enum SystemEntropy {
    /// Fills `buffer` with random bytes (one library call; `getrandom` loops until every byte is filled).
    public static func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        csys_random_bytes(base, buffer.count)
    }
}
