import CSystem
import EmulatorSupport
import HTTPServer
import PhoneAuthAPI
import PhoneAuthServer
#if canImport(Glibc)
import Glibc
#endif

/// `phone-auth-emulator exec [options] -- COMMAND [ARGS…]` (`ExecCommandLine` parses it; its `usage` is the manual):
/// the server in this process, COMMAND as a child with the emulator's address in its environment, SIGINT/SIGTERM
/// forwarded to it, then the server stopped and COMMAND's status returned.
enum Exec {
    typealias Status = ExecCommandLine.Status

    static func run(_ arguments: [String]) -> Never {
        let command: [String]
        let serverArguments: [String]
        do {
            switch try ExecCommandLine.parse(arguments) {
            case .help: printLine(ExecCommandLine.usage); exit(0)
            case .run(let s, let c): (serverArguments, command) = (s, c)
            }
        } catch {
            fail("\(error.description) (see exec --help)", code: Status.usage)
        }
        let settings = resolveSettings(serverArguments, usage: ExecCommandLine.usage, badSettings: Status.badSettings)

        // SIGCHLD joins SIGINT/SIGTERM before the server's threads start: all three reach only the sigwait below.
        _ = csys_block_exec_signals()
        let server: RunningServer
        do { server = try PhoneAuthServer.start(settings: settings) } catch {
            fail("the emulator could not start: \(error.description)", code: Status.serverUnavailable)
        }
        let address = clientAddress(host: settings.host, port: server.port)
        if let problem = waitUntilAnswering("http://\(address)") {
            _ = server.stop()
            fail("the emulator did not answer at http://\(address): \(problem)", code: Status.serverUnavailable)
        }
        // A SIGINT/SIGTERM while the server was starting: stop before anything runs.
        if let signal = pendingTermination() {
            server.logger.info("received \(signal == SIGINT ? "SIGINT" : "SIGTERM") before the command started, shutting down")
            _ = server.stop()
            exit(128 + signal)
        }

        let environment = childEnvironment(address: address, projectId: settings.projectId)
        var pid: pid_t = 0
        let spawned = withCStrings(command) { argv in
            withCStrings(environment) { envp in csys_spawn(argv[0], argv, envp, &pid) }
        }
        if spawned != 0 {
            _ = server.stop()
            let notFound = spawned == ENOENT
            fail("\(command[0]): \(notFound ? "command not found" : String(cString: strerror(spawned)))",
                 code: notFound ? Status.notFound : Status.notExecutable)
        }
        server.logger.info("exec: running \(command.joined(separator: " "))", [("FIREBASE_AUTH_EMULATOR_HOST", address), ("pid", String(pid))])

        let status = waitForChild(pid, logger: server.logger)
        server.logger.info("exec: the command exited with status \(status)")
        let stopped = server.stop()
        exit(status == 0 && stopped != 0 ? Status.stopFailed : status)
    }

    /// Waits for the child to end, forwarding SIGINT and SIGTERM to it; returns its status as a shell reports it.
    static func waitForChild(_ pid: pid_t, logger: Logger) -> Int32 {
        while true {
            var fromTerminal: Int32 = 0
            let signal = csys_wait_exec_signal(&fromTerminal)
            if signal == SIGCHLD {
                var status: Int32 = 0
                switch csys_reap_child(pid, &status) {
                case 1: return status
                case 0: continue
                default: fail("cannot wait for the command: \(String(cString: strerror(errno)))", code: Status.serverUnavailable)
                }
            }
            let name = signal == SIGINT ? "SIGINT" : "SIGTERM"
            // A terminal's Ctrl-C already reached the command (same foreground process group): sending it again
            // would be a second interrupt.
            if fromTerminal != 0 {
                logger.info("exec: \(name) from the terminal, the command has it too")
            } else {
                logger.info("exec: received \(name), forwarding it to the command")
                kill(pid, signal)
            }
        }
    }

    /// host:port as a client dials it: a wildcard bind is reached on loopback; IPv6 in brackets.
    static func clientAddress(host: String, port: Int) -> String {
        let dial = host == "0.0.0.0" ? "127.0.0.1" : host == "::" || host == "[::]" ? "::1" : host
        let bracketed = dial.contains(":") && !dial.hasPrefix("[") ? "[\(dial)]" : dial
        return "\(bracketed):\(port)"
    }

    /// nil once the server answers an HTTP request (any status: it is serving); else the last problem, after about
    /// ten seconds.
    static func waitUntilAnswering(_ url: String) -> String? {
        var problem = "no answer"
        for _ in 0..<100 {
            do {
                _ = try HTTPClient.send(method: "GET", url: url + "/", timeout: 2, deadline: 5)
                return nil
            } catch {
                problem = error.description
            }
            usleep(100_000)
        }
        return problem
    }

    /// SIGINT or SIGTERM if one is pending (blocked since start), else nil.
    static func pendingTermination() -> Int32? {
        var pending = sigset_t()
        sigpending(&pending)
        if sigismember(&pending, SIGTERM) == 1 { return SIGTERM }
        if sigismember(&pending, SIGINT) == 1 { return SIGINT }
        return nil
    }

    /// This process's environment with the emulator's variables set (replacing any inherited ones).
    static func childEnvironment(address: String, projectId: String) -> [String] {
        let ours = [
            ("FIREBASE_AUTH_EMULATOR_HOST", address),
            ("PHONE_AUTH_EMULATOR_URL", "http://\(address)"),
            ("GCLOUD_PROJECT", projectId),
            ("PHONE_AUTH_EMULATOR_PROJECT", projectId),
        ]
        var result: [String] = []
        if let env = csys_environ() {
            var i = 0
            while let entry = env[i] {
                let text = String(cString: entry)
                let name = text.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? text
                if !ours.contains(where: { $0.0 == name }) { result.append(text) }
                i += 1
            }
        }
        return result + ours.map { "\($0.0)=\($0.1)" }
    }

    /// `strings` as a NULL-terminated array of C strings, valid during `body`.
    static func withCStrings<R>(_ strings: [String], _ body: ([UnsafeMutablePointer<CChar>?]) -> R) -> R {
        let pointers = strings.map { strdup($0) } + [nil]
        defer { for p in pointers { free(p) } }
        return body(pointers)
    }
}
