import Foundation

/// A store transition as the change feed announces it (`StoreEvent`, SPEC §4.6,
/// docs/lifecycle.md): Core Data's StoresWillChange / StoresDidChange with a transition type. It
/// arrives in ``FeedEvent/storeEvent`` in order with the transactions around it, with a resume
/// token of its own, so a feed resumed from an older token sees it again.
///
/// What a client does: on `.willChange` save what it holds (its contexts' saves still land, and
/// appear on the feed before `.didChange`); on `.didChange` drop its contexts, make new ones and
/// re-read. A sign-out's feed then ends with SESSION_REVOKED, which a client with an API key
/// turns into a new sign-in and a resume: the events are what tells the two apart from an
/// ordinary session end.
///
/// A feed opened with `acknowledgesStoreEvents: true` gets `.willChange` with an
/// ``acknowledgement``: the server holds the transition until the feed's consumer calls
/// ``UbiquityClient/acknowledge(_:)`` (after flushing what it keeps outside contexts) or the
/// acknowledgement's deadline passes (docs/lifecycle.md "Acknowledgements").
public struct StoreEvent: Sendable, Hashable {
    /// Before or after the transition.
    public enum Phase: Sendable, Hashable {
        /// About to happen: save now.
        case willChange
        /// Happened (also the phase of a local session's first event, whose transition is `.none`).
        case didChange
        /// A phase this client does not know (a newer server).
        case unknown(Int)
    }

    /// Why the store changes (NSPersistentStoreUbiquitousTransitionType).
    public enum Transition: Sendable, Hashable {
        /// No transition: the state as a subscription starts (a local session's first event says
        /// `usingLocalStorage` with it).
        case none
        /// The device signed in to an account.
        case accountAdded
        /// The device signed out or switched account.
        case accountRemoved
        /// The account's content was deleted; no `.didChange` follows (the stores are gone).
        case contentRemoved
        /// The device's local stores were imported into the account's (first sign-in);
        /// `.didChange` carries ``StoreEvent/importCounts``.
        case initialImportCompleted
        /// A transition this client does not know (a newer server).
        case unknown(Int)
    }

    /// How to tell the server that a `.willChange` was handled (`StoreEventAcknowledgement`):
    /// pass it to ``UbiquityClient/acknowledge(_:)``.
    public struct Acknowledgement: Sendable, Hashable {
        /// The event's token (its feed event's resume token): it names the store and the event.
        public var eventToken: GenerationToken
        /// When the server goes on without the acknowledgement (the event's commit time plus the
        /// server's `--transition-ack-seconds`). In the past on a replayed event: nothing waits
        /// any more, and acknowledging it is a harmless no-op.
        public var deadline: Date
        /// The session of the subscription that delivered the event. The acknowledgement is
        /// sent with it rather than with the client's current session: the server waits for the
        /// subscriptions of *that* session, and during a sign-out the client's own session is
        /// already being ended (a new sign-in would acknowledge for a session nobody waits on).
        let session: String?

        public init(eventToken: GenerationToken, deadline: Date) {
            self.init(eventToken: eventToken, deadline: deadline, session: nil)
        }

        init(eventToken: GenerationToken, deadline: Date, session: String?) {
            self.eventToken = eventToken
            self.deadline = deadline
            self.session = session
        }

        init?(proto a: Ubiquity_V1_StoreEventAcknowledgement, session: String?) {
            guard let token = GenerationToken(ifPresent: a.eventToken) else { return nil }
            self.init(eventToken: token, deadline: a.deadline.date, session: session)
        }

        // The session is how it is sent, not what it is: two acknowledgements of one event are
        // equal whichever stream delivered them.
        public static func == (a: Self, b: Self) -> Bool {
            a.eventToken == b.eventToken && a.deadline == b.deadline
        }

        public func hash(into hasher: inout Hasher) {
            hasher.combine(eventToken)
            hasher.combine(deadline)
        }
    }

    public var phase: Phase
    public var transition: Transition
    /// Whether the device works in its local fallback store once this event applies.
    public var usingLocalStorage: Bool
    /// What the import did, on `.didChange` of `.initialImportCompleted`; nil otherwise.
    public var importCounts: ImportCounts?
    /// On `.didChange` only: the transition its `.willChange` announced did not happen (it
    /// failed part-way, or the server was killed before it was recorded and closed it at its next
    /// start). The store is as it was, plus what contexts saved in the window; the contexts were
    /// reset all the same: make new ones and carry on where you were. Every `.willChange` is
    /// followed by exactly one `.didChange` of its transition, cancelled or not (except a
    /// `.contentRemoved`, whose stores are gone).
    public var cancelled: Bool
    /// On `.willChange` of a feed opened with `acknowledgesStoreEvents`: the server waits for
    /// ``UbiquityClient/acknowledge(_:)`` of it, up to its deadline. Nil otherwise (also when the
    /// server does not wait, `--transition-ack-seconds 0`).
    public var acknowledgement: Acknowledgement?

