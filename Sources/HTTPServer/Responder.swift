/// What the server calls for each request. Return a response to answer at once on the event loop, or `nil` and
/// call `context.complete(_:)` later from any thread (work moved to a pool, a long poll). The connection answers
/// requests strictly in order: it reads no further request until this one is answered.
public protocol HTTPResponder: Sendable {
    func respond(to request: HTTPRequest, context: ResponseContext) -> HTTPResponse?
}

/// A handle for answering one request later.
public struct ResponseContext: Sendable {
    let loop: EventLoop?
    let connectionID: UInt64

    /// A context that answers nowhere (for calling a responder directly in tests).
    public static let detached = ResponseContext(loop: nil, connectionID: 0)

    init(loop: EventLoop?, connectionID: UInt64) {
        self.loop = loop
        self.connectionID = connectionID
    }

    /// Answers the request; safe from any thread, at most once.
    public func complete(_ response: HTTPResponse) {
        loop?.enqueueCompletion(connectionID, response)
    }
}
