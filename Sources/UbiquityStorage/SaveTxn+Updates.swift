import Foundation

/// The request's updates: version checks, merge policies, uniqueness clashes.
extension SaveTxn {
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
            // what applies: all of it, or what the merge policy keeps of a version conflict
            guard let (apply, applyRels) = try mergeVersionConflict(u, r) else { continue }
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

    /// What of update `u` to apply to the live row `r` (values, and whether its relationship
    /// edits apply): all of it when its expected version is the store's; otherwise the merge
    /// policy decides, recording the conflict. Nil: nothing applies (a conflict, or skipped).
    private func mergeVersionConflict(_ u: UpdateOperation, _ r: Row) throws -> (values: [String: StorageValue], relationships: Bool)? {
        guard let ev = u.expectedVersion, ev != r.version else { return (u.values, true) }
        let id = u.objectID
        let base = try clientBase(u, r.ent)
        let storeVals = storageValues(r.ent, r)
        let rec = ConflictRecord(kind: .versionChanged, objectID: id, entity: r.ent, clientSnapshot: base ?? [:], clientChanges: u.values,
                                 storeValues: storeVals, clientVersion: ev, storeVersion: r.version, constraint: [])
        switch req.mergePolicy {
        case .error: conflicts.append(rec); return nil
        case .rollback: resolved.append(rec); skipped.append(id); return nil
        case .mergeByPropertyObjectTrump:
            resolved.append(rec)
            return (u.values, true)
        case .mergeByPropertyStoreTrump:
            resolved.append(rec)
            // a property changed in the store since the client's read keeps the store value
            let apply = u.values.filter { k, _ in
                guard let b = base else { return false }
                return (b[k] ?? .null) == (storeVals[k] ?? .null)
            }
            return (apply, base != nil)
        case .overwrite:
            resolved.append(rec)
            var full = base ?? [:]
            for (k, v) in u.values { full[k] = v }
            return (full.filter { model.attributes[r.ent]?[$0.key] != nil }, true)
        }
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
}
