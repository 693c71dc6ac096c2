import Foundation
import UbiquityTestSupport
import XCTest
@testable import UbiquityStorage

/// Read connections keep their SQLite snapshot between jobs (`HeldSnapshot`, docs/storage.md
/// rule 4) and reuse it only for reads at a generation it contains, on the model it was taken with.
final class HeldSnapshotTests: StorageTestCase, @unchecked Sendable {
    /// The store's reader connections, checked out, in a fixed order.
    func checkoutAll(_ s: Store) -> [Connection] {
        (0..<s.config.readerCount).map { _ in s.readConnections.checkout()! }.sorted { ObjectIdentifier($0) < ObjectIdentifier($1) }
    }

    /// Every reader connection in turn: `body(i)` runs while connection i is the only free one,
    /// so the read it makes lands on that connection.
    func onEachConnection(_ s: Store, _ body: (Int) throws -> Void) rethrows {
        for i in 0..<s.config.readerCount {
            let all = checkoutAll(s)
            s.readConnections.checkin(all[i])
            defer { for (j, c) in all.enumerated() where j != i { s.readConnections.checkin(c) } }
            try body(i)
        }
    }

    /// The snapshot each connection holds (nil: none), in `checkoutAll`'s order, ending none.
    func heldSnapshots(_ s: Store) -> [HeldSnapshot?] {
        let conns = checkoutAll(s)
        defer { conns.forEach { s.readConnections.checkin($0) } }
        return conns.map { $0.heldSnapshot }
    }

