import XCTest
@testable import UbiquityStorage

/// The checkpoint policy on its own: numbers in, actions out, no database.
final class CheckpointPolicyTests: XCTestCase {
    private let mib = 1 << 20
    private func policy(threshold: Int = 32, withoutReaders: Int = 128, hardLimit: Int = 128, idle: Double = 0.1, rounds: Int = 2) -> CheckpointPolicy {
        CheckpointPolicy(limits: .init(threshold: threshold * mib, thresholdWithoutReaders: withoutReaders * mib, hardLimit: hardLimit * mib, idleSeconds: idle, copyRounds: rounds))
    }

    /// Feeds commits leaving these WAL sizes (MiB) with readers present; the actions, in order.
    private func run(_ p: inout CheckpointPolicy, _ sizes: [Int], readers: UInt64 = 1, fenced: Bool = true, writebackDone: Bool = true) -> [CheckpointPolicy.Action] {
        sizes.map { p.committed(walBytes: $0 * mib, readerEntries: readers, fenced: fenced, writebackDone: writebackDone) }
    }

    func testBelowTheThresholdNothingHappens() {
        var p = policy()
        XCTAssertEqual(run(&p, [8, 16, 24]), [.none, .none, .none], "the next commit, as large as the last, stays below")
        XCTAssertNil(p.idleWait, "nothing long left behind")
        XCTAssertEqual(p.idle(), .none)
    }

    func testTheCheckpointRunsInStepsFenceCopyThenTheRest() {
        var p = policy()
        XCTAssertEqual(run(&p, [10, 20, 28]), [.none, .none, .fence], "the next 8 MiB would cross 32: fence now")
        XCTAssertEqual(p.phase, .fenced)
        XCTAssertEqual(run(&p, [33]), [.copy], "past the threshold behind a fence: copy up to it")
        XCTAssertEqual(p.phase, .writingBack)
        XCTAssertEqual(run(&p, [34, 35], writebackDone: false), [.none, .none], "nothing while the writeback runs")
        XCTAssertEqual(run(&p, [36]), [.fence], "writeback done: a second round for what the commits meanwhile wrote")
        XCTAssertEqual(run(&p, [37]), [.copy])
        XCTAssertEqual(run(&p, [38], writebackDone: false), [.none])
        XCTAssertEqual(run(&p, [39]), [.checkpoint(fallback: .none)], "then the rest, with the sync and the restart")
        XCTAssertEqual(p.phase, .filling)
        XCTAssertEqual(run(&p, [1, 2]), [.none, .none], "the next checkpoint starts from the first round")
        var one = policy(rounds: 1)
        XCTAssertEqual(run(&one, [30, 33, 34]), [.fence, .copy, .checkpoint(fallback: .none)], "one round: the rest after its writeback")
    }

    func testAFenceBelowTheThresholdMovesUpUntilTheWALCrossesIt() {
        var p = policy()
        XCTAssertEqual(run(&p, [24, 29, 33]), [.fence, .fence, .copy], "24 + 24 > 32 already; 29 is not past it, so the fence moves up")
        var q = policy()
        XCTAssertEqual(run(&q, [24, 30, 30]), [.fence, .fence, .none], "a commit that added nothing drops the fence")
        XCTAssertEqual(q.phase, .filling)
    }

    func testACommitThatJumpsPastTheThresholdFencesThenCopies() {
        var p = policy()
        XCTAssertEqual(run(&p, [40, 41]), [.fence, .copy], "no fence stood at the jump: one commit later")
    }

    func testAFenceAnExclusiveJobEndedIsBegunAgain() {
        var p = policy()
        XCTAssertEqual(run(&p, [28]), [.fence])
        XCTAssertEqual(run(&p, [33], fenced: false), [.fence], "no fence to copy up to: begin it, copy next time")
        XCTAssertEqual(run(&p, [34]), [.copy])
    }

    func testStepsGiveWayPastOneAndAHalfTimesTheThreshold() {
        var p = policy()
        XCTAssertEqual(run(&p, [30, 33]), [.fence, .copy])
        XCTAssertEqual(run(&p, [40, 48], writebackDone: false), [.none, .none], "a slow writeback may hold the last step back")
        XCTAssertEqual(run(&p, [49], writebackDone: false), [.checkpoint(fallback: .none)], "past 48: the rest now")
        var q = policy()
        XCTAssertEqual(run(&q, [30, 70]), [.fence, .checkpoint(fallback: .closeGate)], "fenced, then past twice the threshold at once")
        var r = policy()
        XCTAssertEqual(run(&r, [60, 130]), [.fence, .checkpoint(fallback: .closeGateOrWaitForReaders)], "fenced, then past the hard limit")
    }

