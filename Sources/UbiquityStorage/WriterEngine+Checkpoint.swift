internal import CSQLite
import Foundation

/// The checkpoint actions of `CheckpointPolicy`, run on the writer thread (storage rule 5: only
/// the writer connection checkpoints).
extension WriterEngine {
    /// RESTART checkpoint without waiting (busy handler off): runs once the reader gate has
    /// drained, so normally no reader is in the WAL. Always reopens the gate.
    @discardableResult
    func restartWAL(_ conn: Connection) -> Bool {
        defer { gate.open() }
        return resetWAL(conn)
    }

    /// RESTART checkpoint with the busy handler off; counts the restart (or the skip). Not
    /// TRUNCATE: the next commits then overwrite blocks the WAL file already has instead of
    /// growing it from zero, which makes their writes and fsyncs cheaper (docs/storage.md rule 5).
    /// `waitForReaders`: keep the busy handler on, so the restart waits (up to the busy timeout)
    /// for readers still in the WAL — only past the WAL's hard limit.
    func resetWAL(_ conn: Connection, waitForReaders: Bool = false) -> Bool {
        let saved = conn.busyPolls
        let entries = gate.entries  // before the restart: a reader that begins during it counts
        if !waitForReaders { conn.busyPolls = 0 }
        defer { conn.busyPolls = saved }
        let r = conn.checkpoint(.restart)
        state.withLock { if r.rc == SQLITE_OK { $0.walRestarts += 1 } else { $0.walRestartsSkipped += 1 } }
        if r.rc != SQLITE_OK {
            if waitForReaders { config.logger.warning("WAL over its hard limit and readers still busy: rc \(r.rc)") }
            else { config.logger.debug("WAL restart skipped: rc \(r.rc)") }
        }
        if r.rc == SQLITE_OK { owned.checkpoints.walRestarted(readerEntries: entries) }
        return r.rc == SQLITE_OK
    }

    /// After a group commit: the checkpoint policy's action, then (periodically) a small GC batch.
    func afterCommit(_ conn: Connection) {
        // The WAL's content (frames since its last restart), not its file: RESTART keeps the file.
        let walBytes = conn.walContentBytes
        state.withLock { $0.walBytes = walBytes }
        let action = owned.checkpoints.committed(walBytes: walBytes, readerEntries: gate.entries,
                                                 fenced: owned.fence?.isHeld ?? false, writebackDone: owned.writeback?.isDone ?? true)
        switch action {
        case .none:
            owned.fence?.end()
        case .fence:
            fence().begin()
        case .copy:
            copyToFence(conn)
        case .checkpoint(let fallback):
            owned.fence?.end()
            if checkpoint(conn, fallback: fallback) { owned.checkpoints.commitCheckpointRestarted() }
        }
        if config.gcEveryCommits > 0 && owned.commitsSinceGC >= config.gcEveryCommits {
            owned.commitsSinceGC = 0
            do { _ = try gcBatch(conn, limit: config.gcBatchSize) } catch { config.logger.warning("gc batch failed: \(error)") }
        }
    }

    /// The copy step: PASSIVE up to the fence (no database sync, no wait for readers: what they
    /// still read is left for the last step), then the writeback of the copied pages on the
    /// writeback thread.
    private func copyToFence(_ conn: Connection) {
        let t0 = DispatchTime.now().uptimeNanoseconds
        if owned.writeback == nil {
            let state = self.state
            owned.writeback = DatabaseWriteback(path: path, logger: config.logger) { dt in
                state.withLock { $0.writebacks += 1; $0.writebackSeconds += dt; $0.writebackMaxSeconds = max($0.writebackMaxSeconds, dt) }
            }
        }
        owned.writeback?.copying()
        let r = conn.checkpoint(.passive)
        owned.writeback?.copied()
        if r.rc != SQLITE_OK { config.logger.debug("checkpoint copy step: rc \(r.rc)") }
        owned.fence?.end()
        let dt = Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e9
        let toTheEnd = r.rc == SQLITE_OK && r.log > 0 && r.done == r.log
        state.withLock {
            $0.checkpointCopies += 1; $0.copySeconds += dt; $0.copyMaxSeconds = max($0.copyMaxSeconds, dt)
            if toTheEnd { $0.copiesToTheEnd += 1 }
        }
    }

