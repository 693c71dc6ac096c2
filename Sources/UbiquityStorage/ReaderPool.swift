import Dispatch
import Foundation
import Synchronization
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
    /// Threads running a job. Relaxed: only read to tell whether a new job will wait, which
    /// `ReaderPool`'s `waited` report measures.
    private let busy = Atomic<Int>(0)
    /// Threads started (mirrors `threads.count` without its lock, for `allBusy`).
    private let started = Atomic<Int>(0)

    /// Starts threads until there are `count` (at most `threadLimit`).
    func ensure(_ count: Int) {
        let queue = self.queue
        threads.withLock { t in
            while t.count < min(count, Self.threadLimit) {
                t.append(NamedThread(name: "ubq-reader-\(t.count)", stackSize: 1 << 22) { [self] in
                    ThreadPriority.prepareStoreThread(nice: 0)
                    while true {
                        for job in queue.pop(max: 1) {
                            self.busy.add(1, ordering: .relaxed)
                            job()
                            self.busy.subtract(1, ordering: .relaxed)
                        }
                    }
                })
            }
            started.store(t.count, ordering: .relaxed)
        }
    }

    var count: Int { threads.withLock { $0.count } }
    /// Whether a job submitted now would queue behind busy threads.
    var allBusy: Bool { busy.load(ordering: .relaxed) >= started.load(ordering: .relaxed) }

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

    /// Reported when a read queued behind busy reader threads (`StorageObserver.readerWaited`).
    private let waited: (@Sendable (Double) -> Void)?

    init(count: Int, connections: ReadConnections, gate: ReaderGate, waited: (@Sendable (Double) -> Void)? = nil) {
        self.connections = connections
        self.gate = gate
        self.waited = waited
        ReaderThreads.shared.ensure(max(1, count))
    }

    /// Reads of this store queued or running (sampled for the metrics' reader queue depth).
    var queuedJobs: Int { cond.lock(); defer { cond.unlock() }; return pending }

    func submit(_ job: ReaderJob) {
        cond.lock()
        let accepted = !closed
        if accepted { pending += 1 }
        cond.unlock()
        guard accepted else { job.run(nil)(); return }
        let (connections, gate) = (self.connections, self.gate)
        let run = UncheckedSendable(job.run)
        // A clock read only when someone listens and the read will wait.
        let queuedAt = waited != nil && ReaderThreads.shared.allBusy ? DispatchTime.now().uptimeNanoseconds : 0
        ReaderThreads.shared.submit { [self] in
            if queuedAt != 0, let waited {
                waited(Double(DispatchTime.now().uptimeNanoseconds &- queuedAt) / 1e9)
            }
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
