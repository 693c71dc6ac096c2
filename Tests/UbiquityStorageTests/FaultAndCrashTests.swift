import CSQLite
import Foundation
import XCTest
@testable import UbiquityStorage

final class FaultTests: StorageTestCase, @unchecked Sendable {
    /// The N-th write or sync fails → the save fails with the mapped error, nothing partial
    /// is visible, and the store keeps working.
    /// SQLite's own writes (coalescing off): writes 1...12 fall inside the save's commit.
    func testNthWriteOrSyncFailureLeavesNothingPartial() async throws {
        let failures = try await nthWriteOrSyncFailures(coalescing: false)
        XCTAssertGreaterThanOrEqual(failures.count, failures.plan / 2)
        XCTAssertTrue(failures.sawFull, "SQLITE_FULL maps to .full")
    }

    /// Coalesced WAL writes (the default, docs/storage.md): a commit is a few writes, so fewer of
    /// the armed writes fall inside it; every one that does fails the save whole.
    func testNthWriteOrSyncFailureLeavesNothingPartialCoalesced() async throws {
        let failures = try await nthWriteOrSyncFailures(coalescing: true)
        XCTAssertGreaterThanOrEqual(failures.count, 4)
        XCTAssertTrue(failures.sawFull, "SQLITE_FULL maps to .full")
    }

    private func nthWriteOrSyncFailures(coalescing: Bool) async throws -> (count: Int, plan: Int, sawFull: Bool) {
        let s = try open("faulty") {
            $0.walWriteCoalescing = coalescing
            $0.vfsName = FaultInjection.vfsName
            $0.synchronous = .full
            $0.checkpointThresholdBytes = 32 << 10; $0.checkpointThresholdBytesWithoutReaders = 0; $0.idleCheckpointSeconds = 0  // checkpoints happen during the run too
        }
        for i in 0..<20 { try await insert(s, "Note", ["n": .int(Int64(i)), "text": .string(String(repeating: "a", count: 3000))]) }
        var failures = 0
        var sawFull = false
        let plan = (1...12).map { ($0, "write") } + (1...4).map { ($0, "sync") } + [(4, "write-full"), (1, "write-full"), (20, "write"), (40, "write")]
        for (k, mode) in plan.enumerated() {
            let before = try await s.dump()
            // The writer's work after the previous commit (its checkpoint steps) must be done
            // before arming, or the armed write can land there instead of in this round's save:
            // an exclusive checkpoint job runs after it and leaves the writer with nothing queued.
            _ = try await s.checkpoint()
            let wc = FaultInjection.writeCount, sc = FaultInjection.syncCount
            switch mode.1 {
            case "sync": FaultInjection.arm(syncNth: mode.0)
            case "write-full": FaultInjection.arm(writeNth: mode.0, diskFull: true)
            default: FaultInjection.arm(writeNth: mode.0)
            }
            var r = SaveRequest()
            r.inserts = (0..<30).map { InsertOperation(temporaryID: "t\($0)", entity: "Note", values: ["n": .int(Int64(1000 * (k + 1) + $0)), "text": .string(String(repeating: "b", count: 3000))]) }
            r.updates = [UpdateOperation(objectID: before.objects[k].id, values: ["n": -1])]
            do {
                _ = try await s.save(r)
                // the fault may have hit a later checkpoint instead of the commit: then the save is durable and complete
                let after = try await s.dump()
                XCTAssertEqual(after.objects.count, before.objects.count + 30, "round \(k): acknowledged save complete")
            } catch let e as StorageError {
                failures += 1
                XCTAssertEqual(FaultInjection.firedCount, 1, "round \(k): the armed fault fired")
                switch e.reason {
                case .io: XCTAssertNotNil(e.sqliteExtendedCode)
                case .full: sawFull = true
                default: XCTFail("round \(k): unexpected mapping \(e)")
                }
                FaultInjection.disarm()
                let after = try await s.dump()
                XCTAssertEqual(after.objects.count, before.objects.count, "round \(k): nothing partial")
                XCTAssertEqual(after.objects, before.objects, "round \(k): unchanged")
                XCTAssertEqual(after.token.generation, before.token.generation)
            }
            FaultInjection.disarm()
            XCTAssertGreaterThan(FaultInjection.writeCount + FaultInjection.syncCount, wc + sc)
            // still usable
            try await insert(s, "Note", ["n": .int(Int64(-k))])
        }
        let problems = try await s.integrityCheck()
        XCTAssertEqual(problems, [])
        // a fresh open (recovery) sees the same store
        let dump = try await s.dump()
        s.close()
        let s2 = try open("faulty", id: s.id, model: nil)
        let dump2 = try await s2.dump()
        XCTAssertEqual(dump2, dump)
        return (failures, plan.count, sawFull)
    }
}

