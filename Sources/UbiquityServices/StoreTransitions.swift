import Foundation
import UbiquityLock
import UbiquityStorage

/// Store transitions (SPEC §4.6, docs/lifecycle.md): the one way a lifecycle operation — sign-out,
/// first sign-in, delete account, … — tells the devices concerned before and after it happens.
///
///     let done = try await StoreTransitions(backend: backend, contexts: contexts)
///         .run(.contentRemoved, scope: .account(id)) { try removeEverything() }
///
/// `run` does, in order:
/// 1. refuses (ABORTED TRANSITION_IN_PROGRESS) if another transition overlaps `scope` (two
///    sign-outs of different sessions never overlap; anything else on one account does);
/// 2. appends `StoresWillChange` to the history of every store the scope concerns — a durable
///    feed entry with a generation and a resume token of its own (`Store.appendEvent`), so live
///    subscribers get it in order with the transactions and an offline device replays it;
/// 2a. waits until every subscriber that opted in (`acknowledges_store_events`) and received
///    the WILL_CHANGE has acknowledged it or gone away, at most `--transition-ack-seconds`
///    (`AcknowledgementBook`);
/// 3. gives the scope's contexts their chance to save (`ContextRegistry.chanceToSave`, rules in
///    `ContextLifecycle`): until each has nothing left to save or `--transition-save-seconds`
///    passed; then each is reset and answers STORE_CHANGED;
/// 4. runs `body` (the transition itself);
/// 5. appends `StoresDidChange` to every one of those stores that still exists, and returns the
///    generation of each, so a caller that ends streams afterwards ends them after that event
///    (`Subscriptions.endSessions(_:_:after:)`).
///
/// Every WILL_CHANGE is closed: if a WILL_CHANGE append, the chance to save or `body` throws,
/// each store that got WILL_CHANGE gets a DID_CHANGE marked `cancelled` before the error goes
/// on; if the process is killed, the next start writes those (`closeAbandoned`, from the
/// catalog's row of the announcement and each store's `AnnouncementLog`).
///
/// Events of a `.session` scope name the session's device: only that device's subscribers get
/// them (other devices of the account skip them like a filtered transaction). The account's
/// key-value streams get both events too, live only (the key-value feed keeps each key's latest
/// change, no history to hold them).
public struct StoreTransitions: Sendable {
    let backend: Backend
    let contexts: ContextRegistry

    public init(backend: Backend, contexts: ContextRegistry) {
        self.backend = backend
        self.contexts = contexts
    }

    /// Whom a transition concerns.
    public enum Scope: Sendable, Equatable {
        /// One device's session within its account (sign-out): its contexts, and every store of
        /// the account (the events name the device: other devices skip them).
        case session(Account)
        /// Every device of an account (delete account): every context and store of the account.
        case account(String)
        /// One store of an account, every device (a local store's import).
        case store(UUID, account: String)

        var accountID: String {
            switch self {
            case .session(let a): a.id
            case .account(let id), .store(_, let id): id
            }
        }

        /// Two transitions may run at once only as sign-outs of two different sessions.
        func overlaps(_ other: Scope) -> Bool {
            guard accountID == other.accountID else { return false }
            if case .session(let a) = self, case .session(let b) = other { return a.session == b.session }
            return true
        }

        /// The device its events name; nil: every device.
        var device: String? { if case .session(let a) = self { a.device } else { nil } }

        func contains(_ box: ContextBox) -> Bool {
            switch self {
            case .session(let a): box.account == a.id && box.session == a.session
            case .account(let id): box.account == id
            case .store(let s, let id): box.account == id && box.storeID == s
            }
        }
    }

    /// What `run` returns: the body's value, and the generation of each store's DID_CHANGE event.
    public struct Completed<T: Sendable>: Sendable {
        public let value: T
        public let didChange: [UUID: Int64]
    }

    /// Announces `transition` to `scope` before and after running `body` (see the type's comment).
    /// `usingLocalStorage`: whether the devices concerned work in a local store before and after;
    /// `importCounts`: what a DID_CHANGE of an initial import reports, from the body's value;
    /// `didChangeStores`: where DID_CHANGE goes when not the stores WILL_CHANGE went to — an
    /// import announces on the device's local stores, which it removes, and completes on the
    /// account's stores it copied into (known once the body ran).
    public func run<T: Sendable>(_ transition: StoreEventRecord.Transition, scope: Scope,
                                 usingLocalStorage: (before: Bool, after: Bool) = (false, false),
                                 importCounts: @Sendable (T) -> StoreEventRecord.ImportCounts? = { _ in nil },
                                 didChangeStores: (@Sendable (T) -> (account: String, stores: [UUID]))? = nil,
                                 _ body: () async throws -> T) async throws -> Completed<T> {
        let id = try contexts.beginTransition(scope)
        defer { contexts.endTransition(id) }
        let account = Account(id: scope.accountID)
        let stores = affectedStores(scope)
        let transitionID = UUID().uuidString.lowercased()
        let will = StoreEventRecord(phase: .willChange, transition: transition, device: scope.device,
                                    usingLocalStorage: usingLocalStorage.before, transitionID: transitionID)
        // durable before the first WILL_CHANGE: a start after a kill knows where to close it
        try backend.catalog.beginAnnouncement(transitionID, stores: stores)
        var told: [UUID] = []
        let acks = backend.subscriptions.awaitingAcknowledgement(of: stores, device: scope.device)
        defer { acks.close() }
        let value: T
        do {
            for s in stores {
                do {
                    let t = try await backend.withStore(s.uuidString, account: account) { try await $0.appendEvent(will) }
                    told.append(s)
                    acks.announced(s, generation: t.generation)
                } catch {
                    // destroyed since it was listed (DestroyStore runs beside a sign-out): nobody
                    // follows it any more, so there is nothing to announce there
                    if backend.catalog.store(id: s) != nil { throw error }
                }
            }
            backend.keyValueFeed.announce(will, account: scope.accountID)
            // opted-in subscribers confirm they flushed their work (docs/lifecycle.md "Acknowledgements")
            await acks.wait(seconds: backend.limits.transitionAckSeconds)
            let backend = self.backend
            await contexts.chanceToSave(contexts.boxes(where: scope.contains), transition: id, cause: .transition(Self.describe(transition)),
                                        seconds: backend.limits.transitionSaveSeconds) { box, pin in
                try? await backend.withStore(box.storeID.uuidString, account: account) { $0.unpin(pin) }
            }
            value = try await body()
        } catch {
            // it did not happen: every store that heard WILL_CHANGE hears so
            await close(will.cancelling(), on: told, account: account, transitionID: transitionID)
            if !told.isEmpty { backend.keyValueFeed.announce(will.cancelling(), account: scope.accountID) }
            throw error
        }
        let did = StoreEventRecord(phase: .didChange, transition: transition, device: scope.device,
                                   usingLocalStorage: usingLocalStorage.after, importCounts: importCounts(value), transitionID: transitionID)
        let (didAccount, didStores) = didChangeStores?(value) ?? (scope.accountID, stores)
        let didChange = await close(did, on: didStores, account: Account(id: didAccount), transitionID: transitionID)
        backend.keyValueFeed.announce(did, account: didAccount)
        return Completed(value: value, didChange: didChange)
    }

