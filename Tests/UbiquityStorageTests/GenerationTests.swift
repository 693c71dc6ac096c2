import Foundation
import UbiquityTestSupport
import XCTest
@testable import UbiquityStorage

final class ManualClock: @unchecked Sendable {
    // Invariant: `now` only accessed under `lock`.
    private let lock = NSLock()
    private var now = 1000.0
    func read() -> Double { lock.lock(); defer { lock.unlock() }; return now }
    func advance(_ d: Double) { lock.lock(); now += d; lock.unlock() }
}

final class GenerationTests: StorageTestCase, @unchecked Sendable {
    /// A store with synchronous=NORMAL, two readers and a WAL checkpointed past `threshold` bytes
    /// (also its journal size limit), then `more` of the test's own settings.
    func openTwoReadersWAL(_ threshold: Int, _ more: (inout StorageConfiguration) -> Void) throws -> Store {
        try open {
            $0.synchronous = .normal
            $0.readerCount = 2
            $0.checkpointThresholdBytes = threshold; $0.checkpointThresholdBytesWithoutReaders = 0; $0.idleCheckpointSeconds = 0
            $0.journalSizeLimitBytes = threshold
            more(&$0)
        }
    }

    /// Readers pinned at a generation see identical full dumps while the writer commits
    /// thousands of saves; the WAL stays bounded while readers are always active.
    func testSnapshotStabilityUnderWritesWithBoundedWAL() async throws {
        let threshold = 256 << 10
        let s = try openTwoReadersWAL(threshold) {
            $0.gcEveryCommits = 50
            $0.gcBatchSize = 200
            $0.minimumReadableWindowSeconds = 0  // only the pin keeps the old generation
            $0.walRestartMaxReaderWait = 600  // readers wait for the in-flight ones
            $0.walHardLimitBytes = 3 * threshold  // past it the writer waits: the bound is deterministic
        }
        var seed = SaveRequest()
        seed.inserts = (0..<200).map { InsertOperation(temporaryID: "p\($0)", entity: "Person", values: ["name": .string("P\($0)"), "age": .int(Int64($0 % 100))]) }
        let ids = try await s.save(seed).permanentIDs.values.sorted()
        let pin = try s.pin(lease: 3600)
        let reference = try await s.dump(at: .token(pin.token))
        XCTAssertEqual(reference.objects.count, 200)

        let saves = 2000
        let writerDone = Locked(false)
        let maxWAL = Locked(0)
        async let readers: Int = withThrowingTaskGroup(of: Int.self) { g in
            for _ in 0..<2 {
                g.addTask {
                    var n = 0
                    while !writerDone.withLock({ $0 }) || n == 0 {
                        let d = try await s.dump(at: .token(pin.token))
                        XCTAssertEqual(d, reference)
                        let w = s.walFileSize
                        maxWAL.withLock { $0 = max($0, w) }
                        n += 1
                    }
                    return n
                }
            }
            return try await g.reduce(0, +)
        }
        for i in 0..<saves {
            var r = SaveRequest()
            let id = ids[i % ids.count]
            switch i % 3 {
            case 0: r.updates = [UpdateOperation(objectID: id, values: ["age": .int(Int64(i % 150))])]
            case 1: r.inserts = [InsertOperation(temporaryID: "x", entity: "Note", values: ["n": .int(Int64(i)), "text": .string(String(repeating: "x", count: 200))])]
            default: r.updates = [UpdateOperation(objectID: id, values: ["score": .double(Double(i))])]
            }
            _ = try await s.save(r)
            let w = s.walFileSize
            maxWAL.withLock { $0 = max($0, w) }
        }
        writerDone.withLock { $0 = true }
        let dumps = try await readers
        XCTAssertGreaterThan(dumps, 1)
        XCTAssertEqual(s.currentToken.generation, Int64(saves + 1))
        let bound = 4 * threshold  // hard limit + the frames of one save
        XCTAssertLessThanOrEqual(maxWAL.withLock { $0 }, bound, "WAL must stay bounded while readers are active (restarts \(s.walRestartCounts))")
        // the pinned generation survived GC; after unpinning it is collected and expires
        try await s.collectAllGarbage()
        let still = try await s.dump(at: .token(pin.token))
        XCTAssertEqual(still, reference)
        s.unpin(pin)
        try await s.collectAllGarbage()
        let why = await reason { _ = try await s.dump(at: .token(pin.token)) }
        XCTAssertEqual(why, .generationExpired)
        let cur = try await s.dump()
        XCTAssertEqual(cur.objects.count, 200 + (0..<saves).filter { $0 % 3 == 1 }.count)
        let problems = try await s.integrityCheck()
        XCTAssertEqual(problems, [])
    }

