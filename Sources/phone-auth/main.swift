import EmulatorSupport
import PhoneAuthCLI
#if canImport(Glibc)
import Glibc
#endif

func writeLine(_ fd: Int32, _ s: String) {
    var bytes = Array((s.hasSuffix("\n") ? s : s + "\n").utf8)
    if fd == 2 && s.hasSuffix(": ") { bytes.removeLast() }
    _ = bytes.withUnsafeMutableBytes { write(fd, $0.baseAddress, $0.count) }
}

let context = CLIContext(
    environment: { Files.environment($0) },
    stdinIsTerminal: isatty(0) == 1,
    readLine: { Swift.readLine() },
    out: { writeLine(1, $0) },
    err: { writeLine(2, $0) })
exit(CLI.run(Array(CommandLine.arguments.dropFirst()), context: context))
