import Foundation

/// Mutex-protected value.
final class Locked<T>: @unchecked Sendable {
    // Invariant: `value` is only accessed inside `withLock`, under `lock`.
    private let lock = NSLock()
    private var value: T
    init(_ v: T) { value = v }
    func withLock<R>(_ body: (inout T) throws -> R) rethrows -> R {
        lock.lock(); defer { lock.unlock() }
        return try body(&value)
    }
}

/// A blocking FIFO shared by pool threads.
final class JobQueue<Job>: @unchecked Sendable {
    // Invariant: `items`, `head` and `closed` are only accessed while `cond` is locked.
    private let cond = NSCondition()
    private var items: [Job] = []
    private var head = 0
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
        while head == items.count && !closed { cond.wait() }
        let n = Swift.min(max, items.count - head)
        let out = Array(items[head..<head + n])
        head += n
        if head == items.count { items.removeAll(keepingCapacity: true); head = 0 } else if head > 1024 { items.removeFirst(head); head = 0 }
        return out
    }

    var isEmpty: Bool { cond.lock(); defer { cond.unlock() }; return head == items.count }
    var count: Int { cond.lock(); defer { cond.unlock() }; return items.count - head }

    func close() { cond.lock(); closed = true; cond.broadcast(); cond.unlock() }
}

/// A job for a reader thread: runs with the thread's connection.
struct ReaderJob {
    let run: (Connection?) -> Void   // nil connection: the pool is closing, fail the job
}

/// N reader threads, each owning one read-only connection (rule 2). Jobs go to whichever
/// thread is free.
final class ReaderPool: Sendable {
    let queue = JobQueue<ReaderJob>()
    private let done = DispatchGroup()

    init(count: Int, gate: ReaderGate, open: @escaping @Sendable () throws -> Connection) throws {
        // Open all connections first so a failure leaves no thread behind.
        var conns: [Connection] = []
        do { for _ in 0..<count { conns.append(try open()) } } catch { conns.forEach { $0.close() }; throw error }
        for (i, c) in conns.enumerated() {
            let box = ConnectionBox(c)
            done.enter()
            let t = Thread { [queue, done] in
                let conn = box.take()
                while true {
                    let jobs = queue.pop(max: 1)
                    if jobs.isEmpty { break }
                    for j in jobs { gate.enter(); j.run(conn); gate.leave() }
                }
                conn.close()
                done.leave()
            }
            t.name = "ubq-reader-\(i)"
            t.stackSize = 1 << 22
            t.start()
        }
    }

    func submit(_ job: ReaderJob) { if !queue.push(job) { job.run(nil) } }

    /// Closes the queue; threads finish queued jobs, close their connections and exit.
    func shutdown() { queue.close(); done.wait() }
}

/// Lets the writer restart the WAL without waiting for readers (rule 5). When the WAL has grown
/// past its bound, the writer closes the gate: reader jobs that have not started wait (at most
/// `maxWait` seconds, then go ahead anyway), jobs in flight finish, and when the last one leaves,
/// `onDrained` asks the writer to TRUNCATE-checkpoint (which then finds no reader) and reopen.
final class ReaderGate: @unchecked Sendable {
    // Invariant: every field is accessed only while `cond` is locked; `onDrained` is set once
    // before any reader thread starts and only read afterwards.
    private let cond = NSCondition()
    private var closed = false
    private var active = 0
    private var notified = false
    private let maxWait: Double
    var onDrained: (@Sendable () -> Void)?

    init(maxWait: Double) { self.maxWait = maxWait }

    func enter() {
        cond.lock()
        if closed {
            let deadline = Date(timeIntervalSinceNow: maxWait)
            while closed && cond.wait(until: deadline) {}
        }
        active += 1
        cond.unlock()
    }

    func leave() {
        cond.lock()
        active -= 1
        let fire = closed && active == 0 && !notified
        if fire { notified = true }
        cond.unlock()
        if fire { onDrained?() }
    }

    /// Closes the gate; true if no reader is in flight (the caller may restart right away).
    func close() -> Bool {
        cond.lock(); defer { cond.unlock() }
        if closed { return false }
        closed = true
        notified = active == 0
        return active == 0
    }

    func open() {
        cond.lock(); closed = false; notified = false; cond.broadcast(); cond.unlock()
    }

    var isClosed: Bool { cond.lock(); defer { cond.unlock() }; return closed }
}

/// Hands a non-Sendable connection to the thread that will own it.
final class ConnectionBox: @unchecked Sendable {
    // Invariant: written once at init on the creating thread, taken exactly once by the owning thread
    // (Thread.start happens-after init), never touched again.
    private var conn: Connection?
    init(_ c: Connection) { conn = c }
    func take() -> Connection { let c = conn!; conn = nil; return c }
}

/// The single writer thread (rule 1): owns the writer connection, drains its queue in batches
/// so concurrent saves share one transaction (group commit).
final class WriterThread<Job>: Sendable {
    let queue = JobQueue<Job>()
    private let done = DispatchGroup()

    init(connection: Connection, maxBatch: Int, handler: @escaping @Sendable (Connection, [Job]) -> Void, onClose: @escaping @Sendable (Connection) -> Void) {
        let box = ConnectionBox(connection)
        done.enter()
        let t = Thread { [queue, done] in
            let conn = box.take()
            while true {
                let jobs = queue.pop(max: maxBatch)
                if jobs.isEmpty { break }
                handler(conn, jobs)
            }
            onClose(conn)
            conn.close()
            done.leave()
        }
        t.name = "ubq-writer"
        t.stackSize = 1 << 23
        t.start()
    }

    func submit(_ job: Job) -> Bool { queue.push(job) }
    func shutdown() { queue.close(); done.wait() }
}
