#if canImport(Glibc)
import Glibc
#endif

/// Minimal POSIX file helpers (no Foundation needed).
public enum Files {
    public struct IOError: Error, CustomStringConvertible, Sendable {
        public let path: String
        public let errnoCode: Int32
        public init(path: String, errnoCode: Int32) {
            self.path = path
            self.errnoCode = errnoCode
        }
        public var description: String { "\(path): \(String(cString: strerror(errnoCode)))" }
    }

    public static func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }

    public static func read(_ path: String, limit: Int = 64 << 20) throws(IOError) -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw IOError(path: path, errnoCode: errno) }
        defer { close(fd) }
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw IOError(path: path, errnoCode: errno)
            }
            if n == 0 { break }
            out.append(contentsOf: chunk[0..<n])
            if out.count > limit { throw IOError(path: path, errnoCode: EFBIG) }
        }
        return out
    }

    /// Writes atomically: a temporary file in the same directory, fsync, rename.
    public static func writeAtomically(_ path: String, _ bytes: [UInt8], mode: mode_t = 0o644) throws(IOError) {
        let tmp = path + ".tmp-\(getpid())"
        let fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode)
        guard fd >= 0 else { throw IOError(path: tmp, errnoCode: errno) }
        if let e = writeAllAndSync(fd, bytes) { close(fd); unlink(tmp); throw IOError(path: tmp, errnoCode: e) }
        close(fd)
        if rename(tmp, path) != 0 { let e = errno; unlink(tmp); throw IOError(path: path, errnoCode: e) }
    }

    /// Writes every byte (retrying EINTR and short writes) and fsyncs; the errno of a failure, or nil.
    private static func writeAllAndSync(_ fd: Int32, _ bytes: [UInt8]) -> Int32? {
        var off = 0
        while off < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + off, $0.count - off) }
            if n < 0 {
                if errno == EINTR { continue }
                return errno
            }
            off += n
        }
        return fsync(fd) == 0 ? nil : errno
    }

    /// Creates `path` with `mode` (failing if it exists), writes `bytes` and fsyncs: for secrets such as keys.
    public static func createExclusively(_ path: String, _ bytes: [UInt8], mode: mode_t) throws(IOError) {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
        guard fd >= 0 else { throw IOError(path: path, errnoCode: errno) }
        defer { close(fd) }
        if let e = writeAllAndSync(fd, bytes) { unlink(path); throw IOError(path: path, errnoCode: e) }
    }

    public static func environment(_ name: String) -> String? {
        guard let v = getenv(name) else { return nil }
        return String(cString: v)
    }
}
