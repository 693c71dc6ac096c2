internal import CSQLite
import Foundation

// Engine API the query layer (UbiquityQuery) needs beyond plain reads. Documented in
// docs/storage.md ("Query-layer support").

/// Where a to-many relationship's pairs live.
public enum ToManyMapping: Sendable, Equatable {
    /// The destination's to-one `column` (in `table`) holds the source's pk.
    case inverseColumn(table: String, column: String)
    /// A versioned join table (`created_gen`/`ended_gen` like entity tables): the source's pk is
    /// in `sourceColumn`, the destination's in `destinationColumn`.
    case joinTable(table: String, sourceColumn: String, destinationColumn: String)
}

extension EntityMapping {
    /// The mapping a store with this model has (validates the model; throws `.validationFailed`).
    public static func mappings(for model: ModelDefinition) throws -> [String: EntityMapping] {
        ReadContext.mapping(try ResolvedModel(model))
    }
}

/// A scalar SQL function the query layer registers on a connection (e.g. Unicode case folding,
/// a cost-bounded regular expression). Arguments and result use the untyped storage forms
/// (`.null`, `.int`, `.double`, `.string`, `.binary`). A thrown error fails the statement with
/// the error's description as SQLite's error message.
public struct SQLFunction {
    public var name: String
    public var argumentCount: Int
    public var body: ([StorageValue]) throws -> StorageValue
    public init(name: String, argumentCount: Int, body: @escaping ([StorageValue]) throws -> StorageValue) {
        self.name = name; self.argumentCount = argumentCount; self.body = body
    }
}

/// Keeps a registered function's closure alive; SQLite releases it through the destructor when
/// the connection closes. Only the connection's own thread calls `body` (rule 2).
final class FunctionBox {
    let body: ([StorageValue]) throws -> StorageValue
    init(_ b: @escaping ([StorageValue]) throws -> StorageValue) { body = b }
}

extension ReadContext {
    /// The model this read sees (the same one `mapping` is built from).
    public var modelDefinition: ModelDefinition { model.definition }

    /// The model's version hash (precomputed; a cache key for derived schema data).
    public var modelVersionHash: String { model.hash }

    /// Statements this connection has run so far (tests: compare before/after to show a load is
    /// set-based).
    public var statementCount: Int { conn.statementCount }

    /// The query layer's object for this connection and model (its compiled fetch plans): `make`
    /// runs when the connection has none yet, or has one made for another model (identity, as
    /// `ReadShapes`: after a migration the next read starts afresh). Only the thread holding the
    /// connection touches it (docs/storage.md rules 2 and 11).
    public func connectionCache<T: AnyObject>(_ make: () throws -> T) rethrows -> T {
        if let c = conn.queryCache, c.model === model, let t = c.object as? T { return t }
        let t = try make()
        conn.queryCache = (model, t)
        return t
    }

    /// Registers the functions `make` builds on this connection, once per `key` (later calls with
    /// the same key do nothing). Functions are deterministic; they may be called for every row.
    public func installFunctions(key: String, _ make: () -> [SQLFunction]) throws {
        if conn.installedFunctionSets.contains(key) { return }
        for f in make() {
            let box = Unmanaged.passRetained(FunctionBox(f.body)).toOpaque()
            let rc = sqlite3_create_function_v2(conn.db, f.name, Int32(f.argumentCount), SQLITE_UTF8 | SQLITE_DETERMINISTIC, box, { ctx, argc, argv in
                guard let ctx, let p = sqlite3_user_data(ctx) else { return }
                let fn = Unmanaged<FunctionBox>.fromOpaque(p).takeUnretainedValue()
                var args: [StorageValue] = []
                args.reserveCapacity(Int(argc))
                for i in 0..<Int(argc) {
                    guard let v = argv?[i] else { args.append(.null); continue }
                    switch sqlite3_value_type(v) {
                    case SQLITE_INTEGER: args.append(.int(sqlite3_value_int64(v)))
                    case SQLITE_FLOAT: args.append(.double(sqlite3_value_double(v)))
                    case SQLITE_TEXT:
                        // by length, not to the first NUL (see Statement.text)
                        let text = sqlite3_value_text(v).map { String(decoding: UnsafeBufferPointer(start: $0, count: Int(sqlite3_value_bytes(v))), as: UTF8.self) }
                        args.append(.string(text ?? ""))
                    case SQLITE_BLOB:
                        let n = Int(sqlite3_value_bytes(v))
                        args.append(.binary(n > 0 ? Data(bytes: sqlite3_value_blob(v)!, count: n) : Data()))
                    default: args.append(.null)
                    }
                }
                do {
                    switch try fn.body(args) {
                    case .null: sqlite3_result_null(ctx)
                    case .int(let i): sqlite3_result_int64(ctx, i)
                    case .bool(let b): sqlite3_result_int64(ctx, b ? 1 : 0)
                    case .double(let d), .date(let d): sqlite3_result_double(ctx, d)
                    case .string(let s), .decimal(let s), .uri(let s): sqlite3_result_text(ctx, s, Int32(s.utf8.count), ubq_sqlite_transient())
                    case .uuid(let u): sqlite3_result_text(ctx, u.uuidString.lowercased(), -1, ubq_sqlite_transient())
                    case .binary(let d): d.withUnsafeBytes { sqlite3_result_blob(ctx, $0.baseAddress, Int32($0.count), ubq_sqlite_transient()) }
                    }
                } catch {
                    sqlite3_result_error(ctx, "\(error)", -1)
                }
            }, nil, nil, { p in if let p { Unmanaged<FunctionBox>.fromOpaque(p).release() } })
            if rc != SQLITE_OK { throw conn.error(rc, sql: nil) }
        }
        conn.installedFunctionSets.insert(key)
    }
}

