import Dispatch
import Synchronization
import UbiquityLock

/// A job for a reader thread: runs with a connection the thread checked out.
struct ReaderJob {
    let run: (Connection?) -> Void   // nil connection: the store is closing, fail the job
    /// When it was queued behind busy readers (`DispatchTime` nanoseconds), for the
    /// `readerWaited` report; 0: a reader was free (or nobody listens).
    var queuedAt: UInt64 = 0

    init(run: @escaping (Connection?) -> Void) { self.run = run }
}

/// N reader threads for async callers: each job checks a connection out of `ReadConnections`
/// for its run. Jobs go to whichever thread is free.
final class ReaderPool: Sendable {
    let queue = JobQueue<ReaderJob>()
    private let threads: [NamedThread]
    private let count: Int
    /// Threads running a job (a relaxed per-store atomic: only read to tell whether a new job
    /// will wait, which `waited` reports).
    private let busy = BusyThreads()
    private let waited: (@Sendable (Double) -> Void)?

    init(count: Int, connections: ReadConnections, gate: ReaderGate, waited: (@Sendable (Double) -> Void)? = nil) {
        let queue = self.queue
        let busy = self.busy
        self.count = count
        self.waited = waited
        threads = (0..<count).map { i in
            NamedThread(name: "ubq-reader-\(i)", stackSize: 1 << 22) {
                ThreadPriority.prepareStoreThread(nice: 0)
                while true {
                    let jobs = queue.pop(max: 1)
                    if jobs.isEmpty { break }
                    for j in jobs {
                        if j.queuedAt != 0, let waited {
                            waited(Double(DispatchTime.now().uptimeNanoseconds &- j.queuedAt) / 1e9)
                        }
                        busy.n.add(1, ordering: .relaxed)
                        defer { busy.n.subtract(1, ordering: .relaxed) }
                        // Inside the gate whenever it has a connection (which may hold a
                        // snapshot, storage rule 4): the writer's waits see every such reader.
                        let t = gate.enter()
                        guard let conn = connections.checkout() else { gate.leave(t); j.run(nil); continue }
                        j.run(conn)
                        connections.checkin(conn)
                        gate.leave(t)
                    }
                }
            }
        }
    }

    func submit(_ job: ReaderJob) {
        var job = job
        if waited != nil, busy.n.load(ordering: .relaxed) >= count { job.queuedAt = DispatchTime.now().uptimeNanoseconds }
        if !queue.push(job) { job.run(nil) }
    }

    private final class BusyThreads: Sendable { let n = Atomic<Int>(0) }

    /// Closes the queue; threads finish queued jobs and exit.
    func shutdown() { queue.close(); threads.forEach { $0.join() } }
}
