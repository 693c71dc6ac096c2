/// A stream's life as a value: each state holds exactly what is valid in it, the connection
/// reports events, and the returned action says what to do to nghttp2, the call or its job.
/// No nghttp2 and no loop here: unit-tested alone (`StreamStateMachineTests`). Loop thread only,
/// like its stream. The shape is grpc-swift's `GRPCStreamStateMachine` and Hummingbird's
/// connection manager; `ConnectionLifecycle` is the connection's counterpart.
///
///     receivingHeaders ──admitted──▶ receivingRequest ──requestEnded──▶ handling ──▶ answered ──▶ closed
///            │                             │   (client streaming: at admission)   │
///            └── rejected / stalled ───────┴── failed / deadline (sync) ──────────┘
///
/// The request side and the response side run together once the handler started (a
/// client-streaming call answers while it still receives), so `handling` carries both. Before
/// that only an ending answer (Trailers-Only) can go out, which is why `receivingRequest` has
/// no response side. What a stream keeps outside the cases stays on `StreamState`: buffers it
/// reuses across calls (its `RequestHead`, its `MessageDeframer`) and a synchronous call's
/// request, reply and deadline (`Admitted.sync` and `Runner.reply` say why).
struct StreamStateMachine {
    /// What an admitted call runs on until its handler starts.
    enum Admitted {
        /// `.task`: request messages go to the call as they arrive.
        case task(ServerCall)
        /// `.inline` / `.blocking`: the one request message waits in `StreamState.request` until
        /// END_STREAM, and the deadline in `StreamState.deadline`. (Storage, not payload: a
        /// `ContinuousClock.Instant` is a resilient standard-library type, and in a payload it
        /// made every copy, switch and store of these enums go through runtime value witnesses,
        /// 43.8k instead of 22.6k instructions per Ping; the message cost an event per call.)
        case sync
    }

    /// Where a started handler's answer comes from.
    enum Runner {
        /// The handler's `Task` fills the call's output queue.
        case task(ServerCall)
        /// A synchronous handler is running: inline on this thread right now (`job` nil), or a
        /// `.blocking` job queued or running on a worker.
        case sync(job: BlockingJob?)
        /// A synchronous handler replied; nghttp2's data provider reads the reply out of
        /// `StreamState.reply`. (Kept there, not here: a `SyncReply` in this payload made every
        /// state large enough to be copied and destroyed through runtime value witnesses, and
        /// W0 went from 22.6k to 29.1k instructions per Ping, callgrind.)
        case reply
    }

    enum Response: Equatable {
        case notStarted
        /// Response HEADERS and a data provider are submitted.
        case streaming
        /// nghttp2 asked for DATA the handler did not have yet (NGHTTP2_ERR_DEFERRED).
        case deferred
    }

    struct Handling {
        let kind: RPCKind
        var runner: Runner
        /// Request DATA is still read (false once the request failed: the rest is discarded).
        var readsRequest: Bool
        var response: Response
    }

    /// What a stream that already answered must still settle when it closes.
    enum Leftover {
        case nothing
        /// Request bytes whose flow-control credit the call may still hold back.
        case task(ServerCall)
        /// A `.blocking` job whose handler may still run (cancelled, or its outcome on its way).
        case job(BlockingJob)
    }

    enum State {
        /// The request's header block is arriving; nothing is decided yet.
        case receivingHeaders
        /// Admitted (`RequestHead.admit`): the request is arriving and no handler runs yet
        /// (unary and server-streaming calls start at END_STREAM).
        case receivingRequest(MethodDescriptor, Admitted)
        /// The handler started, or a `.task` call is being ended by the transport; its answer
        /// goes out through the one response path.
        case handling(Handling)
        /// The status went out (Trailers-Only or trailers) or could not be sent: nothing more is
        /// read or sent; nghttp2 closes the stream when both sides are done.
        case answered(Leftover)
        /// nghttp2 closed the stream (or the connection closed).
        case closed
    }

