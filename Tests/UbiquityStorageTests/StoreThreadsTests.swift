import Foundation
import UbiquityTestSupport
import XCTest
@testable import UbiquityStorage

/// An open store costs no threads of its own (docs/threading.md rule 18): many stores saving and
/// reading at once share the writer and reader pools, which never grow past their bounds, and
/// each store's saves still commit in order on its one writer connection.
final class StoreThreadsTests: StorageTestCase, @unchecked Sendable {
    /// Threads of this process whose kernel name starts with `prefix`, counted one by one (two
    /// pools may reuse a name).
    private func threads(named prefix: String) -> Int {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        return tasks.filter { t in
            let name = (try? String(contentsOfFile: "/proc/self/task/\(t)/comm", encoding: .utf8)) ?? ""
            return name.hasPrefix(prefix)
        }.count
    }

    func testManyOpenStoresShareBoundedPoolsAndEachKeepsItsOrder() async throws {
        #if os(Linux)
        let storeCount = 40, writers = 3, savesPerStore = 5
        // A nice value no other test uses: a pool of its own, whose bound this test sets.
        let nice = 3
        let writersBefore = threads(named: "ubq-writer")
        let stores = try (0..<storeCount).map { i in
            try open("s\(i)") { $0.writerNice = nice; $0.writerThreads = writers; $0.readerCount = 2 }
        }
        let pool = WriterPool.shared(nice: nice, maxThreads: writers)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for s in stores {
                group.addTask {
                    var last: Int64 = 0
                    for n in 0..<savesPerStore {
                        var r = SaveRequest()
                        r.inserts = [InsertOperation(temporaryID: "n", entity: "Note", values: ["n": .int(Int64(n))])]
                        let res = try await s.save(r)
                        XCTAssertEqual(res.token.generation, last + 1, "one store's saves commit in order")
                        last = res.token.generation
                        let ids = Array(res.permanentIDs.values)
                        let got = try await s.objects(ids)
                        XCTAssertEqual(got.first??.values["n"], .int(Int64(n)))
                    }
                }
            }
            try await group.waitForAll()
        }
        XCTAssertLessThanOrEqual(pool.threadCount, writers, "the writer pool never grows past its bound")
        XCTAssertGreaterThanOrEqual(pool.threadCount, 1)
        XCTAssertLessThanOrEqual(threads(named: "ubq-writer") - writersBefore, writers, "40 stores, at most \(writers) new writer threads")
        XCTAssertLessThanOrEqual(ReaderThreads.shared.count, ReaderThreads.threadLimit)
        XCTAssertLessThanOrEqual(threads(named: "ubq-snapshots"), 1, "one sweeper for every store")
        XCTAssertLessThanOrEqual(threads(named: "ubq-writeback"), 1, "one writeback thread for every store")
        for s in stores { XCTAssertLessThanOrEqual(s.readConnections.openCount, 2, "never more read connections than readerCount") }
        #endif
    }

    func testReadConnectionsOpenOnlyAsConcurrentReadsNeedThem() async throws {
        let s = try open { $0.readerCount = 4 }
        XCTAssertEqual(s.readConnections.openCount, 1, "one at open (a store that cannot be read fails to open)")
        let id = try await insert(s, "Note", ["n": 1])
        for _ in 0..<5 { _ = try await s.objects([id]) }
        XCTAssertEqual(s.readConnections.openCount, 1, "reads one after the other share one connection")
        // Two readers at once, each holding its connection until both are in: a second one opens.
        let inside = DispatchGroup()
        inside.enter(); inside.enter()
        async let a: Int = s.read { _ in inside.leave(); inside.wait(); return 1 }
        async let b: Int = s.read { _ in inside.leave(); inside.wait(); return 2 }
        let (x, y) = try await (a, b)
        XCTAssertEqual(x + y, 3)
        XCTAssertEqual(s.readConnections.openCount, 2)
    }
}
