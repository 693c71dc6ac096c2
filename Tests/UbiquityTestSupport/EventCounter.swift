import Dispatch
import UbiquityLock

/// Counts occurrences of an event that happens on another thread (a handler started, a call was
/// cancelled) and lets a test wait until it has happened `n` times: the way tests order
/// themselves against the code under test, instead of sleeping and hoping.
///
/// Waiting is bounded (`seconds`) so a broken test fails instead of hanging; the bound is not a
/// delay, a wait returns as soon as the count is reached.
public final class EventCounter: Sendable {
    private enum Waiter {
        case blocking(DispatchSemaphore)
        /// The timeout task is cancelled when the count is reached, so none outlives its wait.
        case async(CheckedContinuation<Bool, Never>, timeout: Task<Void, Never>)

        func wake(_ reached: Bool) {
            switch self {
            case .blocking(let semaphore):
                semaphore.signal()
            case .async(let continuation, let timeout):
                timeout.cancel()
                continuation.resume(returning: reached)
            }
        }
    }

    private struct State {
        var count = 0
        var nextID = 0
        var waiters: [Int: (target: Int, waiter: Waiter)] = [:]
    }

    private let state = Lock(State())

    public init() {}

    /// How many times the event has happened so far.
    public var count: Int { state.withLock { $0.count } }

    /// Records one occurrence and wakes the waiters whose count is reached. Any thread.
    public func signal() {
        let woken = state.withLock { s -> [Waiter] in
            s.count += 1
            let ready = s.waiters.filter { $0.value.target <= s.count }
            for id in ready.keys { s.waiters[id] = nil }
            return ready.values.map(\.waiter)
        }
        for w in woken { w.wake(true) }
    }

    /// Blocks until the event has happened `n` times; false if `seconds` passed first.
    /// Not from async code (it would hold a cooperative thread): use the async overload there.
    @available(*, noasync, message: "use the async wait")
    public func wait(for n: Int = 1, seconds: Double = 10) -> Bool {
        let semaphore = DispatchSemaphore(value: 0)
        let id = newID()
        guard register(id, n, .blocking(semaphore)) else { return true }
        if semaphore.wait(timeout: .now() + seconds) == .success { return true }
        return expire(id) == nil  // nil: woken between the timeout and the removal
    }

    /// Suspends until the event has happened `n` times; false if `seconds` passed first.
    public func wait(for n: Int = 1, seconds: Double = 10) async -> Bool {
        await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            let id = newID()
            let timeout = Task.detached { [self] in
                guard (try? await Task.sleep(for: .seconds(seconds))) != nil else { return }  // cancelled: reached
                expire(id)?.wake(false)
            }
            if !register(id, n, .async(continuation, timeout: timeout)) {
                timeout.cancel()
                continuation.resume(returning: true)
            }
        }
    }

    private func newID() -> Int {
        state.withLock { s in s.nextID += 1; return s.nextID }
    }

    /// Adds a waiter; false when the count is already reached (nothing to wait for).
    private func register(_ id: Int, _ target: Int, _ waiter: Waiter) -> Bool {
        state.withLock { s -> Bool in
            if s.count >= target { return false }
            s.waiters[id] = (target, waiter)
            return true
        }
    }

    /// Removes a waiter that timed out; nil when it was woken already.
    @discardableResult
    private func expire(_ id: Int) -> Waiter? {
        state.withLock { s in s.waiters.removeValue(forKey: id)?.waiter }
    }
}
