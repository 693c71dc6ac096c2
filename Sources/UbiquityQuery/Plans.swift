// Compiled fetch plans (docs/query.md, "Compiled plans"). A fetch without pending changes or
// prefetching runs one statement; its text and arguments depend on the request, the model and,
// for `$variables`, only on each value's kind (a scalar's case, a list's length and element
// cases), never on the values themselves, as long as every variable is a plain right-hand value
// (`age == $a`, `x IN $list`, `y BETWEEN $range`). Such plans are cached per reader connection:
// a call with the same request shape only coerces its variable values (with the checker's own
// function, so mismatches fail with the same error) and binds them.
import Foundation
import UbiquityStorage

/// Where a `$variable`'s values went while a plan was compiled.
final class VariableTrace {
    /// Column of each `$variable` token → its name.
    var columns: [Int: String] = [:]
    var slots: [FetchPlan.Slot] = []
    /// This call's coerced value of each slot.
    var values: [Scalar] = []
    /// False when a variable was used where its value shapes the SQL or is transformed (string
    /// operators, [c]/[d], object IDs, inside a literal list): the plan runs once, uncached.
    var cacheable = true

    /// Markers stand for slot values in the compiled arguments: a blob of a per-process random
    /// prefix and the slot number. No literal becomes a blob, and a binary variable value equal
    /// to a marker would have to guess the 16 random bytes.
    static let nonce: [UInt8] = (0..<16).map { _ in UInt8.random(in: 0...255) }

    static func marker(_ k: Int) -> [UInt8] { nonce + withUnsafeBytes(of: Int64(k).littleEndian, Array.init) }

    static func slot(of v: StorageValue) -> Int? {
        guard case .binary(let d) = v, d.count == nonce.count + 8, d.starts(with: nonce) else { return nil }
        return Int(d.suffix(8).withUnsafeBytes { $0.loadUnaligned(as: Int64.self) }.littleEndian)
    }

    /// The checker's value for the variable at `column`: a marker if its use is a plain bound
    /// value, else `value` itself (and the plan is not cached).
    func bind(_ value: Scalar, column: Int, element: Int?, fold: FoldOptions, op: CompareOp, domain: Domain, type: AttributeType?) -> Scalar {
        guard let name = columns[column] else { return value }
        guard fold.isEmpty, !op.isStringOperator else { cacheable = false; return value }
        slots.append(FetchPlan.Slot(name: name, element: element, column: column, op: op, domain: domain, type: type))
        values.append(value)
        return .blob(VariableTrace.marker(slots.count - 1))
    }

    /// A variable at `column` used where its value is transformed (object IDs).
    func opaque(_ column: Int) { if columns[column] != nil { cacheable = false } }
}

/// Receives the objects of a plan-cached `.objects` fetch inside the read, as rows read in place
/// (no snapshots are built), with the read's token. A fetch that used a sink returns a result
/// with `objectsStreamed` set, `count` rows and no objects or IDs.
public protocol FetchObjectSink: AnyObject {
    /// `state` is the sink's to keep between calls: it stays with the compiled plan, so every
    /// call that sees it has the same reader connection (store), model and request shape, and
    /// is made by the thread holding that connection (docs/storage.md rule 2). Rows of a
    /// plan's calls have the same entities with the same `attributes` (names, types, order).
    func objects(token: GenerationToken, rows: inout ObjectRows, state: inout AnyObject?) throws
}

/// One compiled fetch: the statement and where each argument comes from.
final class FetchPlan {
    struct Slot {
        var name: String
        /// Index in a list variable; nil for a scalar.
        var element: Int?
        var column: Int
        var op: CompareOp
        var domain: Domain
        var type: AttributeType?
    }
    enum Argument { case generation, fixed(StorageValue), slot(Int) }

    let resultType: FetchResultType
    let sql: String
    /// `sql` with its prepared statement remembered (object rows).
    let statement: PreparedSQL
    let arguments: [Argument]
    let slots: [Slot]
    /// Coerces slot values on later calls (its variables are not used).
    let checker: Checker
    /// `.objects` of an entity without relationships and no `propertiesToFetch`: rows can go
    /// straight to a `FetchObjectSink`.
    let streamable: Bool
    /// The sink's state between calls (`FetchObjectSink`); touched only by the thread holding
    /// the connection whose cache holds this plan.
    var sinkState: AnyObject?