extension AttributeType {
    /// The untyped form the engine stores for a value of this type (what SQL compares):
    /// bool → int 0/1, date → double, uuid → lowercase string, decimal → canonical string,
    /// int → double for float/double attributes.
    public func storedForm(_ v: StorageValue) -> StorageValue {
        switch ResolvedModel.toSQL(v, self) {
        case .null: .null
        case .integer(let i): .int(i)
        case .real(let d): .double(d)
        case .text(let s): .string(s)
        case .blob(let b): .binary(Data(b))
        }
    }

    /// The typed value for an untyped stored form (as `ReadContext.rows` returns it).
    public func value(fromStored raw: StorageValue) -> StorageValue {
        ResolvedModel.fromSQL(ReadContext.bindable(raw), self)
    }
}

/// A planned save's outcome: the request the planner built (nil: it found nothing to do, and no
/// generation was created) and the save's result (for nil requests: the generation planned at).
public struct PlannedSave: Sendable {
    public var request: SaveRequest?
    public var result: SaveResult
}

extension Store {
    /// A save whose request is built on the writer thread from the state it applies to: `plan`
    /// reads the store at the current generation (including saves grouped before it) through
    /// the context and returns the request, which then runs like any save — validation, delete
    /// rules, inverse maintenance, uniqueness, one history record, one generation — in the same
    /// SQLite transaction, so nothing can change in between. Batch update/delete and
    /// deduplication use this. Errors thrown by `plan` fail the save and are rethrown as is.
    public func save(planning plan: @escaping @Sendable (ReadContext) throws -> SaveRequest?) async throws -> PlannedSave {
        let flag = CancelFlag()
        let planned = Locked<SaveRequest?>(nil)
        let result = try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (cont: CheckedContinuation<SaveResult, Error>) in
                let job = SaveJob(request: SaveRequest(), planner: { ctx in
                    let r = try plan(ctx)
                    planned.withLock { $0 = r }
                    return r
                }, flag: flag, complete: { cont.resume(with: $0) })
                if !writer.submit(.save(job)) { cont.resume(throwing: StorageError(.storeClosed, "store is closed")) }
            }
        } onCancel: { flag.cancel() }
        return PlannedSave(request: planned.withLock { $0 }, result: result)
    }

    /// Testing and benchmarks only: inserts `count` objects of `entity` straight into its table
    /// in one transaction and one new generation, with values generated by SQLite itself from the
    /// row number i = 0..<count (fast enough for million-row plan tests). It skips validation,
    /// defaults and relationships, and records one history transaction with no changes. Unique
    /// indexes still apply. Never expose it to clients.
    public func bulkLoadForTesting(entity: String, count: Int, values: [String: GeneratedValue]) async throws -> GenerationToken {
        try await onWriter { conn, engine in
            guard let model = engine.state.withLock({ $0.model }), let attrs = model.attributes[entity] else {
                throw StorageError.invalid("unknown entity \(entity)")
            }
            let (gen, epoch) = engine.state.withLock { ($0.generation + 1, $0.epoch) }
            try conn.exec("BEGIN IMMEDIATE")
            do {
                let firstPK = try Meta.int(conn, "next_pk")
                var cols = ["pk", "created_gen", "ended_gen", "version", "z_ent"]
                var exprs = ["?1 + i", "?2", String(Int64.max), "1", "?3"]
                var args: [SQLValue] = [.integer(firstPK), .integer(gen), .text(entity), .integer(Int64(count - 1))]
                for (name, v) in values.sorted(by: { $0.key < $1.key }) {
                    guard let a = attrs[name] else { throw StorageError.invalid("\(entity) has no attribute \(name)") }
                    cols.append(q(ResolvedModel.attrColumn(name)))
                    if let x = v.argument { args.append(x) }
                    let p = "?\(args.count)"
                    switch (v, a.type) {
                    case (.index, .int16), (.index, .int32), (.index, .int64), (.index, .double), (.index, .float): exprs.append("i")
                    case (.indexModulo, .int16), (.indexModulo, .int32), (.indexModulo, .int64): exprs.append("i % \(p)")
                    case (.indexTimes, .double), (.indexTimes, .float), (.indexTimes, .date): exprs.append("i * \(p)")
                    case (.textWithIndex, .string): exprs.append("\(p) || i")
                    default: throw StorageError.invalid("\(v) does not fit attribute \(name) of type \(a.type.rawValue)")
                    }
                }
                try conn.run("WITH RECURSIVE ubq_series(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM ubq_series WHERE i < ?4) "
                             + "INSERT INTO \(q(model.table(of: entity))) (\(cols.joined(separator: ", "))) SELECT \(exprs.joined(separator: ", ")) FROM ubq_series", args)
                try Meta.set(conn, "next_pk", .integer(firstPK + Int64(count)))
                try Meta.set(conn, "generation", .integer(gen))
                try conn.run("INSERT INTO ubq_history (generation, timestamp, author, context, changes) VALUES (?, ?, 'bulk-load-for-testing', NULL, '[]')",
                             [.integer(gen), .integer(Int64(Date().timeIntervalSince1970 * 1000))])
                try conn.exec("COMMIT")
            } catch { if !conn.isAutocommit { try? conn.exec("ROLLBACK") }; throw error }
            let now = engine.config.clock()
            engine.state.withLock { $0.generation = gen; $0.window.advanced(from: gen - 1, to: gen, at: now) }
            engine.afterCommit(conn)
            return GenerationToken(storeID: engine.storeID, epoch: epoch, generation: gen)
        }
    }
}

