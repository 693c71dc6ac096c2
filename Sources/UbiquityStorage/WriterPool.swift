import Foundation
import Synchronization
import UbiquityLock

/// A store's side of the shared writer threads: its queue of jobs and its schedule, both guarded
/// by the pool's lock, and the run a thread makes of it (outside the lock).
protocol WriterPoolMember: AnyObject, Sendable {
    /// Under the pool's lock.
    var schedule: WriterSchedule { get set }
    /// Under the pool's lock: it is in the pool's list of queues with an idle deadline.
    var isTimed: Bool { get set }
    /// Under the pool's lock.
    var hasJobs: Bool { get }
    /// Under the pool's lock, when `taken` said `.jobs`: moves the next batch out of the queue.
    func takeBatch()
    /// Outside the lock, on the thread that took the queue; returns the idle wait in nanoseconds
    /// (see `WriterSchedule.served`).
    func run(_ work: WriterSchedule.Work) -> UInt64?
}

/// The writer threads every store shares (docs/threading.md rule 18): a fixed most of
/// `ubq-writer-N` threads, started as queues get ready with every thread busy, never more than
/// `maxThreads`; they live as long as the process. One pool per writer nice value (rule 14: a
/// thread's nice value is set once, at its start); ubiquityd uses one.
final class WriterPool: @unchecked Sendable {
    // Invariant: `ready`, `timed`, `threads`, `busy`, `maxThreads` and every member's schedule,
    // timer flag and queued jobs are accessed only while `cond` is locked.
    // NSCondition, not `Lock`: idle threads wait on it for a ready queue or a deadline.
    private let cond = NSCondition()
    private var ready = FIFOQueue<any WriterPoolMember>()
    /// Waiting queues with an idle deadline (checked when a thread finds nothing ready).
    private var timed: [any WriterPoolMember] = []
    private var threads: [NamedThread] = []
    /// Threads serving a queue now.
    private var busy = 0
    private var maxThreads: Int
    let nice: Int

    private init(nice: Int, maxThreads: Int) {
        self.nice = nice
        self.maxThreads = maxThreads
        cond.lock(); startThread(); cond.unlock()  // one at once: the first save need not start it
    }

    private static let pools = Locked<[Int: WriterPool]>([:])
    /// Hard bound on writer threads per pool, whatever the configuration says.
    static let threadLimit = StorageConfiguration.writerThreadLimit

    /// The pool for writers at `nice`, with room for at least `maxThreads` threads (at most `threadLimit`).
    static func shared(nice: Int, maxThreads: Int) -> WriterPool {
        let want = min(max(1, maxThreads), threadLimit)
        let pool = pools.withLock { p in
            if let existing = p[nice] { return existing }
            let made = WriterPool(nice: nice, maxThreads: want)
            p[nice] = made
            return made
        }
        pool.cond.lock(); pool.maxThreads = max(pool.maxThreads, want); pool.cond.unlock()
        return pool
    }

    /// Threads started so far.
    var threadCount: Int { cond.lock(); defer { cond.unlock() }; return threads.count }

    /// Queues a job: `append` runs under the pool's lock if the member's schedule accepts one.
    /// False once the member is closing.
    func submit(_ m: any WriterPoolMember, _ append: () -> Void) -> Bool {
        cond.lock(); defer { cond.unlock() }
        let (accepted, schedule) = m.schedule.pushed()
        if accepted { append() }
        if schedule { makeReady(m) }
        return accepted
    }

    /// `body` under the pool's lock (to read a member's queue).
    func locked<R>(_ body: () -> R) -> R { cond.lock(); defer { cond.unlock() }; return body() }

    /// Starts the member's close: its queued jobs run, then its close step (once).
    func close(_ m: any WriterPoolMember) {
        cond.lock(); defer { cond.unlock() }
        if m.schedule.close() { makeReady(m) }
    }

    /// Called with `cond` locked.
    private func makeReady(_ m: any WriterPoolMember) {
        ready.append(m)
        if ready.count > threads.count - busy && threads.count < maxThreads { startThread() }
        cond.signal()
    }

    /// Called with `cond` locked.
    private func startThread() {
        let i = threads.count
        threads.append(NamedThread(name: "ubq-writer-\(i)", stackSize: 1 << 23) { [self] in
            ThreadPriority.prepareStoreThread(nice: nice)
            serve()
        })
    }

    private func serve() {
        cond.lock()
        while true {
            if let m = ready.popFirst() {
                busy += 1
                let work = m.schedule.taken(hasJobs: m.hasJobs)
                if work == .jobs { m.takeBatch() }
                cond.unlock()
                let wait = m.run(work)
                let now = DispatchTime.now().uptimeNanoseconds
                cond.lock()
                busy -= 1
                guard work != .close else { continue }
                // To the back of the list when jobs are left: the other ready stores go first.
                if m.schedule.served(hasJobs: m.hasJobs, now: now, idleWait: wait) {
                    ready.append(m)
                } else if m.schedule.idleDeadline != nil && !m.isTimed {
                    m.isTimed = true
                    timed.append(m)
                }
                continue
            }
            let now = DispatchTime.now().uptimeNanoseconds
            var next: UInt64?
            timed.removeAll { m in
                if m.schedule.tick(now: now) { ready.append(m); m.isTimed = false; return true }
                guard let d = m.schedule.idleDeadline else { m.isTimed = false; return true }
                next = min(next ?? d, d)
                return false
            }
            if !ready.isEmpty { continue }
            if let next {
                _ = cond.wait(until: Date(timeIntervalSinceNow: Double(next &- now) / 1e9))
            } else {
                cond.wait()
            }
        }
    }
}

