import UbiquityLock

/// A job for a reader thread: runs with a connection the thread checked out.
struct ReaderJob {
    let run: (Connection?) -> Void   // nil connection: the store is closing, fail the job
}

/// N reader threads for async callers: each job checks a connection out of `ReadConnections`
/// for its run. Jobs go to whichever thread is free.
final class ReaderPool: Sendable {
    let queue = JobQueue<ReaderJob>()
    private let threads: [NamedThread]

    init(count: Int, connections: ReadConnections, gate: ReaderGate) {
        let queue = self.queue
        threads = (0..<count).map { i in
            NamedThread(name: "ubq-reader-\(i)", stackSize: 1 << 22) {
                ThreadPriority.prepareStoreThread(nice: 0)
                while true {
                    let jobs = queue.pop(max: 1)
                    if jobs.isEmpty { break }
                    for j in jobs {
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

    func submit(_ job: ReaderJob) { if !queue.push(job) { job.run(nil) } }

    /// Closes the queue; threads finish queued jobs and exit.
    func shutdown() { queue.close(); threads.forEach { $0.join() } }
}
