import Foundation
import Synchronization
import UbiquityTestSupport
import XCTest
@testable import UbiquityStorage

final class DirectoryTests: StorageTestCase, @unchecked Sendable {
    func config() -> StorageConfiguration { var c = StorageConfiguration(); c.readerCount = 1; c.synchronous = .normal; return c }

    func testLockFileRefusesSecondOwner() async throws {
        let d = try StoreDirectory(root: dir + "/data", configuration: config())
        XCTAssertThrowsError(try StoreDirectory(root: dir + "/data")) { e in
            XCTAssertEqual((e as? StorageError)?.reason, .directoryLocked)
        }
        await d.shutdown()
        let again = try StoreDirectory(root: dir + "/data")
        await again.shutdown()
    }

    /// The account lookup runs at the same stack depth however many paths were made before. A
    /// function value kept directly in a generic lock came back from each `withLock` wrapped in
    /// two more thunks, so each path ran every earlier one's wrappers too (W6: ~1.3 ms of CPU per
    /// open under the directory lock, and a stack growing with uptime).
    func testAccountLookupStaysAtOneDepth() async throws {
        let d = try StoreDirectory(root: dir + "/data", configuration: config())
        let depths = Locked<[UInt]>([])
        d.locateAccounts { _ in
            var marker = 0
            let address = withUnsafeMutablePointer(to: &marker) { UInt(bitPattern: $0) }
            depths.withLock { $0.append(address) }
            return "a"
        }
        let id = UUID()
        for _ in 0..<2_000 { XCTAssertTrue(d.path(for: id).hasSuffix("/accounts/a/stores/" + id.uuidString.lowercased() + ".sqlite")) }
        let (first, last) = depths.withLock { ($0.first ?? 0, $0.last ?? 0) }
        // the stack grows down: a deeper call has a lower address
        XCTAssertLessThan(first > last ? first - last : 0, 4_096, "the 2,000th lookup ran \(first > last ? first - last : 0) bytes deeper than the first")
        await d.shutdown()
    }

    func testLazyOpenLRUAndIdleClose() async throws {
        let clock = ManualClock()
        var c = config(); c.clock = { clock.read() }
        let d = try StoreDirectory(root: dir + "/data", configuration: c, maxOpenStores: 3)
        let ids = (0..<5).map { _ in UUID() }
        for (i, id) in ids.enumerated() {
            _ = try await d.withStore(id, create: true, model: Fixtures.model) { s in try await s.save({ var r = SaveRequest(); r.inserts = [InsertOperation(temporaryID: "n", entity: "Note", values: ["n": .int(Int64(i))])]; return r }()) }
        }
        let open = d.openCount
        XCTAssertEqual(open, 3, "bounded")
        let files = try await d.storeIDs()
        XCTAssertEqual(Set(files), Set(ids))
        let names = try FileManager.default.contentsOfDirectory(atPath: dir + "/data/stores")
        XCTAssertTrue(names.allSatisfy { n in ids.contains { n.hasPrefix($0.uuidString.lowercased()) } }, "file names come from store IDs only")
        // evicted stores reopen lazily with their data
        let n = try await d.withStore(ids[0]) { s in try await s.objectIDs(entity: "Note").count }
        XCTAssertEqual(n, 1)
        let missing = await reason { _ = try await d.withStore(UUID()) { _ in 0 } }
        XCTAssertEqual(missing, .notFound)
        clock.advance(100)
        let closed = await d.closeIdle(idleSeconds: 60)
        XCTAssertEqual(closed, 3)
        let openAfter = d.openCount
        XCTAssertEqual(openAfter, 0)
        await d.shutdown()
    }

    /// A store is leased while a `withStore` body runs (taken under the directory's lock, given
    /// back without it): eviction and destroy must skip it then, and see it free afterwards.
    func testLeasedStoreIsNotEvictedOrDestroyed() async throws {
        let d = try StoreDirectory(root: dir + "/data", configuration: config(), maxOpenStores: 1)
        let a = UUID(), b = UUID(), c = UUID()
        try d.withStoreSync(a, create: true, model: Fixtures.model) { _ in
            try d.withStoreSync(b, create: true, model: Fixtures.model) { _ in }
            XCTAssertEqual(d.openCount, 2, "a is in use: not evicted to admit b")
        }
        try d.withStoreSync(c, create: true, model: Fixtures.model) { _ in }
        XCTAssertEqual(d.openCount, 1, "a and b are free again: evicted to admit c")
        XCTAssertFalse(d.isInUse(c), "open, no call running")
        let inUse = try await d.withStore(c) { _ in
            XCTAssertTrue(d.isInUse(c))  // what the local-store import waits on before copying and destroying
            return await self.reason { try await d.destroy(c) }
        }
        XCTAssertEqual(inUse, .busy)
        try await d.destroy(c)
        XCTAssertEqual(d.openCount, 0)
        XCTAssertFalse(d.isInUse(c))
        await d.shutdown()
    }

