import Foundation
import XCTest
@testable import UbiquityServices

/// `AcknowledgementBook` without a server: each test drives one transition's acknowledgement
/// step through the events it gets (its WILL_CHANGEs written, subscriptions receiving them,
/// acknowledgements, subscriptions ending, the deadline) and checks when it lets the transition go.
final class AcknowledgementBookTests: XCTestCase {
    private let a = UUID(), b = UUID()
    private func sub(_ id: UInt64, _ session: String, _ store: UUID) -> AcknowledgementBook.Subscriber { .init(id: id, session: session, store: store) }
    private func ack(_ session: String, _ store: UUID, _ generation: Int64) -> AcknowledgementBook.Acknowledgement {
        .init(session: session, store: store, generation: generation)
    }

    func testNobodyOptedInGoesOnOnceTheEventsAreWritten() {
        var book = AcknowledgementBook(stores: [a: 10, b: .max], expected: [])
        XCTAssertEqual(book.action, .wait, "who receives the event is not settled before it is written")
        XCTAssertEqual(book.announced(store: a, generation: 11), .wait)
        XCTAssertEqual(book.announced(store: b, generation: 4), .proceed(.acknowledged))
    }

    func testItWaitsForEverySubscriberThenGoesOn() {
        var book = AcknowledgementBook(stores: [a: 10, b: 20], expected: [sub(1, "s1", a), sub(2, "s1", b), sub(3, "s2", a)])
        _ = book.announced(store: a, generation: 11)
        XCTAssertEqual(book.announced(store: b, generation: 21), .wait)
        let first = book.acknowledged(ack("s1", a, 11))
        XCTAssertTrue(first.awaited)
        XCTAssertEqual(first.action, .wait, "s1 still owes store b's, s2 store a's")
        XCTAssertEqual(book.acknowledged(ack("s2", a, 11)).action, .wait)
        let last = book.acknowledged(ack("s1", b, 21))
        XCTAssertTrue(last.awaited)
        XCTAssertEqual(last.action, .proceed(.acknowledged))
    }

    func testOneAcknowledgementCoversEverySubscriptionOfTheSessionOnThatStore() {
        var book = AcknowledgementBook(stores: [a: 10], expected: [sub(1, "s1", a), sub(2, "s1", a)])
        _ = book.announced(store: a, generation: 11)
        XCTAssertEqual(book.acknowledged(ack("s1", a, 11)).action, .proceed(.acknowledged))
    }

    func testAnAcknowledgementOfAnotherEventCountsForNothing() {
        var book = AcknowledgementBook(stores: [a: 10], expected: [sub(1, "s1", a)])
        _ = book.announced(store: a, generation: 11)
        let old = book.acknowledged(ack("s1", a, 7))
        XCTAssertFalse(old.awaited, "an older WILL_CHANGE replayed from history")
        XCTAssertEqual(old.action, .wait)
        XCTAssertFalse(book.acknowledged(ack("s1", b, 11)).awaited, "another store's")
        XCTAssertFalse(book.acknowledged(ack("s9", a, 11)).awaited, "a session nobody waits for")
        XCTAssertEqual(book.action, .wait)
    }

    func testAnAcknowledgementBeforeTheBookLearnsTheGenerationCounts() {
        // the feed hands the event to subscribers before its append returns
        var book = AcknowledgementBook(stores: [a: 10], expected: [sub(1, "s1", a)])
        let early = book.acknowledged(ack("s1", a, 11))
        XCTAssertTrue(early.awaited)
        XCTAssertEqual(early.action, .wait)
        XCTAssertEqual(book.announced(store: a, generation: 11), .proceed(.acknowledged))
    }

    func testBeforeTheGenerationIsKnownOnlyEventsAfterTheFloorCanBeThisTransitions() {
        var book = AcknowledgementBook(stores: [a: 10], expected: [sub(1, "s1", a)])
        XCTAssertFalse(book.acknowledged(ack("s1", a, 10)).awaited, "at or before the store's generation when the book opened")
        XCTAssertEqual(book.announced(store: a, generation: 11), .wait)
    }

    func testASubscriberThatEndsCountsAsAcknowledged() {
        var book = AcknowledgementBook(stores: [a: 10], expected: [sub(1, "s1", a), sub(2, "s2", a)])
        _ = book.announced(store: a, generation: 11)
        XCTAssertEqual(book.ended(2), .wait)
        XCTAssertEqual(book.ended(99), .wait, "one nobody waits for changes nothing")
        XCTAssertEqual(book.ended(1), .proceed(.acknowledged))
    }

    func testTheDeadlineLetsItGoOnAndNamesWhoNeverAcknowledged() {
        var book = AcknowledgementBook(stores: [a: 10], expected: [sub(3, "s1", a), sub(1, "s2", a), sub(2, "s3", a)])
        _ = book.announced(store: a, generation: 11)
        _ = book.acknowledged(ack("s2", a, 11))
        XCTAssertEqual(book.deadlinePassed(), .proceed(.deadlinePassed(unacknowledged: [2, 3])))
    }

