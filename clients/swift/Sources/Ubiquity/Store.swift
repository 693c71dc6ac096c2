import Foundation
import GRPCCore

/// One store of the account, and the calls that read and write it. A value: copy it freely; every
/// copy uses the client's one connection.
public struct Store: Sendable {
    public let client: UbiquityClient
    public let info: StoreInfo
    /// Whether `openStore` created it.
    public let created: Bool
    /// The model version hash this code was built against (``ModelMigration/versionHash``,
    /// ``RegisteredModel/versionHash``), sent as `ubiquity-model-version` with every write of this
    /// value — saves, batches, seeds, deduplication, imports, and the saves of contexts it
    /// creates. A write then
    /// fails `.failedPrecondition` (reason MODEL_VERSION_MISMATCH, nothing applied) once another
    /// client has migrated the store to another version, instead of writing data shaped for the
    /// old one. Nil (the default): writes are not checked. See ``expecting(modelVersion:)``.
    public var expectedModelVersion: String? = nil

    public var id: String { info.id }
    public var name: String { info.name }

    /// Registers (or migrates to) a model version; the generated `Ubiquity_V1_Model` describes it.
    /// A change that is not a lightweight migration is `.failedPrecondition`
    /// (MIGRATION_NOT_INFERABLE, the message says why) and changes nothing.
    ///
    /// `dryRun`: report the migration — its steps and the new version hash — without applying
    /// it (the store keeps its model; ``ModelMigration/token`` is nil).
    @discardableResult
    public func registerModel(_ model: Ubiquity_V1_Model, dryRun: Bool = false) async throws -> ModelMigration {
        ModelMigration(
            proto: try await client.unary { md, opts in
                try await client.models.registerModel(
                    .with {
                        $0.storeID = id
                        $0.model = model
                        $0.dryRun = dryRun
                    }, metadata: md, options: opts)
            })
    }

    /// This store with writes checked against model version `hash` (see
    /// ``expectedModelVersion``): `let store = try await store.expecting(modelVersion:
    /// store.registerModel(myModel).versionHash)`.
    public func expecting(modelVersion hash: String?) -> Store {
        var copy = self
        copy.expectedModelVersion = hash
        return copy
    }

    /// Fetches at `token` (the store as it was after that save), or at the current generation.
    ///
    /// `atLeast`: the read-your-writes fence (`ReadGeneration.minimum_generation`). The read
    /// fails `.unavailable` with reason GENERATION_NOT_REACHED, changing nothing, unless the store
    /// has reached that generation — pass a ``SaveResult/generation`` you were told about (by
    /// another device, a queue, a server behind a proxy) to be sure the read includes it; retry
    /// shortly on that error.
    public func fetch(
        _ request: FetchRequest, at token: GenerationToken? = nil, atLeast minimumGeneration: Int64? = nil
    ) async throws -> FetchResult {
        let proto = try await client.unary { md, opts in
            try await client.stores.fetch(
                .with {
                    $0.storeID = id
                    $0.fetch = request.proto
                    $0.at = readGeneration(token, atLeast: minimumGeneration)
                }, metadata: md, options: opts)
        }
        return FetchResult(proto: proto)
    }

    /// `fetch(FetchRequest(entity, where: predicate, arguments, ...), at:)`.
    public func fetch(
        _ entity: String, where predicate: String = "", _ arguments: [String: Argument] = [:],
        sort: [SortDescriptor] = [], limit: Int32 = 0, offset: Int32 = 0,
        resultType: ResultType = .objects, properties: [String] = [], at token: GenerationToken? = nil
    ) async throws -> FetchResult {
        try await fetch(
            FetchRequest(
                entity, where: predicate, arguments, sort: sort, limit: limit, offset: offset,
                resultType: resultType, properties: properties), at: token)
    }

    /// Objects by ID at `token` or current; IDs with no object there are left out. `atLeast`:
    /// the read-your-writes fence, as for ``fetch(_:at:atLeast:)``.
    public func get(
        _ objectIDs: [String], at token: GenerationToken? = nil, atLeast minimumGeneration: Int64? = nil
    ) async throws -> [String: ManagedObject] {
        let proto = try await client.unary { md, opts in
            try await client.stores.getObjects(
                .with {
                    $0.storeID = id
                    $0.objectIds = objectIDs
                    $0.at = readGeneration(token, atLeast: minimumGeneration)
                }, metadata: md, options: opts)
        }
        return Dictionary(proto.objects.map { ($0.objectID, ManagedObject(proto: $0)) }, uniquingKeysWith: { a, _ in a })
    }

