import Foundation
import UbiquityTestSupport
import XCTest
@testable import UbiquityStorage

/// A wall clock that starts at real time and moves only when told (history rows carry real
/// commit times; tombstones and the age limits use this clock).
final class ManualWallClock: @unchecked Sendable {
    // Invariant: `now` only accessed under `lock`.
    private let lock = NSLock()
    private var now = Date().timeIntervalSince1970
    func read() -> Double { lock.lock(); defer { lock.unlock() }; return now }
    func advance(_ d: Double) { lock.lock(); now += d; lock.unlock() }
}

/// The readable window, history retention by age and size, the tombstone index and the
/// retention data the change feed reads (issue 17, docs/storage.md "History retention").
final class RetentionTests: StorageTestCase, @unchecked Sendable {
    // MARK: Readable window

    func testATokenStaysReadableForTheWindowAfterItStopsBeingCurrent() async throws {
        let clock = ManualClock()
        let s = try open { $0.clock = { clock.read() }; $0.gcEveryCommits = 16; $0.minimumReadableWindowSeconds = 60 }
        let id = try await insert(s, "Person", ["name": "v0"])
        let early = s.currentToken
        // many times the commits that used to expire a plain token (GC every 16 commits here)
        for i in 1...600 { _ = try await update(s, id, ["name": .string("v\(i)")]) }
        try await s.collectAllGarbage()
        let atEarly = try await s.object(id, at: .token(early))
        XCTAssertEqual(atEarly.values["name"], "v0", "a token read a moment ago still works under write load")

        clock.advance(30)
        let later = s.currentToken  // stops being current with the next commit, at 1030
        _ = try await update(s, id, ["name": "after"])
        clock.advance(31)  // 61 s after `early` stopped being current, 31 s after `later` did
        try await s.collectAllGarbage()
        let why = await reason { _ = try await s.object(id, at: .token(early)) }
        XCTAssertEqual(why, .generationExpired)
        let atLater = try await s.object(id, at: .token(later))
        XCTAssertEqual(atLater.values["name"], "v600", "the window counts from when a generation stopped being current")
        clock.advance(30)
        try await s.collectAllGarbage()
        let whyLater = await reason { _ = try await s.object(id, at: .token(later)) }
        XCTAssertEqual(whyLater, .generationExpired)
        let got1 = try await s.object(id).values["name"]
        XCTAssertEqual(got1, "after")
    }

    func testAReopenedStoreGivesEveryOldGenerationAFreshWindow() async throws {
        let clock = ManualClock()
        let sid = UUID()
        var s: Store? = try open(id: sid) { $0.clock = { clock.read() }; $0.gcEveryCommits = 0 }
        let id = try await insert(s!, "Person", ["name": "v0"])
        let early = s!.currentToken
        for i in 1...5 { _ = try await update(s!, id, ["name": .string("v\(i)")]) }
        s!.close()
        clock.advance(120)  // the window of `early` ran out while the store was closed…
        s = try open(id: sid) { $0.clock = { clock.read() }; $0.gcEveryCommits = 0 }
        try await s!.collectAllGarbage()
        // …but nobody knows when: it gets a whole window from the reopen
        let got2 = try await s!.object(id, at: .token(early)).values["name"]
        XCTAssertEqual(got2, "v0")
        clock.advance(61)
        try await s!.collectAllGarbage()
        let why = await reason { _ = try await s!.object(id, at: .token(early)) }
        XCTAssertEqual(why, .generationExpired)
    }

    func testTheWindowRingStaysSmallAndMeasuresTheCommitRate() {
        var w = ReadableWindow(seconds: 60)
        var t = 0.0
        var current: Int64 = 0
        for _ in 0..<200_000 {  // 1,000 commits/s for 200 s
            w.advanced(from: current, to: current + 1, at: t)
            current += 1
            t += 0.001
        }
        XCTAssertLessThanOrEqual(w.runs.count, 66, "about keepSeconds / granularity runs, whatever the rate")
        let floor = w.floor(current: current, now: t)
        // everything that stopped being current in the last 60 s, and at most one granule more
        XCTAssertLessThanOrEqual(floor, current - 60_000)
        XCTAssertGreaterThanOrEqual(floor, current - 60_000 - Int64(w.granularity * 1000) - 1)
        let rate = w.commitRate(current: current, now: t) ?? 0
        XCTAssertEqual(rate, 1000, accuracy: 50)
        XCTAssertEqual(w.floor(current: current, now: t + 61), current, "nothing left in the window")
        var off = ReadableWindow(seconds: 0)
        off.advanced(from: 0, to: 5, at: 1)
        XCTAssertEqual(off.floor(current: 5, now: 1), 5, "no window: only pins and reads keep generations")
    }

