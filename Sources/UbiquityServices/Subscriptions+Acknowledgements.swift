import Foundation

// Which subscriptions a transition's acknowledgement step waits for (docs/lifecycle.md
// "Acknowledgements"; the rule is `AcknowledgementBook`).

extension Subscriptions {
    /// Opens the acknowledgement step of a transition about to write WILL_CHANGE on `stores` for
    /// `device`'s subscribers (nil: every device's). Opened before the first event is written, so
    /// every subscription it expects started before the event and receives it, and an
    /// acknowledgement that comes back before the append returns still counts.
    func awaitingAcknowledgement(of stores: [UUID], device: String?) -> AcknowledgementWait {
        let subs = all(on: Set(stores))
        // a store nobody follows has no floor: only subscriptions that start there later could
        // receive its event, and the book learns its generation once it is written
        var floors = Dictionary(stores.map { ($0, Int64.max) }, uniquingKeysWith: { a, _ in a })
        for sub in subs { floors[sub.storeID] = min(floors[sub.storeID] ?? .max, sub.feed.publishedGeneration) }
        let expected = subs.filter { $0.acknowledgesStoreEvents && $0.ending == nil && (device == nil || $0.device == device) }
        return acknowledgements.open(stores: floors, expected: expected.map(\.acknowledger))
    }
}

extension Subscription {
    /// How the acknowledgement step knows it: acknowledged by its session ("" with authentication
    /// off) on its store.
    var acknowledger: AcknowledgementBook.Subscriber { .init(id: id, session: session ?? "", store: storeID) }
}
