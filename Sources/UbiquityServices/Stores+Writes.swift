import Foundation
import UbiquityGRPC
import UbiquityProtos
import UbiquityQuery
import UbiquityStorage

// Stores: writes without a context. Every write is one SQLite transaction; a committed one is
// announced to the store's auto-merging contexts (`ContextRegistry.save`, `storeDidSave`).
extension StoresService {
    func save(_ request: SaveRequestDecoder.Request, context: ServerContext) async throws -> Encoded<Ubiquity_V1_SaveResult> {
        let (storeID, changes, conflictsInResponse) = switch request {
        case .common(let fast, _): (fast.storeID, fast.inserts.count, fast.conflictsInResponse)
        case .general(let req): (req.storeID, req.inserts.count + req.updates.count + req.deletes.count, req.conflictsInResponse)
        }
        let limit = backend.limits.maxChangesPerSave
        guard changes <= limit else {
            throw ServiceError.exhausted("a save holds at most \(limit) changes (this one has \(changes)); split it or use BatchInsert", reason: .limitExceeded)
        }
        return try await backend.withStore(storeID, account: context.account) { store in
            let model = backend.modelIfAny(of: store)
            var s: SaveRequest
            switch request {
            case .common(let fast, _) where !fast.foreignReference(store: store.id):
                s = fast.saveRequest
            case .common(_, let bytes):
                // a target in another store: the general conversion reports it
                s = try Self.saveRequest(try Ubiquity_V1_SaveRequest(requestBytes: bytes), store: store.id)
            case .general(let req):
                s = try Self.saveRequest(req, store: store.id)
            }
            s.modelVersionHash = try backend.checkModelVersion(context, store: store)
            switch try await contexts.save(s, on: store, model: model, conflictsInResponse: conflictsInResponse) {
            case .saved(let r): return Encoded(bytes: try SaveEncoding.saveResult(r, model: model))
            case let conflicted: return Encoded(bytes: try Convert.saveResult(conflicted, model: model).serializedBytes())
            }
        }
    }

    func batchInsert(_ req: Ubiquity_V1_BatchInsertRequest, context: ServerContext) async throws -> Ubiquity_V1_BatchResponse {
        guard !req.entity.isEmpty else { throw ServiceError.invalid("entity", "an entity is required", reason: .missingField) }
        let limit = backend.limits.maxChangesPerSave
        guard req.objects.count <= limit else {
            throw ServiceError.exhausted("a batch insert holds at most \(limit) objects (this one has \(req.objects.count))", reason: .limitExceeded)
        }
        return try await backend.withStore(req.storeID, account: context.account) { store in
            var s = SaveRequest()
            s.inserts = try req.objects.enumerated().map { i, o in
                InsertOperation(temporaryID: "b\(i)", entity: req.entity, values: try Convert.values(o.values, field: "objects[\(i)].values"))
            }
            s.mergePolicy = req.upsert ? .mergeByPropertyObjectTrump : .error
            s.author = req.author.nonEmpty
            s.modelVersionHash = try backend.checkModelVersion(context, store: store)
            let model = backend.modelIfAny(of: store)
            let r = try await contexts.save(s, on: store, model: model,
                                            issueFields: { $0.hasPrefix("inserts[") ? "objects[" + $0.dropFirst(8) : nil })
            var res = Ubiquity_V1_BatchResponse()
            res.token = Data(r.token.bytes)
            res.count = Int64(req.objects.count)
            if req.returnObjectIds { res.objectIds = (0..<req.objects.count).compactMap { r.permanentIDs["b\($0)"]?.uri } }
            return res
        }
    }

    func batchUpdate(_ req: Ubiquity_V1_BatchUpdateRequest, context: ServerContext) async throws -> Ubiquity_V1_BatchResponse {
        guard !req.entity.isEmpty else { throw ServiceError.invalid("entity", "an entity is required", reason: .missingField) }
        guard !req.values.isEmpty else { throw ServiceError.invalid("values", "a batch update needs at least one value to set", reason: .missingField) }
        let values = try Convert.values(req.values, field: "values")
        let vars = try Convert.arguments(req.variables, field: "variables")
        let limits = backend.queryLimits()
        return try await backend.withStore(req.storeID, account: context.account) { store in
            _ = try backend.checkModelVersion(context, store: store)
            // the values' own issues name `values.<attribute>`; per-object issues name their object
            let r = try await renamingIssueFields({ $0.hasPrefix("values.") ? $0 : nil }) {
                try await store.batchUpdate(entity: req.entity, predicate: req.predicate.nonEmpty, variables: vars,
                                            values: values, author: req.author.nonEmpty, limits: limits)
            }
            if r.count > 0 { await contexts.storeDidSave(store.id, token: r.token) }
            return Self.batchResponse(r)
        }
    }

