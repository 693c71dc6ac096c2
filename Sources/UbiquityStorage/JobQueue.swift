import Foundation
import UbiquityLock

/// A blocking FIFO shared by pool threads: a `FIFOQueue` under a condition variable (NSCondition,
/// not `Lock`: the pop side waits for a push).
final class JobQueue<Job>: @unchecked Sendable {
    // Invariant: `items` and `closed` are only accessed while `cond` is locked.
    private let cond = NSCondition()
    private var items = FIFOQueue<Job>()
    private var closed = false

    /// False if the queue is closed (the job was not queued).
    func push(_ j: Job) -> Bool {
        cond.lock(); defer { cond.unlock() }
        if closed { return false }
        items.append(j)
        cond.signal()
        return true
    }

    /// Blocks until at least one job is queued; returns up to `max` jobs, or [] once closed and drained.
    func pop(max: Int) -> [Job] {
        cond.lock(); defer { cond.unlock() }
        while items.isEmpty && !closed { cond.wait() }
        return take(max: max)
    }

    /// `pop`, but nil if nothing was queued within `timeout` seconds (the queue still open).
    func pop(max: Int, timeout: Double) -> [Job]? {
        cond.lock(); defer { cond.unlock() }
        let deadline = Date(timeIntervalSinceNow: timeout)
        while items.isEmpty && !closed {
            if !cond.wait(until: deadline) && items.isEmpty && !closed { return nil }
        }
        return take(max: max)
    }

    /// Up to `max` queued jobs, oldest first. Called with `cond` locked.
    private func take(max: Int) -> [Job] {
        let n = Swift.min(max, items.count)
        var out: [Job] = []
        out.reserveCapacity(n)
        for _ in 0..<n { out.append(items.popFirst()!) }
        return out
    }

    var isEmpty: Bool { cond.lock(); defer { cond.unlock() }; return items.isEmpty }
    var count: Int { cond.lock(); defer { cond.unlock() }; return items.count }

    func close() { cond.lock(); closed = true; cond.broadcast(); cond.unlock() }
}
