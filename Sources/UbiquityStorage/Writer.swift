internal import CSQLite
import Foundation

/// The writer thread's logic: group commit, saves, GC, history trimming, migrations.
/// Every method runs on the writer thread only (rule 1).
final class WriterEngine: Sendable {
    let storeID: UUID
    let config: StorageConfiguration
    let state: Locked<StoreState>
    let owned: WriterOwned
    let path: String
    let gate: ReaderGate

    init(storeID: UUID, config: StorageConfiguration, state: Locked<StoreState>, owned: WriterOwned, path: String, gate: ReaderGate) {
        self.storeID = storeID; self.config = config; self.state = state; self.owned = owned; self.path = path; self.gate = gate
    }

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
        if r.rc == SQLITE_OK { owned.readerEntriesAtRestart = entries }
        return r.rc == SQLITE_OK
    }

    func handle(_ conn: Connection, _ jobs: [WriterJob]) {
        var group: [SaveJob] = []
        for j in jobs {
            switch j {
            case .save(let s): group.append(s)
            case .exclusive(_, let body):
                if !group.isEmpty { runGroup(conn, group); group = [] }
                body(conn, self)
            }
        }
        if !group.isEmpty { runGroup(conn, group) }
    }

    /// Group commit: one BEGIN IMMEDIATE … COMMIT (one fsync) for several saves, each inside its
    /// own SAVEPOINT so a failing save rolls back alone. Generations are handed out in order.
    func runGroup(_ conn: Connection, _ jobs: [SaveJob]) {
        var results = [Result<SaveResult, Error>?](repeating: nil, count: jobs.count)
        guard let model = state.withLock({ $0.model }) else {
            jobs.forEach { $0.complete(.failure(StorageError.noModelYet)) }
            return
        }
        let (startGen, epoch) = state.withLock { ($0.generation, $0.epoch) }
        var gen = startGen
        // BEGIN, SAVEPOINT, RELEASE and COMMIT run as cached prepared statements (`run`), not
        // `exec`, which parses the text again each time.
        do { try conn.run("BEGIN IMMEDIATE") } catch {
            jobs.forEach { $0.complete(.failure(error)) }
            return
        }
        var aborted: Error?
        var committed = 0
        // The pk counter is read once per group and written once before COMMIT (with the
        // generation), not per save: a save that rolls back to its savepoint leaves it unchanged,
        // as its own writes of `ubq_meta` were undone with it before.
        var nextPK: Int64 = 0
        do { nextPK = try Meta.int(conn, "next_pk") } catch { aborted = error }
        for (i, job) in jobs.enumerated() where aborted == nil {
            if job.flag.isCancelled { results[i] = .failure(StorageError(.cancelled, "request cancelled")); continue }
            let (jobRequest, jobPrepared) = job.take()  // nothing of them stays with the writer once this save is done
            let prepared = job.planner == nil && jobPrepared?.model === model ? jobPrepared : nil
            // A save that can fail only in SQLite once it has written (`PreparedSave.needsNoSavepoint`)
            // runs without a savepoint: SQLite's failures end the whole group anyway, and a savepoint
            // costs a copy of every page the save touches.
            let savepoint = !(prepared?.needsNoSavepoint ?? false)
            if savepoint {
                do {
                    try conn.run("SAVEPOINT s")
                } catch { aborted = error; break }
            }
            do {
                var request = jobRequest
                if let plan = job.planner {
                    let ctx = ReadContext(conn: conn, model: model, storeID: storeID, token: GenerationToken(storeID: storeID, epoch: epoch, generation: gen))
                    // A planner only reads (matching a batch's predicate can scan a large table):
                    // its SQL stops when the caller gives up. Writes are never interrupted here —
                    // an interrupted write can end the whole group's transaction.
                    conn.currentCancel = job.flag
                    let plannedRequest = Result { try plan(ctx) }
                    conn.currentCancel = nil
                    guard let planned = try plannedRequest.get() else {
                        // nothing to apply: no generation, no history
                        try conn.exec("ROLLBACK TO s"); try conn.exec("RELEASE s")
                        results[i] = .success(SaveResult(token: ctx.token, permanentIDs: [:], versions: [:], resolvedConflicts: [], skipped: [], dryRun: false, replayed: false))
                        continue
                    }
                    request = planned
                }
                let txn = SaveTxn(conn: conn, model: model, storeID: storeID, epoch: epoch, gen: gen + 1, currentGen: gen, request: request, config: config,
                                  nextPK: nextPK, prepared: prepared?.inserts, history: prepared?.history, temporaryIDsUnique: !savepoint,
                                  insertStatements: owned.insertStatements)
                // only inside a savepoint: stopping a save without one would fail its whole group
                if savepoint { txn.isCancelled = { job.flag.isCancelled } }
                let r = try txn.run()
                if r.replayed || r.dryRun {
                    try conn.exec("ROLLBACK TO s"); try conn.exec("RELEASE s")  // never without a savepoint: needsNoSavepoint
                } else {
                    if savepoint { try conn.run("RELEASE s") }
                    gen += 1; committed += 1
                    nextPK = txn.nextPK
                }
                results[i] = .success(r)
            } catch {
                results[i] = .failure(error)
                if conn.isAutocommit { aborted = error; break }  // SQLite rolled the whole transaction back
                // Without a savepoint only a rollback of the whole group undoes what the save wrote.
                if !savepoint { aborted = error; break }
                do { try conn.exec("ROLLBACK TO s"); try conn.exec("RELEASE s") } catch { aborted = error; break }
            }
        }
        if aborted == nil {
            do {
                if committed > 0 {
                    try Meta.set(conn, "next_pk", .integer(nextPK))
                    try Meta.set(conn, "generation", .integer(gen))
                }
                try conn.run(committed > 0 ? "COMMIT" : "ROLLBACK")
            } catch { aborted = error }
        }

        if let e = aborted {
            if !conn.isAutocommit { try? conn.exec("ROLLBACK") }
            // Nothing of this group is committed: every save that looked applied fails with the
            // cause — so do dry runs (they saw the group's earlier saves) and replays of saves
            // made inside this group. Replays of earlier commits stand.
            for i in results.indices {
                switch results[i] {
                case .none: results[i] = .failure(e)
                case .success(let r) where !(r.replayed && r.token.generation <= startGen): results[i] = .failure(e)
                default: break
                }
            }
            config.logger.warning("group commit failed: \(e)")
        } else if committed > 0 {
            state.withLock { $0.generation = gen }  // publish before acknowledging (read-your-writes)
            owned.commitsSinceGC += committed
        }
        let waits = conn.busyWaits
        state.withLock { $0.writerBusyWaits = waits }
        for (i, j) in jobs.enumerated() { j.complete(results[i]!) }
        if committed > 0 && aborted == nil { afterCommit(conn) }
    }

    /// Checkpoint policy (docs/storage.md): once the WAL passes the threshold, wait (bounded) for
    /// the readers in flight, PASSIVE-checkpoint; if that copied the whole WAL back, wait again
    /// for the readers from before it and TRUNCATE (nobody to wait for). Past twice the threshold
    /// the reader gate is the fallback. Periodic small GC batches.
    func afterCommit(_ conn: Connection) {
        // The WAL's content (frames since its last restart), not its file: RESTART keeps the file.
        let wal = conn.walContentBytes
        // Nobody has begun a read since the WAL last restarted: nobody pays for a longer WAL yet.
        let unread = config.checkpointThresholdBytesWithoutReaders > config.checkpointThresholdBytes
            && gate.entries == owned.readerEntriesAtRestart
        var restarted = false
        if wal > (unread ? config.checkpointThresholdBytesWithoutReaders : config.checkpointThresholdBytes) {
            restarted = checkpoint(conn, wal: wal)
        }
        // A long WAL left behind (unread, or readers kept the restart from happening): checkpoint
        // it once the writer is idle, so reads after the last save do not keep paying for it.
        owned.idleCheckpointDue = !restarted && wal > config.checkpointThresholdBytes
        if config.gcEveryCommits > 0 && owned.commitsSinceGC >= config.gcEveryCommits {
            owned.commitsSinceGC = 0
            do { _ = try gcBatch(conn, limit: config.gcBatchSize) } catch { config.logger.warning("gc batch failed: \(error)") }
        }
    }

    /// Seconds the writer thread may wait for a job before `idleCheckpoint` (nil: wait for jobs).
    /// Read on the writer thread only (WriterThread's loop).
    var idleCheckpointWait: Double? {
        owned.idleCheckpointDue && config.idleCheckpointSeconds > 0 ? config.idleCheckpointSeconds : nil
    }

    /// The writer has been idle since a commit that left a long WAL: checkpoint it now, with the
    /// same bounded waits as after a commit but never the reader gate; once until the next commit.
    func idleCheckpoint(_ conn: Connection) {
        owned.idleCheckpointDue = false
        state.withLock { $0.idleCheckpoints += 1 }
        _ = checkpoint(conn, wal: conn.walContentBytes, fallbacks: false)
    }

    /// Waits (bounded) for the readers in flight, PASSIVE-checkpoints and, if that copied the
    /// whole WAL, waits again and restarts it. With `fallbacks`, past twice the threshold the
    /// reader gate (and past the hard limit the busy handler) get the WAL restarted. True if the
    /// WAL restarted here (not if a restart job was queued for when the gate drains).
    private func checkpoint(_ conn: Connection, wal: Int, fallbacks: Bool = true) -> Bool {
        let t0 = DispatchTime.now().uptimeNanoseconds
        // Readers that began before this commit hold WAL read marks below its last frame and
        // would stop the checkpoint short of it.
        _ = gate.waitForReadersInside(timeout: config.checkpointReaderWait)
        let r = conn.checkpoint(truncate: false)
        if r.rc != SQLITE_OK { config.logger.debug("passive checkpoint: rc \(r.rc)") }
        var restarted = false
        if r.rc == SQLITE_OK && r.log > 0 && r.done == r.log {
            // The whole WAL is in the database: readers starting now do not use it (read mark
            // 0); once the ones that started before are gone, TRUNCATE waits for nobody.
            if gate.waitForReadersInside(timeout: config.checkpointReaderWait) { restarted = resetWAL(conn) }
        }
        let dt = Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e9
        state.withLock { $0.checkpoints += 1; $0.checkpointSeconds += dt; $0.checkpointMaxSeconds = max($0.checkpointMaxSeconds, dt) }
        // Readers that overlap continuously and outlast the waits keep read marks in the WAL,
        // so SQLite never gets a moment to restart it. Past twice the threshold, close the
        // reader gate; once the readers in flight are done (each is one short transaction),
        // the restart job runs.
        if fallbacks && !restarted && wal > 2 * config.checkpointThresholdBytes {
            if gate.close() {
                restarted = restartWAL(conn)
            } else if wal > config.walHardLimitBytes {
                // Hard bound: wait (busy handler, up to the busy timeout) for the readers in
                // flight; the closed gate keeps new ones out meanwhile.
                restarted = resetWAL(conn, waitForReaders: true)
                gate.open()
            }
        }
        return restarted
    }

    // MARK: GC

    /// Raises the horizon to min(current, live pins, active reads), then deletes at most `limit`
    /// versions that ended at or before it, in one short transaction.
    func gcBatch(_ conn: Connection, limit: Int) throws -> Int {
        guard let model = state.withLock({ $0.model }) else { return 0 }
        let now = config.clock()
        let horizon = state.withLock { s -> Int64 in
            s.pins = s.pins.filter { $0.value.expiry > now }
            var h = s.generation
            for p in s.pins.values { h = min(h, p.gen) }
            for g in s.activeReads.keys { h = min(h, g) }
            s.gcHorizon = max(s.gcHorizon, h)
            return s.gcHorizon
        }
        var removed = 0
        try conn.exec("BEGIN IMMEDIATE")
        do {
            try Meta.set(conn, "gc_horizon", .integer(horizon))
            for r in model.roots where removed < limit {
                let t = q(ResolvedModel.tableName(root: r))
                try conn.run(Self.gcVersionsSQL(table: t), [.integer(horizon), .integer(Int64(limit - removed))])
                removed += conn.changes
            }
            for j in model.joinTables where removed < limit {
                try conn.run("DELETE FROM \(q(j)) WHERE (src, dst, ended_gen) IN (SELECT src, dst, ended_gen FROM \(q(j)) WHERE ended_gen <= ? LIMIT ?)", [.integer(horizon), .integer(Int64(limit - removed))])
                removed += conn.changes
            }
            if let keep = config.historyRetentionGenerations {
                let cut = state.withLock { $0.generation } - keep
                if cut > state.withLock({ $0.historyHorizon }) { try trimHistoryInTxn(conn, through: cut) }
            }
            try conn.exec("COMMIT")
        } catch { if !conn.isAutocommit { try? conn.exec("ROLLBACK") }; throw error }
        return removed
    }

    /// One GC batch of a root table `t` (quoted): deletes at most ?2 versions that ended at or
    /// before ?1. The literal `ended_gen < live` lets SQLite pick the partial index
    /// `ubq_gc_<root>` (`WHERE ended_gen < live`, Model.swift): a bound parameter alone cannot
    /// prove the index's condition, so without it every batch scanned the whole table (W2 on a
    /// growing store: a 20-50 ms writer pause every 256 commits, ~8.5% of the writer's time).
    static func gcVersionsSQL(table t: String) -> String {
        "DELETE FROM \(t) WHERE (pk, ended_gen) IN (SELECT pk, ended_gen FROM \(t) WHERE ended_gen < \(ResolvedModel.live) AND ended_gen <= ?1 LIMIT ?2)"
    }

    func trimHistory(_ conn: Connection, through g: Int64) throws {
        try conn.exec("BEGIN IMMEDIATE")
        do { try trimHistoryInTxn(conn, through: g); try conn.exec("COMMIT") } catch { if !conn.isAutocommit { try? conn.exec("ROLLBACK") }; throw error }
    }

    private func trimHistoryInTxn(_ conn: Connection, through g: Int64) throws {
        let cut = min(g, state.withLock { $0.generation })
        try conn.run("DELETE FROM ubq_history WHERE generation <= ?", [.integer(cut)])
        // idempotency records live as long as the history of their save
        try conn.run("DELETE FROM ubq_client_tx WHERE generation <= ?", [.integer(cut)])
        let h = max(cut, state.withLock { $0.historyHorizon })
        try Meta.set(conn, "history_horizon", .integer(h))
        state.withLock { $0.historyHorizon = h }
    }
}