/// A value `Store.bulkLoadForTesting` generates from the row number i.
public enum GeneratedValue: Sendable, CustomStringConvertible {
    /// i (integer and floating-point attributes).
    case index
    /// i % m (integer attributes).
    case indexModulo(Int64)
    /// i × f (double, float and date attributes).
    case indexTimes(Double)
    /// prefix followed by i (string attributes).
    case textWithIndex(prefix: String)

    var argument: SQLValue? {
        switch self {
        case .index: nil
        case .indexModulo(let m): .integer(m)
        case .indexTimes(let f): .real(f)
        case .textWithIndex(let p): .text(p)
        }
    }
    public var description: String {
        switch self {
        case .index: "index"
        case .indexModulo(let m): "index % \(m)"
        case .indexTimes(let f): "index × \(f)"
        case .textWithIndex(let p): "\"\(p)\" + index"
        }
    }
}

// MARK: Object rows read in place (docs/storage.md, "Object rows")

/// An attribute of an entity and where a row selected by `objectColumns` holds it.
public struct AttributeSlot: Sendable {
    public let name: String
    public let type: AttributeType
    let index: Int
}

/// A column value of the current row, read in place: the buffers are SQLite's and valid only
/// until the row callback returns.
public enum RawColumn {
    case null
    case int(Int64)
    case double(Double)
    case text(UnsafeBufferPointer<UInt8>)
    case blob(UnsafeRawBufferPointer)
}

/// One row of an object statement (`ObjectRows.next`), valid only until the next call.
public struct ObjectRow {
    /// The statement on its current row (a plain pointer: no reference counting per row).
    let stmt: OpaquePointer
    public let id: ObjectID
    public let version: Int64
    /// The entity's attributes; the same array (same order) for every row of one entity in a call.
    public let attributes: [AttributeSlot]

