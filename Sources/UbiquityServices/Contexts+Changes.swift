import Foundation
import UbiquityGRPC
import UbiquityProtos
import UbiquityQuery
import UbiquityStorage

// Contexts: reads through a context and the changes it holds until it saves.
extension ContextsService {
    func fetch(_ req: Ubiquity_V1_ContextFetchRequest, context: ServerContext) async throws -> Ubiquity_V1_FetchResults {
        let fr = try Convert.fetchRequest(req.fetch, field: "fetch")
        let limits = backend.queryLimits()
        return try await inContext(req.contextID, context, ancestors: true) { box, store in
            let model = try backend.model(of: store)
            let at = try Self.readGeneration(box, store, lease: lease)
            var pending: PendingChanges?
            if !req.excludesPendingChanges {
                var all = Pending()
                for c in box.chain { all.merge(c.pending) }
                if all.count > 0 { pending = try await Self.pendingChanges(all, store: store, model: model, at: at) }
            }
            let r = try await store.fetch(fr, at: at, pending: pending, limits: limits)
            return Convert.fetchResults(r, type: fr.resultType, model: model)
        }
    }

    func insert(_ req: Ubiquity_V1_ContextInsertRequest, context: ServerContext) async throws -> Ubiquity_V1_ContextInsertResponse {
        try await inContext(req.contextID, context) { box, store in
            let model = try backend.model(of: store)
            try Self.checkRoom(box, adding: req.inserts.count, limit: backend.limits.maxPendingChangesPerContext)
            // assign temporary IDs first, so inserts of this call can point at each other
            var labels: [String: ObjectID] = [:]
            var delta = Pending()
            for (i, ins) in req.inserts.enumerated() {
                let f = "inserts[\(i)]"
                guard let def = model.definition.entities.first(where: { $0.name == ins.entity }) else {
                    throw ServiceError.invalid("\(f).entity", "no entity \"\(ins.entity.prefix(100))\" in the model", reason: .unknownEntity)
                }
                guard !def.isAbstract else { throw ServiceError.invalid("\(f).entity", "\(ins.entity) is abstract: insert one of its sub-entities", reason: .abstractEntity) }
                let id = ObjectID(storeID: store.id, entity: ins.entity, pk: registry.newTemporaryPK())
                if !ins.temporaryID.isEmpty {
                    guard labels[ins.temporaryID] == nil else {
                        throw ServiceError.invalid("\(f).temporary_id", "temporary_id \"\(ins.temporaryID.prefix(100))\" is used twice in this call", reason: .duplicateID)
                    }
                    labels[ins.temporaryID] = id
                }
                delta.inserted[id.pk] = PendingInsert(id: id, values: [:], relationships: [:])
                delta.insertOrder.append(id.pk)
            }
            for (i, ins) in req.inserts.enumerated() {
                let f = "inserts[\(i)]"
                let pk = delta.insertOrder[i]
                try Self.checkProperties(entity: ins.entity, values: Array(ins.values.keys), relationships: Array(ins.relationships.keys), model: model, field: f)
                let values = try Convert.values(ins.values, field: "\(f).values")
                // the checks Stores.Save makes, now: a wrong value never enters the context's view
                try store.validateValues(entity: ins.entity, values: values, field: "\(f).values", nullAllowed: true)
                delta.inserted[pk]!.values = try Self.withDefaults(values, entity: ins.entity, model: model)
                delta.inserted[pk]!.relationships = try Self.targets(ins.relationships, labels: labels, store: store.id, field: "\(f).relationships")
            }
            box.pending.merge(delta)
            var res = Ubiquity_V1_ContextInsertResponse()
            for (k, v) in labels { res.objectIds[k] = v.uri }
            res.state = Self.state(box)
            return res
        }
    }