    // MARK: History retention

    func testHistoryRetentionByAgeTrimsOnlyOldTransactions() async throws {
        let wall = ManualWallClock()
        let s = try open { $0.wallClock = { wall.read() }; $0.gcEveryCommits = 0; $0.historyRetentionSeconds = 3600 }
        let start = s.currentToken
        for i in 0..<5 { try await insert(s, "Person", ["name": .string("P\(i)")]) }
        try await s.collectAllGarbage()
        let got3 = try await s.history(after: start).transactions.count
        XCTAssertEqual(got3, 5, "younger than the limit: kept")
        wall.advance(3601)
        try await s.collectAllGarbage()
        XCTAssertEqual(s.retentionStatus.oldestRetained.generation, 5)
        let e = await storageError { _ = try await s.history(after: start) }
        XCTAssertEqual(e?.reason, .historyExpired)
        XCTAssertEqual(e?.historyExpiry?.oldestRetained.generation, 5)
        XCTAssertEqual(e?.historyExpiry?.current, s.currentToken)
    }

    func testHistoryRetentionBySizeKeepsTheNewestWithinTheLimit() async throws {
        let s = try open { $0.gcEveryCommits = 0; $0.historyRetentionBytes = 2_000 }
        for i in 0..<40 { try await insert(s, "Note", ["text": .string(String(repeating: "x", count: 100)), "n": .int(Int64(i))]) }
        let all = try await s.history(after: nil, limit: 100).transactions
        XCTAssertEqual(all.count, 40)
        try await s.collectAllGarbage()
        let kept = try await s.history(after: nil, limit: 100).transactions
        XCTAssertGreaterThan(kept.count, 0)
        XCTAssertLessThan(kept.count, 40)
        XCTAssertEqual(kept.last?.token.generation, 40, "the newest stay")
        XCTAssertEqual(kept.first?.token.generation, s.retentionStatus.oldestRetained.generation + 1)
        let (accounted, actual) = try await historySizes(s)
        XCTAssertEqual(accounted, actual, "GC's running size matches the table")
        XCTAssertLessThanOrEqual(actual, 2_000)
        let perRecord = actual / Int64(kept.count)
        XCTAssertGreaterThan(actual + perRecord, 2_000, "no more trimmed than needed")
        // an explicit trim keeps the accounting exact
        try await s.deleteHistory(through: kept[2].token)
        for i in 0..<3 { try await insert(s, "Note", ["n": .int(Int64(100 + i))]) }
        try await s.collectAllGarbage()
        let (a2, b2) = try await historySizes(s)
        XCTAssertEqual(a2, b2)
    }

    /// GC's accounted history size and the table's actual one.
    private func historySizes(_ s: Store) async throws -> (Int64, Int64) {
        try await s.onWriter { conn, _ in
            let known = try HistorySize.lastKnown(conn)?.bytes ?? -1
            guard case .integer(let actual) = try conn.scalar("SELECT coalesce(sum(length(changes)), 0) FROM ubq_history") else { return (known, -1) }
            return (known, actual)
        }
    }

    // MARK: Tombstone index