    func testTheLastStepsFallbackFollowsTheWALsLength() {
        var p = policy(rounds: 1)
        XCTAssertEqual(run(&p, [30, 33, 34]), [.fence, .copy, .checkpoint(fallback: .none)])
        XCTAssertEqual(run(&p, [60, 64]), [.fence, .checkpoint(fallback: .none)], "exactly twice the threshold")
        p = policy(threshold: 32, withoutReaders: 64, hardLimit: 100)
        p.walRestarted(readerEntries: 0)
        XCTAssertEqual(run(&p, [50, 65, 66], readers: 0, writebackDone: false), [.fence, .copy, .none], "unread: 64 counts")
        XCTAssertEqual(run(&p, [101], readers: 0), [.checkpoint(fallback: .closeGateOrWaitForReaders)], "the rest, past the hard limit")
    }

    func testUnreadWALUsesTheLargerThresholdUntilAReadBegins() {
        var p = policy()
        p.walRestarted(readerEntries: 7)
        XCTAssertEqual(run(&p, [60, 90, 100], readers: 7), [.none, .none, .none], "no read since the restart: 128 counts")
        XCTAssertNotNil(p.idleWait, "a WAL past the threshold is left for the idle checkpoint")
        XCTAssertEqual(run(&p, [120, 129, 130, 131, 132], readers: 7), [.fence, .copy, .fence, .copy, .checkpoint(fallback: .closeGateOrWaitForReaders)])
        var q = policy()
        q.walRestarted(readerEntries: 7)
        XCTAssertEqual(run(&q, [20, 24], readers: 7), [.none, .none])
        XCTAssertEqual(run(&q, [33], readers: 8), [.fence], "a read began: 32 counts again")
    }

    func testTheUnreadThresholdOnlyCountsWhenLarger() {
        var p = policy(threshold: 32, withoutReaders: 16)
        p.walRestarted(readerEntries: 0)
        XCTAssertEqual(run(&p, [10, 20, 33, 34], readers: 0), [.none, .none, .fence, .copy])
    }

    func testARestartForgetsTheLastCommitsSize() {
        var p = policy(rounds: 1)
        XCTAssertEqual(run(&p, [30, 33, 34]), [.fence, .copy, .checkpoint(fallback: .none)])
        p.walRestarted(readerEntries: 0)  // a read since: the 32 MiB threshold
        XCTAssertEqual(run(&p, [20]), [.fence], "growth counts from the restart (20 MiB in one commit), not from 34")
    }

    func testIdleCheckpointOnceAfterACommitThatLeftALongWAL() {
        var p = policy(idle: 0.25)
        _ = p.committed(walBytes: 40 * mib, readerEntries: 1)
        XCTAssertEqual(p.idleWait, 0.25, "the checkpoint did not restart the WAL")
        XCTAssertEqual(p.idle(), .checkpoint(fallback: .none), "never the reader gate when idle")
        XCTAssertEqual(p.phase, .filling, "steps under way are dropped")
        XCTAssertNil(p.idleWait)
        XCTAssertEqual(p.idle(), .none, "once until the next commit")
    }

    func testARestartAfterTheCommitLeavesNothingForIdle() {
        var p = policy()
        _ = p.committed(walBytes: 40 * mib, readerEntries: 1)
        p.commitCheckpointRestarted()
        XCTAssertNil(p.idleWait)
        XCTAssertEqual(p.idle(), .none)
    }

    func testIdleCheckpointOff() {
        var p = policy(idle: 0)
        _ = p.committed(walBytes: 40 * mib, readerEntries: 1)
        XCTAssertNil(p.idleWait, "idleSeconds 0: never")
    }

    func testLimitsComeFromTheConfiguration() {
        var c = StorageConfiguration()
        c.checkpointThresholdBytes = 1; c.checkpointThresholdBytesWithoutReaders = 2; c.walHardLimitBytes = 3; c.idleCheckpointSeconds = 4
        XCTAssertEqual(CheckpointPolicy(configuration: c).limits, .init(threshold: 1, thresholdWithoutReaders: 2, hardLimit: 3, idleSeconds: 4))
    }
}
