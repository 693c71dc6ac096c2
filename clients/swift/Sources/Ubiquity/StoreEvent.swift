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

    public var phase: Phase
    public var transition: Transition
    /// Whether the device works in its local fallback store once this event applies.
    public var usingLocalStorage: Bool
    /// What the import did, on `.didChange` of `.initialImportCompleted`; nil otherwise.
    public var importCounts: ImportCounts?

    public init(
        phase: Phase, transition: Transition, usingLocalStorage: Bool = false, importCounts: ImportCounts? = nil
    ) {
        self.phase = phase
        self.transition = transition
        self.usingLocalStorage = usingLocalStorage
        self.importCounts = importCounts
    }

    init(proto e: Ubiquity_V1_StoreEvent) {
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
    }
}

/// What a first-sign-in import of local stores did (`ImportCounts`): the three add up to the
/// number of local objects.
public struct ImportCounts: Sendable, Hashable {
    /// Objects inserted into the account's store.
    public var inserted: Int64
    /// Objects merged into ones the account had, through uniqueness constraints.
    public var merged: Int64
    /// Local duplicates of other local objects, removed.
    public var deduplicated: Int64

    public init(inserted: Int64, merged: Int64 = 0, deduplicated: Int64 = 0) {
        self.inserted = inserted
        self.merged = merged
        self.deduplicated = deduplicated
    }

    init(proto c: Ubiquity_V1_ImportCounts) {
        self.init(inserted: c.inserted, merged: c.merged, deduplicated: c.deduplicated)
    }
}
