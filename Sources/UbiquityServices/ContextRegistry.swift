import Foundation
import Synchronization
import UbiquityLock
import UbiquityQuery
import UbiquityStorage

/// A FIFO async lock: calls on one context run one at a time, like a Core Data context's queue.
final class AsyncLock: Sendable {
    private struct State { var locked = false; var waiters = FIFOQueue<CheckedContinuation<Void, Never>>() }
    private let state = Lock(State())

    func lock() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let run = state.withLock { s -> Bool in
                if !s.locked { s.locked = true; return true }
                s.waiters.append(c)
                return false
            }
            if run { c.resume() }
        }
    }

    func unlock() {
        let next = state.withLock { s -> CheckedContinuation<Void, Never>? in
            guard let next = s.waiters.popFirst() else { s.locked = false; return nil }
            return next
        }
        next?.resume()
    }
}

/// Which generation a context reads (SPEC §4.2).
enum GenerationModeKind: Sendable { case unpinned, pinnedAtFirstRead, pinnedAtToken }

/// An object inserted in a context and not saved yet.
struct PendingInsert: Sendable {
    var id: ObjectID                     // temporary: negative pk
    var values: [String: StorageValue]
    var relationships: [String: [ObjectID]]
}

/// Changes to an existing object, with what the context read of it (for optimistic locking).
struct PendingUpdate: Sendable {
    var baseVersion: Int64
    var baseValues: [String: StorageValue]
    var values: [String: StorageValue]
    var relationships: [String: [ObjectID]]
}

/// A context's unsaved changes. `merge(_:)` applies a later set of changes on top (a child's
/// save into its parent, a call's changes into its context, and a child's view through its
/// ancestors all use it).
///
/// A change to a temporary ID whose insert is in the same set is folded into the insert. One
/// whose insert is not — an object an ancestor context inserted, changed or deleted in a child,
/// or a call's changes before they reach their context — is kept in `updated` / `deleted` under
/// its temporary ID until a merge meets the insert. Whatever reaches a store save without its
/// insert (the object was deleted before the save) is dropped there, as a change to a deleted
/// permanent object is.
struct Pending: Sendable {
    var inserted: [Int64: PendingInsert] = [:]       // by temporary pk
    var insertOrder: [Int64] = []
    var updated: [ObjectID: PendingUpdate] = [:]
    var deleted: [ObjectID: Int64] = [:]             // object → version read (0 for a temporary ID)

    var count: Int { inserted.count + updated.count + deleted.count }

    /// The changed and deleted objects that exist in the store (not temporary IDs).
    var storedIDs: [ObjectID] { (Array(updated.keys) + Array(deleted.keys)).filter { !$0.isTemporary } }

    mutating func merge(_ later: Pending) {
        for k in later.insertOrder {
            guard let i = later.inserted[k] else { continue }
            if inserted[k] == nil { insertOrder.append(k) }
            inserted[k] = i
        }
        for (id, u) in later.updated {
            if id.isTemporary, var i = inserted[id.pk] {
                i.values.merge(u.values) { _, new in new }
                i.relationships.merge(u.relationships) { _, new in new }
                inserted[id.pk] = i
            } else if var mine = updated[id] {
                mine.values.merge(u.values) { _, new in new }
                mine.relationships.merge(u.relationships) { _, new in new }
                updated[id] = mine
            } else if deleted[id] == nil {
                updated[id] = u
            }
        }
        for (id, v) in later.deleted {
            updated[id] = nil
            if id.isTemporary, inserted[id.pk] != nil {
                // inserted and deleted before any save: nothing of it is left to save
                inserted[id.pk] = nil
                insertOrder.removeAll { $0 == id.pk }
            } else if deleted[id] == nil {
                deleted[id] = v
            }
        }
    }
}

/// The state of one context. Invariant: touched only by the call holding `lock` (and
/// `mergeToken`, which has its own mutex), which is why this class may be shared between tasks.
final class ContextBox: @unchecked Sendable {
    let id: UUID
    let account: String
    /// The session that created it (SPEC §4.4: a context belongs to a session and ends with it);
    /// nil with authentication off. Its expiry, wall-clock seconds.
    let session: String?
    let sessionExpiresAt: Double
    /// The device whose session created it: once a transition reset it, that device's later
    /// sessions are told STORE_CHANGED rather than "no such context" (the device signed out and in).
    let device: String?
    let storeID: UUID
    let name: String
    let author: String
    let parent: ContextBox?
    let autoMerge: Bool
    let lock = AsyncLock()
    /// Set by other saves for `automatically_merges_changes`; applied at the next call.
    let mergeToken = Lock<GenerationToken?>(nil)
    /// Open, in a transition's chance to save, or reset (later calls fail with STORE_CHANGED).
    /// Its own mutex: a transition begins without waiting for a call in progress to end.
    let lifecycle = Lock(ContextLifecycle())
    let lastUse = Lock<Double>(0)

    var mergePolicy: MergePolicy
    var mode: GenerationModeKind
    var pin: PinLease?
    var pending = Pending()
    var closed = false

