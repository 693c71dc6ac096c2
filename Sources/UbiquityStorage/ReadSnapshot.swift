import Foundation

/// A read transaction a reader connection keeps open after a job, for later jobs that read at a
/// generation it contains (docs/storage.md rule 4). In WAL mode SQLite drops a connection's page
/// cache and unmaps the store file whenever a read transaction starts after any commit; reads at
/// an older generation (pinned tokens) that reuse a snapshot skip that, and skip BEGIN/COMMIT.
///
/// Why a snapshot serves a read at generation g <= `generation`: rows are versioned
/// (created_gen/ended_gen) and every read filters on g; a generation is published only after its
/// commit (threading rule 7), and `generation` is read before the snapshot's first statement
/// (BEGIN is deferred), so the snapshot contains g's commit; later commits only end versions at
/// generations > g or add versions created after g; GC's deletes are commits too, of versions
/// nobody registered can see.
struct HeldSnapshot {
    /// The store's published generation, read before the snapshot's first statement.
    let generation: Int64
    /// The model published with it: a read with another model (after a migration) never reuses it.
    let model: ResolvedModel
    /// When it began (`DispatchTime` nanoseconds).
    let began: UInt64
    /// `ReadConnections.releaseEpoch` when it began.
    let epoch: UInt64
}

/// What a read job needs of its snapshot.
enum ReadSnapshotUse {
    /// A fresh snapshot, not kept (history, integrity check: reads that are not generation-filtered).
    case fresh
    /// Any snapshot containing `generation`, on `model`'s schema; the job's own may be kept.
    case at(generation: Int64, model: ResolvedModel)
}

extension Store {
    /// One read job on a connection the calling thread has checked out and entered the reader
    /// gate with: the cancel check, the cancel flag for the progress handler, and the read
    /// transaction (rule 4): the connection's held snapshot if it serves `use`, else a new
    /// `BEGIN`, kept after the job for `.at` reads when snapshots are held, committed otherwise.
    /// Without `transaction` (`body` is one statement), hold 0 and no usable held snapshot,
    /// `body` runs in autocommit mode. Any error ends the transaction.
    func runRead<T>(on conn: Connection, flag: CancelFlag, transaction: Bool, use: ReadSnapshotUse, _ body: (Connection) throws -> T) throws -> T {
        if flag.isCancelled { throw StorageError(.cancelled, "request cancelled") }
        conn.currentCancel = flag
        defer { conn.currentCancel = nil }
        let rc = readConnections
        var reused = false
        var began: HeldSnapshot? = nil
        if let s = conn.heldSnapshot {
            if case .at(let g, let m) = use, g <= s.generation, s.model === m, rc.mayKeep(s, now: DispatchTime.now().uptimeNanoseconds) {
                reused = true
            } else {
                ReadConnections.endSnapshot(conn)
            }
        }
        do {
            // With a hold, a one-statement job at a generation begins a snapshot too, to keep.
            var keepable = false
            if rc.holdNanos > 0, case .at = use { keepable = true }
            if !reused && (transaction || keepable) {
                if keepable {
                    // Before BEGIN (deferred: the snapshot starts at the body's first statement).
                    let epoch = rc.releaseEpoch.load(ordering: .sequentiallyConsistent)
                    let (gen, model) = state.withLock { ($0.generation, $0.model) }
                    if let model { began = HeldSnapshot(generation: gen, model: model, began: DispatchTime.now().uptimeNanoseconds, epoch: epoch) }
                }
                try conn.run("BEGIN")
            }
            let v = try body(conn)
            let gateClosed = readerGate.closedFlag.load(ordering: .sequentiallyConsistent)
            if let b = began, !gateClosed {
                conn.heldSnapshot = b
            } else if reused {
                if gateClosed { ReadConnections.endSnapshot(conn) }
            } else if began != nil || transaction {
                try conn.run("COMMIT")
            }
            return v
        } catch {
            conn.heldSnapshot = nil
            if !conn.isAutocommit { try? conn.exec("ROLLBACK") }
            throw error
        }
    }
}