    /// A reader stuck inside its transaction does not hold the writer up: saves keep committing
    /// without the writer ever waiting, and the WAL restarts once the reader is done.
    func testReadersNeverBlockTheWriter() async throws {
        let threshold = 64 << 10
        let s = try open { $0.checkpointThresholdBytes = threshold; $0.checkpointThresholdBytesWithoutReaders = 0; $0.idleCheckpointSeconds = 0; $0.journalSizeLimitBytes = threshold; $0.readerCount = 2; $0.walHardLimitBytes = 1 << 30 }
        try await insert(s, "Note", ["n": 0])
        let inside = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        let held = Task {
            try await s.onReader { conn -> Int in
                var n = 0
                try conn.query("SELECT count(*) FROM t_Note") { n = Int($0.int(0)) }
                inside.signal()
                release.wait()   // holds its read transaction (and WAL read mark) open
                return n
            }
        }
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in DispatchQueue.global().async { inside.wait(); c.resume() } }
        for i in 0..<300 {
            try await insert(s, "Note", ["n": .int(Int64(i)), "text": .string(String(repeating: "w", count: 1000))])
        }
        XCTAssertGreaterThan(s.walFileSize, 2 * threshold, "the held reader kept the WAL from restarting")
        XCTAssertEqual(s.writerBusyWaits, 0, "the writer never waited for a reader")
        release.signal()
        let seen = try await held.value
        XCTAssertEqual(seen, 1, "the held reader saw its snapshot")
        // the drained gate lets the writer restart the WAL; one more commit and a read prove it
        try await insert(s, "Note", ["n": -1])
        _ = try await s.objectIDs(entity: "Note")
        try await insert(s, "Note", ["n": -2])
        XCTAssertLessThanOrEqual(s.walFileSize, 2 * threshold)
        XCTAssertEqual(s.writerBusyWaits, 0)
    }

    /// Short readers that overlap all the time: the WAL still restarts at every threshold
    /// crossing without the reader gate ever closing (the writer waits for the readers already
    /// in flight, checkpoints the whole WAL, waits for the readers from before, restarts the WAL).
    /// (A restart can still be skipped now and then — a reader briefly holding a WAL lock — and
    /// is retried after the next commit; the threshold is several saves' worth of WAL so one skip
    /// does not reach the gate's 2x fallback. With async reader tasks there are gaps between
    /// reads, so this is a guard against the gate closing, not a proof that the waits are needed:
    /// it also passes with checkpointReaderWait = 0.)
    func testWALRestartsUnderContinuousReadsWithoutClosingTheGate() async throws {
        let threshold = 256 << 10
        let s = try openTwoReadersWAL(threshold) {
            $0.checkpointReaderWait = 600   // short readers always finish: deterministic
            $0.walHardLimitBytes = 1 << 30
        }
        let first = try await insert(s, "Note", ["n": 0])
        let writerDone = Locked(false)
        async let reads: Int = withThrowingTaskGroup(of: Int.self) { g in
            for _ in 0..<4 {
                g.addTask {
                    var n = 0
                    while !writerDone.withLock({ $0 }) || n == 0 {
                        let o = try await s.object(first)
                        XCTAssertEqual(o.values["n"], .int(0))
                        n += 1
                    }
                    return n
                }
            }
            return try await g.reduce(0, +)
        }
        var maxWAL = 0
        for i in 0..<300 {
            try await insert(s, "Note", ["n": .int(Int64(i + 1)), "text": .string(String(repeating: "w", count: 1000))])
            maxWAL = max(maxWAL, s.walFileSize)
        }
        writerDone.withLock { $0 = true }
        let n = try await reads
        XCTAssertGreaterThan(n, 0)
        let st = s.walStats
        XCTAssertGreaterThan(st.restarts, 0, "the WAL restarted")
        XCTAssertEqual(st.gateClosures, 0, "no reader was held at the gate (\(st))")
        XCTAssertLessThanOrEqual(maxWAL, 2 * threshold, "restarted at each threshold crossing")
        XCTAssertEqual(s.writerBusyWaits, 0)
        let ids = try await s.objectIDs(entity: "Note")
        XCTAssertEqual(ids.count, 301)
    }

    /// The writer restarts the WAL with RESTART, which keeps the file (capped at
    /// `journalSizeLimitBytes`) so later commits overwrite its blocks instead of growing it from
    /// zero; the checkpoint policy measures the WAL's content (frames since the restart), not the
    /// file. A policy still looking at the file would checkpoint after every commit once the file
    /// had reached the threshold, and a TRUNCATE would leave it empty after each restart.
    func testWALRestartKeepsTheFileAndCheckpointsByContent() async throws {
        let threshold = 256 << 10
        let s = try open { $0.checkpointThresholdBytes = threshold; $0.checkpointThresholdBytesWithoutReaders = 0; $0.idleCheckpointSeconds = 0; $0.journalSizeLimitBytes = threshold; $0.walHardLimitBytes = 1 << 30 }
        let saves = 200
        let text = String(repeating: "w", count: 2000)  // each save: a page or more of WAL
        var maxWAL = 0, sawEmptyAfterRestart = false
        for i in 0..<saves {
            try await insert(s, "Note", ["n": .int(Int64(i)), "text": .string(text)])
            let w = s.walFileSize
            maxWAL = max(maxWAL, w)
            if s.walStats.restarts > 0 && w == 0 { sawEmptyAfterRestart = true }
        }
        let st = s.walStats
        XCTAssertGreaterThan(st.restarts, 2, "the WAL restarted several times (\(st))")
        XCTAssertEqual(st.gateClosures, 0)
        XCTAssertFalse(sawEmptyAfterRestart, "RESTART keeps the WAL file (TRUNCATE would empty it)")
        XCTAssertLessThanOrEqual(maxWAL, 2 * threshold, "the file stays near its cap")
        // At least a threshold's worth of commits between checkpoints: counted by content, a
        // checkpoint follows every ~threshold bytes of commits, never every commit.
        XCTAssertLessThan(st.checkpoints, saves / 4, "checkpoints by WAL content, not file size (\(st))")
        let ids = try await s.objectIDs(entity: "Note")
        XCTAssertEqual(ids.count, saves)
        let problems = try await s.integrityCheck()
        XCTAssertEqual(problems, [])
    }

    /// While nobody has begun a read since the WAL last restarted, the writer checkpoints at the
    /// larger threshold (`checkpointThresholdBytesWithoutReaders`); the first read brings the
    /// smaller one back at the next commit, and after that restart an unread WAL grows long again.
    /// A policy that ignored readers would checkpoint at the small threshold throughout (or,
    /// ignoring the read, let readers pay for a long WAL).
    func testAnUnreadWALIsCheckpointedAtTheLargerThreshold() async throws {
        let small = 64 << 10, large = 512 << 10
        let s = try open {
            $0.checkpointThresholdBytes = small; $0.checkpointThresholdBytesWithoutReaders = large
            $0.journalSizeLimitBytes = large; $0.walHardLimitBytes = 1 << 30
            $0.idleCheckpointSeconds = 0  // only commits checkpoint here (the next test covers idle)
        }
        let text = String(repeating: "u", count: 2000)  // each save: a page or more of WAL
        var first: ObjectID?
        var written = 0
        func writeUntil(_ done: () -> Bool, _ max: Int) async throws -> Int {
            var n = 0
            while !done() && n < max {
                let id = try await insert(s, "Note", ["n": .int(Int64(n)), "text": .string(text)])
                if first == nil { first = id }
                n += 1; written += 1
            }
            return n
        }
        // No reader yet: the WAL passes the small threshold several times over, no checkpoint.
        _ = try await writeUntil({ s.walFileSize > 4 * small }, 2000)
        XCTAssertEqual(s.walStats.checkpoints, 0, "an unread WAL is not checkpointed at the small threshold (\(s.walStats))")
        // Up to the large threshold it restarts, then starts over long.
        _ = try await writeUntil({ s.walStats.restarts > 0 }, 4000)
        XCTAssertEqual(s.walStats.restarts, 1, "restarted at the large threshold (\(s.walStats))")
        XCTAssertGreaterThan(s.walFileSize, 4 * small, "the file keeps the large WAL's size (journal size limit)")
        // 12 commits (2-6 frames each): past the small threshold, far from the large one.
        _ = try await writeUntil({ false }, 12)
        XCTAssertEqual(s.walStats.checkpoints, 1, "unread commits past the small threshold, no checkpoint (\(s.walStats))")
        // A read: the next commits checkpoint at the small threshold (so the WAL held more than
        // that), in steps — fence, copy, the rest once the copied pages are written back — and
        // the WAL restarts.
        let o = try await s.object(first!)
        XCTAssertEqual(o.values["n"], .int(0))
        // (the writer checkpoints after acknowledging; the next save waits for it; the WAL is
        // already past 1.5x the small threshold, so the whole checkpoint follows the fence)
        let commits = try await writeUntil({ s.walStats.restarts > 1 }, 200)
        XCTAssertLessThanOrEqual(commits, 3, "a fence, then the checkpoint (\(s.walStats))")
        XCTAssertEqual(s.walStats.checkpoints, 2, "the commits after a read checkpoint (\(s.walStats))")
        XCTAssertEqual(s.walStats.restarts, 2)
        // Nobody read since that restart: long again.
        _ = try await writeUntil({ false }, 12)
        XCTAssertEqual(s.walStats.checkpoints, 2, "(\(s.walStats))")
        XCTAssertEqual(s.walStats.gateClosures, 0)
        let ids = try await s.objectIDs(entity: "Note")
        XCTAssertEqual(ids.count, written)
        let problems = try await s.integrityCheck()
        XCTAssertEqual(problems, [])
    }

    /// A writer left idle after commits that made the WAL longer than the threshold (nobody
    /// read, so the larger threshold was in force) checkpoints and restarts it by itself: reads
    /// after a write-only burst do not keep paying for the long WAL until the next save.
    func testAnIdleWriterCheckpointsALongWAL() async throws {
        let small = 64 << 10
        let s = try open {
            $0.checkpointThresholdBytes = small; $0.checkpointThresholdBytesWithoutReaders = 1 << 30
            $0.journalSizeLimitBytes = 1 << 30; $0.walHardLimitBytes = 1 << 30
            $0.idleCheckpointSeconds = 0.05
        }
        let text = String(repeating: "i", count: 2000)
        var ids: [ObjectID] = []
        for n in 0..<40 { ids.append(try await insert(s, "Note", ["n": .int(Int64(n)), "text": .string(text)])) }
        XCTAssertGreaterThan(s.walFileSize, 2 * small, "the unread WAL grew past the threshold")
        // No save, no read: the idle writer restarts the WAL on its own timer, which signals
        // nothing: polled (bounded), no event exists.
        _ = pollUntil(seconds: 20) { s.walStats.restarts > 0 }
        XCTAssertEqual(s.walStats.restarts, 1, "restarted while idle (\(s.walStats))")
        XCTAssertGreaterThanOrEqual(s.idleCheckpointCount, 1)
        XCTAssertEqual(s.walStats.gateClosures, 0, "an idle checkpoint never closes the reader gate")
        // Once, not again and again: the restart leaves nothing due.
        let checkpoints = s.walStats.checkpoints
        let o = try await s.object(ids[39])
        XCTAssertEqual(o.values["n"], .int(39))
        XCTAssertEqual(s.walStats.checkpoints, checkpoints)
        let all = try await s.objectIDs(entity: "Note")
        XCTAssertEqual(all.count, 40)
    }

    /// A GC batch finds ended versions through the partial index `ubq_gc_<root>` instead of
    /// scanning the table (which cost the writer 20-50 ms every 256 commits on a growing store);
    /// SQLite uses a partial index only when the query's own condition implies the index's.
    func testGCBatchUsesThePartialIndex() async throws {
        let s = try open()
        let c = s.readConnections.checkout()!
        defer { s.readConnections.checkin(c) }
        var plan: [String] = []
        try c.query("EXPLAIN QUERY PLAN " + WriterEngine.gcVersionsSQL(table: q(ResolvedModel.tableName(root: "Note"))), [.integer(5), .integer(10)]) {
            plan.append($0.text(3))
        }
        XCTAssertTrue(plan.contains { $0.contains("USING") && $0.contains("ubq_gc_Note") }, "GC batch plan: \(plan)")
        XCTAssertFalse(plan.contains { $0.hasPrefix("SCAN") }, "no scan of the table or of a whole index: \(plan)")
    }

    func testPinsAreLeasesAndGCIsIncremental() async throws {
        let clock = ManualClock()
        let s = try open { $0.clock = { clock.read() }; $0.gcEveryCommits = 0; $0.minimumReadableWindowSeconds = 0 }
        let id = try await insert(s, "Person", ["name": "v1"])
        let pin = try s.pin(lease: 10)
        for i in 2...30 { _ = try await update(s, id, ["name": .string("v\(i)")]) }
        try await s.collectAllGarbage()
        let atPin = try await s.object(id, at: .token(pin.token))
        XCTAssertEqual(atPin.values["name"], "v1", "pinned generation readable")
        clock.advance(5)
        try s.renew(pin, lease: 10)
        clock.advance(11)  // lease expired without renewal
        XCTAssertEqual(s.pinCount, 0)
        XCTAssertThrowsError(try s.renew(pin, lease: 10))
        // incremental: small batches, several calls
        let first = try await s.collectGarbage(batchSize: 10)
        XCTAssertEqual(first, 10)
        var total = first
        while true { let n = try await s.collectGarbage(batchSize: 10); total += n; if n < 10 { break } }
        XCTAssertEqual(total, 29, "29 superseded versions collected")
        let why = await reason { _ = try await s.object(id, at: .token(pin.token)) }
        XCTAssertEqual(why, .generationExpired)
        let cur = try await s.object(id)
        XCTAssertEqual(cur.values["name"], "v30")
        XCTAssertEqual(cur.version, 30)
    }

    func testGenerationsSurviveReopen() async throws {
        let sid = UUID()
        var s: Store? = try open("re", id: sid)
        XCTAssertThrowsError(try Store.open(path: dir + "/re.sqlite", id: sid), "a second Store on an open file would be a second writer") {
            XCTAssertEqual(($0 as? StorageError)?.reason, .busy)
        }
        let id = try await insert(s!, "Note", ["n": 1])
        _ = try await update(s!, id, ["n": 2])
        let t1 = GenerationToken(storeID: sid, epoch: s!.currentToken.epoch, generation: 1)
        s!.close(); s = nil
        let s2 = try open("re", id: sid, model: nil)
        XCTAssertEqual(s2.currentToken.generation, 2)
        let old = try await s2.object(id, at: .token(t1))
        XCTAssertEqual(old.values["n"], 1)
        XCTAssertEqual(s2.modelVersionHash, Fixtures.model.versionHash)
    }

    /// The query layer's entry point: SQL at a generation through the mapping.
    func testReadContextRunsSQLAtAGeneration() async throws {
        let s = try open()
        var r = SaveRequest()
        r.inserts = (1...5).map { InsertOperation(temporaryID: "n\($0)", entity: "Note", values: ["n": .int(Int64($0)), "text": "x"]) }
        let first = try await s.save(r)
        _ = try await update(s, first.permanentIDs["n1"]!, ["n": 100])
        try await insert(s, "Note", ["n": 6])
        let m = try s.tableMapping()["Note"]!
        let sql = "SELECT \(q(m.columns["n"]!)) FROM \(q(m.table)) WHERE \(m.visible(1)) AND \(q(m.columns["n"]!)) >= ?2 ORDER BY 1"
        let old = try await s.read(at: .token(first.token)) { ctx in try ctx.rows(sql, [.int(ctx.generation), .int(2)]) }
        XCTAssertEqual(old.map { $0[0] }, [2, 3, 4, 5])
        let now = try await s.read { ctx in try ctx.rows(sql, [.int(ctx.generation), .int(2)]) }
        XCTAssertEqual(now.map { $0[0] }, [2, 3, 4, 5, 6, 100])
        let denied = await reason { _ = try await s.read { ctx in try ctx.rows("SELECT * FROM sqlite_temp_master, other_table") } }
        XCTAssertNotNil(denied)
        let objs = try await s.read(at: .token(first.token)) { ctx in try ctx.objects([first.permanentIDs["n1"]!]) }
        XCTAssertEqual(objs.first??.values["n"], 1)
    }
}
