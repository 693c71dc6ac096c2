import Foundation
import UbiquityLock
import UbiquityStorage

// The contexts' chance to save when a store transition begins (SPEC §4.4, docs/lifecycle.md).
// Each context's rules are `ContextLifecycle`; this runs them for a set of contexts and waits.

/// One transition waiting for its contexts: done when every one settled (nothing left to save) or
/// its deadline passed, whichever comes first.
final class TransitionWait: Sendable {
    private let remaining: Lock<Set<UUID>>
    private let gate = DeadlineGate()

    init(_ contexts: Set<UUID>) {
        remaining = Lock(contexts)
        if contexts.isEmpty { gate.open() }
    }

    func settle(_ id: UUID) {
        if remaining.withLock({ $0.remove(id); return $0.isEmpty }) { gate.open() }
    }

    func finish() { gate.open() }

    /// Returns once every context settled, or after `seconds`.
    func wait(seconds: Double) async { await gate.wait(seconds: seconds) }
}

extension ContextRegistry {
    /// Gives `boxes` their chance to save for transition `id`: each may keep working and save
    /// until every one has nothing left to save, or `seconds` passed; then each is reset (its
    /// changes and pin dropped) and answers STORE_CHANGED. `unpin` releases a reset context's pin
    /// on its store (the caller has the stores open).
    func chanceToSave(_ boxes: [ContextBox], transition id: UInt64, cause: ContextLifecycle.Cause, seconds: Double,
                      unpin: (ContextBox, PinLease) async -> Void) async {
        guard !boxes.isEmpty else { return }
        let window = ContextLifecycle.Window(transition: id, deadline: clock() + seconds)
        let wait = TransitionWait(Set(boxes.map(\.id)))
        waits.withLock { $0[id] = wait }
        defer { _ = waits.withLock { $0.removeValue(forKey: id) } }
        for b in boxes {
            // under the context's lock: a call in progress ends first, and `hasChanges` is its own
            await b.lock.lock()
            let a = b.closed ? .settled(transition: id) : b.lifecycle.withLock { $0.transitionBegan(window, cause: cause, hasChanges: b.hasChanges) }
            b.lock.unlock()
            if case .settled = a { wait.settle(b.id) }
        }
        await wait.wait(seconds: window.deadline - clock())
        for b in boxes {
            await b.lock.lock()
            if case .reset = b.lifecycle.withLock({ $0.transitionEnded(id) }) {
                if let pin = b.pin { await unpin(b, pin) }
                Self.reset(b)
            }
            b.lock.unlock()
        }
    }

    /// A context call ended: if that settled its context, the transition waiting for it hears.
    func settled(_ box: ContextBox, _ action: ContextLifecycle.Action) {
        guard case .settled(let id) = action, let wait = waits.withLock({ $0[id] }) else { return }
        wait.settle(box.id)
    }

    /// Drops a reset context's unsaved changes and pin (its caller holds the context's lock).
    static func reset(_ box: ContextBox) {
        box.pending = Pending()
        box.pin = nil
    }
}
