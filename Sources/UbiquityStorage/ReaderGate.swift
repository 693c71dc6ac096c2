import Foundation
import Synchronization

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
