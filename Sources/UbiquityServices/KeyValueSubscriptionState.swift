import UbiquityProtos
import UbiquityStorage

/// What a key-value subscription does with each change it reads and when it sends a marker, as a
/// value (the runner does the I/O: `KeyValueSubscriptionRunner`). Positions are the account's
/// change sequence numbers.
struct KeyValueSubscriptionState: Equatable {
    /// Changes up to here are the initial sync (from `oldest`): reason INITIAL_SYNC, and their
    /// tombstones are skipped (a new copy has nothing to delete). 0 without an initial sync.
    let initialSyncThrough: Int64
    /// Authors whose changes are skipped.
    let excluded: Set<String>
    /// Read through here (sent or skipped).
    private(set) var position: Int64
    /// The resume token last given to the client.
    private(set) var sent: Int64
    private(set) var caughtUp = false

    init(start: Int64, initialSyncThrough: Int64 = 0, excluded: Set<String> = []) {
        self.initialSyncThrough = initialSyncThrough
        self.excluded = excluded
        position = start
        sent = start
    }

    /// A change read after `position`: the reason to send it with, or nil to skip it. Either
    /// way the position moves past it. INITIAL_SYNC for the initial sync's keys (from `oldest`,
    /// whatever their origin: the subscriber is making its first copy); ACCOUNT_CHANGE for a key
    /// whose last change was a first-sign-in import (`KeyValueStore.Origin.accountChange`);
    /// SERVER_CHANGE for a device's write.
    mutating func read(_ e: KeyValueStore.Entry) -> Ubiquity_V1_KeyValueChange.Reason? {
        precondition(e.seq > position, "changes are read in order")
        position = e.seq
        let initial = e.seq <= initialSyncThrough
        if (initial && e.deleted) || excluded.contains(e.author) { return nil }
        if initial { return .initialSync }
        // a key a device's first sign-in brought in: the account changed under the subscriber
        return e.origin == .accountChange ? .accountChange : .serverChange
    }

    /// Whether tombstones trimmed up to `floor` (`KeyValueStore.trimFloor`) may be missing from
    /// what it reads next: its position is below the floor — unless the floor lies within its
    /// initial sync, which sends no tombstones anyway.
    func expired(floor: Int64) -> Bool { floor > max(position, initialSyncThrough) }

    /// Whether it sends what `author` did (a live notice has no position to skip past).
    func wants(author: String) -> Bool { !excluded.contains(author) }

    /// A response carrying the token at `seq` was queued.
    mutating func didSend(at seq: Int64) { sent = seq }

    enum Marker: Equatable { case caughtUp, progress }

    /// The marker to send (at `position`) once a read found no more changes: caught-up once,
    /// then a progress marker when skipped changes moved the position past the last token sent
    /// and `progressDue` (the interval since the last send has passed).
    mutating func readAll(progressDue: Bool) -> Marker? {
        if !caughtUp { caughtUp = true; return .caughtUp }
        return position > sent && progressDue ? .progress : nil
    }
}
