import Foundation
import UbiquityLock

/// The one `ubq-snapshots` thread (docs/threading.md rule 18): ends the expired held snapshots
/// (storage rule 4) of idle read connections, for every store that may hold one, and closes read
/// connections idle past their bound (`IdleReaderPolicy`). A store's `ReadConnections` asks to be
/// watched when a checkin keeps a snapshot or may leave a connection idle; each visit says when
/// the next is due, until there is nothing left to watch; then the sweeper forgets the pool.
/// Started at the first watch; lives as long as the process.
final class SnapshotSweeper: @unchecked Sendable {
    static let shared = SnapshotSweeper()

    // Invariant: `watched` and `thread` are accessed only while `cond` is locked.
    // NSCondition, not `Lock`: the thread waits on it until the next visit is due or a watch comes.
    private let cond = NSCondition()
    private struct Entry {
        let pool: ReadConnections
        var due: UInt64
        /// Bumped by each `watch`: a visit that found nothing to watch forgets the pool only if no
        /// watch came since it began (that checkin's connection needs a later visit).
        var stamp: UInt64
    }
    private var watched: [ObjectIdentifier: Entry] = [:]
    private var thread: NamedThread?

    /// The pool may hold snapshots or idle connections now: visit it a tick from now (unless
    /// already watched).
    func watch(_ pool: ReadConnections) {
        let now = DispatchTime.now().uptimeNanoseconds
        cond.lock(); defer { cond.unlock() }
        let key = ObjectIdentifier(pool)
        if var e = watched[key] {
            e.stamp &+= 1
            watched[key] = e
        } else {
            watched[key] = Entry(pool: pool, due: now &+ pool.sweepTick, stamp: 0)
        }
        if thread == nil {
            thread = NamedThread(name: "ubq-snapshots", stackSize: 1 << 18) { [self] in
                ThreadPriority.prepareStoreThread(nice: 0)
                run()
            }
        }
        cond.signal()
    }

    /// The pool closed: no more visits (a visit under way finds it closed).
    func forget(_ pool: ReadConnections) {
        cond.lock(); defer { cond.unlock() }
        watched[ObjectIdentifier(pool)] = nil
    }

    private func run() {
        cond.lock()
        while true {
            let now = DispatchTime.now().uptimeNanoseconds
            let due = watched.filter { $0.value.due <= now }
            if due.isEmpty {
                if let next = watched.values.map(\.due).min() {
                    _ = cond.wait(until: Date(timeIntervalSinceNow: Double(next &- now) / 1e9))
                } else {
                    cond.wait()
                }
                continue
            }
            cond.unlock()
            var visited: [(ObjectIdentifier, next: UInt64?, stamp: UInt64)] = []
            for (key, e) in due { visited.append((key, e.pool.sweep(now: now), e.stamp)) }
            let after = DispatchTime.now().uptimeNanoseconds
            cond.lock()
            for (key, next, stamp) in visited {
                guard var e = watched[key] else { continue }
                if next != nil || e.stamp != stamp {
                    // no sooner than a tick after this visit: a pool never keeps the sweeper spinning
                    e.due = max(next ?? 0, after &+ e.pool.sweepTick)
                    watched[key] = e
                } else {
                    watched[key] = nil
                }
            }
        }
    }
}