extension FaultTests {
    /// Insert-only saves run without a savepoint (`PreparedSave.needsNoSavepoint`); a write
    /// failure inside one must fail its whole group: a save reported OK has all its rows, a failed
    /// one none, whatever group they shared (here with a save that has a savepoint).
    func testWriteFailureInASavepointFreeSaveLeavesNothingPartial() async throws {
        let s = try open("nosavepoint") { $0.vfsName = FaultInjection.vfsName; $0.synchronous = .full }
        let seed = try await insert(s, "Note", ["n": 0])
        for (k, (nth, full)) in [(1, false), (2, true), (3, false), (5, true), (8, false), (13, false)].enumerated() {
            FaultInjection.arm(writeNth: nth, diskFull: full)
            func plain(_ tag: Int) -> SaveRequest {
                var r = SaveRequest()
                r.inserts = (0..<40).map { InsertOperation(temporaryID: "t\($0)", entity: "Note", values: ["n": .int(Int64(100_000 * (k + 1) + 1000 * tag + $0))]) }
                return r
            }
            var mixed = plain(3)
            mixed.updates = [UpdateOperation(objectID: seed, values: ["text": .string("round \(k)")])]
            let ok = await withTaskGroup(of: (Int, Bool).self) { g in
                for (tag, r) in [(1, plain(1)), (2, plain(2)), (3, mixed)] { g.addTask { (tag, (try? await s.save(r)) != nil) } }
                var ok: [Int: Bool] = [:]
                for await (tag, fine) in g { ok[tag] = fine }
                return ok
            }
            FaultInjection.disarm()
            let ns = Set(try await s.dump().objects.compactMap { o -> Int64? in if case .int(let n)? = o.values["n"] { return n }; return nil })
            for tag in 1...3 {
                let mine = (0..<40).map { Int64(100_000 * (k + 1) + 1000 * tag + $0) }
                let present = mine.filter { ns.contains($0) }.count
                XCTAssertEqual(present, ok[tag]! ? 40 : 0, "round \(k), save \(tag): all or nothing")
            }
        }
        let problems = try await s.integrityCheck()
        XCTAssertEqual(problems, [])
    }

    /// Which saves may skip the savepoint: only inserts that cannot fail once written.
    func testOnlySavesThatCannotFailAfterWritingSkipTheSavepoint() throws {
        let s = try open()
        let model = try XCTUnwrap(s.state.withLock { $0.model })
        func check(_ r: SaveRequest) -> Bool { InsertPreparer.prepare(r, model: model, config: s.config).needsNoSavepoint }
        var r = SaveRequest()
        r.inserts = [InsertOperation(temporaryID: "a", entity: "Note", values: ["n": 1]), InsertOperation(temporaryID: "b", entity: "Item", values: ["seq": 2])]
        XCTAssertTrue(check(r))
        var v = r; v.inserts.append(InsertOperation(temporaryID: "a", entity: "Note")); XCTAssertFalse(check(v), "duplicate temporary ID")
        v = r; v.inserts.append(InsertOperation(temporaryID: "c", entity: "Item")); XCTAssertFalse(check(v), "missing required value")
        v = r; v.inserts.append(InsertOperation(temporaryID: "c", entity: "Department", values: ["title": "x"])); XCTAssertFalse(check(v), "uniqueness constraint")
        v = r; v.inserts.append(InsertOperation(temporaryID: "c", entity: "Passport", values: ["number": "1"], relationships: ["owner": []])); XCTAssertFalse(check(v), "relationships")
        v = r; v.dryRun = true; XCTAssertFalse(check(v), "dry run")
        v = r; v.clientTransactionID = "x"; XCTAssertFalse(check(v), "client transaction ID")
        v = r; v.modelVersionHash = "other"; XCTAssertFalse(check(v), "another model")
        v = r; v.modelVersionHash = model.hash; XCTAssertTrue(check(v))
        v = r; v.deletes = [DeleteOperation(objectID: ObjectID(storeID: s.id, entity: "Note", pk: 1))]; XCTAssertFalse(check(v), "deletes")
    }

    /// Two saves in one group commit — the second a retry of the first (same client transaction
    /// ID) — and the commit's fsync fails: neither may report success, and a later retry applies.
    func testFailedGroupCommitFailsReplaysMadeInsideIt() async throws {
        let s = try open("group") { $0.vfsName = FaultInjection.vfsName; $0.synchronous = .full }
        try await insert(s, "Note", ["n": 0])
        let started = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        let blocker = Task { try await s.onWriter { _, _ in started.signal(); release.wait() } }
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in DispatchQueue.global().async { started.wait(); c.resume() } }
        var r = SaveRequest()
        r.inserts = [InsertOperation(temporaryID: "a", entity: "Note", values: ["n": 1])]
        r.clientTransactionID = "tx-group"
        let req = r
        let first = Task { try await s.save(req) }
        while s.writer.queuedJobs < 1 { await Task.yield() }
        let retry = Task { try await s.save(req) }
        while s.writer.queuedJobs < 2 { await Task.yield() }
        FaultInjection.arm(syncNth: 1)
        release.signal()
        try await blocker.value
        for t in [first, retry] {
            do { let res = try await t.value; XCTFail("must fail, got replayed=\(res.replayed)") } catch let e as StorageError { XCTAssertEqual(e.reason, .io) }
        }
        FaultInjection.disarm()
        let again = try await s.save(req)
        XCTAssertFalse(again.replayed, "the failed group left no idempotency record")
        let replay = try await s.save(req)
        XCTAssertTrue(replay.replayed)
        XCTAssertEqual(replay.permanentIDs, again.permanentIDs)
        let n = try await s.objectIDs(entity: "Note").count
        XCTAssertEqual(n, 2)
    }
}