    func update(_ req: Ubiquity_V1_ContextUpdateRequest, context: ServerContext) async throws -> Ubiquity_V1_ContextState {
        try await inContext(req.contextID, context, ancestors: true) { box, store in
            let model = try backend.model(of: store)
            try Self.checkRoom(box, adding: req.updates.count, limit: backend.limits.maxPendingChangesPerContext)
            let at = try Self.readGeneration(box, store, lease: lease)
            var delta = Pending()
            var visible = Pending()
            for c in box.chain { visible.merge(c.pending) }
            var toRead: [(Int, ObjectID)] = []
            var parsed: [(ObjectID, [String: StorageValue], [String: [ObjectID]])] = []
            for (i, u) in req.updates.enumerated() {
                let f = "updates[\(i)]"
                let id = try Convert.objectID(u.objectID, field: "\(f).object_id", store: store.id, allowTemporary: true)
                try Self.checkProperties(entity: id.entity, values: Array(u.values.keys), relationships: Array(u.relationships.keys), model: model, field: f)
                if id.isTemporary ? visible.inserted[id.pk] == nil : visible.deleted[id] != nil {
                    throw ServiceError.notFound("\(f): \(id.uri) is not in this context (deleted, or never inserted here)", reason: .objectNotFound)
                }
                let values = try Convert.values(u.values, field: "\(f).values")
                try store.validateValues(entity: id.entity, values: values, field: "\(f).values", nullAllowed: true)
                let rels = try Self.targets(u.relationships, labels: [:], store: store.id, field: "\(f).relationships")
                parsed.append((id, values, rels))
                if !id.isTemporary && visible.updated[id] == nil { toRead.append((i, id)) }
            }
            // what the context reads of objects it changes for the first time: their version
            // and values are the optimistic-locking base
            let bases = toRead.isEmpty ? [] : try await store.objects(toRead.map(\.1), at: at)
            var base: [ObjectID: ObjectSnapshot] = [:]
            for ((i, id), o) in zip(toRead, bases) {
                guard let o else { throw ServiceError.notFound("updates[\(i)]: \(id.uri) does not exist at the context's generation", reason: .objectNotFound) }
                base[id] = o
            }
            for (id, values, rels) in parsed {
                let o = base[id]
                let u = PendingUpdate(baseVersion: o?.version ?? 0, baseValues: o?.values ?? [:], values: values, relationships: rels)
                var one = Pending()
                one.updated[id] = u
                delta.merge(one)
            }
            box.pending.merge(delta)
            return Self.state(box)
        }
    }

    func delete(_ req: Ubiquity_V1_ContextDeleteRequest, context: ServerContext) async throws -> Ubiquity_V1_ContextState {
        try await inContext(req.contextID, context, ancestors: true) { box, store in
            try Self.checkRoom(box, adding: req.objectIds.count, limit: backend.limits.maxPendingChangesPerContext)
            let at = try Self.readGeneration(box, store, lease: lease)
            var visible = Pending()
            for c in box.chain { visible.merge(c.pending) }
            let ids = try req.objectIds.enumerated().map { try Convert.objectID($0.element, field: "object_ids[\($0.offset)]", store: store.id, allowTemporary: true) }
            let permanent = ids.filter { !$0.isTemporary && visible.updated[$0] == nil && visible.deleted[$0] == nil }
            let found = permanent.isEmpty ? [] : try await store.objects(permanent, at: at)
            var versions: [ObjectID: Int64] = [:]
            for (id, o) in zip(permanent, found) {
                guard let o else { throw ServiceError.notFound("\(id.uri) does not exist at the context's generation", reason: .objectNotFound) }
                versions[id] = o.version
            }
            var delta = Pending()
            for id in ids {
                if id.isTemporary {
                    guard visible.inserted[id.pk] != nil else { throw ServiceError.notFound("\(id.uri) is not in this context", reason: .objectNotFound) }
                    delta.deleted[id] = 0
                } else {
                    delta.deleted[id] = versions[id] ?? visible.updated[id]?.baseVersion ?? visible.deleted[id] ?? 0
                }
            }
            box.pending.merge(delta)
            return Self.state(box)
        }
    }
}