    init(resultType: FetchResultType, sql: String, arguments: [Argument], slots: [Slot], checker: Checker, streamable: Bool) {
        self.resultType = resultType; self.sql = sql; statement = PreparedSQL(sql); self.arguments = arguments; self.slots = slots; self.checker = checker
        self.streamable = streamable
    }

    /// Runs `request` through a cached plan, compiling (and caching, if it can be) one on a miss.
    /// nil: the request is not of the planned kinds (pending changes, dictionaries, prefetching)
    /// or was found uncacheable before; the caller runs the executor.
    static func run(_ request: FetchRequest, ctx: ReadContext, limits: QueryLimits, sink: FetchObjectSink? = nil) throws -> FetchResult? {
        guard request.resultType != .dictionaries, request.relationshipKeyPathsForPrefetching.isEmpty else { return nil }
        let cache = try ctx.connectionCache { () throws -> FetchPlanCache in
            try QueryFunctions.install(ctx)  // plans may call ubq_fold / ubq_regex
            return FetchPlanCache()
        }
        let plan: FetchPlan
        let values: [StorageValue]
        switch cache.lookup(request, limits) {
        case .some(.some(let p)):
            plan = p
            values = try p.coerce(request.variables)
        case .some(.none):
            return nil
        case .none:
            let trace = VariableTrace()
            let executor = try FetchExecutor(request, ctx: ctx, limits: limits, pending: nil, trace: trace)
            let (sql, args) = try request.resultType == .objects ? executor.objectsStatement()
                : request.resultType == .objectIDs ? executor.orderedIDStatement() : executor.countStatement()
            var arguments: [Argument] = []
            arguments.reserveCapacity(args.count)
            var used = Set<Int>()
            for (i, a) in args.enumerated() {
                if i == 0 { arguments.append(.generation) } else if let k = VariableTrace.slot(of: a), k < trace.slots.count {
                    arguments.append(.slot(k)); used.insert(k)
                } else { arguments.append(.fixed(a)) }
            }
            var checker = executor.checker("predicate")
            checker = Checker(schema: checker.schema, entity: checker.entity, variables: [:], limits: checker.limits, field: checker.field)
            let streamable = request.resultType == .objects && request.propertiesToFetch.isEmpty
                && ctx.objectsHaveNoRelationships(entity: request.entity)
            plan = FetchPlan(resultType: request.resultType, sql: sql, arguments: arguments, slots: trace.slots, checker: checker, streamable: streamable)
            values = trace.values.map(\.storageValue)
            cache.insert(FetchPlanCache.Key(request: request, limits: limits), trace.cacheable ? plan : nil)
        }
        return try plan.execute(request, values: values, ctx: ctx, limits: limits, sink: sink)
    }

    /// This call's slot values, coerced in the order the checker met them (so the first bad
    /// value fails with the same error the checker would give).
    func coerce(_ variables: [String: QueryArgument]) throws -> [StorageValue] {
        try slots.map { s in
            let v: StorageValue
            switch (variables[s.name], s.element) {
            case (.scalar(let x)?, nil): v = x
            case (.list(let l)?, let i?) where i < l.count: v = l[i]
            default: throw QueryError(.unboundVariable, "no value was given for $\(s.name) at column \(s.column)", column: s.column)
            }
            return try checker.coerce(v, domain: s.domain, type: s.type, column: s.column, op: s.op).storageValue
        }
    }

