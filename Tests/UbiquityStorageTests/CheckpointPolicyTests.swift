import XCTest
@testable import UbiquityStorage

/// The checkpoint policy on its own: numbers in, actions out, no database.
final class CheckpointPolicyTests: XCTestCase {
    private let mib = 1 << 20
    private func policy(threshold: Int = 32, withoutReaders: Int = 128, hardLimit: Int = 128, idle: Double = 0.1) -> CheckpointPolicy {
        CheckpointPolicy(limits: .init(threshold: threshold * mib, thresholdWithoutReaders: withoutReaders * mib, hardLimit: hardLimit * mib, idleSeconds: idle))
    }

    func testBelowTheThresholdNothingHappens() {
        var p = policy()
        XCTAssertEqual(p.committed(walBytes: 32 * mib, readerEntries: 1), .none)
        XCTAssertNil(p.idleWait, "nothing long left behind")
        XCTAssertEqual(p.idle(), .none)
    }

    func testPastTheThresholdACheckpointWithoutFallback() {
        var p = policy()
        XCTAssertEqual(p.committed(walBytes: 33 * mib, readerEntries: 1), .checkpoint(fallback: .none))
        XCTAssertEqual(p.committed(walBytes: 64 * mib, readerEntries: 1), .checkpoint(fallback: .none), "exactly twice the threshold")
    }

    func testPastTwiceTheThresholdTheReaderGateThenPastTheHardLimitTheReadersAreAwaited() {
        var p = policy()
        XCTAssertEqual(p.committed(walBytes: 64 * mib + 1, readerEntries: 1), .checkpoint(fallback: .closeGate))
        XCTAssertEqual(p.committed(walBytes: 128 * mib, readerEntries: 1), .checkpoint(fallback: .closeGate))
        XCTAssertEqual(p.committed(walBytes: 128 * mib + 1, readerEntries: 1), .checkpoint(fallback: .closeGateOrWaitForReaders))
    }

    func testUnreadWALUsesTheLargerThresholdUntilAReadBegins() {
        var p = policy()
        p.walRestarted(readerEntries: 7)
        XCTAssertEqual(p.committed(walBytes: 100 * mib, readerEntries: 7), .none, "no read since the restart")
        XCTAssertNotNil(p.idleWait, "a WAL past the threshold is left for the idle checkpoint")
        XCTAssertEqual(p.committed(walBytes: 129 * mib, readerEntries: 7), .checkpoint(fallback: .closeGateOrWaitForReaders))
        XCTAssertEqual(p.committed(walBytes: 33 * mib, readerEntries: 8), .checkpoint(fallback: .none), "a read began")
    }

    func testTheUnreadThresholdOnlyCountsWhenLarger() {
        var p = policy(threshold: 32, withoutReaders: 16)
        p.walRestarted(readerEntries: 0)
        XCTAssertEqual(p.committed(walBytes: 20 * mib, readerEntries: 0), .none)
        XCTAssertEqual(p.committed(walBytes: 33 * mib, readerEntries: 0), .checkpoint(fallback: .none))
    }

    func testIdleCheckpointOnceAfterACommitThatLeftALongWAL() {
        var p = policy(idle: 0.25)
        _ = p.committed(walBytes: 40 * mib, readerEntries: 1)
        XCTAssertEqual(p.idleWait, 0.25, "the checkpoint did not restart the WAL")
        XCTAssertEqual(p.idle(), .checkpoint(fallback: .none), "never the reader gate when idle")
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
