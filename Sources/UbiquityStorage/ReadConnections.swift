import Foundation
import Logging
import Synchronization
import UbiquityLock

/// The store's read-only connections (rule 2). A thread checks one out, uses it alone, and checks
/// it back in; the lock orders the hand-over, so each connection is used by one thread at a time
/// (SQLite NOMUTEX connections allow that). Blocking request handlers read this way on their own
/// thread; async callers go through `ReaderPool`, whose threads do the same.
///
/// A connection may come back holding its read transaction (`HeldSnapshot`, storage rule 4):
/// such a snapshot is ended (by whichever thread next has the connection) once it is `holdNanos`
/// old, or once `releaseSnapshots` has been called since it began. The sweeper thread ends the
/// expired snapshots of idle connections, so no snapshot outlives its hold by more than one job;
/// one sweeper thread serves every store (`SnapshotSweeper`). The same visits close connections
/// left unused longer than the idle bound (`IdleReaderPolicy`); reads open them again as needed.
final class ReadConnections: @unchecked Sendable {
    // Invariant: `free`, `out`, `closed`, `sweeperIdle`, `ending` and `endWaiters` are only accessed while `cond` is
    // locked. A connection in `free` is touched by no thread (the lock holder may read its
    // `heldSnapshot`); a checked-out one only by the thread that checked it out, until it checks
    // it back in. `releaseEpoch` is atomic: bumped by `releaseSnapshots`, read anywhere.
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

    /// Most connections; they open as concurrent reads need them (the first one here, so a
    /// store that cannot be read fails to open), and stay open until idle past the policy's
    /// bound, or until `close`.
    let count: Int
    let policy: IdleReaderPolicy
    /// Connections open (free, checked out, or being opened by a checkout).
    private var opened = 1
    private let open: @Sendable () throws -> Connection
    private let logger: Logger

    /// `idleNanos`: a free connection unused this long closes (0: never). `first`: a connection
    /// `open` made already (the store read its state through it), owned by the calling thread.
    init(count: Int, holdNanos: UInt64 = 0, idleNanos: UInt64 = 0, logger: Logger, first: Connection? = nil,
         open: @escaping @Sendable () throws -> Connection) throws {
        let first = try first ?? open()
        first.releaseThread()  // free connections belong to no thread
        first.idleSince = DispatchTime.now().uptimeNanoseconds
        free = [first]
        self.count = max(1, count)
        self.holdNanos = holdNanos
        policy = IdleReaderPolicy(idleNanos: idleNanos, snapshotTick: holdNanos > 0 ? max(holdNanos / 4, 1_000_000) : nil)
        self.logger = logger
        self.open = open
        if idleNanos > 0 {
            // a store opened and never read still closes its first connection
            sweeperIdle = false
            SnapshotSweeper.shared.watch(self)
        }
    }

    /// Waits for a free connection (opening one if none is free and fewer than `count` are
    /// open); nil once closed.
    func checkout() -> Connection? {
        cond.lock(); defer { cond.unlock() }
        while free.isEmpty && !closed {
            if opened < count && ending == 0 {  // a connection the sweeper is ending comes back in a moment
                opened += 1
                out += 1
                cond.unlock()
                let made: Connection?
                do { made = try open() } catch {
                    logger.warning("read connection not opened (reads share the open ones): \(error)")
                    made = nil
                }
                cond.lock()
                if let made { return made }  // opened on this thread: already its own
                opened -= 1
                out -= 1
                cond.broadcast()
                if opened > 0 { cond.wait() } else { return nil }  // none at all: fail the read
                continue
            }
            cond.wait()
        }
        if closed { return nil }
        out += 1
        let c = free.removeLast()
        c.adoptThread()
        return c
    }

    /// Connections open now.
    var openCount: Int { cond.withLockRead { opened } }

    /// Returns a connection. A snapshot it holds stays only if it is still young enough and no
    /// `releaseSnapshots` came since it began (checked under the lock that `releaseSnapshots`
    /// takes after its bump, so one of the two ends it).
    func checkin(_ c: Connection) {
        let now = DispatchTime.now().uptimeNanoseconds
        if let s = c.heldSnapshot, !mayKeep(s, now: now) { ReadConnections.endSnapshot(c) }
        cond.lock()
        if let s = c.heldSnapshot, s.epoch != releaseEpoch.load(ordering: .sequentiallyConsistent) {
            cond.unlock()
            ReadConnections.endSnapshot(c)
            cond.lock()
        }
        c.releaseThread()
        c.idleSince = now
        free.append(c)
        out -= 1
        if endWaiters > 0 { cond.broadcast() } else { cond.signal() }
        var wake = false
        if (c.heldSnapshot != nil || policy.idleNanos > 0) && sweeperIdle { sweeperIdle = false; wake = true }
        cond.unlock()
        if wake { SnapshotSweeper.shared.watch(self) }
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
    /// them back in.
    private func endIdleSnapshots(_ expired: (HeldSnapshot) -> Bool) {
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
    }

    /// The sweeper's visit (`SnapshotSweeper`): ends the idle connections' expired snapshots and
    /// closes the connections idle past the policy's bound. Returns when to visit next; nil
    /// once there is nothing to watch (the sweeper then forgets the pool until a checkin asks
    /// again).
    func sweep(now: UInt64) -> UInt64? {
        if (cond.withLockRead { closed }) { return nil }
        endIdleSnapshots({ [self] s in !mayKeep(s, now: now) })
        cond.lock()
        let now = DispatchTime.now().uptimeNanoseconds  // after the snapshots' end: checkins meanwhile are not idle
        var idle: [Connection] = []
        if policy.idleNanos > 0 {
            free.removeAll { c in
                guard c.heldSnapshot == nil, policy.closes(idleSince: c.idleSince, now: now) else { return false }
                idle.append(c)
                return true
            }
            // counted as out while they close: `close` waits for them (the writer's close-time
            // checkpoint runs with no reader connection left, rule 5)
            opened -= idle.count
            out += idle.count
        }
        cond.unlock()
        for c in idle { c.adoptThread(); c.close() }
        cond.lock(); defer { cond.unlock() }
        out -= idle.count
        if !idle.isEmpty { cond.broadcast() }
        let next = policy.nextVisit(now: now, held: free.contains { $0.heldSnapshot != nil }, checkedOut: out > 0,
                                    oldestIdleSince: free.map(\.idleSince).min())
        if next == nil { sweeperIdle = true }
        return next
    }

    /// When the sweeper visits a pool it starts to watch: every quarter hold, at least every
    /// millisecond (the visit then says when next).
    var sweepTick: UInt64 { policy.snapshotTick ?? 1_000_000 }

    /// Refuses further checkouts, waits for the checked-out connections to come back, closes all.
    func close() {
        cond.lock()
        closed = true
        cond.broadcast()
        while out > 0 { cond.wait() }
        let conns = free
        free = []
        cond.unlock()
        SnapshotSweeper.shared.forget(self)
        for c in conns { c.adoptThread(); ReadConnections.endSnapshot(c); c.close() }
    }
}

extension NSCondition {
    func withLockRead<R>(_ body: () -> R) -> R { lock(); defer { unlock() }; return body() }
}
