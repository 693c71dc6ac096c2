/// Where a store evicted to make room (`StoreDirectory`, least recently used first) is closed.
///
/// A close ends with the writer's TRUNCATE checkpoint and its fsyncs, queued behind every other
/// store's writer work on the shared writer threads (docs/threading.md rule 18). Run on the path
/// of the call that needed the room, that wait was the call's: W6's calls that opened a closed
/// store waited p50 28.6 ms, p99 114 ms (docs/benchmarks.md, W6), and each held one of the few
/// blocking workers while it did. So a victim is closed by the `ubq-closer` thread
/// (`StoreCloser`) while the caller opens its own store — up to `maxBackground` at a time. Past
/// that, the caller closes its victim itself: closes that fall behind slow down the opens that
/// cause them, so stores on their way out (each still holding its connections and memory) stay
/// bounded by `maxBackground` instead of growing without limit.
///
/// A value type: `StoreDirectory` keeps it under its lock; unit tests drive it alone
/// (`EvictionPolicyTests`).
struct EvictionPolicy: Sendable {
    enum Placement: Equatable, Sendable {
        /// Handed to the closer thread; report `finished()` when it is closed.
        case background
        /// Closed by the caller before it opens its store.
        case caller
    }

    /// Most closes handed to the closer and not finished. 8: a close is one checkpoint of a
    /// store's last WAL (a few ms, behind the writer threads' queue), so the closer can lag a
    /// burst of up to 8 opens without any caller waiting; 0 closes every victim on the caller's
    /// path (the behaviour before).
    let maxBackground: Int
    /// Closes handed to the closer and not finished yet.
    private(set) var pending = 0

    init(maxBackground: Int = 8) { self.maxBackground = max(0, maxBackground) }

    /// Where the next victim closes (counted as pending if in the background).
    mutating func place() -> Placement {
        guard pending < maxBackground else { return .caller }
        pending += 1
        return .background
    }

    /// A background close has finished.
    mutating func finished() {
        precondition(pending > 0, "a background close finished that was never placed")
        pending -= 1
    }
}
