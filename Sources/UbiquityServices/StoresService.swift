import Foundation
import UbiquityGRPC
import UbiquityProtos
import UbiquityQuery
import UbiquityStorage

/// `ubiquity.v1.Stores`: named stores of an account, read and written without a context.
public struct StoresService: Sendable {
    let backend: Backend
    let contexts: ContextRegistry
    public init(backend: Backend, contexts: ContextRegistry) { self.backend = backend; self.contexts = contexts }

    static let defaultBatchSize = 500

    public func register(into router: inout Router) {
        let b = backend
        let contexts = self.contexts
        let p = "/ubiquity.v1.Stores/"

        router.unary(p + "OpenStore") { (req: Ubiquity_V1_OpenStoreRequest, call) in
            try await ServiceErrors.mapping {
                let account = try b.account(call)
                let name = req.name
                guard !name.isEmpty, name.count <= 200, !name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
                    throw ServiceError.invalid("name", "a store name is 1–200 characters without control characters", reason: "BAD_NAME")
                }
                guard let (rec, created) = try b.catalog.store(account: account.id, name: name, create: !req.mustExist) else {
                    throw ServiceError.notFound("no store named \"\(name)\" in this account", reason: "STORE_NOT_FOUND")
                }
                return try await b.directory.withStore(rec.id, create: true) { store in
                    var res = Ubiquity_V1_OpenStoreResponse()
                    res.store = Self.info(rec, store)
                    res.created = created
                    return res
                }
            }
        }

        router.unary(p + "ListStores") { (_: Ubiquity_V1_ListStoresRequest, call) in
            try await ServiceErrors.mapping {
                let account = try b.account(call)
                var res = Ubiquity_V1_ListStoresResponse()
                res.stores = b.catalog.stores(account: account.id).map { r in
                    var i = Ubiquity_V1_StoreInfo()
                    i.storeID = r.id.uuidString.lowercased()
                    i.name = r.name
                    return i
                }
                return res
            }
        }

        // Fetch and GetObjects are blocking handlers: the worker thread runs the read itself on a
        // read connection checked out of the store's pool, with no Task and no reader-thread hop.
        // Both return their response already encoded (FetchEncoding.swift, ObjectEncoding.swift).
        // Fetch's request is read by hand in its common form, straight into the engine's types
        // (FetchDecoding.swift); any other is decoded by SwiftProtobuf and converted as before.
        router.blockingUnaryEncoded(p + "Fetch", fastDecode: { RawFetchRequest(bytes: $0) }) { (raw: RawFetchRequest, call) in
            let fast = FetchDecoding.decode(raw.bytes)
            let req: Ubiquity_V1_FetchRequest? = fast == nil ? try Self.decodeFetch(raw.bytes) : nil
            return try ServiceErrors.mappingSync(queryFields: "fetch.") {
                let account = try b.account(call)
                var d: DecodedFetch
                if let fast { d = fast } else {
                    d = DecodedFetch(storeID: req!.storeID, request: try Convert.fetchRequest(req!.fetch, field: "fetch"))
                    (d.at, d.minimumGeneration) = try Convert.readGeneration(req!.at, field: "at")
                }
                let (fr, at, minGen) = (d.request, d.at, d.minimumGeneration)
                let limits = b.queryLimits()
                let cancellation = call.cancellation
                return try b.withStoreSync(d.storeID, account: account) { store in
                    // The model is resolved only when needed (two locks saved per call): streamed
                    // objects are typed by the read's model. A store without a model still answers
                    // NO_MODEL, whatever else is wrong with the request: its read always fails, and
                    // the failure is checked for that first.
                    let out = FetchResponseWriter()
                    let r: FetchResult
                    do {
                        r = try store.fetchSync(fr, at: at, minimumGeneration: minGen, limits: limits, isCancelled: { cancellation.isCancelled }, sink: out)
                    } catch {
                        _ = try b.model(of: store)
                        throw error
                    }
                    return try out.finish(r, type: fr.resultType, model: { try b.model(of: store) })
                }
            }
        }