    private func readGeneration(_ token: GenerationToken?, atLeast minimumGeneration: Int64?) -> Ubiquity_V1_ReadGeneration {
        .with {
            if let token { $0.token = token.bytes }
            if let minimumGeneration { $0.minimumGeneration = minimumGeneration }
        }
    }

    /// The token of the store's newest generation.
    public func currentToken() async throws -> GenerationToken {
        let proto = try await client.unary { md, opts in
            try await client.stores.currentGeneration(.with { $0.storeID = id }, metadata: md, options: opts)
        }
        return GenerationToken(proto.token)
    }

    /// One atomic save without a context. Retried with one client transaction ID (yours, or a
    /// fresh UUID) while its outcome is unknown; `SaveResult.replayed` says a retry found the
    /// first attempt applied. Under `.error`, a conflict throws `UbiquityError` of kind
    /// `.conflict` / `.constraintConflict` and nothing is applied.
    public func save(
        inserts: [Insert] = [], updates: [Update] = [], deletes: [String] = [],
        mergePolicy: MergePolicy = .error, author: String = "", clientTransactionID: String? = nil
    ) async throws -> SaveResult {
        let storeID = id
        let (proto, txid) = try await client.save(clientTransactionID: clientTransactionID, modelVersion: expectedModelVersion) {
            [client] txid, md, opts in
            try await client.stores.save(
                .with {
                    $0.storeID = storeID
                    $0.inserts = inserts.map(\.proto)
                    $0.updates = updates.map(\.proto)
                    $0.deletes = deletes.map { id in .with { $0.objectID = id } }
                    $0.mergePolicy = mergePolicy.proto
                    $0.author = author
                    $0.clientTransactionID = txid
                }, metadata: md, options: opts)
        }
        return SaveResult(proto: proto, clientTransactionID: txid)
    }

    /// Trims the change history through `token` (later subscribers from older tokens get
    /// HISTORY_EXPIRED).
    public func deleteHistory(through token: GenerationToken) async throws {
        _ = try await client.unary { md, opts in
            try await client.changes.deleteHistory(
                .with {
                    $0.storeID = id
                    $0.throughToken = token.bytes
                }, metadata: md, options: opts)
        }
    }

    /// A new server-side context on this store (see ``Context``).
    public func context(
        name: String = "", author: String = "", mergePolicy: MergePolicy = .error,
        generation: Context.Generation = .pinnedAtFirstRead
    ) async throws -> Context {
        try await Context.create(
            client: client, storeID: id, name: name, author: author, mergePolicy: mergePolicy,
            generation: generation, parentID: nil, modelVersion: expectedModelVersion)
    }

    /// The store's change feed from `start` (see ``ChangeFeed``).
    ///
    /// `includeValues`: each insert's and update's values and relationships after the
    /// transaction (``Change/values``, ``Change/relationships``). `includeTombstones`: each
    /// delete's kept-on-delete attribute values (``Change/tombstone``). `coalesceWindow` (at most
    /// 10 s): the server may hold new transactions up to this long to send them in fewer, larger
    /// events — a delay traded for throughput.
    ///
    /// `acknowledgesStoreEvents`: store transitions (a sign-out, an archive, …) wait for this
    /// feed's consumer. Each `.willChange` it delivers carries a ``StoreEvent/acknowledgement``;
    /// flush what you hold outside contexts, then ``UbiquityClient/acknowledge(_:)`` it before
    /// its deadline. Off, the server never waits for the feed (docs/lifecycle.md
    /// "Acknowledgements").
    public func changes(
        from start: ChangeFeed.Start = .now, entities: [String] = [], excludeAuthors: [String] = [],
        includeValues: Bool = false, includeTombstones: Bool = false, coalesceWindow: Duration = .zero,
        reconnectFor: Duration = .seconds(60), acknowledgesStoreEvents: Bool = false,
        onHistoryExpired: ChangeFeed.HistoryExpiredHook? = nil
    ) -> ChangeFeed {
        var filter = Ubiquity_V1_ChangeFilter()
        filter.entities = entities
        filter.excludeAuthors = excludeAuthors
        filter.includeValues = includeValues
        filter.includeTombstones = includeTombstones
        let window = coalesceWindow.components
        return ChangeFeed(
            client: client, storeID: id, start: start, filter: filter, reconnectFor: reconnectFor,
            onHistoryExpired: onHistoryExpired, acknowledgesStoreEvents: acknowledgesStoreEvents,
            coalesceWindowMilliseconds: UInt32(clamping: window.seconds * 1000 + window.attoseconds / 1_000_000_000_000_000))
    }
}
