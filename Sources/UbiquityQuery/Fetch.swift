// The fetch executor (SPEC §4.1): one read transaction at one generation; SQL does the
// filtering, sorting and paging; objects load set-based; pending changes merge in memory with
// the same ordering rules as SQL.
import Foundation
import UbiquityStorage

extension Store {
    /// Runs a fetch request at a generation (`.current`, or a token's). With `pending`, a
    /// context's unsaved changes take part: matching inserts appear, deletes vanish, updates are
    /// judged by their pending state; sorting, offset and limit apply to the merged set.
    public func fetch(_ request: FetchRequest, at g: ReadGeneration = .current, minimumGeneration: Int64? = nil,
                      pending: PendingChanges? = nil, limits: QueryLimits = QueryLimits()) async throws -> FetchResult {
        try await read(at: g, minimumGeneration: minimumGeneration) { ctx in try ctx.fetch(request, pending: pending, limits: limits) }
    }

    /// `fetch` for synchronous callers (a blocking worker thread), without pending changes.
    /// With `sink`, plan-cached object fetches hand their rows to it instead of returning
    /// snapshots (`FetchResult.objectsStreamed`).
    public func fetchSync(_ request: FetchRequest, at g: ReadGeneration = .current, minimumGeneration: Int64? = nil,
                          limits: QueryLimits = QueryLimits(), isCancelled: (@Sendable () -> Bool)? = nil,
                          sink: FetchObjectSink? = nil) throws -> FetchResult {
        try readSync(at: g, minimumGeneration: minimumGeneration, isCancelled: isCancelled) { ctx in try ctx.fetch(request, limits: limits, sink: sink) }
    }

    /// The results in batches of `fetchBatchSize`, all read at one generation. A pin lease
    /// (`QueryLimits.batchPinLease`, renewed per batch) keeps that generation from GC while the
    /// stream is consumed; each batch is its own short read job, run when the consumer asks for
    /// it (no read-ahead). The pin ends with the last batch, on an error, or when the consumer
    /// drops the stream.
    public func fetchBatches(_ request: FetchRequest, at g: ReadGeneration = .current, limits: QueryLimits = QueryLimits()) -> AsyncThrowingStream<FetchResult, Error> {
        let cursor = BatchCursor(store: self, request: request, at: g, limits: limits)
        return AsyncThrowingStream(unfolding: { try await cursor.next() })
    }
}

/// The state of one `fetchBatches` stream.
final class BatchCursor: @unchecked Sendable {
    // Invariant: the mutable fields are only touched inside `next()`, which holds `lock` for
    // its synchronous parts; the stream calls `next()` one call at a time (one consumer).
    private let lock = NSLock()
    let store: Store
    let request: FetchRequest
    let at: ReadGeneration
    let limits: QueryLimits
    private var pin: PinLease?
    private var ids: ObjectIDList?
    private var dictionaries: [[String: StorageValue]]?
    private var position = 0
    private var finished = false

    init(store: Store, request: FetchRequest, at: ReadGeneration, limits: QueryLimits) {
        self.store = store; self.request = request; self.at = at; self.limits = limits
    }

    deinit { if let pin { store.unpin(pin) } }

    private func locked<T>(_ body: () throws -> T) rethrows -> T { lock.lock(); defer { lock.unlock() }; return try body() }

    private func finish() { locked { if let p = pin { store.unpin(p) }; pin = nil; finished = true } }

    func next() async throws -> FetchResult? {
        do { return try await step() } catch { finish(); throw error }
    }

    private func step() async throws -> FetchResult? {
        if locked({ finished }) { return nil }
        let size = request.fetchBatchSize > 0 ? request.fetchBatchSize : Int.max
        let all = { var l = limits; l.maxFetchResults = limits.maxBatchResults; return l }()
        let lease = try locked { () throws -> PinLease in
            if let p = pin { try store.renew(p, lease: limits.batchPinLease); return p }
            let token: GenerationToken? = if case .token(let t) = at { t } else { nil }
            let p = try store.pin(token, lease: limits.batchPinLease)
            pin = p
            return p
        }
        let pinned = ReadGeneration.token(lease.token)
        let request = self.request
        if request.resultType == .count {
            let r = try await store.read(at: pinned) { ctx in try ctx.fetch(request, limits: all) }
            finish()
            return r
        }
        if request.resultType == .dictionaries {
            if locked({ dictionaries == nil }) {
                let r = try await store.read(at: pinned) { ctx in try ctx.fetch(request, limits: all) }
                locked { dictionaries = r.dictionaries }
            }
            let chunk: [[String: StorageValue]] = locked {
                let d = dictionaries!
                let c = Array(d[position..<min(d.count, position + min(size, d.count - position))])
                position += c.count
                return c
            }
            var b = FetchResult(token: lease.token)
            b.dictionaries = chunk
            b.count = chunk.count
            if locked({ position >= dictionaries!.count }) { finish() }
            return b
        }
        if locked({ ids == nil }) {
            let listing = { var r = request; r.resultType = .objectIDs; r.relationshipKeyPathsForPrefetching = []; return r }()
            let r = try await store.read(at: pinned) { ctx in try ctx.fetch(listing, limits: all) }
            locked { ids = ObjectIDList(r.objectIDs, storeID: store.id) }
        }
        let chunk: [ObjectID] = locked {
            let l = ids!
            let c = l[position..<min(l.count, position + min(size, l.count - position))]
            position += c.count
            return c
        }
        var batch = FetchResult(token: lease.token)
        if request.resultType == .objects {
            batch = try await store.read(at: pinned) { ctx in
                try QueryErrors.mapping { try FetchExecutor(request, ctx: ctx, limits: all, pending: nil).materialize(chunk) }
            }
        } else {
            batch.objectIDs = chunk
            batch.count = chunk.count
        }
        if locked({ position >= ids!.count }) { finish() }
        return batch
    }
}

