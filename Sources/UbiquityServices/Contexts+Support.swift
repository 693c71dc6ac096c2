import Foundation
import UbiquityGRPC
import UbiquityProtos
import UbiquityQuery
import UbiquityStorage

// Contexts: what the methods share — the state a response reports, pins, room checks, and the
// conversion of pending changes for saves and fetches.
extension ContextsService {
    static func state(_ box: ContextBox) -> Ubiquity_V1_ContextState {
        var s = Ubiquity_V1_ContextState()
        s.contextID = box.id.uuidString.lowercased()
        s.storeID = box.storeID.uuidString.lowercased()
        s.hasChanges_p = box.hasChanges
        s.insertedCount = Int32(box.pending.inserted.count)
        s.updatedCount = Int32(box.pending.updated.count)
        s.deletedCount = Int32(box.pending.deleted.count)
        if let pin = box.pin { s.token = Data(pin.token.bytes) }
        switch box.mode {
        case .unpinned: s.generationMode = .unpinned
        case .pinnedAtFirstRead: s.generationMode = .pinnedAtFirstRead
        case .pinnedAtToken: s.generationMode = .pinnedAtToken
        }
        s.mergePolicy = Convert.protoMergePolicy(box.mergePolicy)
        s.parentContextID = box.parent?.id.uuidString.lowercased() ?? ""
        s.name = box.name
        return s
    }

    static func checkRoom(_ box: ContextBox, adding n: Int, limit: Int) throws {
        if box.pending.count + n > limit {
            throw ServiceError.exhausted("a context holds at most \(limit) pending changes (it has \(box.pending.count), this call adds \(n)): save first", reason: .limitExceeded)
        }
    }

    /// The generation the context reads now, pinning it on first read when its mode says so.
    static func readGeneration(_ box: ContextBox, _ store: Store, lease: Double) throws -> ReadGeneration {
        if box.mode == .unpinned { return .current }
        if let pin = box.pin {
            do { try store.renew(pin, lease: lease) } catch {
                // the store was reopened (pins live in memory): pin the same generation again,
                // which fails with GENERATION_EXPIRED if it was collected meanwhile
                box.pin = try store.pin(pin.token, lease: lease)
            }
            return .token(box.pin!.token)
        }
        let pin = try store.pin(nil, lease: lease)
        box.pin = pin
        return .token(pin.token)
    }

    static func movePin(_ box: ContextBox, _ store: Store, to token: GenerationToken?, lease: Double) throws {
        if let old = box.pin { store.unpin(old) }
        box.pin = nil
        if let token { box.pin = try store.pin(token, lease: lease) }
    }

    /// `automatically_merges_changes`: a pinned context moves to the newest saved generation.
    static func applyAutomaticMerge(_ box: ContextBox, _ store: Store, lease: Double) throws {
        guard box.autoMerge, let t = box.mergeToken.withLock({ t -> GenerationToken? in defer { t = nil }; return t }) else { return }
        if box.mode != .unpinned, let pin = box.pin, pin.token.generation < t.generation, t.epoch == pin.token.epoch {
            try movePin(box, store, to: t, lease: lease)
        }
    }

    static func checkProperties(entity: String, values: [String], relationships: [String], model: ModelInfo, field: String) throws {
        guard let attrs = model.attributeTypes[entity], let rels = model.relationships[entity] else {
            throw ServiceError.invalid("\(field).entity", "no entity \"\(entity.prefix(100))\" in the model", reason: .unknownEntity)
        }
        for v in values where attrs[v] == nil {
            throw ServiceError.invalid("\(field).values", "\(entity) has no attribute \"\(v.prefix(100))\"", reason: .unknownProperty)
        }
        for r in relationships where rels[r] == nil {
            throw ServiceError.invalid("\(field).relationships", "\(entity) has no relationship \"\(r.prefix(100))\"", reason: .unknownProperty)
        }
    }

    /// Attribute values with model defaults filled in (what a fetch over pending objects sees).
    static func withDefaults(_ values: [String: StorageValue], entity: String, model: ModelInfo) throws -> [String: StorageValue] {
        var out = values
        var e = model.definition.entities.first { $0.name == entity }
        var seen = Set<String>()
        while let x = e, seen.insert(x.name).inserted {
            for a in x.attributes where out[a.name] == nil { out[a.name] = a.defaultValue ?? .null }
            e = x.parent.flatMap { p in model.definition.entities.first { $0.name == p } }
        }
        return out
    }

