import CSystem
import EmulatorSupport
import JWT
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// One RS256 signature through our code, for bench/run (next to `openssl speed rsa2048`):
/// - `sign`: `RSAKey.signSHA256` alone (SHA-256 of a token's signing input, then the RSA private operation on a
///   prepared context from the key's free list);
/// - `assembly`: the token's work around the signature alone (claims to JSON, base64url, assembly);
/// - `token`: `SigningKey.sign(payload:)`, a whole ID token (claims to JSON, base64url, signature, assembly);
/// each on one thread, then `token` on `--threads` threads at once (the rate `openssl speed -multi N` compares with).
/// Prints one JSON object. Usage: sign-bench [--seconds S] [--threads N]
@main
struct SignBench {
    static func main() throws {
        var seconds = 2.0, threads = 2
        var args = CommandLine.arguments.dropFirst().makeIterator()
        while let a = args.next() {
            switch a {
            case "--seconds": seconds = args.next().flatMap(Double.init) ?? seconds
            case "--threads": threads = args.next().flatMap(Int.init) ?? threads
            default:
                print("usage: sign-bench [--seconds S] [--threads N]")
                exit(2)
            }
        }
        let key = try SigningKey(key: RSAKey.generate(bits: 2048), createdAt: 1_700_000_000)
        var claims = JSONObject()
        claims["iss"] = "https://securetoken.google.com/demo-phone"
        claims["aud"] = "demo-phone"
        claims["auth_time"] = .int(1_796_119_392)
        claims["user_id"] = "YLvS4Rj2pNKve7iu7vyEQ7RQkCMK"
        claims["sub"] = "YLvS4Rj2pNKve7iu7vyEQ7RQkCMK"
        claims["iat"] = .int(1_796_119_392)
        claims["exp"] = .int(1_796_122_992)
        claims["phone_number"] = "+16505554567"
        claims["firebase"] = ["identities": ["phone": ["+16505554567"]], "sign_in_provider": "phone"]
        let payload = claims
        let input = Array(try key.sign(payload: payload).utf8.prefix { $0 != UInt8(ascii: ".") } )
        _ = try key.key.signSHA256(input)  // warm up: the first call prepares the context

        /// Runs `body` for `seconds` on one thread; returns µs per call.
        func perCall(_ body: () throws -> Void) rethrows -> Double {
            var n = 0
            let start = csys_monotonic_ns()
            let end = start + UInt64(seconds * 1e9)
            var now = start
            while now < end {
                for _ in 0..<16 { try body() }
                n += 16
                now = csys_monotonic_ns()
            }
            return Double(now - start) / 1e3 / Double(n)
        }
        let signUs = try perCall { _ = try key.key.signSHA256(input) }
        let tokenUs = try perCall { _ = try key.sign(payload: payload) }
        // A token's work around its signature: claims to JSON, base64url, assembly (the signature's bytes stand in).
        let fakeSignature = [UInt8](repeating: 0xA5, count: key.key.signatureSize)
        var tokenLength = 0
        let assemblyUs = perCall {
            var token = key.signingInput(payload)
            token.append(UInt8(ascii: "."))
            Base64URL.append(fakeSignature, to: &token)
            tokenLength = String(decoding: token, as: UTF8.self).utf8.count
        }

        // The same tokens on `threads` threads at once.
        let count = Atomic<Int>(0)
        let stop = Atomic<Bool>(false)
        let start = csys_monotonic_ns()
        let workers = (0..<threads).map { _ in
            NativeThread.start {
                while !stop.load(ordering: .relaxed) {
                    _ = try? key.sign(payload: payload)
                    count.wrappingAdd(1, ordering: .relaxed)
                }
            }
        }
        usleep(UInt32(seconds * 1e6))
        stop.store(true, ordering: .relaxed)
        for w in workers { w.join() }
        let rate = Double(count.load(ordering: .relaxed)) / (Double(csys_monotonic_ns() - start) / 1e9)
        print("{\"sign_us\":\(signUs),\"token_us\":\(tokenUs),\"assembly_us\":\(assemblyUs),\"token_length\":\(tokenLength),\"threads\":\(threads),\"tokens_per_s\":\(rate)}")
    }
}