/// One save, applied inside its savepoint. Collects every validation issue before failing.
final class SaveTxn {
    let conn: Connection
    let model: ResolvedModel
    let storeID: UUID
    let epoch: UInt64
    let gen: Int64
    let currentGen: Int64
    let req: SaveRequest
    let config: StorageConfiguration
    /// The next free pk: the group's counter when the save starts, advanced by its inserts.
    var nextPK: Int64
    var tempMap: [String: ObjectID] = [:]
    var issues: [ValidationIssue] = []
    var conflicts: [ConflictRecord] = []
    var resolved: [ConflictRecord] = []
    var skipped: [ObjectID] = []
    var changeOrder: [ObjectID] = []
    var changes: [ObjectID: HistoryChange] = [:]
    /// The history changes of new objects, in order, while `changes`/`changeOrder` are not in use:
    /// a save whose only changes are new objects (`temporaryIDsUnique`) never looks a change up,
    /// so it keeps them in this array instead of hashing every ID (`record` moves them over first).
    var newObjectChanges: [HistoryChange] = []
    /// Saves of new objects only: the first insert's pk (`SaveResult.firstNewPK`), while `tempMap`
    /// and `versions` stay empty.
    var firstNewPK: Int64?
    var touched: Set<ObjectID> = []
    var deleted: Set<ObjectID> = []
    var versions: [ObjectID: Int64] = [:]
    var upserted: Set<String> = []
    /// Temporary IDs of inserts that clashed with a uniqueness constraint under the `error`
    /// policy: they get no object, so references to them are not validation issues — the save
    /// already fails with the clash (CONSTRAINT_CONFLICT), which is what the client must see.
    var clashedTemporaryIDs: Set<String> = []
    /// Objects with a relationship edit skipped because its target clashed: their relationship
    /// counts are not checked (they would report the clash's consequence, not a problem).
    var pointsAtClash: Set<ObjectID> = []

    /// The inserts' model-only work, done before the save was queued (`PreparedSave`); nil: done here.
    let prepared: [PreparedInsert]?
    /// The writer's multi-row INSERT statements (`flushInserts`).
    let insertStatements: InsertStatements
    /// The request's temporary IDs are known to be distinct (`PreparedSave.needsNoSavepoint`).
    let temporaryIDsUnique: Bool
    /// New objects' first versions not written yet, all in table `pendingRoot`, in pk order.
    /// `flushInserts` writes them with multi-row INSERTs before any other statement of the save
    /// runs, so no statement ever misses one of them.
    var pendingRoot = ""
    var pendingRows: [(pk: Int64, entity: String, columnArgs: [SQLValue])] = []

    init(conn: Connection, model: ResolvedModel, storeID: UUID, epoch: UInt64, gen: Int64, currentGen: Int64, request: SaveRequest, config: StorageConfiguration,
         nextPK: Int64, prepared: [PreparedInsert]? = nil, history: PreparedHistory? = nil, temporaryIDsUnique: Bool = false, insertStatements: InsertStatements) {
        self.conn = conn; self.model = model; self.storeID = storeID; self.epoch = epoch; self.gen = gen
        self.currentGen = currentGen; self.req = request; self.config = config; self.nextPK = nextPK
        self.prepared = prepared.flatMap { $0.count == request.inserts.count ? $0 : nil }
        self.insertStatements = insertStatements
        self.temporaryIDsUnique = temporaryIDsUnique && self.prepared != nil
        // only for a save of new objects only, where insert i gets pk firstNewPK + i
        self.history = self.temporaryIDsUnique ? history.flatMap { $0.pkCuts.count == request.inserts.count && $0.storeID == storeID ? $0 : nil } : nil
    }

    /// The save's history record prepared on the caller's thread without its pks
    /// (`PreparedSave.history`); nil: encoded here from the recorded changes.
    let history: PreparedHistory?

    static let live = Int64.max

    struct Row {
        var pk: Int64
        var version: Int64
        var ent: String
        var created: Int64
        var cols: [String: SQLValue]
    }

    // MARK: rows

