import Foundation
import UbiquityGRPC
import UbiquityProtos
import UbiquityQuery
import UbiquityStorage

/// `ubiquity.v1.Contexts`: server-side contexts with pending changes, a query generation, a merge
/// policy and optional parents (SPEC §4.4).
public struct ContextsService: Sendable {
    let backend: Backend
    let registry: ContextRegistry
    public init(backend: Backend, registry: ContextRegistry) { self.backend = backend; self.registry = registry }

    public func register(into router: inout Router) {
        let b = backend
        let reg = registry
        let p = "/ubiquity.v1.Contexts/"
        let lease = b.limits.contextIdleSeconds

        /// Looks up the context, locks it (with ancestors if asked), opens its store, runs `body`.
        @Sendable func on<T: Sendable>(_ id: String, _ call: ServerCall, ancestors: Bool = false,
                                       _ body: @escaping @Sendable (ContextBox, Store) async throws -> T) async throws -> T {
            let account = try b.account(call)
            let box = try reg.find(id, account: account)
            return try await reg.with(box, ancestors: ancestors) {
                try await b.withStore(box.storeID.uuidString, account: account) { store in
                    try Self.applyAutomaticMerge(box, store, lease: lease)
                    return try await body(box, store)
                }
            }
        }

        router.unary(p + "CreateContext") { (req: Ubiquity_V1_CreateContextRequest, call) in
            try await ServiceErrors.mapping {
                let account = try b.account(call)
                let policy = try Convert.mergePolicy(req.mergePolicy)
                let mode: GenerationModeKind
                switch req.generationMode {
                case .unspecified, .pinnedAtFirstRead: mode = .pinnedAtFirstRead
                case .unpinned: mode = .unpinned
                case .pinnedAtToken: mode = .pinnedAtToken
                case .UNRECOGNIZED(let n): throw ServiceError.invalid("generation_mode", "unknown generation mode \(n)", reason: "BAD_ENUM")
                }
                var parentBox: ContextBox?
                if !req.parentContextID.isEmpty {
                    let pb = try reg.find(req.parentContextID, account: account)
                    guard pb.storeID.uuidString.lowercased() == req.storeID.lowercased() || req.storeID.isEmpty else {
                        throw ServiceError.invalid("parent_context_id", "the parent context works on another store", reason: "BAD_CONTEXT_ID")
                    }
                    parentBox = pb
                }
                let parent = parentBox
                let storeID = parent.map { $0.storeID.uuidString } ?? req.storeID
                return try await b.withStore(storeID, account: account) { store in
                    _ = try b.model(of: store)
                    let box = ContextBox(id: UUID(), account: account.id, storeID: store.id, name: req.name, author: req.author,
                                         parent: parent, autoMerge: req.automaticallyMergesChanges, mergePolicy: policy, mode: mode)
                    if mode == .pinnedAtToken {
                        guard !req.token.isEmpty else {
                            throw ServiceError.invalid("token", "GENERATION_MODE_PINNED_AT_TOKEN needs a token", reason: "MISSING_FIELD")
                        }
                        let t = try Convert.token(req.token, field: "token")  // another store's token: the pin says which (Backend.tokenError)
                        box.pin = try store.pin(t, lease: lease)
                    }
                    do { try reg.add(box) } catch { if let pin = box.pin { store.unpin(pin) }; throw error }
                    return Self.state(box)
                }
            }
        }

        router.unary(p + "Fetch") { (req: Ubiquity_V1_ContextFetchRequest, call) in
            try await ServiceErrors.mapping(queryFields: "fetch.") {
                let fr = try Convert.fetchRequest(req.fetch, field: "fetch")
                let limits = b.queryLimits()
                return try await on(req.contextID, call, ancestors: true) { box, store in
                    let model = try b.model(of: store)
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
        }

        router.unary(p + "Insert") { (req: Ubiquity_V1_ContextInsertRequest, call) in
            try await ServiceErrors.mapping {
                try await on(req.contextID, call) { box, store in
                    let model = try b.model(of: store)
                    try Self.checkRoom(box, adding: req.inserts.count, limit: b.limits.maxPendingChangesPerContext)
                    // assign temporary IDs first, so inserts of this call can point at each other
                    var labels: [String: ObjectID] = [:]
                    var delta = Pending()
                    for (i, ins) in req.inserts.enumerated() {
                        let f = "inserts[\(i)]"
                        guard let def = model.definition.entities.first(where: { $0.name == ins.entity }) else {
                            throw ServiceError.invalid("\(f).entity", "no entity \"\(ins.entity.prefix(100))\" in the model", reason: "UNKNOWN_ENTITY")
                        }
                        guard !def.isAbstract else { throw ServiceError.invalid("\(f).entity", "\(ins.entity) is abstract: insert one of its sub-entities", reason: "ABSTRACT_ENTITY") }
                        let id = ObjectID(storeID: store.id, entity: ins.entity, pk: reg.newTemporaryPK())
                        if !ins.temporaryID.isEmpty {
                            guard labels[ins.temporaryID] == nil else {
                                throw ServiceError.invalid("\(f).temporary_id", "temporary_id \"\(ins.temporaryID.prefix(100))\" is used twice in this call", reason: "DUPLICATE_ID")
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
        }

        router.unary(p + "Update") { (req: Ubiquity_V1_ContextUpdateRequest, call) in
            try await ServiceErrors.mapping {
                try await on(req.contextID, call, ancestors: true) { box, store in
                    let model = try b.model(of: store)
                    try Self.checkRoom(box, adding: req.updates.count, limit: b.limits.maxPendingChangesPerContext)
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
                            throw ServiceError.notFound("\(f): \(id.uri) is not in this context (deleted, or never inserted here)", reason: "OBJECT_NOT_FOUND")
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
                        guard let o else { throw ServiceError.notFound("updates[\(i)]: \(id.uri) does not exist at the context's generation", reason: "OBJECT_NOT_FOUND") }
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
        }

        router.unary(p + "Delete") { (req: Ubiquity_V1_ContextDeleteRequest, call) in
            try await ServiceErrors.mapping {
                try await on(req.contextID, call, ancestors: true) { box, store in
                    try Self.checkRoom(box, adding: req.objectIds.count, limit: b.limits.maxPendingChangesPerContext)
                    let at = try Self.readGeneration(box, store, lease: lease)
                    var visible = Pending()
                    for c in box.chain { visible.merge(c.pending) }
                    let ids = try req.objectIds.enumerated().map { try Convert.objectID($0.element, field: "object_ids[\($0.offset)]", store: store.id, allowTemporary: true) }
                    let permanent = ids.filter { !$0.isTemporary && visible.updated[$0] == nil && visible.deleted[$0] == nil }
                    let found = permanent.isEmpty ? [] : try await store.objects(permanent, at: at)
                    var versions: [ObjectID: Int64] = [:]
                    for (id, o) in zip(permanent, found) {
                        guard let o else { throw ServiceError.notFound("\(id.uri) does not exist at the context's generation", reason: "OBJECT_NOT_FOUND") }
                        versions[id] = o.version
                    }
                    var delta = Pending()
                    for id in ids {
                        if id.isTemporary {
                            guard visible.inserted[id.pk] != nil else { throw ServiceError.notFound("\(id.uri) is not in this context", reason: "OBJECT_NOT_FOUND") }
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

        router.unary(p + "Save") { (req: Ubiquity_V1_ContextSaveRequest, call) in
            try await ServiceErrors.mapping {
                try await on(req.contextID, call, ancestors: true) { box, store in
                    var res = Ubiquity_V1_ContextSaveResponse()
                    if let parent = box.parent {
                        // a child's save moves its changes into the parent; the parent's save commits them
                        if !req.dryRun {
                            try Self.checkRoom(parent, adding: box.pending.count, limit: b.limits.maxPendingChangesPerContext)
                            parent.pending.merge(box.pending)
                            box.pending = Pending()
                        }
                        res.savedToParent = true
                        res.state = Self.state(box)
                        return res
                    }
                    let model = b.modelIfAny(of: store)
                    var s = try Self.saveRequest(box.pending)
                    s.mergePolicy = box.mergePolicy
                    s.author = box.author.isEmpty ? nil : box.author
                    s.contextName = box.name.isEmpty ? nil : box.name
                    s.clientTransactionID = req.clientTransactionID.isEmpty ? nil : req.clientTransactionID
                    s.dryRun = req.dryRun
                    s.modelVersionHash = try b.checkModelVersion(call, store: store)
                    let outcome = try await reg.save(s, on: store, model: model, conflictsInResponse: req.conflictsInResponse,
                                                     issueFields: { _ in nil })
                    guard case .saved(let r) = outcome else {
                        // refused by the merge policy: nothing applied, the pending changes stay
                        res.result = Convert.saveResult(outcome, model: model)
                        res.state = Self.state(box)
                        return res
                    }
                    if !r.dryRun {
                        box.pending = Pending()
                        // saving moves the pin to the new generation (§4.2)
                        if box.mode != .unpinned { try Self.movePin(box, store, to: r.token, lease: lease) }
                    }
                    res.result = Convert.saveResult(r, model: model)
                    res.state = Self.state(box)
                    return res
                }
            }
        }

        router.unary(p + "Rollback") { (req: Ubiquity_V1_ContextRequest, call) in
            try await ServiceErrors.mapping {
                try await on(req.contextID, call) { box, _ in
                    box.pending = Pending()
                    return Self.state(box)
                }
            }
        }

        router.unary(p + "Reset") { (req: Ubiquity_V1_ContextRequest, call) in
            try await ServiceErrors.mapping {
                try await on(req.contextID, call) { box, store in
                    box.pending = Pending()
                    try Self.movePin(box, store, to: nil, lease: lease)
                    if box.mode == .pinnedAtToken { box.mode = .pinnedAtFirstRead }
                    return Self.state(box)
                }
            }
        }

        router.unary(p + "Refresh") { (req: Ubiquity_V1_RefreshRequest, call) in
            try await ServiceErrors.mapping {
                try await on(req.contextID, call) { box, store in
                    let now = store.currentToken
                    if box.mode != .unpinned { try Self.movePin(box, store, to: now, lease: lease) }
                    if !req.mergeChanges {
                        box.pending = Pending()
                        return Self.state(box)
                    }
                    // keep the changes, re-based on the store's current values: they win on save
                    let ids = Array(box.pending.updated.keys) + Array(box.pending.deleted.keys)
                    let current = ids.isEmpty ? [] : try await store.objects(ids, at: .token(now))
                    for (id, o) in zip(ids, current) {
                        if let o {
                            if var u = box.pending.updated[id] { u.baseVersion = o.version; u.baseValues = o.values; box.pending.updated[id] = u }
                            if box.pending.deleted[id] != nil { box.pending.deleted[id] = o.version }
                        } else {
                            box.pending.updated[id] = nil       // gone from the store: nothing left to change
                            box.pending.deleted[id] = nil
                        }
                    }
                    return Self.state(box)
                }
            }
        }

        router.unary(p + "SetQueryGeneration") { (req: Ubiquity_V1_SetQueryGenerationRequest, call) in
            try await ServiceErrors.mapping {
                try await on(req.contextID, call) { box, store in
                    switch req.generationMode {
                    case .unpinned:
                        try Self.movePin(box, store, to: nil, lease: lease)
                        box.mode = .unpinned
                    case .unspecified, .pinnedAtFirstRead:
                        try Self.movePin(box, store, to: nil, lease: lease)
                        box.mode = .pinnedAtFirstRead
                    case .pinnedAtToken:
                        guard !req.token.isEmpty else { throw ServiceError.invalid("token", "GENERATION_MODE_PINNED_AT_TOKEN needs a token", reason: "MISSING_FIELD") }
                        let t = try Convert.token(req.token, field: "token")  // another store's token: the pin says which (Backend.tokenError)
                        try Self.movePin(box, store, to: t, lease: lease)
                        box.mode = .pinnedAtToken
                    case .UNRECOGNIZED(let n):
                        throw ServiceError.invalid("generation_mode", "unknown generation mode \(n)", reason: "BAD_ENUM")
                    }
                    return Self.state(box)
                }
            }
        }

        router.unary(p + "GetState") { (req: Ubiquity_V1_ContextRequest, call) in
            try await ServiceErrors.mapping {
                try await on(req.contextID, call) { box, _ in Self.state(box) }
            }
        }

        router.unary(p + "CloseContext") { (req: Ubiquity_V1_ContextRequest, call) in
            try await ServiceErrors.mapping {
                try await on(req.contextID, call) { box, store in
                    for gone in reg.remove(box) {
                        gone.closed = gone === box ? true : gone.closed
                        if let pin = gone.pin { store.unpin(pin) }
                    }
                    box.pin = nil
                    box.pending = Pending()
                    return Ubiquity_V1_CloseContextResponse()
                }
            }
        }
    }

    /// Drops contexts idle past the limit, every `interval` seconds, until the task is cancelled.
    /// Their pins are leases of the same length, so the store forgets them on its own.
    public func startExpiry(interval: Double) -> Task<Void, Never> {
        let reg = registry
        return Task {
            while !Task.isCancelled {
                try? await Task.sleep(nanoseconds: UInt64(max(0.05, interval) * 1e9))
                for gone in reg.expire() { gone.closed = true }
            }
        }
    }

    // MARK: Helpers

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
            throw ServiceError.exhausted("a context holds at most \(limit) pending changes (it has \(box.pending.count), this call adds \(n)): save first", reason: "LIMIT_EXCEEDED")
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
            throw ServiceError.invalid("\(field).entity", "no entity \"\(entity.prefix(100))\" in the model", reason: "UNKNOWN_ENTITY")
        }
        for v in values where attrs[v] == nil {
            throw ServiceError.invalid("\(field).values", "\(entity) has no attribute \"\(v.prefix(100))\"", reason: "UNKNOWN_PROPERTY")
        }
        for r in relationships where rels[r] == nil {
            throw ServiceError.invalid("\(field).relationships", "\(entity) has no relationship \"\(r.prefix(100))\"", reason: "UNKNOWN_PROPERTY")
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
                        throw ServiceError.invalid("\(field).\(name)[\(i)]", "no insert labelled \"\(t.prefix(100))\" in this call (use the object_id Insert returned)", reason: "BAD_OBJECT_ID")
                    }
                    return id
                case .objectID(let s): return try Convert.objectID(s, field: "\(field).\(name)[\(i)]", store: store, allowTemporary: true)
                case .none: throw ServiceError.invalid("\(field).\(name)[\(i)]", "a relationship target needs temporary_id or object_id", reason: "BAD_OBJECT_ID")
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
                throw ServiceError.invalid("relationships", "\(id.uri) was deleted in this context but a pending change still points at it", reason: "DANGLING_REFERENCE")
            }
            return .temporary(id.uri)
        }
        var s = SaveRequest()
        s.inserts = try p.insertOrder.compactMap { p.inserted[$0] }.map { i in
            InsertOperation(temporaryID: i.id.uri, entity: i.id.entity, values: i.values,
                            relationships: try i.relationships.mapValues { try $0.map(ref) })
        }
        s.updates = try p.updated.sorted { $0.key < $1.key }.map { id, u in
            UpdateOperation(objectID: id, expectedVersion: u.baseVersion, values: u.values,
                            relationships: try u.relationships.mapValues { try $0.map(ref) }, snapshot: u.baseValues)
        }
        s.deletes = p.deleted.sorted { $0.key < $1.key }.map { DeleteOperation(objectID: $0.key, expectedVersion: $0.value) }
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
        let ids = Array(p.updated.keys) + Array(p.deleted.keys)
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
