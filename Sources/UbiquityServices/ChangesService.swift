import Foundation
import UbiquityGRPC
import UbiquityProtos
import UbiquityStorage

/// `ubiquity.v1.Changes`: the change feed (docs/changes.md). Each RPC is a method
/// (Changes+Subscribe.swift, Changes+History.swift); this is their table and what they share:
/// where a read starts, and the feed's errors with their details.
public struct ChangesService: Sendable {
    let backend: Backend
    var subscriptions: Subscriptions { backend.subscriptions }

    public init(backend: Backend) { self.backend = backend }

    public func register(into router: inout Router) {
        let subscribe = self.subscribe
        router.register(service: "ubiquity.v1.Changes", backend: backend) { t in
            t.serverStreamingEncoded("Subscribe", subscribe)
            t.unary("FetchHistory", fetchHistory)
            t.unary("DeleteHistory", deleteHistory)
            t.unary("FetchDeletions", fetchDeletions)
            t.unary("AcknowledgeStoreEvent", acknowledgeStoreEvent)
        }
    }

    /// Where a read starts, as the generation it reads after: a token (checked: this store, this
    /// epoch, not in the future, not older than retained history), `now` or `oldest`.
    static func start(_ from: Ubiquity_V1_StartPoint?, defaultsToNow: Bool, store: Store, field: String) throws -> Int64 {
        switch from?.start {
        case .token(let bytes)?:
            let t = try Convert.token(bytes, field: field + ".token")
            let current = store.currentToken
            guard t.storeID == store.id else { throw StorageError(.tokenOfAnotherStore(t.storeID), "\(field).token: the token belongs to another store") }
            guard t.epoch == current.epoch else { throw StorageError(.storeReplaced, "\(field).token: the store was replaced since this token was issued: read a baseline at current") }
            guard t.generation <= current.generation else {
                throw ServiceError.invalid(field + ".token", "the token is at generation \(t.generation) but the store is at \(current.generation): pass a token this store gave you", reason: .badToken)
            }
            let oldest = store.oldestHistoryToken.generation
            if t.generation < oldest { throw historyExpired(store, after: t.generation) }
            return t.generation
        case .oldest(true)?:
            return store.oldestHistoryToken.generation
        case .now(true)?:
            return store.currentToken.generation
        case .oldest(false)?, .now(false)?:
            throw ServiceError.invalid(field, "set token, now = true or oldest = true", reason: .invalidArgument)
        case nil:
            return defaultsToNow ? store.currentToken.generation : store.oldestHistoryToken.generation
        }
    }

    /// HISTORY_EXPIRED with `HistoryExpiredDetails`: the oldest readable position and the current
    /// token (read a baseline at it, then subscribe from it).
    static func historyExpired(_ store: Store, after generation: Int64) -> ServiceError {
        let oldest = store.oldestHistoryToken, current = store.currentToken
        var d = Ubiquity_V1_HistoryExpiredDetails()
        d.oldestRetainedToken = Data(oldest.bytes)
        d.currentToken = Data(current.bytes)
        d.deletionsAvailable = store.deletionsCover(GenerationToken(storeID: store.id, epoch: current.epoch, generation: generation))
        let deletions = d.deletionsAvailable ? " (deletions_available: FetchDeletions after your token lists what to remove from your cache)" : ""
        var e = ServiceError.precondition(
            "history after generation \(generation) was trimmed (history is retained after generation \(oldest.generation)): read a baseline at current_token in the HistoryExpiredDetails\(deletions), then subscribe from it",
            reason: .historyExpired)
        e.details = [d]
        return e
    }

    /// A storage error of a history read: HISTORY_EXPIRED gets its details.
    static func historyError(_ error: Error, store: Store, after generation: Int64) -> Error {
        if let e = error as? StorageError, e.reason == .historyExpired { return historyExpired(store, after: generation) }
        return error
    }
}