    func testDeletesAreIndexedInTheirSaveAndPaged() async throws {
        let s = try open()
        var r = SaveRequest()
        r.inserts = [InsertOperation(temporaryID: "e", entity: "Employee", values: ["name": "Eve"]),
                     InsertOperation(temporaryID: "b", entity: "Person", values: ["name": "Bob"]),
                     InsertOperation(temporaryID: "x", entity: "Passport", values: ["number": "X1"], relationships: ["owner": [.temporary("b")]]),
                     InsertOperation(temporaryID: "n", entity: "Note", values: ["n": 1])]
        let ids = try await s.save(r).permanentIDs
        let before = s.currentToken
        let got4 = try await s.deletions(after: before).deletions
        XCTAssertEqual(got4, [], "inserts index nothing")

        // one save deletes three objects; Bob's passport goes with him (cascade)
        var d = SaveRequest()
        d.deletes = [DeleteOperation(objectID: ids["e"]!), DeleteOperation(objectID: ids["b"]!), DeleteOperation(objectID: ids["n"]!)]
        let g = try await s.save(d).token.generation
        // a save that fails indexes nothing, nor does a dry run
        let tmp = try await insert(s, "Note", ["n": 2])
        var bad = SaveRequest()
        bad.deletes = [DeleteOperation(objectID: tmp)]
        bad.inserts = [InsertOperation(temporaryID: "bad", entity: "Person", values: [:])]  // name missing
        let why = await reason { _ = try await s.save(bad) }
        if case .validationFailed = why {} else { XCTFail("\(String(describing: why))") }
        var dry = SaveRequest()
        dry.deletes = [DeleteOperation(objectID: tmp)]
        dry.dryRun = true
        _ = try await s.save(dry)

        let page = try await s.deletions(after: before)
        let expected: Set<ObjectID> = [ids["e"]!, ids["b"]!, ids["n"]!, ids["x"]!]
        XCTAssertEqual(Set(page.deletions.map(\.objectID)), expected)
        XCTAssertTrue(page.deletions.allSatisfy { $0.generation == g })
        XCTAssertEqual(page.deletions.map(\.objectID.pk), page.deletions.map(\.objectID.pk).sorted(), "deletion order")
        XCTAssertFalse(page.hasMore)
        XCTAssertEqual(page.nextToken, s.currentToken)
        XCTAssertEqual(page.nextAfterPK, .max)

        // pages of two: the second starts inside the same generation
        let first = try await s.deletions(after: before, limit: 2)
        XCTAssertEqual(first.deletions.count, 2)
        XCTAssertTrue(first.hasMore)
        XCTAssertEqual(first.nextToken.generation, g)
        let second = try await s.deletions(after: first.nextToken, afterPK: first.nextAfterPK, limit: 2)
        XCTAssertEqual(first.deletions + second.deletions, page.deletions)
        XCTAssertFalse(second.hasMore)

        // Person matches its sub-entity Employee; Passport only itself
        let people = try await s.deletions(after: before, entities: ["Person"])
        XCTAssertEqual(Set(people.deletions.map(\.objectID)), [ids["e"]!, ids["b"]!])
        let passports = try await s.deletions(after: before, entities: ["Passport"])
        XCTAssertEqual(passports.deletions.map(\.objectID), [ids["x"]!])
        let unknown = await reason { _ = try await s.deletions(after: before, entities: ["Nope"]) }
        if case .validationFailed = unknown {} else { XCTFail("\(String(describing: unknown))") }
        let got5 = try await s.deletions(after: s.currentToken).deletions
        XCTAssertEqual(got5, [])
        let future = GenerationToken(storeID: s.id, epoch: before.epoch, generation: s.currentToken.generation + 1)
        let got6 = await reason { _ = try await s.deletions(after: future) }
        XCTAssertEqual(got6, .invalidArgument)
        let foreign = GenerationToken(storeID: UUID(), epoch: before.epoch, generation: 1)
        let got7 = await reason { _ = try await s.deletions(after: foreign) }
        XCTAssertEqual(got7, .tokenOfAnotherStore(foreign.storeID))
    }

    func testTheTombstoneIndexOutlivesHistoryThenExpiresItself() async throws {
        let wall = ManualWallClock()
        let s = try open {
            $0.wallClock = { wall.read() }; $0.gcEveryCommits = 0
            $0.historyRetentionGenerations = 3; $0.historyRetentionSeconds = nil; $0.tombstoneRetentionSeconds = 1000
        }
        let a = try await insert(s, "Person", ["name": "A"])
        let b = try await insert(s, "Person", ["name": "B"])
        let token = s.currentToken
        _ = try await delete(s, a)
        for i in 0..<10 { try await insert(s, "Note", ["n": .int(Int64(i))]) }
        _ = try await delete(s, b)
        try await s.collectAllGarbage()

        // the history after `token` is gone; the index still has every deletion after it
        let e = await storageError { _ = try await s.history(after: token) }
        XCTAssertEqual(e?.reason, .historyExpired)
        XCTAssertEqual(e?.historyExpiry?.deletionsAvailable, true)
        XCTAssertEqual(e?.historyExpiry?.oldestRetained, s.retentionStatus.oldestRetained)
        XCTAssertEqual(e?.historyExpiry?.current, s.currentToken)
        XCTAssertTrue(s.deletionsCover(token))
        let got8 = try await s.deletions(after: token).deletions.map(\.objectID)
        XCTAssertEqual(got8, [a, b])

        wall.advance(1001)
        try await s.collectAllGarbage()
        // only entries whose history is gone go: `b`'s delete is still in the history
        XCTAssertFalse(s.deletionsCover(token))
        XCTAssertEqual(s.retentionStatus.deletionsFrom.generation, token.generation + 1)
        let e2 = await storageError { _ = try await s.deletions(after: token) }
        XCTAssertEqual(e2?.reason, .historyExpired)
        XCTAssertEqual(e2?.historyExpiry?.deletionsAvailable, false)
        let laterToken = s.retentionStatus.deletionsFrom
        let got9 = try await s.deletions(after: laterToken).deletions.map(\.objectID)
        XCTAssertEqual(got9, [b])
    }

