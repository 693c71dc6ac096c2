import Foundation
import UbiquityProtos
import UbiquityQuery
import UbiquityStorage

/// What one transaction did to one object's membership in a live query's result set, from
/// whether it matched before (at G-1) and after (at G). Only objects the transaction touched are
/// asked, so matching on both sides means it changed inside the set.
enum LiveMembership: Equatable {
    case entered, changed, left, unaffected

    static func decide(before: Bool, after: Bool) -> LiveMembership {
        switch (before, after) {
        case (false, true): .entered
        case (true, true): .changed
        case (true, false): .left
        case (false, false): .unaffected
        }
    }
}

/// A subscription's live query (`SubscribeRequest.live_query`), checked once at subscribe time:
/// each transaction's changes of the entity (sub-entities included) become a `LiveQueryUpdate`
/// by evaluating the predicate in memory (UbiquityQuery's evaluator) on every touched object as
/// it was before and after the transaction (docs/changes.md, "Live queries").
struct LiveQueryView: Sendable {
    /// nil: every object of the entity matches.
    let predicate: UbiquityQuery.Predicate?
    let includeValues: Bool
    let model: ModelInfo?

    /// Rounds of related-object reads one side of a transaction may take: each round reads, in
    /// one batch, the objects the predicate's key paths reached and had not been read yet.
    static let maxResolveRounds = 8

    init(_ q: Ubiquity_V1_LiveQuery, includeValues: Bool, model: ModelInfo?) throws {
        guard let model else {
            throw ServiceError.precondition("the store has no model yet: a live query needs one to check its predicate", reason: .noModel)
        }
        let text = q.predicate.trimmingCharacters(in: .whitespaces)
        // the query layer's own errors (unknown entity, syntax with its column), under live_query.
        do {
            let variables = try Convert.arguments(q.arguments, field: "live_query.arguments")
            predicate = try UbiquityQuery.Predicate.parse(text.isEmpty ? "TRUEPREDICATE" : text, entity: q.entity, model: model.definition, variables: variables)
        } catch let e as QueryError {
            throw e.rpcError(fieldPrefix: "live_query.")
        }
        self.includeValues = includeValues
        self.model = model
    }

    /// The transaction's effect on the result set; nil when it has none.
    func update(_ tx: HistoryTransaction, changes: [HistoryChange], store: Store) async throws -> Ubiquity_V1_LiveQueryUpdate? {
        var ids: [ObjectID] = []
        var seen = Set<ObjectID>()
        for c in changes where seen.insert(c.objectID).inserted { ids.append(c.objectID) }
        let previous = GenerationToken(storeID: tx.token.storeID, epoch: tx.token.epoch, generation: tx.token.generation - 1)
        let before = try await matches(ids, at: previous, store: store)
        let after = try await matches(ids, at: tx.token, store: store)
        var u = Ubiquity_V1_LiveQueryUpdate()
        for id in ids {
            let now = after[id]
            switch LiveMembership.decide(before: before[id] != nil, after: now != nil) {
            case .entered: u.entered.append(object(id, now))
            case .changed: u.changed.append(object(id, now))
            case .left: u.leftObjectIds.append(id.uri)
            case .unaffected: break
            }
        }
        if u.entered.isEmpty && u.changed.isEmpty && u.leftObjectIds.isEmpty { return nil }
        u.token = Data(tx.token.bytes)
        u.generation = tx.token.generation
        return u
    }

    private func object(_ id: ObjectID, _ o: ObjectSnapshot?) -> Ubiquity_V1_LiveQueryObject {
        var l = Ubiquity_V1_LiveQueryObject()
        l.objectID = id.uri
        if includeValues, let o { l.object = Convert.managedObject(o, model: model) }
        return l
    }

    /// The objects of `ids` that exist and match at `token`, with their state there. The objects
    /// are read in one batch, then whatever their key paths reach in further batches.
    private func matches(_ ids: [ObjectID], at token: GenerationToken, store: Store) async throws -> [ObjectID: ObjectSnapshot] {
        var known: [ObjectID: ObjectSnapshot?] = [:]
        var wanted = ids
        for _ in 0...Self.maxResolveRounds {
            let found = try await read(wanted, at: token, store: store)
            for (id, o) in zip(wanted, found) { known[id] = o }
            var missing: [ObjectID] = []
            var out: [ObjectID: ObjectSnapshot] = [:]
            for id in ids {
                guard let o = known[id] ?? nil else { continue }
                let ok = try predicate?.evaluate(o) { r in
                    if let k = known[r] { return k }
                    if !missing.contains(r) { missing.append(r) }
                    return nil
                } ?? true
                if ok { out[id] = o }
            }
            if missing.isEmpty { return out }
            wanted = missing
        }
        throw ServiceError.exhausted("the live query's key paths reach further than \(Self.maxResolveRounds) relationship hops from the changed objects",
                                     reason: .limitExceeded)
    }

    private func read(_ ids: [ObjectID], at token: GenerationToken, store: Store) async throws -> [ObjectSnapshot?] {
        do { return try await store.objects(ids, at: .token(token)) } catch let e as StorageError where e.reason == .generationExpired {
            // the objects as they were around this transaction are gone: the client re-reads a baseline
            throw ChangesService.historyExpired(store, after: token.generation)
        }
    }
}