        router.serverStreaming(p + "FetchStream") { (req: Ubiquity_V1_FetchRequest, writer: ResponseWriter<Ubiquity_V1_FetchResults>, call) in
            try await ServiceErrors.mapping(queryFields: "fetch.") {
                let account = try b.account(call)
                var request = try Convert.fetchRequest(req.fetch, field: "fetch")
                if request.fetchBatchSize == 0 { request.fetchBatchSize = Self.defaultBatchSize }
                request.fetchBatchSize = min(request.fetchBatchSize, b.limits.maxFetchResults)
                let (at, minGen) = try Convert.readGeneration(req.at, field: "at")
                var streamLimits = b.queryLimits()
                streamLimits.maxFetchResults = Int.max
                let (fr, limits) = (request, streamLimits)
                try await b.withStore(req.storeID, account: account) { store in
                    let model = try b.model(of: store)
                    if let minGen, store.currentToken.generation < minGen {
                        throw StorageError(.generationNotReached, "the store has not reached generation \(minGen) yet")
                    }
                    // Wait for the reader before reading the next batch, so an unread call holds
                    // its queued output and nothing else (docs/protocol.md, flow control).
                    var batches = store.fetchBatches(fr, at: at, limits: limits).makeAsyncIterator()
                    while true {
                        try await writer.waitUntilWritable()
                        guard let batch = try await batches.next() else { break }
                        try await writer.write(Convert.fetchResults(batch, type: fr.resultType, model: model))
                    }
                }
            }
        }

        // A read that is one SELECT runs without BEGIN … COMMIT (`Store.objectsSync`). The request
        // is decoded by hand in its common form (RequestDecoding.swift), by SwiftProtobuf otherwise.
        router.blockingUnaryEncoded(p + "GetObjects", fastDecode: RequestDecoding.getObjects) { (req: Ubiquity_V1_GetObjectsRequest, call) in
            try ServiceErrors.mappingSync {
                let account = try b.account(call)
                guard req.objectIds.count <= b.limits.maxFetchResults else {
                    throw ServiceError.exhausted("at most \(b.limits.maxFetchResults) object IDs per GetObjects call", reason: "LIMIT_EXCEEDED")
                }
                let (at, minGen) = try Convert.readGeneration(req.at, field: "at")
                let cancellation = call.cancellation
                return try b.withStoreSync(req.storeID, account: account) { store in
                    let ids = try req.objectIds.enumerated().map { try Convert.objectID($0.element, field: "object_ids[\($0.offset)]", store: store.id) }
                    return try store.objectsSync(ids, at: at, minimumGeneration: minGen, isCancelled: { cancellation.isCancelled }) { ctx, found in
                        ObjectEncoding.getObjectsResponse(token: ctx.token, ids: ids, found: found, attributes: { ctx.attributes(of: $0) })
                    }
                }
            }
        }

        router.register(p + "Save", kind: .unary) { call in
            // The request's bytes as sent (the transport has checked there is exactly one message):
            // the common request (inserts only, every value valid) is read straight from them; any
            // other is decoded by SwiftProtobuf and converted as before (SaveDecoding), failing as
            // the router fails a request it cannot decode. The result goes out in wire form.
            let bytes = try await call.receive() ?? []
            let fast = SaveDecoding.decode(bytes)
            let req: Ubiquity_V1_SaveRequest? = fast == nil ? try Self.decodeSave(bytes) : nil
            let result = try await ServiceErrors.mapping {
                let account = try b.account(call)
                let n = fast?.inserts.count ?? (req!.inserts.count + req!.updates.count + req!.deletes.count)
                guard n <= b.limits.maxChangesPerSave else {
                    throw ServiceError.exhausted("a save holds at most \(b.limits.maxChangesPerSave) changes (this one has \(n)); split it or use BatchInsert", reason: "LIMIT_EXCEEDED")
                }
                return try await b.withStore(fast?.storeID ?? req!.storeID, account: account) { store in
                    let model = b.modelIfAny(of: store)
                    var s: SaveRequest
                    if let fast, !fast.foreignReference(store: store.id) {
                        s = SaveRequest()
                        s.inserts = fast.inserts
                        s.mergePolicy = fast.mergePolicy
                        s.author = fast.author.isEmpty ? nil : fast.author
                        s.contextName = fast.contextName.isEmpty ? nil : fast.contextName
                        s.clientTransactionID = fast.clientTransactionID.isEmpty ? nil : fast.clientTransactionID
                        s.dryRun = fast.dryRun
                    } else {
                        // (a target in another store: the conversion below reports it as before)
                        s = try Self.saveRequest(try req ?? Self.decodeSave(bytes), store: store.id)
                    }
                    s.modelVersionHash = try b.checkModelVersion(call, store: store)
                    let conflictsInResponse = fast?.conflictsInResponse ?? req!.conflictsInResponse
                    switch try await contexts.save(s, on: store, model: model, conflictsInResponse: conflictsInResponse) {
                    case .saved(let r): return try SaveEncoding.saveResult(r, model: model)
                    case let conflicted: return try Convert.saveResult(conflicted, model: model).serializedBytes()
                    }
                }
            }
            call.finish(message: result)
        }

