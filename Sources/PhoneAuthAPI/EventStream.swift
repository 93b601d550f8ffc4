import EmulatorSupport
import HTTPServer
import PhoneAuthCore

/// `GET /emulator/v1/projects/{p}[/tenants/{t}]/events`: the store's events as Server-Sent Events (default) or JSON
/// lines (`?format=jsonl`). `Last-Event-ID` / `?since=ID` replays the retained events after ID (`since=0`: all of
/// them), then goes live; `?type=` filters (repeatable or comma-separated, `user.*` prefixes); `?follow=false`
/// answers what is retained and closes. A stream copies the bytes its store's log rendered once for all readers in
/// its format (PhoneAuthCore/Events.swift), and renders only what was published before anyone followed in it.
enum EventStream {
    typealias Format = EventWireFormat

    /// The SSE keep-alive comment and its period.
    static let keepAlive = Array(": keep-alive\n\n".utf8)
    static let keepAliveSeconds = 15.0

    static func handle(_ app: PhoneAuthApp, _ call: Call) throws -> Reply {
        let key = StoreKey(projectId: call.projectId, tenantId: call.pathTenant)
        let format: Format
        switch call.queryValue("format") {
        case nil, "sse": format = .sse
        case "jsonl", "ndjson": format = .jsonl
        default: throw AuthError.invalidArgument("format must be \"sse\" or \"jsonl\".")
        }
        var since: UInt64? = nil
        if let raw = call.request.headers["last-event-id"] ?? call.queryValue("since") {
            let text = raw.trimmingSpaces()
            guard text.utf8.count <= 20, let id = UInt64(text) else {
                throw AuthError.invalidArgument("since (or Last-Event-ID) must be an event id: a non-negative integer.")
            }
            since = id
        }
        let follow: Bool
        switch call.queryValue("follow") {
        case nil, "true", "1": follow = true
        case "false", "0": follow = false
        default: throw AuthError.invalidArgument("follow must be true or false.")
        }
        let filter = try EventFilter(parsing: call.queryValues("type"))
        let subscription = try app.emulator.events.subscribe(key, since: since, filter: filter, follow: follow, format: format)
        let source = EventStreamSource(subscription, format: format, key: key, clock: app.emulator.clock)
        var reply = Reply(status: 200, raw: [], contentType: format == .sse ? "text/event-stream; charset=utf-8" : "application/x-ndjson; charset=utf-8",
                          headers: [("Cache-Control", "no-cache"), ("X-Accel-Buffering", "no")])
        reply.stream = HTTPStreamBody(source: source, keepAlive: format == .sse ? keepAlive : [], keepAliveSeconds: keepAliveSeconds)
        return reply
    }
}

/// Feeds one subscription to one connection: reads (and renders) only when the connection pulls.
final class EventStreamSource: HTTPStreamSource {
    let subscription: EventSubscription
    let format: EventStream.Format
    let key: StoreKey
    let clock: EmulatorClock

    init(_ subscription: EventSubscription, format: EventStream.Format, key: StoreKey, clock: EmulatorClock) {
        self.subscription = subscription
        self.format = format
        self.key = key
        self.clock = clock
    }

    func attach(wake: @escaping @Sendable () -> Void) { subscription.setWake(wake) }

    func pull(into out: inout [UInt8], limit: Int) -> HTTPStreamPull {
        let pulledFrom = out.count
        while true {
            // Rendered events arrive as bytes in `out`; this reader renders the rest (a replay), once for all.
            let batch = subscription.read(max: 256, format: format, into: &out)
            if batch.dropped > 0 {
                EmulatorEvent(id: 0, time: clock.nowMillis(), payload: .dropped(count: batch.dropped)).render(key, format: format, into: &out)
            }
            if !batch.events.isEmpty {
                // Rendered here once, kept for the other readers.
                let start = out.count
                var ends: [Int] = []
                ends.reserveCapacity(batch.events.count)
                for e in batch.events {
                    e.render(key, format: format, into: &out)
                    ends.append(out.count - start)
                }
                subscription.keep(batch.events, sequence: batch.sequence, format: format, bytes: Array(out[start...]), ends: ends)
            }
            switch batch.status {
            case .more: if out.count - pulledFrom >= limit { return .more }
            case .waiting: return .waiting
            case .finished: return .finished
            }
        }
    }

    func detach() {
        subscription.setWake(nil)
        subscription.cancel()
    }
}
