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

    /// This model's read shapes, cached on the connection.
    var shapes: ReadShapes { ReadShapes.of(model, on: conn) }

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

    func snapshot(root: String, row: [SQLValue]) throws -> ObjectSnapshot { try snapshots(root: root, rows: [row])[0] }

    /// Snapshots of rows of one root table (as selected by `selectSQL`), loading relationships
    /// set-based: one query per relationship per chunk of objects, never one per object.
    func snapshots(root: String, rows: [[SQLValue]]) throws -> [ObjectSnapshot] {
        let shapes = self.shapes
        var out: [ObjectSnapshot] = []
        out.reserveCapacity(rows.count)
        // rows of one entity follow each other in most results: its shape is looked up once
        var last: (entity: String, shape: ReadShapes.EntityShape)?
        var anyRelated = false
        for row in rows {
            guard case .integer(let pk) = row[0], case .integer(let version) = row[1], case .text(let ent) = row[2] else {
                throw StorageError(.corrupt, "malformed row")
            }
            if last?.entity != ent {
                guard let shape = shapes.entityShape(ent) else { throw StorageError(.corrupt, "malformed row") }
                last = (ent, shape)
            }
            let shape = last!.shape
            anyRelated = anyRelated || shape.related
            // A copy of the entity's template (every attribute, placeholder values) with each value
            // set through the template's indices: one allocation, no hashing of attribute names.
            var values = shape.template
            for slot in shape.slots { values.values[slot.position] = ResolvedModel.fromSQL(row[slot.index], slot.type) }
            out.append(ObjectSnapshot(id: ObjectID(storeID: storeID, entity: ent, pk: pk), version: version, values: values, relationships: [:]))
        }
        if !anyRelated { return out }
        let colIndex = shapes.columnIndex[root] ?? [:]
        var byEntity: [String: [Int]] = [:]
        for (i, o) in out.enumerated() { byEntity[o.id.entity, default: []].append(i) }
        for (ent, idxs) in byEntity.sorted(by: { $0.key < $1.key }) {
            let rels = shapes.relationships[ent]!
            if rels.isEmpty { continue }
            let pks = idxs.map { out[$0].id.pk }
            for (name, destination, storage) in rels {
                var targets: [Int64: [ObjectID]] = [:]
                switch storage {
                case .column(_, let column):
                    var dst: [Int: Int64] = [:]
                    for i in idxs { if case .integer(let d) = rows[i][colIndex[column]!] { dst[i] = d } }
                    let ids = try resolveAll(Array(Set(dst.values)), entity: destination)
                    for i in idxs { out[i].relationships[name] = dst[i].flatMap { ids[$0] }.map { [$0] } ?? [] }
                    continue
                case .inverseColumn(let table, let column):
                    try forChunks(pks) { list, args in
                        try conn.query("SELECT \(q(column)), pk, z_ent FROM \(q(table)) WHERE \(q(column)) IN (\(list)) AND created_gen <= ?1 AND ended_gen > ?1 ORDER BY pk", args) { st in
                            targets[st.int(0), default: []].append(ObjectID(storeID: storeID, entity: st.text(2), pk: st.int(1)))
                        }
                    }
                case .join(let table, let left):
                    let (me, other) = left ? ("src", "dst") : ("dst", "src")
                    var raw: [Int64: [Int64]] = [:]
                    try forChunks(pks) { list, args in
                        try conn.query("SELECT \(me), \(other) FROM \(q(table)) WHERE \(me) IN (\(list)) AND created_gen <= ?1 AND ended_gen > ?1 ORDER BY \(other)", args) { st in
                            raw[st.int(0), default: []].append(st.int(1))
                        }
                    }
                    let ids = try resolveAll(Array(Set(raw.values.joined())), entity: destination)
                    for (k, v) in raw { targets[k] = v.compactMap { ids[$0] } }
                }
                for i in idxs { out[i].relationships[name] = targets[out[i].id.pk] ?? [] }
            }
        }
        return out
    }

    /// IN-list sizes (and their texts `?2, ?3, …`) chunks are padded to.
    static let inLists: [(Int, String)] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 500].map { n in (n, (2...(n + 1)).map { "?\($0)" }.joined(separator: ", ")) }

    /// Runs `body` per chunk of at most 500 pks with the IN-list text (`?2, ?3, …`) and the
    /// arguments (`?1` is this reader's generation). Lists are padded to a few fixed lengths by
    /// repeating the last pk, so the statement cache sees a handful of texts, not one per length.
    func forChunks(_ pks: [Int64], _ body: (String, [SQLValue]) throws -> Void) throws {
        try forSizedChunks(pks) { i, args in try body(RowReader.inLists[i].1, args) }
    }

    /// `forChunks` passing the index of the IN-list size in `inLists` instead of its text.
    func forSizedChunks(_ pks: [Int64], _ body: (Int, [SQLValue]) throws -> Void) throws {
        var start = 0
        while start < pks.count {
            let chunk = pks[start..<min(start + RowReader.chunkSize, pks.count)]
            start += chunk.count
            let i = RowReader.inLists.firstIndex { $0.0 >= chunk.count }!
            let size = RowReader.inLists[i].0
            var args: [SQLValue] = []
            args.reserveCapacity(size + 1)
            args.append(.integer(gen))
            for p in chunk { args.append(.integer(p)) }
            while args.count < size + 1 { args.append(args.last!) }
            try body(i, args)
        }
    }

    /// IDs of pks (destinations of `entity`'s family) visible at this generation, in one query
    /// per chunk. For single-entity families no lookup is needed (as in `resolve`).
    func resolveAll(_ pks: [Int64], entity: String) throws -> [Int64: ObjectID] {
        var out: [Int64: ObjectID] = [:]
        if model.family[entity]?.count == 1 {
            for p in pks { out[p] = ObjectID(storeID: storeID, entity: entity, pk: p) }
            return out
        }
        try forChunks(pks.sorted()) { list, args in
            try conn.query("SELECT pk, z_ent FROM \(q(model.table(of: entity))) WHERE pk IN (\(list)) AND created_gen <= ?1 AND ended_gen > ?1", args) { st in
                out[st.int(0)] = ObjectID(storeID: storeID, entity: st.text(1), pk: st.int(0))
            }
        }
        return out
    }

    /// True if `objectsBatched(ids)` runs at most one statement: the IDs fall in one root table
    /// and one chunk, and no entity of that table has relationships to load.
    func loadsInOneStatement(_ ids: [ObjectID]) -> Bool {
        guard ids.count <= RowReader.chunkSize else { return false }
        if ids.count == 1 {
            guard ids[0].storeID == storeID, let p = shapes.point(ids[0].entity) else { return true }
            return p.oneStatement
        }
        var root: String?
        for id in ids where id.storeID == storeID {
            guard let r = model.root[id.entity] else { continue }
            if let root, root != r { return false }
            root = r
        }
        guard let root else { return true }
        return !shapes.rootsWithRelationships.contains(root)
    }

    static let chunkSize = 500

    /// Objects by ID, set-based: one query per root table and chunk of IDs, plus one per
    /// relationship and chunk. nil where an object does not exist at this generation.
    func objectsBatched(_ ids: [ObjectID]) throws -> [ObjectSnapshot?] {
        if ids.count == 1 { return [try objectBatched(ids[0])] }
        var found: [Int64: ObjectSnapshot] = [:]  // pks are unique store-wide
        var byRoot: [String: [Int64]] = [:]
        for id in ids where id.storeID == storeID { if let r = model.root[id.entity] { byRoot[r, default: []].append(id.pk) } }
        let batchSQL = shapes.batchSQL
        for (root, pks) in byRoot.sorted(by: { $0.key < $1.key }) {
            var rows: [[SQLValue]] = []
            try forSizedChunks(pks.count == 1 ? pks : Array(Set(pks)).sorted()) { size, args in
                try conn.query(batchSQL[root]![size], args) { st in
                    rows.append((0..<st.columnCount).map { st.value($0) })
                }
            }
            for s in try snapshots(root: root, rows: rows) { found[s.id.pk] = s }
        }
        return ids.map { id in
            guard id.storeID == storeID, let s = found[id.pk],
                  model.family[id.entity]?.contains(s.id.entity) == true else { return nil }
            return s
        }
    }

    /// `objectsBatched` of one ID (point reads): the same statement and checks, without the
    /// grouping by root table and the pk map.
    func objectBatched(_ id: ObjectID) throws -> ObjectSnapshot? {
        guard id.storeID == storeID, let p = shapes.point(id.entity) else { return nil }
        var rows: [[SQLValue]] = []
        try conn.query(p.sql, [.integer(gen), .integer(id.pk)]) { st in
            rows.append((0..<st.columnCount).map { st.value($0) })
        }
        guard let s = try snapshots(root: p.root, rows: rows).first, s.id.pk == id.pk,
              s.id.entity == id.entity ? p.familyHasSelf : p.family.contains(s.id.entity) else { return nil }
        return s
    }

    func all() throws -> [ObjectSnapshot] {
        var out: [ObjectSnapshot] = []
        for root in model.roots {
            var rows: [[SQLValue]] = []
            try conn.query(selectSQL(root: root) + "WHERE created_gen <= ?1 AND ended_gen > ?1 ORDER BY pk", [.integer(gen)]) { st in
                rows.append((0..<st.columnCount).map { st.value($0) })
            }
            out += try snapshots(root: root, rows: rows)
        }
        return out.sorted { $0.id < $1.id }
    }
}

