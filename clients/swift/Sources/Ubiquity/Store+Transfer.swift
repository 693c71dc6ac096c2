import Foundation
import GRPCCore

/// Reading a store whole or in batches, copying one into another, and its registered model:
/// `Stores.FetchStream`, `Stores.ExportBaseline`, `Stores.ImportStore`, `Models.GetModel`.
extension Store {
    /// `fetch` with its results in batches of `batchSize` as the server streams them
    /// (`Stores.FetchStream`), every batch read at one generation (each ``FetchResult/token`` is
    /// the same): for result sets too big for one answer. `batchSize` 0: the server's default.
    ///
    /// ```swift
    /// for try await batch in store.fetchStream(FetchRequest("Person"), batchSize: 500) {
    ///     show(batch.objects)
    /// }
    /// ```
    public func fetchStream(
        _ request: FetchRequest, batchSize: Int32 = 0, at token: GenerationToken? = nil
    ) -> ResponseStream<FetchResult> {
        let storeID = id
        var spec = request.proto
        spec.fetchBatchSize = batchSize
        return ResponseStream(client: client) { [client, spec] md, opts, yield in
            try await client.stores.fetchStream(
                .with {
                    $0.storeID = storeID
                    $0.fetch = spec
                    if let token { $0.at.token = token.bytes }
                }, metadata: md, options: opts
            ) { response in
                for try await batch in response.messages { yield(FetchResult(proto: batch)) }
            }
        }
    }

    /// Every object of the store at one generation (`at`, or the current one), in chunks of
    /// `batchSize` objects (0: the server's default, 500), ordered by entity then key
    /// (`Stores.ExportBaseline`). Every chunk has the snapshot's token: subscribe from it
    /// (`changes(from: .token(chunk.token))`) to follow what commits after, with no gap — the
    /// re-baseline of a feed whose history expired.
    public func exportBaseline(at token: GenerationToken? = nil, batchSize: Int32 = 0) -> ResponseStream<BaselineChunk> {
        let storeID = id
        return ResponseStream(client: client) { [client] md, opts, yield in
            try await client.stores.exportBaseline(
                .with {
                    $0.storeID = storeID
                    if let token { $0.at.token = token.bytes }
                    $0.batchSize = batchSize
                }, metadata: md, options: opts
            ) { response in
                for try await chunk in response.messages { yield(BaselineChunk(proto: chunk)) }
            }
        }
    }

    /// Copies `source`'s objects (as of `at`, or now) into this store in one transaction,
    /// relationships among them kept (`Stores.ImportStore`, Core Data's migratePersistentStore).
    /// `deduplicateByConstraints`: objects clashing on a uniqueness constraint merge into the
    /// existing one instead of failing. `source` is left as it is.
    @discardableResult
    public func importStore(
        from source: Store, at token: GenerationToken? = nil, deduplicateByConstraints: Bool = false,
        author: String = ""
    ) async throws -> ImportResult {
        let proto = try await client.unary(modelVersion: expectedModelVersion) { md, opts in
            try await client.stores.importStore(
                .with {
                    $0.storeID = id
                    $0.sourceStoreID = source.id
                    if let token { $0.sourceAt.token = token.bytes }
                    $0.deduplicateByConstraints = deduplicateByConstraints
                    $0.author = author
                }, metadata: md, options: opts)
        }
        return ImportResult(
            token: GenerationToken(ifPresent: proto.token), imported: proto.imported, objectIDMap: proto.objectIDMap)
    }

    /// The store's registered model and its version hash (`Models.GetModel`); nil before the
    /// first `registerModel`. The hash is what writes send as `ubiquity-model-version`.
    public func model() async throws -> RegisteredModel? {
        let proto = try await client.unary { md, opts in
            try await client.models.getModel(.with { $0.storeID = id }, metadata: md, options: opts)
        }
        guard proto.hasModel else { return nil }
        return RegisteredModel(model: proto.model, versionHash: proto.versionHash)
    }
}

/// One chunk of ``Store/exportBaseline(at:batchSize:)``.
public struct BaselineChunk: Sendable {
    /// The snapshot's generation, the same on every chunk: subscribe from it.
    public var token: GenerationToken?
    /// The store's model version hash.
    public var modelVersionHash: String
    /// Objects, ordered by entity then key.
    public var objects: [ManagedObject]
    /// True on the final chunk.
    public var last: Bool
    /// Objects in the whole baseline, on the final chunk (0 before).
    public var total: Int64

    init(proto c: Ubiquity_V1_BaselineChunk) {
        token = GenerationToken(ifPresent: c.token)
        modelVersionHash = c.modelVersionHash
        objects = c.objects.map(ManagedObject.init(proto:))
        last = c.last
        total = c.total
    }
}

/// What ``Store/importStore(from:at:deduplicateByConstraints:author:)`` did.
public struct ImportResult: Sendable {
    /// The generation after the import.
    public var token: GenerationToken?
    /// Objects imported.
    public var imported: Int64
    /// Source object ID → its ID in this store.
    public var objectIDMap: [String: String]
}

/// What ``Store/registerModel(_:dryRun:)`` did, or would do.
public struct ModelMigration: Sendable, Hashable {
    /// The previous model's version hash (empty for the first model).
    public var fromVersionHash: String
    /// The new model's: what ``Store/expectedModelVersion`` takes.
    public var versionHash: String
    /// The migration's steps, in words.
    public var steps: [String]
    /// Nothing was applied (asked for a dry run).
    public var dryRun: Bool
    /// The model was registered already: nothing to do.
    public var unchanged: Bool
    /// The generation after the migration; nil for a dry run.
    public var token: GenerationToken?

    init(proto r: Ubiquity_V1_RegisterModelResponse) {
        fromVersionHash = r.fromVersionHash
        versionHash = r.versionHash
        steps = r.steps
        dryRun = r.dryRun
        unchanged = r.unchanged
        token = GenerationToken(ifPresent: r.token)
    }
}

/// A store's registered model (``Store/model()``).
public struct RegisteredModel: Sendable {
    /// The generated message, as `registerModel` took it.
    public var model: Ubiquity_V1_Model
    /// Its version hash.
    public var versionHash: String
}
