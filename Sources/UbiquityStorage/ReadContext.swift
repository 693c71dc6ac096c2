import Foundation

/// Where an entity's objects live. Rows of the whole inheritance tree share `table`; `entities`
/// lists the `z_ent` values of this entity and its sub-entities.
public struct EntityMapping: Sendable, Equatable {
    public var table: String
    public var entities: [String]
    /// Property → column (attributes and to-one relationships; to-one columns hold the destination pk).
    public var columns: [String: String]
    /// To-many relationship → where its pairs are stored.
    public var toMany: [String: ToManyMapping] = [:]
    /// SQL condition selecting the versions visible at the generation bound to `?N`, e.g. `visible(1)`.
    public func visible(_ parameter: Int, alias: String? = nil) -> String {
        let p = alias.map { "\($0)." } ?? ""
        return "\(p)created_gen <= ?\(parameter) AND \(p)ended_gen > ?\(parameter)"
    }
}

/// A read transaction at one generation, on a reader thread. Valid only inside `Store.read`.
public struct ReadContext {
    let conn: Connection
    let model: ResolvedModel
    let storeID: UUID
    public let token: GenerationToken
    public var generation: Int64 { token.generation }

    init(conn: Connection, model: ResolvedModel, storeID: UUID, token: GenerationToken) {
        self.conn = conn; self.model = model; self.storeID = storeID; self.token = token
    }

    public var mapping: [String: EntityMapping] { ReadContext.mapping(model) }

    /// The attributes of `entity` (inherited ones included) by name, in the model this read uses;
    /// nil for an unknown entity.
    public func attributes(of entity: String) -> [String: AttributeDefinition]? { model.attributes[entity] }

    static func mapping(_ m: ResolvedModel) -> [String: EntityMapping] {
        var out: [String: EntityMapping] = [:]
        for (e, _) in m.entities {
            var cols: [String: String] = [:]
            for a in m.attributes[e]!.keys { cols[a] = ResolvedModel.attrColumn(a) }
            var many: [String: ToManyMapping] = [:]
            for n in m.relationships[e]!.keys {
                switch m.storage(entity: e, relationship: n) {
                case .column: cols[n] = ResolvedModel.relColumn(n)
                case .inverseColumn(let t, let c): many[n] = .inverseColumn(table: t, column: c)
                case .join(let t, let left): many[n] = .joinTable(table: t, sourceColumn: left ? "src" : "dst", destinationColumn: left ? "dst" : "src")
                }
            }
            out[e] = EntityMapping(table: m.table(of: e), entities: m.family[e]!.sorted(), columns: cols, toMany: many)
        }
        return out
    }

    /// The select list that loads whole objects of `entity`'s table from the table alias `alias`
    /// (the first columns of a statement for `objects(entity:selecting:_:)`).
    public func objectColumns(entity: String, alias: String) -> String {
        let root = model.root[entity] ?? entity
        return (["pk", "version", "z_ent", "created_gen"] + (model.columns[root] ?? []).map(q)).map { "\(alias).\($0)" }.joined(separator: ", ")
    }

    /// Objects from a statement whose first columns are `objectColumns(entity:alias:)` (rows of
    /// versions visible at this generation; later columns are ignored), in row order, with
    /// relationships loaded set-based as `objects(_:)` does: a query selects and loads the objects
    /// it finds in one statement instead of selecting IDs and loading them by ID afterwards.
    public func objects(entity: String, selecting sql: String, _ arguments: [StorageValue]) throws -> [ObjectSnapshot] {
        guard let root = model.root[entity] else { return [] }
        let width = 4 + (model.columns[root] ?? []).count
        var rows: [[SQLValue]] = []
        try conn.query(sql, arguments.map(ReadContext.bindable)) { st in rows.append((0..<width).map { st.value($0) }) }
        return try RowReader(conn: conn, model: model, storeID: storeID, gen: generation).snapshots(root: root, rows: rows)
    }

    /// Runs a parameterized statement (values are always bound); rows come back as untyped values
    /// (`.int`, `.double`, `.string`, `.binary`, `.null`).
    public func rows(_ sql: String, _ arguments: [StorageValue] = []) throws -> [[StorageValue]] {
        var out: [[StorageValue]] = []
        try conn.query(sql, arguments.map(ReadContext.bindable)) { st in
            out.append((0..<st.columnCount).map { i in
                switch st.value(i) {
                case .null: .null
                case .integer(let v): .int(v)
                case .real(let v): .double(v)
                case .text(let v): .string(v)
                case .blob(let v): .binary(Data(v))
                }
            })
        }
        return out
    }

    /// Objects by ID at this context's generation, loaded set-based (one query per table and
    /// chunk of 500 IDs, plus one per relationship and chunk: never one per object).
    public func objects(_ ids: [ObjectID]) throws -> [ObjectSnapshot?] {
        try RowReader(conn: conn, model: model, storeID: storeID, gen: generation).objectsBatched(ids)
    }

    static func bindable(_ v: StorageValue) -> SQLValue {
        switch v {
        case .null: .null
        case .string(let s), .decimal(let s), .uri(let s): .text(s)
        case .bool(let b): .integer(b ? 1 : 0)
        case .int(let i): .integer(i)
        case .double(let d), .date(let d): .real(d)
        case .binary(let d): .blob(Array(d))
        case .uuid(let u): .text(u.uuidString.lowercased())
        }
    }
}