/// What reads of one model need, computed once per model and reader connection (cached in
/// `Connection.readShapes`, replaced when the store's model changes) instead of on every read.
final class ReadShapes {
    let model: ResolvedModel
    /// Entity → its attributes with their type and index in a row selected by `selectPrefixSQL`.
    let attributes: [String: [AttributeSlot]]
    /// Root → column → index in a selected row.
    let columnIndex: [String: [String: Int]]
    /// Entity → its relationships sorted by name, with destination and storage.
    let relationships: [String: [(name: String, destination: String, storage: RelationshipStorage)]]
    /// Root → the batched select by ID, one text per `RowReader.inLists` size.
    let batchSQL: [String: [String]]
    /// Roots whose table holds an entity with relationships (loading those objects runs more
    /// than one statement).
    let rootsWithRelationships: Set<String>
    /// Entities none of whose family (itself and sub-entities) has a relationship.
    let withoutRelationships: Set<String>
    /// Entity → what building its snapshots needs: a dictionary holding every attribute (with a
    /// placeholder value), and per attribute its position in that dictionary, its type and its
    /// index in a selected row. A snapshot's values are a copy of the template with each value
    /// replaced by position (`Dictionary.Index` stays valid in a copy), so reading a row hashes no
    /// attribute name.
    let entityShapes: [String: EntityShape]