    func testDestroyReplaceBaselineAndIntegrity() async throws {
        do { try await destroyReplaceBaseline() } catch let e as StorageError { XCTFail("\(e) sql: \(e.sql ?? "-")") }
    }

    func destroyReplaceBaseline() async throws {
        let d = try StoreDirectory(root: dir + "/data", configuration: config())
        let a = UUID(), b = UUID()
        // store A with history; baseline at generation 2 of 3
        let (t2, dumpAt2) = try await d.withStore(a, create: true, model: Fixtures.model) { s -> (GenerationToken, StoreDump) in
            let id = try await self.insert(s, "Person", ["name": "one"])
            _ = try await self.update(s, id, ["name": "two"])
            let t = s.currentToken
            let dump = try await s.dump()
            _ = try await self.update(s, id, ["name": "three"])
            return (t, dump)
        }
        let basePath = dir + "/baseline.sqlite"
        let bt = try await d.withStore(a) { s in try await s.baseline(at: .token(t2), to: basePath) }
        XCTAssertEqual(bt.generation, 2)
        // the baseline opened as a store equals A at generation 2
        let baseStore = try Store.open(path: basePath, id: a)
        let baseDump = try await baseStore.dump()
        XCTAssertEqual(baseDump.objects, dumpAt2.objects)
        XCTAssertEqual(baseStore.currentToken.generation, 2)
        baseStore.close()

        // replace B with the baseline: new epoch, old tokens fail with STORE_REPLACED
        let oldB = try await d.withStore(b, create: true, model: Fixtures.model) { s -> GenerationToken in
            try await self.insert(s, "Note", ["n": 1]); return s.currentToken
        }
        try await d.replace(b, from: basePath)
        let (replaced, why) = try await d.withStore(b) { s -> (StoreDump, StorageError.Reason?) in
            let dump = try await s.dump()
            do { _ = try await s.dump(at: .token(oldB)); return (dump, nil) } catch let e as StorageError { return (dump, e.reason) }
        }
        XCTAssertEqual(why, .storeReplaced)
        XCTAssertEqual(replaced.objects.map(\.values), dumpAt2.objects.map(\.values))
        let problems = try await d.integrityCheck(b)
        XCTAssertEqual(problems, [])

        // a store in use cannot be destroyed; destroy removes every file
        try await d.destroy(a)
        let exists = await d.exists(a)
        XCTAssertFalse(exists)
        XCTAssertFalse(FileManager.default.fileExists(atPath: d.path(for: a) + "-wal"))
        let gone = await reason { _ = try await d.withStore(a) { _ in 0 } }
        XCTAssertEqual(gone, .notFound)
        await d.shutdown()
    }

    /// Every open of a closed store and every close of an evicted or idle one is reported to the
    /// observer (the daemon's `ubiquity_store_open_seconds` / `_close_seconds`); a call on an
    /// open store reports nothing.
    func testOpensAndClosesAreReported() async throws {
        let opens = Locked<[Double]>([]), closes = Locked<[Double]>([])
        var c = config()
        c.observer.storeOpened = { s in opens.withLock { $0.append(s) } }
        c.observer.storeClosed = { s in closes.withLock { $0.append(s) } }
        let d = try StoreDirectory(root: dir + "/data", configuration: c, maxOpenStores: 1)
        let a = UUID(), b = UUID()
        for id in [a, a, b, b, a] { _ = try await d.withStore(id, create: true, model: Fixtures.model) { s in s.id } }
        XCTAssertEqual(opens.withLock { $0.count }, 3, "a, then b (evicting a), then a again (evicting b)")
        let bothClosed = pollUntil { closes.withLock { $0.count } == 2 }
        XCTAssertTrue(bothClosed, "the two evictions' closes, on the closer thread")
        XCTAssertTrue(opens.withLock { $0 }.allSatisfy { $0 > 0 })
        let idle = await d.closeIdle(idleSeconds: 0)
        XCTAssertEqual(idle, 1)
        XCTAssertEqual(closes.withLock { $0.count }, 3, "an idle close too")
        await d.shutdown()
    }

