/// When a store's idle read connections close, and when the `ubq-snapshots` sweeper visits the
/// store's `ReadConnections` next (docs/storage.md rule 4 and "Idle read connections").
///
/// An open store used to keep every read connection it had opened until it closed: two file
/// descriptors each (database and WAL), up to `readerCount` of them, for stores nobody had read
/// in minutes — most of the 10,023 descriptors at 2,000 open stores (docs/benchmarks.md,
/// "Threads per open store"). A free connection unused for `idleNanos` now closes; the next read
/// opens one again (a connection open and its pragmas: ~0.1-0.2 ms, docs/storage.md).
///
/// A value type with no clock of its own: `ReadConnections` passes the times under its lock;
/// `IdleReaderPolicyTests` drive it alone.
struct IdleReaderPolicy: Sendable, Equatable {
    /// A free connection unused this long closes (0: never).
    let idleNanos: UInt64
    /// How often a connection's held snapshot is checked for expiry (nil: none is ever held).
    let snapshotTick: UInt64?

    /// Whether a free connection that holds no snapshot and was last checked in at `idleSince`
    /// closes at `now`.
    func closes(idleSince: UInt64, now: UInt64) -> Bool {
        // a checkin after the caller read its clock is not idle (and must not wrap around)
        idleNanos > 0 && now >= idleSince && now - idleSince >= idleNanos
    }

    /// When to visit next (nil: nothing to watch until a checkin asks again).
    /// - held: a free connection still holds a snapshot.
    /// - checkedOut: a connection is out (it may come back holding a snapshot, or go idle).
    /// - oldestIdleSince: the earliest checkin time among the free connections (nil: none free).
    func nextVisit(now: UInt64, held: Bool, checkedOut: Bool, oldestIdleSince: UInt64?) -> UInt64? {
        var next: UInt64?
        func earliest(_ t: UInt64) { next = min(next ?? .max, t) }
        if let tick = snapshotTick, held || checkedOut { earliest(now &+ tick) }
        if idleNanos > 0 {
            if let oldest = oldestIdleSince { earliest(max(oldest &+ idleNanos, now &+ 1)) }
            if checkedOut { earliest(now &+ idleNanos) }
        }
        return next
    }
}
