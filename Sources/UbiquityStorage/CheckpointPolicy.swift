/// When the writer checkpoints the WAL (docs/storage.md, "Checkpoints"). A value: it sees only
/// numbers — the WAL's content after a commit, how many reads have begun, whether a checkpoint
/// restarted the WAL, whether the writer has been idle — and answers with what to do, so it is
/// tested without a database (CheckpointPolicyTests). `WriterEngine` runs its actions; the
/// writer thread owns the one instance (`WriterOwned.checkpoints`).
struct CheckpointPolicy: Equatable, Sendable {
    struct Limits: Equatable, Sendable {
        /// Checkpoint after a commit once the WAL holds more than this.
        var threshold: Int
        /// The threshold while no read has begun since the WAL last restarted (used only when larger
        /// than `threshold`: nobody pays for a longer WAL yet).
        var thresholdWithoutReaders: Int
        /// Past this the writer waits for readers in flight to restart the WAL.
        var hardLimit: Int
        /// Idle time after a commit that left a long WAL before the idle checkpoint (0: never).
        var idleSeconds: Double
    }

    /// What a checkpoint does if it could not restart the WAL on its own (readers kept read marks in it).
    enum Fallback: Equatable, Sendable {
        /// Nothing: the next commit or the idle checkpoint tries again.
        case none
        /// Close the reader gate; once the readers in flight are done, the WAL restarts.
        case closeGate
        /// Close the reader gate, or if it cannot close now, wait (busy handler) for the readers.
        case closeGateOrWaitForReaders
    }

    enum Action: Equatable, Sendable {
        case none
        /// Wait (bounded) for readers in flight, PASSIVE-checkpoint, and restart the WAL if that
        /// copied all of it back; if it did not restart, `fallback`.
        case checkpoint(fallback: Fallback)
    }

    let limits: Limits
    /// `ReaderGate.entries` when the WAL last restarted: while unchanged, no read has begun since.
    private(set) var readerEntriesAtRestart: UInt64 = 0
    /// The last commit left more than `threshold` in the WAL and its checkpoint did not restart it.
    private(set) var idleCheckpointDue = false

    init(limits: Limits) { self.limits = limits }

    init(configuration c: StorageConfiguration) {
        self.init(limits: Limits(threshold: c.checkpointThresholdBytes, thresholdWithoutReaders: c.checkpointThresholdBytesWithoutReaders,
                                 hardLimit: c.walHardLimitBytes, idleSeconds: c.idleCheckpointSeconds))
    }

    /// A group commit left `walBytes` of content in the WAL (frames since its last restart, not
    /// the file's size); `readerEntries` is `ReaderGate.entries` now.
    mutating func committed(walBytes: Int, readerEntries: UInt64) -> Action {
        // A long WAL left behind (unread, or readers keep the restart from happening) is
        // checkpointed once the writer is idle, so reads after the last save stop paying for it.
        idleCheckpointDue = walBytes > limits.threshold
        let unread = limits.thresholdWithoutReaders > limits.threshold && readerEntries == readerEntriesAtRestart
        guard walBytes > (unread ? limits.thresholdWithoutReaders : limits.threshold) else { return .none }
        // Readers that overlap continuously and outlast the checkpoint's waits keep read marks in
        // the WAL, so it never restarts on its own: past twice the threshold the reader gate
        // closes, past the hard limit the writer waits for them.
        if walBytes <= 2 * limits.threshold { return .checkpoint(fallback: .none) }
        return .checkpoint(fallback: walBytes > limits.hardLimit ? .closeGateOrWaitForReaders : .closeGate)
    }

    /// The checkpoint after a commit restarted the WAL: nothing left for the idle checkpoint.
    mutating func commitCheckpointRestarted() { idleCheckpointDue = false }

    /// The WAL restarted (by any checkpoint); `readerEntries` was `ReaderGate.entries` just before.
    mutating func walRestarted(readerEntries: UInt64) { readerEntriesAtRestart = readerEntries }

    /// How long the idle writer waits for a job before `idle()` is due (nil: wait for jobs).
    var idleWait: Double? { idleCheckpointDue && limits.idleSeconds > 0 ? limits.idleSeconds : nil }

    /// The writer has been idle for `idleWait` seconds: checkpoint once, never with the reader
    /// gate (nobody is writing, so nothing grows the WAL meanwhile).
    mutating func idle() -> Action {
        guard idleCheckpointDue else { return .none }
        idleCheckpointDue = false
        return .checkpoint(fallback: .none)
    }
}