/// One store's writer (storage rule 1): its one connection and its queue of jobs, served by the
/// shared writer threads one batch at a time, so concurrent saves still share one transaction
/// (group commit). The connection belongs to the thread serving the queue for that run
/// (`enter` adopts it, `leave` releases it: `ConnectionOwner`).
///
/// The connection may open late: with `connection` nil, the first run with jobs opens it
/// (`connect`, on that writer thread). A store opened only to be read then never pays for it
/// (docs/storage.md rule 10). If `connect` throws, that batch's jobs fail with the error
/// (`fail`) and the next batch tries again; idle and close steps of a writer never opened do
/// nothing but `afterClose` and the finished signal.
final class WriterQueue<Job>: WriterPoolMember, @unchecked Sendable {
    // Invariant: `schedule`, `isTimed` and `jobs` are accessed only under the pool's lock;
    // `batch` and the connection only by the thread serving the queue (the schedule's `running`
    // phase, entered and left under that lock, hands them from one thread to the next).
    var schedule = WriterSchedule()
    var isTimed = false
    private var jobs = FIFOQueue<Job>()
    private var batch: [Job] = []
    private var conn: Connection?
    /// Set once `conn` is (read from any thread: tests and statistics).
    private let connected: Atomic<Bool>
    private let connect: () throws -> Connection
    private let fail: (Error, [Job]) -> Void
    private let pool: WriterPool
    private let maxBatch: Int
    private let handler: (Connection, [Job]) -> Void
    private let idle: () -> Double?
    private let onIdle: (Connection) -> Void
    private let enter: (Connection) -> Void
    private let leave: (Connection) -> Void
    private let onClose: (Connection) -> Void
    private let afterClose: () -> Void
    private let finished = DispatchSemaphore(value: 0)

    /// `connection`, if given, must be released (`releaseThread`); nil: `connect` opens it on the
    /// writer thread before the first batch (and `fail` completes a batch it could not open for).
    /// `nice`: the writer's CPU priority (its pool's threads run at it; docs/threading.md rule 14).
    /// `idle`: asked after each run; a number of seconds means "if no job comes within that long,
    /// run `onIdle`". `enter`/`leave`: around every run, on the serving thread (adopt and release
    /// the connections the writer owns). `onClose` runs before the connection closes, `afterClose`
    /// after (or alone, for a writer never opened).
    init(connection: Connection?, connect: @escaping @Sendable () throws -> Connection = { throw StorageError(.internalError, "writer has no connection") },
         fail: @escaping @Sendable (Error, [Job]) -> Void = { _, _ in },
         maxBatch: Int, nice: Int = 0, maxThreads: Int,
         handler: @escaping @Sendable (Connection, [Job]) -> Void,
         idle: @escaping @Sendable () -> Double? = { nil }, onIdle: @escaping @Sendable (Connection) -> Void = { _ in },
         enter: @escaping @Sendable (Connection) -> Void = { $0.adoptThread() },
         leave: @escaping @Sendable (Connection) -> Void = { $0.releaseThread() },
         onClose: @escaping @Sendable (Connection) -> Void, afterClose: @escaping @Sendable () -> Void = {}) {
        conn = connection
        connected = Atomic(connection != nil)
        self.connect = connect; self.fail = fail
        self.maxBatch = max(1, maxBatch)
        self.handler = handler; self.idle = idle; self.onIdle = onIdle
        self.enter = enter; self.leave = leave; self.onClose = onClose; self.afterClose = afterClose
        pool = WriterPool.shared(nice: nice, maxThreads: maxThreads)
    }

    /// True once the writer's connection is open (from the start, or since its first batch).
    var isConnected: Bool { connected.load(ordering: .acquiring) }

    var hasJobs: Bool { !jobs.isEmpty }

    func takeBatch() {
        let n = min(maxBatch, jobs.count)
        batch.reserveCapacity(n)
        for _ in 0..<n { batch.append(jobs.popFirst()!) }
    }

    func run(_ work: WriterSchedule.Work) -> UInt64? {
        if conn == nil && work == .jobs {
            do {
                conn = try connect()  // opened on this thread: `enter` finds it already its own
                connected.store(true, ordering: .releasing)
            } catch {
                let b = batch
                batch = []
                fail(error, b)
                return nil
            }
        }
        guard let conn else {
            // Never opened: nothing to checkpoint or close.
            if work == .close {
                afterClose()
                finished.signal()
            }
            return nil
        }
        enter(conn)
        switch work {
        case .jobs:
            let b = batch
            batch = []
            handler(conn, b)
        case .idle:
            onIdle(conn)
        case .close:
            onClose(conn)
            conn.close()
            afterClose()
            finished.signal()
            return nil
        case .nothing:
            break
        }
        let wait = idle().map { UInt64(max(0, $0) * 1e9) }
        leave(conn)
        return wait
    }

    /// Jobs queued and not yet taken by a run.
    var queuedJobs: Int { pool.locked { jobs.count } }

    /// False if the store is closing (the job was not queued).
    func submit(_ job: Job) -> Bool { pool.submit(self) { jobs.append(job) } }

    /// Queued jobs run, then the close step; returns once it has. Never from one of this store's
    /// own writer jobs (it would wait for itself).
    func shutdown() {
        pool.close(self)
        finished.wait()
    }
}
