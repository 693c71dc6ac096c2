import UbiquityLock

/// A one-way gate that one task waits at until it is opened or a deadline passes. The waiting
/// steps of a store transition use it: contexts' chance to save (`TransitionWait`) and
/// subscribers' acknowledgements (`AcknowledgementWait`); each keeps its own rule for when to open.
final class DeadlineGate: Sendable {
    private struct State {
        var open = false
        var waiter: CheckedContinuation<Void, Never>?
    }
    private let state = Lock(State())

    init() {}

    /// Opens the gate: the waiting task (or the next one to wait) goes on. Opening twice is a no-op.
    func open() {
        state.withLock { s -> CheckedContinuation<Void, Never>? in
            s.open = true
            defer { s.waiter = nil }
            return s.waiter
        }?.resume()
    }

    var isOpen: Bool { state.withLock { $0.open } }

    /// Returns once the gate is open. After `seconds`, `late` runs (it must open the gate, directly
    /// or through the owner's rule); by default it opens the gate. One waiter at a time.
    func wait(seconds: Double, late: (@Sendable () -> Void)? = nil) async {
        let timer = Task { [weak self] in
            guard (try? await Task.sleep(nanoseconds: UInt64(max(0, seconds) * 1e9))) != nil else { return }
            if let late { late() } else { self?.open() }
        }
        defer { timer.cancel() }
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let now = state.withLock { s -> Bool in
                if s.open { return true }
                s.waiter = c
                return false
            }
            if now { c.resume() }
        }
    }
}