final class CrashTests: StorageTestCase, @unchecked Sendable {
    /// A child process saving in a loop is SIGKILLed at random points; after each reopen every
    /// acknowledged save is present, no save is partial, and integrity_check is ok. 100 cycles:
    /// the child's writer coalesces its WAL writes (the default), and this test is what keeps that
    /// VFS (docs/storage.md "WAL write coalescing").
    func testSIGKILLDuringSavesLosesNoAcknowledgedSave() async throws {
        XCTAssertTrue(WALCoalescing.isValidated(sqliteVersion: sqlite3_libversion_number()), "the child runs with coalesced WAL writes")
        let child = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("UbiquityStorageCrashChild").path
        let binary = FileManager.default.isExecutableFile(atPath: child) ? child :
            URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("UbiquityStorageCrashChild").path
        XCTAssertTrue(FileManager.default.isExecutableFile(atPath: binary), "crash child not built at \(binary)")
        let sid = UUID()
        let path = dir + "/crash.sqlite"
        do { let s = try Store.open(path: path, id: sid, model: Fixtures.model); s.close() }
        var acked = Set<Int64>()
        var nextSeq: Int64 = 1
        var rng = SystemRandomNumberGenerator()
        var roundsWithWAL = 0
        for round in 0..<100 {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: binary)
            p.arguments = [path, sid.uuidString, String(nextSeq)]
            let pipe = Pipe()
            p.standardOutput = pipe
            try p.run()
            let killAfter = Int.random(in: 1...40, using: &rng)
            var buffer = Data()
            var lines: [String] = []
            let fh = pipe.fileHandleForReading
            while lines.count < killAfter {
                let chunk = fh.availableData
                if chunk.isEmpty { break }
                buffer.append(chunk)
                while let nl = buffer.firstIndex(of: 10) {
                    lines.append(String(decoding: buffer[buffer.startIndex..<nl], as: UTF8.self))
                    buffer = Data(buffer[buffer.index(after: nl)...])
                }
            }
            kill(p.processIdentifier, SIGKILL)
            p.waitUntilExit()
            // everything acknowledged before the kill (the pipe may hold a few more ACKs: also acknowledged)
            buffer.append(fh.readDataToEndOfFile())
            for l in String(decoding: buffer, as: UTF8.self).split(separator: "\n") { lines.append(String(l)) }
            for l in lines where l.hasPrefix("ACK ") { acked.insert(Int64(l.dropFirst(4))!) }
            XCTAssertEqual(p.terminationReason, .uncaughtSignal, "round \(round)")

            if Store.fileSize(path + "-wal") > 0 { roundsWithWAL += 1 }
            // Reopened without a model: the first connection on the file after the kill is a
            // read-only one (no writer until a write), so its recovery of the WAL is what the
            // reads below see.
            let s = try Store.open(path: path, id: sid)
            let dump = try await s.dump()
            XCTAssertFalse(s.writer.isConnected, "round \(round): read first, through a read-only connection")
            let integrity = try await s.integrityCheck()
            let history = try await s.history(after: nil, limit: 1_000_000)
            let generation = s.currentToken.generation
            s.close()
            XCTAssertEqual(integrity, [], "round \(round)")
            var parts: [Int64: Set<Int64>] = [:]
            for o in dump.objects where o.id.entity == "Item" {
                guard case .int(let seq) = o.values["seq"], case .int(let part) = o.values["part"] else { continue }
                parts[seq, default: []].insert(part)
            }
            for (seq, ps) in parts { XCTAssertEqual(ps, [0, 1, 2], "round \(round): save \(seq) partial") }
            // data, history and the generation counter moved together
            XCTAssertEqual(history.transactions.count, parts.count, "round \(round): one history record per surviving save")
            XCTAssertEqual(generation, Int64(parts.count), "round \(round)")
            let missing = acked.subtracting(parts.keys)
            XCTAssertTrue(missing.isEmpty, "round \(round): acknowledged saves lost: \(missing.sorted().prefix(10))")
            nextSeq = (parts.keys.max() ?? nextSeq) + 100
        }
        XCTAssertGreaterThan(acked.count, 20)
        XCTAssertGreaterThan(roundsWithWAL, 0, "some kills left frames in the WAL for the read-only connection to recover")
    }
}
