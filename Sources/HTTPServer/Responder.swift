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
    /// Which request of the connection this is (hooks registered late must not apply to the next one).
    let requestNumber: UInt64

    /// A context that answers nowhere (for calling a responder directly in tests).
    public static let detached = ResponseContext(loop: nil, connectionID: 0, requestNumber: 0)

    init(loop: EventLoop?, connectionID: UInt64, requestNumber: UInt64) {
        self.loop = loop
        self.connectionID = connectionID
        self.requestNumber = requestNumber
    }

    /// Answers the request; safe from any thread. Only the first answer counts.
    public func complete(_ response: HTTPResponse) {
        loop?.enqueueCompletion(connectionID, requestNumber, response)
    }

    /// Runs `job` later on the event loop that holds this request, after the events at hand are served: for work
    /// that costs a few hundred microseconds (signing a token), cheaper than handing it to another thread and back.
    /// Call it only while responding, on the loop (from `respond(to:context:)`); the job must not block. Returns
    /// false, and queues nothing, when the loop's queue is full, the loop is stopping or this is not its thread:
    /// run the work elsewhere then. The job answers with `complete(_:)` as usual.
    public func runOnLoop(_ job: @escaping @Sendable () -> Void) -> Bool {
        loop?.runLater(job) ?? false
    }

    /// Registers `hook` to run once if the client goes away before this request is answered: the connection
    /// closes, fails, or the peer shuts its sending side (a client that half-closes with a request in flight that
    /// registered a hook is treated as gone, as Go's and Node's servers do). The connection is then closed and the
    /// request is never answered. Runs on the event loop thread, so keep it short (unregister, cancel a timer).
    /// If the client is already gone when this is called, `hook` runs soon after; if the request has been answered,
    /// it never runs. Safe from any thread; call it before `complete`.
    public func onClose(_ hook: @escaping @Sendable () -> Void) {
        loop?.enqueueCloseHook(connectionID, requestNumber, hook)
    }
}
