import Foundation

/// The waiting rule of a store transition's acknowledgement step (docs/lifecycle.md
/// "Acknowledgements") as a value type (STYLE.md: `mutating func event(...) -> Action`),
/// unit-tested without a server (`AcknowledgementBookTests`); `AcknowledgementWait` runs it.
///
///     waiting ──every store's WILL_CHANGE written, and every subscriber expected has
///     │          acknowledged it or gone──▶ proceed(.acknowledged)
///     └──────── the deadline passed ─────▶ proceed(.deadlinePassed(unacknowledged))
///     proceed: final; later events change nothing (a late acknowledgement is a no-op)
///
/// Who is expected: the opted-in subscriptions of the transition's stores (that the event
/// concerns) open when the book opens, before any WILL_CHANGE is written — each started at or
/// before the store's generation then, so each receives the event unless it ends first — and
/// any that joins later by receiving that very event (one that resumed from an older token).
/// An acknowledgement names a session, a store and the event's generation; it covers every
/// subscription of that session on that store. Acknowledgements may arrive before the book
/// learns the event's generation (the feed delivers the event before its append returns): they
/// are kept and counted once the generation is known.
struct AcknowledgementBook: Equatable {
    /// One subscription the transition may wait for.
    struct Subscriber: Hashable {
        let id: UInt64
        /// The session that acknowledges for it ("" with authentication off).
        let session: String
        let store: UUID
    }

    struct Acknowledgement: Hashable {
        let session: String
        let store: UUID
        let generation: Int64
    }

    enum Outcome: Equatable {
        /// Everyone expected acknowledged or went away.
        case acknowledged
        /// The deadline passed first; these subscriptions (ids, sorted) never acknowledged.
        case deadlinePassed(unacknowledged: [UInt64])
    }

    enum Action: Equatable {
        case wait
        case proceed(Outcome)
    }

    /// The transition's stores and, once written, the generation of each one's WILL_CHANGE.
    private(set) var events: [UUID: Int64?]
    /// Each store's generation when the book opened: a WILL_CHANGE of this transition is after it.
    private let floors: [UUID: Int64]
    private(set) var expected: [UInt64: Subscriber]
    private var acknowledgements: Set<Acknowledgement> = []
    private var gone: Set<UInt64> = []
    private(set) var outcome: Outcome?

    init(stores: [UUID: Int64], expected: [Subscriber]) {
        events = stores.mapValues { _ in nil }
        floors = stores
        self.expected = Dictionary(expected.filter { stores[$0.store] != nil }.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
    }

    /// The store's WILL_CHANGE was written at `generation`.
    mutating func announced(store: UUID, generation: Int64) -> Action {
        if outcome == nil, events[store] != nil { events[store] = generation }
        return action
    }

    /// A subscription sent the WILL_CHANGE at `generation` of its store: if it is this
    /// transition's event, the transition waits for it too.
    mutating func received(_ s: Subscriber, generation: Int64) -> Action {
        if outcome == nil, expected[s.id] == nil, isThisTransitionsEvent(store: s.store, generation: generation) {
            expected[s.id] = s
        }
        return action
    }

    /// A session acknowledged the event at `generation` of `store`. `awaited`: the book was still
    /// waiting for one of that session's subscriptions there.
    mutating func acknowledged(_ a: Acknowledgement) -> (awaited: Bool, action: Action) {
        guard outcome == nil, isThisTransitionsEvent(store: a.store, generation: a.generation) else { return (false, action) }
        let awaited = expected.values.contains { $0.session == a.session && $0.store == a.store && !settled($0) }
        acknowledgements.insert(a)
        return (awaited, action)
    }

    /// The subscription ended: it holds nothing the transition waits for any more.
    mutating func ended(_ id: UInt64) -> Action {
        if outcome == nil { gone.insert(id) }
        return action
    }

    /// The deadline passed: the transition goes on whoever has not acknowledged.
    mutating func deadlinePassed() -> Action {
        if outcome == nil {
            outcome = .deadlinePassed(unacknowledged: expected.values.filter { !settled($0) }.map(\.id).sorted())
        }
        return action
    }

    /// What the transition does now. It goes on only once every store's event is written (before
    /// that, who receives it is not settled), then when nobody it waits for is left.
    var action: Action {
        mutating get {
            if let outcome { return .proceed(outcome) }
            guard !events.values.contains(where: { $0 == nil }), expected.values.allSatisfy(settled) else { return .wait }
            outcome = .acknowledged
            return .proceed(.acknowledged)
        }
    }

    private func settled(_ s: Subscriber) -> Bool {
        if gone.contains(s.id) { return true }
        guard let generation = events[s.store] ?? nil else { return false }
        return acknowledgements.contains(Acknowledgement(session: s.session, store: s.store, generation: generation))
    }

    /// Whether `generation` of `store` is (or, before the book learns it, can be) this
    /// transition's WILL_CHANGE: an older event replayed from history is not.
    private func isThisTransitionsEvent(store: UUID, generation: Int64) -> Bool {
        guard let event = events[store] else { return false }
        if let known = event { return known == generation }
        return generation > floors[store] ?? .max
    }
}