    func currentRow(_ root: String, _ pk: Int64) throws -> Row? {
        let cols = model.columns[root] ?? []
        var row: Row?
        try conn.query(model.currentRowSQL[root]!, [.integer(pk)]) { st in
            var c: [String: SQLValue] = [:]
            for (i, n) in cols.enumerated() { c[n] = st.value(i + 4) }
            row = Row(pk: st.int(0), version: st.int(1), ent: st.text(2), created: st.int(3), cols: c)
        }
        return row
    }

    func row(_ id: ObjectID) throws -> Row? {
        guard let root = model.root[id.entity], id.storeID == storeID else { return nil }
        guard let r = try currentRow(root, id.pk), model.family[id.entity]?.contains(r.ent) == true else { return nil }
        return r
    }

    /// Queues version 1 of a new object from its prepared column values (`PreparedInsert.columnArgs`);
    /// `flushInserts` writes it.
    func insertNew(_ root: String, pk: Int64, entity: String, columnArgs: [SQLValue]) throws {
        if root != pendingRoot { try flushInserts(); pendingRoot = root }
        pendingRows.append((pk, entity, columnArgs))
    }

    /// Writes the queued new rows (`writeNewRows`).
    func flushInserts() throws {
        if pendingRows.isEmpty { return }
        // moved out (unique): no exclusivity check per access of the class's array
        var rows: [(pk: Int64, entity: String, columnArgs: [SQLValue])] = []
        swap(&rows, &pendingRows)
        defer { rows.removeAll(keepingCapacity: true); swap(&rows, &pendingRows) }
        try writeNewRows(root: pendingRoot, rows.indices, pk: { rows[$0].pk }, entity: { rows[$0].entity }, columns: { rows[$0].columnArgs })
    }

    /// The inserts of a save whose history record was prepared (`history`): each is valid, has
    /// no uniqueness constraint or relationship and gets the next pk in order (needsNoSavepoint),
    /// so its rows go to the INSERT statements straight from the prepared inserts, without a
    /// queue, one run of inserts into the same table at a time.
    func insertPrepared(_ prepared: [PreparedInsert]) throws {
        let first = nextPK
        var start = 0
        while start < prepared.count {
            guard let info = prepared[start].info else { throw StorageError(.internalError, "prepared insert without its entity") }
            var end = start + 1
            while end < prepared.count, let e = prepared[end].info, e === info || e.root == info.root { end += 1 }
            try writeNewRows(root: info.root, start..<end, pk: { first + Int64($0) }, entity: { req.inserts[$0].entity }, columns: { prepared[$0].columnArgs })
            start = end
        }
        firstNewPK = first
        nextPK = first + Int64(prepared.count)
    }

    /// Writes new rows `range` (values from the accessors) into `root`'s table, up to
    /// `InsertStatements.sizes[0]` per INSERT: one statement (one VDBE run, one statement
    /// journal, one reset) per chunk instead of per row. A chunk whose rows are all of one entity
    /// binds its name once (`InsertStatements.statement`, `uniformEntity`).
    ///
    /// Text values are copied once into `InsertStatements.textBytes` and bound from there without
    /// SQLite copying them again (SQLITE_STATIC: one malloc and copy per value saved). The buffer
    /// is not touched until the statement has finished stepping. The statements' bindings are not
    /// cleared afterwards: every parameter is bound again before each step (only this function
    /// runs these statements), so a stale pointer into the buffer is never read.
    private func writeNewRows(root: String, _ range: Range<Int>, pk: (Int) -> Int64, entity: (Int) -> String, columns: (Int) -> [SQLValue]) throws {
        let width = 2 + (model.columns[root]?.count ?? 0)  // pk, z_ent, columns (`InsertStatements.statement`)
        let ins = insertStatements
        var i = range.lowerBound
        while i < range.upperBound {
            let n = InsertStatements.rows(remaining: range.upperBound - i, width: width, variableLimit: conn.variableLimit)
            let firstEntity = entity(i)
            var uniform = true
            for k in (i + 1)..<(i + n) where entity(k) != firstEntity { uniform = false; break }
            let st = try conn.statement(ins.statement(model, root: root, rows: n, width: width, uniformEntity: uniform))
            defer { sqlite3_reset(st.stmt) }
            conn.statementCount += 1
            // local copies (moved out, so unique): no exclusivity check per access of the class's arrays
            var bytes = ins.takeTextBytes(), slots = ins.takeTextSlots()
            defer { ins.textBytes = bytes; ins.textSlots = slots }
            try st.bind(1, .integer(gen))  // created_gen of every row; ended_gen and version are in the text
            var idx: Int32 = 2
            var lastEntity = firstEntity, lastEntitySlot = InsertStatements.append(firstEntity, to: &bytes)
            if uniform { slots.append((2, lastEntitySlot.offset, lastEntitySlot.count)); idx = 3 }
            for k in i..<(i + n) {
                let rc = sqlite3_bind_int64(st.stmt, idx, pk(k))
                if rc != SQLITE_OK { throw conn.error(rc, sql: st.sql) }
                idx += 1
                if !uniform {
                    // rows of one entity share its name's bytes
                    let e = entity(k)
                    if e != lastEntity { lastEntity = e; lastEntitySlot = InsertStatements.append(e, to: &bytes) }
                    slots.append((idx, lastEntitySlot.offset, lastEntitySlot.count))
                    idx += 1
                }
                // numbers straight to SQLite (no `Statement.bind` switch and copy per value)
                try columns(k).withUnsafeBufferPointer { values in
                    for v in values {
                        var rc = SQLITE_OK
                        switch v {
                        case .integer(let x): rc = sqlite3_bind_int64(st.stmt, idx, x)
                        case .real(let x): rc = sqlite3_bind_double(st.stmt, idx, x)
                        case .null: rc = sqlite3_bind_null(st.stmt, idx)
                        case .text(let t):
                            let at = InsertStatements.append(t, to: &bytes)
                            slots.append((idx, at.offset, at.count))
                        case .blob: try st.bind(idx, v)
                        }
                        if rc != SQLITE_OK { throw conn.error(rc, sql: st.sql) }
                        idx += 1
                    }
                }
            }
            try bytes.withUnsafeBufferPointer { buf in
                let base = UnsafeRawPointer(buf.baseAddress!)  // never empty (`takeTextBytes`)
                for t in slots {
                    let rc = sqlite3_bind_text(st.stmt, t.index, (base + t.offset).assumingMemoryBound(to: CChar.self), Int32(t.count), ubq_sqlite_static())
                    if rc != SQLITE_OK { throw conn.error(rc, sql: st.sql) }
                }
                while try st.step() {}
            }
            i += n
        }
    }

    func insertRow(_ root: String, _ r: Row) throws {
        let cols = model.columns[root] ?? []
        let args: [SQLValue] = [.integer(r.pk), .integer(gen), .integer(SaveTxn.live), .integer(r.version), .text(r.ent)] + cols.map { r.cols[$0] ?? .null }
        try conn.run(model.insertSQL[root]!, args)
    }

    /// Writes new column values for a live object: a new row version (or in place if this save created the version).
    @discardableResult
    func updateColumns(_ root: String, _ pk: Int64, _ changes: [String: SQLValue]) throws -> Int64 {
        guard var r = try currentRow(root, pk) else { throw StorageError(.internalError, "row vanished") }
        var differs = false
        for (k, v) in changes where r.cols[k] != v { r.cols[k] = v; differs = true }
        if !differs { return r.version }
        let t = q(ResolvedModel.tableName(root: root))
        if r.created == gen {
            let sets = changes.keys.sorted()
            try conn.run("UPDATE \(t) SET \(sets.map { "\(q($0)) = ?" }.joined(separator: ", ")) WHERE pk = ? AND ended_gen = \(ResolvedModel.live)",
                         sets.map { changes[$0]! } + [.integer(pk)])
        } else {
            try conn.run("UPDATE \(t) SET ended_gen = ? WHERE pk = ? AND ended_gen = \(ResolvedModel.live)", [.integer(gen), .integer(pk)])
            r.version += 1
            try insertRow(root, r)
        }
        let oid = ObjectID(storeID: storeID, entity: r.ent, pk: pk)
        versions[oid] = r.version
        return r.version
    }

    func endRow(_ root: String, _ r: Row) throws {
        let t = q(ResolvedModel.tableName(root: root))
        if r.created == gen {
            try conn.run("DELETE FROM \(t) WHERE pk = ? AND ended_gen = \(ResolvedModel.live)", [.integer(r.pk)])
        } else {
            try conn.run("UPDATE \(t) SET ended_gen = ? WHERE pk = ? AND ended_gen = \(ResolvedModel.live)", [.integer(gen), .integer(r.pk)])
        }
    }

    func joinTargets(_ table: String, left: Bool, _ pk: Int64) throws -> [Int64] {
        let (me, other) = left ? ("src", "dst") : ("dst", "src")
        var out: [Int64] = []
        try conn.query("SELECT \(other) FROM \(q(table)) WHERE \(me) = ? AND ended_gen = \(ResolvedModel.live) ORDER BY \(other)", [.integer(pk)]) { out.append($0.int(0)) }
        return out
    }

    func joinAdd(_ table: String, _ src: Int64, _ dst: Int64) throws {
        try conn.run("INSERT OR IGNORE INTO \(q(table)) (src, dst, created_gen, ended_gen) VALUES (?, ?, ?, \(ResolvedModel.live))", [.integer(src), .integer(dst), .integer(gen)])
    }

