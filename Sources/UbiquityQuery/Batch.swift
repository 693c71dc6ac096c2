// Batch update, batch delete and deduplication (docs/query.md, "Batch operations").
// Each is planned on the writer thread from the state it applies to (`Store.save(planning:)`)
// and applied as an ordinary save: one transaction, one generation, one history record, with
// validation, uniqueness constraints, delete rules and inverse maintenance by the engine's save
// path. Unlike Core Data's NSBatchUpdate/DeleteRequest nothing is bypassed, so relationships
// are never left dangling.
import Foundation
import UbiquityStorage
import UbiquityLock

/// Carries a planner's side results out of the writer thread.
final class PlanOutput<T: Sendable>: Sendable {
    private let value = Lock<T?>(nil)
    func set(_ v: T) { value.withLock { $0 = v } }
    func get() -> T? { value.withLock { $0 } }
}

extension Store {
    /// Sets `values` on every object of `entity` (and sub-entities) matching `predicate` (nil:
    /// all), in one save. Values are validated like a save's; a uniqueness clash fails the batch.
    public func batchUpdate(entity: String, predicate: String?, variables: [String: QueryArgument] = [:], values: [String: StorageValue],
                            author: String? = nil, contextName: String? = nil, limits: QueryLimits = QueryLimits()) async throws -> BatchResult {
        if values.isEmpty { throw QueryError(.unsupported, "a batch update needs at least one value", field: "values") }
        // The values are the same for every object: checked once against the model, before any
        // object is read, so bad values fail fast (with a bounded list of issues) however many
        // objects match — or none.
        try validateValues(entity: entity, values: values, field: "values")
        let outcome = try await save(planning: { ctx in
            let ids = try BatchPlanner.matching(ctx, entity: entity, predicate: predicate, variables: variables, limits: limits)
            if ids.isEmpty { return nil }
            var r = SaveRequest()
            r.updates = ids.map { UpdateOperation(objectID: $0, values: values) }
            r.author = author
            r.contextName = contextName
            return r
        })
        let ids = outcome.request?.updates.map(\.objectID) ?? []
        return BatchResult(token: outcome.result.token, count: ids.count, objectIDs: ids)
    }

    /// Deletes the objects of `entity` matching `predicate`, or the given `objectIDs` (both:
    /// the given objects that match; neither: every object of the entity), in one save. Delete
    /// rules apply: cascade deletes follow, nullify clears inverses, deny fails the whole batch.
    public func batchDelete(entity: String, predicate: String?, variables: [String: QueryArgument] = [:], objectIDs: [ObjectID]? = nil,
                            author: String? = nil, contextName: String? = nil, limits: QueryLimits = QueryLimits()) async throws -> BatchResult {
        let sid = id
        if let ids = objectIDs {
            if ids.count > limits.maxBatchResults { throw QueryError(.limitExceeded, "\(ids.count) object IDs; the limit is \(limits.maxBatchResults)", field: "objectIDs") }
            for i in ids where i.storeID != sid { throw QueryError(.typeMismatch, "\(i) belongs to another store", field: "objectIDs") }
        }
        let outcome = try await save(planning: { ctx in
            var ids: [ObjectID]
            if let given = objectIDs {
                let schema = Schema.of(ctx)
                guard schema.entities[entity] != nil else { throw QueryError(.unknownEntity, "no entity named '\(entity)'", field: "entity") }
                let family = Set(schema.family(entity))
                for i in given where !family.contains(i.entity) { throw QueryError(.typeMismatch, "\(i) is not a \(entity)", field: "objectIDs") }
                var seen = Set<ObjectID>()
                ids = try ctx.objects(given.filter { seen.insert($0).inserted }).compactMap { $0?.id }
                if predicate != nil {
                    let matching = Set(try BatchPlanner.matching(ctx, entity: entity, predicate: predicate, variables: variables, limits: limits))
                    ids = ids.filter(matching.contains)
                }
            } else {
                ids = try BatchPlanner.matching(ctx, entity: entity, predicate: predicate, variables: variables, limits: limits)
            }
            if ids.isEmpty { return nil }
            var r = SaveRequest()
            // relationships without an inverse would keep pointing at deleted objects: clear them
            let schema = Schema.of(ctx)
            let doomed = try BatchPlanner.cascadeClosure(ctx, schema, ids)
            let edits = try BatchPlanner.rewriteIncoming(ctx, schema, replacing: Dictionary(doomed.map { ($0.pk, nil) }, uniquingKeysWith: { a, _ in a }),
                                                         families: Set(doomed.map(\.entity)), skipping: Set(doomed))
            var byObject: [ObjectID: [String: [ObjectReference]]] = [:]
            for (o, rel, targets) in edits { byObject[o, default: [:]][rel] = targets.map { .permanent($0) } }
            r.updates = byObject.sorted { $0.key < $1.key }.map { UpdateOperation(objectID: $0.key, relationships: $0.value) }
            r.deletes = ids.map { DeleteOperation(objectID: $0) }
            r.author = author
            r.contextName = contextName
            return r
        })
        let ids = outcome.request?.deletes.map(\.objectID) ?? []
        return BatchResult(token: outcome.result.token, count: ids.count, objectIDs: ids)
    }

