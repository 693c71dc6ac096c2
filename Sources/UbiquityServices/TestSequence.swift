import Foundation

/// Test-only ordering of concurrent calls (docs/testing.md "Sequence points"): with
/// `UBIQUITYD_TEST_SEQUENCE=<point>[:<n>],<point>[:<n>],…` the n-th time (default 1) a thread
/// reaches a listed point, it waits until every point listed before it has been reached, then
/// marks its own. A race test thus puts two calls in the order that loses data — a key-value write
/// authenticated, then the first-sign-in import, then the write's commit — instead of hoping a
/// timer lands there. Other occurrences, and every point when unset (always, outside tests), pass
/// at the cost of one comparison.
enum TestSequence {
    private static let steps: [(point: String, hit: Int)] = {
        guard let v = ProcessInfo.processInfo.environment["UBIQUITYD_TEST_SEQUENCE"], !v.isEmpty else { return [] }
        return v.split(separator: ",").map { part in
            let p = part.split(separator: ":", maxSplits: 1).map(String.init)
            return (p[0], p.count > 1 ? Int(p[1]) ?? 1 : 1)
        }
    }()
    private static let state = Progress()

    /// Bounded so that a broken test fails (its call times out or succeeds early) instead of
    /// hanging the server.
    static let maxWaitSeconds = 30.0

    static func reach(_ point: String) {
        guard !steps.isEmpty, steps.contains(where: { $0.point == point }) else { return }
        state.reach(point, steps: steps, maxWait: maxWaitSeconds)
    }

    /// Which points were reached, and how often each name was.
    private final class Progress: @unchecked Sendable {
        private let condition = NSCondition()
        private var hits: [String: Int] = [:]
        private var reached: Set<Int> = []

        func reach(_ point: String, steps: [(point: String, hit: Int)], maxWait: Double) {
            condition.lock()
            defer { condition.unlock() }
            hits[point, default: 0] += 1
            guard let i = steps.firstIndex(where: { $0.point == point && $0.hit == hits[point] }) else { return }
            let deadline = Date().addingTimeInterval(maxWait)
            while !(0..<i).allSatisfy({ reached.contains($0) }) {
                if !condition.wait(until: deadline) { break }
            }
            reached.insert(i)
            condition.broadcast()
        }
    }
}