    /// An evicted store is closed by the `ubq-closer` thread, not by the call that needed the
    /// room: with the closer held up, each call gets its store while its victim is still open,
    /// up to the policy's bound; past it the callers close their victims themselves. A call for
    /// a victim still closing waits for that close, then reopens it with its data; shutdown
    /// waits for the closes in flight.
    func testEvictedStoresCloseOffTheCallersPath() async throws {
        let d = try StoreDirectory(root: dir + "/data", configuration: config(), maxOpenStores: 1)
        let hold = DispatchSemaphore(value: 0), closerHeld = Counter()
        StoreCloser.shared.submit { closerHeld.add(); hold.wait() }
        let held = pollUntil { closerHeld.value == 1 }
        XCTAssertTrue(held)
        let ids = (0..<11).map { _ in UUID() }
        var stores: [Store] = []
        for (i, id) in ids.enumerated() {
            stores.append(try await d.withStore(id, create: true, model: Fixtures.model) { s in
                var r = SaveRequest()
                r.inserts = [InsertOperation(temporaryID: "n", entity: "Note", values: ["n": .int(Int64(i))])]
                _ = try await s.save(r)
                return s
            })
        }
        let closed = stores.map { s in s.state.withLock { $0.closed } }
        XCTAssertEqual(closed, Array(repeating: false, count: 8) + [true, true, false],
                       "8 victims wait for the closer (EvictionPolicy's bound), the next 2 were closed by their callers")
        XCTAssertEqual(d.openCount, 1, "stores on their way out do not count as open")
        hold.signal()
        let n = try await d.withStore(ids[0]) { s in try await s.objectIDs(entity: "Note").count }
        XCTAssertEqual(n, 1)
        XCTAssertTrue(stores[0].state.withLock { $0.closed }, "the reopen waited for the background close")
        await d.shutdown()
        XCTAssertTrue(stores.allSatisfy { s in s.state.withLock { $0.closed } }, "shutdown waited for the background closes")
    }

    /// A store's open runs outside the directory's lock: while one store is still opening,
    /// another opens (and is used) without waiting for it; a second caller of the store being
    /// opened waits for that open instead of opening it again.
    func testOpeningOneStoreDoesNotWaitForAnother() throws {
        let a = UUID(), b = UUID()
        let aOpening = DispatchSemaphore(value: 0), bDone = DispatchSemaphore(value: 0)
        let opens = Counter()
        let bWasOpenFirst = Counter()
        let d = try StoreDirectory(root: dir + "/data", configuration: config(), maxOpenStores: 4) { path, id, model, cfg in
            if id == a {
                opens.add()
                aOpening.signal()
                // A's open stays in progress until B has been opened and used (bounded, so a
                // directory that serialized opens fails this test instead of hanging it)
                if bDone.wait(timeout: .now() + 30) == .success { bWasOpenFirst.add() }
            }
            return try Store.open(path: path, id: id, model: model, configuration: cfg)
        }
        let group = DispatchGroup()
        let firstA = Counter(), secondA = Counter()
        DispatchQueue.global().async(group: group) { if (try? d.withStoreSync(a, create: true, model: Fixtures.model) { _ in }) != nil { firstA.add() } }
        aOpening.wait()
        DispatchQueue.global().async(group: group) { if (try? d.withStoreSync(a, create: true, model: Fixtures.model) { _ in }) != nil { secondA.add() } }
        try d.withStoreSync(b, create: true, model: Fixtures.model) { s in XCTAssertNotNil(s.modelDefinition) }
        bDone.signal()
        group.wait()
        XCTAssertEqual(bWasOpenFirst.value, 1, "B opened while A's open was in progress")
        XCTAssertEqual(firstA.value + secondA.value, 2, "both callers of A got it")
        XCTAssertEqual(opens.value, 1, "A opened once")
        XCTAssertEqual(d.openCount, 2)
    }
}

private final class Counter: Sendable {
    private let n = Atomic<Int>(0)
    func add() { n.add(1, ordering: .relaxed) }
    var value: Int { n.load(ordering: .relaxed) }
}