    /// Deduplicates `entity` on `uniqueKey` (attributes, to-one relationships, or key paths
    /// through to-one relationships): objects with equal, non-nil values for every key form a
    /// group; the winner is the object with the lowest pk — the oldest, since pks are handed out
    /// in creation order and never reused. Losers' relationships are re-pointed to the winner,
    /// then the losers are deleted, at most `batchSize` per save (each its own generation).
    public func deduplicate(entity: String, uniqueKey: [String], batchSize: Int = 500, author: String? = nil) async throws -> DeduplicationReport {
        if uniqueKey.isEmpty { throw QueryError(.unsupported, "name at least one property of the unique key", field: "uniqueKey") }
        if batchSize <= 0 { throw QueryError(.unsupported, "batchSize must be at least 1", field: "batchSize") }
        var report = DeduplicationReport(token: currentToken, groups: 0, removed: [], winners: [:])
        while true {
            let groups = PlanOutput<[(ObjectID, [ObjectID])]>()
            let outcome = try await save(planning: { ctx in
                try QueryErrors.mapping {
                    let plan = try Deduplicator(ctx: ctx, entity: entity, uniqueKey: uniqueKey, batchSize: batchSize).plan()
                    groups.set(plan.groups)
                    guard !plan.groups.isEmpty else { return nil }
                    var r = plan.request
                    r.author = author
                    r.contextName = "deduplicate"
                    return r
                }
            })
            report.token = outcome.result.token
            guard outcome.request != nil, let done = groups.get() else { break }
            for (w, ls) in done {
                report.winners[w, default: []].append(contentsOf: ls)
                report.removed.append(contentsOf: ls)
            }
        }
        report.groups = report.winners.count
        return report
    }
}

