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
    let feed: ChangeFeed

    init(storeID: UUID, config: StorageConfiguration, state: Locked<StoreState>, owned: WriterOwned, path: String, gate: ReaderGate, feed: ChangeFeed) {
        self.storeID = storeID; self.config = config; self.state = state; self.owned = owned; self.path = path; self.gate = gate; self.feed = feed
    }


    func handle(_ conn: Connection, _ jobs: [WriterJob]) {
        var group: [SaveJob] = []
        for j in jobs {
            switch j {
            case .save(let s): group.append(s)
            case .exclusive(_, let body):
                if !group.isEmpty { runGroup(conn, group); group = [] }
                endFence()  // its checkpoints must reach the WAL's end
                body(.success((conn, self)))
                // an exclusive job may move the generation (migration, bulk load) without records
                let (g, e) = state.withLock { ($0.generation, $0.epoch) }
                feed.noteGeneration(g, epoch: e)
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
        let t0 = config.observer.groupCommitted == nil ? 0 : DispatchTime.now().uptimeNanoseconds
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
        var records: [CommittedRecord] = []
        do { nextPK = try Meta.int(conn, "next_pk") } catch { aborted = error }
        saves: for (i, job) in jobs.enumerated() where aborted == nil {
            switch applySave(conn, job, model: model, epoch: epoch, gen: gen, nextPK: nextPK) {
            case .done(let r, let appliedNextPK, let record):
                results[i] = r
                if let pk = appliedNextPK { gen += 1; committed += 1; nextPK = pk }
                if let record { records.append(record) }
            case .abortGroup(let cause, let r):
                results[i] = r
                aborted = cause
                break saves
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
            Self.failSaves(&results, of: e, committedThrough: startGen)
            config.logger.warning("group commit failed: \(e)")
        } else if committed > 0 {
            let now = config.clock()
            state.withLock { s in  // publish before acknowledging (read-your-writes)
                s.generation = gen
                s.window.advanced(from: startGen, to: gen, at: now)
            }
            owned.commitsSinceGC += committed
            if let report = config.observer.groupCommitted {
                report(committed, Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e9)
            }
        }
        let waits = conn.busyWaits
        state.withLock { $0.writerBusyWaits = waits }
        for (i, j) in jobs.enumerated() { j.complete(results[i]!) }
        if committed > 0 && aborted == nil {
            feed.publish(records, epoch: epoch)
            afterCommit(conn)
        }
    }

    private enum SaveOutcome {
        /// The save's result; `nextPK` set if it was applied (a new generation), else nil; its
        /// history row for the change feed if it wrote one.
        case done(Result<SaveResult, Error>, nextPK: Int64?, record: CommittedRecord? = nil)
        /// SQLite's failure ends the whole group (the save's own result, if it has one).
        case abortGroup(Error, result: Result<SaveResult, Error>?)
    }

    /// One save of a group, at generation `gen + 1`, inside its own savepoint — or, if it can fail
    /// only in SQLite once it has written (`PreparedSave.needsNoSavepoint`), without one: SQLite's
    /// failures end the whole group anyway, and a savepoint costs a copy of every page the save
    /// touches.
    private func applySave(_ conn: Connection, _ job: SaveJob, model: ResolvedModel, epoch: UInt64, gen: Int64, nextPK: Int64) -> SaveOutcome {
        if job.flag.isCancelled { return .done(.failure(StorageError(.cancelled, "request cancelled")), nextPK: nil) }
        let (jobRequest, jobPrepared) = job.take()  // nothing of them stays with the writer once this save is done
        let prepared = job.planner == nil && jobPrepared?.model === model ? jobPrepared : nil
        let savepoint = !(prepared?.needsNoSavepoint ?? false)
        if savepoint {
            do { try conn.run("SAVEPOINT s") } catch { return .abortGroup(error, result: nil) }
        }
        do {
            var request = jobRequest
            if let plan = job.planner {
                let ctx = ReadContext(conn: conn, model: model, storeID: storeID, token: GenerationToken(storeID: storeID, epoch: epoch, generation: gen))
                guard let planned = try Self.runPlanner(plan, ctx, conn: conn, flag: job.flag) else {
                    // nothing to apply: no generation, no history
                    try conn.exec("ROLLBACK TO s"); try conn.exec("RELEASE s")
                    return .done(.success(SaveResult(token: ctx.token, permanentIDs: [:], versions: [:], resolvedConflicts: [], skipped: [], dryRun: false, replayed: false)), nextPK: nil)
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
                return .done(.success(r), nextPK: nil)
            }
            if savepoint { try conn.run("RELEASE s") }
            return .done(.success(r), nextPK: txn.nextPK, record: txn.committedRecord)
        } catch {
            if conn.isAutocommit { return .abortGroup(error, result: .failure(error)) }  // SQLite rolled the whole transaction back
            // Without a savepoint only a rollback of the whole group undoes what the save wrote.
            if !savepoint { return .abortGroup(error, result: .failure(error)) }
            do { try conn.exec("ROLLBACK TO s"); try conn.exec("RELEASE s") } catch let rollback { return .abortGroup(rollback, result: .failure(error)) }
            return .done(.failure(error), nextPK: nil)
        }
    }

    /// Runs a save's planner (`Store.save(planning:)`). A planner only reads (matching a batch's
    /// predicate can scan a large table): its SQL stops when the caller gives up. Writes are never
    /// interrupted here — an interrupted write can end the whole group's transaction.
    private static func runPlanner(_ plan: (ReadContext) throws -> SaveRequest?, _ ctx: ReadContext, conn: Connection, flag: CancelFlag) throws -> SaveRequest? {
        conn.currentCancel = flag
        defer { conn.currentCancel = nil }
        return try plan(ctx)
    }

    /// The group was not committed (`cause`): every save that looked applied fails with the
    /// cause — so do dry runs (they saw the group's earlier saves) and replays of saves made
    /// inside this group. Replays of saves committed before it (through `startGen`) stand.
    private static func failSaves(_ results: inout [Result<SaveResult, Error>?], of cause: Error, committedThrough startGen: Int64) {
        for i in results.indices {
            switch results[i] {
            case .none: results[i] = .failure(cause)
            case .success(let r) where !(r.replayed && r.token.generation <= startGen): results[i] = .failure(cause)
            default: break
            }
        }
    }
}
