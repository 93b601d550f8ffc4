import CSystem
import EmulatorSupport
import PhoneAuthAPI
import PhoneAuthServer
#if canImport(Glibc)
import Glibc
#endif

// SIGINT/SIGTERM are blocked before any thread starts, then awaited with sigwait on this thread.
_ = csys_block_termination_signals()
csys_ignore_sigpipe()
csys_stdout_line_buffered()

/// Prints the problem and leaves at once: `_exit`, because a background key generation may be inside OpenSSL, whose
/// atexit cleanup must not run under it.
func fail(_ message: String, code: Int32) -> Never {
    StandardErrorSink().write("phone-auth-emulator: \(message)")
    _exit(code)
}

func printLine(_ s: String) {
    var bytes = Array((s + "\n").utf8)
    _ = bytes.withUnsafeMutableBytes { write(1, $0.baseAddress, $0.count) }
}

/// The settings from `arguments` and the environment (flag > environment > config file > default): `--help` prints
/// `usage` and `--version` the version, each exiting 0; a bad setting exits with `badSettings`.
func resolveSettings(_ arguments: [String], usage: String, badSettings: Int32) -> ServerSettings {
    do {
        switch try ServerSettings.resolve(arguments: arguments, environment: { Files.environment($0) },
                                          readFile: { try Files.read($0) }, fileExists: { Files.exists($0) }) {
        case .help: printLine(usage); exit(0)
        case .version: printLine("phone-auth-emulator \(ProductVersion.string)"); exit(0)
        case .run(let s): return s
        }
    } catch {
        fail(error.description, code: badSettings)
    }
}

let arguments = Array(CommandLine.arguments.dropFirst())
// `exec [options] -- COMMAND`: the server around a test command (Exec.swift).
if arguments.first == "exec" { Exec.run(Array(arguments.dropFirst())) }

let settings = resolveSettings(arguments, usage: ServerSettings.usage, badSettings: 2)

let server: RunningServer
do { server = try PhoneAuthServer.start(settings: settings) } catch { fail(error.description, code: error.exitCode) }
printLine("listening on \(server.url)")

let signal = csys_wait_termination_signal()
server.logger.info("received \(signal == SIGINT ? "SIGINT" : "SIGTERM"), shutting down")
let code = server.stop()
exit(code)
