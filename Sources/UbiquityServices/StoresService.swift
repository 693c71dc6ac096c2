import Foundation
import UbiquityGRPC
import UbiquityProtos
import UbiquityQuery
import UbiquityStorage

/// `ubiquity.v1.Stores`: named stores of an account, read and written without a context. Each
/// RPC is a method (Stores+Lifecycle.swift, Stores+Reads.swift, Stores+Writes.swift); this is
/// their table.
public struct StoresService: Sendable {
    let backend: Backend
    let contexts: ContextRegistry
    public init(backend: Backend, contexts: ContextRegistry) { self.backend = backend; self.contexts = contexts }

    static let defaultBatchSize = 500

    public func register(into router: inout Router) {
        router.register(service: "ubiquity.v1.Stores", backend: backend) { t in
            t.unary("OpenStore", openStore)
            t.unary("ListStores", listStores)
            t.unary("CurrentGeneration", currentGeneration)
            t.unary("DestroyStore", destroyStore)
            t.unary("ReplaceStore", replaceStore)
            t.unary("ImportStore", importStore)
            // Fetch and GetObjects are blocking handlers: the worker thread runs the read itself
            // on a read connection checked out of the store's pool, with no Task and no
            // reader-thread hop. Their common requests are read by hand and their responses
            // written in wire form (docs/protocol.md, "Hand-encoded messages").
            t.sync("Fetch", execution: .blocking, decoder: FetchRequestDecoder.self, queryFields: "fetch.", fetch)
            t.sync("GetObjects", execution: .blocking, decoder: GetObjectsRequestDecoder.self, getObjects)
            t.serverStreaming("FetchStream", queryFields: "fetch.", fetchStream)
            t.serverStreaming("ExportBaseline", exportBaseline)
            t.unary("Save", decoder: SaveRequestDecoder.self, save)
            t.unary("BatchInsert", batchInsert)
            t.unary("BatchUpdate", batchUpdate)
            t.unary("BatchDelete", batchDelete)
            t.unary("Deduplicate", deduplicate)
            t.unary("Seed", seed)
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