    func joinRemove(_ table: String, _ src: Int64, _ dst: Int64) throws {
        try conn.run("DELETE FROM \(q(table)) WHERE src = ? AND dst = ? AND ended_gen = \(ResolvedModel.live) AND created_gen = ?", [.integer(src), .integer(dst), .integer(gen)])
        try conn.run("UPDATE \(q(table)) SET ended_gen = ? WHERE src = ? AND dst = ? AND ended_gen = \(ResolvedModel.live)", [.integer(gen), .integer(src), .integer(dst)])
    }

    /// Current targets (pks) of a relationship of a live object.
    func targets(_ entity: String, _ name: String, _ pk: Int64) throws -> [Int64] {
        switch model.storage(entity: entity, relationship: name) {
        case .column(_, let column):
            guard let r = try currentRow(model.root[entity]!, pk), case .integer(let d) = r.cols[column] ?? .null else { return [] }
            return [d]
        case .inverseColumn(let table, let column):
            var out: [Int64] = []
            try conn.query("SELECT pk FROM \(q(table)) WHERE \(q(column)) = ? AND ended_gen = \(ResolvedModel.live) ORDER BY pk", [.integer(pk)]) { out.append($0.int(0)) }
            return out
        case .join(let table, let left):
            return try joinTargets(table, left: left, pk)
        }
    }

    func idFor(_ pk: Int64, family entity: String) throws -> ObjectID {
        if model.family[entity]?.count == 1 { return ObjectID(storeID: storeID, entity: entity, pk: pk) }
        let r = try currentRow(model.root[entity]!, pk)
        return ObjectID(storeID: storeID, entity: r?.ent ?? entity, pk: pk)
    }

    func record(_ id: ObjectID, _ kind: HistoryChange.Kind, _ props: [String], tombstone: [String: StorageValue]? = nil) {
        movePendingChanges()
        if var c = changes[id] {
            if kind == .delete {
                if c.kind == .insert { changes[id] = nil; changeOrder.removeAll { $0 == id }; return }
                c.kind = .delete; c.tombstone = tombstone
            } else {
                c.changedProperties = Array(Set(c.changedProperties).union(props)).sorted()
            }
            changes[id] = c
        } else {
            changes[id] = HistoryChange(kind: kind, objectID: id, entity: id.entity, changedProperties: props.sorted(), tombstone: tombstone)
            changeOrder.append(id)
        }
    }

    /// Moves `newObjectChanges` into `changes`/`changeOrder` (before any lookup or update of them).
    func movePendingChanges() {
        if newObjectChanges.isEmpty { return }
        for c in newObjectChanges { changes[c.objectID] = c; changeOrder.append(c.objectID) }
        newObjectChanges = []
    }

    // MARK: values

    func checkValues(_ entity: String, _ values: [String: StorageValue], object: String) {
        ValueChecker(model: model, config: config).checkValues(entity, values, object: object, into: &issues)
    }

    func checkRelationshipNames(_ entity: String, _ rels: [String: [ObjectReference]], object: String) {
        ValueChecker(model: model, config: config).checkRelationshipNames(entity, rels, object: object, into: &issues)
    }

    func sqlValues(_ entity: String, _ values: [String: StorageValue]) -> [String: SQLValue] {
        var out: [String: SQLValue] = [:]
        let attrs = model.attributes[entity]!
        for (k, v) in values { if let a = attrs[k] { out[ResolvedModel.attrColumn(k)] = ResolvedModel.toSQL(v, a.type) } }
        return out
    }

    func storageValues(_ entity: String, _ r: Row) -> [String: StorageValue] {
        var out: [String: StorageValue] = [:]
        for (k, a) in model.attributes[entity]! { out[k] = ResolvedModel.fromSQL(r.cols[ResolvedModel.attrColumn(k)] ?? .null, a.type) }
        return out
    }

    // MARK: run

    func run() throws -> SaveResult {
        if let h = req.modelVersionHash, h != model.hash {
            throw StorageError(.modelVersionMismatch, "client model \(h.prefix(12))… is not the store's model \(model.hash.prefix(12))…")
        }
        if let tx = req.clientTransactionID {
            if case .text(let json) = try conn.scalar("SELECT result FROM ubq_client_tx WHERE id = ?", [.text(tx)]),
               var r = try? JSONDecoder().decode(SaveResult.self, from: Data(json.utf8)) {
                r.replayed = true
                return r
            }
        }
        // one entry per inserted object: no rehashing while a large save fills them
        let n = req.inserts.count + req.updates.count
        if !temporaryIDsUnique { tempMap.reserveCapacity(req.inserts.count); versions.reserveCapacity(n) }
        touched.reserveCapacity(n)
        if temporaryIDsUnique { newObjectChanges.reserveCapacity(n) } else { changes.reserveCapacity(n); changeOrder.reserveCapacity(n) }

        try applyInserts()
        try applyUpdates()
        try applyRelationshipEdits()
        try applyDeletes()
        try validateCounts()

        if !issues.isEmpty { throw validationError() }
        if !conflicts.isEmpty {
            if conflicts.allSatisfy({ $0.kind == .uniquenessClash }) {
                throw StorageError(.constraintConflict(conflicts), "uniqueness constraint clash")
            }
            throw StorageError(.mergeConflict(conflicts), "\(conflicts.count) object(s) changed in the store since they were read")
        }

        let token = GenerationToken(storeID: storeID, epoch: epoch, generation: req.dryRun ? currentGen : gen)
        var result = SaveResult(token: token, permanentIDs: tempMap, versions: versions, resolvedConflicts: resolved, skipped: skipped, dryRun: req.dryRun, replayed: false,
                                firstNewPK: firstNewPK)
        if req.dryRun { return result }
        // `next_pk` and `generation` in ubq_meta are written by the group (`runGroup`), once.
        if let h = history {
            guard let first = firstNewPK else { throw StorageError(.internalError, "prepared history without new objects") }
            try insertHistory(HistoryJSON.fill(h, firstPK: first))
        } else {
            let ch = changeOrder.isEmpty ? newObjectChanges : { movePendingChanges(); return changeOrder.compactMap { changes[$0] } }()
            try insertHistory(HistoryJSON.encodeBytes(ch))
        }
        if let tx = req.clientTransactionID {
            let enc = JSONEncoder(); enc.outputFormatting = .sortedKeys
            result.replayed = false
            try conn.run("INSERT INTO ubq_client_tx (id, generation, result) VALUES (?, ?, ?)", [.text(tx), .integer(gen), .text(String(decoding: try enc.encode(result), as: UTF8.self))])
        }
        return result
    }

    func validationError() -> StorageError {
        StorageError.validationFailed(issues, "save failed validation", paths: locate)
    }

    /// Gives each issue about one of the request's changes its request path (`inserts[2].values.age`).
    /// Issues name objects (temporary IDs, URIs); the index is looked up only when the save fails.
    func locate(_ list: inout [ValidationIssue]) {
        var change: [String: (path: String, values: [String: StorageValue], relationships: [String: [ObjectReference]])] = [:]
        // reversed: the first change of an object names it
        for (i, d) in req.deletes.enumerated().reversed() { change[d.objectID.uri] = ("deletes[\(i)]", [:], [:]) }
        for (i, u) in req.updates.enumerated().reversed() { change[u.objectID.uri] = ("updates[\(i)]", u.values, u.relationships) }
        for (i, ins) in req.inserts.enumerated().reversed() { change[ins.temporaryID] = ("inserts[\(i)]", ins.values, ins.relationships) }
        for k in list.indices {
            guard let o = list[k].object, let c = change[o] else { continue }
            guard let p = list[k].property, !c.path.hasPrefix("deletes") else { list[k].field = c.path; continue }
            let isRelationship = c.values[p] == nil && (c.relationships[p] != nil || model.relationships[list[k].entity ?? ""]?[p] != nil)
            list[k].field = c.path + (isRelationship ? ".relationships." : ".values.") + p
        }
    }

    /// The save's history record. Its JSON is bound as text straight from the encoder's bytes
    /// (no String, no second copy by SQLite: SQLITE_STATIC while the statement steps; `reset`
    /// clears the binding).
    func insertHistory(_ json: [UInt8]) throws {
        let st = try conn.statement("INSERT INTO ubq_history (generation, timestamp, author, context, changes) VALUES (?, ?, ?, ?, ?)")
        defer { st.reset() }
        conn.statementCount += 1
        try st.bind([.integer(gen), .integer(Int64(Date().timeIntervalSince1970 * 1000)), req.author.map { .text($0) } ?? .null, req.contextName.map { .text($0) } ?? .null])
        try json.withUnsafeBufferPointer { b in
            // never empty: at least "[]"
            let rc = sqlite3_bind_text(st.stmt, 5, UnsafeRawPointer(b.baseAddress!).assumingMemoryBound(to: CChar.self), Int32(b.count), ubq_sqlite_static())
            if rc != SQLITE_OK { throw conn.error(rc, sql: st.sql) }
            while try st.step() {}
        }
    }