extension ReadContext {
    /// Runs a fetch inside this read (the same generation as everything else in it).
    /// `sink`: as in `Store.fetchSync`.
    public func fetch(_ request: FetchRequest, pending: PendingChanges? = nil, limits: QueryLimits = QueryLimits(),
                      sink: FetchObjectSink? = nil) throws -> FetchResult {
        try QueryErrors.mapping {
            if pending?.isEmpty ?? true, let r = try FetchPlan.run(request, ctx: self, limits: limits, sink: sink) { return r }
            return try FetchExecutor(request, ctx: self, limits: limits, pending: pending).run()
        }
    }

    /// SQLite's plan (EXPLAIN QUERY PLAN detail lines) for the main statement of a fetch: shows
    /// which indexes a predicate and sort use.
    public func explain(_ request: FetchRequest, limits: QueryLimits = QueryLimits()) throws -> [String] {
        try QueryErrors.mapping {
            try QueryFunctions.install(self)
            let (sql, args) = try FetchExecutor(request, ctx: self, limits: limits, pending: nil).mainStatement()
            return try rows("EXPLAIN QUERY PLAN " + sql, args).map { $0.last.map { if case .string(let s) = $0 { return s }; return "" } ?? "" }
        }
    }
}

enum QueryErrors {
    /// Errors raised inside SQL functions come back as SQLite errors; give them their query meaning.
    static func mapping<T>(_ body: () throws -> T) throws -> T {
        do { return try body() } catch let e as StorageError {
            if let r = e.message.range(of: "ubq-limit: ") { throw QueryError(.limitExceeded, String(e.message[r.upperBound...]), field: "predicate") }
            if let r = e.message.range(of: "ubq-regex: ") { throw QueryError(.syntax, String(e.message[r.upperBound...]), field: "predicate") }
            throw e
        } catch let e as RegexError {
            throw QueryError(e.isLimit ? .limitExceeded : .syntax, e.message, field: "predicate")
        }
    }
}

/// One column of a dictionary result.
struct FetchColumn {
    enum Kind { case path(ScalarPath), aggregate(String, ScalarPath?) }
    var key: String
    var kind: Kind
    /// Attribute type of the value (nil for objects, counts).
    var type: AttributeType?
}

struct FetchExecutor {
    let request: FetchRequest
    let ctx: ReadContext
    let schema: Schema
    let limits: QueryLimits
    let pending: PendingChanges?
    let predicate: Predicate?
    let family: [String]
    let tableFamily: [String]
    var sorts: [(path: ScalarPath?, alias: Int?, ascending: Bool, fold: Bool)] = []
    var columns: [FetchColumn] = []
    var groupBy: [ScalarPath] = []
    var having: Pred?

