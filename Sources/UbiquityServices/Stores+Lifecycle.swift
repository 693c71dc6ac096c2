import Foundation
import UbiquityGRPC
import UbiquityProtos
import UbiquityStorage

// Stores: opening, listing, replacing, importing and destroying stores.
extension StoresService {
    func openStore(_ req: Ubiquity_V1_OpenStoreRequest, context: ServerContext) async throws -> Ubiquity_V1_OpenStoreResponse {
        let name = req.name
        guard !name.isEmpty, name.count <= 200, !name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw ServiceError.invalid("name", "a store name is 1–200 characters without control characters", reason: .badName)
        }
        try context.account.checkStoreScope(name)
        // a read-only session opens only stores that exist
        let create = !req.mustExist && context.account.scope != .readOnly
        guard let (rec, created) = try backend.catalog.store(account: context.account.id, name: name, create: create) else {
            throw ServiceError.notFound("no store named \"\(name)\" in this account", reason: .storeNotFound)
        }
        return try await backend.directory.withStore(rec.id, create: true) { store in
            var res = Ubiquity_V1_OpenStoreResponse()
            res.store = Self.info(rec, store)
            res.created = created
            return res
        }
    }

    func listStores(_ req: Ubiquity_V1_ListStoresRequest, context: ServerContext) async throws -> Ubiquity_V1_ListStoresResponse {
        var res = Ubiquity_V1_ListStoresResponse()
        res.stores = backend.catalog.stores(account: context.account.id).filter { (try? context.account.checkStoreScope($0.name)) != nil }.map { r in
            var i = Ubiquity_V1_StoreInfo()
            i.storeID = r.id.uuidString.lowercased()
            i.name = r.name
            return i
        }
        return res
    }

    func currentGeneration(_ req: Ubiquity_V1_CurrentGenerationRequest, context: ServerContext) async throws -> Ubiquity_V1_CurrentGenerationResponse {
        try await backend.withStore(req.storeID, account: context.account) { store in
            var res = Ubiquity_V1_CurrentGenerationResponse()
            let t = store.currentToken
            res.token = Data(t.bytes)
            res.generation = t.generation
            return res
        }
    }

    func destroyStore(_ req: Ubiquity_V1_DestroyStoreRequest, context: ServerContext) async throws -> Ubiquity_V1_DestroyStoreResponse {
        let rec = try backend.record(req.storeID, account: context.account)
        await contexts.storeWillChange(rec.id)
        await backend.subscriptions.storeWillChange(rec.id, .storeDestroyed)
        try await Self.unlessBusy { try await backend.directory.destroy(rec.id) }
        try backend.catalog.removeStore(id: rec.id)
        return Ubiquity_V1_DestroyStoreResponse()
    }

    func replaceStore(_ req: Ubiquity_V1_ReplaceStoreRequest, context: ServerContext) async throws -> Ubiquity_V1_ReplaceStoreResponse {
        let rec = try backend.record(req.storeID, account: context.account)
        let source = try backend.record(req.sourceStoreID, account: context.account, field: "source_store_id")
        guard source.id != rec.id else { throw ServiceError.invalid("source_store_id", "a store cannot replace itself", reason: .badStoreID) }
        // Make sure the source file exists and holds everything committed so far.
        _ = try await backend.directory.withStore(source.id, create: true) { try await $0.checkpoint(truncate: false) }
        await contexts.storeWillChange(rec.id)
        await backend.subscriptions.storeWillChange(rec.id, .storeReplaced)
        try await Self.unlessBusy { try await backend.directory.replace(rec.id, from: backend.directory.path(for: source.id)) }
        return try await backend.directory.withStore(rec.id) { store in
            var res = Ubiquity_V1_ReplaceStoreResponse()
            res.token = Data(store.currentToken.bytes)
            return res
        }
    }

    func importStore(_ req: Ubiquity_V1_ImportStoreRequest, context: ServerContext) async throws -> Ubiquity_V1_ImportStoreResponse {
        let (at, _) = try Convert.readGeneration(req.sourceAt, field: "source_at")
        let source = try backend.record(req.sourceStoreID, account: context.account, field: "source_store_id")
        guard source.id.uuidString.lowercased() != req.storeID.lowercased() else {
            throw ServiceError.invalid("source_store_id", "a store cannot import itself", reason: .badStoreID)
        }
        let dump = try await backend.directory.withStore(source.id, create: true) { try await $0.dump(at: at) }
        let limit = backend.limits.maxChangesPerSave
        guard dump.objects.count <= limit else {
            throw ServiceError.exhausted("the source has \(dump.objects.count) objects; ImportStore copies at most \(limit) in one transaction", reason: .limitExceeded)
        }
        return try await backend.withStore(req.storeID, account: context.account) { store in
            let model = backend.modelIfAny(of: store)
            var s = StoreImport.saveRequest(dump, deduplicate: req.deduplicateByConstraints, author: req.author.nonEmpty, contextName: "import")
            s.modelVersionHash = try backend.checkModelVersion(context, store: store)
            let r = try await contexts.save(s, on: store, model: model, issueFields: { _ in nil })
            var res = Ubiquity_V1_ImportStoreResponse()
            res.token = Data(r.token.bytes)
            res.imported = Int64(dump.objects.count)
            for (k, v) in r.permanentIDs { res.objectIDMap[k] = v.uri }
            return res
        }
    }

    /// A destroy or replace refused because calls are using the store: STORE_BUSY (retry).
    private static func unlessBusy(_ body: () async throws -> Void) async throws {
        do { try await body() } catch let e as StorageError where e.reason == .busy {
            throw ServiceError(code: .unavailable, reason: .storeBusy, message: "the store is in use by running calls; retry shortly")
        }
    }
}