    enum Event {
        /// The header block passed `RequestHead.admit`.
        case admitted(MethodDescriptor, Admitted)
        /// The header block was refused: answer Trailers-Only with this status.
        // `indirect` on the cases that carry an RPCError (error paths only): boxed, they keep
        // every Event and Action pointer-sized, so the hot path copies them inline (see
        // `Runner.reply`) and allocates nothing for them.
        indirect case rejected(RPCError, httpStatus: Int)
        /// END_STREAM, after a complete request.
        case requestEnded
        /// The request broke a rule (a bad message, it stopped arriving): nothing more is read,
        /// and the call ends with this status.
        indirect case requestFailed(RPCError)
        /// A `.blocking` handler was queued on the worker pool.
        case jobQueued(BlockingJob)
        /// A synchronous handler replied (inline: at once; `.blocking`: from its worker); the
        /// connection put the reply in `StreamState.reply`.
        case syncReplied
        /// A synchronous handler threw, or its reply broke the send limit.
        indirect case syncFailed(RPCError)
        /// A `.task` call whose response has not started has news: output (`pending` bytes),
        /// headers it wants sent now, or its end (a status is set). The connection keeps the
        /// call's view it read these from: its status and initial metadata go into the action.
        // `pending` first: (Int, Bool, Bool) packs into 10 bytes, (Bool, Int, Bool) took 17 and
        // made every Event larger than its other cases need (~80 instructions per Ping, callgrind).
        case callUpdated(pending: Int, wantsHeaders: Bool, ended: Bool)
        /// A `.task` call whose response started has more output (or its status).
        case outputReady
        /// nghttp2 refused the response HEADERS.
        case responseNotStarted
        /// The data provider found no output (it returned NGHTTP2_ERR_DEFERRED).
        case responseDeferred
        /// The data provider handed out the last bytes and the status: trailers follow.
        case responseFinished
        /// The `grpc-timeout` deadline passed.
        case deadlineExpired
        /// nghttp2 closed the stream (`reason` .reset) or the connection is closing.
        case closed(CancelReason)
    }

    /// What a closing stream asks of the connection.
    struct Release {
        /// The call or job to cancel (the stream ended before it answered).
        var cancel: Cancel?
        /// A `.task` call whose held-back flow-control credit goes back to the connection.
        var creditFrom: ServerCall?
        /// No job can still post an outcome to this stream: its object may serve another one.
        var reusable: Bool
    }

    enum Cancel {
        case call(ServerCall, CancelReason)
        case job(BlockingJob)
    }

    enum Action {
        case none
        /// Answer with HEADERS + END_STREAM carrying the status (gRPC's Trailers-Only).
        indirect case respondTrailersOnly(RPCError, httpStatus: Int)
        /// Cancel the `.blocking` job (the deadline passed), then answer Trailers-Only.
        indirect case cancelJobAndRespond(BlockingJob, RPCError)
        /// Submit response HEADERS and a data provider (a `.task` call's with the initial
        /// metadata of the view its `callUpdated` came from).
        case startResponse
        /// Answer Trailers-Only with the status of the view the `callUpdated` came from.
        case respondWithCallStatus
        /// Tell nghttp2 the deferred stream has DATA again.
        case resumeData
        /// Submit the trailers carrying the status the data provider returned.
        case submitTrailers
        /// Start the handler's `Task`; `halfClosed`: the request is complete (tell the call first).
        case startTask(ServerCall, RawHandler, halfClosed: Bool)
        /// Run the synchronous handler (inline) or queue it (`.blocking`) on the request in
        /// `StreamState.request`, then report `syncReplied` / `syncFailed` / `jobQueued`.
        case runSync(MethodDescriptor)
        /// The client half-closed a running client-streaming call.
        case finishInbound(ServerCall)
        /// End the `.task` call from the transport with this status, then report `callUpdated`.
        indirect case failCall(ServerCall, RPCError)
        /// Cancel the `.task` call; `overrideStatus`: it ends with the reason's status (report
        /// `callUpdated` after), else its answer is dropped.
        case cancelCall(ServerCall, CancelReason, overrideStatus: Bool)
        /// The stream is gone: settle what it leaves behind.
        case release(Release)
    }

    private(set) var state = State.receivingHeaders

    // MARK: queries the connection asks between events

    /// What the connection asks between events: a function of `state` (`init(of:)` is the
    /// definition; `StreamStateMachineTests` checks it after every event), kept beside it by
    /// the transitions. A trivial stored value because the machine lives in a class field
    /// (`StreamState`): a computed query read through it copied the whole enum with its
    /// payloads first (~12 times per call); deriving it from the whole state after every event
    /// was ~235 instructions per Ping, setting it per transition is a few stores.
    struct Summary: Equatable {
        /// The admitted call's shape (nil before admission and once answered).
        var kind: RPCKind?
        /// A `.task` call is there to take request messages or produce output (`call`).
        var hasTaskCall = false
        /// Request DATA is read (otherwise it is discarded and its credit given back at once).
        var readsRequest = false
        /// Nothing started and nothing answered: a request that stops arriving now is failed.
        var awaitsRequest = true
        /// Request header fields are kept (after the response started they are trailers).
        var keepsHeaderFields = true
        /// A `.task` call whose response has not started: its news must be looked at
        /// (`callUpdated` needs the call's view, a lock); once it started, only `outputReady`.
        var wantsCallView = false
        /// The status went out (or the stream is gone): later news is ignored.
        var isAnswered = false