    func testAfterItWentOnEverythingIsANoOp() {
        var book = AcknowledgementBook(stores: [a: 10], expected: [sub(1, "s1", a)])
        _ = book.announced(store: a, generation: 11)
        _ = book.deadlinePassed()
        let late = book.acknowledged(ack("s1", a, 11))
        XCTAssertFalse(late.awaited, "a late acknowledgement is a no-op")
        XCTAssertEqual(late.action, .proceed(.deadlinePassed(unacknowledged: [1])))
        XCTAssertEqual(book.received(sub(5, "s5", a), generation: 11), .proceed(.deadlinePassed(unacknowledged: [1])))
        XCTAssertEqual(book.deadlinePassed(), .proceed(.deadlinePassed(unacknowledged: [1])))
    }

    func testAcknowledgingTwiceIsANoOp() {
        var book = AcknowledgementBook(stores: [a: 10], expected: [sub(1, "s1", a), sub(2, "s2", a)])
        _ = book.announced(store: a, generation: 11)
        XCTAssertTrue(book.acknowledged(ack("s1", a, 11)).awaited)
        let again = book.acknowledged(ack("s1", a, 11))
        XCTAssertFalse(again.awaited)
        XCTAssertEqual(again.action, .wait)
    }

    func testASubscriptionThatReceivesThisEventLaterIsWaitedForToo() {
        // one that resumed from an older token during the wait and replayed the event
        var book = AcknowledgementBook(stores: [a: 10], expected: [sub(1, "s1", a)])
        _ = book.announced(store: a, generation: 11)
        XCTAssertEqual(book.received(sub(2, "s2", a), generation: 11), .wait)
        XCTAssertEqual(book.received(sub(3, "s3", a), generation: 5), .wait, "an older event: not this transition's")
        XCTAssertEqual(book.acknowledged(ack("s1", a, 11)).action, .wait, "s2 joined")
        XCTAssertEqual(book.acknowledged(ack("s2", a, 11)).action, .proceed(.acknowledged))
    }

    func testReceivingAgainOrOnAnotherStoreAddsNobody() {
        var book = AcknowledgementBook(stores: [a: 10], expected: [sub(1, "s1", a)])
        _ = book.announced(store: a, generation: 11)
        XCTAssertEqual(book.received(sub(1, "s1", a), generation: 11), .wait)
        XCTAssertEqual(book.received(sub(2, "s2", b), generation: 11), .wait)
        XCTAssertEqual(book.expected.count, 1)
    }

    func testSubscribersOfOtherStoresAreNotExpected() {
        var book = AcknowledgementBook(stores: [a: 10], expected: [sub(1, "s1", b)])
        XCTAssertEqual(book.announced(store: a, generation: 11), .proceed(.acknowledged))
    }
}

/// `StoreEventAcks` / `AcknowledgementWait`: the registry hands each event to the transitions it
/// concerns, and a waiting transition resumes when its book says so.
final class StoreEventAcksTests: XCTestCase {
    func testAWaitingTransitionResumesOnTheLastAcknowledgement() async {
        let acks = StoreEventAcks(), store = UUID()
        let wait = acks.open(stores: [store: 1], expected: [.init(id: 1, session: "s1", store: store)])
        defer { wait.close() }
        wait.announced(store, generation: 2)
        let waiting = Task { await wait.wait(seconds: 3600) }
        XCTAssertFalse(acks.acknowledged(.init(session: "s2", store: store, generation: 2)))
        XCTAssertTrue(acks.acknowledged(.init(session: "s1", store: store, generation: 2)))
        let outcome = await waiting.value
        XCTAssertEqual(outcome, .acknowledged)
        XCTAssertFalse(acks.acknowledged(.init(session: "s1", store: store, generation: 2)), "twice: a no-op")
    }

    func testAnEndedSubscriptionReleasesIt() async {
        let acks = StoreEventAcks(), store = UUID()
        let wait = acks.open(stores: [store: 1], expected: [.init(id: 7, session: "s1", store: store)])
        defer { wait.close() }
        wait.announced(store, generation: 2)
        acks.ended(7)
        let outcome = await wait.wait(seconds: 3600)
        XCTAssertEqual(outcome, .acknowledged)
    }

    func testTheDeadlineReleasesItWithoutTheAcknowledgement() async {
        let acks = StoreEventAcks(), store = UUID()
        let wait = acks.open(stores: [store: 1], expected: [.init(id: 7, session: "s1", store: store)])
        wait.announced(store, generation: 2)
        let outcome = await wait.wait(seconds: 0)
        XCTAssertEqual(outcome, .deadlinePassed(unacknowledged: [7]))
        wait.close()
        XCTAssertFalse(acks.acknowledged(.init(session: "s1", store: store, generation: 2)), "closed: nothing waits any more")
    }
}