    struct EntityShape {
        let template: [String: StorageValue]
        let slots: [(position: Dictionary<String, StorageValue>.Index, type: AttributeType, index: Int)]
        /// The entity has relationships to load.
        let related: Bool
    }

    /// What a read of one ID of an entity needs (`objectBatched`, `loadsInOneStatement`).
    /// A class: a point read asks for it twice (one-statement check, then the read), and a copy
    /// is one retain rather than one per string and set (immutable; the connection's thread only).
    final class PointShape {
        let root: String
        /// The batched select of one ID in the root table.
        let sql: String
        /// The entity and its sub-entities (a row of another entity is not this ID's object).
        let family: Set<String>
        let familyHasSelf: Bool
        /// No entity of the root table has relationships: the read is one statement.
        let oneStatement: Bool

        init(root: String, sql: String, family: Set<String>, familyHasSelf: Bool, oneStatement: Bool) {
            self.root = root; self.sql = sql; self.family = family
            self.familyHasSelf = familyHasSelf; self.oneStatement = oneStatement
        }
    }

    // The last entity asked for and its answer: point reads ask for the same entity again and
    // again, and comparing two short (inline) strings is a word compare where each of the
    // dictionary lookups it replaces hashes the name. Touched only by the thread holding the
    // connection (rule 2), like the rest of this object.
    private var lastPoint: (entity: String, shape: PointShape?)?
    private var lastEntity: (entity: String, shape: EntityShape?)?

