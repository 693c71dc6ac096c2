import Foundation
import Synchronization
import UbiquityLock

/// A lock-protected value shared by reference (the store's state is handed to its threads):
/// UbiquityLock's `Lock` in a class, so it is `Sendable` by construction.
final class Locked<T>: Sendable {
    private let lock: Lock<T>
    init(_ v: sending T) { lock = Lock(v) }
    func withLock<R, E: Error>(_ body: (inout sending T) throws(E) -> sending R) throws(E) -> sending R {
        try lock.withLock(body)
    }
}

/// A blocking FIFO shared by pool threads: a `FIFOQueue` under a condition variable (NSCondition,
/// not `Lock`: the pop side waits for a push).
final class JobQueue<Job>: @unchecked Sendable {
    // Invariant: `items` and `closed` are only accessed while `cond` is locked.
    private let cond = NSCondition()
    private var items = FIFOQueue<Job>()
    private var closed = false

    /// False if the queue is closed (the job was not queued).
    func push(_ j: Job) -> Bool {
        cond.lock(); defer { cond.unlock() }
        if closed { return false }
        items.append(j)
        cond.signal()
        return true
    }

    /// Blocks until at least one job is queued; returns up to `max` jobs, or [] once closed and drained.
    func pop(max: Int) -> [Job] {
        cond.lock(); defer { cond.unlock() }
        while items.isEmpty && !closed { cond.wait() }
        return take(max: max)
    }

    /// `pop`, but nil if nothing was queued within `timeout` seconds (the queue still open).
    func pop(max: Int, timeout: Double) -> [Job]? {
        cond.lock(); defer { cond.unlock() }
        let deadline = Date(timeIntervalSinceNow: timeout)
        while items.isEmpty && !closed {
            if !cond.wait(until: deadline) && items.isEmpty && !closed { return nil }
        }
        return take(max: max)
    }

    /// Up to `max` queued jobs, oldest first. Called with `cond` locked.
    private func take(max: Int) -> [Job] {
        let n = Swift.min(max, items.count)
        var out: [Job] = []
        out.reserveCapacity(n)
        for _ in 0..<n { out.append(items.popFirst()!) }
        return out
    }

    var isEmpty: Bool { cond.lock(); defer { cond.unlock() }; return items.isEmpty }
    var count: Int { cond.lock(); defer { cond.unlock() }; return items.count }

    func close() { cond.lock(); closed = true; cond.broadcast(); cond.unlock() }
}

/// A job for a reader thread: runs with a connection the thread checked out.
struct ReaderJob {
    let run: (Connection?) -> Void   // nil connection: the store is closing, fail the job
}

/// The store's read-only connections (rule 2). A thread checks one out, uses it alone, and checks
/// it back in; the lock orders the hand-over, so each connection is used by one thread at a time
/// (SQLite NOMUTEX connections allow that). Blocking request handlers read this way on their own
/// thread; async callers go through `ReaderPool`, whose threads do the same.
///
/// A connection may come back holding its read transaction (`HeldSnapshot`, storage rule 4):
/// such a snapshot is ended (by whichever thread next has the connection) once it is `holdNanos`
/// old, or once `releaseSnapshots` has been called since it began. The sweeper thread ends the
/// expired snapshots of idle connections, so no snapshot outlives its hold by more than one job.
final class ReadConnections: @unchecked Sendable {
    // Invariant: `free`, `out`, `closed`, `sweeperIdle`, `ending` and `endWaiters` are only accessed while `cond` is
    // locked. A connection in `free` is touched by no thread (the lock holder may read its
    // `heldSnapshot`); a checked-out one only by the thread that checked it out, until it checks
    // it back in. `releaseEpoch` is atomic: bumped by `releaseSnapshots`, read anywhere. `sweeper`
    // is written in init (before `self` is shared) and read only by `close`.
    private let cond = NSCondition()
    private var free: [Connection]
    private var out = 0
    private var closed = false
    /// How long a read transaction may be kept for later jobs (0: never kept).
    let holdNanos: UInt64
    /// Snapshots that began before the latest bump must not serve another job.
    let releaseEpoch = Atomic<UInt64>(0)
    private var sweeperIdle = true
    /// Idle connections checked out by `endIdleSnapshots` and not back yet.
    private var ending = 0
    private var endWaiters = 0
    private let sweeperWake = DispatchSemaphore(value: 0)
    /// Written once, in init; joined by `close` (nil when snapshots are never held).
    private var sweeper: NamedThread?

    init(count: Int, holdNanos: UInt64 = 0, open: () throws -> Connection) throws {
        var conns: [Connection] = []
        do { for _ in 0..<count { conns.append(try open()) } } catch { conns.forEach { $0.close() }; throw error }
        for c in conns { c.releaseThread() }  // free connections belong to no thread
        free = conns
        self.holdNanos = holdNanos
        if holdNanos > 0 {
            sweeper = NamedThread(name: "ubq-snapshots", stackSize: 1 << 18) { [self] in
                ThreadPriority.prepareStoreThread(nice: 0)
                sweep()
            }
        }
    }

