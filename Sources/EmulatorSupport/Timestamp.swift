#if canImport(Glibc)
import Glibc
#endif

/// Wall-time helpers that need no Foundation.
public enum Timestamp {
    /// The real system time in milliseconds since the epoch.
    public static func systemMillis() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }

    /// `2026-11-30T10:02:05.123Z`
    public static func rfc3339(millis: Int64) -> String {
        var t = time_t(millis >= 0 ? millis / 1000 : (millis - 999) / 1000)
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