        init() {}

        init(of state: State) {
            switch state {
            case .receivingHeaders: self.init()
            case .receivingRequest(let method, let admitted): self.init(receiving: method.kind, admitted)
            case .handling(let h): self.init(h)
            case .answered, .closed: self = .finished
            }
        }

        init(receiving kind: RPCKind, _ admitted: Admitted) {
            self.kind = kind
            if case .task = admitted { hasTaskCall = true }
            readsRequest = true
        }

        init(_ h: Handling) {
            kind = h.kind
            if case .task = h.runner {
                hasTaskCall = true
                wantsCallView = h.response == .notStarted
            }
            readsRequest = h.readsRequest
            awaitsRequest = false
            keepsHeaderFields = h.response == .notStarted
        }

        static let finished: Summary = {
            var s = Summary()
            s.awaitsRequest = false
            s.keepsHeaderFields = false
            s.isAnswered = true
            return s
        }()
    }

    private(set) var summary = Summary()

    /// The `.task` call, while it may still take request messages or produce output. Reads the
    /// payload: ask `summary.hasTaskCall` first on hot paths.
    var call: ServerCall? {
        switch state {
        case .receivingRequest(_, .task(let c)): return c
        case .handling(let h):
            if case .task(let c) = h.runner { return c }
            return nil
        default: return nil
        }
    }

    // MARK: transitions

    mutating func event(_ event: Event) -> Action {
        switch state {
        case .receivingHeaders:
            return receivingHeaders(event)
        case .receivingRequest(let method, let admitted):
            return receivingRequest(method, admitted, event)
        case .handling(var h):
            // Taken out of the enum while it changes (no second reference to its call or job to
            // retain and release); `receivingHeaders` marks "unchanged", as no transition leads there.
            state = .receivingHeaders
            let action = handling(&h, event)
            if case .receivingHeaders = state { handle(h) }
            return action
        case .answered(let leftover):
            return answered(leftover, event)
        case .closed:
            return .none
        }
    }

    private mutating func receivingHeaders(_ event: Event) -> Action {
        switch event {
        case .admitted(let method, let admitted):
            receive(method, admitted)
            // A client-streaming handler reads the request as it arrives: it starts now.
            if method.kind.clientStreams, case .task(let call) = admitted {
                handle(Handling(kind: method.kind, runner: .task(call), readsRequest: true, response: .notStarted))
                return .startTask(call, method.handler, halfClosed: false)
            }
            return .none
        case .rejected(let status, let httpStatus):
            answer(.nothing)
            return .respondTrailersOnly(status, httpStatus: httpStatus)
        case .requestFailed(let status):
            answer(.nothing)
            return .respondTrailersOnly(status, httpStatus: 200)
        case .closed:
            return closeWithNothingLeft()
        default:
            return .none
        }
    }

    private mutating func receivingRequest(_ method: MethodDescriptor, _ admitted: Admitted, _ event: Event) -> Action {
        switch (event, admitted) {
        case (.requestEnded, .task(let call)):
            handle(Handling(kind: method.kind, runner: .task(call), readsRequest: true, response: .notStarted))
            return .startTask(call, method.handler, halfClosed: true)
        case (.requestEnded, .sync):
            handle(Handling(kind: method.kind, runner: .sync(job: nil), readsRequest: true, response: .notStarted))
            return .runSync(method)
        case (.requestFailed(let status), .task(let call)):
            handle(Handling(kind: method.kind, runner: .task(call), readsRequest: false, response: .notStarted))
            return .failCall(call, status)
        case (.requestFailed(let status), .sync):
            answer(.nothing)
            return .respondTrailersOnly(status, httpStatus: 200)
        case (.deadlineExpired, .task(let call)):
            handle(Handling(kind: method.kind, runner: .task(call), readsRequest: true, response: .notStarted))
            return .cancelCall(call, .deadline, overrideStatus: true)
        case (.deadlineExpired, .sync):
            answer(.nothing)
            return .respondTrailersOnly(CancelReason.deadline.status, httpStatus: 200)
        case (.closed(let reason), .task(let call)):
            return closeCancelling(call, reason)
        case (.closed, .sync):
            return closeWithNothingLeft()
        default:
            return .none
        }
    }

