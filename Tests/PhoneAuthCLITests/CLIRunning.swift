@testable import PhoneAuthCLI
import XCTest

/// Running the CLI in-process: flags are checked before any request, so an unreachable emulator proves that none was
/// made (a usage error is 64, a connection failure would be 1).
protocol CLIRunning {}

extension CLIRunning {
    var nowhere: [String] { ["--emulator", "http://127.0.0.1:1", "--project", "p"] }

    /// Exit code, stdout, stderr.
    func run(_ args: [String]) -> (Int32, String, String) {
        var out = "", err = ""
        let ctx = CLIContext(environment: { _ in nil }, stdinIsTerminal: false, readLine: { nil },
                             out: { out += $0 + "\n" }, err: { err += $0 + "\n" })
        return (CLI.run(args, context: ctx), out, err)
    }

    /// `args` parsed as the command `words` would parse them.
    func parse(_ words: [String], _ args: [String]) throws -> Arguments {
        let c = try XCTUnwrap(CLI.commands.first { $0.words == words })
        return try Arguments.parse(args, valued: CLI.globalValued.union(c.valued), boolean: CLI.globalBoolean.union(c.boolean))
    }
}