        router.unary(p + "BatchInsert") { (req: Ubiquity_V1_BatchInsertRequest, call) in
            try await ServiceErrors.mapping {
                let account = try b.account(call)
                guard !req.entity.isEmpty else { throw ServiceError.invalid("entity", "an entity is required", reason: "MISSING_FIELD") }
                guard req.objects.count <= b.limits.maxChangesPerSave else {
                    throw ServiceError.exhausted("a batch insert holds at most \(b.limits.maxChangesPerSave) objects (this one has \(req.objects.count))", reason: "LIMIT_EXCEEDED")
                }
                return try await b.withStore(req.storeID, account: account) { store in
                    var s = SaveRequest()
                    s.inserts = try req.objects.enumerated().map { i, o in
                        InsertOperation(temporaryID: "b\(i)", entity: req.entity, values: try Convert.values(o.values, field: "objects[\(i)].values"))
                    }
                    s.mergePolicy = req.upsert ? .mergeByPropertyObjectTrump : .error
                    s.author = req.author.isEmpty ? nil : req.author
                    s.modelVersionHash = try b.checkModelVersion(call, store: store)
                    let model = b.modelIfAny(of: store)
                    let r = try await contexts.save(s, on: store, model: model,
                                                    issueFields: { $0.hasPrefix("inserts[") ? "objects[" + $0.dropFirst(8) : nil })
                    var res = Ubiquity_V1_BatchResponse()
                    res.token = Data(r.token.bytes)
                    res.count = Int64(req.objects.count)
                    if req.returnObjectIds { res.objectIds = (0..<req.objects.count).compactMap { r.permanentIDs["b\($0)"]?.uri } }
                    return res
                }
            }
        }

        router.unary(p + "BatchUpdate") { (req: Ubiquity_V1_BatchUpdateRequest, call) in
            try await ServiceErrors.mapping {
                let account = try b.account(call)
                guard !req.entity.isEmpty else { throw ServiceError.invalid("entity", "an entity is required", reason: "MISSING_FIELD") }
                guard !req.values.isEmpty else { throw ServiceError.invalid("values", "a batch update needs at least one value to set", reason: "MISSING_FIELD") }
                let values = try Convert.values(req.values, field: "values")
                let vars = try Convert.arguments(req.variables, field: "variables")
                let limits = b.queryLimits()
                return try await b.withStore(req.storeID, account: account) { store in
                    _ = try b.checkModelVersion(call, store: store)
                    // the values' own issues name `values.<attribute>`; per-object issues name their object
                    let r = try await renamingIssueFields({ $0.hasPrefix("values.") ? $0 : nil }) {
                        try await store.batchUpdate(entity: req.entity, predicate: req.predicate.isEmpty ? nil : req.predicate, variables: vars,
                                                    values: values, author: req.author.isEmpty ? nil : req.author, limits: limits)
                    }
                    if r.count > 0 { await contexts.storeDidSave(store.id, token: r.token) }
                    return Self.batchResponse(r)
                }
            }
        }

        router.unary(p + "BatchDelete") { (req: Ubiquity_V1_BatchDeleteRequest, call) in
            try await ServiceErrors.mapping {
                let account = try b.account(call)
                guard !req.entity.isEmpty else { throw ServiceError.invalid("entity", "an entity is required", reason: "MISSING_FIELD") }
                let vars = try Convert.arguments(req.variables, field: "variables")
                let limits = b.queryLimits()
                return try await b.withStore(req.storeID, account: account) { store in
                    _ = try b.checkModelVersion(call, store: store)
                    let ids: [ObjectID]? = req.objectIds.isEmpty ? nil : try req.objectIds.enumerated().map {
                        try Convert.objectID($0.element, field: "object_ids[\($0.offset)]", store: store.id)
                    }
                    let r = try await store.batchDelete(entity: req.entity, predicate: req.predicate.isEmpty ? nil : req.predicate, variables: vars,
                                                        objectIDs: ids, author: req.author.isEmpty ? nil : req.author, limits: limits)
                    if r.count > 0 { await contexts.storeDidSave(store.id, token: r.token) }
                    return Self.batchResponse(r)
                }
            }
        }

