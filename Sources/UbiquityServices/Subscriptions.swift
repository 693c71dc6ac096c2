import Foundation
import UbiquityLock
import UbiquityStorage

/// Limits of the change feed (SPEC §5), ubiquityd flags with documented defaults (docs/changes.md).
public struct FeedLimits: Sendable {
    /// Open subscriptions per store.
    public var maxSubscribersPerStore = 10_000
    /// Open subscriptions per connection.
    public var maxSubscribersPerConnection = 1_000
    /// A subscriber that stopped reading (blocked in one send for a whole progress interval) and
    /// is more than this many generations behind its store is ended with RESOURCE_EXHAUSTED and
    /// its resume token. Its own buffer is the call's bounded send queue; past the store's
    /// in-memory window it reads history from disk, costing nobody else anything.
    public var maxLagGenerations: Int64 = 100_000
    /// How often an idle subscriber whose filter skipped transactions gets a progress marker, and
    /// how often lag is checked, in seconds.
    public var progressIntervalSeconds: Double = 5
    /// Bytes of transactions in one response (several small ones are batched up to it; one
    /// larger than it is split into parts). At most the transport's send limit.
    public var maxResponseBytes = 1 << 20
    public init() {}
}

/// One running Subscribe call, as the registry sees it: how to stop it and where it is.
final class Subscription: Sendable {
    let id: UInt64
    let storeID: UUID
    let peer: String
    let feed: ChangeFeed
    /// The session it runs for (nil with authentication off) and when that session expires.
    let session: String?
    let expiresAt: Double
    /// Its session's device (the store events it gets are the ones that concern it), and whether
    /// it acknowledges WILL_CHANGE events (`SubscribeRequest.acknowledges_store_events`).
    let device: String?
    let acknowledgesStoreEvents: Bool
    private struct State {
        var ending: SubscriptionState.EndReason?
        /// End once the position reaches this generation (a transition's DID_CHANGE, sent first).
        var endAfter: (generation: Int64, reason: SubscriptionState.EndReason)?
        var task: Task<Void, any Error>?
        /// The position (sent or skipped).
        var position: Int64 = 0
        /// Responses queued so far, and whether a send is waiting for the client to read.
        var sends: UInt64 = 0
        var inSend = false
        /// `sends` when the last sweep saw this subscription blocked in a send.
        var sweepSeen: UInt64 = .max
    }
    private let state = Lock(State())

    init(id: UInt64, storeID: UUID, peer: String, feed: ChangeFeed, session: String? = nil, expiresAt: Double = .infinity,
         device: String? = nil, acknowledgesStoreEvents: Bool = false) {
        self.id = id; self.storeID = storeID; self.peer = peer; self.feed = feed
        self.session = session; self.expiresAt = expiresAt
        self.device = device; self.acknowledgesStoreEvents = acknowledgesStoreEvents
    }

    var ending: SubscriptionState.EndReason? { state.withLock { $0.ending } }
    var position: Int64 { state.withLock { $0.position } }

    func setTask(_ t: Task<Void, any Error>) {
        let cancel = state.withLock { s -> Bool in s.task = t; return s.ending != nil }
        if cancel { t.cancel() }
    }

    func moved(to position: Int64) {
        state.withLock { s in
            s.position = position
            if let e = s.endAfter, position >= e.generation, s.ending == nil { s.ending = e.reason }
        }
    }
    func willSend() { state.withLock { $0.inSend = true } }
    func didSend() { state.withLock { $0.inSend = false; $0.sends &+= 1 } }

    /// Whether it has been blocked in the same send since the previous sweep (its client is not
    /// reading), as of this sweep.
    func blockedSinceLastSweep() -> Bool {
        state.withLock { s in
            guard s.inSend else { s.sweepSeen = .max; return false }
            defer { s.sweepSeen = s.sends }
            return s.sweepSeen == s.sends
        }
    }

