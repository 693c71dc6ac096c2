import Foundation
import UbiquityLock

/// A job for a reader thread: runs with a connection the thread checked out (nil: the store is
/// closing, fail the job) and returns what to do once the connection is back, such as resuming
/// its caller — so a caller's next read finds the connection free instead of opening another.
struct ReaderJob {
    let run: (Connection?) -> () -> Void
}

/// The reader threads every store shares (docs/threading.md rule 18): `ubq-reader-N`, as many as
/// the largest `readerCount` of any store opened (at most `threadLimit`), for the life of the
/// process. Jobs go to whichever thread is free.
final class ReaderThreads: Sendable {
    static let shared = ReaderThreads()
    /// Hard bound on reader threads, whatever the configuration says.
    static let threadLimit = 64
    private let queue = JobQueue<@Sendable () -> Void>()
    private let threads = Lock<[NamedThread]>([])

    /// Starts threads until there are `count` (at most `threadLimit`).
    func ensure(_ count: Int) {
        let queue = self.queue
        threads.withLock { t in
            while t.count < min(count, Self.threadLimit) {
                t.append(NamedThread(name: "ubq-reader-\(t.count)", stackSize: 1 << 22) {
                    ThreadPriority.prepareStoreThread(nice: 0)
                    while true {
                        for job in queue.pop(max: 1) { job() }
                    }
                })
            }
        }
    }

    var count: Int { threads.withLock { $0.count } }

    func submit(_ job: @escaping @Sendable () -> Void) { _ = queue.push(job) }
}

/// One store's reads on the shared reader threads: each job checks a connection out of the
/// store's `ReadConnections` for its run. A thread whose store has every connection out waits for
/// one (held by another reader, which gives it back without waiting for anything).
final class ReaderPool: @unchecked Sendable {
    // Invariant: `pending` and `closed` are accessed only while `cond` is locked.
    // NSCondition, not `Lock`: `shutdown` waits on it for the store's queued reads.
    private let cond = NSCondition()
    private var pending = 0
    private var closed = false
    private let connections: ReadConnections
    private let gate: ReaderGate

    init(count: Int, connections: ReadConnections, gate: ReaderGate) {
        self.connections = connections
        self.gate = gate
        ReaderThreads.shared.ensure(max(1, count))
    }

    func submit(_ job: ReaderJob) {
        cond.lock()
        let accepted = !closed
        if accepted { pending += 1 }
        cond.unlock()
        guard accepted else { job.run(nil)(); return }
        let (connections, gate) = (self.connections, self.gate)
        let run = UncheckedSendable(job.run)
        ReaderThreads.shared.submit { [self] in
            // Inside the gate whenever it has a connection (which may hold a snapshot, storage
            // rule 4): the writer's waits see every such reader.
            let t = gate.enter()
            let done: () -> Void
            if let conn = connections.checkout() {
                done = run.value(conn)
                connections.checkin(conn)
            } else {
                done = run.value(nil)
            }
            gate.leave(t)
            done()
            cond.lock(); pending -= 1; if pending == 0 { cond.broadcast() }; cond.unlock()
        }
    }

    /// Refuses further jobs and waits for the queued ones to finish. Never from one of this
    /// store's own reader jobs (it would wait for itself).
    func shutdown() {
        cond.lock()
        closed = true
        while pending > 0 { cond.wait() }
        cond.unlock()
    }
}

/// Carries a value the compiler cannot prove `Sendable` into a `@Sendable` closure.
struct UncheckedSendable<T>: @unchecked Sendable {
    // Invariant: the value is used by one thread at a time (the queue's lock orders the hand-over).
    let value: T
    init(_ value: T) { self.value = value }
}
