import Foundation
import XCTest
@testable import UbiquityServices

/// `CursorRiskWatch.atRisk`: the rule that decides when a subscription gets CURSOR_AT_RISK.
final class CursorRiskTests: XCTestCase {
    let now = Date(timeIntervalSince1970: 1_000_000)

    func testAPositionDueForTrimmingIsAtRisk() {
        XCTAssertTrue(CursorRiskWatch.atRisk(positionExpiry: now, currentExpiry: nil, now: now))
        XCTAssertTrue(CursorRiskWatch.atRisk(positionExpiry: now - 5, currentExpiry: now + 100, now: now))
    }

    func testThePositionsShareOfTheRetainedTimeDecides() {
        // the current position would last 1,000 s: the oldest quarter is at risk
        let current = now + 1000
        XCTAssertTrue(CursorRiskWatch.atRisk(positionExpiry: now + 100, currentExpiry: current, now: now))
        XCTAssertTrue(CursorRiskWatch.atRisk(positionExpiry: now + 249, currentExpiry: current, now: now))
        XCTAssertFalse(CursorRiskWatch.atRisk(positionExpiry: now + 251, currentExpiry: current, now: now))
        XCTAssertFalse(CursorRiskWatch.atRisk(positionExpiry: now + 900, currentExpiry: current, now: now))
    }

    func testWithoutAnEstimateForCurrentOnlyADuePositionIsAtRisk() {
        XCTAssertFalse(CursorRiskWatch.atRisk(positionExpiry: now + 10, currentExpiry: nil, now: now))
    }
}
