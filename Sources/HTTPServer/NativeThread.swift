import CSystem
#if canImport(Glibc)
import Glibc
#endif

/// Nanoseconds on the monotonic clock (timeouts never follow the emulator's adjustable clock).
@inline(__always) func monotonicNanos() -> UInt64 { UInt64(csys_monotonic_ns()) }