    static func targets(_ m: [String: Ubiquity_V1_ObjectRefList], labels: [String: ObjectID], store: UUID, field: String) throws -> [String: [ObjectID]] {
        var out: [String: [ObjectID]] = [:]
        for (name, list) in m {
            out[name] = try list.refs.enumerated().map { i, r in
                switch r.ref {
                case .temporaryID(let t):
                    guard let id = labels[t] else {
                        throw ServiceError.invalid("\(field).\(name)[\(i)]", "no insert labelled \"\(t.prefix(100))\" in this call (use the object_id Insert returned)", reason: .badObjectID)
                    }
                    return id
                case .objectID(let s): return try Convert.objectID(s, field: "\(field).\(name)[\(i)]", store: store, allowTemporary: true)
                case .none: throw ServiceError.invalid("\(field).\(name)[\(i)]", "a relationship target needs temporary_id or object_id", reason: .badObjectID)
                }
            }
        }
        return out
    }

    /// The store save of a root context's pending changes. Temporary IDs travel as their URIs.
    static func saveRequest(_ p: Pending) throws -> SaveRequest {
        func ref(_ id: ObjectID) throws -> ObjectReference {
            guard id.isTemporary else { return .permanent(id) }
            guard p.inserted[id.pk] != nil else {
                throw ServiceError.invalid("relationships", "\(id.uri) was deleted in this context but a pending change still points at it", reason: .danglingReference)
            }
            return .temporary(id.uri)
        }
        var s = SaveRequest()
        s.inserts = try p.insertOrder.compactMap { p.inserted[$0] }.map { i in
            InsertOperation(temporaryID: i.id.uri, entity: i.id.entity, values: i.values,
                            relationships: try i.relationships.mapValues { try $0.map(ref) })
        }
        // temporary IDs left without their insert: objects deleted before this save
        s.updates = try p.updated.filter { !$0.key.isTemporary }.sorted { $0.key < $1.key }.map { id, u in
            UpdateOperation(objectID: id, expectedVersion: u.baseVersion, values: u.values,
                            relationships: try u.relationships.mapValues { try $0.map(ref) }, snapshot: u.baseValues)
        }
        s.deletes = p.deleted.filter { !$0.key.isTemporary }.sorted { $0.key < $1.key }.map { DeleteOperation(objectID: $0.key, expectedVersion: $0.value) }
        return s
    }

    /// A context's pending changes as the query layer sees them: inserted objects with their
    /// values, updated objects in their pending state, deleted IDs — with the inverse side of
    /// every relationship they edit kept in step (`PendingView`).
    static func pendingChanges(_ p: Pending, store: Store, model: ModelInfo, at: ReadGeneration) async throws -> PendingChanges {
        var view = PendingView(model: model, deleted: Set(p.deleted.keys))
        var edits: [PendingView.Edit] = []
        let inserted = p.insertOrder.compactMap { p.inserted[$0] }
        for i in inserted {
            var rels = i.relationships
            for r in (model.relationships[i.id.entity] ?? [:]).keys where rels[r] == nil { rels[r] = [] }
            view.objects[i.id] = ObjectSnapshot(id: i.id, version: 0, values: i.values, relationships: rels)
            edits += PendingView.edits(i.id, before: [:], after: i.relationships)
        }
        // updated and deleted objects as stored: what their changes edit
        let ids = p.storedIDs
        let stored = ids.isEmpty ? [] : try await store.objects(ids, at: at)
        for (id, o) in zip(ids, stored) {
            guard let o else { continue }
            guard let u = p.updated[id] else {
                edits += PendingView.edits(id, before: o.relationships, after: o.relationships.mapValues { _ in [] })
                continue
            }
            edits += PendingView.edits(id, before: o.relationships, after: u.relationships)
            var now = o
            now.values.merge(u.values) { _, new in new }
            now.relationships.merge(u.relationships) { _, new in new }
            view.objects[id] = now
            view.markChanged(id)
        }
        // the other sides: the edits' targets, then the previous holders of to-one targets
        for _ in 0..<2 {
            let more = view.missing(edits)
            if more.isEmpty { break }
            for case let o? in try await store.objects(more, at: at) { view.objects[o.id] = o }
        }
        for e in edits { view.apply(e) }
        return PendingChanges(inserted: inserted.compactMap { view.objects[$0.id] }, updated: view.changed.compactMap { view.objects[$0] },
                              deleted: Set(p.deleted.keys))
    }
}
