import Foundation
import UbiquityProtos
import UbiquityStorage

/// How a local session's subscriber learns it works in local storage (SPEC §4.6
/// `usingLocalStorage: true`): the first response of each of its `Changes.Subscribe` streams is a
/// `StoreEvent` with `using_local_storage` set and no transition. It is a property of the
/// session, not of the store's history, so it is sent per subscription and never stored; its
/// resume token is the subscription's starting point, so resuming from it skips nothing.
enum LocalStorageEvent {
    static func response(start: GenerationToken) -> [UInt8] {
        var res = Ubiquity_V1_SubscribeResponse()
        res.resumeToken = Data(start.bytes)
        res.resumeGeneration = start.generation
        var e = Ubiquity_V1_StoreEvent()
        e.phase = .didChange
        e.usingLocalStorage = true
        res.storeEvent = e
        return (try? res.serializedBytes()) ?? []
    }
}
