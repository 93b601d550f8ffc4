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
        let millis = min(max(raw, minMillis), maxMillis)
        let floorSeconds = millis / 1000 - (millis % 1000 < 0 ? 1 : 0)
        var t = time_t(floorSeconds)
        let ms = Int((millis % 1000 + 1000) % 1000)
        var tmv = tm()
        gmtime_r(&t, &tmv)
        func pad(_ v: Int32, _ w: Int) -> String {
            let s = String(v)
            return s.count >= w ? s : String(repeating: "0", count: w - s.count) + s
        }
        let msText = String(ms)
        return "\(pad(tmv.tm_year + 1900, 4))-\(pad(tmv.tm_mon + 1, 2))-\(pad(tmv.tm_mday, 2))T\(pad(tmv.tm_hour, 2)):\(pad(tmv.tm_min, 2)):\(pad(tmv.tm_sec, 2)).\(String(repeating: "0", count: 3 - msText.count))\(msText)Z"
    }
}