    /// `state` is `.receivingHeaders` while this runs; it becomes `h` unless this sets another.
    private mutating func handling(_ h: inout Handling, _ event: Event) -> Action {
        switch (event, h.runner) {
        case (.requestEnded, .task(let call)) where h.readsRequest:
            return .finishInbound(call)
        case (.requestFailed(let status), .task(let call)) where h.readsRequest:
            h.readsRequest = false
            return .failCall(call, status)
        case (.jobQueued(let job), .sync(nil)):
            h.runner = .sync(job: job)
            return .none
        case (.syncReplied, .sync):
            h.runner = .reply
            h.response = .streaming
            return .startResponse
        case (.syncFailed(let status), .sync):
            answer(.nothing)
            return .respondTrailersOnly(status, httpStatus: 200)
        case (.callUpdated(let pending, let wantsHeaders, let ended), .task(let call)):
            switch h.response {
            case .notStarted:
                if pending == 0 && !wantsHeaders {
                    // Nothing sent yet and the call is over: Trailers-Only.
                    guard ended else { return .none }
                    answer(.task(call))
                    return .respondWithCallStatus
                }
                h.response = .streaming
                return .startResponse
            case .deferred:
                h.response = .streaming
                return .resumeData
            case .streaming:
                return .none
            }
        case (.outputReady, .task) where h.response == .deferred:
            h.response = .streaming
            return .resumeData
        case (.responseNotStarted, .task(let call)):
            answer(.task(call))
            return .cancelCall(call, .protocolError, overrideStatus: false)
        case (.responseNotStarted, _):
            answer(.nothing)
            return .none
        case (.responseDeferred, _) where h.response == .streaming:
            h.response = .deferred
            return .none
        case (.responseFinished, .task(let call)):
            answer(.task(call))
            return .submitTrailers
        case (.responseFinished, _):
            answer(.nothing)
            return .submitTrailers
        case (.deadlineExpired, .task(let call)):
            return .cancelCall(call, .deadline, overrideStatus: true)
        case (.deadlineExpired, .sync(let job?)):
            answer(.job(job))
            return .cancelJobAndRespond(job, CancelReason.deadline.status)
        case (.deadlineExpired, .reply):
            answer(.nothing)
            return .respondTrailersOnly(CancelReason.deadline.status, httpStatus: 200)
        case (.closed(let reason), .task(let call)):
            return closeCancelling(call, reason)
        case (.closed, .sync(let job)):
            close()
            return .release(Release(cancel: job.map { .job($0) }, creditFrom: nil, reusable: job == nil))
        case (.closed, .reply):
            return closeWithNothingLeft()
        default:
            return .none
        }
    }

    private mutating func answered(_ leftover: Leftover, _ event: Event) -> Action {
        switch (event, leftover) {
        case (.syncReplied, .job), (.syncFailed, .job):
            // The job's outcome came after the answer (a deadline): nothing is left to wait for.
            answer(.nothing)
            return .none
        case (.closed, .task(let call)):
            close()
            return .release(Release(cancel: nil, creditFrom: call, reusable: true))
        case (.closed, .job):
            close()
            return .release(Release(cancel: nil, creditFrom: nil, reusable: false))
        case (.closed, .nothing):
            return closeWithNothingLeft()
        default:
            return .none
        }
    }

    // Every transition goes through one of these, so `summary` always matches `state`.

    private mutating func receive(_ method: MethodDescriptor, _ admitted: Admitted) {
        state = .receivingRequest(method, admitted)
        summary = Summary(receiving: method.kind, admitted)
    }

    private mutating func handle(_ h: Handling) {
        state = .handling(h)
        summary = Summary(h)
    }

    private mutating func answer(_ leftover: Leftover) {
        state = .answered(leftover)
        summary = .finished
    }

    private mutating func close() {
        state = .closed
        summary = .finished
    }

    /// Closed before its `.task` call answered: cancel the call, take back its held credit.
    private mutating func closeCancelling(_ call: ServerCall, _ reason: CancelReason) -> Action {
        close()
        return .release(Release(cancel: .call(call, reason), creditFrom: call, reusable: true))
    }

    private mutating func closeWithNothingLeft() -> Action {
        close()
        return .release(Release(cancel: nil, creditFrom: nil, reusable: true))
    }
}