    /// The point-read shape of `entity`; nil if the model has no such entity.
    func point(_ entity: String) -> PointShape? {
        if let l = lastPoint, l.entity == entity { return l.shape }
        let shape = model.root[entity].map { root -> PointShape in
            let family = model.family[entity] ?? []
            return PointShape(root: root, sql: batchSQL[root]![0], family: family, familyHasSelf: family.contains(entity),
                              oneStatement: !rootsWithRelationships.contains(root))
        }
        lastPoint = (entity, shape)
        return shape
    }

    /// `entityShapes[entity]`, remembering the last answer.
    func entityShape(_ entity: String) -> EntityShape? {
        if let l = lastEntity, l.entity == entity { return l.shape }
        let shape = entityShapes[entity]
        lastEntity = (entity, shape)
        return shape
    }

    /// The shapes for `model` on `conn` (the connection's thread only, rule 2). The cache holds
    /// the model itself and compares identity, so a migrated model never meets old shapes.
    static func of(_ model: ResolvedModel, on conn: Connection) -> ReadShapes {
        if let s = conn.readShapes, s.model === model { return s }
        let s = ReadShapes(model)
        conn.readShapes = s
        return s
    }

    init(_ m: ResolvedModel) {
        model = m
        var colIndex: [String: [String: Int]] = [:]
        var sql: [String: [String]] = [:]
        for (root, cols) in m.columns {
            var ix: [String: Int] = [:]
            for (i, c) in cols.enumerated() { ix[c] = i + 4 }
            colIndex[root] = ix
            sql[root] = RowReader.inLists.map { m.selectPrefixSQL[root]! + "WHERE pk IN (\($0.1)) AND created_gen <= ?1 AND ended_gen > ?1 ORDER BY pk" }
        }
        columnIndex = colIndex
        batchSQL = sql
        var attrs: [String: [AttributeSlot]] = [:]
        var rels: [String: [(name: String, destination: String, storage: RelationshipStorage)]] = [:]
        for ent in m.entities.keys {
            let ix = colIndex[m.root[ent]!] ?? [:]
            attrs[ent] = m.attributes[ent]!.map { AttributeSlot(name: $0.key, type: $0.value.type, index: ix[ResolvedModel.attrColumn($0.key)]!) }
            rels[ent] = m.relationships[ent]!.sorted { $0.key < $1.key }.map { ($0.key, $0.value.destination, m.storage(entity: ent, relationship: $0.key)) }
        }
        attributes = attrs
        relationships = rels
        rootsWithRelationships = Set(rels.filter { !$0.value.isEmpty }.map { m.root[$0.key]! })
        withoutRelationships = Set(m.entities.keys.filter { e in m.family[e]!.allSatisfy { rels[$0]?.isEmpty ?? true } })
        var shapes: [String: EntityShape] = [:]
        for (ent, slots) in attrs {
            var template: [String: StorageValue] = Dictionary(minimumCapacity: slots.count)
            for a in slots { template[a.name] = .null }
            shapes[ent] = EntityShape(template: template,
                                      slots: slots.map { (template.index(forKey: $0.name)!, $0.type, $0.index) },
                                      related: !(rels[ent]?.isEmpty ?? true))
        }
        entityShapes = shapes
    }
}
