import Dispatch
import Synchronization
import UbiquityLock
import XCTest
@testable import UbiquityLoop

/// The loop layer on a real libuv loop: cross-thread work, timers, clean shutdown.
final class EventLoopTests: XCTestCase {
    func testWorkFromManyThreadsRunsOnTheLoopThreadExactlyOnce() {
        let thread = EventLoopThread(name: "test-loop")
        thread.start()
        let loop = thread.loop
        let ran = Atomic<Int>(0)
        let offLoop = Atomic<Int>(0)
        let done = DispatchSemaphore(value: 0)
        let total = 8 * 2000
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            for _ in 0..<2000 {
                // uv_async_send coalesces: the loop must still run every queued item.
                loop.execute {
                    if !loop.inEventLoop { offLoop.wrappingAdd(1, ordering: .relaxed) }
                    if ran.add(1, ordering: .relaxed).newValue == total { done.signal() }
                }
            }
        }
        XCTAssertEqual(done.wait(timeout: .now() + 30), .success)
        XCTAssertEqual(ran.load(ordering: .relaxed), total)
        XCTAssertEqual(offLoop.load(ordering: .relaxed), 0)
        XCTAssertFalse(loop.inEventLoop)
        loop.stop()
        thread.join()
    }

    /// `afterCurrentBatch` (used to flush a connection once for all the blocking outcomes of a
    /// batch): work asked for during a drain runs after every job of that batch, before the jobs
    /// those jobs queue; asked for outside a drain (a timer, or deferred work itself), it runs at
    /// once.
    func testAfterCurrentBatchRunsAfterTheWholeBatchAndAtOnceOutsideADrain() {
        let thread = EventLoopThread(name: "test-batch")
        thread.start()
        let loop = thread.loop
        let order = Lock<[String]>([])
        let gate = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        // Hold the loop in one job so that A, B and C are queued together: they form one batch.
        loop.execute { gate.wait() }
        loop.execute {
            order.withLock { $0.append("A") }
            loop.afterCurrentBatch {
                order.withLock { $0.append("after-A") }
                loop.afterCurrentBatch { order.withLock { $0.append("after-after") } }
            }
            loop.execute { order.withLock { $0.append("next-batch") } }
        }
        loop.execute {
            order.withLock { $0.append("B") }
            loop.afterCurrentBatch { order.withLock { $0.append("after-B") } }
        }
        loop.execute {
            order.withLock { $0.append("C") }
            let timer = LoopTimer(loop: loop)
            timer.start(milliseconds: 1) {
                timer.close()
                var ranAtOnce = false
                loop.afterCurrentBatch { ranAtOnce = true }
                order.withLock { $0.append(ranAtOnce ? "timer-at-once" : "timer-deferred") }
                done.signal()
            }
        }
        gate.signal()
        XCTAssertEqual(done.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(order.withLock { $0 },
                       ["A", "B", "C", "after-A", "after-after", "after-B", "next-batch", "timer-at-once"])
        loop.stop()
        thread.join()
    }

    func testTimerFiresOnceAndCloseStopsIt() {
        let thread = EventLoopThread(name: "test-timer")
        thread.start()
        let fired = Atomic<Int>(0)
        let done = DispatchSemaphore(value: 0)
        thread.loop.execute {
            let once = LoopTimer(loop: thread.loop)
            once.start(milliseconds: 5) {
                fired.wrappingAdd(1, ordering: .relaxed)
                once.close()
                // A repeating timer closed after its third tick never fires again.
                let repeating = LoopTimer(loop: thread.loop)
                var ticks = 0
                repeating.start(milliseconds: 1, repeatMilliseconds: 1) {
                    ticks += 1
                    if ticks == 3 {
                        repeating.close()
                        let settle = LoopTimer(loop: thread.loop)
                        settle.start(milliseconds: 20) {
                            settle.close()
                            XCTAssertEqual(ticks, 3)
                            done.signal()
                        }
                    }
                }
            }
        }
        XCTAssertEqual(done.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(fired.load(ordering: .relaxed), 1)
        thread.loop.stop()
        thread.join()
    }

    func testByteBufferKeepsBytesAcrossGrowthAndRemoveFirst() {
        var b = ByteBuffer()
        defer { b.deallocate() }
        var expected = [UInt8]()
        for i in 0..<10_000 {
            let chunk = [UInt8](repeating: UInt8(truncatingIfNeeded: i), count: i % 7 + 1)
            b.append(chunk)
            expected += chunk
        }
        XCTAssertEqual(Array(b.bytes), expected)
        b.removeFirst(12_345)
        XCTAssertEqual(Array(b.bytes), Array(expected.dropFirst(12_345)))
        b.removeAll()
        XCTAssertEqual(b.count, 0)
    }
}
