import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// A blocking TCP client socket connected to 127.0.0.1:`port`, with a receive timeout (a bound on waiting in tests)
/// and, if given, a receive buffer of that size (set before connecting, so the window it advertises is that small).
func loopbackConnect(port: Int, receiveTimeoutSeconds: Int = 5, receiveBuffer: Int32? = nil) -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    if let receiveBuffer { setReceiveBuffer(fd, receiveBuffer) }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_port = in_port_t(UInt16(port).bigEndian)
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    let rc = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
    XCTAssertEqual(rc, 0)
    var tv = timeval(tv_sec: receiveTimeoutSeconds, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    return fd
}

func setReceiveBuffer(_ fd: Int32, _ bytes: Int32) {
    var size = bytes
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
}

/// Sends `text` on `fd` (one `send`; the tests' requests are small).
func sendText(_ fd: Int32, _ text: String) {
    let bytes = Array(text.utf8)
    _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
}

/// Sends all of `bytes` on `fd` (blocking: as the server reads).
func sendAll(_ fd: Int32, _ bytes: [UInt8]) {
    var sent = 0
    while sent < bytes.count {
        let n = bytes.withUnsafeBytes { send(fd, $0.baseAddress! + sent, $0.count - sent, 0) }
        if n <= 0 { return }
        sent += n
    }
}

/// Reads `count` responses framed by their `Content-Length` and returns their bodies (fewer if the connection ends or
/// the receive timeout passes first).
func readBodies(_ fd: Int32, count: Int) -> [[UInt8]] {
    var input: [UInt8] = []
    var start = 0
    var bodies: [[UInt8]] = []
    var buf = [UInt8](repeating: 0, count: 65536)
    let marker = Array("content-length:".utf8)
    while bodies.count < count {
        // A whole head in the input: find its end and its Content-Length.
        var headEnd: Int? = nil
        var i = start
        while i + 3 < input.count {
            if input[i] == 13 && input[i + 1] == 10 && input[i + 2] == 13 && input[i + 3] == 10 { headEnd = i + 4; break }
            i += 1
        }
        if let headEnd {
            var length = 0
            var k = start
            while k + marker.count < headEnd {
                if (0..<marker.count).allSatisfy({ input[k + $0] | 0x20 == marker[$0] }) {  // ASCII case-insensitive
                    var m = k + marker.count
                    while input[m] == 32 { m += 1 }
                    while input[m] >= 48 && input[m] <= 57 { length = length * 10 + Int(input[m] - 48); m += 1 }
                    break
                }
                k += 1
            }
            if input.count >= headEnd + length {
                bodies.append(Array(input[headEnd..<(headEnd + length)]))
                start = headEnd + length
                if start > 1 << 20 { input.removeFirst(start); start = 0 }
                continue
            }
        }
        let n = buf.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if n <= 0 { break }
        input.append(contentsOf: buf[0..<n])
    }
    return bodies
}