    func execute(_ request: FetchRequest, values: [StorageValue], ctx: ReadContext, limits: QueryLimits, sink: FetchObjectSink? = nil) throws -> FetchResult {
        let args = arguments.map { a -> StorageValue in
            switch a {
            case .generation: .int(ctx.generation)
            case .fixed(let v): v
            case .slot(let k): values[k]
            }
        }
        switch resultType {
        case .objects:
            if streamable, let sink {
                let token = ctx.token
                let n = try ctx.withObjectRows(entity: request.entity, selecting: statement, args) { try sink.objects(token: token, rows: &$0, state: &sinkState) }
                try FetchExecutor.cap(n, limits: limits)
                var r = FetchResult(token: ctx.token)
                r.count = n
                r.objectsStreamed = true
                return r
            }
            let objects = try ctx.objects(entity: request.entity, selecting: sql, args)
            try FetchExecutor.cap(objects.count, limits: limits)
            return FetchExecutor.objectResult(objects, request: request, token: ctx.token)
        case .objectIDs:
            let rows = try ctx.rows(sql, args)
            try FetchExecutor.cap(rows.count, limits: limits)
            var r = FetchResult(token: ctx.token)
            r.objectIDs = FetchExecutor.ids(rows, storeID: ctx.token.storeID)
            r.count = rows.count
            return r
        case .count, .dictionaries:
            return FetchExecutor.countResult(FetchExecutor.int(try ctx.rows(sql, args).first?.first ?? .int(0)), request: request, token: ctx.token)
        }
    }
}

/// A reader connection's compiled plans (`ReadContext.connectionCache`: one per connection and
/// model, so a migration starts a new cache). At most `capacity` entries, least recently used
/// out first. Touched only by the thread holding the connection (docs/storage.md rule 2).
final class FetchPlanCache {
    /// The request with each variable value replaced by a value of the same kind, and the limits.
    /// A call finds its plan without building one: `matches` compares a request with a key field
    /// by field (variables by kind), and `hashOf` hashes it the way `hash(into:)` hashes the key
    /// it would make, so a hit is exactly `Key(request:limits:) == key` (PlanCacheTests).
    struct Key: Hashable {
        var request: FetchRequest
        var limits: QueryLimits

        init(request: FetchRequest, limits: QueryLimits) {
            var r = request
            if !r.variables.isEmpty {
                r.variables = r.variables.mapValues { a in
                    switch a {
                    case .scalar(let v): .scalar(Key.kind(v))
                    case .list(let l): .list(l.map(Key.kind))
                    }
                }
            }
            self.request = r
            self.limits = limits
        }