enum BatchPlanner {
    /// Edits for relationships *without* an inverse that point at any pk in `replacing` (the
    /// engine maintains relationships with inverses itself): each such target is replaced by its
    /// mapped object, or removed when it maps to nil. `families`: entities the targets belong to.
    static func rewriteIncoming(_ ctx: ReadContext, _ schema: Schema, replacing: [Int64: ObjectID?], families: Set<String>,
                                skipping: Set<ObjectID>) throws -> [(ObjectID, String, [ObjectID])] {
        var out: [(ObjectID, String, [ObjectID])] = []
        let pks = replacing.keys.sorted()
        for e in schema.model.entities {
            for r in e.relationships where r.inverse == nil && !Set(schema.family(r.destination)).isDisjoint(with: families) {
                let m = schema.mapping[e.name]!
                var sources: [ObjectID: [Int64]] = [:]
                for chunk in stride(from: 0, to: pks.count, by: 500) {
                    let part = Array(pks[chunk..<min(chunk + 500, pks.count)])
                    let list = (0..<part.count).map { "?\($0 + 2)" }.joined(separator: ", ")
                    let args: [StorageValue] = [.int(ctx.generation)] + part.map { .int($0) }
                    let sql: String
                    if !r.toMany {
                        let col = q(m.columns[r.name]!)
                        sql = "SELECT t.pk, t.z_ent, t.\(col) FROM \(q(m.table)) AS t WHERE t.\(col) IN (\(list)) AND \(SQLBuilder.visible("t"))"
                    } else if case .joinTable(let t, let src, let dst)? = m.toMany[r.name] {
                        sql = "SELECT s.pk, s.z_ent, j.\(q(dst)) FROM \(q(t)) AS j JOIN \(q(m.table)) AS s ON s.pk = j.\(q(src)) AND \(SQLBuilder.visible("s")) WHERE j.\(q(dst)) IN (\(list)) AND \(SQLBuilder.visible("j"))"
                    } else { continue }
                    for row in try ctx.rows(sql, args) {
                        guard case .int(let pk) = row[0], case .string(let ent) = row[1], case .int(let target) = row[2] else { continue }
                        let id = ObjectID(storeID: ctx.token.storeID, entity: ent, pk: pk)
                        if !skipping.contains(id) { sources[id, default: []].append(target) }
                    }
                }
                if sources.isEmpty { continue }
                if !r.toMany {
                    for (s, targets) in sources.sorted(by: { $0.key < $1.key }) { out.append((s, r.name, replacing[targets[0]]!.map { [$0] } ?? [])) }
                } else {
                    for case let o? in try ctx.objects(sources.keys.sorted()) {
                        var set: [ObjectID] = []
                        for t in o.relationships[r.name] ?? [] {
                            let x: ObjectID? = replacing.keys.contains(t.pk) ? replacing[t.pk]! : t
                            if let x, !set.contains(x) { set.append(x) }
                        }
                        out.append((o.id, r.name, set))
                    }
                }
            }
        }
        return out
    }

    /// `ids` and every object their cascade delete rules reach (at this generation).
    static func cascadeClosure(_ ctx: ReadContext, _ schema: Schema, _ ids: [ObjectID]) throws -> [ObjectID] {
        var all = Set(ids)
        var out = ids
        var level = ids
        while !level.isEmpty {
            var next: [ObjectID] = []
            for case let o? in try ctx.objects(level) {
                for (name, r) in schema.relationships[o.id.entity] ?? [:] where r.deleteRule == .cascade {
                    for t in o.relationships[name] ?? [] where all.insert(t).inserted { next.append(t); out.append(t) }
                }
            }
            level = next
        }
        return out
    }

    /// IDs (by pk) of the objects a batch operation covers, at the writer's current generation.
    static func matching(_ ctx: ReadContext, entity: String, predicate: String?, variables: [String: QueryArgument], limits: QueryLimits) throws -> [ObjectID] {
        var r = FetchRequest(entity: entity)
        r.predicate = predicate
        r.variables = variables
        r.resultType = .objectIDs
        var l = limits
        l.maxFetchResults = limits.maxBatchResults
        return try ctx.fetch(r, limits: l).objectIDs
    }
}

/// One batch of deduplication, planned inside the writer's transaction.
struct Deduplicator {
    let ctx: ReadContext
    let entity: String
    let uniqueKey: [String]
    let batchSize: Int

    struct Plan { var groups: [(ObjectID, [ObjectID])]; var request: SaveRequest }

