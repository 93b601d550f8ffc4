#if canImport(Glibc)
import Glibc
#endif

/// Wall-time helpers that need no Foundation.
public enum Timestamp {
    /// 0001-01-01T00:00:00.000Z and 9999-12-31T23:59:59.999Z in milliseconds: the range RFC 3339 (and protobuf's
    /// Timestamp) can express. Client-supplied times are validated against it; formatting clamps to it.
    public static let minMillis: Int64 = -62_135_596_800_000
    public static let maxMillis: Int64 = 253_402_300_799_999
    public static let maxSeconds: Int64 = maxMillis / 1000

    /// The real system time in milliseconds since the epoch.
    public static func systemMillis() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }

    /// `seconds` × 1000, or nil when that overflows or leaves the RFC 3339 range.
    public static func millis(fromSeconds seconds: Int64) -> Int64? {
        let (ms, overflow) = seconds.multipliedReportingOverflow(by: 1000)
        guard !overflow, ms >= minMillis, ms <= maxMillis else { return nil }
        return ms
    }

    /// `2026-11-30T10:02:05.123Z`, or nil for a time outside years 0001…9999.
    public static func rfc3339IfRepresentable(millis: Int64) -> String? {
        guard millis >= minMillis, millis <= maxMillis else { return nil }
        return rfc3339(millis: millis)
    }

    /// Production's `google.protobuf.Timestamp` JSON (`enrolledAt`, `lastRefreshAt`): `2024-01-02T03:04:05Z` when the
    /// milliseconds are zero, else `2024-01-02T03:04:05.123Z` (protobuf drops a zero fraction and otherwise writes 3, 6 or
    /// 9 digits; we keep milliseconds, so 3). Clamped to years 0001…9999 as `rfc3339(millis:)`.
    public static func protobufJSON(millis: Int64) -> String {
        let text = rfc3339(millis: millis)
        return text.hasSuffix(".000Z") ? String(text.dropLast(5)) + "Z" : text
    }

    /// `2026-11-30T10:02:05.123Z`. Never traps: times outside years 0001…9999 are clamped to that range.
    public static func rfc3339(millis raw: Int64) -> String {
        var out: [UInt8] = []
        appendRFC3339(millis: raw, into: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends `rfc3339(millis:)`'s 24 bytes to `out`: the civil date computed here (no `gmtime_r`, no strings), since
    /// every event a stream carries has a time.
    public static func appendRFC3339(millis raw: Int64, into out: inout [UInt8]) {
        let millis = min(max(raw, minMillis), maxMillis)
        let floorSeconds = millis / 1000 - (millis % 1000 < 0 ? 1 : 0)
        let ms = Int((millis % 1000 + 1000) % 1000)
        var days = floorSeconds / 86_400
        var secondOfDay = floorSeconds % 86_400
        if secondOfDay < 0 { secondOfDay += 86_400; days -= 1 }
        // Days since 1970-01-01 to a proleptic Gregorian date (H. Hinnant's civil_from_days).
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = Int(doy - (153 * mp + 2) / 5 + 1)
        let month = Int(mp < 10 ? mp + 3 : mp - 9)
        let year = Int(yoe + era * 400 + (month <= 2 ? 1 : 0))
        let hour = Int(secondOfDay / 3600), minute = Int(secondOfDay % 3600 / 60), second = Int(secondOfDay % 60)
        // Written into 24 bytes on the stack, then appended at once.
        var text: (UInt64, UInt64, UInt64) = (0, 0, 0)
        withUnsafeMutableBytes(of: &text) { b in
            func two(_ v: Int, at i: Int) {
                b[i] = UInt8(truncatingIfNeeded: 48 + v / 10)
                b[i + 1] = UInt8(truncatingIfNeeded: 48 + v % 10)
            }
            two(year / 100, at: 0); two(year % 100, at: 2); b[4] = UInt8(ascii: "-")
            two(month, at: 5); b[7] = UInt8(ascii: "-")
            two(day, at: 8); b[10] = UInt8(ascii: "T")
            two(hour, at: 11); b[13] = UInt8(ascii: ":")
            two(minute, at: 14); b[16] = UInt8(ascii: ":")
            two(second, at: 17); b[19] = UInt8(ascii: ".")
            b[20] = UInt8(truncatingIfNeeded: 48 + ms / 100); two(ms % 100, at: 21); b[23] = UInt8(ascii: "Z")
            out.append(contentsOf: UnsafeRawBufferPointer(b))
        }
    }
}
