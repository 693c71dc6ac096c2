import CLibUV
import Dispatch
import UbiquityLock
import UbiquityLoop
import SwiftProtobuf
#if canImport(Glibc)
import Glibc
#endif

/// Where a method's handler runs (docs/threading.md, rule 4).
public enum HandlerExecution: Sendable {
    /// An async handler in its own Swift `Task` (the default; any shape, may await).
    case task
    /// A synchronous unary handler run on the loop thread, inside the request's processing. Only
    /// for pure, bounded, non-blocking CPU work: no I/O, no waiting on locks, no sleeping.
    case inline
    /// A synchronous unary handler run on the server's fixed pool of blocking worker threads
    /// (`ServerConfiguration.blockingThreads`): may block briefly (a synchronous SQLite read).
    case blocking
}

/// Cancellation of a synchronous call as its handler sees it: a view of the call's `BlockingJob`
/// (the loop cancels it on deadline expiry, RST_STREAM, a closed connection and the end of the
/// shutdown grace period; a cancelled call's response is dropped). Inline calls are never
/// cancelled: they run to completion inside one loop turn.
public struct CallCancellation: Sendable {
    let job: BlockingJob?

    /// Never cancelled (inline handlers).
    static let never = CallCancellation(job: nil)

    /// True once the transport cancelled the call. Handlers doing long work poll it.
    public var isCancelled: Bool { job?.isCancelled ?? false }
}

/// What a synchronous handler knows about its call.
public struct SyncCallContext: Sendable {
    /// `/package.Service/Method`.
    public let path: String
    /// Request metadata (custom headers; `-bin` values decoded).
    public let metadata: Metadata
    /// When the client's `grpc-timeout` runs out, if it sent one.
    public let deadline: ContinuousClock.Instant?
    /// The peer's address, "ip:port".
    public let peer: String
    /// Set by the transport when the call is cancelled (deadline, reset, connection closed).
    public let cancellation: CallCancellation

    /// True once the call was cancelled; its response will be dropped.
    public var isCancelled: Bool { cancellation.isCancelled }

    /// Throws `CancellationError` once the call was cancelled.
    public func checkCancellation() throws {
        if cancellation.isCancelled { throw CancellationError() }
    }
}

/// The response of a synchronous unary handler: one message (unframed) and trailing metadata.
public struct SyncUnaryReply: Sendable {
    public var message: [UInt8]
    public var trailingMetadata: Metadata
    public init(_ message: [UInt8], trailingMetadata: Metadata = Metadata()) {
        self.message = message
        self.trailingMetadata = trailingMetadata
    }
}

/// A synchronous unary handler over raw message bytes. Returning ends the call with OK and the
/// reply; throwing ends it with `RPCError(converting:)`, exactly as an async handler's throw does.
public typealias SyncUnaryHandler = @Sendable (_ request: [UInt8], _ context: SyncCallContext) throws -> SyncUnaryReply

extension Router {
    /// Registers a raw synchronous unary method run `execution` (`.inline` or `.blocking`).
    public mutating func registerSync(_ path: String, execution: HandlerExecution, _ handler: @escaping SyncUnaryHandler) {
        precondition(execution != .task, "registerSync takes .inline or .blocking")
        // The async form is what a transport without sync support would run; this server never
        // calls it for these methods, but it keeps the descriptor complete and honest.
        let fallback: RawHandler = { call in
            let (bytes, _) = call.takeSingleRequest()
            let ctx = SyncCallContext(path: call.context.path, metadata: call.context.metadata,
                                      deadline: call.context.deadline, peer: call.context.peer,
                                      cancellation: .never)
            let reply = try handler(bytes ?? [], ctx)
            call.finish(message: reply.message, trailingMetadata: reply.trailingMetadata)
        }
        register(path, kind: .unary, execution: execution, sync: handler, fallback)
    }

    /// Registers a unary method whose handler runs on the loop thread (rule 4's exception): for
    /// pure, bounded, non-blocking CPU work only (see docs/threading.md for the criteria).
    public mutating func inlineUnary<Req: SwiftProtobuf.Message, Res: SwiftProtobuf.Message>(
        _ path: String, _ body: @escaping @Sendable (Req, SyncCallContext) throws -> Res
    ) {
        registerSync(path, execution: .inline) { bytes, ctx in
            SyncUnaryReply(try body(try Req(requestBytes: bytes), ctx).serializedBytes())
        }
    }