        static let zeroUUID = UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))

        /// A fixed value of each case, in `kindCode` order.
        static let kinds: [StorageValue] = [.null, .string(""), .bool(false), .int(0), .double(0), .decimal(""), .date(0), .binary(Data()), .uuid(zeroUUID), .uri("")]

        /// A fixed value of `v`'s case.
        static func kind(_ v: StorageValue) -> StorageValue { kinds[kindCode(v)] }

        /// `v`'s case as a number (`kind(v)` of two values is equal exactly when this is).
        static func kindCode(_ v: StorageValue) -> Int {
            switch v {
            case .null: 0
            case .string: 1
            case .bool: 2
            case .int: 3
            case .double: 4
            case .decimal: 5
            case .date: 6
            case .binary: 7
            case .uuid: 8
            case .uri: 9
            }
        }

        func hash(into h: inout Hasher) { Key.hash(request, limits, into: &h) }

        static func == (a: Key, b: Key) -> Bool { a.matches(b.request, b.limits) }

        /// The hash of `Key(request: r, limits: l)`, computed from `r` itself.
        static func hashOf(_ r: FetchRequest, _ l: QueryLimits) -> Int {
            var h = Hasher()
            hash(r, l, into: &h)
            return h.finalize()
        }

        /// Every field but the variables' values, which count by kind only; the variables in an
        /// order-independent way (a commutative sum of per-variable hashes, as `Dictionary` does).
        private static func hash(_ r: FetchRequest, _ l: QueryLimits, into h: inout Hasher) {
            h.combine(r.entity)
            h.combine(r.predicate)
            h.combine(r.sortDescriptors)
            h.combine(r.fetchLimit)
            h.combine(r.fetchOffset)
            h.combine(r.fetchBatchSize)
            h.combine(r.resultType)
            h.combine(r.propertiesToFetch)
            h.combine(r.propertiesToGroupBy)
            h.combine(r.havingPredicate)
            h.combine(r.returnsDistinctResults)
            h.combine(r.relationshipKeyPathsForPrefetching)
            h.combine(r.includesSubentities)
            h.combine(l)
            var vars = 0
            for (name, a) in r.variables {
                var v = Hasher()
                v.combine(name)
                switch a {
                case .scalar(let x): v.combine(0); v.combine(kindCode(x))
                case .list(let xs): v.combine(1); v.combine(xs.count); for x in xs { v.combine(kindCode(x)) }
                }
                vars &+= v.finalize()
            }
            h.combine(r.variables.count)
            h.combine(vars)
        }

        /// Whether `Key(request: r, limits: l)` equals this key, without making it.
        func matches(_ r: FetchRequest, _ l: QueryLimits) -> Bool {
            let k = request
            guard k.entity == r.entity, k.predicate == r.predicate, k.fetchLimit == r.fetchLimit, k.fetchOffset == r.fetchOffset,
                  k.fetchBatchSize == r.fetchBatchSize, k.resultType == r.resultType, k.returnsDistinctResults == r.returnsDistinctResults,
                  k.includesSubentities == r.includesSubentities, k.variables.count == r.variables.count, k.sortDescriptors == r.sortDescriptors,
                  k.propertiesToFetch == r.propertiesToFetch, k.propertiesToGroupBy == r.propertiesToGroupBy, k.havingPredicate == r.havingPredicate,
                  k.relationshipKeyPathsForPrefetching == r.relationshipKeyPathsForPrefetching, limits == l else { return false }
            for (name, a) in r.variables {
                switch (k.variables[name], a) {
                case (.scalar(let x)?, .scalar(let y)):
                    if Key.kindCode(x) != Key.kindCode(y) { return false }
                case (.list(let xs)?, .list(let ys)):
                    guard xs.count == ys.count else { return false }
                    for (x, y) in zip(xs, ys) where Key.kindCode(x) != Key.kindCode(y) { return false }
                default: return false
                }
            }
            return true
        }
    }

    static let capacity = 64
    final class Entry {
        let key: Key
        /// nil: compiled once and found uncacheable; the executor runs such requests.
        let plan: FetchPlan?
        var used: UInt64
        init(_ key: Key, _ plan: FetchPlan?, _ used: UInt64) { self.key = key; self.plan = plan; self.used = used }
    }
    /// Entries by `Key.hashOf` (a bucket holds the rare keys whose hashes collide).
    private var plans: [Int: [Entry]] = [:]
    /// The entry found last: a call of the same shape as the one before compares its request
    /// with that key and hashes nothing.
    private var last: Entry?
    private var clock: UInt64 = 0

    private(set) var count = 0
    /// Calls served by a cached plan, and plans compiled (tests).
    private(set) var hits = 0, compiles = 0

    /// `.some(plan)` (plan nil: known uncacheable) or nil when no key matches `request`, `limits`.
    func lookup(_ request: FetchRequest, _ limits: QueryLimits) -> FetchPlan??  {
        let entry: Entry
        if let l = last, l.key.matches(request, limits) { entry = l } else {
            guard let e = plans[Key.hashOf(request, limits)]?.first(where: { $0.key.matches(request, limits) }) else { return nil }
            entry = e
            last = e
        }
        clock += 1
        entry.used = clock
        if entry.plan != nil { hits += 1 }
        return .some(entry.plan)
    }

    func insert(_ key: Key, _ plan: FetchPlan?) {
        if count >= FetchPlanCache.capacity, let oldest = plans.values.joined().min(by: { $0.used < $1.used }) {
            let h = Key.hashOf(oldest.key.request, oldest.key.limits)
            plans[h]?.removeAll { $0 === oldest }
            if plans[h]?.isEmpty == true { plans[h] = nil }
            count -= 1
            if last === oldest { last = nil }
        }
        clock += 1
        compiles += 1
        count += 1
        plans[Key.hashOf(key.request, key.limits), default: []].append(Entry(key, plan, clock))
    }
}
