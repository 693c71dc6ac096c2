import UbiquityLock
import UbiquityStorage

/// Wakes key-value subscriptions when their account's key-value store changes, and ends them on
/// shutdown and when their session is signed out, revoked or expires (as store subscriptions end:
/// `Subscriptions.endSessions`). The changes themselves are read from the store (`KeyValueStore.changes`), so this
/// holds no data: only each account's last committed position and who waits for what.
final class KeyValueFeed: Sendable {
    private struct Waiter {
        let account: String
        let after: Int64
        let continuation: CheckedContinuation<Void, Never>
    }
    private struct Running {
        var task: Task<Void, any Error>?
        var ending: SubscriptionState.EndReason?
        let account: String
        let session: String?
        let device: String?
        /// Store transition events and quota notices announced to it and not sent yet (live only:
        /// docs/lifecycle.md, docs/keyvalue.md "Change feed").
        var events: [KeyValueNotice] = []
    }
    private struct State {
        var next: UInt64 = 1
        /// The last position `committed` reported per account (written since start).
        var positions: [String: Int64] = [:]
        var waiters: [UInt64: Waiter] = [:]
        /// Running subscriptions: their task (cancelled to end them), why they are ending, and
        /// the session they run for.
        var running: [UInt64: Running] = [:]
        var shutDown = false
    }
    private let state = Lock(State())

    /// Registers a subscription of `account`'s session (nil with authentication off);
    /// UNAVAILABLE once the server is shutting down.
    func admit(_ account: Account) throws -> UInt64 {
        try state.withLock { s in
            if s.shutDown { throw ServiceError(code: .unavailable, reason: .shuttingDown, message: "the server is shutting down: subscribe again once it is back") }
            defer { s.next += 1 }
            s.running[s.next] = Running(task: nil, ending: nil, account: account.id, session: account.session, device: account.device)
            return s.next
        }
    }

    /// A store transition's event for `account`: each of its streams that it concerns sends it
    /// next (`takeEvents`), and an ending waits for it (`end`).
    func announce(_ event: StoreEventRecord, account: String) {
        notify(.storeEvent(event), account: account) { event.concerns(device: $0.device) }
    }

    /// A write of `key` by `author` was refused for a quota, or (key empty) the account was found
    /// over one: every stream of the account sends a QUOTA_VIOLATION change next.
    func quotaViolation(account: String, key: String, author: String) {
        notify(.quotaViolation(key: key, author: author), account: account) { _ in true }
    }

    private func notify(_ notice: KeyValueNotice, account: String, to concerned: (Running) -> Bool) {
        let woken = state.withLock { s -> [Waiter] in
            var woken: [Waiter] = []
            for (id, r) in s.running where r.account == account && r.ending == nil && concerned(r) {
                s.running[id]?.events.append(notice)
                if let w = s.waiters.removeValue(forKey: id) { woken.append(w) }
            }
            return woken
        }
        woken.forEach { $0.continuation.resume() }
    }

    /// The events announced to the stream since it last asked, oldest first.
    func takeEvents(_ id: UInt64) -> [KeyValueNotice] {
        state.withLock { s in
            defer { s.running[id]?.events = [] }
            return s.running[id]?.events ?? []
        }
    }

    func setTask(_ id: UInt64, _ task: Task<Void, any Error>) {
        let cancel = state.withLock { s -> Bool in
            guard s.running[id] != nil else { return true }
            s.running[id]?.task = task
            return s.running[id]?.ending != nil
        }
        if cancel { task.cancel() }
    }

    func remove(_ id: UInt64) {
        let w = state.withLock { s -> Waiter? in
            s.running[id] = nil
            return s.waiters.removeValue(forKey: id)
        }
        w?.continuation.resume()
    }

    /// Why the server is ending the subscription, if it is (an unknown one reads as shut down).
    func ending(_ id: UInt64) -> SubscriptionState.EndReason? {
        state.withLock { s in s.running[id].map(\.ending) ?? .shutdown }
    }

