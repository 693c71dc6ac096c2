import XCTest
@testable import UbiquityStorage

/// When idle read connections close and when the sweeper visits a store's connections next.
final class IdleReaderPolicyTests: XCTestCase {
    let ms: UInt64 = 1_000_000

    func testAConnectionClosesOnceIdlePastTheBound() {
        let p = IdleReaderPolicy(idleNanos: 100 * ms, snapshotTick: 50 * ms)
        XCTAssertFalse(p.closes(idleSince: 1_000 * ms, now: 1_099 * ms))
        XCTAssertTrue(p.closes(idleSince: 1_000 * ms, now: 1_100 * ms))
        XCTAssertFalse(p.closes(idleSince: 1_000 * ms, now: 999 * ms), "checked in after the caller read its clock: not idle, no wrap-around")
        XCTAssertFalse(IdleReaderPolicy(idleNanos: 0, snapshotTick: nil).closes(idleSince: 0, now: .max), "0: never")
    }

    func testNextVisitFollowsHeldSnapshotsFirst() {
        let p = IdleReaderPolicy(idleNanos: 10_000 * ms, snapshotTick: 50 * ms)
        XCTAssertEqual(p.nextVisit(now: 1_000 * ms, held: true, checkedOut: false, oldestIdleSince: 900 * ms), 1_050 * ms)
        XCTAssertEqual(p.nextVisit(now: 1_000 * ms, held: false, checkedOut: true, oldestIdleSince: nil), 1_050 * ms,
                       "a connection out may come back holding a snapshot")
    }

    func testNextVisitWhenTheOldestFreeConnectionGoesIdle() {
        let p = IdleReaderPolicy(idleNanos: 10_000 * ms, snapshotTick: 50 * ms)
        XCTAssertEqual(p.nextVisit(now: 1_000 * ms, held: false, checkedOut: false, oldestIdleSince: 900 * ms), 10_900 * ms)
        XCTAssertEqual(p.nextVisit(now: 20_000 * ms, held: false, checkedOut: false, oldestIdleSince: 900 * ms), 20_000 * ms + 1,
                       "overdue: at once, never in the past")
        XCTAssertNil(p.nextVisit(now: 1_000 * ms, held: false, checkedOut: false, oldestIdleSince: nil), "no connection open: nothing to watch")
    }

    func testWithoutSnapshotsABusyPoolIsVisitedOncePerIdleBound() {
        let p = IdleReaderPolicy(idleNanos: 10_000 * ms, snapshotTick: nil)
        XCTAssertEqual(p.nextVisit(now: 1_000 * ms, held: false, checkedOut: true, oldestIdleSince: nil), 11_000 * ms)
    }

    func testWithoutAnIdleBoundOnlySnapshotsAreWatched() {
        let p = IdleReaderPolicy(idleNanos: 0, snapshotTick: 50 * ms)
        XCTAssertNil(p.nextVisit(now: 1_000 * ms, held: false, checkedOut: false, oldestIdleSince: 900 * ms), "as before: forgotten when nothing is held")
        XCTAssertEqual(p.nextVisit(now: 1_000 * ms, held: false, checkedOut: true, oldestIdleSince: nil), 1_050 * ms)
        XCTAssertNil(IdleReaderPolicy(idleNanos: 0, snapshotTick: nil).nextVisit(now: 0, held: false, checkedOut: true, oldestIdleSince: 0))
    }
}
