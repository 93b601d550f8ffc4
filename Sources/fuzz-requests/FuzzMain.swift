import CSystem
import EmulatorSupport
import HTTPServer
import PhoneAuthAPI

/// libFuzzer entry for `RequestReplay` (see scripts/fuzz). A normal build is a replay driver instead:
/// `fuzz-requests FILE…` runs the given inputs once.
@main
struct FuzzMain {
    static func main() {
        #if FUZZING
        var argc = CommandLine.argc
        var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
        exit(LLVMFuzzerRunDriver(&argc, &argv) { data, size in
            RequestReplay().run(Array(UnsafeBufferPointer(start: data, count: size)))
            return 0
        })
        #else
        for path in CommandLine.arguments.dropFirst() {
            guard let bytes = try? Files.read(path) else { print("cannot read \(path)"); continue }
            RequestReplay.shared.run(bytes)
        }
        print("replayed \(CommandLine.arguments.count - 1) inputs")
        #endif
    }
}

#if canImport(Glibc)
import Glibc
#endif