    func applyInserts() throws {
        var seen = Set<String>()
        if !temporaryIDsUnique { seen.reserveCapacity(req.inserts.count) }
        if history != nil, let prepared { try insertPrepared(prepared); return }
        var preparer = InsertPreparer(model: model, config: config)
        for (index, ins) in req.inserts.enumerated() {
            try checkCancelled(index)
            let obj = ins.temporaryID
            if !temporaryIDsUnique && !seen.insert(obj).inserted { issues.append(ValidationIssue(.duplicateTemporaryID, object: obj, "temporary ID used twice")); continue }
            let p = prepared?[index] ?? preparer.prepare(ins)
            if !p.issues.isEmpty { issues.append(contentsOf: p.issues); continue }
            guard let ent = p.info else { continue }
            let full = p.full
            // uniqueness constraints (own and inherited): their queries must see every row queued so far
            if !ent.constraints.isEmpty { try flushInserts() }
            var clash: (Row, [String])?
            do {
                for u in ent.constraints where clash == nil {
                    var args: [SQLValue] = []
                    var anyNull = false
                    for p in u {
                        if let a = ent.attributes[p] {
                            let v = ResolvedModel.toSQL(full[p] ?? .null, a.type)
                            if v == .null { anyNull = true }
                            args.append(v)
                        } else if case .permanent(let id)? = ins.relationships[p]?.first {
                            args.append(.integer(id.pk))
                        } else { anyNull = true }
                    }
                    if anyNull { continue }
                    let root = model.root[ins.entity]!
                    let whereSQL = u.map { "\(q(model.propertyColumn(ins.entity, $0))) = ?" }.joined(separator: " AND ")
                    var found: Int64?
                    try conn.query("SELECT pk FROM \(q(ResolvedModel.tableName(root: root))) WHERE ended_gen = \(ResolvedModel.live) AND \(whereSQL) LIMIT 1", args) { found = $0.int(0) }
                    if let pk = found, let r = try currentRow(root, pk) { clash = (r, u) }
                }
            }
            if let (existing, constraint) = clash {
                let eid = ObjectID(storeID: storeID, entity: existing.ent, pk: existing.pk)
                let storeVals = storageValues(existing.ent, existing)
                let rec = ConflictRecord(kind: .uniquenessClash, objectID: eid, temporaryID: obj, entity: ins.entity, clientSnapshot: [:], clientChanges: ins.values,
                                         storeValues: storeVals, clientVersion: 0, storeVersion: existing.version, constraint: constraint)
                if req.mergePolicy == .error { conflicts.append(rec); clashedTemporaryIDs.insert(obj); continue }
                resolved.append(rec)
                tempMap[obj] = eid
                upserted.insert(obj)
                let entName = existing.ent
                var apply: [String: StorageValue] = [:]
                switch req.mergePolicy {
                case .mergeByPropertyObjectTrump, .overwrite:
                    apply = ins.values.filter { model.attributes[entName]?[$0.key] != nil }
                case .mergeByPropertyStoreTrump:
                    apply = ins.values.filter { model.attributes[entName]?[$0.key] != nil && (storeVals[$0.key]?.isNull ?? true) }
                case .rollback, .error: break
                }
                if !apply.isEmpty {
                    versions[eid] = try updateColumns(model.root[entName]!, existing.pk, sqlValues(entName, apply))
                    record(eid, .update, Array(apply.keys))
                }
                touched.insert(eid)
                continue
            }
            let pk = nextPK; nextPK += 1
            // A save of new objects only: every insert gets the next pk, in order, and nothing
            // looks an ID up here; the result's maps are made from the request by the caller.
            let oid = ObjectID(storeID: storeID, entity: ins.entity, pk: pk)
            if temporaryIDsUnique { if firstNewPK == nil { firstNewPK = pk } } else { tempMap[obj] = oid; versions[oid] = 1 }
            try insertNew(ent.root, pk: pk, entity: ins.entity, columnArgs: p.columnArgs)
            if !model.countChecked.isEmpty { touched.insert(oid) }  // only validateCounts reads it
            // a new pk: no change recorded for it yet
            let change = HistoryChange(kind: .insert, objectID: oid, entity: ins.entity, changedProperties: p.changedProperties, tombstone: nil)
            if temporaryIDsUnique { newObjectChanges.append(change) } else { movePendingChanges(); changes[oid] = change; changeOrder.append(oid) }
        }
        try flushInserts()
    }

    /// The attribute values the client read: its snapshot, else the stored version it names (if still retained).
    func clientBase(_ u: UpdateOperation, _ ent: String) throws -> [String: StorageValue]? {
        if let s = u.snapshot { return s }
        guard let v = u.expectedVersion else { return nil }
        let root = model.root[ent]!
        let cols = model.columns[root] ?? []
        var out: [String: StorageValue]?
        try conn.query("SELECT \(cols.isEmpty ? "1" : cols.map(q).joined(separator: ", ")) FROM \(q(ResolvedModel.tableName(root: root))) WHERE pk = ? AND version = ? LIMIT 1",
                       [.integer(u.objectID.pk), .integer(v)]) { st in
            var c: [String: SQLValue] = [:]
            for (i, n) in cols.enumerated() { c[n] = st.value(i) }
            out = storageValues(ent, Row(pk: 0, version: v, ent: ent, created: 0, cols: c))
        }
        return out
    }

    /// A live object other than `excluding` holding the same values for a uniqueness constraint
    /// that involves a changed attribute.
    func uniquenessClash(_ entity: String, merged: [String: StorageValue], changed: Set<String>, excluding pk: Int64) throws -> (Row, [String])? {
        let root = model.root[entity]!
        for e in model.chain[entity]! {
            for u in model.entities[e]!.uniquenessConstraints where !changed.isDisjoint(with: u) {
                guard u.allSatisfy({ model.attributes[entity]![$0] != nil }) else { continue }
                let args = u.map { ResolvedModel.toSQL(merged[$0] ?? .null, model.attributes[entity]![$0]!.type) }
                if args.contains(.null) { continue }
                let whereSQL = u.map { "\(q(ResolvedModel.attrColumn($0))) = ?" }.joined(separator: " AND ")
                var found: Int64?
                try conn.query("SELECT pk FROM \(q(ResolvedModel.tableName(root: root))) WHERE ended_gen = \(ResolvedModel.live) AND \(whereSQL) AND pk <> ? LIMIT 1",
                               args + [.integer(pk)]) { found = $0.int(0) }
                if let f = found, let other = try currentRow(root, f) { return (other, u) }
            }
        }
        return nil
    }

    func everExisted(_ id: ObjectID) throws -> Bool {
        guard let root = model.root[id.entity] else { return false }
        if case .integer(let n) = try conn.scalar("SELECT count(*) FROM \(q(ResolvedModel.tableName(root: root))) WHERE pk = ?", [.integer(id.pk)]), n > 0 { return true }
        return id.pk < nextPK && id.pk > 0 && id.storeID == storeID
    }

    var applyRelationshipsFor: [(ObjectID, [String: [ObjectReference]])] = []

    /// Whether the save's caller gave up (cancelled, or its deadline passed); set by the writer.
    var isCancelled: () -> Bool = { false }

    /// Every 256 changes: stop a long save nobody waits for any more (the savepoint undoes it).
    func checkCancelled(_ index: Int) throws {
        if index & 255 == 255, isCancelled() { throw StorageError(.cancelled, "request cancelled") }
    }

    func applyUpdates() throws {
        if !req.updates.isEmpty { movePendingChanges() }
        for (index, u) in req.updates.enumerated() {
            try checkCancelled(index)
            let id = u.objectID, obj = id.uri
            guard id.storeID == storeID else { issues.append(ValidationIssue(.objectNotFound, object: obj, "object ID of another store")); continue }
            guard model.entities[id.entity] != nil else { issues.append(ValidationIssue(.unknownEntity, object: obj, entity: id.entity, "no entity \(id.entity)")); continue }
            let before = issues.count
            checkValues(id.entity, u.values, object: obj)
            checkRelationshipNames(id.entity, u.relationships, object: obj)
            if issues.count > before { continue }
            guard let r = try row(id) else {
                if try !everExisted(id) { issues.append(ValidationIssue(.objectNotFound, object: obj, entity: id.entity, "no such object")); continue }
                let rec = ConflictRecord(kind: .deletedInStore, objectID: id, entity: id.entity, clientSnapshot: u.snapshot ?? [:], clientChanges: u.values,
                                         storeValues: [:], clientVersion: u.expectedVersion ?? 0, storeVersion: 0, constraint: [])
                if req.mergePolicy == .error { conflicts.append(rec) } else { resolved.append(rec); skipped.append(id) }
                continue
            }
            var apply = u.values
            var applyRels = true
            if let ev = u.expectedVersion, ev != r.version {
                let base = try clientBase(u, r.ent)
                let storeVals = storageValues(r.ent, r)
                let rec = ConflictRecord(kind: .versionChanged, objectID: id, entity: r.ent, clientSnapshot: base ?? [:], clientChanges: u.values,
                                         storeValues: storeVals, clientVersion: ev, storeVersion: r.version, constraint: [])
                switch req.mergePolicy {
                case .error: conflicts.append(rec); continue
                case .rollback: resolved.append(rec); skipped.append(id); continue
                case .mergeByPropertyObjectTrump: resolved.append(rec)
                case .mergeByPropertyStoreTrump:
                    resolved.append(rec)
                    // a property changed in the store since the client's read keeps the store value
                    apply = apply.filter { k, _ in
                        guard let b = base else { return false }
                        return (b[k] ?? .null) == (storeVals[k] ?? .null)
                    }
                case .overwrite:
                    resolved.append(rec)
                    var full = base ?? [:]
                    for (k, v) in u.values { full[k] = v }
                    apply = full.filter { model.attributes[r.ent]?[$0.key] != nil }
                }
                if req.mergePolicy == .mergeByPropertyStoreTrump { applyRels = base != nil }
            }
            let ent = r.ent
            let realID = ObjectID(storeID: storeID, entity: ent, pk: id.pk)
            if !apply.isEmpty, let (other, constraint) = try uniquenessClash(ent, merged: storageValues(ent, r).merging(apply) { $1 }, changed: Set(apply.keys), excluding: id.pk) {
                // an update cannot be merged into another object: a clash fails the save under every policy
                conflicts.append(ConflictRecord(kind: .uniquenessClash, objectID: ObjectID(storeID: storeID, entity: other.ent, pk: other.pk), temporaryID: nil, entity: ent,
                                                clientSnapshot: u.snapshot ?? [:], clientChanges: u.values, storeValues: storageValues(other.ent, other),
                                                clientVersion: u.expectedVersion ?? r.version, storeVersion: other.version, constraint: constraint))
                continue
            }
            if !apply.isEmpty {
                try updateColumns(model.root[ent]!, id.pk, sqlValues(ent, apply))
                record(realID, .update, Array(apply.keys))
            }
            touched.insert(realID)
            if applyRels && !u.relationships.isEmpty { applyRelationshipsFor.append((realID, u.relationships)) }
            if versions[realID] == nil { versions[realID] = r.version }
        }
        for ins in req.inserts where !ins.relationships.isEmpty {
            guard let id = tempMap[ins.temporaryID] else { continue }
            if upserted.contains(ins.temporaryID) && !(req.mergePolicy == .mergeByPropertyObjectTrump || req.mergePolicy == .overwrite) { continue }
            applyRelationshipsFor.insert((id, ins.relationships), at: 0)
        }
    }

