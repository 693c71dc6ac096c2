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

    /// A transaction's effect on the result set, in the order of its changes.
    struct Effect: Equatable {
        var entered: [ObjectID] = [], changed: [ObjectID] = [], left: [ObjectID] = []
        var isEmpty: Bool { entered.isEmpty && changed.isEmpty && left.isEmpty }
    }

    /// `touched`: the transaction's objects (each once); `before` / `after`: those of them that
    /// existed and matched at G-1 / G.
    static func effect(of touched: [ObjectID], before: Set<ObjectID>, after: Set<ObjectID>) -> Effect {
        var e = Effect()
        for id in touched {
            switch decide(before: before.contains(id), after: after.contains(id)) {
            case .entered: e.entered.append(id)
            case .changed: e.changed.append(id)
            case .left: e.left.append(id)
            case .unaffected: break
            }
        }
        return e
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
        // an insert did not exist before, a delete does not after: neither side is read for them
        let existedBefore = changes.filter { $0.kind != .insert }.map(\.objectID)
        let existsAfter = changes.filter { $0.kind != .delete }.map(\.objectID)
        let previous = GenerationToken(storeID: tx.token.storeID, epoch: tx.token.epoch, generation: tx.token.generation - 1)
        let before = try await matches(existedBefore, at: previous, store: store)
        let after = try await matches(existsAfter, at: tx.token, store: store)
        let effect = LiveMembership.effect(of: ids, before: Set(before.keys), after: Set(after.keys))
        if effect.isEmpty { return nil }
        var u = Ubiquity_V1_LiveQueryUpdate()
        u.entered = effect.entered.map { object($0, after[$0]) }
        u.changed = effect.changed.map { object($0, after[$0]) }
        u.leftObjectIds = effect.left.map(\.uri)
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
        if ids.isEmpty { return [:] }
        var known: [ObjectID: ObjectSnapshot?] = [:]
        var wanted = ids
        for _ in 0...Self.maxResolveRounds {
            let found = try await read(wanted, at: token, store: store)
            for (id, o) in zip(wanted, found) { known[id] = o }
            var missing: [ObjectID] = []
            var missingSet = Set<ObjectID>()
            var out: [ObjectID: ObjectSnapshot] = [:]
            for id in ids {
                guard let o = known[id] ?? nil else { continue }
                let ok = try predicate?.evaluate(o) { r in
                    if let k = known[r] { return k }
                    if missingSet.insert(r).inserted { missing.append(r) }
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
