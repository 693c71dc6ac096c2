import Foundation

/// Reads and writes of object rows and join rows, as one save sees them (versions of `gen`).
extension SaveTxn {
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
}
