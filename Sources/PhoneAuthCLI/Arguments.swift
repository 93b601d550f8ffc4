/// A usage problem: printed with the command's usage, exit code 64 (EX_USAGE).
public struct UsageError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ d: String) { description = d }
}

/// Parsed command-line arguments: positionals, `--name value` / `--name=value` options and boolean flags.
/// Options may appear before or after the subcommand; `--` ends options.
public struct Arguments: Sendable {
    public var positionals: [String] = []
    public var options: [String: [String]] = [:]
    public var flags: Set<String> = []

    public func value(_ name: String) -> String? { options[name]?.last }
    public func has(_ flag: String) -> Bool { flags.contains(flag) }

    /// Parses `args`; `valued` and `boolean` list the long option names (without `--`) that are allowed.
    public static func parse(_ args: [String], valued: Set<String>, boolean: Set<String>, shorts: [Character: String] = [:]) throws(UsageError) -> Arguments {
        var out = Arguments()
        var i = 0
        var onlyPositionals = false
        while i < args.count {
            let a = args[i]
            i += 1
            // Short options are one letter (`-h`): a longer word after a single dash is a value (a sessionInfo or an
            // oobCode can begin with `-`; one in 64 does).
            if onlyPositionals || a == "-" || !a.hasPrefix("-") || isNumberLike(a) || (!a.hasPrefix("--") && a.count > 2) {
                out.positionals.append(a)
                continue
            }
            if a == "--" { onlyPositionals = true; continue }
            var name: String
            var inline: String? = nil
            if a.hasPrefix("--") {
                name = String(a.dropFirst(2))
                if let eq = name.firstIndex(of: "=") {
                    inline = String(name[name.index(after: eq)...])
                    name = String(name[..<eq])
                }
            } else {
                guard a.count == 2, let long = shorts[a.last!] else { throw UsageError("unknown option '\(a)'") }
                name = long
            }
            if boolean.contains(name) {
                guard inline == nil else { throw UsageError("option '--\(name)' takes no value") }
                out.flags.insert(name)
            } else if valued.contains(name) {
                if let inline { out.options[name, default: []].append(inline); continue }
                guard i < args.count else { throw UsageError("option '--\(name)' needs a value") }
                out.options[name, default: []].append(args[i])
                i += 1
            } else {
                throw UsageError("unknown option '--\(name)' (a value that begins with '--' goes after a '--' argument)")
            }
        }
        return out
    }

    /// `+16505554567` and `-5` are values, not options.
    static func isNumberLike(_ s: String) -> Bool {
        guard let f = s.first, f == "-" || f == "+" else { return false }
        return s.count > 1 && s.dropFirst().allSatisfy { $0.isNumber || $0 == "." }
    }
}