    func resolveRef(_ ref: ObjectReference, _ rel: RelationshipDefinition, from: ObjectID) throws -> Int64? {
        let obj = from.uri
        switch ref {
        case .temporary(let t):
            guard let id = tempMap[t] else {
                if clashedTemporaryIDs.contains(t) { pointsAtClash.insert(from); return nil }
                issues.append(ValidationIssue(.unknownTemporaryID, object: obj, entity: from.entity, property: rel.name, "no inserted object \(t) in this save")); return nil
            }
            guard model.family[rel.destination]?.contains(id.entity) == true else {
                issues.append(ValidationIssue(.relationshipWrongEntity, object: obj, entity: from.entity, property: rel.name, "\(id.entity) is not a \(rel.destination)")); return nil
            }
            return id.pk
        case .permanent(let id):
            guard model.family[rel.destination]?.contains(id.entity) == true else {
                issues.append(ValidationIssue(.relationshipWrongEntity, object: obj, entity: from.entity, property: rel.name, "\(id.entity) is not a \(rel.destination)")); return nil
            }
            guard try row(id) != nil else {
                issues.append(ValidationIssue(.relationshipTargetMissing, object: obj, entity: from.entity, property: rel.name, "\(id.uri) does not exist")); return nil
            }
            return id.pk
        }
    }

    func applyRelationshipEdits() throws {
        if !applyRelationshipsFor.isEmpty { movePendingChanges() }
        for (id, rels) in applyRelationshipsFor {
            for (name, refs) in rels.sorted(by: { $0.key < $1.key }) {
                guard let rel = model.relationships[id.entity]?[name] else { continue }
                var pks: [Int64] = []
                var ok = true
                for ref in refs { if let p = try resolveRef(ref, rel, from: id) { if !pks.contains(p) { pks.append(p) } } else { ok = false } }
                if !ok { continue }
                try setRelationship(id, name, pks)
                record(id, changes[id]?.kind == .insert ? .insert : .update, [name])
            }
        }
    }

    /// Sets a relationship to exactly `newTargets`, maintaining the inverse.
    func setRelationship(_ id: ObjectID, _ name: String, _ newTargets: [Int64]) throws {
        let rel = model.relationships[id.entity]![name]!
        let inv = rel.inverse.flatMap { model.relationships[rel.destination]?[$0] }
        let myRoot = model.root[id.entity]!, dstRoot = model.root[rel.destination]!
        switch model.storage(entity: id.entity, relationship: name) {
        case .column(_, let column):
            let old = try targets(id.entity, name, id.pk).first
            let new = newTargets.first
            if old == new { return }
            try updateColumns(myRoot, id.pk, [column: new.map { .integer($0) } ?? .null])
            if let inv, !inv.toMany {  // one-to-one: both sides stored
                let invCol = ResolvedModel.relColumn(inv.name)
                if let o = old, let orow = try currentRow(dstRoot, o), orow.cols[invCol] == .integer(id.pk) {
                    try updateColumns(dstRoot, o, [invCol: .null]); touch(o, rel.destination); recordOther(o, rel.destination, inv.name)
                }
                if let n = new, let nrow = try currentRow(dstRoot, n) {
                    if case .integer(let x) = nrow.cols[invCol] ?? .null, x != id.pk, try currentRow(myRoot, x) != nil {
                        try updateColumns(myRoot, x, [column: .null]); touch(x, id.entity); recordOther(x, id.entity, name)
                    }
                    try updateColumns(dstRoot, n, [invCol: .integer(id.pk)]); touch(n, rel.destination); recordOther(n, rel.destination, inv.name)
                }
            } else {
                if let o = old { touch(o, rel.destination, versionOnly: true) }
                if let n = new { touch(n, rel.destination, versionOnly: true) }
            }
        case .inverseColumn(_, let column):
            let old = Set(try targets(id.entity, name, id.pk)), new = Set(newTargets)
            let invName = rel.inverse ?? ""
            for x in old.subtracting(new).sorted() { try updateColumns(dstRoot, x, [column: .null]); touch(x, rel.destination); recordOther(x, rel.destination, invName) }
            for y in new.subtracting(old).sorted() {
                if let yr = try currentRow(dstRoot, y), case .integer(let prev) = yr.cols[column] ?? .null { touch(prev, id.entity, versionOnly: true) }
                try updateColumns(dstRoot, y, [column: .integer(id.pk)]); touch(y, rel.destination); recordOther(y, rel.destination, invName)
            }
        case .join(let table, let left):
            let old = Set(try joinTargets(table, left: left, id.pk)), new = Set(newTargets)
            // a relationship that is its own inverse (Person.friends ↔ friends) is stored in both directions
            let symmetric = isSelfInverse(id.entity, name)
            for x in old.subtracting(new).sorted() {
                try left ? joinRemove(table, id.pk, x) : joinRemove(table, x, id.pk)
                if symmetric { try joinRemove(table, x, id.pk) }
                touch(x, rel.destination, versionOnly: true)
            }
            for y in new.subtracting(old).sorted() {
                try left ? joinAdd(table, id.pk, y) : joinAdd(table, y, id.pk)
                if symmetric { try joinAdd(table, y, id.pk) }
                touch(y, rel.destination, versionOnly: true)
            }
        }
    }

    /// History entry for an object changed by inverse maintenance.
    func recordOther(_ pk: Int64, _ family: String, _ property: String) {
        guard let oid = try? idFor(pk, family: family) else { return }
        record(oid, changes[oid]?.kind == .insert ? .insert : .update, [property])
    }

    func isSelfInverse(_ entity: String, _ name: String) -> Bool {
        guard let r = model.relationships[entity]?[name], r.inverse == name else { return false }
        return model.owner(entity, name) == model.owner(r.destination, name)
    }

    func touch(_ pk: Int64, _ family: String, versionOnly: Bool = false) {
        if let id = try? idFor(pk, family: family) { touched.insert(id) }
    }

    func applyDeletes() throws {
        if !req.deletes.isEmpty { movePendingChanges() }
        for d in req.deletes {
            let id = d.objectID, obj = id.uri
            guard id.storeID == storeID, model.entities[id.entity] != nil else {
                issues.append(ValidationIssue(.objectNotFound, object: obj, entity: id.entity, "no such object")); continue
            }
            guard let r = try row(id) else {
                if deleted.contains(id) { continue }
                if try !everExisted(id) { issues.append(ValidationIssue(.objectNotFound, object: obj, entity: id.entity, "no such object")); continue }
                let rec = ConflictRecord(kind: .deletedInStore, objectID: id, entity: id.entity, clientSnapshot: [:], clientChanges: [:], storeValues: [:],
                                         clientVersion: d.expectedVersion ?? 0, storeVersion: 0, constraint: [])
                if req.mergePolicy == .error { conflicts.append(rec) } else { resolved.append(rec) }
                continue
            }
            // a row this save already changed (inverse maintenance of its own relationship edits:
            // moving a note off a person clears the note's owner) has a version one past the
            // store's: the client read the store's, so that is what its version is checked against
            let storeVersion = r.created == gen ? r.version - 1 : r.version
            if let ev = d.expectedVersion, ev != storeVersion {
                let rec = ConflictRecord(kind: .versionChanged, objectID: id, entity: r.ent, clientSnapshot: [:], clientChanges: [:],
                                         storeValues: storageValues(r.ent, r), clientVersion: ev, storeVersion: storeVersion, constraint: [])
                switch req.mergePolicy {
                case .error: conflicts.append(rec); continue
                case .rollback, .mergeByPropertyStoreTrump: resolved.append(rec); skipped.append(id); continue
                case .mergeByPropertyObjectTrump, .overwrite: resolved.append(rec)
                }
            }
            try deleteObject(ObjectID(storeID: storeID, entity: r.ent, pk: r.pk))
        }
        for (id, name, dest, ts) in denyChecks {
            let live = try ts.filter { !deleted.contains(try idFor($0, family: dest)) }
            if !live.isEmpty {
                issues.append(ValidationIssue(.deleteDenied, object: id.uri, entity: id.entity, property: name, "\(name) still has \(live.count) object(s) (delete rule deny)"))
            }
        }
    }

