import Foundation

/// Reads row versions visible at one generation: `created_gen <= G < ended_gen`.
/// With the primary key (pk, ended_gen) a read at any generation is one index seek to the first
/// version of pk ending after G — the same cost as a read at current.
struct RowReader {
    let conn: Connection
    let model: ResolvedModel
    let storeID: UUID
    let gen: Int64

    func selectSQL(root: String) -> String { model.selectPrefixSQL[root]! }

    func object(_ id: ObjectID) throws -> ObjectSnapshot? {
        guard id.storeID == storeID, let root = model.root[id.entity] else { return nil }
        var row: [SQLValue]?
        try conn.query(selectSQL(root: root) + "WHERE pk = ?1 AND ended_gen > ?2 ORDER BY ended_gen LIMIT 1", [.integer(id.pk), .integer(gen)]) { st in
            row = (0..<st.columnCount).map { st.value($0) }
        }
        guard let row, case .integer(let created) = row[3], created <= gen, case .text(let ent) = row[2],
              model.family[id.entity]?.contains(ent) == true else { return nil }
        return try snapshot(root: root, row: row)
    }

    func snapshot(root: String, row: [SQLValue]) throws -> ObjectSnapshot {
        guard case .integer(let pk) = row[0], case .integer(let version) = row[1], case .text(let ent) = row[2] else {
            throw StorageError(.corrupt, "malformed row")
        }
        let cols = model.columns[root] ?? []
        var colIndex: [String: Int] = [:]
        for (i, c) in cols.enumerated() { colIndex[c] = i + 4 }
        var values: [String: StorageValue] = [:]
        for (name, a) in model.attributes[ent]! {
            values[name] = ResolvedModel.fromSQL(row[colIndex[ResolvedModel.attrColumn(name)]!], a.type)
        }
        var rels: [String: [ObjectID]] = [:]
        for (name, r) in model.relationships[ent]! {
            switch model.storage(entity: ent, relationship: name) {
            case .column(_, let column):
                if case .integer(let dst) = row[colIndex[column]!], let oid = try resolve(dst, entity: r.destination) { rels[name] = [oid] } else { rels[name] = [] }
            case .inverseColumn(let table, let column):
                var ids: [ObjectID] = []
                try conn.query("SELECT pk, z_ent FROM \(q(table)) WHERE \(q(column)) = ?1 AND created_gen <= ?2 AND ended_gen > ?2 ORDER BY pk", [.integer(pk), .integer(gen)]) { st in
                    ids.append(ObjectID(storeID: storeID, entity: st.text(1), pk: st.int(0)))
                }
                rels[name] = ids
            case .join(let table, let left):
                var dsts: [Int64] = []
                let (me, other) = left ? ("src", "dst") : ("dst", "src")
                try conn.query("SELECT \(other) FROM \(q(table)) WHERE \(me) = ?1 AND created_gen <= ?2 AND ended_gen > ?2 ORDER BY \(other)", [.integer(pk), .integer(gen)]) { st in
                    dsts.append(st.int(0))
                }
                rels[name] = try dsts.compactMap { try resolve($0, entity: r.destination) }
            }
        }
        return ObjectSnapshot(id: ObjectID(storeID: storeID, entity: ent, pk: pk), version: version, values: values, relationships: rels)
    }

    /// The ID of pk (a destination of `entity`'s family) at this generation; nil if not visible.
    func resolve(_ pk: Int64, entity: String) throws -> ObjectID? {
        if model.family[entity]?.count == 1 { return ObjectID(storeID: storeID, entity: entity, pk: pk) }
        var ent: String?
        try conn.query("SELECT z_ent FROM \(q(model.table(of: entity))) WHERE pk = ?1 AND ended_gen > ?2 AND created_gen <= ?2 LIMIT 1", [.integer(pk), .integer(gen)]) { st in
            ent = st.text(0)
        }
        return ent.map { ObjectID(storeID: storeID, entity: $0, pk: pk) }
    }

    func all() throws -> [ObjectSnapshot] {
        var out: [ObjectSnapshot] = []
        for root in model.roots {
            var rows: [[SQLValue]] = []
            try conn.query(selectSQL(root: root) + "WHERE created_gen <= ?1 AND ended_gen > ?1 ORDER BY pk", [.integer(gen)]) { st in
                rows.append((0..<st.columnCount).map { st.value($0) })
            }
            for r in rows { out.append(try snapshot(root: root, row: r)) }
        }
        return out.sorted { $0.id < $1.id }
    }
}
