import Foundation
import UbiquityTestSupport
import XCTest
@testable import UbiquityStorage

/// Checkpoints in steps (docs/storage.md rule 5): past the threshold the writer copies the WAL up
/// to a fence begun one commit earlier (no database sync), the copied pages are written back on
/// the writeback thread, and only then does the whole checkpoint — sync and restart — run.
final class CheckpointStepsTests: StorageTestCase, @unchecked Sendable {
    private func openSmallWAL(_ threshold: Int = 64 << 10) throws -> Store {
        try open {
            $0.checkpointThresholdBytes = threshold; $0.checkpointThresholdBytesWithoutReaders = 0; $0.idleCheckpointSeconds = 0
            $0.journalSizeLimitBytes = threshold; $0.walHardLimitBytes = 1 << 30
        }
    }

    /// Every restart is preceded by its copy steps (rounds), each of which the fence stopped short of the WAL's end (a
    /// fence that did not hold would let the copy reach the end and sync the database file on the
    /// writer, as before the steps); the pages it copied get written back; nothing is lost.
    func testCheckpointsCopyBehindAFenceThenRestart() async throws {
        let s = try openSmallWAL()
        let text = String(repeating: "s", count: 2000)  // each save: a page or more of WAL
        var ids: [ObjectID] = []
        func saveUntil(restarts: Int) async throws {
            while s.walStats.restarts < restarts && ids.count < 3000 {
                ids.append(try await insert(s, "Note", ["n": .int(Int64(ids.count)), "text": .string(text)]))
            }
        }
        // The first checkpoint may take the WAL past twice its threshold at once (the schema the
        // store made at open is in it too), and then runs whole: count from after it.
        try await saveUntil(restarts: 1)
        let copiesBefore = s.checkpointStepStats.copies
        try await saveUntil(restarts: 4)
        let st = s.walStats, steps = s.checkpointStepStats
        XCTAssertEqual(st.restarts, 4, "(\(st), \(steps))")
        // At least the first round before each restart (a later round may give way to the whole
        // checkpoint when the WAL reaches 1.5x its threshold before a writeback is done).
        XCTAssertGreaterThanOrEqual(steps.copies - copiesBefore, 3, "copy steps before each restart (\(steps))")
        XCTAssertEqual(steps.copiesToTheEnd, 0, "the fence kept every copy short of the WAL's end (\(steps))")
        XCTAssertEqual(st.gateClosures, 0)
        // The writeback thread reports each writeback when done: an event, polled (bounded).
        XCTAssertTrue(pollUntil(seconds: 20) { s.checkpointStepStats.writebacks == s.checkpointStepStats.copies }, "\(s.checkpointStepStats)")
        for (n, id) in ids.enumerated() where n % 97 == 0 || n == ids.count - 1 {
            let o = try await s.object(id)
            XCTAssertEqual(o.values["n"], .int(Int64(n)))
        }
        let all = try await s.objectIDs(entity: "Note")
        XCTAssertEqual(all.count, ids.count)
        let problems = try await s.integrityCheck()
        XCTAssertEqual(problems, [])
    }

    /// A fence begun after a commit must not stop an exclusive job's checkpoint: `Store.checkpoint`
    /// TRUNCATEs right after such a commit (a fence still holding its read transaction would make
    /// it wait out the busy timeout and fail SQLITE_BUSY).
    func testAnExclusiveCheckpointRightAfterAFenceReachesTheEnd() async throws {
        let s = try openSmallWAL()
        // One commit of ~40 KiB of WAL: the next as large would cross 64 KiB, so the fence begins.
        _ = try await insert(s, "Note", ["n": .int(0), "text": .string(String(repeating: "f", count: 36_000))])
        XCTAssertEqual(s.walStats.checkpoints, 0)
        let r = try await s.checkpoint(truncate: true)
        XCTAssertEqual(r.walFrames, r.checkpointedFrames)
        XCTAssertEqual(s.walFileSize, 0, "TRUNCATE went through")
        // Saves go on and checkpoint in steps again.
        for n in 1...40 { _ = try await insert(s, "Note", ["n": .int(Int64(n)), "text": .string(String(repeating: "g", count: 6000))]) }
        XCTAssertGreaterThan(s.checkpointStepStats.copies, 0)
        let all = try await s.objectIDs(entity: "Note")
        XCTAssertEqual(all.count, 41)
    }
}
