/// When the writer checkpoints the WAL (docs/storage.md rule 5, "Checkpoints in steps"). A value:
/// it sees only numbers — the WAL's content after a commit, how many reads have begun, whether
/// the fence it asked for still stands, whether the database file's writeback is done, whether a
/// checkpoint restarted the WAL, whether the writer has been idle — and answers with what to do,
/// so it is tested without a database (CheckpointPolicyTests). `WriterEngine` runs its actions;
/// the writer thread owns the one instance (`WriterOwned.checkpoints`).
///
/// A checkpoint past the threshold runs in three steps, one after each of three (or more) group
/// commits, so no save waits behind all of it at once:
/// 1. `fence`: a read transaction on the writer's fence connection pins the WAL as it is now.
/// 2. `copy` (at the next commit): a PASSIVE checkpoint copies the WAL into the database file up
///    to the fence and, stopping short of the WAL's end, does not sync it (SQLite syncs the
///    database only when a checkpoint reaches the end); the fence ends and a writeback thread
///    writes the copied pages to the device while the writer goes on committing.
/// 3. `checkpoint` (at the first commit after the writeback is done): the whole checkpoint as
///    before — copies what the commits since the fence wrote, syncs the database file (whose
///    pages are mostly on the device already), restarts the WAL.
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
        /// Copy steps before the last one: each copies what the commits during the previous
        /// one's writeback wrote, so the last step has less to copy and sync. 2: in W2 the
        /// writer's checkpoint time per restart was 82 ms with 1 round, 63 with 2, 100 with 3
        /// (79 whole; docs/benchmarks.md "Issue 22"). Not a flag: nothing an operator knows
        /// tells a better value.
        var copyRounds = 2
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
        /// Begin (or move up to this commit) the fence's read transaction.
        case fence
        /// PASSIVE-checkpoint up to the fence (no database sync), end the fence, start the
        /// database file's writeback off the writer thread.
        case copy
        /// End the fence if held, wait (bounded) for readers in flight, PASSIVE-checkpoint to the
        /// WAL's end (which syncs the database file), and restart the WAL if that copied all of
        /// it back; if it did not restart, `fallback`.
        case checkpoint(fallback: Fallback)
    }

    /// Where the stepped checkpoint is.
    enum Phase: Equatable, Sendable {
        /// Below the threshold (or a checkpoint just ran).
        case filling
        /// The fence was begun after the last commit.
        case fenced
        /// Copied up to the fence; the writeback thread is writing the pages out.
        case writingBack
    }

    let limits: Limits
    /// `ReaderGate.entries` when the WAL last restarted: while unchanged, no read has begun since.
    private(set) var readerEntriesAtRestart: UInt64 = 0
    /// The last commit left more than `threshold` in the WAL and its checkpoint did not restart it.
    private(set) var idleCheckpointDue = false
    private(set) var phase = Phase.filling
    /// The WAL's content after the previous commit: the next commit's growth is guessed from the
    /// last one's, to begin the fence one commit before the threshold.
    private(set) var lastWALBytes = 0
    /// Copy steps run in this checkpoint so far.
    private(set) var copies = 0

    init(limits: Limits) { self.limits = limits }

    init(configuration c: StorageConfiguration) {
        self.init(limits: Limits(threshold: c.checkpointThresholdBytes, thresholdWithoutReaders: c.checkpointThresholdBytesWithoutReaders,
                                 hardLimit: c.walHardLimitBytes, idleSeconds: c.idleCheckpointSeconds))
    }

    /// A group commit left `walBytes` of content in the WAL (frames since its last restart, not
    /// the file's size); `readerEntries` is `ReaderGate.entries` now; `fenced`: the fence begun
    /// after the previous commit still holds its read transaction (an exclusive job ends it);
    /// `writebackDone`: the writeback of the last copy has finished.
    mutating func committed(walBytes: Int, readerEntries: UInt64, fenced: Bool = false, writebackDone: Bool = true) -> Action {
        // A long WAL left behind (unread, or readers keep the restart from happening) is
        // checkpointed once the writer is idle, so reads after the last save stop paying for it.
        idleCheckpointDue = walBytes > limits.threshold
        let unread = limits.thresholdWithoutReaders > limits.threshold && readerEntries == readerEntriesAtRestart
        let threshold = unread ? limits.thresholdWithoutReaders : limits.threshold
        let growth = max(0, walBytes - lastWALBytes)
        lastWALBytes = walBytes
        // Steps must not let the WAL run away (a slow writeback, a burst of large commits, a
        // restart readers keep failing): past one and a half times its threshold the whole
        // checkpoint runs at once, as before the steps, so the WAL's bound (twice the threshold,
        // then the reader gate) holds as before.
        if phase != .filling && walBytes > threshold + threshold / 2 { return finish(walBytes) }
        switch phase {
        case .writingBack:
            guard writebackDone else { return .none }
            guard copies < limits.copyRounds else { return finish(walBytes) }
            // Another round: the commits during the writeback dirtied pages again.
            phase = .fenced
            return .fence
        case .fenced where fenced && (walBytes > threshold || copies > 0):
            phase = .writingBack
            copies += 1
            return .copy
        case .fenced, .filling:
            // Below the threshold, begin the fence only when the next commit, as large as this
            // one, would cross it; past it (a first commit that jumped over it, or a fence an
            // exclusive job ended) begin it now and copy at the next commit.
            guard walBytes + growth > threshold else { phase = .filling; return .none }
            phase = .fenced
            return .fence
        }
    }

    /// The whole checkpoint now, with the fallback the WAL's length calls for: readers that
    /// overlap continuously and outlast the checkpoint's waits keep read marks in the WAL, so it
    /// never restarts on its own: past twice the threshold the reader gate closes, past the hard
    /// limit the writer waits for them.
    private mutating func finish(_ walBytes: Int) -> Action {
        phase = .filling
        copies = 0
        if walBytes <= 2 * limits.threshold { return .checkpoint(fallback: .none) }
        return .checkpoint(fallback: walBytes > limits.hardLimit ? .closeGateOrWaitForReaders : .closeGate)
    }

    /// The checkpoint after a commit restarted the WAL: nothing left for the idle checkpoint.
    mutating func commitCheckpointRestarted() { idleCheckpointDue = false }

    /// The WAL restarted (by any checkpoint); `readerEntries` was `ReaderGate.entries` just before.
    mutating func walRestarted(readerEntries: UInt64) {
        readerEntriesAtRestart = readerEntries
        lastWALBytes = 0
    }

    /// How long the idle writer waits for a job before `idle()` is due (nil: wait for jobs).
    var idleWait: Double? { idleCheckpointDue && limits.idleSeconds > 0 ? limits.idleSeconds : nil }

    /// The writer has been idle for `idleWait` seconds: checkpoint once, never with the reader
    /// gate (nobody is writing, so nothing grows the WAL meanwhile). Steps under way are
    /// dropped: with no save waiting, the whole checkpoint delays nobody.
    mutating func idle() -> Action {
        guard idleCheckpointDue else { return .none }
        idleCheckpointDue = false
        phase = .filling
        copies = 0
        return .checkpoint(fallback: .none)
    }
}
