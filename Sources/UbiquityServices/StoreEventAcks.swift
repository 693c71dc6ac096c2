import Foundation
import UbiquityLock

// The acknowledgement step of store transitions (docs/lifecycle.md "Acknowledgements"): the
// transitions waiting for subscribers to confirm a WILL_CHANGE, and what reaches them from the
// subscriptions (an event sent, a subscription ended) and from `Changes.AcknowledgeStoreEvent`.
// The rule is `AcknowledgementBook`; this runs one per transition and waits.

/// One transition's acknowledgement step: its book, and the transition waiting for it to say go.
final class AcknowledgementWait: Sendable {
    let id: UInt64
    private let registry: StoreEventAcks
    private let book: Lock<AcknowledgementBook>
    /// Opened when the book first says proceed.
    private let gate = DeadlineGate()

    fileprivate init(id: UInt64, book: AcknowledgementBook, registry: StoreEventAcks) {
        self.id = id
        self.registry = registry
        var book = book
        let action = book.action
        self.book = Lock(book)
        if case .proceed = action { gate.open() }
    }

    /// Applies an event to the book; once it says proceed, the waiting transition resumes.
    @discardableResult
    fileprivate func apply<R>(_ event: (inout AcknowledgementBook) -> (R, AcknowledgementBook.Action)) -> R {
        let (result, action) = book.withLock { event(&$0) }
        if case .proceed = action { gate.open() }
        return result
    }

    /// The store's WILL_CHANGE was written at `generation`.
    func announced(_ store: UUID, generation: Int64) {
        apply { ((), $0.announced(store: store, generation: generation)) }
    }

    /// Returns once everyone expected acknowledged or went away, or after `seconds`: the outcome.
    @discardableResult
    func wait(seconds: Double) async -> AcknowledgementBook.Outcome {
        await gate.wait(seconds: seconds, late: { [weak self] in self?.apply { ((), $0.deadlinePassed()) } })
        return book.withLock { $0.outcome } ?? .acknowledged
    }

    /// The transition is done with it (went on, or failed before waiting).
    func close() { registry.close(id) }

    fileprivate func has(store: UUID) -> Bool { book.withLock { $0.events[store] != nil } }
}

/// Every transition's open acknowledgement step (one registry per server, in `Subscriptions`).
final class StoreEventAcks: Sendable {
    private struct State {
        var next: UInt64 = 1
        var open: [UInt64: AcknowledgementWait] = [:]
    }
    private let state = Lock(State())

    /// Opens a transition's step before it writes its WILL_CHANGEs: `stores` with each one's
    /// generation now (`Int64.max` when unknown), `expected` the opted-in subscriptions concerned.
    func open(stores: [UUID: Int64], expected: [AcknowledgementBook.Subscriber]) -> AcknowledgementWait {
        state.withLock { s in
            let wait = AcknowledgementWait(id: s.next, book: AcknowledgementBook(stores: stores, expected: expected), registry: self)
            s.open[s.next] = wait
            s.next += 1
            return wait
        }
    }

    fileprivate func close(_ id: UInt64) { _ = state.withLock { $0.open.removeValue(forKey: id) } }

    private func waits(store: UUID? = nil) -> [AcknowledgementWait] {
        let all = state.withLock { Array($0.open.values) }
        guard let store else { return all }
        return all.filter { $0.has(store: store) }
    }

    /// An opted-in subscription is about to send the WILL_CHANGE at `generation` of its store.
    func received(_ s: AcknowledgementBook.Subscriber, generation: Int64) {
        for w in waits(store: s.store) { w.apply { ((), $0.received(s, generation: generation)) } }
    }

    /// A session acknowledged an event; whether a transition was waiting for it.
    func acknowledged(_ a: AcknowledgementBook.Acknowledgement) -> Bool {
        var awaited = false
        for w in waits(store: a.store) {
            if w.apply({ $0.acknowledged(a) }) { awaited = true }
        }
        return awaited
    }

    /// A subscription ended (it counts as acknowledged).
    func ended(_ id: UInt64) {
        for w in waits() { w.apply { ((), $0.ended(id)) } }
    }
}