    /// Runs `read(t)` in a loop on `threads` threads until `stop` (and each ran at least `min`
    /// times); returns what they reported as failures.
    func readLoops(threads: Int, min: Int = 1, stop: Locked<Bool>, _ read: @escaping @Sendable (Int) throws -> [String], while body: () async throws -> Void) async rethrows -> [String] {
        let failures = Locked<[String]>([])
        let group = DispatchGroup()
        for t in 0..<threads {
            group.enter()
            Thread {
                defer { group.leave() }
                var n = 0
                while !stop.withLock({ $0 }) || n < min {
                    do { let f = try read(t); if !f.isEmpty { failures.withLock { $0 += f } } } catch { failures.withLock { $0.append("thread \(t): \(error)") } }
                    n += 1
                }
            }.start()
        }
        try await body()
        stop.withLock { $0 = true }
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in group.notify(queue: .global()) { c.resume() } }
        return failures.withLock { Array($0.prefix(10)) }
    }

    func seed(_ s: Store, _ n: Int = 20) async throws -> [ObjectID] {
        var r = SaveRequest()
        r.inserts = (0..<n).map { InsertOperation(temporaryID: "p\($0)", entity: "Person", values: ["name": .string("P\($0)"), "age": .int(Int64($0))]) }
        return try await s.save(r).permanentIDs.values.sorted()
    }

    /// A held snapshot never serves a read at a generation it does not contain: after a save, a
    /// `.current` read on every connection (each of which held a snapshot from before the save)
    /// sees it, through `read`, `readSync` and `objectsSync` (its one-statement path included);
    /// while a pinned read at an older generation does reuse the held snapshot, with its rows.
    func testHeldSnapshotServesOnlyGenerationsItContains() async throws {
        let s = try open { $0.readerSnapshotHoldMilliseconds = 60_000 }
        let ids = try await seed(s)
        let pin = try s.pin(lease: 3600)
        for round in 1...5 {
            // every connection holds a snapshot taken before this round's save
            try onEachConnection(s) { _ in _ = try s.readSync(at: .token(pin.token)) { ctx in try ctx.objects([ids[0]]) } }
            let before = heldSnapshots(s)
            XCTAssertTrue(before.allSatisfy { $0 != nil }, "round \(round): every connection keeps its snapshot")
            _ = try await update(s, ids[0], ["age": .int(Int64(100 + round))])
            try onEachConnection(s) { i in
                let a = try s.readSync { ctx in try ctx.objects([ids[0]]) }
                XCTAssertEqual(a.first??.values["age"], .int(Int64(100 + round)), "round \(round) connection \(i): readSync")
                let b = try s.objectsSync([ids[0]]) { $1 }   // one statement: autocommit unless a snapshot serves it
                XCTAssertEqual(b.first??.values["age"], .int(Int64(100 + round)), "round \(round) connection \(i): objectsSync")
                let c = try s.objectsSync(Array(ids.prefix(3))) { $1 }
                XCTAssertEqual(c.first??.values["age"], .int(Int64(100 + round)), "round \(round) connection \(i): objectsSync, several")
            }
            let d = try await s.read { ctx in try ctx.objects([ids[0]]) }
            XCTAssertEqual(d.first??.values["age"], .int(Int64(100 + round)), "round \(round): async read")
            // pinned reads reuse a snapshot (the fast path) and see the pinned generation only
            try onEachConnection(s) { i in
                let p = try s.readSync(at: .token(pin.token)) { ctx in (ctx.token, try ctx.objects(ids)) }
                XCTAssertEqual(p.0, pin.token)
                XCTAssertEqual(p.1.map { $0?.values["age"] }, (0..<ids.count).map { .int(Int64($0)) }, "round \(round) connection \(i): pinned")
            }
            let reused = heldSnapshots(s)
            XCTAssertTrue(reused.allSatisfy { ($0?.generation ?? -1) == s.currentToken.generation }, "round \(round): snapshots from after the save")
            try onEachConnection(s) { _ in _ = try s.readSync(at: .token(pin.token)) { ctx in try ctx.objects([ids[0]]) } }
            XCTAssertEqual(heldSnapshots(s).map { $0?.began }, reused.map { $0?.began }, "round \(round): pinned reads reused the held snapshots")
        }
    }

    /// Pinned reads on more threads than connections, and async reads, while saves run: each
    /// returns exactly the pinned generation's rows; `.current` reads never go back in time
    /// and see every acknowledged save.
    func testPinnedReadsDuringWritesReturnThePinnedGeneration() async throws {
        let s = try open { $0.readerSnapshotHoldMilliseconds = 20; $0.gcEveryCommits = 15; $0.gcBatchSize = 50 }
        let ids = try await seed(s, 40)
        let pin = try s.pin(lease: 3600)
        let reference = try await s.objects(ids, at: .token(pin.token))
        let acked = Locked<Int64>(0)
        let lastSeen = Locked([Int64](repeating: -1, count: 4))
        let failures = try await readLoops(threads: 4, min: 5, stop: Locked(false), { t in
            var f: [String] = []
            let got = try s.readSync(at: .token(pin.token)) { ctx in try ctx.objects(ids) }
            if got != reference { f.append("thread \(t): pinned read differs") }
            let floor = acked.withLock { $0 }
            let cur = try s.readSync { ctx in try ctx.objects([ids[0]]) }
            guard case .double(let v)? = cur.first??.values["score"] else { return f + ["thread \(t): no score"] }
            let seen = Int64(v), last = lastSeen.withLock { $0[t] }
            if seen < floor { f.append("thread \(t): current read missed acknowledged save \(floor) (saw \(seen))") }
            if seen < last { f.append("thread \(t): current read went back from \(last) to \(seen)") }
            lastSeen.withLock { $0[t] = seen }
            return f
        }, while: {
            for i in 1...150 {
                _ = try await update(s, ids[0], ["score": .double(Double(i))])
                acked.withLock { $0 = Int64(i) }
                if i % 10 == 0 { let a = try await s.objects(ids, at: .token(pin.token)); XCTAssertEqual(a, reference) }
            }
        })
        XCTAssertEqual(failures, [])
    }

    /// Continuous pinned reads that keep snapshots (a hold far longer than the test) and saves:
    /// the writer ends held snapshots before it checkpoints, so the WAL restarts at each
    /// threshold crossing as without held snapshots, and the reader gate never closes.
    func testWALStaysBoundedUnderContinuousPinnedReads() async throws {
        let threshold = 256 << 10
        let s = try open {
            $0.readerSnapshotHoldMilliseconds = 60_000
            $0.checkpointThresholdBytes = threshold; $0.checkpointThresholdBytesWithoutReaders = 0; $0.idleCheckpointSeconds = 0; $0.journalSizeLimitBytes = threshold
            $0.checkpointReaderWait = 600; $0.walHardLimitBytes = 1 << 30
        }
        let ids = try await seed(s, 10)
        let pin = try s.pin(lease: 3600)
        var maxWAL = 0
        let failures = try await readLoops(threads: 3, stop: Locked(false), { t in
            let got = try s.readSync(at: .token(pin.token)) { ctx in try ctx.objects([ids[t]]) }
            return got.first??.values["age"] == .int(Int64(t)) ? [] : ["thread \(t): wrong row"]
        }, while: {
            for i in 0..<300 {
                try await insert(s, "Note", ["n": .int(Int64(i)), "text": .string(String(repeating: "w", count: 1000))])
                maxWAL = max(maxWAL, s.walFileSize)
            }
        })
        XCTAssertEqual(failures, [])
        let st = s.walStats
        XCTAssertGreaterThan(st.restarts, 2, "the WAL restarted (\(st))")
        XCTAssertEqual(st.gateClosures, 0, "(\(st))")
        XCTAssertLessThanOrEqual(maxWAL, 2 * threshold, "restarted at each threshold crossing (\(st))")
        XCTAssertEqual(s.writerBusyWaits, 0)
    }

    /// Idle connections' snapshots end once they are older than the hold (the sweeper), and a
    /// hold of 0 keeps none (every job its own BEGIN … COMMIT, as before).
    func testIdleSnapshotsEndAfterTheHoldAndHoldZeroKeepsNone() async throws {
        // A hold far longer than the reads take: with 30 ms, under ThreadSanitizer (reads ~10x
        // slower) the sweeper ended the first connection's snapshot before the check below.
        let s = try open { $0.readerSnapshotHoldMilliseconds = 1000 }
        let ids = try await seed(s, 3)
        try onEachConnection(s) { _ in _ = try s.readSync { ctx in try ctx.objects(ids) } }
        XCTAssertTrue(heldSnapshots(s).allSatisfy { $0 != nil })
        // The sweeper runs on its own timer and tells no one: polled (bounded), no event exists.
        let ended = pollUntil(seconds: 10) { heldSnapshots(s).allSatisfy { $0 == nil } }
        XCTAssertTrue(ended, "the sweeper ended the idle snapshots")
        let conns = checkoutAll(s)
        XCTAssertTrue(conns.allSatisfy { $0.isAutocommit })
        conns.forEach { s.readConnections.checkin($0) }

        let z = try open("zero") { $0.readerSnapshotHoldMilliseconds = 0 }
        let zids = try await seed(z, 3)
        let pin = try z.pin(lease: 60)
        try onEachConnection(z) { _ in
            _ = try z.readSync { ctx in try ctx.objects(zids) }
            _ = try z.readSync(at: .token(pin.token)) { ctx in try ctx.objects(zids) }
            _ = try z.objectsSync(zids) { $1 }
        }
        _ = try await z.read { ctx in try ctx.objects(zids) }
        let zc = checkoutAll(z)
        XCTAssertTrue(zc.allSatisfy { $0.heldSnapshot == nil && $0.isAutocommit }, "hold 0 keeps no read transaction")
        zc.forEach { z.readConnections.checkin($0) }
    }

    /// Closing the reader gate (the writer's WAL-restart fallback) ends every idle snapshot and
    /// keeps new ones from outliving their job until it reopens; a read whose SQL fails (as an
    /// interrupted one does) ends the snapshot it ran in; closing the store with held snapshots leaves an empty WAL
    /// (its final TRUNCATE checkpoint found no reader).
    func testGateCloseCancellationAndCloseEndHeldSnapshots() async throws {
        let s = try open { $0.readerSnapshotHoldMilliseconds = 60_000 }
        let ids = try await seed(s, 3)
        try onEachConnection(s) { _ in _ = try s.readSync { ctx in try ctx.objects(ids) } }
        XCTAssertTrue(heldSnapshots(s).allSatisfy { $0 != nil })
        XCTAssertTrue(s.readerGate.close(), "no reader in flight")
        XCTAssertTrue(heldSnapshots(s).allSatisfy { $0 == nil }, "closing the gate ended the held snapshots")
        _ = try s.readSync { ctx in try ctx.objects(ids) }   // maxWait: goes ahead after the wait
        XCTAssertTrue(heldSnapshots(s).allSatisfy { $0 == nil }, "no snapshot kept while the gate is closed")
        s.readerGate.open()
        _ = try s.readSync { ctx in try ctx.objects(ids) }
        XCTAssertEqual(heldSnapshots(s).compactMap { $0 }.count, 1)

        // a read cancelled before it starts leaves the connection usable; one whose SQL fails ends the snapshot it ran in
        try onEachConnection(s) { _ in _ = try s.readSync { ctx in try ctx.objects(ids) } }
        XCTAssertThrowsError(try s.readSync(isCancelled: { true }) { ctx in try ctx.objects(ids) })
        try onEachConnection(s) { _ in
            XCTAssertThrowsError(try s.readSync { ctx in try ctx.conn.run("SELECT no_such_column FROM t_Person") })
        }
        let conns = checkoutAll(s)
        XCTAssertTrue(conns.allSatisfy { $0.heldSnapshot == nil && $0.isAutocommit })
        conns.forEach { s.readConnections.checkin($0) }

        try onEachConnection(s) { _ in _ = try s.readSync { ctx in try ctx.objects(ids) } }
        try await insert(s, "Note", ["n": 1, "text": .string(String(repeating: "x", count: 5000))])
        XCTAssertGreaterThan(s.walFileSize, 0)
        s.close()
        XCTAssertEqual(s.walFileSize, 0, "the closing TRUNCATE checkpoint found no reader")
    }

    /// A snapshot taken with the model of before a migration never serves a read with the new
    /// model (same generation or not): reads after the migration see the new schema.
    func testSnapshotsFromBeforeAMigrationAreNotReused() async throws {
        let s = try open { $0.readerSnapshotHoldMilliseconds = 60_000 }
        let ids = try await seed(s, 3)
        let pin = try s.pin(lease: 3600)
        try onEachConnection(s) { _ in
            _ = try s.readSync(at: .token(pin.token)) { ctx in try ctx.objects(ids) }
        }
        XCTAssertTrue(heldSnapshots(s).allSatisfy { $0 != nil })
        var m = Fixtures.model
        let i = m.entities.firstIndex { $0.name == "Person" }!
        m.entities[i].attributes.append(AttributeDefinition(name: "nick", type: .string, optional: false, defaultValue: .string("n/a")))
        m.versionIdentifier = "2"
        _ = try await s.migrate(to: m)
        try onEachConnection(s) { c in
            let cur = try s.readSync { ctx in try ctx.objects(ids) }
            XCTAssertEqual(cur.map { $0?.values["nick"] }, Array(repeating: .string("n/a"), count: 3), "connection \(c): current")
            let sync = try s.objectsSync([ids[0]]) { $1 }
            XCTAssertEqual(sync.first??.values["nick"], .string("n/a"), "connection \(c): objectsSync")
        }
        let heldAfter = heldSnapshots(s)
        let newModel = try XCTUnwrap(s.state.withLock { $0.model })
        XCTAssertTrue(heldAfter.allSatisfy { $0 == nil || $0!.model === newModel }, "no snapshot from before the migration is left")
    }
}