    /// Ends it once it has sent (or skipped) everything through `generation` — at once if it
    /// already has, or if it is stuck in a send (`sweep`). The runner sees `ending` at its next step.
    func end(_ reason: SubscriptionState.EndReason, after generation: Int64) {
        let now = state.withLock { s -> Bool in
            guard s.ending == nil else { return false }
            if s.position >= generation { return true }
            s.endAfter = (generation, reason)
            return false
        }
        if now { end(reason) } else { feed.wake(id) }
    }

    /// Ends it now if it waits to end after a generation (`end(_:after:)`); whether it did.
    func endNowIfWaitingToEnd() -> Bool {
        guard let reason = state.withLock({ s in s.ending == nil ? s.endAfter?.reason : nil }) else { return false }
        end(reason)
        return true
    }

    /// Ends it from outside (lag, shutdown, store change): the waiter wakes, a blocked send is
    /// cancelled, the call ends with the reason's status and its resume token.
    func end(_ reason: SubscriptionState.EndReason) {
        let task = state.withLock { s -> Task<Void, any Error>? in
            guard s.ending == nil else { return nil }
            s.ending = reason
            return s.task
        }
        feed.wake(id)
        task?.cancel()
    }
}

/// Every running subscription of the server: the per-store and per-connection limits, endings
/// on shutdown and store changes, and one sweep that sends progress wake-ups and ends
/// subscribers too far behind (so a client that never reads is ended without any work per save).
public final class Subscriptions: Sendable {
    let limits: FeedLimits
    /// Transitions waiting for subscribers to acknowledge a WILL_CHANGE (docs/lifecycle.md).
    let acknowledgements = StoreEventAcks()
    private struct State {
        var next: UInt64 = 1
        var byID: [UInt64: Subscription] = [:]
        var perStore: [UUID: Int] = [:]
        var perPeer: [String: Int] = [:]
        var shutDown = false
    }
    private let state = Lock(State())
    private let sweeper = Lock<Task<Void, Never>?>(nil)

    public init(limits: FeedLimits = FeedLimits()) { self.limits = limits }

    func admit(storeID: UUID, peer: String, feed: ChangeFeed, account: Account = .defaultAccount, acknowledgesStoreEvents: Bool = false) throws -> Subscription {
        try state.withLock { s in
            if s.shutDown { throw ServiceError(code: .unavailable, reason: .shuttingDown, message: "the server is shutting down: subscribe again once it is back") }
            if s.perStore[storeID, default: 0] >= limits.maxSubscribersPerStore {
                throw ServiceError.exhausted("the store has \(limits.maxSubscribersPerStore) subscribers, the most allowed (--max-subscribers-per-store)", reason: .limitExceeded)
            }
            if s.perPeer[peer, default: 0] >= limits.maxSubscribersPerConnection {
                throw ServiceError.exhausted("this connection has \(limits.maxSubscribersPerConnection) subscriptions, the most allowed (--max-subscribers-per-connection): use another connection",
                                             reason: .limitExceeded)
            }
            let sub = Subscription(id: s.next, storeID: storeID, peer: peer, feed: feed, session: account.session, expiresAt: account.expiresAt,
                                   device: account.device, acknowledgesStoreEvents: acknowledgesStoreEvents)
            s.next += 1
            s.byID[sub.id] = sub
            s.perStore[storeID, default: 0] += 1
            s.perPeer[peer, default: 0] += 1
            return sub
        }
    }

    func remove(_ sub: Subscription) {
        state.withLock { s in
            guard s.byID.removeValue(forKey: sub.id) != nil else { return }
            s.perStore[sub.storeID]! -= 1
            if s.perStore[sub.storeID] == 0 { s.perStore[sub.storeID] = nil }
            s.perPeer[sub.peer]! -= 1
            if s.perPeer[sub.peer] == 0 { s.perPeer[sub.peer] = nil }
        }
        sub.feed.forget(sub.id)
        if sub.acknowledgesStoreEvents { acknowledgements.ended(sub.id) }
    }

    /// Open subscriptions (of one store).
    public func count(store: UUID? = nil) -> Int {
        state.withLock { s in store.map { s.perStore[$0] ?? 0 } ?? s.byID.count }
    }

