import XCTest
@testable import UbiquityStorage

/// The writer queue's schedule on its own: events in, phases and work out, no threads.
final class WriterScheduleTests: XCTestCase {
    func testAJobMakesAWaitingQueueReadyOnceAndTheThreadRunsIt() {
        var s = WriterSchedule()
        XCTAssertEqual(s.pushed().schedule, true, "waiting → ready: onto the ready list")
        XCTAssertEqual(s.pushed().schedule, false, "already on the list: not twice")
        XCTAssertEqual(s.taken(hasJobs: true), .jobs)
        XCTAssertEqual(s.phase, .running)
        XCTAssertEqual(s.pushed().schedule, false, "a job queued while it runs: the same thread sees it when done")
        XCTAssertTrue(s.served(hasJobs: true, now: 0, idleWait: nil), "jobs left: back onto the list")
        XCTAssertEqual(s.phase, .ready)
        XCTAssertEqual(s.taken(hasJobs: true), .jobs)
        XCTAssertFalse(s.served(hasJobs: false, now: 0, idleWait: nil))
        XCTAssertEqual(s.phase, .waiting)
    }

    func testTheIdleCheckpointRunsOnlyIfNoJobCameWithinTheWait() {
        var s = WriterSchedule()
        _ = s.pushed()
        _ = s.taken(hasJobs: true)
        XCTAssertFalse(s.served(hasJobs: false, now: 1_000, idleWait: 100))
        XCTAssertEqual(s.idleDeadline, 1_100)
        XCTAssertFalse(s.tick(now: 1_099), "not yet")
        XCTAssertTrue(s.tick(now: 1_100))
        XCTAssertEqual(s.taken(hasJobs: false), .idle)
        XCTAssertFalse(s.served(hasJobs: false, now: 1_200, idleWait: nil))
        XCTAssertNil(s.idleDeadline, "once until the next commit")

        var t = WriterSchedule()
        _ = t.pushed()
        _ = t.taken(hasJobs: true)
        _ = t.served(hasJobs: false, now: 1_000, idleWait: 100)
        XCTAssertTrue(t.pushed().schedule, "a job within the wait")
        XCTAssertNil(t.idleDeadline, "ends the wait")
        XCTAssertFalse(t.tick(now: 5_000))
        XCTAssertEqual(t.taken(hasJobs: true), .jobs, "the job, not the idle checkpoint")
    }

    func testAStaleWakeUpRunsNothing() {
        var s = WriterSchedule()
        _ = s.pushed()
        XCTAssertEqual(s.taken(hasJobs: false), .nothing)
        XCTAssertFalse(s.served(hasJobs: false, now: 0, idleWait: nil))
    }

    func testCloseDrainsTheQueueThenRunsTheCloseStepOnceAndRefusesJobs() {
        var s = WriterSchedule()
        _ = s.pushed()
        _ = s.taken(hasJobs: true)
        XCTAssertFalse(s.close(), "running: its thread puts it back when done")
        XCTAssertEqual(s.pushed().accepted, false, "closing: refused")
        XCTAssertTrue(s.served(hasJobs: true, now: 0, idleWait: nil))
        XCTAssertEqual(s.taken(hasJobs: true), .jobs, "queued before the close: still run")
        XCTAssertTrue(s.served(hasJobs: false, now: 0, idleWait: 50), "closing: back for the close step")
        XCTAssertNil(s.idleDeadline)
        XCTAssertEqual(s.taken(hasJobs: false), .close)
        XCTAssertEqual(s.phase, .finished)
        XCTAssertFalse(s.close(), "once")

        var idle = WriterSchedule()
        _ = idle.pushed()
        _ = idle.taken(hasJobs: true)
        _ = idle.served(hasJobs: false, now: 0, idleWait: 100)
        XCTAssertTrue(idle.close(), "a waiting queue goes onto the list for its close step")
        XCTAssertNil(idle.idleDeadline, "no idle checkpoint after the close step")
        XCTAssertEqual(idle.taken(hasJobs: false), .close)
    }
}
