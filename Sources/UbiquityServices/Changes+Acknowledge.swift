import Foundation
import UbiquityGRPC
import UbiquityProtos
import UbiquityStorage

// Changes.AcknowledgeStoreEvent: a subscriber that opted in (`acknowledges_store_events`)
// confirms it flushed its pending work after a WILL_CHANGE (docs/lifecycle.md
// "Acknowledgements"). The transition waiting for it is told through `StoreEventAcks`.

extension ChangesService {
    func acknowledgeStoreEvent(_ req: Ubiquity_V1_AcknowledgeStoreEventRequest, context: ServerContext) async throws -> Ubiquity_V1_AcknowledgeStoreEventResponse {
        guard !req.eventToken.isEmpty else {
            throw ServiceError.invalid("event_token", "required: the acknowledgement.event_token of the WILL_CHANGE you received", reason: .missingField)
        }
        let token = try Convert.token(req.eventToken, field: "event_token")
        let account = context.account
        // the token names the store: another account's is NOT_FOUND like an unknown store
        let event = try await backend.withStore(token.storeID.uuidString, account: account, field: "event_token") { store in
            try await Self.willChange(at: token, in: store, device: account.device)
        }
        var res = Ubiquity_V1_AcknowledgeStoreEventResponse()
        res.awaited = subscriptions.acknowledgements.acknowledged(.init(session: account.session ?? "", store: token.storeID, generation: event))
        return res
    }

    /// The generation of the WILL_CHANGE at `token` that concerns `device`, read from the store's
    /// history; NOT_FOUND STORE_EVENT_NOT_FOUND when there is none (a transaction, another
    /// device's event, a DID_CHANGE, trimmed history, a replaced store's token).
    static func willChange(at token: GenerationToken, in store: Store, device: String?) async throws -> Int64 {
        let current = store.currentToken
        let missing = ServiceError.notFound("event_token: the store has no StoresWillChange for this device at generation \(token.generation)"
                                            + " (pass the acknowledgement.event_token of a WILL_CHANGE you received)", reason: .storeEventNotFound)
        guard token.epoch == current.epoch, token.generation >= 1 else { throw missing }
        guard token.generation <= current.generation else {
            throw ServiceError.invalid("event_token", "the token is at generation \(token.generation) but the store is at \(current.generation): pass a token this store gave you", reason: .badToken)
        }
        let before = GenerationToken(storeID: current.storeID, epoch: current.epoch, generation: token.generation - 1)
        let page: HistoryPage
        do { page = try await store.history(after: before, limit: 1) } catch let e as StorageError where e.reason == .historyExpired { throw missing }
        guard let tx = page.transactions.first, tx.token.generation == token.generation,
              let event = tx.event, event.phase == .willChange, event.concerns(device: device) else { throw missing }
        return token.generation
    }
}