    /// Ends the subscriptions of these sessions (signed out, or their API key revoked), or one
    /// subscription (`only`: its session expired): each wait returns, each task is cancelled, and
    /// the runner ends the call with the reason's status and its resume token. One with events
    /// still to send (a sign-out's DID_CHANGE) sends them first; its task is cancelled only after
    /// `graceSeconds`, for a client that stopped reading.
    func end(sessions ids: Set<String>? = nil, only: UInt64? = nil, _ reason: SubscriptionState.EndReason, graceSeconds: Double = 0) {
        let (tasks, later, woken) = state.withLock { s -> ([Task<Void, any Error>], [Task<Void, any Error>], [Waiter]) in
            var tasks: [Task<Void, any Error>] = [], later: [Task<Void, any Error>] = [], woken: [Waiter] = []
            for (id, r) in s.running where r.ending == nil {
                if let only, id != only { continue }
                if let ids, !(r.session.map(ids.contains) ?? false) { continue }
                s.running[id]?.ending = reason
                if let t = r.task { if r.events.isEmpty { tasks.append(t) } else { later.append(t) } }
                if let w = s.waiters.removeValue(forKey: id) { woken.append(w) }
            }
            return (tasks, later, woken)
        }
        woken.forEach { $0.continuation.resume() }
        tasks.forEach { $0.cancel() }
        if !later.isEmpty {
            Task {
                try? await Task.sleep(nanoseconds: UInt64(max(0, graceSeconds) * 1e9))
                later.forEach { $0.cancel() }
            }
        }
    }

    /// A write of `account` committed at `seq`: its waiters wake.
    func committed(account: String, seq: Int64) {
        let woken = state.withLock { s -> [Waiter] in
            s.positions[account] = max(s.positions[account] ?? 0, seq)
            let ids = s.waiters.filter { $0.value.account == account && $0.value.after < seq }.map(\.key)
            return ids.compactMap { s.waiters.removeValue(forKey: $0) }
        }
        woken.forEach { $0.continuation.resume() }
    }

    /// Returns once `account` has a change after `after`, the subscription is cancelled or
    /// ended, or `timeoutSeconds` passed (the caller then sends a progress marker if due); true
    /// if a change after `after` was committed since the server started (only then is there
    /// anything new to read: the caller read everything before it waited).
    @discardableResult
    func wait(_ id: UInt64, account: String, after: Int64, timeoutSeconds: Double) async -> Bool {
        let timer = Task { [weak self] in
            guard (try? await Task.sleep(nanoseconds: UInt64(max(0.01, timeoutSeconds) * 1e9))) != nil else { return }
            self?.wake(id)
        }
        defer { timer.cancel() }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                let now = state.withLock { s -> Bool in
                    if Task.isCancelled || s.shutDown || (s.running[id].map { $0.ending != nil } ?? true) || (s.positions[account] ?? 0) > after { return true }
                    s.waiters[id] = Waiter(account: account, after: after, continuation: c)
                    return false
                }
                if now { c.resume() }
            }
        } onCancel: { [weak self] in self?.wake(id) }
        return state.withLock { ($0.positions[account] ?? 0) > after }
    }

    private func wake(_ id: UInt64) {
        state.withLock { $0.waiters.removeValue(forKey: id) }?.continuation.resume()
    }

    /// The server is draining: every key-value subscription ends now with UNAVAILABLE and its
    /// resume token.
    func shutdown() {
        state.withLock { $0.shutDown = true }
        end(.shutdown)
    }

    /// Running key-value subscriptions.
    var count: Int { state.withLock { $0.running.count } }
}

/// What a key-value stream sends live, outside the key-value feed (nothing of it is stored).
enum KeyValueNotice: Sendable, Equatable {
    /// A store transition's announcement (docs/lifecycle.md).
    case storeEvent(StoreEventRecord)
    /// A write of `key` by `author` was refused for a quota; key empty: the account is over a
    /// quota (lowered since, or a first-sign-in import that raced other writes).
    case quotaViolation(key: String, author: String)
}