    /// Registers a unary method whose synchronous handler runs on a blocking worker thread.
    public mutating func blockingUnary<Req: SwiftProtobuf.Message, Res: SwiftProtobuf.Message>(
        _ path: String, _ body: @escaping @Sendable (Req, SyncCallContext) throws -> Res
    ) {
        registerSync(path, execution: .blocking) { bytes, ctx in
            SyncUnaryReply(try body(try Req(requestBytes: bytes), ctx).serializedBytes())
        }
    }

    /// Registers a blocking unary method that also sets trailing metadata.
    public mutating func blockingUnaryWithMetadata<Req: SwiftProtobuf.Message, Res: SwiftProtobuf.Message>(
        _ path: String, _ body: @escaping @Sendable (Req, SyncCallContext) throws -> UnaryResponse<Res>
    ) {
        registerSync(path, execution: .blocking) { bytes, ctx in
            let r = try body(try Req(requestBytes: bytes), ctx)
            return SyncUnaryReply(try r.message.serializedBytes(), trailingMetadata: r.trailingMetadata)
        }
    }
}

/// One blocking call, from the loop to a worker and back: the only object the handoff allocates
/// (it is the call's cancellation flag, the queued job and, captured alone, the closure that
/// carries the outcome back to the loop).
///
/// States: running → cancelled (loop: deadline, reset, connection closed) or running → completed
/// (worker, which then posts `finishOnLoop` to the loop under the same lock). Holding the lock
/// makes "cancelled, then the loop stops" and "posted" exclusive, so nothing is posted to a loop
/// that may already have stopped. The target (connection, stream) is dropped on cancel or when
/// the loop takes the outcome, which breaks the stream → job → stream cycle.
final class BlockingJob: Sendable {
    private static let running: UInt8 = 0, cancelled: UInt8 = 1, completed: UInt8 = 2
    private struct State {
        var phase = BlockingJob.running
        var target: LoopBound<(HTTP2Connection, StreamState)>?
        var outcome: Result<SyncUnaryReply, RPCError>?
    }
    private let state: Lock<State>
    let handler: SyncUnaryHandler
    let request: [UInt8]
    let path: String
    let metadata: Metadata
    let deadline: ContinuousClock.Instant?
    let peer: String
    let loop: EventLoop

    init(handler: @escaping SyncUnaryHandler, request: [UInt8], path: String, metadata: Metadata,
         deadline: ContinuousClock.Instant?, peer: String, target: LoopBound<(HTTP2Connection, StreamState)>) {
        self.handler = handler
        self.request = request
        self.path = path
        self.metadata = metadata
        self.deadline = deadline
        self.peer = peer
        self.loop = target.loop
        state = Lock(State(target: target))
    }

    var isCancelled: Bool { state.withLock { $0.phase == Self.cancelled } }

    /// What the handler sees of its call (built on the worker; the job is its cancellation).
    var context: SyncCallContext {
        SyncCallContext(path: path, metadata: metadata, deadline: deadline, peer: peer, cancellation: CallCancellation(job: self))
    }

    /// Loop side: cancels unless the handler already completed. True if this call did it.
    func cancel() -> Bool {
        state.withLock { s in
            guard s.phase == Self.running else { return false }
            s.phase = Self.cancelled
            s.target = nil
            return true
        }
    }

    /// Worker side: records the outcome and posts `finishOnLoop` to the loop, unless cancelled.
    func complete(_ outcome: Result<SyncUnaryReply, RPCError>) {
        state.withLock { s in
            guard s.phase == Self.running else { return }
            s.phase = Self.completed
            s.outcome = outcome
            loop.execute { self.finishOnLoop() }
        }
    }

    /// Loop thread: hands the outcome to the connection.
    private func finishOnLoop() {
        let (target, outcome) = state.withLock { s in
            defer { s.target = nil; s.outcome = nil }
            return (s.target, s.outcome)
        }
        guard let target, let outcome else { return }
        let (conn, stream) = target.get
        conn.blockingFinished(stream, outcome)
    }
}