    /// Waits for a free connection; nil once closed.
    func checkout() -> Connection? {
        cond.lock(); defer { cond.unlock() }
        while free.isEmpty && !closed { cond.wait() }
        if closed { return nil }
        out += 1
        let c = free.removeLast()
        c.adoptThread()
        return c
    }

    /// Returns a connection. A snapshot it holds stays only if it is still young enough and no
    /// `releaseSnapshots` came since it began (checked under the lock that `releaseSnapshots`
    /// takes after its bump, so one of the two ends it).
    func checkin(_ c: Connection) {
        if let s = c.heldSnapshot, !mayKeep(s, now: DispatchTime.now().uptimeNanoseconds) { ReadConnections.endSnapshot(c) }
        cond.lock()
        if let s = c.heldSnapshot, s.epoch != releaseEpoch.load(ordering: .sequentiallyConsistent) {
            cond.unlock()
            ReadConnections.endSnapshot(c)
            cond.lock()
        }
        c.releaseThread()
        free.append(c)
        out -= 1
        if endWaiters > 0 { cond.broadcast() } else { cond.signal() }
        var wake = false
        if c.heldSnapshot != nil && sweeperIdle { sweeperIdle = false; wake = true }
        cond.unlock()
        if wake { sweeperWake.signal() }
    }

    /// True if `s` may serve another job (age and release epoch; the caller checks generation and model).
    func mayKeep(_ s: HeldSnapshot, now: UInt64) -> Bool {
        now &- s.began < holdNanos && s.epoch == releaseEpoch.load(ordering: .sequentiallyConsistent)
    }

    /// Ends a connection's held read transaction (the calling thread owns the connection).
    static func endSnapshot(_ c: Connection) {
        c.heldSnapshot = nil
        if !c.isAutocommit {
            do { try c.run("COMMIT") } catch { try? c.exec("ROLLBACK") }
        }
    }

    /// Ends every held snapshot: idle connections' now (on the calling thread, which checks them
    /// out for it), checked-out ones' when their job ends (they no longer qualify). Called by the
    /// writer before it checkpoints or closes the reader gate (rule 5).
    func releaseSnapshots() {
        if holdNanos == 0 { return }
        releaseEpoch.add(1, ordering: .sequentiallyConsistent)
        endIdleSnapshots { _ in true }
        cond.lock()
        endWaiters += 1
        while ending > 0 { cond.wait() }  // the sweeper's, ended in a moment
        endWaiters -= 1
        cond.unlock()
    }

    /// Checks out the idle connections whose snapshot `expired` says to end, ends them, checks
    /// them back in. True if an idle connection still holds a snapshot afterwards.
    @discardableResult
    private func endIdleSnapshots(_ expired: (HeldSnapshot) -> Bool) -> Bool {
        cond.lock()
        var taken: [Connection] = []
        free.removeAll { c in
            guard let s = c.heldSnapshot, expired(s) else { return false }
            taken.append(c)
            return true
        }
        out += taken.count
        ending += taken.count
        cond.unlock()
        for c in taken { c.adoptThread(); ReadConnections.endSnapshot(c); c.releaseThread() }
        cond.lock(); defer { cond.unlock() }
        free.append(contentsOf: taken)
        out -= taken.count
        ending -= taken.count
        if !taken.isEmpty { cond.broadcast() }
        let stillHeld = free.contains { $0.heldSnapshot != nil }
        if !stillHeld && out == 0 { sweeperIdle = true }
        return stillHeld || out > 0
    }

    /// The sweeper thread: while any snapshot may be held, every quarter hold (at least 1 ms)
    /// ends the idle connections' expired ones; sleeps on `sweeperWake` otherwise.
    private func sweep() {
        let tick = max(holdNanos / 4, 1_000_000)
        while true {
            sweeperWake.wait()
            while true {
                if (cond.withLockRead { closed }) { return }
                // A timed wait, not a sleep: `close` signals and joins this thread, and should not
                // wait out a tick. A checkin's signal taken here only ends one tick early.
                _ = sweeperWake.wait(timeout: .now() + .nanoseconds(Int(tick)))
                if (cond.withLockRead { closed }) { return }
                let now = DispatchTime.now().uptimeNanoseconds
                if !endIdleSnapshots({ [self] s in !mayKeep(s, now: now) }) { break }
            }
        }
    }

    /// Refuses further checkouts, waits for the checked-out connections to come back, closes all.
    func close() {
        cond.lock()
        closed = true
        cond.broadcast()
        while out > 0 { cond.wait() }
        let conns = free
        free = []
        cond.unlock()
        sweeperWake.signal()
        sweeper?.join()
        for c in conns { c.adoptThread(); ReadConnections.endSnapshot(c); c.close() }
    }
}

