import Foundation

/// The request's deletes and the delete rules (deny, cascade, nullify) they trigger.
extension SaveTxn {
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
}