    public init(
        phase: Phase, transition: Transition, usingLocalStorage: Bool = false, importCounts: ImportCounts? = nil,
        cancelled: Bool = false, acknowledgement: Acknowledgement? = nil
    ) {
        self.phase = phase
        self.transition = transition
        self.usingLocalStorage = usingLocalStorage
        self.importCounts = importCounts
        self.cancelled = cancelled
        self.acknowledgement = acknowledgement
    }

    /// `session`: the one the delivering subscription carried (see ``Acknowledgement``).
    init(proto e: Ubiquity_V1_StoreEvent, session: String? = nil) {
        switch e.phase {
        case .willChange: phase = .willChange
        case .didChange: phase = .didChange
        case .unspecified: phase = .unknown(0)
        case .UNRECOGNIZED(let n): phase = .unknown(n)
        }
        switch e.transition {
        case .unspecified: transition = .none
        case .accountAdded: transition = .accountAdded
        case .accountRemoved: transition = .accountRemoved
        case .contentRemoved: transition = .contentRemoved
        case .initialImportCompleted: transition = .initialImportCompleted
        case .UNRECOGNIZED(let n): transition = .unknown(n)
        }
        usingLocalStorage = e.usingLocalStorage
        importCounts = e.hasImportCounts ? ImportCounts(proto: e.importCounts) : nil
        cancelled = e.cancelled
        acknowledgement = e.hasAcknowledgement ? Acknowledgement(proto: e.acknowledgement, session: session) : nil
    }
}

/// What a first-sign-in import of local stores did (`ImportCounts`): the first three add up to
/// the number of local objects, the last two to the number of local key-value entries.
public struct ImportCounts: Sendable, Hashable {
    /// Objects inserted into the account's store.
    public var inserted: Int64
    /// Objects merged into ones the account had, through uniqueness constraints.
    public var merged: Int64
    /// Local duplicates of other local objects, removed.
    public var deduplicated: Int64
    /// Local key-value entries set in the account.
    public var keyValuesMoved: Int64
    /// Local key-value entries of keys the account had: the account's value was kept.
    public var keyValuesKept: Int64

    public init(inserted: Int64, merged: Int64 = 0, deduplicated: Int64 = 0, keyValuesMoved: Int64 = 0,
                keyValuesKept: Int64 = 0) {
        self.inserted = inserted
        self.merged = merged
        self.deduplicated = deduplicated
        self.keyValuesMoved = keyValuesMoved
        self.keyValuesKept = keyValuesKept
    }

    init(proto c: Ubiquity_V1_ImportCounts) {
        self.init(inserted: c.inserted, merged: c.merged, deduplicated: c.deduplicated,
                  keyValuesMoved: c.keyValuesMoved, keyValuesKept: c.keyValuesKept)
    }
}

extension UbiquityClient {
    /// Tells the server that this device handled a `.willChange` (`Changes.AcknowledgeStoreEvent`):
    /// it flushed what it held for the store outside contexts — queued writes, batches not yet
    /// sent, key-value writes. The transition waits for the acknowledgements of the opted-in
    /// feeds that received the event (``Store/changes(from:entities:excludeAuthors:includeValues:reconnectFor:acknowledgesStoreEvents:onHistoryExpired:)``),
    /// up to ``StoreEvent/Acknowledgement/deadline``, and only then gives contexts their chance to
    /// save: acknowledge first, save contexts after. One acknowledgement covers every feed of the
    /// delivering session on that store.
    ///
    /// Sent with the session of the feed that delivered the event, without signing in: during a
    /// sign-out the client's own session is already on its way out, and `signOut()` returns only
    /// after the acknowledgements (or the deadline) — so a consumer may acknowledge while another
    /// task awaits `signOut()`.
    ///
    /// - Returns: whether a transition was waiting for it. False for a repeat, a late or a
    ///   replayed event's acknowledgement, and when the delivering session has ended since (its
    ///   feeds ended with it, so nothing waits for them): informational, never an error.
    /// - Throws: `.notFound` (STORE_EVENT_NOT_FOUND) for a token that is not a `.willChange` of
    ///   this device; `.invalidArgument` (BAD_TOKEN) for a malformed one.
    @discardableResult
    public func acknowledge(_ acknowledgement: StoreEvent.Acknowledgement) async throws -> Bool {
        let request = Ubiquity_V1_AcknowledgeStoreEventRequest.with { $0.eventToken = acknowledgement.eventToken.bytes }
        guard let session = acknowledgement.session else {
            return try await unary { md, opts in
                try await self.changes.acknowledgeStoreEvent(request, metadata: md, options: opts)
            }.awaited
        }
        do {
            return try await changes.acknowledgeStoreEvent(
                request, metadata: bearer(session), options: options(timeout: timeout)
            ).awaited
        } catch {
            let failure = UbiquityError.from(error)
            if let e = failure as? UbiquityError, e.kind == .sessionRevoked || e.kind == .sessionExpired {
                return false
            }
            throw failure
        }
    }
}