/// A fixed pool of worker threads for `.blocking` handlers: loop → worker (one queue append and a
/// futex wake only for a worker that is asleep) → loop (`EventLoop.execute`, which batches).
/// Threads live until `shutdown()`.
///
/// Wake-ups: a worker drains the queue before it sleeps, and it registers as asleep (`sleeping`)
/// under the queue lock before waiting. `submit` wakes at most one sleeper per job queued, and
/// none when every worker is awake: an awake worker is bound to look at the queue (under the same
/// lock) before it sleeps again, so no job is stranded. The semaphore counts, so a signal that
/// arrives between "registered as asleep" and `wait()` is not lost. A woken worker that finds the
/// queue already emptied by another one simply registers again.
final class BlockingPool: Sendable {
    private struct Queue {
        var jobs: [BlockingJob] = []
        var head = 0
        /// Workers that registered as asleep and were not yet chosen to be woken.
        var sleeping = 0
        var stopping = false
    }
    private let queue = Lock(Queue())
    private let available = DispatchSemaphore(value: 0)
    private let threads = Lock<[pthread_t]>([])
    let size: Int

    init(threads count: Int) {
        size = max(1, count)
        for i in 0..<size {
            let box = Unmanaged.passRetained(WorkerStart(pool: self, name: "ubq-blocking-\(i)"))
            var tid = pthread_t()
            let rc = pthread_create(&tid, nil, { arg in
                let start = Unmanaged<WorkerStart>.fromOpaque(arg!).takeRetainedValue()
                ubq_set_thread_name_grpc(start.name)
                start.pool.work()
                return nil
            }, box.toOpaque())
            precondition(rc == 0, "pthread_create failed: \(rc)")
            threads.withLock { $0.append(tid) }
        }
    }

    /// Queues jobs in order under one lock (any thread); wakes only sleeping workers, at most one
    /// per job.
    func submit(_ jobs: [BlockingJob]) {
        let wake = queue.withLock { q -> Int in
            q.jobs.append(contentsOf: jobs)
            let n = min(q.sleeping, jobs.count)
            q.sleeping -= n
            return n
        }
        for _ in 0..<wake { available.signal() }
    }

    /// The next job, or nil once the pool is stopping and the queue is empty. Sleeps while there
    /// is nothing to do.
    private func next() -> BlockingJob? {
        while true {
            let job = queue.withLock { q -> BlockingJob?? in
                guard q.head < q.jobs.count else {
                    if q.stopping { return .some(nil) }
                    q.sleeping += 1
                    return nil
                }
                let job = q.jobs[q.head]
                q.head += 1
                if q.head == q.jobs.count {
                    q.jobs.removeAll(keepingCapacity: true)
                    q.head = 0
                } else if q.head >= 1024 && q.head * 2 >= q.jobs.count {
                    q.jobs.removeFirst(q.head)
                    q.head = 0
                }
                return .some(job)
            }
            if let job { return job }
            available.wait()
        }
    }

    private func work() {
        while let job = next() { Self.run(job) }
    }

    private static func run(_ job: BlockingJob) {
        if job.isCancelled { return } // cancelled while queued: nobody wants the answer
        let outcome: Result<SyncUnaryReply, RPCError>
        do {
            outcome = .success(try job.handler(job.request, job.context))
        } catch {
            outcome = .failure(RPCError(converting: error))
        }
        job.complete(outcome)
    }

    /// Lets queued jobs run, then ends and joins every worker.
    func shutdown() {
        let tids = threads.withLock { t -> [pthread_t] in defer { t.removeAll() }; return t }
        guard !tids.isEmpty else { return }
        let wake = queue.withLock { q -> Int in
            q.stopping = true
            defer { q.sleeping = 0 }
            return q.sleeping
        }
        for _ in 0..<wake { available.signal() }
        for tid in tids { pthread_join(tid, nil) }
    }
}

private final class WorkerStart {
    let pool: BlockingPool
    let name: String
    init(pool: BlockingPool, name: String) { self.pool = pool; self.name = name }
}

private func ubq_set_thread_name_grpc(_ name: String) {
    ubq_set_thread_name(String(name.prefix(15)))
}
