import XCTest
import UbiquityStorage
@testable import UbiquityServices

/// The key-value subscription's decisions, driven without a server.
final class KeyValueSubscriptionStateTests: XCTestCase {
    private func entry(_ seq: Int64, deleted: Bool = false, author: String = "", origin: KeyValueStore.Origin = .write) -> KeyValueStore.Entry {
        KeyValueStore.Entry(key: "k\(seq)", value: [], version: 1, seq: seq, deleted: deleted, author: author, updatedMS: 0, origin: origin)
    }

    func testInitialSyncSendsLiveKeysAndSkipsOldTombstones() {
        var s = KeyValueSubscriptionState(start: 0, initialSyncThrough: 3)
        XCTAssertEqual(s.read(entry(1)), .initialSync)
        XCTAssertNil(s.read(entry(2, deleted: true)))
        XCTAssertEqual(s.read(entry(3)), .initialSync)
        // a deletion after the sync began is a real change: the copy may hold the key
        XCTAssertEqual(s.read(entry(4, deleted: true)), .serverChange)
        XCTAssertEqual(s.position, 4)
    }

    func testFromATokenEveryChangeIsAServerChangeTombstonesIncluded() {
        var s = KeyValueSubscriptionState(start: 7)
        XCTAssertEqual(s.read(entry(8, deleted: true)), .serverChange)
        XCTAssertEqual(s.read(entry(9)), .serverChange)
    }

    func testCaughtUpOnceThenProgressOnlyAfterSkippedChangesAndWhenDue() {
        var s = KeyValueSubscriptionState(start: 5, excluded: ["me"])
        XCTAssertEqual(s.readAll(progressDue: false), .caughtUp)
        s.didSend(at: s.position)
        XCTAssertNil(s.readAll(progressDue: true))  // nothing skipped
        XCTAssertNil(s.read(entry(6, author: "me")))
        XCTAssertNil(s.readAll(progressDue: false))  // not due yet
        XCTAssertEqual(s.readAll(progressDue: true), .progress)
        s.didSend(at: s.position)
        XCTAssertEqual(s.sent, 6)
        XCTAssertNil(s.readAll(progressDue: true))
        XCTAssertEqual(s.read(entry(7, author: "them")), .serverChange)
    }

    func testAKeyAFirstSignInBroughtIsAnAccountChangeExceptInAnInitialSync() {
        var s = KeyValueSubscriptionState(start: 0, initialSyncThrough: 1)
        XCTAssertEqual(s.read(entry(1, origin: .accountChange)), .initialSync, "a first copy is a first copy, whatever the origin")
        XCTAssertEqual(s.read(entry(2, origin: .accountChange)), .accountChange)
        XCTAssertEqual(s.read(entry(3)), .serverChange)
    }

    func testQuotaNoticesFollowTheAuthorFilter() {
        let s = KeyValueSubscriptionState(start: 0, excluded: ["me"])
        XCTAssertFalse(s.wants(author: "me"))
        XCTAssertTrue(s.wants(author: "them"))
        XCTAssertTrue(s.wants(author: ""))
    }

    func testAPositionBelowTheTrimFloorIsExpiredUnlessTheFloorIsInsideTheInitialSync() {
        var s = KeyValueSubscriptionState(start: 4)
        XCTAssertFalse(s.expired(floor: 0))
        XCTAssertFalse(s.expired(floor: 4), "the trimmed tombstone at 4 was already read")
        XCTAssertTrue(s.expired(floor: 5))
        _ = s.read(entry(6))
        XCTAssertFalse(s.expired(floor: 5))
        let sync = KeyValueSubscriptionState(start: 0, initialSyncThrough: 9)
        XCTAssertFalse(sync.expired(floor: 9), "an initial sync sends no tombstones: none can be missing")
        XCTAssertTrue(sync.expired(floor: 10))
    }
}
