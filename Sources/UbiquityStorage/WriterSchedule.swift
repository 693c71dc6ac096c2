/// Where one store's writer queue stands on the shared writer threads (`WriterPool`): the
/// scheduling policy, as a value the pool keeps under its lock and the unit tests drive alone.
///
/// A queue is on the pool's ready list at most once and served by at most one thread at a time
/// (`running`), so its jobs run in order and its connection is used by one thread at a time
/// (docs/threading.md rule 18). A thread serves one batch (up to `maxGroupCommit` jobs: group
/// commit as before), then the queue goes to the back of the ready list if jobs are left, so a
/// busy store cannot starve the others.
struct WriterSchedule: Equatable {
    enum Phase: Equatable {
        /// No job queued, no thread on it (may have an idle deadline).
        case waiting
        /// On the pool's ready list.
        case ready
        /// A thread serves it.
        case running
        /// Its close step ran: it never runs again.
        case finished
    }

    /// What the thread that takes a ready queue does with it.
    enum Work: Equatable {
        /// Runs the queued jobs (a batch).
        case jobs
        /// No job came within the idle wait: the idle checkpoint (`WriterEngine.idleCheckpoint`).
        case idle
        /// Closing and drained: the close step (closing checkpoint, connection closed).
        case close
        /// Nothing left to do (the job that made it ready was taken by an earlier run).
        case nothing
    }

    private(set) var phase: Phase = .waiting
    private(set) var closing = false
    /// Monotonic nanoseconds at which an idle queue runs `.idle` (nil: it just waits).
    private(set) var idleDeadline: UInt64?
    private var idleDue = false

    /// A job is being queued. `accepted` false once closing (the job is refused);
    /// `schedule`: put the queue on the ready list.
    mutating func pushed() -> (accepted: Bool, schedule: Bool) {
        if closing { return (false, false) }
        idleDeadline = nil  // a job came within the idle wait
        idleDue = false
        return (true, becomeReady())
    }

    /// The store closes: queued jobs still run, then the close step. True: put it on the ready list.
    mutating func close() -> Bool {
        if closing { return false }
        closing = true
        idleDeadline = nil  // the close step replaces the idle checkpoint (and the pool forgets the deadline)
        return becomeReady()
    }

    /// The idle deadline may have passed. True: put it on the ready list.
    mutating func tick(now: UInt64) -> Bool {
        guard phase == .waiting, let d = idleDeadline, now >= d else { return false }
        idleDeadline = nil
        idleDue = true
        return becomeReady()
    }

    /// A thread takes the queue off the ready list.
    mutating func taken(hasJobs: Bool) -> Work {
        precondition(phase == .ready, "writer queue taken while \(phase)")
        phase = .running
        if hasJobs { idleDue = false; return .jobs }
        if closing { phase = .finished; return .close }
        if idleDue { idleDue = false; return .idle }
        return .nothing
    }

    /// The thread is done with its run. `idleWait`: nanoseconds the writer may wait for a job
    /// before its idle checkpoint (nil: no deadline). True: put it back on the ready list.
    mutating func served(hasJobs: Bool, now: UInt64, idleWait: UInt64?) -> Bool {
        precondition(phase == .running, "writer queue served while \(phase)")
        if hasJobs || closing { phase = .ready; return true }
        phase = .waiting
        idleDeadline = idleWait.map { now &+ $0 }
        return false
    }

    private mutating func becomeReady() -> Bool {
        guard phase == .waiting else { return false }
        phase = .ready
        return true
    }
}
