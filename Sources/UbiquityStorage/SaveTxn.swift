internal import CSQLite
import Foundation

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
    /// The history row this save wrote, for the change feed once its group commits.
    var committedRecord: CommittedRecord?

    static let live = Int64.max

    struct Row {
        var pk: Int64
        var version: Int64
        var ent: String
        var created: Int64
        var cols: [String: SQLValue]
    }

    var applyRelationshipsFor: [(ObjectID, [String: [ObjectReference]])] = []

    /// Whether the save's caller gave up (cancelled, or its deadline passed); set by the writer.
    var isCancelled: () -> Bool = { false }

    var denyChecks: [(ObjectID, String, String, [Int64])] = []

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
        let ms = Int64(Date().timeIntervalSince1970 * 1000)
        try st.bind([.integer(gen), .integer(ms), req.author.map { .text($0) } ?? .null, req.contextName.map { .text($0) } ?? .null])
        // kept for the change feed: a reference to bytes the save already made, no copy
        committedRecord = CommittedRecord(generation: gen, timestampMS: ms, author: req.author, contextName: req.contextName, changes: json)
        try json.withUnsafeBufferPointer { b in
            // never empty: at least "[]"
            let rc = sqlite3_bind_text(st.stmt, 5, UnsafeRawPointer(b.baseAddress!).assumingMemoryBound(to: CChar.self), Int32(b.count), ubq_sqlite_static())
            if rc != SQLITE_OK { throw conn.error(rc, sql: st.sql) }
            while try st.step() {}
        }
    }

    /// Every 256 changes: stop a long save nobody waits for any more (the savepoint undoes it).
    func checkCancelled(_ index: Int) throws {
        if index & 255 == 255, isCancelled() { throw StorageError(.cancelled, "request cancelled") }
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
}
