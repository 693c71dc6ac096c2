import UbiquityLock

/// Wakes key-value subscriptions when their account's key-value store changes, and ends them on
/// shutdown. The changes themselves are read from the store (`KeyValueStore.changes`), so this
/// holds no data: only each account's last committed position and who waits for what.
final class KeyValueFeed: Sendable {
    private struct Waiter {
        let account: String
        let after: Int64
        let continuation: CheckedContinuation<Void, Never>
    }
    private struct State {
        var next: UInt64 = 1
        /// The last position `committed` reported per account (written since start).
        var positions: [String: Int64] = [:]
        var waiters: [UInt64: Waiter] = [:]
        /// Running subscriptions: their task (cancelled to end them) and whether they are ending.
        var running: [UInt64: (task: Task<Void, any Error>?, ending: Bool)] = [:]
        var shutDown = false
    }
    private let state = Lock(State())

    /// Registers a subscription; UNAVAILABLE once the server is shutting down.
    func admit() throws -> UInt64 {
        try state.withLock { s in
            if s.shutDown { throw ServiceError(code: .unavailable, reason: .shuttingDown, message: "the server is shutting down: subscribe again once it is back") }
            defer { s.next += 1 }
            s.running[s.next] = (nil, false)
            return s.next
        }
    }

    func setTask(_ id: UInt64, _ task: Task<Void, any Error>) {
        let cancel = state.withLock { s -> Bool in
            guard let r = s.running[id] else { return true }
            s.running[id] = (task, r.ending)
            return r.ending
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

    /// Whether the subscription is being ended by the server (shutdown).
    func isEnding(_ id: UInt64) -> Bool { state.withLock { $0.running[id]?.ending ?? true } }

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
                    if Task.isCancelled || s.shutDown || (s.running[id]?.ending ?? true) || (s.positions[account] ?? 0) > after { return true }
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
        let (tasks, woken) = state.withLock { s -> ([Task<Void, any Error>], [Waiter]) in
            s.shutDown = true
            for id in Array(s.running.keys) { s.running[id]?.ending = true }
            defer { s.waiters.removeAll() }
            return (s.running.values.compactMap(\.task), Array(s.waiters.values))
        }
        woken.forEach { $0.continuation.resume() }
        tasks.forEach { $0.cancel() }
    }

    /// Running key-value subscriptions.
    var count: Int { state.withLock { $0.running.count } }
}
