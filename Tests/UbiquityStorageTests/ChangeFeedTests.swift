import Foundation
import XCTest
import UbiquityTestSupport
@testable import UbiquityStorage

/// The store's change feed: what the writer hands over after each commit is what `history`
/// reads from disk; the window is bounded and says `.behind` past it; waiters wake on new
/// transactions, on `wake`, and on close.
final class ChangeFeedTests: StorageTestCase, @unchecked Sendable {
    /// Reads the feed after `after` until it holds `through` (the writer hands over asynchronously).
    private func feedTransactions(_ s: Store, after: Int64, through: Int64) async throws -> [HistoryTransaction] {
        let published = pollUntil { s.feed.publishedGeneration >= through }
        XCTAssertTrue(published, "the feed never published \(through)")
        guard case .transactions(let txs) = s.feed.read(after: after, limit: 10_000) else {
            XCTFail("expected transactions after \(after)"); return []
        }
        return txs.map(\.transaction)
    }

    func testFeedHoldsWhatHistoryReadsFromDisk() async throws {
        let s = try open()
        let start = s.currentToken
        var ids: [ObjectID] = []
        for i in 0..<5 { ids.append(try await insert(s, "Person", ["name": .string("P\(i)")])) }
        _ = try await update(s, ids[1], ["age": 7])
        let current = s.currentToken.generation
        let fromFeed = try await feedTransactions(s, after: start.generation, through: current)
        let fromDisk = try await s.history(after: start, limit: 100).transactions
        XCTAssertEqual(fromFeed.count, 6)
        XCTAssertEqual(fromFeed, fromDisk)
        guard case .upToDate = s.feed.read(after: current, limit: 10) else { return XCTFail("nothing after the newest") }
        guard case .transactions(let tail) = s.feed.read(after: current - 2, limit: 10) else { return XCTFail("a tail") }
        XCTAssertEqual(tail.map(\.generation), [current - 1, current])
        guard case .transactions(let one) = s.feed.read(after: start.generation, limit: 1) else { return XCTFail("a page") }
        XCTAssertEqual(one.map(\.generation), [start.generation + 1])
    }

    func testWindowIsBoundedAndOlderPositionsAreBehind() async throws {
        let s = try open { $0.changeFeedWindowTransactions = 3 }
        let start = s.currentToken.generation
        for i in 0..<8 { _ = try await insert(s, "Person", ["name": .string("P\(i)")]) }
        let current = s.currentToken.generation
        let kept = try await feedTransactions(s, after: current - 3, through: current)
        XCTAssertEqual(kept.map(\.token.generation), [current - 2, current - 1, current])
        guard case .behind = s.feed.read(after: start, limit: 10) else { return XCTFail("a position before the window must read disk") }
        guard case .behind = s.feed.read(after: current - 4, limit: 10) else { return XCTFail("one before the window's base") }
    }

    func testAWaiterWakesOnACommitOnWakeAndOnClose() async throws {
        let s = try open()
        let at = s.currentToken.generation
        let woke = EventCounter()
        let waiter = Task { await s.feed.wait(after: at, id: 1); woke.signal() }
        _ = try await insert(s, "Person", ["name": "A"])
        await waiter.value
        XCTAssertEqual(woke.count, 1)

        // a wake-up before the wait is not lost
        s.feed.wake(2)
        await s.feed.wait(after: s.feed.publishedGeneration, id: 2)

        let closing = Task { await s.feed.wait(after: s.feed.publishedGeneration, id: 3); woke.signal() }
        s.close()
        await closing.value
        guard case .closed = s.feed.read(after: 0, limit: 1) else { return XCTFail("a closed feed says so") }
    }

    func testAGenerationMovedOutsideSavesRestartsTheWindow() async throws {
        let s = try open()
        _ = try await insert(s, "Person", ["name": "A"])
        let before = s.currentToken.generation
        let first = pollUntil { s.feed.publishedGeneration == before }
        XCTAssertTrue(first)
        let loaded = try await s.bulkLoadForTesting(entity: "Person", count: 3, values: ["name": .textWithIndex(prefix: "B")])
        let noted = pollUntil { s.feed.publishedGeneration == loaded.generation }
        XCTAssertTrue(noted)
        guard case .behind = s.feed.read(after: before - 1, limit: 10) else { return XCTFail("the window restarted after the bulk load") }
        _ = try await insert(s, "Person", ["name": "C"])
        let txs = try await feedTransactions(s, after: loaded.generation, through: loaded.generation + 1)
        XCTAssertEqual(txs.map(\.token.generation), [loaded.generation + 1])
    }
}
