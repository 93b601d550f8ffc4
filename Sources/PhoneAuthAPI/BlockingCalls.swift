import EmulatorSupport
import HTTPServer
import PhoneAuthCore

/// Calls blocking functions (PhoneAuthCore/BlockingFunctions.swift) without ever holding an event loop or a store
/// lock while a function runs.
///
/// A flow that has a trigger configured answers `Reply.deferred` and runs on this pool: it reads what it needs in one
/// transaction, calls the function(s) with no lock held, then applies the reply in a second transaction that
/// re-checks what it depends on, and completes the call. The pool is small and bounded (`maxInFlight` calls
/// queued or running; more answer 503 `UNAVAILABLE` at once), and every call has a deadline (`timeoutMillis`,
/// production's 7 s by default, `--blocking-timeout-ms`), so a hanging function holds one pool thread for at most
/// that long and nothing else. The deadline of a flow's first call counts from when the flow was queued, not from when a
/// thread took it: a call that waited its whole deadline in the queue fails at once (`DEADLINE_EXCEEDED`), so a client
/// waits at most about one deadline however long the queue. Flows without a trigger never come here: `trigger` answers
/// nil after one atomic load until some configuration has named a function.
///
/// Handlers never call this directly: the two flows a function can reach each have one entry point that decides
/// once (SignInAndSend.swift) — `app.signIn` for every sign-in (beforeCreate / beforeSignIn through `signInHooks`,
/// between the sign-in's two transactions), `app.sendSMS` for every SMS send (`beforeSendSms`) and `app.sendEmail` for
/// every out-of-band email (`beforeSendEmail`, SendEmail.swift).
public final class BlockingCalls: Sendable {
    public let timeoutMillis: Int
    public let threads: Int
    public let maxInFlight: Int
    private struct State {
        var pool: WorkerPool?
        var inFlight = 0
    }
    private let state = Locked(State())

    /// Milliseconds of a monotonic clock (injected by tests).
    let now: @Sendable () -> Int64

    public init(timeoutMillis: Int = BlockingFunctions.defaultTimeoutMillis, threads: Int = 8, maxInFlight: Int = 256,
                now: @escaping @Sendable () -> Int64 = { Int64(HTTPClient.monotonicSeconds() * 1000) }) {
        self.timeoutMillis = max(1, timeoutMillis)
        self.threads = max(1, threads)
        self.maxInFlight = max(1, maxInFlight)
        self.now = now
    }

    /// Calls queued or running now (tests).
    public var inFlight: Int { state.withLock { $0.inFlight } }

    /// Stops the pool's threads (after queued calls finish).
    public func shutdown() {
        let pool = state.withLock { s -> WorkerPool? in let p = s.pool; s.pool = nil; return p }
        pool?.shutdown()
    }

    // MARK: configuration lookup

    /// The function configured for `event` in `key`'s store (a tenant falls back to its project's), or nil. One
    /// relaxed atomic load and nothing else until some configuration names a function.
    @inline(__always)
    func trigger(_ app: PhoneAuthApp, _ key: StoreKey, _ event: BlockingEvent) -> (uri: String, config: BlockingFunctionsConfig)? {
        guard BlockingFunctionsHint.mayBeConfigured else { return nil }
        return lookup(app, key, event)
    }

    private func lookup(_ app: PhoneAuthApp, _ key: StoreKey, _ event: BlockingEvent) -> (uri: String, config: BlockingFunctionsConfig)? {
        let own = app.emulator.config(key)
        let project = key.tenantId == nil ? nil : app.emulator.config(StoreKey(projectId: key.projectId))
        return ProjectConfig.blockingTrigger(event, own: own, project: project).map { (uri: $0.0, config: $0.1) }
    }

    /// Whether any of `events` has a function in `key`'s store.
    @inline(__always)
    public func anyTrigger(_ app: PhoneAuthApp, _ key: StoreKey, _ events: [BlockingEvent]) -> Bool {
        guard BlockingFunctionsHint.mayBeConfigured else { return false }
        return events.contains { lookup(app, key, $0) != nil }
    }

    // MARK: running a flow off the loop

    /// Runs `work` on the pool and answers `call` with what it returns or throws. Returns `Reply.deferred`, or throws
    /// 503 `UNAVAILABLE` when `maxInFlight` calls are already queued or running.
    func `defer`(_ app: PhoneAuthApp, _ call: Call, _ work: @escaping @Sendable () throws -> Reply) throws(AuthError) -> Reply {
        try submit(work, logger: app.logger, complete: call.complete)
        return .deferred
    }

