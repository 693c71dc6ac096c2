import Foundation

/// Relationship edits of inserts and updates (inverse maintenance) and the relationship-count
/// validation of every object the save touched.
extension SaveTxn {
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