    /// The index rows are the save's own: a delete whose commit fails (an injected write or sync
    /// failure) leaves neither the deletion nor its tombstone.
    func testAFailedDeleteSaveLeavesNoTombstone() async throws {
        let s = try open("faulty") { $0.vfsName = FaultInjection.vfsName; $0.synchronous = .full }
        var ids: [ObjectID] = []
        for i in 0..<6 { ids.append(try await insert(s, "Note", ["n": .int(Int64(i)), "text": .string(String(repeating: "a", count: 3000))])) }
        var failed = 0, succeeded = 0
        for (k, (nth, sync)) in [(1, false), (1, true), (2, false), (2, true), (3, false)].enumerated() {
            let before = s.currentToken
            if sync { FaultInjection.arm(syncNth: nth) } else { FaultInjection.arm(writeNth: nth) }
            var r = SaveRequest()
            r.deletes = [DeleteOperation(objectID: ids[k])]
            do {
                _ = try await s.save(r)
                FaultInjection.disarm()
                succeeded += 1
                let got = try await s.deletions(after: before).deletions.map(\.objectID)
                XCTAssertEqual(got, [ids[k]], "round \(k): an acknowledged delete is indexed")
            } catch is StorageError {
                FaultInjection.disarm()
                failed += 1
                let got = try await s.deletions(after: before).deletions
                XCTAssertEqual(got, [], "round \(k): nothing of the failed save")
                let still = try await s.objects([ids[k]])
                XCTAssertNotNil(still[0], "round \(k): the object is still there")
            }
        }
        XCTAssertGreaterThan(failed, 0, "some armed fault hit a commit (succeeded: \(succeeded))")
    }

    func testAStoreFromBeforeTheIndexGetsItWhenOpened() async throws {
        let sid = UUID()
        var s: Store? = try open(id: sid)
        let a = try await insert(s!, "Person", ["name": "A"])
        let old = s!.currentToken
        _ = try await delete(s!, a)
        s!.close()
        // what a store file written before the index looks like
        let c = try Connection(path: dir + "/store.sqlite", readOnly: false, vfs: nil, busyTimeoutMS: 1000)
        try c.exec("DROP TABLE ubq_tombstones")
        try c.exec("DELETE FROM ubq_meta WHERE key = 'tombstone_horizon'")
        c.close()
        s = try open(id: sid)
        let reopened = s!.currentToken
        XCTAssertFalse(s!.deletionsCover(old), "its earlier deletions were never indexed")
        XCTAssertTrue(s!.deletionsCover(reopened))
        let b = try await insert(s!, "Person", ["name": "B"])
        _ = try await delete(s!, b)
        let got10 = try await s!.deletions(after: reopened).deletions.map(\.objectID)
        XCTAssertEqual(got10, [b])
    }

    // MARK: Estimates

    func testHistoryExpiryEstimateFollowsTheRulesAndTheCommitRate() async throws {
        let clock = ManualClock()
        let wall = ManualWallClock()
        let s = try open {
            $0.clock = { clock.read() }; $0.wallClock = { wall.read() }; $0.gcEveryCommits = 0
            $0.historyRetentionGenerations = 100; $0.historyRetentionSeconds = nil; $0.historyRetentionBytes = nil
        }
        for i in 0..<50 {  // 10 commits a second
            try await insert(s, "Note", ["n": .int(Int64(i))])
            clock.advance(0.1)
        }
        let position = GenerationToken(storeID: s.id, epoch: s.currentToken.epoch, generation: 40)
        // 100 generations are kept: generation 41 goes when current reaches 141, 91 commits away
        let est = try await s.historyExpiryEstimate(after: position)
        let seconds = (est?.timeIntervalSince1970 ?? 0) - wall.read()
        XCTAssertEqual(seconds, 9.1, accuracy: 1.5)
        try await s.deleteHistory(through: GenerationToken(storeID: s.id, epoch: position.epoch, generation: 45))
        let expired = try await s.historyExpiryEstimate(after: position)
        XCTAssertEqual(expired?.timeIntervalSince1970, wall.read(), "already expired: now")

        let unlimited = try open("unlimited") { $0.historyRetentionSeconds = nil; $0.historyRetentionBytes = nil }
        try await insert(unlimited, "Note", ["n": 1])
        let none = try await unlimited.historyExpiryEstimate(after: unlimited.currentToken)
        XCTAssertNil(none, "nothing would trim it")

        let aged = try open("aged") { $0.wallClock = { wall.read() }; $0.historyRetentionSeconds = 3600; $0.historyRetentionBytes = nil }
        let t = aged.currentToken
        try await insert(aged, "Note", ["n": 1])
        let byAge = try await aged.historyExpiryEstimate(after: t)
        // the first transaction after the position committed (real time) just now
        XCTAssertEqual(byAge?.timeIntervalSince1970 ?? 0, Date().timeIntervalSince1970 + 3600, accuracy: 60)
    }
}