    /// `trace`: compiling a fetch plan (`FetchPlan.compile`); `$variable` values become markers.
    init(_ request: FetchRequest, ctx: ReadContext, limits: QueryLimits, pending: PendingChanges?, trace: VariableTrace? = nil) throws {
        self.request = request
        self.ctx = ctx
        self.limits = limits
        self.pending = pending.flatMap { $0.isEmpty ? nil : $0 }
        let schema = Schema.of(ctx)
        self.schema = schema
        let entity = request.entity
        guard schema.entities[entity] != nil else {
            let hint = schema.entities.keys.min { Schema.distance($0, entity) < Schema.distance($1, entity) }.map { " (did you mean '\($0)'?)" } ?? ""
            throw QueryError(.unknownEntity, "no entity named '\(entity)'\(hint)", field: "entity")
        }
        if request.fetchLimit < 0 { throw QueryError(.unsupported, "fetchLimit must be 0 (no limit) or more", field: "fetchLimit") }
        if request.fetchOffset < 0 { throw QueryError(.unsupported, "fetchOffset must be 0 or more", field: "fetchOffset") }
        if request.fetchBatchSize < 0 { throw QueryError(.unsupported, "fetchBatchSize must be 0 (one batch) or more", field: "fetchBatchSize") }
        for (name, n) in [("sortDescriptors", request.sortDescriptors.count), ("propertiesToFetch", request.propertiesToFetch.count),
                          ("propertiesToGroupBy", request.propertiesToGroupBy.count), ("relationshipKeyPathsForPrefetching", request.relationshipKeyPathsForPrefetching.count)]
        where n > limits.maxListEntries {
            throw QueryError(.limitExceeded, "\(n) entries; the limit is \(limits.maxListEntries)", field: name)
        }
        predicate = try request.predicate.map { try Predicate($0, entity: entity, schema: schema, variables: request.variables, limits: limits, trace: trace) }
        family = request.includesSubentities ? schema.family(entity) : [entity]
        let table = schema.mapping[entity]!.table
        tableFamily = schema.mapping.filter { $0.value.table == table }.map(\.key)
        if request.resultType == .dictionaries { try prepareDictionaries() }
        try prepareSorts()
        if request.resultType == .objects { try checkObjectProperties(); _ = try prefetchPaths() }
        if self.pending != nil && (!groupBy.isEmpty || columns.contains { if case .aggregate = $0.kind { return true }; return false }) {
            throw QueryError(.unsupported, "pending changes cannot be included in a grouped or aggregate fetch (as in Core Data)", field: "propertiesToGroupBy")
        }
    }

    func checker(_ field: String) -> Checker { Checker(schema: schema, entity: request.entity, variables: request.variables, limits: limits, field: field) }

    /// A key path to a single value (attribute, to-one relationship, through to-one relationships).
    func scalarPath(_ text: String, field: String) throws -> ScalarPath {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty else { throw QueryError(.syntax, "empty key path", field: field) }
        let parts = trimmed.split(separator: ".", omittingEmptySubsequences: false).map { PathPart.name(String($0)) }
        if parts.contains(.name("")) { throw QueryError(.syntax, "'\(trimmed)' is not a key path", field: field) }
        if trimmed == "SELF" { return ScalarPath(hops: [], terminal: .selfObject, text: "SELF") }
        let op: Operand
        do { op = try checker(field).resolve(parts, from: request.entity, column: 1) } catch var e as QueryError {
            e.message = e.message.replacingOccurrences(of: " at column 1", with: "")
            e.column = nil
            throw e
        }
        guard case .scalar(let p, _) = op else {
            throw QueryError(.typeMismatch, "'\(trimmed)' goes through a to-many relationship; only attributes and to-one key paths are allowed here", field: field)
        }
        return p
    }

    mutating func prepareSorts() throws {
        for s in request.sortDescriptors {
            if request.resultType == .dictionaries, let i = columns.firstIndex(where: { $0.key == s.keyPath }), case .aggregate = columns[i].kind {
                sorts.append((nil, i, s.ascending, false))
                continue
            }
            let p = try scalarPath(s.keyPath, field: "sortDescriptors")
            guard case .attribute(_, let t) = p.terminal else {
                throw QueryError(.typeMismatch, "sort by an attribute, not the relationship '\(s.keyPath)'", field: "sortDescriptors")
            }
            if t == .binary { throw QueryError(.typeMismatch, "cannot sort by binary attribute '\(s.keyPath)'", field: "sortDescriptors") }
            sorts.append((p, nil, s.ascending, s.caseInsensitive && t == .string))
        }
    }

    func checkObjectProperties() throws {
        for p in request.propertiesToFetch where schema.attributes[request.entity]?[p] == nil && schema.relationships[request.entity]?[p] == nil {
            throw QueryError(.unknownKeyPath, "\(request.entity) has no property '\(p)' (object results take property names)", field: "propertiesToFetch")
        }
    }