    func plan() throws -> Plan {
        let schema = Schema.of(ctx)
        var req = FetchRequest(entity: entity)
        req.resultType = .objectIDs
        let exec = try FetchExecutor(req, ctx: ctx, limits: QueryLimits(), pending: nil)
        let keys = try uniqueKey.map { try exec.scalarPath($0, field: "uniqueKey") }
        // groups of live objects with equal non-nil keys, oldest groups first
        let b = SQLBuilder(schema: schema, storeID: ctx.token.storeID, generation: ctx.generation)
        let scope = SQLScope(entity: entity, alias: "t0", parent: nil)
        var whereSQL = try exec.base(b, scope)
        let exprs = keys.map { b.expression($0, in: scope, comparable: false) }
        whereSQL += exprs.map { " AND \($0) IS NOT NULL" }.joined()
        let sql = "SELECT group_concat(t0.pk || ':' || t0.z_ent, ',') \(exec.from(scope)) WHERE \(whereSQL) GROUP BY \(exprs.joined(separator: ", ")) HAVING count(*) > 1 ORDER BY min(t0.pk) LIMIT \(b.bind(.int(Int64(batchSize))))"
        var groups: [(ObjectID, [ObjectID])] = []
        var budget = batchSize
        for row in try ctx.rows(sql, b.arguments) where budget > 0 {
            guard case .string(let list) = row[0] else { continue }
            let members = list.split(separator: ",").compactMap { m -> ObjectID? in
                let parts = m.split(separator: ":")
                guard parts.count == 2, let pk = Int64(parts[0]) else { return nil }
                return ObjectID(storeID: ctx.token.storeID, entity: String(parts[1]), pk: pk)
            }.sorted { $0.pk < $1.pk }
            guard members.count > 1 else { continue }
            let losers = Array(members.dropFirst().prefix(budget))
            budget -= losers.count
            groups.append((members[0], losers))
        }
        if groups.isEmpty { return Plan(groups: [], request: SaveRequest()) }
        return Plan(groups: groups, request: try repoint(groups, schema))
    }

    /// The save that moves every relationship of the losers to their winner and deletes them.
    func repoint(_ groups: [(ObjectID, [ObjectID])], _ schema: Schema) throws -> SaveRequest {
        var winnerOf: [Int64: ObjectID] = [:]
        for (w, ls) in groups { for l in ls { winnerOf[l.pk] = w } }
        func mapped(_ id: ObjectID) -> ObjectID { winnerOf[id.pk] ?? id }
        var snap: [ObjectID: ObjectSnapshot] = [:]
        let all = groups.flatMap { [$0.0] + $0.1 }
        for case let o? in try ctx.objects(all) { snap[o.id] = o }

        var order: [ObjectID] = []
        var edits: [ObjectID: [String: [ObjectID]]] = [:]
        func edit(_ id: ObjectID, _ rel: String, _ targets: [ObjectID]) {
            if edits[id] == nil { order.append(id) }
            edits[id, default: [:]][rel] = targets
        }
        let rels = (schema.relationships[entity] ?? [:]).sorted { $0.key < $1.key }
        for (w, ls) in groups {
            guard let W = snap[w] else { continue }
            let L = ls.compactMap { snap[$0] }
            for (name, rel) in rels {
                let mine = W.relationships[name] ?? []
                if rel.toMany {
                    var set: [ObjectID] = []
                    for t in mine + L.flatMap({ $0.relationships[name] ?? [] }) {
                        let m = mapped(t)
                        if m != w && !set.contains(m) { set.append(m) }
                    }
                    if set != mine { edit(w, name, set) }
                    for l in L where !(l.relationships[name] ?? []).isEmpty { edit(l.id, name, []) }
                } else if let current = mine.first {
                    if mapped(current) != current { edit(w, name, mapped(current) == w ? [] : [mapped(current)]) }
                } else if let donor = L.first(where: { !($0.relationships[name] ?? []).isEmpty }) {
                    // the winner had none: it takes the oldest loser's; other losers' targets follow their delete rule
                    let t = mapped(donor.relationships[name]![0])
                    if t != w { edit(w, name, [t]) }
                    edit(donor.id, name, [])
                }
            }
        }
        // relationships without an inverse pointing at a loser (the inverse side is covered above)
        let losers = Set(groups.flatMap(\.1))
        for (source, rel, targets) in try BatchPlanner.rewriteIncoming(ctx, schema, replacing: winnerOf.mapValues { Optional($0) },
                                                                     families: Set(schema.family(entity)), skipping: losers) {
            edit(source, rel, targets)
        }
        var save = SaveRequest()
        save.updates = order.map { id in UpdateOperation(objectID: id, relationships: edits[id]!.mapValues { $0.map { .permanent($0) } }) }
        save.deletes = groups.flatMap(\.1).map { DeleteOperation(objectID: $0) }
        return save
    }
}