    init(id: UUID, account: Account, storeID: UUID, name: String, author: String, parent: ContextBox?, autoMerge: Bool,
         mergePolicy: MergePolicy, mode: GenerationModeKind) {
        self.id = id; self.account = account.id; self.session = account.session; self.sessionExpiresAt = account.expiresAt
        self.device = account.device
        self.storeID = storeID; self.name = name; self.author = author
        self.parent = parent; self.autoMerge = autoMerge; self.mergePolicy = mergePolicy; self.mode = mode
    }

    var hasChanges: Bool { pending.count > 0 }

    /// This context and its ancestors, outermost (root) first.
    var chain: [ContextBox] {
        var out: [ContextBox] = []
        var c: ContextBox? = self
        while let x = c { out.insert(x, at: 0); c = x.parent }
        return out
    }
}

/// Every open context of the server. Contexts are addressed by ID, survive client reconnects,
/// and end with CloseContext or after `idleSeconds` without a call.
public final class ContextRegistry: Sendable {
    private let contexts = Lock<[UUID: ContextBox]>([:])
    private let nextTemporary = Atomic<Int64>(0)
    /// Transitions waiting for their contexts to settle (`ContextRegistry+Transitions.swift`).
    let waits = Lock<[UInt64: TransitionWait]>([:])
    /// The store transitions running (`StoreTransitions`): one book per server, kept here because
    /// every service that runs a transition has the registry.
    let transitions = Lock(TransitionBook())
    let limits: ServiceLimits
    let clock: @Sendable () -> Double

    public init(limits: ServiceLimits, clock: @escaping @Sendable () -> Double = { ProcessInfo.processInfo.systemUptime }) {
        self.limits = limits
        self.clock = clock
    }

    func newTemporaryPK() -> Int64 { -(nextTemporary.add(1, ordering: .relaxed).newValue) }

    func add(_ box: ContextBox) throws {
        try contexts.withLock { c in
            var mine = c.values.filter { $0.account == box.account }.count
            if mine >= limits.maxContextsPerAccount {
                // contexts a transition reset only tell their device STORE_CHANGED until they
                // expire: they make room before a live one is refused
                let reset = c.values.filter { $0.account == box.account && $0.lifecycle.withLock(\.isReset) }
                for r in reset { c[r.id] = nil }
                mine -= reset.count
            }
            guard mine < limits.maxContextsPerAccount else {
                throw ServiceError.exhausted("this account has \(mine) open contexts, the limit is \(limits.maxContextsPerAccount): close some with CloseContext", reason: .limitExceeded)
            }
            c[box.id] = box
        }
        box.lastUse.withLock { $0 = clock() }
    }

    /// The context, if it exists and belongs to the account and session (another session's
    /// context answers as a missing one — except that a context a transition reset answers the
    /// later sessions of its device, with STORE_CHANGED, until it expires).
    func find(_ id: String, account: Account) throws -> ContextBox {
        guard !id.isEmpty else { throw ServiceError.invalid("context_id", "a context_id is required (CreateContext returns it)", reason: .missingField) }
        guard let uuid = UUID.parse(id) else { throw ServiceError.invalid("context_id", "\"\(id.prefix(100))\" is not a context ID", reason: .badContextID) }
        guard let box = contexts.withLock({ $0[uuid] }), box.account == account.id,
              box.session == account.session || (box.device != nil && box.device == account.device && box.lifecycle.withLock(\.isReset)) else {
            throw ServiceError.notFound("no context \(id.lowercased()) (closed, expired after \(Int(limits.contextIdleSeconds)) s idle, or never created)", reason: .contextNotFound)
        }
        return box
    }

    /// Runs `body` holding the context's lock (one call at a time per context) and, with
    /// `ancestors`, its ancestors' locks too (always child first, then upward: no cycles).
    func with<T>(_ box: ContextBox, ancestors: Bool = false, _ body: () async throws -> T) async throws -> T {
        let held = ancestors ? Array(box.chain.reversed()) : [box]
        for b in held { await b.lock.lock() }
        defer {
            // a child's save moves its changes into its parent: each held context reports
            for b in held { settled(b, b.lifecycle.withLock { $0.callEnded(hasChanges: b.hasChanges) }) }
            for b in held.reversed() { b.lock.unlock() }
            box.lastUse.withLock { $0 = clock() }
        }
        if held.contains(where: \.closed) { throw ServiceError.notFound("context \(box.id.uuidString.lowercased()) was closed", reason: .contextNotFound) }
        switch box.lifecycle.withLock({ $0.call(now: clock()) }) {
        case .reset(let cause):
            Self.reset(box)
            throw Self.storeChanged(cause)
        case .refuse(let cause):
            throw Self.storeChanged(cause)
        default:
            return try await body()
        }
    }

    /// The STORE_CHANGED answer of a reset context.
    static func storeChanged(_ cause: ContextLifecycle.Cause) -> ServiceError {
        switch cause {
        case .storeDestroyedOrReplaced:
            return .precondition("the context's store was destroyed or replaced: create a new context", reason: .storeChanged)
        case .transition(let what):
            return .precondition("the context was reset because \(what) (docs/lifecycle.md): create a new context", reason: .storeChanged)
        }
    }