    var denyChecks: [(ObjectID, String, String, [Int64])] = []

    func deleteObject(_ id: ObjectID) throws {
        if deleted.contains(id) { return }
        guard let r = try row(id) else { return }
        deleted.insert(id)
        for (name, rel) in model.relationships[id.entity]!.sorted(by: { $0.key < $1.key }) {
            let ts = try targets(id.entity, name, id.pk)
            switch rel.deleteRule {
            case .deny:
                // decided after every delete of the save ran: targets deleted by the same save don't count
                denyChecks.append((id, name, rel.destination, ts))
            case .cascade:
                for t in ts { try deleteObject(try idFor(t, family: rel.destination)) }
            case .nullify:
                if let invName = rel.inverse, let inv = model.relationships[rel.destination]?[invName], !inv.toMany {
                    let col = ResolvedModel.relColumn(invName)
                    let dstRoot = model.root[rel.destination]!
                    for t in ts where !deleted.contains(try idFor(t, family: rel.destination)) {
                        if let tr = try currentRow(dstRoot, t), tr.cols[col] == .integer(id.pk) {
                            try updateColumns(dstRoot, t, [col: .null]); touch(t, rel.destination)
                            record(try idFor(t, family: rel.destination), .update, [invName])
                        }
                    }
                } else {
                    for t in ts { touch(t, rel.destination, versionOnly: true) }
                }
            case .noAction: break
            }
            // the deleted object's own join rows end with it
            if case .join(let table, let left) = model.storage(entity: id.entity, relationship: name) {
                for t in ts {
                    try left ? joinRemove(table, id.pk, t) : joinRemove(table, t, id.pk)
                    if isSelfInverse(id.entity, name) { try joinRemove(table, t, id.pk) }
                }
            }
        }
        var tomb: [String: StorageValue] = [:]
        for (k, a) in model.attributes[id.entity]! where a.keepOnDelete { tomb[k] = ResolvedModel.fromSQL(r.cols[ResolvedModel.attrColumn(k)] ?? .null, a.type) }
        try endRow(model.root[id.entity]!, r)
        versions[id] = nil
        touched.remove(id)
        record(id, .delete, [], tombstone: tomb)
    }

    /// Relationship counts and required relationships of every live object this save touched.
    func validateCounts() throws {
        if model.countChecked.isEmpty { return }
        for id in touched.filter({ model.countChecked.contains($0.entity) }).sorted() where !deleted.contains(id) && !pointsAtClash.contains(id) {
            guard try row(id) != nil, let rels = model.relationships[id.entity] else { continue }
            for (name, rel) in rels.sorted(by: { $0.key < $1.key }) {
                let needsCheck = !rel.optional || rel.minCount != nil || rel.maxCount != nil
                if !needsCheck { continue }
                let live = try targets(id.entity, name, id.pk).filter { !deleted.contains(try idFor($0, family: rel.destination)) }
                let n = live.count
                if !rel.optional && n == 0 {
                    issues.append(ValidationIssue(.missingRequired, object: id.uri, entity: id.entity, property: name, "\(name) is required")); continue
                }
                if let lo = rel.minCount, lo > 0, n < lo, !(rel.optional && n == 0) {
                    issues.append(ValidationIssue(.tooFewObjects, object: id.uri, entity: id.entity, property: name, "\(n) < minCount \(lo)"))
                }
                if let hi = rel.maxCount, hi > 0, n > hi {
                    issues.append(ValidationIssue(.tooManyObjects, object: id.uri, entity: id.entity, property: name, "\(n) > maxCount \(hi)"))
                }
            }
        }
    }
}

/// Value checks that need only the model and the configuration (no store state).
struct ValueChecker {
    let model: ResolvedModel
    let config: StorageConfiguration

        func checkValues(_ entity: String, _ values: [String: StorageValue], object: String?,
                         attributes: [String: AttributeDefinition]? = nil, into issues: inout [ValidationIssue]) {
            let attrs = attributes ?? model.attributes[entity]!
            let before = issues.count
            defer { Self.sortByProperty(&issues, from: before) }
            for (k, v) in values {
                guard let a = attrs[k] else { unknownAttribute(entity, k, object: object, into: &issues); continue }
                checkValue(entity, k, v, a, object: object, into: &issues)
            }
        }

        /// `checkValues` for an insert of `ent`: also puts each known attribute's value in its slot.
        func checkValues(_ ent: InsertEntity, _ entity: String, _ values: [String: StorageValue], object: String,
                         slots: inout [StorageValue?], into issues: inout [ValidationIssue]) {
            let before = issues.count
            defer { Self.sortByProperty(&issues, from: before) }
            for (k, v) in values {
                guard let i = ent.slotIndex(k) else { unknownAttribute(entity, k, object: object, into: &issues); continue }
                slots[i] = v
                if ent.passesCheck(i, v, maxValueBytes: config.maxValueBytes) { continue }
                checkValue(entity, k, v, ent.slotAttributes[i], object: object, into: &issues)
            }
        }

        /// Issues come out in property-name order (each property's issues stay together in the
        /// order they were found), without sorting every object's values first.
        static func sortByProperty(_ issues: inout [ValidationIssue], from before: Int) {
            if issues.count > before + 1 {
                let mine = issues[before...].enumerated().sorted { a, b in
                    let (ka, kb) = (a.element.property ?? "", b.element.property ?? "")
                    return ka != kb ? ka < kb : a.offset < b.offset
                }.map(\.element)
                issues.replaceSubrange(before..., with: mine)
            }
        }

        func unknownAttribute(_ entity: String, _ k: String, object: String?, into issues: inout [ValidationIssue]) {
            // a name from the request, echoed back: at most 40 characters of it
            let name = k.count > 40 ? k.prefix(40) + "…" : k
            issues.append(ValidationIssue(.unknownProperty, object: object, entity: entity, property: name,
                                          model.relationships[entity]![k] != nil ? "\(k) is a relationship: set it through relationships" : "\(entity) has no attribute \(name)"))
        }

        /// One attribute value's type, size and bound checks.
        func checkValue(_ entity: String, _ k: String, _ v: StorageValue, _ a: borrowing AttributeDefinition, object: String?, into issues: inout [ValidationIssue]) {
                if v.isNull {
                    if !a.optional { issues.append(ValidationIssue(.missingRequired, object: object, entity: entity, property: k, "\(k) is required")) }
                    return
                }
                if let err = ResolvedModel.typeError(a, v) {
                    issues.append(ValidationIssue(err.contains("range") ? .outOfRange : .wrongType, object: object, entity: entity, property: k, err)); return
                }
                var size: Int?
                switch v {
                case .string(let s), .uri(let s): size = s.utf8.count
                case .binary(let d): size = d.count
                default: break
                }
                if let size, size > config.maxValueBytes {
                    issues.append(ValidationIssue(.tooLarge, object: object, entity: entity, property: k, "\(size) bytes exceeds the limit of \(config.maxValueBytes)")); return
                }
                if a.minimum == nil && a.maximum == nil { return }  // no bound: nothing to measure (string length counts characters, which is slow)
                var measure: Double?
                switch v {
                case .string(let s): measure = Double(s.count)
                case .binary(let d): measure = Double(d.count)
                case .int(let i): measure = Double(i)
                case .double(let d), .date(let d): measure = d
                case .decimal(let s): measure = Double(s)
                default: break
                }
                if let m = measure {
                    let what = (a.type == .string || a.type == .binary) ? "length " : ""
                    if let lo = a.minimum, m < lo { issues.append(ValidationIssue(.belowMinimum, object: object, entity: entity, property: k, "\(what)\(m) < minimum \(lo)")) }
                    if let hi = a.maximum, m > hi { issues.append(ValidationIssue(.aboveMaximum, object: object, entity: entity, property: k, "\(what)\(m) > maximum \(hi)")) }
                }
        }

        func checkRelationshipNames(_ entity: String, _ rels: [String: [ObjectReference]], object: String, into issues: inout [ValidationIssue]) {
            for (k, v) in rels.sorted(by: { $0.key < $1.key }) {
                guard let r = model.relationships[entity]![k] else {
                    issues.append(ValidationIssue(.unknownProperty, object: object, entity: entity, property: k, "\(entity) has no relationship \(k)")); continue
                }
                if !r.toMany && v.count > 1 { issues.append(ValidationIssue(.tooManyObjects, object: object, entity: entity, property: k, "to-one relationship given \(v.count) objects")) }
            }
        }
}

/// What inserts need of an entity, looked up once per entity and save. A class: each prepared
/// insert refers to it without copying its tables (immutable after init, so Sendable).
final class InsertEntity: Sendable {
    let isAbstract: Bool
    let attributes: [String: AttributeDefinition]
    /// Own and inherited uniqueness constraints, in the order they are checked.
    let constraints: [[String]]
    let root: String
    /// Each attribute has a slot: its index in `slotNames`/`slotAttributes`, which list the
    /// attributes in `attributes`' iteration order (the order defaults and missing-value issues
    /// have always been produced in).
    let slot: [String: Int]
    let slotNames: [String]
    let slotAttributes: [AttributeDefinition]
    /// For each column of the root table after the fixed ones: the slot of the attribute it stores
    /// for this entity and its type (nil: another entity's column or a relationship column, NULL
    /// on insert).
    let columns: [(slot: Int, type: AttributeType)?]
    /// Every attribute name, sorted: the changed properties of an insert that sets them all.
    let sortedNames: [String]

