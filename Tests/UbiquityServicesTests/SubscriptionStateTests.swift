import XCTest
@testable import UbiquityServices

/// `SubscriptionState` without a socket or a store: each test drives it with the events a
/// subscription meets and checks the action it asks for.
final class SubscriptionStateTests: XCTestCase {
    func testBacklogFromDiskThenCaughtUpOnceThenLiveWaits() {
        var s = SubscriptionState(start: 10, storeGeneration: 20)
        XCTAssertEqual(s.startAction, .readFeed(after: 10))
        XCTAssertEqual(s.event(.feed(.behind)), .readDisk(after: 10))
        XCTAssertEqual(s.event(.diskPage(through: 15, exhausted: false)), .readDisk(after: 15))
        XCTAssertEqual(s.phase, .catchingUp)
        XCTAssertEqual(s.event(.diskPage(through: 20, exhausted: true)), .sendCaughtUp(thenReadFeedAfter: 20))
        XCTAssertEqual(s.event(.caughtUpSent), .readFeed(after: 20))
        XCTAssertEqual(s.event(.feed(.upToDate)), .wait(after: 20))
        XCTAssertEqual(s.phase, .live)
        XCTAssertEqual(s.event(.woke), .readFeed(after: 20))
        XCTAssertEqual(s.event(.feed(.transactions(through: 23))), .readFeed(after: 23))
        XCTAssertEqual(s.position, 23)
        XCTAssertEqual(s.event(.feed(.upToDate)), .wait(after: 23), "the caught-up marker goes out once")
    }

    func testStartingAtTheCurrentGenerationIsCaughtUpAtOnce() {
        var s = SubscriptionState(start: 7, storeGeneration: 7)
        XCTAssertEqual(s.event(.diskPage(through: 7, exhausted: true)), .sendCaughtUp(thenReadFeedAfter: 7))
    }

    func testDiskExhaustedBeforeTheBacklogEndAsksTheFeedAndIsCaughtUpWhenItIsUpToDate() {
        // the last generations' records are still on their way to the feed
        var s = SubscriptionState(start: 0, storeGeneration: 5)
        XCTAssertEqual(s.event(.diskPage(through: 3, exhausted: true)), .readFeed(after: 3))
        XCTAssertEqual(s.event(.feed(.transactions(through: 5))), .sendCaughtUp(thenReadFeedAfter: 5))
        var t = SubscriptionState(start: 0, storeGeneration: 5)
        _ = t.event(.diskPage(through: 3, exhausted: true))
        XCTAssertEqual(t.event(.feed(.upToDate)), .wait(after: 3), "not caught up before the backlog's end")
        XCTAssertEqual(t.event(.woke), .readFeed(after: 3))
        XCTAssertEqual(t.event(.feed(.transactions(through: 5))), .sendCaughtUp(thenReadFeedAfter: 5))
    }

    func testFromNowStartsInTheFeedWithoutADiskRead() {
        var s = SubscriptionState(start: 9, storeGeneration: 9)
        XCTAssertEqual(s.startAction, .readFeed(after: 9))
        XCTAssertEqual(s.event(.feed(.upToDate)), .sendCaughtUp(thenReadFeedAfter: 9))
    }

    func testFallingOutOfTheWindowLagsOnDiskAndComesBackLiveWithoutASecondCaughtUp() {
        var s = SubscriptionState(start: 0, storeGeneration: 0)
        _ = s.event(.diskPage(through: 0, exhausted: true))
        _ = s.event(.caughtUpSent)
        _ = s.event(.feed(.transactions(through: 4)))
        XCTAssertEqual(s.event(.feed(.behind)), .readDisk(after: 4))
        XCTAssertEqual(s.phase, .lagging)
        XCTAssertEqual(s.event(.diskPage(through: 500, exhausted: true)), .readFeed(after: 500))
        XCTAssertEqual(s.event(.feed(.transactions(through: 510))), .readFeed(after: 510))
        XCTAssertEqual(s.phase, .live)
        XCTAssertEqual(s.event(.feed(.upToDate)), .wait(after: 510))
    }

    func testBehindWhileCatchingUpStaysCatchingUp() {
        var s = SubscriptionState(start: 0, storeGeneration: 9)
        _ = s.event(.diskPage(through: 3, exhausted: true))
        XCTAssertEqual(s.event(.feed(.behind)), .readDisk(after: 3))
        XCTAssertEqual(s.phase, .catchingUp)
    }

    func testEndingsAreFinalAndKeepThePosition() {
        for reason in [SubscriptionState.EndReason.tooFarBehind, .shutdown, .storeReplaced, .storeDestroyed, .storeClosed] {
            var s = SubscriptionState(start: 3, storeGeneration: 3)
            _ = s.event(.diskPage(through: 3, exhausted: true))
            XCTAssertEqual(s.event(.end(reason)), .end(reason))
            XCTAssertTrue(s.isEnded)
            XCTAssertEqual(s.event(.woke), .end(reason), "nothing restarts an ended subscription")
            XCTAssertEqual(s.event(.feed(.transactions(through: 9))), .end(reason))
            XCTAssertEqual(s.position, 3)
        }
    }

    func testAClosedFeedEndsTheSubscription() {
        var s = SubscriptionState(start: 1, storeGeneration: 1)
        XCTAssertEqual(s.event(.feed(.closed)), .end(.storeClosed))
    }

    func testPositionNeverMovesBack() {
        var s = SubscriptionState(start: 10, storeGeneration: 10)
        _ = s.event(.diskPage(through: 8, exhausted: true))
        XCTAssertEqual(s.position, 10)
    }
}