    mutating func prepareDictionaries() throws {
        let entries = request.propertiesToFetch.isEmpty
            ? (schema.attributes[request.entity]!.keys.sorted() + schema.relationships[request.entity]!.filter { !$0.value.toMany }.keys.sorted())
            : request.propertiesToFetch
        for raw in entries {
            let e = raw.trimmingCharacters(in: .whitespaces)
            var alias: String?
            var expr = e
            if let eq = e.firstIndex(of: "=") {
                alias = e[..<eq].trimmingCharacters(in: .whitespaces)
                expr = e[e.index(after: eq)...].trimmingCharacters(in: .whitespaces)
                guard let a = alias, !a.isEmpty, a.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" }) else {
                    throw QueryError(.syntax, "'\(e)': the name before '=' must be letters, digits or _", field: "propertiesToFetch")
                }
            }
            if let colon = expr.range(of: ":(") {
                let fn = String(expr[..<colon.lowerBound]).trimmingCharacters(in: .whitespaces)
                guard expr.hasSuffix(")") else { throw QueryError(.syntax, "'\(e)': expected fn:(keyPath)", field: "propertiesToFetch") }
                let arg = String(expr[colon.upperBound..<expr.index(before: expr.endIndex)]).trimmingCharacters(in: .whitespaces)
                guard ["count", "sum", "min", "max", "average"].contains(fn) else {
                    throw QueryError(.unsupported, "'\(fn)' is not an aggregate (use count, sum, min, max or average)", field: "propertiesToFetch")
                }
                let path: ScalarPath? = (arg == "SELF" || arg == "*") ? nil : try scalarPath(arg, field: "propertiesToFetch")
                var type: AttributeType? = path?.attributeType
                if fn != "count" {
                    guard let t = type else { throw QueryError(.typeMismatch, "\(fn) needs an attribute, not '\(arg)'", field: "propertiesToFetch") }
                    if (fn == "sum" || fn == "average") && ScalarPath.domain(of: t) != .numeric {
                        throw QueryError(.typeMismatch, "\(fn) needs a numeric attribute; '\(arg)' is \(t.rawValue)", field: "propertiesToFetch")
                    }
                    if t == .binary { throw QueryError(.typeMismatch, "\(fn) cannot use binary attribute '\(arg)'", field: "propertiesToFetch") }
                    if fn == "average" { type = .double }
                    if fn == "sum", t != .int16, t != .int32, t != .int64 { type = .double }
                } else { type = .int64 }
                columns.append(FetchColumn(key: alias ?? e, kind: .aggregate(fn, path), type: type))
            } else {
                if alias != nil { throw QueryError(.syntax, "'\(e)': an alias needs an expression fn:(keyPath)", field: "propertiesToFetch") }
                let p = try scalarPath(expr, field: "propertiesToFetch")
                columns.append(FetchColumn(key: expr, kind: .path(objectPath(p)), type: p.attributeType))
            }
        }
        for g in request.propertiesToGroupBy {
            let p = try scalarPath(g, field: "propertiesToGroupBy")
            groupBy.append(objectPath(p))
        }
        if !groupBy.isEmpty {
            let grouped = Set(request.propertiesToGroupBy.map { $0.trimmingCharacters(in: .whitespaces) })
            for c in columns { if case .path = c.kind, !grouped.contains(c.key) {
                throw QueryError(.typeMismatch, "'\(c.key)' is neither in propertiesToGroupBy nor an aggregate expression", field: "propertiesToFetch")
            } }
        }
        if let h = request.havingPredicate {
            guard !groupBy.isEmpty else { throw QueryError(.unsupported, "havingPredicate needs propertiesToGroupBy", field: "havingPredicate") }
            var scope = AliasScope()
            for (i, c) in columns.enumerated() {
                guard case .aggregate = c.kind else { continue }
                scope.entries[c.key] = (i, c.type.map { ScalarPath.domain(of: $0) } ?? .numeric, c.type)
            }
            having = try Predicate(h, entity: request.entity, schema: schema, variables: request.variables, limits: limits, field: "havingPredicate", aliases: scope).root
        }
    }

    /// Relationship-valued paths select the destination row itself (pk and entity) for the URI.
    func objectPath(_ p: ScalarPath) -> ScalarPath {
        guard case .relationship(let r, let d) = p.terminal else { return p }
        let from = p.hops.last?.destination ?? request.entity
        return ScalarPath(hops: p.hops + [Hop(entity: from, relationship: r, destination: d, toMany: false)], terminal: .selfObject, text: p.text)
    }

    func prefetchPaths() throws -> [[String]] {
        try request.relationshipKeyPathsForPrefetching.map { path in
            var cur = request.entity
            let parts = path.split(separator: ".").map(String.init)
            if parts.isEmpty { throw QueryError(.syntax, "empty key path", field: "relationshipKeyPathsForPrefetching") }
            for p in parts {
                guard let r = schema.relationships[cur]?[p] else {
                    throw QueryError(.unknownKeyPath, "'\(path)': \(cur) has no relationship '\(p)'", field: "relationshipKeyPathsForPrefetching")
                }
                cur = r.destination
            }
            return parts
        }
    }

    // MARK: SQL

    /// FROM, joins and WHERE of the main query, with the builder holding its arguments.
    func base(_ b: SQLBuilder, _ scope: SQLScope) throws -> String {
        var conds = [SQLBuilder.visible("t0")]
        if family.count < tableFamily.count {
            conds.append(family.count == 1 ? "t0.z_ent = \(b.bind(.string(family[0])))" : "t0.z_ent IN (" + family.map { b.bind(.string($0)) }.joined(separator: ", ") + ")")
        }
        if let p = predicate { conds.append(try b.predicate(p.root, scope)) }
        return conds.joined(separator: " AND ")
    }

    func sortExpressions(_ b: SQLBuilder, _ scope: SQLScope, aggregates: [String]) -> [String] {
        sorts.map { s in
            if let i = s.alias { return aggregates[i] }
            let e = b.expression(s.path!, in: scope)
            return s.fold ? "ubq_fold(\(e), 1)" : e
        }
    }

    func from(_ scope: SQLScope) -> String {
        "FROM \(q(schema.mapping[request.entity]!.table)) AS t0" + (scope.joins.isEmpty ? "" : " " + scope.joins.joined(separator: " "))
    }

    /// The id query: pk, entity and sort keys, ordered like the results.
    /// `select`: another select list (e.g. whole objects) instead of pk, entity and sort keys.
    func idStatement(limit: Int?, offset: Int, select: String? = nil, extraCondition: ((SQLBuilder) -> String)? = nil) throws -> (String, [StorageValue]) {
        let b = SQLBuilder(schema: schema, storeID: ctx.token.storeID, generation: ctx.generation)
        let scope = SQLScope(entity: request.entity, alias: "t0", parent: nil)
        var whereSQL = try base(b, scope)
        if let extra = extraCondition { whereSQL += " AND " + extra(b) }
        let keys = sortExpressions(b, scope, aggregates: [])
        let order = zip(keys, sorts).map { "\($0) \($1.ascending ? "ASC" : "DESC")" } + ["t0.pk"]
        let selected: String = select ?? ("t0.pk, t0.z_ent" + keys.map { ", " + $0 }.joined())
        var sql = "SELECT " + selected + " \(from(scope)) WHERE \(whereSQL) ORDER BY " + order.joined(separator: ", ")
        if let limit { sql += " LIMIT \(b.bind(.int(Int64(limit)))) OFFSET \(b.bind(.int(Int64(offset))))" }
        else if offset > 0 { sql += " LIMIT -1 OFFSET \(b.bind(.int(Int64(offset))))" }
        return (sql, b.arguments)
    }

    func mainStatement() throws -> (String, [StorageValue]) {
        switch request.resultType {
        case .dictionaries: return try dictionaryStatement(withKeys: false)
        case .count: return try countStatement()
        default: return try idStatement(limit: request.fetchLimit > 0 ? request.fetchLimit : nil, offset: request.fetchOffset)
        }
    }

    func countStatement() throws -> (String, [StorageValue]) {
        let b = SQLBuilder(schema: schema, storeID: ctx.token.storeID, generation: ctx.generation)
        let scope = SQLScope(entity: request.entity, alias: "t0", parent: nil)
        let whereSQL = try base(b, scope)
        return ("SELECT count(*) \(from(scope)) WHERE \(whereSQL)", b.arguments)
    }

    /// `withKeys`: also select pk, entity and sort keys (for merging pending changes).
    func dictionaryStatement(withKeys: Bool) throws -> (String, [StorageValue]) {
        let b = SQLBuilder(schema: schema, storeID: ctx.token.storeID, generation: ctx.generation)
        let scope = SQLScope(entity: request.entity, alias: "t0", parent: nil)
        let whereSQL = try base(b, scope)
        var selected: [String] = []
        var aggregates: [String] = []
        for c in columns {
            switch c.kind {
            case .path(let p):
                let e = b.expression(p, in: scope, comparable: false)
                if p.terminal == .selfObject {
                    let alias = String(e.dropLast(3))  // "<alias>.pk"
                    selected.append(e); selected.append("\(alias).z_ent")
                } else { selected.append(e) }
                aggregates.append(e)
            case .aggregate(let fn, let p):
                let e = p.map { b.expression($0, in: scope) } ?? "t0.pk"
                let sql: String = switch fn {
                case "count": "count(\(e))"
                case "sum": "coalesce(sum(\(e)), 0)"
                case "average": "avg(\(e))"
                default: "\(fn)(\(e))"
                }
                selected.append(sql)
                aggregates.append(sql)
            }
        }
        var sql = "SELECT " + (request.returnsDistinctResults && !withKeys ? "DISTINCT " : "")
        let keys = sortExpressions(b, scope, aggregates: aggregates)
        if withKeys { selected = ["t0.pk", "t0.z_ent"] + keys + selected }
        sql += selected.joined(separator: ", ") + " \(from(scope)) WHERE \(whereSQL)"
        if !groupBy.isEmpty {
            sql += " GROUP BY " + groupBy.map { b.expression($0, in: scope, comparable: false) }.joined(separator: ", ")
            if let h = having { sql += " HAVING " + (try b.predicate(h, scope, aliases: aggregates)) }
        }
        var order = zip(keys, sorts).map { "\($0) \($1.ascending ? "ASC" : "DESC")" }
        let grouped = !groupBy.isEmpty || columns.contains { if case .aggregate = $0.kind { return true }; return false }
        if grouped || (request.returnsDistinctResults && !withKeys) { order += (1...selected.count).map(String.init) } else { order.append("t0.pk") }
        sql += " ORDER BY " + order.joined(separator: ", ")
        if !withKeys {
            let cap = limits.maxFetchResults + 1
            let limit = request.fetchLimit > 0 ? min(request.fetchLimit, cap) : cap
            sql += " LIMIT \(b.bind(.int(Int64(limit)))) OFFSET \(b.bind(.int(Int64(request.fetchOffset))))"
        }
        return (sql, b.arguments)
    }

    // MARK: run

    func run() throws -> FetchResult {
        try QueryFunctions.install(ctx)  // once per connection; later calls are a set lookup
        switch request.resultType {
        case .count: return try count()
        case .dictionaries: return try dictionaries()
        case .objects where pending == nil:
            // one statement selects and loads the objects (no second lookup by ID)
            let (sql, args) = try objectsStatement()
            let objects = try ctx.objects(entity: request.entity, selecting: sql, args)
            try cap(objects.count)
            if request.relationshipKeyPathsForPrefetching.isEmpty { return FetchExecutor.objectResult(objects, request: request, token: ctx.token) }
            return try materialize(objects.map(\.id), loaded: objects)
        case .objects, .objectIDs:
            let rows = try orderedRows()
            if request.resultType == .objectIDs {
                var r = FetchResult(token: ctx.token)
                r.objectIDs = rows.map(\.id)
                r.count = rows.count
                return r
            }
            return try materialize(rows.map(\.id))
        }
    }

    /// The statement that selects and loads the objects of a fetch without pending changes.
    func objectsStatement() throws -> (String, [StorageValue]) {
        let limit = request.fetchLimit > 0 ? min(request.fetchLimit, limits.maxFetchResults + 1) : limits.maxFetchResults + 1
        return try idStatement(limit: limit, offset: request.fetchOffset, select: ctx.objectColumns(entity: request.entity, alias: "t0"))
    }

    /// The id statement of a fetch without pending changes (pk and entity per row, in order).
    func orderedIDStatement() throws -> (String, [StorageValue]) {
        let limit = request.fetchLimit > 0 ? min(request.fetchLimit, limits.maxFetchResults + 1) : limits.maxFetchResults + 1
        return try idStatement(limit: limit, offset: request.fetchOffset)
    }

    /// Object results loaded by one statement, without prefetching: `propertiesToFetch` applied.
    static func objectResult(_ loaded: [ObjectSnapshot], request: FetchRequest, token: GenerationToken) -> FetchResult {
        var r = FetchResult(token: token)
        var objects = loaded
        if !request.propertiesToFetch.isEmpty {
            let keep = Set(request.propertiesToFetch)
            objects = objects.map { o in
                var o = o
                o.values = o.values.filter { keep.contains($0.key) }
                o.relationships = o.relationships.filter { keep.contains($0.key) }
                return o
            }
        }
        r.objects = objects
        r.objectIDs = objects.map(\.id)
        r.count = objects.count
        return r
    }

    /// Object ID rows (pk, entity) as IDs of `storeID`.
    static func ids(_ rows: [[StorageValue]], storeID: UUID) -> [ObjectID] {
        rows.map { ObjectID(storeID: storeID, entity: text($0[1]), pk: int($0[0])) }
    }

    /// A count after offset and limit.
    static func countResult(_ total: Int64, request: FetchRequest, token: GenerationToken) -> FetchResult {
        var r = FetchResult(token: token)
        let afterOffset = max(0, Int(total) - request.fetchOffset)
        r.count = request.fetchLimit > 0 ? min(afterOffset, request.fetchLimit) : afterOffset
        return r
    }

    func cap(_ n: Int) throws { try FetchExecutor.cap(n, limits: limits) }

    static func cap(_ n: Int, limits: QueryLimits) throws {
        if n > limits.maxFetchResults {
            throw QueryError(.limitExceeded, "the fetch matches more than \(limits.maxFetchResults) results; set fetchLimit or use fetchBatches", field: "fetchLimit")
        }
    }

    struct Row { var id: ObjectID; var keys: [Scalar]; var pending: ObjectSnapshot?; var values: [String: StorageValue]? }

    /// Results in order, after offset and limit, pending changes merged.
    func orderedRows() throws -> [Row] {
        let storeID = ctx.token.storeID
        guard let pending else {
            let (sql, args) = try orderedIDStatement()
            let rows = try ctx.rows(sql, args)
            try cap(rows.count)
            return Self.ids(rows, storeID: storeID).map { Row(id: $0, keys: [], pending: nil) }
        }
        var merged = try storedCandidates(pending: pending)
        merged += try pendingCandidates(pending)
        merged.sort(by: order)
        return try page(merged)
    }

    func page<T>(_ all: [T]) throws -> [T] {
        let start = min(all.count, request.fetchOffset)
        let end = request.fetchLimit > 0 ? min(all.count, start + request.fetchLimit) : all.count
        try cap(end - start)
        return Array(all[start..<end])
    }

    /// Stored matches (minus objects the pending changes update or delete) with their sort keys.
    func storedCandidates(pending: PendingChanges) throws -> [Row] {
        let excluded = Set((pending.deleted.map(\.pk) + pending.updated.map(\.id.pk)).filter { $0 > 0 })
        let wanted = request.fetchLimit > 0 ? request.fetchOffset + request.fetchLimit : limits.maxFetchResults + 1
        let limit = min(wanted, limits.maxFetchResults + 1) + excluded.count
        let storeID = ctx.token.storeID
        let (sql, args) = request.resultType == .dictionaries ? try dictionaryStatement(withKeys: true) : try idStatement(limit: limit, offset: 0)
        var out: [Row] = []
        for r in try ctx.rows(sql, args) where !excluded.contains(Self.int(r[0])) {
            var row = Row(id: ObjectID(storeID: storeID, entity: Self.text(r[1]), pk: Self.int(r[0])), keys: r[2..<(2 + sorts.count)].map { Scalar(stored: $0) }, pending: nil)
            if request.resultType == .dictionaries { row.values = dictionary(Array(r[(2 + sorts.count)...])) }
            out.append(row)
        }
        return out
    }

    /// Pending inserts and updates of the fetched entities that match, with sort keys.
    func pendingCandidates(_ pending: PendingChanges) throws -> [Row] {
        let ev = Evaluator(resolve: resolver(pending).resolve)
        var out: [Row] = []
        for o in pending.inserted + pending.updated where family.contains(o.id.entity) && !pending.deleted.contains(o.id) {
            if let p = predicate, try !ev.test(p.root, o, outer: nil) { continue }
            let keys = sorts.map { s -> Scalar in
                let v = ev.path(s.path!, o)
                if s.fold, case .text(let t) = v { return .text(TextFold.fold(t, .caseInsensitive)) }
                return v
            }
            var row = Row(id: o.id, keys: keys, pending: o)
            if request.resultType == .dictionaries {
                var d: [String: StorageValue] = [:]
                for c in columns { if case .path(let p) = c.kind { d[c.key] = typedValue(p, o, ev) } }
                row.values = d
            }
            out.append(row)
        }
        return out
    }

    func order(_ a: Row, _ b: Row) -> Bool {
        for (i, s) in sorts.enumerated() {
            let o = Scalar.order(a.keys[i], b.keys[i])
            if o != 0 { return s.ascending ? o < 0 : o > 0 }
        }
        return a.id.pk < b.id.pk
    }

    /// Resolves related objects through the pending changes first, then the store (cached).
    final class PendingResolver {
        let ctx: ReadContext
        let pending: [ObjectID: ObjectSnapshot]
        let deleted: Set<ObjectID>
        var cache: [ObjectID: ObjectSnapshot?] = [:]
        init(_ ctx: ReadContext, _ p: PendingChanges) {
            self.ctx = ctx
            var m: [ObjectID: ObjectSnapshot] = [:]
            for o in p.inserted + p.updated { m[o.id] = o }
            pending = m
            deleted = p.deleted
        }
        func resolve(_ id: ObjectID) -> ObjectSnapshot? {
            if deleted.contains(id) { return nil }
            if let p = pending[id] { return p }
            if id.pk <= 0 { return nil }
            if let c = cache[id] { return c }
            let o = (try? ctx.objects([id]))?.first ?? nil
            cache[id] = o
            return o
        }
    }

    func resolver(_ p: PendingChanges) -> PendingResolver { PendingResolver(ctx, p) }

    /// A dictionary value computed in memory (pending objects), typed like stored results.
    func typedValue(_ p: ScalarPath, _ o: ObjectSnapshot, _ ev: Evaluator) -> StorageValue {
        var cur = o
        for h in p.hops {
            guard let id = cur.relationships[h.relationship]?.first, let next = ev.resolve(id) else { return .null }
            cur = next
        }
        switch p.terminal {
        case .selfObject: return .uri(cur.id.uri)
        case .attribute(let n, _): return cur.values[n] ?? .null
        case .relationship(let r, _): return cur.relationships[r]?.first.map { .uri($0.uri) } ?? .null
        }
    }

    /// Loads objects by ID (set-based), applies propertiesToFetch, and prefetches relationships.
    /// `loaded`: the stored objects of `ids`, in order, already loaded (no pending changes).
    func materialize(_ ids: [ObjectID], loaded preloaded: [ObjectSnapshot]? = nil) throws -> FetchResult {
        var r = FetchResult(token: ctx.token)
        let pendingMap = pending.map { PendingResolver(ctx, $0) }
        var objects: [ObjectSnapshot]
        if let preloaded, pendingMap == nil {
            objects = preloaded
        } else {
            let stored = try ctx.objects(ids.filter { id in id.pk > 0 && pendingMap?.pending[id] == nil })
            var byID: [ObjectID: ObjectSnapshot] = [:]
            for case let o? in stored { byID[o.id] = o }
            objects = ids.compactMap { pendingMap?.pending[$0] ?? byID[$0] }
        }
        // prefetch: per key-path level, one set-based load of every destination not loaded yet
        var loaded: [ObjectID: ObjectSnapshot] = [:]
        for o in objects { loaded[o.id] = o }
        var prefetched: [ObjectID: ObjectSnapshot] = [:]
        for path in try prefetchPaths() {
            var level = objects
            for rel in path {
                var next: [ObjectID] = []
                var seen = Set<ObjectID>()
                for o in level { for id in o.relationships[rel] ?? [] where seen.insert(id).inserted { next.append(id) } }
                let missing = next.filter { loaded[$0] == nil && $0.pk > 0 && pendingMap?.pending[$0] == nil && !(pendingMap?.deleted.contains($0) ?? false) }
                for case let o? in try ctx.objects(missing) { loaded[o.id] = o; prefetched[o.id] = o }
                for id in next where loaded[id] == nil { if let p = pendingMap?.pending[id] { loaded[id] = p; prefetched[id] = p } }
                level = next.compactMap { loaded[$0] }
            }
        }
        r = FetchExecutor.objectResult(objects, request: request, token: ctx.token)
        let main = Set(r.objectIDs)
        r.prefetched = prefetched.values.filter { !main.contains($0.id) }.sorted { $0.id < $1.id }
        return r
    }

    func count() throws -> FetchResult {
        let (sql, args) = try countStatement()
        var total = Self.int(try ctx.rows(sql, args).first?.first ?? .int(0))
        if let pending {
            // stored objects the pending changes replace or delete no longer count as stored matches
            let excluded = Array(Set((pending.deleted.map(\.pk) + pending.updated.map(\.id.pk)).filter { $0 > 0 })).sorted()
            for chunk in stride(from: 0, to: excluded.count, by: 500) {
                let part = excluded[chunk..<min(chunk + 500, excluded.count)]
                let (s, a) = try idStatement(limit: nil, offset: 0) { b in "t0.pk IN (" + part.map { b.bind(.int($0)) }.joined(separator: ", ") + ")" }
                total -= Int64(try ctx.rows(s, a).count)
            }
            total += Int64(try pendingCandidates(pending).count)
        }
        return Self.countResult(total, request: request, token: ctx.token)
    }

    func dictionaries() throws -> FetchResult {
        var r = FetchResult(token: ctx.token)
        if let pending {
            var merged = try storedCandidates(pending: pending)
            merged += try pendingCandidates(pending)
            merged.sort(by: order)
            var dicts = merged.map { $0.values ?? [:] }
            if request.returnsDistinctResults {
                var seen = Set<[String: StorageValue]>()
                dicts = dicts.filter { seen.insert($0).inserted }
            }
            r.dictionaries = try page(dicts)
        } else {
            let (sql, args) = try dictionaryStatement(withKeys: false)
            let rows = try ctx.rows(sql, args)
            try cap(rows.count)
            r.dictionaries = rows.map(dictionary)
        }
        r.count = r.dictionaries.count
        return r
    }

    /// A result row (the selected columns, in `columns` order) as a dictionary of typed values.
    func dictionary(_ row: [StorageValue]) -> [String: StorageValue] {
        var d: [String: StorageValue] = [:]
        var i = 0
        for c in columns {
            switch c.kind {
            case .path(let p) where p.terminal == .selfObject:
                if case .int(let pk) = row[i], case .string(let e) = row[i + 1] { d[c.key] = .uri(ObjectID(storeID: ctx.token.storeID, entity: e, pk: pk).uri) } else { d[c.key] = .null }
                i += 2
            case .path:
                d[c.key] = c.type.map { $0.value(fromStored: row[i]) } ?? row[i]
                i += 1
            case .aggregate(let fn, _):
                let v = row[i]
                if fn == "count" || fn == "average" || v.isNull { d[c.key] = v }
                else if let t = c.type, fn == "min" || fn == "max" { d[c.key] = t.value(fromStored: v) }
                else { d[c.key] = c.type == .double ? (v.asDouble.map { .double($0) } ?? v) : v }
                i += 1
            }
        }
        return d
    }

    static func int(_ v: StorageValue) -> Int64 { if case .int(let i) = v { return i }; return 0 }
    static func text(_ v: StorageValue) -> String { if case .string(let s) = v { return s }; return "" }
}

extension StorageValue {
    var asDouble: Double? {
        switch self { case .int(let i): Double(i); case .double(let d): d; default: nil }
    }
}