    /// Generations the furthest-behind subscriber trails its store's newest (0 with none).
    public func maxLagGenerations() -> Int64 {
        let subs = state.withLock { Array($0.byID.values) }
        return subs.reduce(0) { max($0, $1.feed.publishedGeneration - $1.position) }
    }

    /// Ends the store's subscriptions (it is being replaced or destroyed) and waits until their
    /// calls let go of the store, so the file operation does not find it in use.
    func storeWillChange(_ id: UUID, _ reason: SubscriptionState.EndReason) async {
        let subs = state.withLock { s in s.byID.values.filter { $0.storeID == id } }
        subs.forEach { $0.end(reason) }
        // Each ended call returns within a wake-up; bounded so a stuck one cannot hold the RPC.
        for _ in 0..<2000 where count(store: id) > 0 {
            try? await Task.sleep(nanoseconds: 1_000_000)
        }
    }

    /// Ends the subscriptions of these sessions (signed out, or their API key revoked): at once,
    /// or for a store in `after`, once they have sent its generation there (a transition's
    /// DID_CHANGE: the subscriber gets it before the stream ends).
    func endSessions(_ ids: Set<String>, _ reason: SubscriptionState.EndReason, after: [UUID: Int64] = [:]) {
        guard !ids.isEmpty else { return }
        let subs = state.withLock { s in s.byID.values.filter { $0.session.map(ids.contains) ?? false } }
        for sub in subs {
            if let g = after[sub.storeID] { sub.end(reason, after: g) } else { sub.end(reason) }
        }
    }

    /// What the stores these sessions subscribe to have published so far, by store: ending the
    /// sessions `after:` it lets each stream send what was written before it ends.
    func publishedGenerations(ofSessions ids: Set<String>) -> [UUID: Int64] {
        let subs = state.withLock { s in s.byID.values.filter { $0.session.map(ids.contains) ?? false } }
        return subs.reduce(into: [:]) { $0[$1.storeID] = $1.feed.publishedGeneration }
    }

    /// The open subscriptions on these stores.
    func all(on stores: Set<UUID>) -> [Subscription] {
        state.withLock { s in s.byID.values.filter { stores.contains($0.storeID) } }
    }

    /// The server is draining: every subscription ends now with UNAVAILABLE and its resume token
    /// (a subscription never ends on its own, so waiting for it would hold up the shutdown).
    public func shutdown() {
        let subs = state.withLock { s -> [Subscription] in
            s.shutDown = true
            return Array(s.byID.values)
        }
        subs.forEach { $0.end(.shutdown) }
        sweeper.withLock { $0?.cancel(); $0 = nil }
    }

    /// Starts the sweep: every `progressIntervalSeconds` each subscription is woken (it sends a
    /// progress marker if its filter skipped transactions since it last sent), one too far
    /// behind its store is ended, and so is one whose session expired.
    public func startSweeper() {
        let interval = max(0.01, limits.progressIntervalSeconds)
        let task = Task.detached { [weak self] in
            while !Task.isCancelled {
                try? await Task.sleep(nanoseconds: UInt64(interval * 1e9))
                guard let self else { return }
                self.sweep()
            }
        }
        sweeper.withLock { $0 = task }
    }

    func sweep() {
        let subs = state.withLock { Array($0.byID.values) }
        let now = Date().timeIntervalSince1970
        for sub in subs {
            // An expired session's stream ends within one interval of its expiry.
            if sub.expiresAt <= now {
                sub.end(.sessionExpired)
                continue
            }
            // Only a subscriber stuck in one send for a whole interval is ended: one reading a
            // long backlog from disk is behind too, but it is catching up.
            let blocked = sub.blockedSinceLastSweep()
            // one whose client stopped reading before the last event it was to get ends now
            if blocked, sub.endNowIfWaitingToEnd() {
                continue
            } else if blocked && sub.feed.publishedGeneration - sub.position > limits.maxLagGenerations {
                sub.end(.tooFarBehind)
            } else {
                sub.feed.wake(sub.id)
            }
        }
    }
}