    func batchDelete(_ req: Ubiquity_V1_BatchDeleteRequest, context: ServerContext) async throws -> Ubiquity_V1_BatchResponse {
        guard !req.entity.isEmpty else { throw ServiceError.invalid("entity", "an entity is required", reason: .missingField) }
        let vars = try Convert.arguments(req.variables, field: "variables")
        let limits = backend.queryLimits()
        return try await backend.withStore(req.storeID, account: context.account) { store in
            _ = try backend.checkModelVersion(context, store: store)
            let ids: [ObjectID]? = req.objectIds.isEmpty ? nil : try req.objectIds.enumerated().map {
                try Convert.objectID($0.element, field: "object_ids[\($0.offset)]", store: store.id)
            }
            let r = try await store.batchDelete(entity: req.entity, predicate: req.predicate.nonEmpty, variables: vars,
                                                objectIDs: ids, author: req.author.nonEmpty, limits: limits)
            if r.count > 0 { await contexts.storeDidSave(store.id, token: r.token) }
            return Self.batchResponse(r)
        }
    }

    func deduplicate(_ req: Ubiquity_V1_DeduplicateRequest, context: ServerContext) async throws -> Ubiquity_V1_DeduplicateResponse {
        guard !req.entity.isEmpty else { throw ServiceError.invalid("entity", "an entity is required", reason: .missingField) }
        guard !req.uniqueKey.isEmpty else { throw ServiceError.invalid("unique_key", "name the attributes that identify duplicates", reason: .missingField) }
        return try await backend.withStore(req.storeID, account: context.account) { store in
            _ = try backend.checkModelVersion(context, store: store)
            let r = try await store.deduplicate(entity: req.entity, uniqueKey: req.uniqueKey,
                                                batchSize: req.batchSize > 0 ? Int(req.batchSize) : 500, author: req.author.nonEmpty)
            if !r.removed.isEmpty { await contexts.storeDidSave(store.id, token: r.token) }
            var res = Ubiquity_V1_DeduplicateResponse()
            res.token = Data(r.token.bytes)
            res.groups = Int64(r.groups)
            res.removed = Int64(r.removed.count)
            res.details = r.winners.sorted { $0.key < $1.key }.map { w, losers in
                var g = Ubiquity_V1_DuplicateGroup()
                g.winnerObjectID = w.uri
                g.removedObjectIds = losers.map(\.uri)
                return g
            }
            return res
        }
    }

    func seed(_ req: Ubiquity_V1_SeedRequest, context: ServerContext) async throws -> Ubiquity_V1_SeedResponse {
        guard !req.seedID.isEmpty, req.seedID.count <= 200 else {
            throw ServiceError.invalid("seed_id", "a seed needs a seed_id of 1–200 characters", reason: .missingField)
        }
        guard req.inserts.count <= backend.limits.maxChangesPerSave else {
            throw ServiceError.exhausted("a seed holds at most \(backend.limits.maxChangesPerSave) objects", reason: .limitExceeded)
        }
        return try await backend.withStore(req.storeID, account: context.account) { store in
            var s = SaveRequest()
            s.inserts = try req.inserts.enumerated().map { try Convert.insert($0.element, field: "inserts[\($0.offset)]", store: store.id) }
            // Exactly once per seed ID: the seed is a save whose client transaction ID is derived
            // from it, so repeated or concurrent calls get the first outcome.
            s.clientTransactionID = "ubiquity.seed:" + req.seedID
            s.mergePolicy = .mergeByPropertyObjectTrump
            s.author = req.author.nonEmpty
            s.contextName = "seed"
            s.modelVersionHash = try backend.checkModelVersion(context, store: store)
            let model = backend.modelIfAny(of: store)
            let r = try await contexts.save(s, on: store, model: model)
            var res = Ubiquity_V1_SeedResponse()
            res.token = Data(r.token.bytes)
            res.applied = !r.replayed
            for (k, v) in r.permanentIDs { res.permanentIds[k] = v.uri }
            return res
        }
    }

    /// The engine's save for a SwiftProtobuf-decoded request (conversion errors name their field).
    static func saveRequest(_ req: Ubiquity_V1_SaveRequest, store: UUID) throws -> SaveRequest {
        var s = SaveRequest()
        s.inserts = try req.inserts.enumerated().map { try Convert.insert($0.element, field: "inserts[\($0.offset)]", store: store) }
        s.updates = try req.updates.enumerated().map { try Convert.update($0.element, field: "updates[\($0.offset)]", store: store) }
        s.deletes = try req.deletes.enumerated().map { try Convert.delete($0.element, field: "deletes[\($0.offset)]", store: store) }
        s.mergePolicy = try Convert.mergePolicy(req.mergePolicy)
        s.author = req.author.nonEmpty
        s.contextName = req.contextName.nonEmpty
        s.clientTransactionID = req.clientTransactionID.nonEmpty
        s.dryRun = req.dryRun
        return s
    }

    static func batchResponse(_ r: BatchResult) -> Ubiquity_V1_BatchResponse {
        var res = Ubiquity_V1_BatchResponse()
        res.token = Data(r.token.bytes)
        res.count = Int64(r.count)
        res.objectIds = r.objectIDs.map(\.uri)
        return res
    }
}
