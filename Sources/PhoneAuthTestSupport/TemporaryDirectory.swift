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

extension TemporaryDirectory {
    /// The names in a directory, sorted, without `.` and `..`.
    public static func listing(_ path: String) throws -> [String] {
        guard let d = opendir(path) else { throw Files.IOError(path: path, errnoCode: errno) }
        defer { closedir(d) }
        var names: [String] = []
        while let e = readdir(d) {
            let name = withUnsafeBytes(of: e.pointee.d_name) { String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self) }
            if name != "." && name != ".." { names.append(name) }
        }
        return names.sorted()
    }
}
