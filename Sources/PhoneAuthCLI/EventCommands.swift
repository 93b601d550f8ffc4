import EmulatorSupport
import HTTPServer

/// `phone-auth events`: the project's (or tenant's) event stream as JSON lines, printed as they arrive.
enum EventCommands {
    static func events(_ s: Session, _ a: [String]) throws {
        let c = try s.client()
        let follow = s.args.has("follow")
        var query: [(String, String)] = [("format", "jsonl")]
        if !follow { query.append(("follow", "false")) }
        if let since = s.args.value("since") {
            guard UInt64(since) != nil else { throw UsageError("--since must be an event id (a non-negative integer)") }
            query.append(("since", since))
        } else if !follow {
            query.append(("since", "0"))  // without --follow: everything retained
        }
        for t in s.args.options["type"] ?? [] { query.append(("type", t)) }
        let qs = query.map { "\(URLEncoding.percentEncode($0.0))=\(URLEncoding.percentEncode($0.1))" }.joined(separator: "&")
        var headers: [(String, String)] = []
        if let token = c.adminToken { headers.append(("Authorization", "Bearer \(token)")) }
        var pending: [UInt8] = []
        let response: HTTPClient.Response
        do {
            response = try HTTPClient.stream(url: c.baseURL + c.emulatorBase + "/events?" + qs, headers: headers, timeout: 60) { chunk in
                pending += chunk
                while let nl = pending.firstIndex(of: 0x0A) {
                    let line = Array(pending[..<nl])
                    pending.removeFirst(nl + 1)
                    if !line.isEmpty { printLine(s, line) }
                }
                return true
            }
        } catch {
            throw ConnectionError(description: "cannot reach the emulator at \(c.baseURL): \(error.description)")
        }
        guard (200..<300).contains(response.status) else {
            let json = (try? JSONParser.parse(response.body)) ?? .null
            throw APIError(status: response.status, message: json["error"]?["message"]?.stringValue ?? "HTTP \(response.status)",
                           googleStatus: json["error"]?["status"]?.stringValue)
        }
        if !pending.isEmpty { printLine(s, pending) }
    }

    /// One event: the JSON line as it came (--json), else `time  #id  type  field=value …`, terminal-safe.
    static func printLine(_ s: Session, _ line: [UInt8]) {
        guard let json = try? JSONParser.parse(line), case .object(let o) = json else { return }
        if s.json { s.print(Terminal.json(json.serializedString)); return }
        var parts: [String] = [o["time"]?.stringValue ?? "", o["id"].map { "#" + $0.serializedString } ?? "#-", o["type"]?.stringValue ?? "?"]
        for (k, v) in o where !["id", "type", "time", "project"].contains(k) {
            parts.append("\(k)=\(v.stringValue ?? v.serializedString)")
        }
        s.print(Terminal.safe(parts.joined(separator: "  ")))
    }
}