    /// The contexts a transition concerns (of one session, one store, one account).
    func boxes(where match: (ContextBox) -> Bool) -> [ContextBox] {
        contexts.withLock { $0.values.filter(match) }
    }

    func remove(_ box: ContextBox) -> [ContextBox] {
        contexts.withLock { c in
            // children go with their parent
            var gone = [box]
            var frontier = [box.id]
            while let p = frontier.popLast() {
                for child in c.values where child.parent?.id == p { gone.append(child); frontier.append(child.id) }
            }
            for g in gone { c[g.id] = nil }
            return gone
        }
    }

    /// A store save made by a service: errors leave with the model's types in their conflict
    /// details, and a committed save is announced to the store's auto-merging contexts.
    /// `issueFields` renames validation issues' request paths for calls whose request is not a
    /// SaveRequest (`renamingIssueFields`).
    func save(_ request: SaveRequest, on store: Store, model: ModelInfo?,
              issueFields: (String) -> String? = { $0 }) async throws -> SaveResult {
        guard case .saved(let r) = try await save(request, on: store, model: model, conflictsInResponse: false,
                                                  issueFields: issueFields) else {
            preconditionFailure("conflicts come back as a value only when asked for")
        }
        return r
    }

    /// Saves; with `conflictsInResponse`, conflicts the `error` merge policy refused come back as
    /// `.conflicted` (the client asked for every record in the response body, which bounded
    /// error details cannot always hold) instead of an ABORTED error.
    func save(_ request: SaveRequest, on store: Store, model: ModelInfo?, conflictsInResponse: Bool,
              issueFields: (String) -> String? = { $0 }) async throws -> SaveOutcome {
        let r: SaveResult
        do { r = try await store.save(request) } catch let error as StorageError {
            if conflictsInResponse, let conflicts = error.refusedConflicts {
                return .conflicted(conflicts, token: store.currentToken)
            }
            throw SaveFailure(error: error.renamingIssueFields(issueFields), model: model)
        }
        if !r.dryRun && !r.replayed { await storeDidSave(store.id, token: r.token) }
        return .saved(r)
    }

    /// Another client committed to `store`: contexts that merge automatically move their pin there.
    func storeDidSave(_ store: UUID, token: GenerationToken) async {
        let boxes = contexts.withLock { $0.values.filter { $0.storeID == store && $0.autoMerge } }
        for b in boxes {
            b.mergeToken.withLock { t in if (t?.generation ?? -1) < token.generation { t = token } }
        }
    }

    /// The store is being destroyed or replaced: its contexts stop working (STORE_CHANGED).
    func storeWillChange(_ store: UUID) async {
        let boxes = contexts.withLock { $0.values.filter { $0.storeID == store } }
        for b in boxes { b.lifecycle.withLock { $0.storeDestroyedOrReplaced() } }
    }

    /// Drops the contexts of these sessions (signed out, or their API key revoked); their pins
    /// are leases, which the store forgets on its own. With `keepingReset`, contexts a
    /// transition reset stay (answering STORE_CHANGED to their device) until they expire.
    func endSessions(_ ids: Set<String>, keepingReset: Bool = false) {
        guard !ids.isEmpty else { return }
        let gone = contexts.withLock { c in
            let gone = c.values.filter { b in
                (b.session.map(ids.contains) ?? false) && !(keepingReset && b.lifecycle.withLock(\.isReset))
            }
            for g in gone { c[g.id] = nil }
            return gone
        }
        for g in gone { g.closed = true }
    }

    /// Contexts idle past the limit, or whose session expired; the caller unpins and drops them.
    func expire() -> [ContextBox] {
        let now = clock()
        let wallClock = Date().timeIntervalSince1970
        let idle = limits.contextIdleSeconds
        return contexts.withLock { c in
            let gone = c.values.filter { b in now - b.lastUse.withLock { $0 } >= idle || b.sessionExpiresAt <= wallClock }
            for g in gone { c[g.id] = nil }
            return gone
        }
    }

    public var count: Int { contexts.withLock { $0.count } }
}

/// What a save came to for a caller that asked for conflicts in the response.
enum SaveOutcome {
    /// Applied (or validated, for a dry run; or the stored outcome, for a replay).
    case saved(SaveResult)
    /// Refused by the `error` merge policy: nothing applied. `token` is the current generation.
    case conflicted([ConflictRecord], token: GenerationToken)
}

extension StorageError {
    /// The conflicts of a save the `error` merge policy refused; nil for any other error, and
    /// for a conflict without records (a raw SQLITE_CONSTRAINT): an empty list in an OK
    /// response would read as success, so that one stays an ABORTED error.
    var refusedConflicts: [ConflictRecord]? {
        switch reason {
        case .mergeConflict(let c), .constraintConflict(let c): return c.isEmpty ? nil : c
        default: return nil
        }
    }
}