        router.unary(p + "CurrentGeneration") { (req: Ubiquity_V1_CurrentGenerationRequest, call) in
            try await ServiceErrors.mapping {
                let account = try b.account(call)
                return try await b.withStore(req.storeID, account: account) { store in
                    var res = Ubiquity_V1_CurrentGenerationResponse()
                    let t = store.currentToken
                    res.token = Data(t.bytes)
                    res.generation = t.generation
                    return res
                }
            }
        }

        router.unary(p + "Deduplicate") { (req: Ubiquity_V1_DeduplicateRequest, call) in
            try await ServiceErrors.mapping {
                let account = try b.account(call)
                guard !req.entity.isEmpty else { throw ServiceError.invalid("entity", "an entity is required", reason: "MISSING_FIELD") }
                guard !req.uniqueKey.isEmpty else { throw ServiceError.invalid("unique_key", "name the attributes that identify duplicates", reason: "MISSING_FIELD") }
                return try await b.withStore(req.storeID, account: account) { store in
                    _ = try b.checkModelVersion(call, store: store)
                    let r = try await store.deduplicate(entity: req.entity, uniqueKey: req.uniqueKey,
                                                        batchSize: req.batchSize > 0 ? Int(req.batchSize) : 500,
                                                        author: req.author.isEmpty ? nil : req.author)
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
        }

        router.unary(p + "Seed") { (req: Ubiquity_V1_SeedRequest, call) in
            try await ServiceErrors.mapping {
                let account = try b.account(call)
                guard !req.seedID.isEmpty, req.seedID.count <= 200 else {
                    throw ServiceError.invalid("seed_id", "a seed needs a seed_id of 1–200 characters", reason: "MISSING_FIELD")
                }
                guard req.inserts.count <= b.limits.maxChangesPerSave else {
                    throw ServiceError.exhausted("a seed holds at most \(b.limits.maxChangesPerSave) objects", reason: "LIMIT_EXCEEDED")
                }
                return try await b.withStore(req.storeID, account: account) { store in
                    var s = SaveRequest()
                    s.inserts = try req.inserts.enumerated().map { try Convert.insert($0.element, field: "inserts[\($0.offset)]", store: store.id) }
                    // Exactly once per seed ID: the seed is a save whose client transaction ID is
                    // derived from it, so repeated or concurrent calls get the first outcome.
                    s.clientTransactionID = "ubiquity.seed:" + req.seedID
                    s.mergePolicy = .mergeByPropertyObjectTrump
                    s.author = req.author.isEmpty ? nil : req.author
                    s.contextName = "seed"
                    s.modelVersionHash = try b.checkModelVersion(call, store: store)
                    let model = b.modelIfAny(of: store)
                    let r = try await contexts.save(s, on: store, model: model)
                    var res = Ubiquity_V1_SeedResponse()
                    res.token = Data(r.token.bytes)
                    res.applied = !r.replayed
                    for (k, v) in r.permanentIDs { res.permanentIds[k] = v.uri }
                    return res
                }
            }
        }

        router.serverStreaming(p + "ExportBaseline") { (req: Ubiquity_V1_ExportBaselineRequest, writer: ResponseWriter<Ubiquity_V1_BaselineChunk>, call) in
            try await ServiceErrors.mapping {
                let account = try b.account(call)
                let (at, minGen) = try Convert.readGeneration(req.at, field: "at")
                let batch = req.batchSize > 0 ? min(Int(req.batchSize), b.limits.maxFetchResults) : Self.defaultBatchSize
                try await b.withStore(req.storeID, account: account) { store in
                    let model = try b.model(of: store)
                    // One pin for the whole export: every entity is read at the same generation.
                    let start: GenerationToken
                    switch at {
                    case .current: start = store.currentToken
                    case .token(let t): start = t
                    }
                    if let minGen, start.generation < minGen {
                        throw StorageError(.generationNotReached, "the store has not reached generation \(minGen) yet")
                    }
                    let pin = try store.pin(start, lease: 600)
                    defer { store.unpin(pin) }
                    let roots = model.definition.entities.filter { $0.parent == nil }.map(\.name).sorted()
                    var total: Int64 = 0
                    var pending: [Ubiquity_V1_ManagedObject] = []
                    func chunk(last: Bool) -> Ubiquity_V1_BaselineChunk {
                        var c = Ubiquity_V1_BaselineChunk()
                        c.token = Data(pin.token.bytes)
                        c.modelVersionHash = model.hash
                        c.objects = pending
                        c.last = last
                        if last { c.total = total }
                        return c
                    }
                    var limits = b.queryLimits()
                    limits.maxFetchResults = Int.max
                    let exportLimits = limits
                    for root in roots {
                        var fr = FetchRequest(entity: root)
                        fr.fetchBatchSize = batch
                        for try await r in store.fetchBatches(fr, at: .token(pin.token), limits: exportLimits) {
                            for o in r.objects {
                                pending.append(Convert.managedObject(o, model: model))
                                total += 1
                                if pending.count == batch { try await writer.write(chunk(last: false)); pending.removeAll(keepingCapacity: true) }
                            }
                        }
                    }
                    try await writer.write(chunk(last: true))
                }
            }
        }

        router.unary(p + "ImportStore") { (req: Ubiquity_V1_ImportStoreRequest, call) in
            try await ServiceErrors.mapping {
                let account = try b.account(call)
                let (at, _) = try Convert.readGeneration(req.sourceAt, field: "source_at")
                let source = try b.record(req.sourceStoreID, account: account, field: "source_store_id")
                guard source.id.uuidString.lowercased() != req.storeID.lowercased() else {
                    throw ServiceError.invalid("source_store_id", "a store cannot import itself", reason: "BAD_STORE_ID")
                }
                let dump = try await b.directory.withStore(source.id, create: true) { try await $0.dump(at: at) }
                guard dump.objects.count <= b.limits.maxChangesPerSave else {
                    throw ServiceError.exhausted("the source has \(dump.objects.count) objects; ImportStore copies at most \(b.limits.maxChangesPerSave) in one transaction", reason: "LIMIT_EXCEEDED")
                }
                return try await b.withStore(req.storeID, account: account) { store in
                    let model = b.modelIfAny(of: store)
                    var s = SaveRequest()
                    s.inserts = dump.objects.map { o in
                        InsertOperation(temporaryID: o.id.uri, entity: o.id.entity, values: o.values,
                                        relationships: o.relationships.mapValues { $0.map { .temporary($0.uri) } })
                    }
                    s.mergePolicy = req.deduplicateByConstraints ? .mergeByPropertyObjectTrump : .error
                    s.author = req.author.isEmpty ? nil : req.author
                    s.contextName = "import"
                    s.modelVersionHash = try b.checkModelVersion(call, store: store)
                    let r = try await contexts.save(s, on: store, model: model, issueFields: { _ in nil })
                    var res = Ubiquity_V1_ImportStoreResponse()
                    res.token = Data(r.token.bytes)
                    res.imported = Int64(dump.objects.count)
                    for (k, v) in r.permanentIDs { res.objectIDMap[k] = v.uri }
                    return res
                }
            }
        }

        router.unary(p + "DestroyStore") { (req: Ubiquity_V1_DestroyStoreRequest, call) in
            try await ServiceErrors.mapping {
                let account = try b.account(call)
                let rec = try b.record(req.storeID, account: account)
                await contexts.storeWillChange(rec.id)
                do { try await b.directory.destroy(rec.id) } catch let e as StorageError where e.reason == .busy {
                    throw ServiceError(code: .unavailable, reason: "STORE_BUSY", message: "the store is in use by running calls; retry shortly")
                }
                try b.catalog.removeStore(id: rec.id)
                return Ubiquity_V1_DestroyStoreResponse()
            }
        }

        router.unary(p + "ReplaceStore") { (req: Ubiquity_V1_ReplaceStoreRequest, call) in
            try await ServiceErrors.mapping {
                let account = try b.account(call)
                let rec = try b.record(req.storeID, account: account)
                let source = try b.record(req.sourceStoreID, account: account, field: "source_store_id")
                guard source.id != rec.id else { throw ServiceError.invalid("source_store_id", "a store cannot replace itself", reason: "BAD_STORE_ID") }
                // Make sure the source file exists and holds everything committed so far.
                _ = try await b.directory.withStore(source.id, create: true) { try await $0.checkpoint(truncate: false) }
                await contexts.storeWillChange(rec.id)
                do { try await b.directory.replace(rec.id, from: b.directory.path(for: source.id)) } catch let e as StorageError where e.reason == .busy {
                    throw ServiceError(code: .unavailable, reason: "STORE_BUSY", message: "the store is in use by running calls; retry shortly")
                }
                return try await b.directory.withStore(rec.id) { store in
                    var res = Ubiquity_V1_ReplaceStoreResponse()
                    res.token = Data(store.currentToken.bytes)
                    return res
                }
            }
        }
    }

    static func info(_ r: Catalog.StoreRecord, _ store: Store) -> Ubiquity_V1_StoreInfo {
        var i = Ubiquity_V1_StoreInfo()
        i.storeID = r.id.uuidString.lowercased()
        i.name = r.name
        i.modelVersionHash = store.modelVersionHash ?? ""
        let t = store.currentToken
        i.token = Data(t.bytes)
        i.generation = t.generation
        return i
    }

    /// A Save request decoded by SwiftProtobuf, failing as the router fails a request it cannot decode.
    static func decodeSave(_ bytes: [UInt8]) throws -> Ubiquity_V1_SaveRequest {
        do {
            return try Ubiquity_V1_SaveRequest(serializedBytes: bytes)
        } catch {
            throw RPCError(.invalidArgument, "could not decode request as \(Ubiquity_V1_SaveRequest.protoMessageName): \(error)")
        }
    }

    /// A Fetch request decoded by SwiftProtobuf, failing as the router fails a request it cannot decode.
    static func decodeFetch(_ bytes: [UInt8]) throws -> Ubiquity_V1_FetchRequest {
        do { return try Ubiquity_V1_FetchRequest(serializedBytes: bytes) } catch {
            throw RPCError(.invalidArgument, "could not decode request as \(Ubiquity_V1_FetchRequest.protoMessageName): \(error)")
        }
    }

    /// The engine's save for a SwiftProtobuf-decoded request (conversion errors name their field).
    static func saveRequest(_ req: Ubiquity_V1_SaveRequest, store: UUID) throws -> SaveRequest {
        var s = SaveRequest()
        s.inserts = try req.inserts.enumerated().map { try Convert.insert($0.element, field: "inserts[\($0.offset)]", store: store) }
        s.updates = try req.updates.enumerated().map { try Convert.update($0.element, field: "updates[\($0.offset)]", store: store) }
        s.deletes = try req.deletes.enumerated().map { try Convert.delete($0.element, field: "deletes[\($0.offset)]", store: store) }
        s.mergePolicy = try Convert.mergePolicy(req.mergePolicy)
        s.author = req.author.isEmpty ? nil : req.author
        s.contextName = req.contextName.isEmpty ? nil : req.contextName
        s.clientTransactionID = req.clientTransactionID.isEmpty ? nil : req.clientTransactionID
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

extension Backend {
    /// Query limits with the service's result-size limit applied.
    func queryLimits() -> QueryLimits {
        var l = limits.query
        l.maxFetchResults = limits.maxFetchResults
        return l
    }
}

/// Save validation issues carry `SaveRequest` paths (`inserts[2].values.age`, SaveTxn.locate),
/// which are the Stores.Save request's own. Calls whose request has another shape rename them
/// (`objects[2]…` for BatchInsert) or drop them (`nil`: the issue then names its object, as for a
/// context's save, whose changes are not in the request).
func renamingIssueFields<T>(_ rename: (String) -> String?, _ body: () async throws -> T) async throws -> T {
    do { return try await body() } catch let e as StorageError { throw e.renamingIssueFields(rename) }
}

extension StorageError {
    /// This error with its validation issues' request paths renamed (see `renamingIssueFields`).
    func renamingIssueFields(_ rename: (String) -> String?) -> StorageError {
        guard case .validationFailed(var issues) = reason else { return self }
        var e = self
        for i in issues.indices { issues[i].field = issues[i].field.flatMap(rename) }
        e.reason = .validationFailed(issues)
        return e
    }
}
