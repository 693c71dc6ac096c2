import Foundation
import UbiquityStorage
import XCTest
@testable import UbiquityServices

/// A live query's membership decision without a store: whether a touched object matched before
/// (G-1) and after (G) the transaction says what the update reports about it.
final class LiveMembershipTests: XCTestCase {
    func testBeforeAndAfterDecideEnteredChangedLeftOrNothing() {
        XCTAssertEqual(LiveMembership.decide(before: false, after: true), .entered)
        XCTAssertEqual(LiveMembership.decide(before: true, after: true), .changed)
        XCTAssertEqual(LiveMembership.decide(before: true, after: false), .left)
        XCTAssertEqual(LiveMembership.decide(before: false, after: false), .unaffected)
    }

    func testEffectKeepsTheTransactionsOrderAndLeavesOutObjectsOutsideOnBothSides() {
        let store = UUID()
        let o = (1...5).map { ObjectID(storeID: store, entity: "Person", pk: Int64($0)) }
        // o[0] inserted matching, o[1] updated inside, o[2] deleted, o[3] moved out, o[4] stayed out
        let e = LiveMembership.effect(of: [o[3], o[0], o[4], o[1], o[2]], before: [o[1], o[2], o[3]], after: [o[0], o[1]])
        XCTAssertEqual(e, LiveMembership.Effect(entered: [o[0]], changed: [o[1]], left: [o[3], o[2]]))
        XCTAssertFalse(e.isEmpty)
    }

    func testATransactionThatTouchesOnlyObjectsOutsideHasNoEffect() {
        let id = ObjectID(storeID: UUID(), entity: "Person", pk: 9)
        XCTAssertTrue(LiveMembership.effect(of: [id], before: [], after: []).isEmpty)
    }
}