    /// Queues `work` on the pool (with the caller's durability scope and the time it was queued, `QueuedFlow`), then
    /// `complete`s with its reply or error. 503 `UNAVAILABLE` when `maxInFlight` flows are queued or running.
    func submit(_ work: @escaping @Sendable () throws -> Reply, logger: Logger, complete: @escaping @Sendable (Reply) -> Void) throws(AuthError) {
        let scope = DurabilityScope.current
        let pool: WorkerPool? = state.withLock { s in
            guard s.inFlight < maxInFlight else { return nil }
            s.inFlight += 1
            if s.pool == nil { s.pool = WorkerPool(threads: threads) }
            return s.pool
        }
        guard let pool else {
            throw AuthError(.unavailable, "Too many blocking function calls are queued or running (\(maxInFlight)); try again shortly.")
        }
        let submitted = now()
        pool.submit { [self] in
            // What the flow waited for a thread (not what it does before its first call: signing the JWT, waiting for
            // the first key) counts against its first call's deadline.
            let queued = QueuedFlow(waited: max(0, now() - submitted))
            let reply: Reply = DurabilityScope.$current.withValue(scope) { QueuedFlow.$current.withValue(queued) {
                do { return try work() } catch { return Reply(error: AuthError.answering(error, logger: logger)) }
            } }
            state.withLock { $0.inFlight -= 1 }
            complete(reply)
        }
    }

    /// Milliseconds a function call may take: the deadline, less — for a flow's first call — the time the flow waited
    /// in the queue for a thread. Zero or less: the deadline passed before the call could start.
    func callBudget() -> Int64 {
        Int64(timeoutMillis) - (QueuedFlow.current?.takeWait() ?? 0)
    }

    // MARK: the call

    /// Calls `event`'s function (if one is configured) for `ctx` and parses its answer. Blocking: run it on the pool
    /// only, with no transaction open. nil when no function is configured for the event.
    func invoke(_ app: PhoneAuthApp, _ key: StoreKey, _ ctx: BlockingEventContext) throws(AuthError) -> BlockingFunctions.Outcome? {
        guard let (uri, config) = trigger(app, key, ctx.event) else { return nil }
        let timeoutSeconds = Int64((timeoutMillis + 999) / 1000)
        let claims = BlockingFunctions.claims(ctx, uri: uri, config: config, nowSeconds: app.emulator.clock.nowSeconds(), timeoutSeconds: timeoutSeconds,
                                              eventId: app.emulator.random.token(byteCount: 16), fields: app.emulator.userFields)
        let jwt: String
        do { jwt = try app.tokens.sign(claims) } catch let e as AuthError { throw e } catch { throw AuthError.internalError("Cannot sign the blocking function JWT: \(error)") }
        let body = Array(JSON.object(["data": ["jwt": .string(jwt)]]).serializedString.utf8)
        let started = now()
        let leftMillis = callBudget()
        /// Logs the call and emits `blockingFunction.called` (`result`: ok, error, timeout or blocked).
        func log(_ outcome: String, _ result: CallOutcome) {
            let ms = max(0, now() - started)
            app.logger.info("blocking function \(ctx.event.rawValue)", [("project", key.description), ("uri", uri),
                                                                       ("ms", String(ms)), ("outcome", outcome)])
            app.emulator.events.emit(key, .blockingFunctionCalled(event: ctx.event.rawValue, uri: uri, durationMs: Int(ms), outcome: result.rawValue))
        }
        guard leftMillis > 0 else {
            log("deadline exceeded while queued", .timeout)
            throw BlockingFunctions.deadlineExceeded(uri: uri)
        }
        let response: HTTPClient.Response
        do {
            response = try HTTPClient.send(method: "POST", url: uri, headers: [("Content-Type", "application/json")], body: body,
                                           timeout: Double(leftMillis) / 1000, deadline: Double(leftMillis) / 1000,
                                           maxResponseBytes: BlockingFunctions.maxReplyBytes)
        } catch {
            log(error.timedOut ? "deadline exceeded" : "failed: \(error.description)", error.timedOut ? .timeout : .error)
            throw error.timedOut ? BlockingFunctions.deadlineExceeded(uri: uri) : BlockingFunctions.requestFailed(uri: uri)
        }
        guard (200..<300).contains(response.status) else {
            log("HTTP \(response.status): \(String(decoding: response.body.prefix(200), as: UTF8.self))",
                Self.isRefusal(response) ? .blocked : .error)
            throw BlockingFunctions.httpError(uri: uri, status: response.status, body: response.body)
        }
        do {
            let outcome = try BlockingFunctions.parseReply(response.body, event: ctx.event)
            log(Self.describe(outcome), .ok)
            return outcome
        } catch {
            log("refused reply: \(error.description)", .error)
            throw error
        }
    }

    /// `blockingFunction.called`'s `outcome`.
    enum CallOutcome: String {
        /// The function answered 2xx with a reply we accept.
        case ok
        /// Unreachable, a 5xx, or a reply we refuse (not JSON, no updateMask, reserved claims…).
        case error
        /// No answer before the deadline.
        case timeout
        /// The function refused the operation: a 4xx with an `{"error": {…}}` body (an `HttpsError` it threw).
        case blocked
    }

    /// Whether a non-2xx answer is the function refusing (firebase-functions answers a thrown `HttpsError` with its
    /// 4xx status and `{"error": {"status", "message"}}`; an unexpected exception is a 500 `INTERNAL`).
    static func isRefusal(_ r: HTTPClient.Response) -> Bool {
        guard (400..<500).contains(r.status), let body = try? JSONParser.parse(r.body, maxDepth: 8), case .object? = body["error"] else {
            return false
        }
        return true
    }

