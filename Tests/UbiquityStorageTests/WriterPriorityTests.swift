import Foundation
import UbiquityTestSupport
import XCTest
@testable import UbiquityStorage

/// `writerNice`: the store's writer thread runs at the configured CPU priority, and only that
/// thread does; saves still commit while readers keep every read connection busy.
final class WriterPriorityTests: StorageTestCase, @unchecked Sendable {
    /// The nice value the writer thread of `s` runs at, read on that thread.
    private func writerNice(_ s: Store) async -> Int? {
        await withCheckedContinuation { (c: CheckedContinuation<Int?, Never>) in
            let ok = s.writer.submit(.exclusive(CancelFlag(), { _ in c.resume(returning: ThreadPriority.currentThreadNice()) }))
            if !ok { c.resume(returning: nil) }
        }
    }

    func testWriterThreadRunsAtTheConfiguredNiceAndStillCommitsUnderReadLoad() async throws {
        #if os(Linux)
        // Store threads start from the process's nice value (the main thread's), not their creator's.
        let base = ThreadPriority.processNice()
        XCTAssertNotNil(base)
        let mine = ThreadPriority.currentThreadNice()
        let s = try open { $0.readerCount = 2; $0.writerNice = 10 }
        let got = await writerNice(s)
        // setpriority sets an absolute value; only a process already nicer than 10 keeps its own
        if let base, base <= 10 { XCTAssertEqual(got, 10) } else { XCTAssertEqual(got, base) }
        XCTAssertEqual(ThreadPriority.currentThreadNice(), mine, "only the writer thread changes")
        let plain = try open("plain")
        let plainNice = await writerNice(plain)
        XCTAssertEqual(plainNice, base, "writerNice 0 leaves the writer at the process's priority")

        var seed = SaveRequest()
        seed.inserts = (0..<20).map { InsertOperation(temporaryID: "p\($0)", entity: "Person", values: ["name": .string("P\($0)"), "age": .int(Int64($0))]) }
        let ids = try await s.save(seed).permanentIDs.values.sorted()
        // Readers on more threads than there are cores and read connections, reading without pause.
        let stop = Locked(false)
        let reads = Locked(0)
        let failures = Locked<[String]>([])
        let group = DispatchGroup()
        for t in 0..<(ProcessInfo.processInfo.activeProcessorCount + 2) {
            group.enter()
            Thread {
                defer { group.leave() }
                while !stop.withLock({ $0 }) {
                    do {
                        let got = try s.readSync { ctx in try ctx.objects(ids) }
                        if got.count != ids.count { failures.withLock { $0.append("thread \(t): \(got.count) objects") } }
                    } catch { failures.withLock { $0.append("thread \(t): \(error)") } }
                    reads.withLock { $0 += 1 }
                }
            }.start()
        }
        let before = s.currentToken.generation
        for i in 0..<100 {
            var r = SaveRequest()
            r.updates = [UpdateOperation(objectID: ids[i % ids.count], values: ["score": .double(Double(1000 + i))])]
            let res = try await s.save(r)
            XCTAssertEqual(res.token.generation, before + Int64(i) + 1)
        }
        stop.withLock { $0 = true }
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in group.notify(queue: .global()) { c.resume() } }
        XCTAssertEqual(failures.withLock { $0 }, [])
        XCTAssertGreaterThan(reads.withLock { $0 }, 0)
        let after = try await s.objects(ids)
        for i in 80..<100 { XCTAssertEqual(after[i % ids.count]?.values["score"], .double(Double(1000 + i))) }
        #endif
    }

    func testThreadPrioritySetsOnlyTheCallingThread() async throws {
        #if os(Linux)
        let base = ThreadPriority.currentThreadNice()
        let seen = Locked<Int?>(nil)
        let done = DispatchSemaphore(value: 0)
        let t = Thread {
            if ThreadPriority.setCurrentThreadNice(19) { seen.withLock { $0 = ThreadPriority.currentThreadNice() } }
            done.signal()
        }
        t.start()
        done.wait()
        XCTAssertEqual(seen.withLock { $0 }, 19)
        XCTAssertEqual(ThreadPriority.currentThreadNice(), base)
        #endif
    }

    /// Store threads name themselves, whichever thread opened the store: a new thread inherits
    /// its creator's name (here a Dispatch worker's), so a name set only on the `Thread` object
    /// never reached the kernel, and `top -H` showed the Dispatch queue's name.
    func testStoreThreadsCarryTheirNamesWhenOpenedFromADispatchWorker() throws {
        #if os(Linux)
        let opened = DispatchSemaphore(value: 0)
        let result = Locked<Result<Store, Error>?>(nil)
        DispatchQueue.global(qos: .userInitiated).async {
            result.withLock { $0 = Result { try self.open("named") { $0.readerCount = 2 } } }
            opened.signal()
        }
        opened.wait()
        let s = try XCTUnwrap(result.withLock { $0 }).get()
        _ = try s.readSync { ctx in try ctx.objects([]) }
        // Reader threads name themselves once running, and say so to no one: polled (bounded),
        // no event exists.
        var names: Set<String> = []
        _ = pollUntil(seconds: 2) {
            names = ThreadNames.all
            return names.isSuperset(of: ["ubq-writer-0", "ubq-reader-0", "ubq-reader-1"])
        }
        XCTAssertTrue(names.contains("ubq-writer-0"), "thread names: \(names.sorted())")
        XCTAssertTrue(names.contains("ubq-reader-0"), "thread names: \(names.sorted())")
        XCTAssertTrue(names.contains("ubq-reader-1"), "thread names: \(names.sorted())")
        #endif
    }
}
