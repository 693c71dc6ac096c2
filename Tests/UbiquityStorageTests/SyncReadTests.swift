import Foundation
import XCTest
@testable import UbiquityStorage

/// `Store.readSync`: the caller's thread checks a read connection out and reads on it (blocking
/// request handlers). More threads than connections, concurrent async reads and saves.
final class SyncReadTests: StorageTestCase, @unchecked Sendable {
    func testSyncReadersOnTheirOwnThreadsSeeTheirGenerationWhileSavesRun() async throws {
        let s = try open { $0.readerCount = 2; $0.gcEveryCommits = 20; $0.gcBatchSize = 100 }
        var seed = SaveRequest()
        seed.inserts = (0..<50).map { InsertOperation(temporaryID: "p\($0)", entity: "Person", values: ["name": .string("P\($0)"), "age": .int(Int64($0))]) }
        let ids = try await s.save(seed).permanentIDs.values.sorted()
        let pin = try s.pin(lease: 3600)
        let reference = try await s.objects(ids, at: .token(pin.token))
        let stop = Locked(false)
        let reads = Locked(0)
        let failures = Locked<[String]>([])
        let group = DispatchGroup()
        for t in 0..<5 {  // more threads than the store's 2 read connections
            group.enter()
            Thread {
                defer { group.leave() }
                while !stop.withLock({ $0 }) || reads.withLock({ $0 }) < 10 {
                    do {
                        let (token, got) = try s.readSync(at: .token(pin.token)) { ctx in (ctx.token, try ctx.objects(ids)) }
                        if token != pin.token || got != reference { failures.withLock { $0.append("thread \(t): pinned read differs") } }
                        let cur = try s.readSync { ctx in try ctx.objects([ids[t]]) }
                        if cur.first??.id != ids[t] { failures.withLock { $0.append("thread \(t): current read lost the object") } }
                    } catch { failures.withLock { $0.append("thread \(t): \(error)") } }
                    reads.withLock { $0 += 1 }
                }
            }.start()
        }
        for i in 0..<200 {
            var r = SaveRequest()
            r.updates = [UpdateOperation(objectID: ids[i % ids.count], values: ["score": .double(Double(i))])]
            _ = try await s.save(r)
            if i % 10 == 0 { let a = try await s.objects(ids, at: .token(pin.token)); XCTAssertEqual(a, reference) }
        }
        try await s.collectAllGarbage()
        stop.withLock { $0 = true }
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in group.notify(queue: .global()) { c.resume() } }
        XCTAssertEqual(failures.withLock { $0 }, [])
        XCTAssertGreaterThanOrEqual(reads.withLock { $0 }, 10)
        // the current generation shows the updates
        let now = try s.readSync { ctx in try ctx.objects([ids[0]]) }
        XCTAssertEqual(now.first??.values["score"], .double(150))
    }

    func testSyncReadCancellationAndClose() async throws {
        let s = try open()
        let id = try await insert(s, "Person", ["name": .string("A"), "age": .int(1)])
        XCTAssertThrowsError(try s.readSync(isCancelled: { true }) { ctx in try ctx.objects([id]) }) { e in
            XCTAssertEqual((e as? StorageError)?.reason, .cancelled)
        }
        // the connection went back to the pool: later reads still work
        for _ in 0..<5 { XCTAssertEqual(try s.readSync { ctx in try ctx.objects([id]) }.first??.id, id) }
        s.close()
        XCTAssertThrowsError(try s.readSync { ctx in try ctx.objects([id]) }) { e in
            XCTAssertEqual((e as? StorageError)?.reason, .storeClosed)
        }
    }

    // MARK: objectsSync (point reads without BEGIN … COMMIT when they are one statement)

    func testObjectsSyncReadsInOneStatementOnlyWhenItCan() async throws {
        // hold 0: the autocommit path itself (with a hold the read keeps a snapshot, HeldSnapshotTests)
        let s = try open { $0.readerSnapshotHoldMilliseconds = 0 }
        let note = try await insert(s, "Note", ["text": "a", "n": 1])
        let note2 = try await insert(s, "Note", ["text": "b", "n": 2])
        let item = try await insert(s, "Item", ["seq": 1])
        let person = try await insert(s, "Person", ["name": "P", "age": 3])
        var autocommit: [Bool] = []
        func probe(_ ids: [ObjectID]) throws -> [ObjectSnapshot?] {
            try s.objectsSync(ids) { ctx, found in
                autocommit.append(ctx.conn.isAutocommit)
                return found
            }
        }
        // Notes have no relationships: one SELECT, no transaction left open around it.
        XCTAssertEqual(try probe([note, note2]).map { $0?.id }, [note, note2])
        // Two root tables, or relationships to load: a read transaction, as readSync runs.
        XCTAssertEqual(try probe([note, item]).map { $0?.id }, [note, item])
        XCTAssertEqual(try probe([person]).map { $0?.id }, [person])
        XCTAssertEqual(autocommit, [true, false, false])
        let more = (0..<501).map { ObjectID(storeID: s.id, entity: "Note", pk: note.pk + Int64($0) * 1000) }
        try s.readSync { ctx in
            let r = RowReader(conn: ctx.conn, model: ctx.model, storeID: s.id, gen: ctx.generation)
            XCTAssertTrue(r.loadsInOneStatement([]))
            XCTAssertTrue(r.loadsInOneStatement([note]))
            XCTAssertTrue(r.loadsInOneStatement([note, ObjectID(storeID: UUID(), entity: "Item", pk: 1)]))  // another store's ID is never read
            XCTAssertFalse(r.loadsInOneStatement(more))  // two chunks
            XCTAssertFalse(r.loadsInOneStatement([note, item]))
            XCTAssertFalse(r.loadsInOneStatement([person]))
        }
    }

    /// Snapshots are built from a per-entity template (every attribute, values set by position):
    /// each must hold exactly its entity's attributes with its own row's values — entities sharing
    /// a root table, NULL columns, defaults, several rows of one entity in one read — through every
    /// read path.
    func testSnapshotsHoldExactlyTheirOwnRowsValues() async throws {
        let s = try open()
        let p1 = try await insert(s, "Person", ["name": "Ann", "age": 30, "photo": .binary(Data([1, 2]))])
        let p2 = try await insert(s, "Person", ["name": "Bob", "email": "b@x", "score": .double(2.5)])
        let e = try await insert(s, "Employee", ["name": "Eve", "age": 40, "salary": .decimal("12")])
        let n = try await insert(s, "Note", ["text": "t", "n": 7])
        let n2 = try await insert(s, "Note", [:])
        let expected: [ObjectID: [String: StorageValue]] = [
            p1: ["name": "Ann", "email": .null, "age": 30, "score": .double(1.5), "photo": .binary(Data([1, 2]))],
            p2: ["name": "Bob", "email": "b@x", "age": .null, "score": .double(2.5), "photo": .null],
            e: ["name": "Eve", "email": .null, "age": 40, "score": .double(1.5), "photo": .null, "salary": .decimal("12")],
            n: ["text": "t", "n": 7],
            n2: ["text": .null, "n": .null],
        ]
        let ids = [p1, e, p2, n, n2, p1]
        func check(_ found: [ObjectSnapshot?], _ path: String) {
            XCTAssertEqual(found.count, ids.count, path)
            for (id, snap) in zip(ids, found) {
                XCTAssertEqual(snap?.id, id, path)
                XCTAssertEqual(snap?.values, expected[id], "\(path) \(id)")
            }
        }
        check(try s.objectsSync(ids) { $1 }, "objectsSync")
        check(try s.readSync { try $0.objects(ids) }, "readSync")
        check(try await s.objects(ids), "objects")
        for id in [p1, p2, e, n, n2] {
            XCTAssertEqual(try s.objectsSync([id]) { $1 }.first??.values, expected[id], "point \(id)")
        }
    }

    func testObjectsSyncSeesTheLatestSaveAndPinnedTokensTheirGeneration() async throws {
        let s = try open()
        let id = try await insert(s, "Note", ["text": "v1", "n": 1])
        let pin = try s.pin(lease: 3600)
        for v in 2...20 {
            let r = try await update(s, id, ["text": .string("v\(v)")])
            // Right after the save returns, a point read at current sees it, and says so in its token.
            let (token, got) = try s.objectsSync([id]) { ctx, found in (ctx.token, found) }
            XCTAssertEqual(token, r.token)
            XCTAssertEqual(got.first??.values["text"], .string("v\(v)"))
            // The pinned token still reads the first version, and the same as readSync.
            let old = try s.objectsSync([id], at: .token(pin.token)) { ctx, found in found }
            XCTAssertEqual(old.first??.values["text"], .string("v1"))
            XCTAssertEqual(old, try s.readSync(at: .token(pin.token)) { try $0.objects([id]) })
        }
        _ = try await delete(s, id)
        XCTAssertEqual(try s.objectsSync([id]) { $1 }, [nil])
        XCTAssertEqual(try s.objectsSync([id], at: .token(pin.token)) { $1 }.first??.values["text"], .string("v1"))
        // Same checks as readSync: a fence the store has not reached, a closed store.
        XCTAssertThrowsError(try s.objectsSync([id], minimumGeneration: s.currentToken.generation + 1) { $1 }) { e in
            XCTAssertEqual((e as? StorageError)?.reason, .generationNotReached)
        }
        s.close()
        XCTAssertThrowsError(try s.objectsSync([id]) { $1 }) { e in XCTAssertEqual((e as? StorageError)?.reason, .storeClosed) }
    }

    func testObjectsSyncMatchesReadSyncWhileSavesRun() async throws {
        let s = try open { $0.readerCount = 2 }
        var seed = SaveRequest()
        seed.inserts = (0..<20).map { InsertOperation(temporaryID: "n\($0)", entity: "Note", values: ["text": .string("N\($0)"), "n": 0]) }
        let ids = try await s.save(seed).permanentIDs.values.sorted()
        let stop = Locked(false)
        let failures = Locked<[String]>([])
        let group = DispatchGroup()
        for t in 0..<3 {
            group.enter()
            Thread {
                defer { group.leave() }
                while !stop.withLock({ $0 }) {
                    do {
                        // Every read sees one generation: all objects of one save agree on n.
                        let (token, got) = try s.objectsSync(ids) { ctx, found in (ctx.token, found) }
                        let ns = Set(got.map { $0?.values["n"] })
                        if ns.count != 1 { failures.withLock { $0.append("thread \(t): mixed generations \(ns)") } }
                        let again = try s.readSync(at: .token(token)) { try $0.objects(ids) }
                        if again != got { failures.withLock { $0.append("thread \(t): objectsSync and readSync differ at \(token)") } }
                    } catch { failures.withLock { $0.append("thread \(t): \(error)") } }
                }
            }.start()
        }
        for i in 1...100 {
            var r = SaveRequest()
            r.updates = ids.map { UpdateOperation(objectID: $0, values: ["n": .int(Int64(1000 + i))]) }
            _ = try await s.save(r)
        }
        stop.withLock { $0 = true }
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in group.notify(queue: .global()) { c.resume() } }
        XCTAssertEqual(failures.withLock { $0 }, [])
    }

    /// Read connections map the store file (`readerMmapBytes`, here smaller than the file so
    /// reads use both the mapping and `pread`) and still see every commit, through WAL
    /// checkpoints and restarts (the writer changes the file under the mapping), at current and
    /// pinned generations; 0 turns the mapping off.
    func testMappedReadersSeeEveryCommitThroughCheckpoints() async throws {
        let s = try open { $0.readerCount = 2; $0.readerMmapBytes = 64 << 10; $0.checkpointThresholdBytes = 32 << 10; $0.checkpointThresholdBytesWithoutReaders = 0; $0.idleCheckpointSeconds = 0 }
        var seed = SaveRequest()
        seed.inserts = (0..<300).map { InsertOperation(temporaryID: "n\($0)", entity: "Note", values: ["text": .string(String(repeating: "x", count: 200)), "n": 0]) }
        let ids = try await s.save(seed).permanentIDs.values.sorted()
        let pin = try s.pin(lease: 3600)
        for round in 1...30 {
            var r = SaveRequest()
            r.updates = ids.enumerated().filter { $0.offset % 30 == round % 30 }.map { UpdateOperation(objectID: $0.element, values: ["n": .int(Int64(round))]) }
            _ = try await s.save(r)
            let got = try s.objectsSync(ids) { $1 }
            for (i, o) in got.enumerated() {
                let want: Int64 = i % 30 == round % 30 ? Int64(round) : (i % 30 == 0 || i % 30 > round ? 0 : Int64(i % 30))
                XCTAssertEqual(o?.values["n"], .int(want), "round \(round) object \(i)")
            }
            XCTAssertEqual(try s.objectsSync(ids, at: .token(pin.token)) { $1 }.map { $0?.values["n"] }, Array(repeating: .int(0), count: ids.count))
        }
        XCTAssertGreaterThan(s.walStats.checkpoints, 0)
        let c = s.readConnections.checkout()!
        XCTAssertEqual(try c.scalar("PRAGMA mmap_size"), .integer(64 << 10))
        s.readConnections.checkin(c)
        let off = try open("off") { $0.readerMmapBytes = 0 }
        let c0 = off.readConnections.checkout()!
        XCTAssertEqual(try c0.scalar("PRAGMA mmap_size"), .integer(0))
        off.readConnections.checkin(c0)
    }

    /// The statement cache's recent-statement list never hands out a statement the cache has
    /// finalized: more distinct texts than the cache holds, in an order that evicts statements
    /// still in the recent list, each checked for its own result.
    func testRecentStatementsNeverOutliveTheirCacheEntry() throws {
        let c = try Connection(path: dir + "/stmts.sqlite", readOnly: false, vfs: nil, busyTimeoutMS: 1000, cacheLimit: 3)
        defer { c.close() }
        let texts = (0..<7).map { "SELECT \($0) + ?1" }
        for round in 0..<5 {
            for (i, sql) in (texts + texts.reversed() + [texts[0], texts[0], texts[6], texts[1]]).enumerated() {
                let k = Int64(texts.firstIndex(of: sql)!)
                XCTAssertEqual(try c.scalar(sql, [.integer(Int64(round * 100 + i))]), .integer(k + Int64(round * 100 + i)))
            }
        }
    }
}
