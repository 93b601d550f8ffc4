import CSystem
import EmulatorSupport
import HTTPServer
import PhoneAuthAPI

/// libFuzzer entry (see scripts/fuzz). Two targets, chosen by `FUZZ_TARGET`:
/// - `requests` (default): `RequestReplay`, the HTTP parser and every endpoint's request decoding;
/// - `json`: the JSON parser alone on inputs up to 1 MiB, checking its invariants (see `JSONFuzz`); with
///   libFuzzer's `-timeout` this also catches super-linear work on large objects.
/// A normal build is a replay driver instead: `fuzz-requests FILE…` runs the given inputs once through both.
@main
struct FuzzMain {
    /// `FUZZ_TARGET=json`: the JSON parser alone (read once; the libFuzzer callback cannot capture context).
    static let jsonTarget = getenv("FUZZ_TARGET").map { String(cString: $0) } == "json"

    static func main() {
        #if FUZZING
        var argc = CommandLine.argc
        var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
        exit(LLVMFuzzerRunDriver(&argc, &argv) { data, size in
            let bytes = Array(UnsafeBufferPointer(start: data, count: size))
            if FuzzMain.jsonTarget { JSONFuzz.check(bytes) } else { RequestReplay().run(bytes) }
            return 0
        })
        #else
        for path in CommandLine.arguments.dropFirst() {
            guard let bytes = try? Files.read(path) else { print("cannot read \(path)"); continue }
            RequestReplay.shared.run(bytes)
            JSONFuzz.check(bytes)
        }
        print("replayed \(CommandLine.arguments.count - 1) inputs")
        #endif
    }
}

/// The JSON parser's invariants on any input: it never traps; what it accepts serializes to text it parses back to
/// an equal value; objects have unique keys, each found at its own position (the hash index agrees with the order).
enum JSONFuzz {
    static func check(_ bytes: [UInt8]) {
        guard let value = try? JSONParser.parse(bytes) else { return }
        var finite = true
        verify(value, &finite)
        let text = value.serialized()
        guard let again = try? JSONParser.parse(text) else { fatalError("serialized JSON does not parse back") }
        // Out-of-range numbers (1e400) parse as infinity and are written as null; everything else round-trips.
        guard again == value || !finite else { fatalError("JSON round trip changed the value") }
    }

    static func verify(_ v: JSON, _ finite: inout Bool) {
        switch v {
        case .number(let d):
            if !d.isFinite { finite = false }
        case .array(let items):
            for i in items { verify(i, &finite) }
        case .object(let o):
            var seen = Set<String>()
            for (k, value) in o {
                guard seen.insert(k).inserted else { fatalError("duplicate key kept in an object") }
                guard o[k] == value else { fatalError("lookup disagrees with the entry order") }
                verify(value, &finite)
            }
        default:
            break
        }
    }
}

#if canImport(Glibc)
import Glibc
#endif
