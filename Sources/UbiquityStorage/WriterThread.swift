import UbiquityLock

/// Hands a non-Sendable connection to the thread that will own it.
final class ConnectionBox: @unchecked Sendable {
    // Invariant: written once at init on the creating thread, taken exactly once by the owning thread
    // (pthread_create happens-after init), never touched again.
    private var conn: Connection?
    init(_ c: Connection) { conn = c }
    func take() -> Connection { let c = conn!; conn = nil; return c }
}

/// The single writer thread (rule 1): owns the writer connection, drains its queue in batches
/// so concurrent saves share one transaction (group commit).
final class WriterThread<Job>: Sendable {
    let queue = JobQueue<Job>()
    private let thread: NamedThread

    /// `nice`: the thread's CPU priority (0: the process's; `ThreadPriority`, docs/threading.md rule 14).
    /// `idle`: asked before the thread waits for jobs; a number of seconds means "if no job comes
    /// within that long, call `onIdle`" (nil: just wait).
    init(connection: Connection, maxBatch: Int, nice: Int = 0, handler: @escaping @Sendable (Connection, [Job]) -> Void,
         idle: @escaping @Sendable () -> Double? = { nil }, onIdle: @escaping @Sendable (Connection) -> Void = { _ in },
         onClose: @escaping @Sendable (Connection) -> Void) {
        let box = ConnectionBox(connection)
        let queue = self.queue
        thread = NamedThread(name: "ubq-writer", stackSize: 1 << 23) {
            ThreadPriority.prepareStoreThread(nice: nice)
            let conn = box.take()
            conn.adoptThread()
            while true {
                let jobs: [Job]
                if let wait = idle() {
                    guard let j = queue.pop(max: maxBatch, timeout: wait) else { onIdle(conn); continue }
                    jobs = j
                } else {
                    jobs = queue.pop(max: maxBatch)
                }
                if jobs.isEmpty { break }
                handler(conn, jobs)
            }
            onClose(conn)
            conn.close()
        }
    }

    func submit(_ job: Job) -> Bool { queue.push(job) }
    func shutdown() { queue.close(); thread.join() }
}