extension NSCondition {
    func withLockRead<R>(_ body: () -> R) -> R { lock(); defer { unlock() }; return body() }
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

/// Lets the writer restart the WAL without waiting for readers (rule 5).
///
/// Normal path (no reader ever waits): after a commit past the checkpoint threshold the writer
/// calls `waitForReadersInside` (bounded): the readers already inside finish, new ones keep
/// entering. Then its PASSIVE checkpoint can copy the whole WAL back, readers that start after
/// that read the database file only (WAL read mark 0), and once the ones from before are gone
/// (a second bounded wait) a TRUNCATE checkpoint needs nobody to wait.
///
/// Fallback, when the WAL has grown past twice its bound anyway: the writer closes the gate:
/// reader jobs that have not started wait (at most `maxWait` seconds, then go ahead anyway),
/// jobs in flight finish, and when the last one leaves, `onDrained` asks the writer to
/// TRUNCATE-checkpoint (which then finds no reader) and reopen.
final class ReaderGate: @unchecked Sendable {
    // Invariant: every field is accessed only while `cond` is locked; `onDrained` and
    // `releaseSnapshots` are set once while the store opens, before any save can reach the
    // writer (their only caller besides `leave`), and only read afterwards.
    private let cond = NSCondition()
    private var closed = false
    private var active = 0
    private var notified = false
    private let maxWait: Double
    /// Tickets of the readers inside, oldest first (tickets are handed out in increasing order).
    private var inside: [UInt64] = []
    private var nextTicket: UInt64 = 0
    private var waiters = 0
    /// A reader a bounded wait gave up on: later waits do not wait for it again.
    private var stuck: UInt64? = nil
    private var closures = 0
    /// Called with this gate (so the closure need not capture it: a gate holding a closure that
    /// holds the gate was a cycle that leaked every store's gate and read connections).
    var onDrained: (@Sendable (ReaderGate) -> Void)?
    /// Ends the read transactions reader connections keep between jobs
    /// (`ReadConnections.releaseSnapshots`); called, outside the lock, first thing in
    /// `waitForReadersInside` and `close`, so that both see only readers in flight.
    var releaseSnapshots: (@Sendable () -> Void)?

    init(maxWait: Double) { self.maxWait = maxWait }

    /// Readers that have entered since the gate was made (a count that only grows): the writer
    /// compares it between WAL restarts to tell whether anyone read the store meanwhile.
    var entries: UInt64 {
        cond.lock(); defer { cond.unlock() }
        return nextTicket
    }

    /// Enters; pass the returned ticket to `leave`.
    func enter() -> UInt64 {
        cond.lock()
        if closed {
            let deadline = Date(timeIntervalSinceNow: maxWait)
            while closed && cond.wait(until: deadline) {}
        }
        active += 1
        let t = nextTicket
        nextTicket += 1
        inside.append(t)
        cond.unlock()
        return t
    }

    func leave(_ ticket: UInt64) {
        cond.lock()
        active -= 1
        if let i = inside.firstIndex(of: ticket) { inside.remove(at: i) }
        if waiters > 0 { cond.broadcast() }
        let fire = closed && active == 0 && !notified
        if fire { notified = true }
        cond.unlock()
        if fire { onDrained?(self) }
    }

    /// Waits until every reader inside at the call has left, at most `timeout` seconds; readers
    /// may enter meanwhile (the gate stays open). False if one is still inside; a reader that
    /// made a wait time out is not waited for again.
    func waitForReadersInside(timeout: Double) -> Bool {
        releaseSnapshots?()
        cond.lock(); defer { cond.unlock() }
        let horizon = nextTicket
        guard let first = inside.first, first < horizon else { return true }
        if first == stuck { return false }
        let deadline = Date(timeIntervalSinceNow: timeout)
        waiters += 1
        defer { waiters -= 1 }
        while let f = inside.first, f < horizon {
            if !cond.wait(until: deadline) {
                if let f = inside.first, f < horizon { stuck = f; return false }
                return true
            }
        }
        return true
    }

    /// Closes the gate; true if no reader is in flight (the caller may restart right away).
    func close() -> Bool {
        // Flag first: a snapshot that begins after the release below is not kept past its job.
        closedFlag.store(true, ordering: .sequentiallyConsistent)
        releaseSnapshots?()
        cond.lock(); defer { cond.unlock() }
        if closed { return false }
        closed = true
        closures += 1
        notified = active == 0
        return active == 0
    }

    func open() {
        cond.lock(); closed = false; notified = false; closedFlag.store(false, ordering: .sequentiallyConsistent); cond.broadcast(); cond.unlock()
    }

    /// `isClosed` without the lock (true from just before `close` ends held snapshots until
    /// `open`): a reader keeps no snapshot past its job while it is set.
    let closedFlag = Atomic<Bool>(false)

    var isClosed: Bool { cond.lock(); defer { cond.unlock() }; return closed }
    /// Times the gate was closed (WAL past twice its bound).
    var closeCount: Int { cond.lock(); defer { cond.unlock() }; return closures }
}

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
