import Foundation
import UbiquityGRPC
import UbiquityProtos
import UbiquityQuery
import UbiquityStorage

// Stores: reads without a context.
extension StoresService {
    /// Blocking: runs the read on this worker thread and writes the response while it reads
    /// (`FetchResponseWriter`).
    func fetch(_ d: DecodedFetch, context: ServerContext) throws -> Encoded<Ubiquity_V1_FetchResults> {
        let (fr, at, minGen) = (d.request, d.at, d.minimumGeneration)
        let limits = backend.queryLimits()
        return try backend.withStoreSync(d.storeID, account: context.account) { store in
            // The model is resolved only when needed (two locks saved per call): streamed objects
            // are typed by the read's model. A store without a model still answers NO_MODEL,
            // whatever else is wrong with the request: its read always fails, and the failure is
            // checked for that first.
            let out = FetchResponseWriter()
            let r: FetchResult
            do {
                r = try store.fetchSync(fr, at: at, minimumGeneration: minGen, limits: limits, isCancelled: { context.isCancelled }, sink: out)
            } catch {
                _ = try backend.model(of: store)
                throw error
            }
            return Encoded(bytes: try out.finish(r, type: fr.resultType, model: { try backend.model(of: store) }))
        }
    }

    /// Blocking. A read that is one SELECT runs without BEGIN … COMMIT (`Store.objectsSync`).
    func getObjects(_ req: Ubiquity_V1_GetObjectsRequest, context: ServerContext) throws -> Encoded<Ubiquity_V1_GetObjectsResponse> {
        guard req.objectIds.count <= backend.limits.maxFetchResults else {
            throw ServiceError.exhausted("at most \(backend.limits.maxFetchResults) object IDs per GetObjects call", reason: .limitExceeded)
        }
        let (at, minGen) = try Convert.readGeneration(req.at, field: "at")
        return try backend.withStoreSync(req.storeID, account: context.account) { store in
            let ids = try req.objectIds.enumerated().map { try Convert.objectID($0.element, field: "object_ids[\($0.offset)]", store: store.id) }
            return Encoded(bytes: try store.objectsSync(ids, at: at, minimumGeneration: minGen, isCancelled: { context.isCancelled }) { ctx, found in
                ObjectEncoding.getObjectsResponse(token: ctx.token, ids: ids, found: found, attributes: { ctx.attributes(of: $0) })
            })
        }
    }

    func fetchStream(_ req: Ubiquity_V1_FetchRequest, writer: ResponseWriter<Ubiquity_V1_FetchResults>, context: ServerContext) async throws {
        var request = try Convert.fetchRequest(req.fetch, field: "fetch")
        if request.fetchBatchSize == 0 { request.fetchBatchSize = Self.defaultBatchSize }
        request.fetchBatchSize = min(request.fetchBatchSize, backend.limits.maxFetchResults)
        let (at, minGen) = try Convert.readGeneration(req.at, field: "at")
        var streamLimits = backend.queryLimits()
        streamLimits.maxFetchResults = Int.max
        let (fr, limits) = (request, streamLimits)
        try await backend.withStore(req.storeID, account: context.account) { store in
            let model = try backend.model(of: store)
            if let minGen, store.currentToken.generation < minGen {
                throw StorageError(.generationNotReached, "the store has not reached generation \(minGen) yet")
            }
            // Wait for the reader before reading the next batch, so an unread call holds its
            // queued output and nothing else (docs/protocol.md, flow control).
            var batches = store.fetchBatches(fr, at: at, limits: limits).makeAsyncIterator()
            while true {
                try await writer.waitUntilWritable()
                guard let batch = try await batches.next() else { break }
                try await writer.write(Convert.fetchResults(batch, type: fr.resultType, model: model))
            }
        }
    }

    func exportBaseline(_ req: Ubiquity_V1_ExportBaselineRequest, writer: ResponseWriter<Ubiquity_V1_BaselineChunk>,
                        context: ServerContext) async throws {
        let (at, minGen) = try Convert.readGeneration(req.at, field: "at")
        let batch = req.batchSize > 0 ? min(Int(req.batchSize), backend.limits.maxFetchResults) : Self.defaultBatchSize
        var limits = backend.queryLimits()
        limits.maxFetchResults = Int.max
        let exportLimits = limits
        try await backend.withStore(req.storeID, account: context.account) { store in
            let model = try backend.model(of: store)
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
