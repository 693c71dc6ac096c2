import Foundation
import XCTest
@testable import UbiquityStorage

/// `AnnouncementLog`: every WILL_CHANGE is closed by one DID_CHANGE of its transition, and what a
/// finishing or resumed transition still has to write (docs/lifecycle.md "Every WILL_CHANGE is closed").
final class AnnouncementLogTests: StorageTestCase, @unchecked Sendable {
    private func will(_ t: StoreEventRecord.Transition, _ id: String, device: String? = nil) -> StoreEventRecord {
        StoreEventRecord(phase: .willChange, transition: t, device: device, transitionID: id)
    }

    func testAWillOpensAndItsOwnDidClosesItEvenWhenTwoSignOutsInterleave() {
        var log = AnnouncementLog()
        let a = will(.accountRemoved, "a", device: "d1"), b = will(.accountRemoved, "b", device: "d1")
        log.append(a)
        log.append(b)
        XCTAssertEqual(log.open, [a, b])
        log.append(b.completing(usingLocalStorage: false))
        XCTAssertEqual(log.open, [a], "b's DID closes b, not the older a of the same device")
        log.append(a.cancelling())
        XCTAssertEqual(log.open, [])
        XCTAssertEqual(log.last, a.cancelling())
    }

    func testADidThatClosesNothingIsAllowedAndALegacyDidClosesTheOldestOfItsTransitionAndDevice() {
        var log = AnnouncementLog()
        log.append(StoreEventRecord(phase: .didChange, transition: .initialImportCompleted))
        XCTAssertEqual(log.open, [])
        let legacy = StoreEventRecord(phase: .willChange, transition: .contentRemoved)
        log.append(legacy)
        log.append(StoreEventRecord(phase: .didChange, transition: .accountRemoved))
        XCTAssertEqual(log.open, [legacy], "another transition's DID closes nothing")
        log.append(StoreEventRecord(phase: .didChange, transition: .contentRemoved))
        XCTAssertEqual(log.open, [])
    }

    func testClosingCompletesTheOpenWillCancelsTheRestAndWritesNothingTwice() {
        var log = AnnouncementLog()
        let signOut = will(.accountRemoved, "s", device: "d1"), archive = will(.accountRemoved, "x")
        log.append(signOut)
        log.append(archive)
        let closing = log.closing(.accountRemoved, transitionID: "new")
        XCTAssertEqual(closing, [signOut.cancelling(), archive.completing(usingLocalStorage: false)])
        XCTAssertEqual(closing.map(\.cancelled), [true, nil])
        for e in closing { log.append(e) }
        XCTAssertEqual(log.open, [])
        XCTAssertEqual(log.closing(.accountRemoved, transitionID: "again"), [], "a resumed transition that finished writes nothing")
    }

    func testClosingAStoreThatNeverHeardTheWillSaysTheWholeTransition() {
        var log = AnnouncementLog()
        log.append(StoreEventRecord(phase: .didChange, transition: .accountRemoved, transitionID: "x"))
        let closing = log.closing(.accountAdded, transitionID: "r")
        XCTAssertEqual(closing.map(\.phase), [.willChange, .didChange])
        XCTAssertEqual(Set(closing.map(\.transitionID)), ["r"])
        XCTAssertEqual(closing.map(\.transition), [.accountAdded, .accountAdded])
        for e in closing { log.append(e) }
        XCTAssertEqual(log.closing(.accountAdded, transitionID: "r2"), [])
        // a cancelled DID is no "it happened": the transition is said again
        var cancelled = AnnouncementLog()
        cancelled.append(will(.accountRemoved, "c").cancelling())
        XCTAssertEqual(cancelled.closing(.accountRemoved, transitionID: "n").count, 2)
    }

    func testCancellingClosesOnlyThatTransitionsWill() {
        var log = AnnouncementLog()
        let a = will(.accountRemoved, "a", device: "d1"), b = will(.accountRemoved, "b", device: "d2")
        log.append(a)
        log.append(b)
        XCTAssertEqual(log.cancelling("b"), [b.cancelling()])
        XCTAssertEqual(log.cancelling("zzz"), [])
    }

    func testTheStoreKeepsTheLogWithItsHistoryAcrossAReopen() async throws {
        let id = UUID()
        let s = try open("log", id: id)
        let start = s.currentToken
        let w = will(.contentRemoved, "t")
        _ = try await s.appendEvent(w)
        _ = try await insert(s, "Person", ["name": "saved in the window"])
        let log = try await s.announcementLog()
        XCTAssertEqual(log.open, [w])
        s.close()
        let again = try open("log", id: id)
        let reread = try await again.announcementLog()
        XCTAssertEqual(reread, log, "durable, written with the event")
        for e in reread.cancelling("t") { _ = try await again.appendEvent(e) }
        let closed = try await again.announcementLog()
        XCTAssertEqual(closed.open, [])
        let history = try await again.history(after: start, limit: 10).transactions
        XCTAssertEqual(history.compactMap(\.event), [w, w.cancelling()])
        XCTAssertEqual(StoreEventRecord.decode(try w.cancelling().encoded())?.cancelled, true)
    }

    func testAnEventWithoutTheNewFieldsEncodesAsBefore() throws {
        let e = StoreEventRecord(phase: .didChange, transition: .accountRemoved, device: "d1")
        let json = String(decoding: try e.encoded(), as: UTF8.self)
        XCTAssertFalse(json.contains("cancelled") || json.contains("transitionID"), json)
    }
}
