import Dispatch
import UbiquityLock
import UbiquityLoop

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
    let connection: ConnectionLocal
    let loop: EventLoop

    init(handler: @escaping SyncUnaryHandler, request: [UInt8], path: String, metadata: Metadata,
         deadline: ContinuousClock.Instant?, peer: String, connection: ConnectionLocal, loop: EventLoop,
         target: LoopBound<(HTTP2Connection, StreamState)>?) {
        self.handler = handler
        self.request = request
        self.path = path
        self.metadata = metadata
        self.deadline = deadline
        self.peer = peer
        self.connection = connection
        self.loop = loop
        state = Lock(State(target: target))
    }

    var isCancelled: Bool { state.withLock { $0.phase == Self.cancelled } }

    /// What the handler sees of its call (built on the worker; the job is its cancellation).
    var context: SyncCallContext {
        SyncCallContext(path: path, metadata: metadata, deadline: deadline, peer: peer, connection: connection,
                        cancellation: CallCancellation(job: self))
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
        var jobs = FIFOQueue<BlockingJob>()
        /// Workers that registered as asleep and were not yet chosen to be woken.
        var sleeping = 0
        var stopping = false
    }
    private let queue = Lock(Queue())
    private let available = DispatchSemaphore(value: 0)
    private let threads = Lock<[NamedThread]>([])
    let size: Int

    init(threads count: Int) {
        size = max(1, count)
        for i in 0..<size {
            let thread = NamedThread(name: "ubq-blocking-\(i)") { [self] in work() }
            threads.withLock { $0.append(thread) }
        }
    }

    /// Queues jobs in order under one lock (any thread); wakes only sleeping workers, at most one
    /// per job.
    func submit(_ jobs: [BlockingJob]) {
        let wake = queue.withLock { q -> Int in
            for job in jobs { q.jobs.append(job) }
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
                guard let job = q.jobs.popFirst() else {
                    if q.stopping { return .some(nil) }
                    q.sleeping += 1
                    return nil
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
        let workers = threads.withLock { t -> [NamedThread] in defer { t.removeAll() }; return t }
        guard !workers.isEmpty else { return }
        let wake = queue.withLock { q -> Int in
            q.stopping = true
            defer { q.sleeping = 0 }
            return q.sleeping
        }
        for _ in 0..<wake { available.signal() }
        for worker in workers { worker.join() }
    }
}
