import EmulatorSupport
#if canImport(Glibc)
import Glibc
#endif

let version = "0.1.0"
let usage = """
    Usage: phone-auth <command> [options]

    The command-line client for a running phone-auth-emulator.

    Options:
      --help       show this help
      --version    show the version

    More commands (send, sign-in, codes, users, token, config, …) arrive in a later release.
    """

let args = Array(CommandLine.arguments.dropFirst())
if args.isEmpty || args.contains("--help") || args.contains("-h") {
    print(usage)
    exit(args.isEmpty ? 64 : 0)
}
if args.contains("--version") {
    print("phone-auth \(version)")
    exit(0)
}
StandardErrorSink().write("phone-auth: unknown command '\(args[0])' (see --help)")
exit(64)