    /// The stored form of attribute `i` (an index into `attributes`), without conversion.
    public func raw(_ i: Int) -> RawColumn {
        let c = Int32(attributes[i].index)
        switch sqlite3_column_type(stmt, c) {
        case SQLITE_INTEGER: return .int(sqlite3_column_int64(stmt, c))
        case SQLITE_FLOAT: return .double(sqlite3_column_double(stmt, c))
        case SQLITE_TEXT:
            let p = sqlite3_column_text(stmt, c)
            let n = Int(sqlite3_column_bytes(stmt, c))
            return .text(UnsafeBufferPointer(start: p, count: p == nil ? 0 : n))
        case SQLITE_BLOB:
            let p = sqlite3_column_blob(stmt, c)
            let n = Int(sqlite3_column_bytes(stmt, c))
            return .blob(UnsafeRawBufferPointer(start: p, count: p == nil ? 0 : n))
        default: return .null
        }
    }

    /// Attribute `i`'s typed value: exactly what the snapshot of this row holds for it.
    public func value(_ i: Int) -> StorageValue { ResolvedModel.fromSQL(Statement.value(stmt, attributes[i].index), attributes[i].type) }
}

/// The rows of an object statement, read in place one at a time (`ReadContext.withObjectRows`).
public struct ObjectRows {
    let st: Statement
    let shapes: ReadShapes
    let storeID: UUID
    /// Rows read so far.
    public private(set) var count = 0
    private var done = false
    // rows of one entity follow each other in most results: its name and slots are looked up once
    private var entity = ""
    private var entityBytes: [UInt8] = []
    private var slots: [AttributeSlot] = []

    init(st: Statement, shapes: ReadShapes, storeID: UUID) { self.st = st; self.shapes = shapes; self.storeID = storeID }

    /// The next row (valid until the next call), or nil after the last.
    public mutating func next() throws -> ObjectRow? {
        if done { return nil }
        guard try st.step() else { done = true; return nil }
        guard sqlite3_column_type(st.stmt, 0) == SQLITE_INTEGER, sqlite3_column_type(st.stmt, 1) == SQLITE_INTEGER,
              sqlite3_column_type(st.stmt, 2) == SQLITE_TEXT, let e = sqlite3_column_text(st.stmt, 2) else {
            throw StorageError(.corrupt, "malformed row")
        }
        let n = Int(sqlite3_column_bytes(st.stmt, 2))
        if count == 0 || n != entityBytes.count || memcmp(e, entityBytes, n) != 0 {
            entity = st.text(2)
            entityBytes = Array(UnsafeBufferPointer(start: e, count: n))
            guard let s = shapes.attributes[entity] else { throw StorageError(.corrupt, "malformed row") }
            slots = s
        }
        count += 1
        return ObjectRow(stmt: st.stmt, id: ObjectID(storeID: storeID, entity: entity, pk: st.int(0)), version: st.int(1), attributes: slots)
    }
}

/// A statement text whose prepared statement is remembered between calls (a compiled fetch
/// plan's), so the connection's statement cache is not searched by text each time. Used only
/// by the thread holding the connection whose plan cache owns it (rule 2); the connection's
/// cache epoch tells whether the remembered statement is still that connection's, unfinalized.
public final class PreparedSQL {
    public let sql: String
    var stmt: OpaquePointer?
    var epoch = 0
    public init(_ sql: String) { self.sql = sql }
}

extension ReadContext {
    /// True when objects of `entity` (and its sub-entities) have no relationships, so
    /// `withObjectRows` can hand out whole objects row by row.
    public func objectsHaveNoRelationships(entity: String) -> Bool {
        ReadShapes.of(model, on: conn).withoutRelationships.contains(entity)
    }

    /// `objects(entity:selecting:_:)` without snapshots: `body` reads the rows one at a time
    /// (values in place). Only for entities without relationships (`objectsHaveNoRelationships`;
    /// others throw). Rows `body` leaves unread are counted; returns the number of rows.
    public func withObjectRows(entity: String, selecting sql: PreparedSQL, _ arguments: [StorageValue], _ body: (inout ObjectRows) throws -> Void) throws -> Int {
        let shapes = ReadShapes.of(model, on: conn)
        guard model.root[entity] != nil, shapes.withoutRelationships.contains(entity) else {
            throw StorageError.invalid("withObjectRows: \(entity) has relationships")
        }
        conn.statementCount += 1
        let st = try conn.statement(sql)
        defer { st.reset() }
        try st.bind(arguments.map(ReadContext.bindable))
        var rows = ObjectRows(st: st, shapes: shapes, storeID: storeID)
        try body(&rows)
        while try rows.next() != nil {}
        return rows.count
    }
}
