import Foundation
import XCTest
@testable import UbiquityStorage

/// `Store.readSync`: the caller's thread checks a read connection out and reads on it (blocking
/// request handlers). More threads than connections, concurrent async reads and saves.
final class SyncReadTests: StorageTestCase {
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
}
