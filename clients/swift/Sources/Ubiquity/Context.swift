import Foundation
import GRPCCore

/// A server-side unit of work (SPEC §4.4, Core Data's managed object context): pending inserts,
/// updates and deletes that `save()` applies together under the context's merge policy, reads at
/// the context's generation that see its pending changes. An actor: its calls are serialized, as
/// the server applies a context's calls in order.
///
/// A pending insert gets a context ID (`…/Entity/t<n>`) usable in later calls until `save()`
/// maps it to a permanent ID (`SaveResult.permanentIDs`). Close it with `close()`; the server also
/// ends idle contexts.
public actor Context {
    /// Which generation a context reads.
    public enum Generation: Sendable, Hashable {
        /// Each read sees the newest generation.
        case unpinned
        /// The first read pins the generation it finds, until save, reset, refresh or a new pin.
        case pinnedAtFirstRead
        /// Reads see the store as it was at this token.
        case pinned(GenerationToken)

        var proto: (Ubiquity_V1_GenerationMode, Data) {
            switch self {
            case .unpinned: return (.unpinned, Data())
            case .pinnedAtFirstRead: return (.pinnedAtFirstRead, Data())
            case .pinned(let token): return (.pinnedAtToken, token.bytes)
            }
        }
    }

    /// The server's view of the context after a call.
    public struct State: Sendable, Hashable {
        public var hasChanges: Bool
        public var insertedCount: Int32
        public var updatedCount: Int32
        public var deletedCount: Int32
        /// The pinned generation, nil until a pinning read (or when unpinned).
        public var token: GenerationToken?
        public var generationMode: Ubiquity_V1_GenerationMode
        public var mergePolicy: MergePolicy

        init(proto s: Ubiquity_V1_ContextState) {
            hasChanges = s.hasChanges_p
            insertedCount = s.insertedCount
            updatedCount = s.updatedCount
            deletedCount = s.deletedCount
            token = GenerationToken(ifPresent: s.token)
            generationMode = s.generationMode
            mergePolicy = MergePolicy(proto: s.mergePolicy)
        }
    }

    public nonisolated let id: String
    public nonisolated let storeID: String
    let client: UbiquityClient
    /// The state as of the last call (`refreshState()` asks the server).
    public private(set) var state: State
    private var labels = 0

    public var hasChanges: Bool { state.hasChanges }

    /// The store's ``Store/expectedModelVersion`` when the context was made: its saves carry it.
    public nonisolated let expectedModelVersion: String?

    init(client: UbiquityClient, proto: Ubiquity_V1_ContextState, modelVersion: String? = nil) {
        self.client = client
        expectedModelVersion = modelVersion
        id = proto.contextID
        storeID = proto.storeID
        state = State(proto: proto)
    }

    static func create(
        client: UbiquityClient, storeID: String, name: String, author: String, mergePolicy: MergePolicy,
        generation: Generation, parentID: String?, modelVersion: String? = nil
    ) async throws -> Context {
        let (mode, token) = generation.proto
        let proto = try await client.unary { md, opts in
            try await client.contexts.createContext(
                .with {
                    $0.storeID = storeID
                    $0.name = name
                    $0.author = author
                    $0.mergePolicy = mergePolicy.proto
                    $0.generationMode = mode
                    $0.token = token
                    $0.parentContextID = parentID ?? ""
                }, metadata: md, options: opts)
        }
        return Context(client: client, proto: proto, modelVersion: modelVersion)
    }

    /// A nested context whose `save()` moves its changes into this one, not the store.
    public func child(name: String = "") async throws -> Context {
        try await Context.create(
            client: client, storeID: storeID, name: name, author: "", mergePolicy: state.mergePolicy,
            generation: .pinnedAtFirstRead, parentID: id, modelVersion: expectedModelVersion)
    }

    // MARK: Changes

    /// Adds a pending insert; returns the object's context ID. `relationships`: name → target
    /// object IDs (permanent, or context IDs of this context's pending inserts).
    @discardableResult
    public func insert(
        _ entity: String, _ values: [String: Value], relationships: [String: [String]] = [:]
    ) async throws -> String {
        labels += 1
        let label = "n\(labels)"
        let contextID = id
        let response = try await call { md, opts in
            try await self.client.contexts.insert(
                .with {
                    $0.contextID = contextID
                    $0.inserts = [
                        Insert(label, entity, values, relationships: relationships.mapValues { $0.map(ObjectRef.object) }).proto
                    ]
                }, metadata: md, options: opts)
        }
        state = State(proto: response.state)
        return response.objectIds[label] ?? label
    }

    /// Adds a pending update of an object (by permanent or context ID). Each relationship named
    /// in `relationships` gets exactly these targets (`[]` empties it).
    public func update(
        _ objectID: String, _ values: [String: Value] = [:], relationships: [String: [String]] = [:]
    ) async throws {
        let contextID = id
        try await set {
            try await self.client.contexts.update(
                .with {
                    $0.contextID = contextID
                    $0.updates = [
                        Update(objectID, values, relationships: relationships.mapValues { $0.map(ObjectRef.object) }).proto
                    ]
                }, metadata: $0, options: $1)
        }
    }

    /// Adds pending deletes.
    public func delete(_ objectIDs: String...) async throws {
        let contextID = id
        try await set {
            try await self.client.contexts.delete(
                .with {
                    $0.contextID = contextID
                    $0.objectIds = objectIDs
                }, metadata: $0, options: $1)
        }
    }

    // MARK: Reads

    /// Fetches at the context's generation, with its pending changes unless `includePending` is false.
    public func fetch(_ request: FetchRequest, includePending: Bool = true) async throws -> FetchResult {
        let contextID = id
        let proto = try await call { md, opts in
            try await self.client.contexts.fetch(
                .with {
                    $0.contextID = contextID
                    $0.fetch = request.proto
                    $0.excludesPendingChanges = !includePending
                }, metadata: md, options: opts)
        }
        return FetchResult(proto: proto)
    }

    /// `fetch(FetchRequest(entity, where: predicate, arguments, ...))`.
    public func fetch(
        _ entity: String, where predicate: String = "", _ arguments: [String: Argument] = [:],
        sort: [SortDescriptor] = [], limit: Int32 = 0, includePending: Bool = true
    ) async throws -> FetchResult {
        try await fetch(
            FetchRequest(entity, where: predicate, arguments, sort: sort, limit: limit),
            includePending: includePending)
    }

    // MARK: State

    /// Asks the server for the context's state.
    @discardableResult
    public func refreshState() async throws -> State {
        let contextID = id
        try await set { try await self.client.contexts.getState(.with { $0.contextID = contextID }, metadata: $0, options: $1) }
        return state
    }

    /// Applies the pending changes in one transaction under the merge policy. Under `.error` a
    /// conflict throws `UbiquityError` (`.conflict`, with the records) and the pending changes
    /// stay. Retried with one client transaction ID while the outcome is unknown.
    @discardableResult
    public func save(clientTransactionID: String? = nil, dryRun: Bool = false) async throws -> SaveResult {
        let contextID = id
        // The server checks the model version per save (the store may migrate while the
        // context lives), so each one carries it.
        let (response, txid) = try await client.save(
            clientTransactionID: clientTransactionID, modelVersion: expectedModelVersion
        ) { [client] txid, md, opts in
            try await client.contexts.save(
                .with {
                    $0.contextID = contextID
                    $0.clientTransactionID = txid
                    $0.dryRun = dryRun
                }, metadata: md, options: opts)
        }
        state = State(proto: response.state)
        return SaveResult(proto: response.result, clientTransactionID: txid, savedToParent: response.savedToParent)
    }

    /// Drops the pending changes; the pin stays.
    public func rollback() async throws {
        let contextID = id
        try await set { try await self.client.contexts.rollback(.with { $0.contextID = contextID }, metadata: $0, options: $1) }
    }

    /// Drops the pending changes and the pin: the next read pins afresh.
    public func reset() async throws {
        let contextID = id
        try await set { try await self.client.contexts.reset(.with { $0.contextID = contextID }, metadata: $0, options: $1) }
    }

    /// Moves the context to the current generation, keeping pending changes when `mergeChanges`.
    public func refresh(mergeChanges: Bool = false) async throws {
        let contextID = id
        try await set {
            try await self.client.contexts.refresh(
                .with {
                    $0.contextID = contextID
                    $0.mergeChanges = mergeChanges
                }, metadata: $0, options: $1)
        }
    }

    /// Sets the query generation (SPEC §4.2).
    public func pin(_ generation: Generation) async throws {
        let contextID = id
        let (mode, token) = generation.proto
        try await set {
            try await self.client.contexts.setQueryGeneration(
                .with {
                    $0.contextID = contextID
                    $0.generationMode = mode
                    $0.token = token
                }, metadata: $0, options: $1)
        }
    }

    /// Ends the context on the server; later calls fail with `.notFound` (CONTEXT_NOT_FOUND).
    public func close() async throws {
        let contextID = id
        _ = try await call { try await self.client.contexts.closeContext(.with { $0.contextID = contextID }, metadata: $0, options: $1) }
    }

    private func call<R: Sendable>(_ body: @Sendable (Metadata, CallOptions) async throws -> R) async throws -> R {
        try await client.unary(body)
    }

    private func set(_ body: @Sendable (Metadata, CallOptions) async throws -> Ubiquity_V1_ContextState) async throws {
        state = State(proto: try await call(body))
    }
}
