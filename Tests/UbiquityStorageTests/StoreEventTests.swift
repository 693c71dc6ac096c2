import Foundation
import XCTest
import UbiquityTestSupport
@testable import UbiquityStorage

/// Store transition events as history entries (`Store.appendEvent`): a generation of their own,
/// in commit order with the saves, the same from the feed and from disk, and kept across a reopen.
final class StoreEventTests: StorageTestCase, @unchecked Sendable {
    func testEventsTakeTheirOwnGenerationInOrderWithSavesFromFeedAndDiskAndAfterAReopen() async throws {
        let id = UUID()
        let s = try open("events", id: id)
        let start = s.currentToken
        let will = StoreEventRecord(phase: .willChange, transition: .accountRemoved, device: "d1")
        let did = StoreEventRecord(phase: .didChange, transition: .accountRemoved, device: "d1")
        let w = try await s.appendEvent(will)
        _ = try await insert(s, "Person", ["name": "saved in the window"])
        let d = try await s.appendEvent(did)
        XCTAssertEqual(w.generation, start.generation + 1)
        XCTAssertEqual(d.generation, start.generation + 3)
        XCTAssertEqual(s.currentToken.generation, d.generation)

        let fromDisk = try await s.history(after: start, limit: 10).transactions
        XCTAssertEqual(fromDisk.map(\.event), [will, nil, did])
        XCTAssertEqual(fromDisk.map(\.changes.count), [0, 1, 0])
        XCTAssertTrue(pollUntil { s.feed.publishedGeneration >= d.generation })
        guard case .transactions(let live) = s.feed.read(after: start.generation, limit: 10) else { return XCTFail("the feed holds them") }
        XCTAssertEqual(live.map(\.transaction), fromDisk, "the feed and the disk agree")

        s.close()
        let again = try open("events", id: id)
        let reread = try await again.history(after: start, limit: 10).transactions
        XCTAssertEqual(reread.map(\.event), [will, nil, did], "durable")
        XCTAssertEqual(again.currentToken.generation, d.generation)
    }

    func testAnEventAppendedOnceUnderAKeyIsWrittenOnlyOnceEvenAfterAReopen() async throws {
        let id = UUID()
        let s = try open("once", id: id)
        let start = s.currentToken
        let did = StoreEventRecord(phase: .didChange, transition: .initialImportCompleted,
                                   importCounts: .init(inserted: 2, merged: 0, deduplicated: 0))
        let first = try await s.appendEvent(did, once: "import:job-1")
        let redo = try await s.appendEvent(did, once: "import:job-1")
        XCTAssertEqual(redo, first, "a redo returns the first append's token")
        _ = try await insert(s, "Person", ["name": "later"])
        s.close()
        let again = try open("once", id: id)
        let afterReopen = try await again.appendEvent(did, once: "import:job-1")
        XCTAssertEqual(afterReopen.generation, first.generation, "durable")
        let other = try await again.appendEvent(did, once: "import:job-2")
        XCTAssertEqual(other.generation, first.generation + 2, "another key is another event")
        let events = try await again.history(after: start, limit: 10).transactions.compactMap(\.event)
        XCTAssertEqual(events, [did, did])
    }

    func testAnEventConcernsItsDeviceOrEveryDevice() {
        let one = StoreEventRecord(phase: .willChange, transition: .accountRemoved, device: "d1")
        XCTAssertTrue(one.concerns(device: "d1"))
        XCTAssertFalse(one.concerns(device: "d2"))
        XCTAssertFalse(one.concerns(device: nil))
        let all = StoreEventRecord(phase: .didChange, transition: .contentRemoved,
                                   importCounts: .init(inserted: 1, merged: 2, deduplicated: 3))
        XCTAssertTrue(all.concerns(device: "d2") && all.concerns(device: nil))
        XCTAssertEqual(StoreEventRecord.decode(try all.encoded()), all)
        XCTAssertNil(StoreEventRecord.decode(Array("[]".utf8)), "a save's record is no event")
    }
}
