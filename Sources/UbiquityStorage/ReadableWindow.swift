/// When each recent generation stopped being current, so GC keeps every generation readable for
/// `seconds` after that (SPEC §4.2: a token read a moment ago still works under write load), and
/// the recent commit rate (retention estimates, `Store.retentionEstimate`).
///
/// A value type under the store's state lock: `advanced` runs once per group commit (no SQLite
/// work, an append or an update of the last entry), `floor` once per GC batch. Entries are runs
/// of generations that stopped being current within `granularity` seconds of the run's first
/// stop; a run keeps its first generation and the *latest* stop time of its members, so a
/// generation can stay readable up to `granularity` longer than the window, never shorter. That
/// bounds the ring to about `keepSeconds / granularity` (64) entries whatever the commit rate.
struct ReadableWindow: Sendable {
    /// How long a generation stays readable after it stops being current; 0: no window.
    let seconds: Double
    /// How long entries are kept: the window, but at least a minute, so the commit rate is
    /// known even with a short window.
    let keepSeconds: Double
    let granularity: Double
    /// Runs in generation order: generations `first ..< next run's first` stopped being current
    /// between `startedAt` and `stoppedAt` (monotonic seconds, the storage clock).
    private(set) var runs: [(first: Int64, startedAt: Double, stoppedAt: Double)] = []

    init(seconds: Double) {
        self.seconds = max(0, seconds)
        keepSeconds = max(self.seconds, 60)
        granularity = keepSeconds / 64
    }

    /// Generations `from ..< to` stopped being current at `now` (a commit moved current from
    /// `from` to `to`).
    mutating func advanced(from: Int64, to: Int64, at now: Double) {
        guard to > from else { return }
        // a run spans at most one granule from its first stop, so steady commits still start new
        // runs and old ones leave the window
        if let last = runs.last, last.startedAt > now - granularity {
            runs[runs.count - 1].stoppedAt = max(last.stoppedAt, now)
        } else {
            runs.append((from, now, now))
            prune(now: now)
        }
    }

    /// After a restart nobody knows when the generations before `current` stopped being current:
    /// the window starts for all of them at `now`.
    mutating func reopened(oldest: Int64, current: Int64, at now: Double) {
        advanced(from: oldest, to: current, at: now)
    }

    /// The oldest generation GC must keep readable for the window (`current` when none).
    mutating func floor(current: Int64, now: Double) -> Int64 {
        prune(now: now)
        guard seconds > 0 else { return current }
        for r in runs where r.stoppedAt > now - seconds { return min(r.first, current) }
        return current
    }

    /// Commits per second over the kept entries (up to `keepSeconds`); nil when too few commits
    /// were seen to tell (none, or all within one granule).
    func commitRate(current: Int64, now: Double) -> Double? {
        guard let oldest = runs.first(where: { $0.stoppedAt > now - keepSeconds }) else { return nil }
        let span = now - oldest.startedAt
        let commits = Double(current - oldest.first)
        return commits > 0 && span > 0 ? commits / span : nil
    }

    private mutating func prune(now: Double) {
        let cutoff = now - keepSeconds
        var drop = 0
        while drop < runs.count && runs[drop].stoppedAt <= cutoff { drop += 1 }
        if drop > 0 { runs.removeFirst(drop) }
    }
}
