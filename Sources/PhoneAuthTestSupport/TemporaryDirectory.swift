import EmulatorSupport
#if canImport(Glibc)
import Glibc
#endif

/// A fresh directory under /tmp for one test, and its removal.
public enum TemporaryDirectory {
    /// Creates `/tmp/<prefix>-XXXXXX` (mode 0700) and returns its path.
    public static func make(_ prefix: String = "phone-auth-test") -> String {
        var template = Array("/tmp/\(prefix)-XXXXXX".utf8CString)
        return template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
    }

    /// Removes the directory and everything below it.
    public static func remove(_ path: String) {
        guard !path.isEmpty, !path.contains("'") else { return }
        _ = system("rm -rf '\(path)'")
    }
}
