import CSystem
#if canImport(Glibc)
import Glibc
#endif

/// The socket calls the event loop makes, with `EINTR` retried and `EAGAIN`/`EWOULDBLOCK` mapped in one place.
enum Posix {
    enum IOResult: Equatable {
        /// This many bytes (> 0) moved.
        case bytes(Int)
        case wouldBlock
        /// `recv` returned 0: the peer shut its sending side.
        case endOfStream
        case failed(Int32)
    }

    enum AcceptResult: Equatable {
        case accepted(Int32)
        case wouldBlock
        case failed(Int32)
    }

    /// Runs `call` until it is not interrupted; a negative result comes with its errno.
    @inline(__always) private static func retrying(_ call: () -> Int) -> (Int, Int32) {
        while true {
            let n = call()
            if n >= 0 { return (n, 0) }
            let e = csys_errno()
            if e != EINTR { return (n, e) }
        }
    }

    @inline(__always) private static func isWouldBlock(_ e: Int32) -> Bool { e == EAGAIN || e == EWOULDBLOCK }

    static func receive(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) -> IOResult {
        let (n, e) = retrying { recv(fd, buffer.baseAddress, buffer.count, 0) }
        if n > 0 { return .bytes(n) }
        if n == 0 { return .endOfStream }
        return isWouldBlock(e) ? .wouldBlock : .failed(e)
    }

    /// One `send` (no SIGPIPE; a partial write is reported as such).
    static func send(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> IOResult {
        let (n, e) = retrying { Glibc.send(fd, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL)) }
        if n > 0 { return .bytes(n) }
        if n == 0 { return .wouldBlock }
        return isWouldBlock(e) ? .wouldBlock : .failed(e)
    }

    /// `accept4` with `SOCK_NONBLOCK | SOCK_CLOEXEC`; a connection aborted before it was taken is skipped.
    static func accept(_ listenFD: Int32, _ address: inout sockaddr_storage) -> AcceptResult {
        while true {
            var len = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let (fd, e) = retrying {
                Int(withUnsafeMutablePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { csys_accept_nonblocking(listenFD, $0, &len) }
                })
            }
            if fd >= 0 { return .accepted(Int32(fd)) }
            if e == ECONNABORTED { continue }
            return isWouldBlock(e) ? .wouldBlock : .failed(e)
        }
    }
}
