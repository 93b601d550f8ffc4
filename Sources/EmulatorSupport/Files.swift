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
        /// The path with control characters escaped (it may come from a client), then the system's reason.
        public var description: String { "\(Files.printable(path)): \(String(cString: strerror(errnoCode)))" }
    }

    /// A path Swift would silently cut at its first NUL when handing it to the C library: refused everywhere here.
    public static func hasNUL(_ path: String) -> Bool { path.utf8.contains(0) }

    public static func exists(_ path: String) -> Bool { !hasNUL(path) && access(path, F_OK) == 0 }

    public static func read(_ path: String, limit: Int = 64 << 20) throws(IOError) -> [UInt8] {
        guard !hasNUL(path) else { throw IOError(path: path, errnoCode: EINVAL) }
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

    /// Writes atomically: a temporary file in the same directory, fsync, rename (see `writeAtomically(in:)`).
    public static func writeAtomically(_ path: String, _ bytes: [UInt8], mode: mode_t = 0o644) throws(IOError) {
        guard !hasNUL(path) else { throw IOError(path: path, errnoCode: EINVAL) }
        let slash = path.utf8.lastIndex(of: UInt8(ascii: "/"))
        let dirPath = slash.map { $0 == path.utf8.startIndex ? "/" : String(path[..<$0]) } ?? "."
        let name = slash.map { String(path[path.utf8.index(after: $0)...]) } ?? path
        let dir = try openDirectory(dirPath)
        defer { close(dir) }
        try writeAtomically(in: dir, name: name, bytes, mode: mode)
    }

    /// Writes `name` inside the open directory `dirFD` atomically: a temporary file with a random name created with
    /// `O_CREAT|O_EXCL|O_NOFOLLOW` (a planted file or symlink is never opened, let alone followed), fsync, then
    /// `renameat` over `name` (which replaces a symlink there rather than writing through it).
    public static func writeAtomically(in dirFD: Int32, name: String, _ bytes: [UInt8], mode: mode_t = 0o644) throws(IOError) {
        let w = try AtomicFileWriter(in: dirFD, name: name, mode: mode)
        try w.write(bytes)
        try w.commit()
    }

    /// A file written a chunk at a time, atomically (exports of any size without holding them in memory): a
    /// temporary file with a random name created with `O_CREAT|O_EXCL|O_NOFOLLOW` in `dirFD`, then on `commit()`
    /// fsync, `renameat` over `name` and fsync of the directory. Released without `commit()`, the temporary file is
    /// removed and `name` is untouched.
    public final class AtomicFileWriter {
        public let name: String
        private let dirFD: Int32
        private let tmp: String
        private var fd: Int32
        private var committed = false

        public init(in dirFD: Int32, name: String, mode: mode_t = 0o644) throws(IOError) {
            guard Files.isPlainName(name) else { throw IOError(path: name, errnoCode: EINVAL) }
            var tmp = ""
            var fd: Int32 = -1
            for _ in 0..<16 {
                tmp = ".\(name).tmp-\(Files.randomSuffix())"
                fd = openat(dirFD, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)
                if fd >= 0 || errno != EEXIST { break }
            }
            guard fd >= 0 else { throw IOError(path: tmp, errnoCode: errno) }
            self.name = name
            self.dirFD = dirFD
            self.tmp = tmp
            self.fd = fd
        }

        deinit {
            guard !committed else { return }
            if fd >= 0 { close(fd) }
            unlinkat(dirFD, tmp, 0)
        }

        /// Writes every byte (retrying `EINTR` and short writes).
        public func write(_ bytes: UnsafeRawBufferPointer) throws(IOError) {
            var off = 0
            while off < bytes.count {
                let n = Glibc.write(fd, bytes.baseAddress! + off, bytes.count - off)
                if n < 0 {
                    if errno == EINTR { continue }
                    throw IOError(path: tmp, errnoCode: errno)
                }
                off += n
            }
        }

        public func write(_ bytes: [UInt8]) throws(IOError) {
            let e: Int32? = bytes.withUnsafeBytes { b in
                do throws(IOError) { try write(b); return nil } catch { return error.errnoCode }
            }
            if let e { throw IOError(path: tmp, errnoCode: e) }
        }

        /// fsync, rename over `name`, fsync the directory.
        public func commit() throws(IOError) {
            guard fsync(fd) == 0 else { throw IOError(path: tmp, errnoCode: errno) }
            close(fd)
            fd = -1
            if renameat(dirFD, tmp, dirFD, name) != 0 { throw IOError(path: name, errnoCode: errno) }
            committed = true
            _ = fsync(dirFD)
        }
    }

    /// Opens a directory for `openat`-relative work (following symlinks: for paths the operator chose).
    public static func openDirectory(_ path: String) throws(IOError) -> Int32 {
        guard !hasNUL(path) else { throw IOError(path: path, errnoCode: EINVAL) }
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw IOError(path: path, errnoCode: errno) }
        return fd
    }

    /// Opens the subdirectory `name` of `dirFD`, creating it (mode 0755) if missing, never following a symlink:
    /// a symlink there fails with `ELOOP`/`ENOTDIR`. `name` must be one plain component (no `/`, not `.`/`..`).
    public static func openSubdirectory(_ dirFD: Int32, _ name: String, create: Bool = true) throws(IOError) -> Int32 {
        guard isPlainName(name) else { throw IOError(path: name, errnoCode: EINVAL) }
        var fd = openat(dirFD, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        if fd < 0 && errno == ENOENT && create {
            if mkdirat(dirFD, name, 0o755) != 0 && errno != EEXIST { throw IOError(path: name, errnoCode: errno) }
            fd = openat(dirFD, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        }
        guard fd >= 0 else { throw IOError(path: name, errnoCode: errno) }
        return fd
    }

    /// One path component that names an entry of its directory: not empty, not `.` or `..`, no `/` and no NUL.
    public static func isPlainName(_ name: String) -> Bool {
        !name.isEmpty && name != "." && name != ".." && !name.utf8.contains(UInt8(ascii: "/")) && !hasNUL(name)
    }

    /// 16 hex digits from the system CSPRNG (time and pid if that is unavailable; `O_EXCL` keeps it safe anyway).
    public static func randomSuffix() -> String {
        var bytes = [UInt8](repeating: 0, count: 8)
        let ok = bytes.withUnsafeMutableBytes { getentropy($0.baseAddress, $0.count) } == 0
        var v: UInt64 = 0
        if ok {
            for b in bytes { v = v << 8 | UInt64(b) }
        } else {
            var ts = timespec()
            clock_gettime(CLOCK_MONOTONIC, &ts)
            v = UInt64(truncatingIfNeeded: ts.tv_nsec) ^ UInt64(truncatingIfNeeded: ts.tv_sec) << 30 ^ UInt64(getpid()) << 48
        }
        let hex = String(v, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
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
        guard !hasNUL(path) else { throw IOError(path: path, errnoCode: EINVAL) }
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)
        guard fd >= 0 else { throw IOError(path: path, errnoCode: errno) }
        defer { close(fd) }
        if let e = writeAllAndSync(fd, bytes) { unlink(path); throw IOError(path: path, errnoCode: e) }
    }

    public static func environment(_ name: String) -> String? {
        guard let v = getenv(name) else { return nil }
        return String(cString: v)
    }
}

extension Files {
    /// `s` with control characters (C0, DEL, C1, U+2028/2029) shown as escapes, for messages and logs.
    public static func printable(_ s: String) -> String { LogEscaping.escape(s) }
}