    static func describe(_ o: BlockingFunctions.Outcome) -> String {
        var parts: [String] = []
        if o.displayName != nil { parts.append("displayName") }
        if o.photoUrl != nil { parts.append("photoUrl") }
        if let d = o.disabled { parts.append("disabled=\(d)") }
        if o.emailVerified != nil { parts.append("emailVerified") }
        if o.customAttributes != nil { parts.append("customClaims") }
        if o.sessionClaims != nil { parts.append("sessionClaims") }
        return parts.isEmpty ? "allowed" : "allowed, sets " + parts.joined(separator: ",")
    }

    /// The request facts every event carries.
    func context(_ event: BlockingEvent, _ call: Call, _ key: StoreKey, user: UserRecord?) -> BlockingEventContext {
        var ctx = BlockingEventContext(event: event, projectId: key.projectId, tenantId: key.tenantId, user: user,
                                       ipAddress: call.request.remoteAddress)
        ctx.userAgent = call.request.headers["user-agent"].map { String($0.prefix(512)) }
        ctx.locale = call.request.headers["accept-language"].flatMap { Self.locale($0) }
        return ctx
    }

    /// The first language tag of an `Accept-Language` header (`en-US,en;q=0.9` → `en-US`), if it looks like one.
    static func locale(_ header: String) -> String? {
        guard let first = header.split(separator: ",").first?.split(separator: ";").first?.trimmingSpaces(), !first.isEmpty,
              first.utf8.count <= 35, first.utf8.allSatisfy({ ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2D })
        else { return nil }
        return first
    }

    /// beforeCreate (when the candidate is new) then, unless the user is disabled by then, beforeSignIn — on the user
    /// as it would be saved. Returns the combined changes and session claims. The sign-in pipeline's hook
    /// (`PhoneAuthApp.signIn`): runs on the pool, between the sign-in's transactions, with none open.
    func signInHooks(_ app: PhoneAuthApp, _ call: Call, _ key: StoreKey, _ candidate: SignInCandidate) throws(AuthError) -> BlockingFunctions.Outcome {
        var total = BlockingFunctions.Outcome()
        var current = candidate.user
        if candidate.isNew {
            var ctx = context(.beforeCreate, call, key, user: current)
            ctx.signInMethod = candidate.method
            ctx.federated = candidate.federated
            if let o = try invoke(app, key, ctx) {
                o.apply(to: &current)
                total = total.then(o)
            }
        }
        if !current.disabled {
            var ctx = context(.beforeSignIn, call, key, user: current)
            ctx.signInMethod = candidate.method
            ctx.secondFactor = candidate.secondFactor
            ctx.federated = candidate.federated
            if let o = try invoke(app, key, ctx) { total = total.then(o) }
        }
        return total
    }

    /// beforeSendSms for an SMS to `phone`; throws what blocks the send. `user`: the account concerned, if any.
    /// `recaptchaScore`: the reCAPTCHA bot score when SMS defense assessed the send (`recaptcha_score`). Returns the
    /// function's `recaptchaActionOverride`, if any.
    func beforeSendSms(_ app: PhoneAuthApp, _ call: Call, _ key: StoreKey, phone: String, type: BlockingSMSType, user: UserRecord?,
                       recaptchaScore: Double? = nil) throws(AuthError) -> RecaptchaOverride? {
        var ctx = context(.beforeSendSms, call, key, user: user)
        ctx.phoneNumber = phone
        ctx.smsType = type
        ctx.recaptchaScore = recaptchaScore
        if type != .signIn { ctx.signInMethod = nil }
        return try invoke(app, key, ctx)?.recaptchaActionOverride
    }
}

extension BlockingCalls {
    /// beforeSendEmail for an email of `type` to `email` (`email`, `email_type` in the JWT); throws what blocks the
    /// send: the function's error, or `INVALID_RECAPTCHA_TOKEN` when it answers `recaptchaActionOverride: "BLOCK"`.
    func beforeSendEmail(_ app: PhoneAuthApp, _ call: Call, _ key: StoreKey, email: String, type: OobCode.RequestType,
                         user: UserRecord?) throws(AuthError) {
        var ctx = context(.beforeSendEmail, call, key, user: user)
        ctx.email = email.lowercased()
        ctx.emailType = BlockingEmailType(type)
        if try invoke(app, key, ctx)?.recaptchaActionOverride == .block {
            throw AuthError(.invalidRecaptchaToken, "The beforeSendEmail function blocked the email (recaptchaActionOverride BLOCK).")
        }
    }
}

/// How long a deferred flow waited in the queue for a pool thread (`BlockingCalls.submit`): its first function call's
/// deadline counts that wait.
final class QueuedFlow: Sendable {
    @TaskLocal static var current: QueuedFlow?
    private let wait: Locked<Int64?>
    init(waited: Int64) { wait = Locked(waited) }
    /// The wait, once (later calls of the same flow have their own whole deadline).
    func takeWait() -> Int64? { wait.withLock { w in defer { w = nil }; return w } }
}