    private func fence() -> CheckpointFence {
        if let f = owned.fence { return f }
        let f = CheckpointFence(path: path, config: config)
        owned.fence = f
        return f
    }

    /// Before an exclusive job (a migration, `Store.checkpoint`, the gate's restart): a fence
    /// would stop its checkpoint short of the WAL's end; the policy begins a new one when due.
    func endFence() { owned.fence?.end() }

    /// The writer is closing: the fence closes first, so the close-time TRUNCATE checkpoint
    /// finds no reader; the writeback ends in `closed`, once the writer connection has closed.
    func closing(_ conn: Connection) {
        owned.fence?.close()
        owned.fence = nil
        _ = conn.checkpoint(truncate: true)
    }

    /// The writer connection has closed: the writeback's descriptor may close (`DatabaseWriteback`).
    func closed() {
        owned.writeback?.shutdown()
        owned.writeback = nil
    }

    /// A writer thread begins a run of this store's queue: it takes over the writer's connections
    /// (docs/threading.md rule 15).
    func enter(_ conn: Connection) {
        conn.adoptThread()
        owned.fence?.adoptThread()
    }

    /// The run is over: the connections belong to no thread until the next run's `enter`.
    func leave(_ conn: Connection) {
        owned.fence?.releaseThread()
        conn.releaseThread()
    }

    /// Seconds the writer thread may wait for a job before `idleCheckpoint` (nil: wait for jobs).
    /// Read on the thread serving the writer queue only (after each run, `WriterQueue.run`).
    var idleCheckpointWait: Double? { owned.checkpoints.idleWait }

    /// The writer has been idle since a commit that left a long WAL: checkpoint it now, with the
    /// same bounded waits as after a commit but never the reader gate; once until the next commit.
    func idleCheckpoint(_ conn: Connection) {
        guard case .checkpoint(let fallback) = owned.checkpoints.idle() else { return }
        owned.fence?.end()
        state.withLock { $0.idleCheckpoints += 1 }
        _ = checkpoint(conn, fallback: fallback)
    }

    /// Waits (bounded) for the readers in flight, PASSIVE-checkpoints and, if that copied the
    /// whole WAL, waits again and restarts it; otherwise `fallback`. True if the WAL restarted
    /// here (not if a restart job was queued for when the gate drains).
    private func checkpoint(_ conn: Connection, fallback: CheckpointPolicy.Fallback) -> Bool {
        let t0 = DispatchTime.now().uptimeNanoseconds
        // Readers that began before this commit hold WAL read marks below its last frame and
        // would stop the checkpoint short of it.
        _ = gate.waitForReadersInside(timeout: config.checkpointReaderWait)
        let r = conn.checkpoint(truncate: false)
        if r.rc != SQLITE_OK { config.logger.debug("passive checkpoint: rc \(r.rc)") }
        var restarted = false
        if r.rc == SQLITE_OK && r.log > 0 && r.done == r.log {
            // The whole WAL is in the database: readers starting now do not use it (read mark
            // 0); once the ones that started before are gone, the restart waits for nobody.
            if gate.waitForReadersInside(timeout: config.checkpointReaderWait) { restarted = resetWAL(conn) }
        }
        let dt = Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e9
        state.withLock { $0.checkpoints += 1; $0.checkpointSeconds += dt; $0.checkpointMaxSeconds = max($0.checkpointMaxSeconds, dt) }
        config.observer.checkpointed?(dt)
        if restarted { return true }
        switch fallback {
        case .none: return false
        case .closeGate, .closeGateOrWaitForReaders:
            // Once the readers in flight are done (each is one short transaction), the gate's
            // restart job runs.
            if gate.close() { return restartWAL(conn) }
            guard fallback == .closeGateOrWaitForReaders else { return false }
            // Hard bound: wait (busy handler, up to the busy timeout) for the readers in
            // flight; the closed gate keeps new ones out meanwhile.
            defer { gate.open() }
            return resetWAL(conn, waitForReaders: true)
        }
    }
}
