internal import CSQLite
import Foundation

/// The request's inserts: validation, uniqueness clashes (upserts under the merge policies) and
/// the multi-row INSERTs of new objects' first versions.
extension SaveTxn {
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
            // uniqueness constraints (own and inherited): their queries must see every row queued so far
            if !ent.constraints.isEmpty { try flushInserts() }
            if let (existing, constraint) = try insertClash(ins, ent, values: p.full) {
                try resolveInsertClash(ins, existing: existing, constraint: constraint)
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

    /// A live object holding the insert's values for one of its entity's uniqueness constraints
    /// (a constraint with a NULL part never clashes).
    private func insertClash(_ ins: InsertOperation, _ ent: InsertEntity, values full: [String: StorageValue]) throws -> (Row, [String])? {
        for u in ent.constraints {
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
            if let pk = found, let r = try currentRow(root, pk) { return (r, u) }
        }
        return nil
    }

    /// An insert that clashed with `existing`: a conflict under the `error` policy, otherwise an
    /// upsert into the existing object as the merge policy says.
    private func resolveInsertClash(_ ins: InsertOperation, existing: Row, constraint: [String]) throws {
        let obj = ins.temporaryID
        let eid = ObjectID(storeID: storeID, entity: existing.ent, pk: existing.pk)
        let storeVals = storageValues(existing.ent, existing)
        let rec = ConflictRecord(kind: .uniquenessClash, objectID: eid, temporaryID: obj, entity: ins.entity, clientSnapshot: [:], clientChanges: ins.values,
                                 storeValues: storeVals, clientVersion: 0, storeVersion: existing.version, constraint: constraint)
        if req.mergePolicy == .error { conflicts.append(rec); clashedTemporaryIDs.insert(obj); return }
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
}