    init(isAbstract: Bool, attributes: [String: AttributeDefinition], constraints: [[String]], root: String, rootColumns: [String]) {
        self.isAbstract = isAbstract; self.attributes = attributes; self.constraints = constraints; self.root = root
        var slot: [String: Int] = [:]
        for (i, k) in attributes.keys.enumerated() { slot[k] = i }
        let slotAttributes = Array(attributes.values)
        self.slot = slot
        slotNames = Array(attributes.keys)
        self.slotAttributes = slotAttributes
        slotChecks = slotAttributes.map { ($0.type, $0.minimum == nil && $0.maximum == nil) }
        columns = rootColumns.map { c in
            guard c.hasPrefix("a_"), let i = slot[String(c.dropFirst(2))] else { return nil }
            return (i, slotAttributes[i].type)
        }
        sortedNames = attributes.keys.sorted()
    }

    /// Per slot: the attribute's type and whether it has no bound (`passesCheck`).
    let slotChecks: [(type: AttributeType, unbounded: Bool)]

    /// True when `checkValue` finds nothing wrong with `v` for the attribute in `slot`, decided
    /// without copying its definition: not null, the right type, within the size limit, and the
    /// attribute has no bound (checkValue stops there too). False: run `checkValue`.
    func passesCheck(_ slot: Int, _ v: StorageValue, maxValueBytes: Int) -> Bool {
        let c = slotChecks[slot]
        guard c.unbounded, !v.isNull, ResolvedModel.typeError(c.type, v) == nil else { return false }
        switch v {
        case .string(let s), .uri(let s): return s.utf8.count <= maxValueBytes
        case .binary(let d): return d.count <= maxValueBytes
        default: return true
        }
    }

    /// The slot of attribute `name`, nil if the entity has none. A small entity's names are
    /// scanned (`==` on short names costs less than hashing the name); the same String equality
    /// as the `slot` dictionary's, so the same answer (InsertPreparerTests).
    func slotIndex(_ name: String) -> Int? {
        if slotNames.count <= 8 {
            for i in slotNames.indices where slotNames[i] == name { return i }
            return nil
        }
        return slot[name]
    }
}

/// The part of an insert that depends only on the model, the configuration and the request, not
/// on the store's contents: the issues found without the store, the values with defaults, the
/// row's column values, the history's changed properties. Computed on the saving caller's thread
/// before the save is queued (`Store.save`, docs/storage.md concurrency rule 12) so the writer thread only
/// does what needs the current state; computed on the writer when the model changed meanwhile or
/// a planner built the request.
struct PreparedInsert: Sendable {
    /// Unknown or abstract entity, value and relationship-name issues, missing required values, in
    /// the order the save reports them. Non-empty: nothing else is set.
    var issues: [ValidationIssue] = []
    var info: InsertEntity?
    var full: [String: StorageValue] = [:]
    /// The insert's values for the root table's columns after the five fixed ones.
    var columnArgs: [SQLValue] = []
    var changedProperties: [String] = []
}

/// A save's prepared inserts and the model they were prepared against (used only if the writer
/// still has that model).
struct PreparedSave: Sendable {
    let model: ResolvedModel
    let inserts: [PreparedInsert]
    /// Nothing but SQLite can make this save fail once it has written a row, so the writer runs
    /// it without a savepoint (docs/storage.md, group commit): only inserts, each without issues,
    /// relationships, uniqueness constraints or checked relationship counts, distinct temporary
    /// IDs, no dry run, no client transaction ID (no replay to roll back), the model hash (if
    /// given) this model's. What fails after that is SQLite's (I/O, disk full, interrupt), and
    /// the group fails as a whole, as it does when SQLite ends the transaction itself.
    var needsNoSavepoint = false
    /// For a save that needs no savepoint: its history record with a gap for each insert's pk
    /// (insert i gets pk `firstNewPK + i`), filled in by the writer (`HistoryJSON.fill`).
    var history: PreparedHistory?
}

struct InsertPreparer {
    let model: ResolvedModel
    let config: StorageConfiguration
    let checker: ValueChecker
    var infos: [String: InsertEntity] = [:]
    var last: (String, InsertEntity)?
    /// Scratch for the insert being prepared: each known attribute's value by slot (the entity's
    /// plan), so nothing below hashes a name. Reused from insert to insert (cleared first).
    var slots: [StorageValue?] = []

    init(model: ResolvedModel, config: StorageConfiguration) {
        self.model = model; self.config = config; checker = ValueChecker(model: model, config: config)
    }

    mutating func prepare(_ ins: InsertOperation) -> PreparedInsert {
        let obj = ins.temporaryID
        var p = PreparedInsert()
        let ent: InsertEntity
        if let l = last, l.0 == ins.entity { ent = l.1 } else if let e = infos[ins.entity] { ent = e; last = (ins.entity, e) } else {
            guard let def = model.entities[ins.entity] else {
                p.issues.append(ValidationIssue(.unknownEntity, object: obj, entity: ins.entity, "no entity \(ins.entity)")); return p
            }
            let root = model.root[ins.entity] ?? ""
            let e = InsertEntity(isAbstract: def.isAbstract, attributes: model.attributes[ins.entity]!,
                                 constraints: model.chain[ins.entity]!.flatMap { model.entities[$0]!.uniquenessConstraints }, root: root,
                                 rootColumns: model.columns[root] ?? [])
            infos[ins.entity] = e; last = (ins.entity, e); ent = e
        }
        if ent.isAbstract { p.issues.append(ValidationIssue(.abstractEntity, object: obj, entity: ins.entity, "\(ins.entity) is abstract")); return p }
        let n = ent.slotNames.count
        if slots.count == n { for i in 0..<n { slots[i] = nil } } else { slots = [StorageValue?](repeating: nil, count: n) }
        checker.checkValues(ent, ins.entity, ins.values, object: obj, slots: &slots, into: &p.issues)
        if !ins.relationships.isEmpty { checker.checkRelationshipNames(ins.entity, ins.relationships, object: obj, into: &p.issues) }
        var full = ins.values
        for i in slots.indices where slots[i]?.isNull ?? true {
            if let d = ent.slotAttributes[i].defaultValue, !d.isNull { full[ent.slotNames[i]] = d; slots[i] = d }
            else if !ent.slotAttributes[i].optional, ins.values[ent.slotNames[i]] == nil {
                // (an explicit null was reported by checkValues already: one issue per attribute)
                let k = ent.slotNames[i]
                p.issues.append(ValidationIssue(.missingRequired, object: obj, entity: ins.entity, property: k, "\(k) is required"))
            }
        }
        if !p.issues.isEmpty { return p }
        p.columnArgs.reserveCapacity(ent.columns.count)
        for c in ent.columns {
            if let c, let v = slots[c.slot] { p.columnArgs.append(ResolvedModel.toSQL(v, c.type)) } else { p.columnArgs.append(.null) }
        }
        // no issues: every key of `full` is an attribute, so all of them when the counts agree
        p.changedProperties = ins.relationships.isEmpty && full.count == ent.sortedNames.count
            ? ent.sortedNames : (Array(full.keys) + Array(ins.relationships.keys)).sorted()
        p.info = ent
        p.full = full
        return p
    }

    /// All of a request's inserts, in order. With `storeID`, a save of new objects only
    /// (`needsNoSavepoint`) also gets its history record, without its pks (`PreparedHistory`).
    static func prepare(_ req: SaveRequest, model: ResolvedModel, config: StorageConfiguration, storeID: UUID? = nil) -> PreparedSave {
        var preparer = InsertPreparer(model: model, config: config)
        var p = PreparedSave(model: model, inserts: req.inserts.map { preparer.prepare($0) })
        p.needsNoSavepoint = needsNoSavepoint(req, p.inserts, model: model)
        if p.needsNoSavepoint, let storeID {
            p.history = HistoryJSON.prepareInserts(storeID: storeID, count: req.inserts.count) { (req.inserts[$0].entity, p.inserts[$0].changedProperties) }
        }
        return p
    }

    /// See `PreparedSave.needsNoSavepoint`. Runs on the saving caller's thread.
    static func needsNoSavepoint(_ req: SaveRequest, _ inserts: [PreparedInsert], model: ResolvedModel) -> Bool {
        guard !req.inserts.isEmpty, req.updates.isEmpty, req.deletes.isEmpty, !req.dryRun, req.clientTransactionID == nil,
              req.modelVersionHash.map({ $0 == model.hash }) ?? true, inserts.count == req.inserts.count else { return false }
        var ids = Set<String>()
        ids.reserveCapacity(req.inserts.count)
        var checked: InsertEntity?
        for (ins, p) in zip(req.inserts, inserts) {
            guard p.issues.isEmpty, let e = p.info, ins.relationships.isEmpty, ids.insert(ins.temporaryID).inserted else { return false }
            if e !== checked {
                guard e.constraints.isEmpty, !model.countChecked.contains(ins.entity) else { return false }
                checked = e
            }
        }
        return true
    }
}
