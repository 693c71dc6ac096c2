import Foundation
import UbiquityGRPC
import UbiquityProtos
import UbiquityStorage

// Changes.FetchHistory and Changes.DeleteHistory: the history the feed is played from, paged
// and trimmed.

extension ChangesService {
    static let defaultHistoryPage: UInt32 = 100
    static let maxHistoryPage: UInt32 = 1_000

    func fetchHistory(_ req: Ubiquity_V1_FetchHistoryRequest, context: ServerContext) async throws -> Ubiquity_V1_FetchHistoryResponse {
        guard req.pageSize <= Self.maxHistoryPage else {
            throw ServiceError.invalid("page_size", "at most \(Self.maxHistoryPage) transactions a page", reason: .limitExceeded)
        }
        let limit = Int(req.pageSize == 0 ? Self.defaultHistoryPage : req.pageSize)
        return try await backend.withStore(req.storeID, account: context.account) { store in
            let model = backend.modelIfAny(of: store)
            let selection = try ChangeSelection(req.filter, model: model, field: "filter")
            let after = try Self.start(req.hasFrom ? req.from : nil, defaultsToNow: false, store: store, field: "from")
            let current = store.currentToken
            let page: HistoryPage
            do { page = try await store.history(after: GenerationToken(storeID: store.id, epoch: current.epoch, generation: after), limit: limit) } catch {
                throw Self.historyError(error, store: store, after: after)
            }
            var res = Ubiquity_V1_FetchHistoryResponse()
            for tx in page.transactions {
                guard let changes = selection.changes(of: tx) else { continue }
                let values: ChangeEncoding.Values = selection.includeValues ? await ChangeEncoding.readValues(tx, changes: changes, store: store) : [:]
                res.transactions.append(ChangeEncoding.transaction(tx, changes: changes, selection: selection, values: values, model: model))
            }
            res.nextToken = Data(page.nextToken.bytes)
            res.hasMore_p = page.hasMore
            res.currentToken = Data(current.bytes)
            return res
        }
    }

    func deleteHistory(_ req: Ubiquity_V1_DeleteHistoryRequest, context: ServerContext) async throws -> Ubiquity_V1_DeleteHistoryResponse {
        let through = try Convert.token(req.throughToken, field: "through_token")
        return try await backend.withStore(req.storeID, account: context.account) { store in
            guard through.generation <= store.currentToken.generation || through.storeID != store.id else {
                throw ServiceError.invalid("through_token", "the token is at generation \(through.generation) but the store is at \(store.currentToken.generation): pass a token this store gave you",
                                           reason: .badToken)
            }
            try await store.deleteHistory(through: through)
            var res = Ubiquity_V1_DeleteHistoryResponse()
            res.oldestRetainedToken = Data(store.oldestHistoryToken.bytes)
            return res
        }
    }
}