    /// Appends `closing` to each of `stores` and returns the generation of each. A store the
    /// transition removed has none (its subscribers end with NOT_FOUND). The announcement's
    /// catalog row goes once no store that still exists missed its closing; else the next start
    /// closes what is left (`closeAbandoned`).
    @discardableResult
    private func close(_ closing: StoreEventRecord, on stores: [UUID], account: Account, transitionID: String) async -> [UUID: Int64] {
        var closed: [UUID: Int64] = [:]
        var missed = false
        for s in stores {
            do {
                closed[s] = try await backend.withStore(s.uuidString, account: account) { try await $0.appendEvent(closing) }.generation
            } catch {
                missed = missed || (backend.catalog.store(id: s) != nil && !backend.directory.isParked(s))
            }
        }
        if !missed { try? backend.catalog.endAnnouncement(transitionID) }
        return closed
    }

    /// Before serving: closes, as cancelled, every WILL_CHANGE a killed process left open (its
    /// transition did not finish, or finished without saying so). Runs after
    /// `AccountTransitions.resumePending`, which completes the archives and restores it resumes —
    /// their stores' WILL_CHANGE events are closed as happened by then, or parked out of reach.
    /// A store that cannot be written now keeps its row for the next start rather than keep
    /// this one from serving; one whose file was never created has nothing to close.
    static func closeAbandoned(_ backend: Backend) async throws {
        for (id, stores) in try backend.catalog.pendingAnnouncements() {
            var left = false
            for s in stores where backend.catalog.store(id: s) != nil && !backend.directory.isParked(s) {
                do {
                    try await backend.directory.withStore(s) { store in
                        for e in try await store.announcementLog().cancelling(id) { _ = try await store.appendEvent(e) }
                    }
                } catch let e as StorageError where e.reason == .notFound {
                } catch { left = true }
            }
            if !left { try backend.catalog.endAnnouncement(id) }
        }
    }

    /// The stores whose history gets the events, in a stable order.
    func affectedStores(_ scope: Scope) -> [UUID] {
        let ids: Set<UUID>
        switch scope {
        case .session(let a):
            // every store of the account, not only those the session follows now: a device that
            // followed one earlier and resumes later must replay its sign-out there too
            ids = Set(backend.catalog.stores(account: a.id).map(\.id))
        case .account(let id):
            ids = Set(backend.catalog.stores(account: id).map(\.id))
        case .store(let s, _):
            ids = [s]
        }
        return ids.sorted { $0.uuidString < $1.uuidString }
    }

    /// Why a context was reset, for its STORE_CHANGED message.
    static func describe(_ t: StoreEventRecord.Transition) -> String {
        switch t {
        case .accountAdded: "the device signed in to an account"
        case .accountRemoved: "the device signed out of its account"
        case .contentRemoved: "the account's content was removed"
        case .initialImportCompleted: "the device's local store was imported into its account"
        }
    }
}

/// The transitions running on the server (one book per server, kept by `ContextRegistry`).
struct TransitionBook: Sendable {
    private var next: UInt64 = 1
    private var running: [UInt64: StoreTransitions.Scope] = [:]

    /// A number for a new transition, or ABORTED if one running overlaps it.
    mutating func begin(_ scope: StoreTransitions.Scope) throws -> UInt64 {
        if running.values.contains(where: { $0.overlaps(scope) }) {
            throw ServiceError(code: .aborted, reason: .transitionInProgress,
                               message: "another store transition of this account is in progress (docs/lifecycle.md): retry once it is done")
        }
        defer { next += 1 }
        running[next] = scope
        return next
    }

    mutating func end(_ id: UInt64) { running[id] = nil }
}

extension ContextRegistry {
    func beginTransition(_ scope: StoreTransitions.Scope) throws -> UInt64 { try transitions.withLock { try $0.begin(scope) } }
    func endTransition(_ id: UInt64) { transitions.withLock { $0.end(id) } }
}
