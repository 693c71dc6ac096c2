/// One subscription's life as a value type (STYLE.md: `mutating func event(...) -> Action`), so
/// its rules are unit-tested without a socket (`SubscriptionStateTests`); `Changes+Subscribe.swift`
/// runs the actions.
///
///     catchingUp ──backlog read from disk──▶ live ◀──┐
///         ▲                                   │      │ back inside the window
///         └──────── fell out of the window ───┴─▶ lagging (etcd's "unsynced": reads disk)
///     any state ──lag past the bound / shutdown / store replaced, destroyed, closed──▶ ended
///
/// `position` is the resume point: every transaction up to it was sent or skipped by the filter.
/// Only transactions actually queued to the call move it (`sent`), so the token in an ending's
/// `ResumeDetails` never skips a transaction the client did not get.
struct SubscriptionState: Equatable {
    enum Phase: Equatable {
        /// Reading the backlog after the start point from `ubq_history`.
        case catchingUp
        /// Served from the store's in-memory feed.
        case live
        /// Fell behind the feed's window: reading from disk again until it catches up.
        case lagging
        case ended(EndReason)
    }

    enum EndReason: Equatable {
        /// More than `maxLag` generations behind the store (RESOURCE_EXHAUSTED).
        case tooFarBehind
        /// The server is shutting down (UNAVAILABLE).
        case shutdown
        /// The store was replaced (FAILED_PRECONDITION STORE_REPLACED).
        case storeReplaced
        /// The store was destroyed (NOT_FOUND).
        case storeDestroyed
        /// The store closed under the subscription (UNAVAILABLE).
        case storeClosed
        /// Its session was signed out or its API key revoked (UNAUTHENTICATED SESSION_REVOKED).
        case sessionRevoked
        /// Its session expired (UNAUTHENTICATED SESSION_EXPIRED).
        case sessionExpired
    }

    /// Where the subscriber's next read goes.
    enum Action: Equatable {
        case readDisk(after: Int64)
        case readFeed(after: Int64)
        /// Send the caught-up marker (once), then read the feed.
        case sendCaughtUp(thenReadFeedAfter: Int64)
        /// Nothing to read: wait for the feed (or a wake-up).
        case wait(after: Int64)
        case end(EndReason)
    }

    /// What the feed answered (`FeedRead` without its payload).
    enum FeedAnswer: Equatable { case transactions(through: Int64), behind, upToDate, closed }

    enum Event: Equatable {
        /// A page of history was read from disk and sent, covering every generation through
        /// `through` (when `exhausted`, through the store's generation when the read began:
        /// generations without a history record have nothing to send).
        case diskPage(through: Int64, exhausted: Bool)
        case feed(FeedAnswer)
        /// The caught-up marker went out.
        case caughtUpSent
        /// The waiter woke (new transactions, a progress tick, an ending).
        case woke
        case end(EndReason)
    }

    private(set) var phase: Phase = .catchingUp
    private(set) var position: Int64
    /// The store's generation when the subscription started: the backlog runs to it.
    let backlogEnd: Int64
    private(set) var caughtUpSent = false

    init(start: Int64, storeGeneration: Int64) {
        position = start
        backlogEnd = storeGeneration
    }

    /// The first action: the feed's window (no SQLite for a subscriber that starts inside it,
    /// such as every one from `now`); it says `.behind` for an older start.
    var startAction: Action { .readFeed(after: position) }

    var isEnded: Bool { if case .ended = phase { return true } else { return false } }

    mutating func event(_ e: Event) -> Action {
        if case .ended(let r) = phase { return .end(r) }
        switch e {
        case .end(let r):
            phase = .ended(r)
            return .end(r)
        case .diskPage(let through, let exhausted):
            position = max(position, through)
            if !exhausted { return .readDisk(after: position) }
            return afterReaching()
        case .feed(.transactions(let through)):
            position = max(position, through)
            phase = .live
            return afterReaching()
        case .feed(.behind):
            if phase == .live { phase = .lagging }
            return .readDisk(after: position)
        case .feed(.upToDate):
            phase = .live
            if !caughtUpSent && position >= backlogEnd { return .sendCaughtUp(thenReadFeedAfter: position) }
            // (below the backlog's end: its last records are still on their way to the feed)
            return .wait(after: position)
        case .feed(.closed):
            phase = .ended(.storeClosed)
            return .end(.storeClosed)
        case .caughtUpSent:
            caughtUpSent = true
            return .readFeed(after: position)
        case .woke:
            return .readFeed(after: position)
        }
    }

    /// After a read that moved the position: the caught-up marker once the backlog is behind us.
    private mutating func afterReaching() -> Action {
        if !caughtUpSent && position >= backlogEnd { return .sendCaughtUp(thenReadFeedAfter: position) }
        return .readFeed(after: position)
    }
}
