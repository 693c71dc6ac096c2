import XCTest
@testable import UbiquityGRPC

/// The flood counters, without a connection: per kind, per one-second window.
final class FrameRateLimitsTests: XCTestCase {
    func testEachKindHasItsOwnLimitWithinOneSecond() {
        var limits = FrameRateLimits(maxEmptyDataFramesPerSecond: 3, maxPingsPerSecond: 2, maxSettingsPerSecond: 1)
        for _ in 0..<3 { XCTAssertTrue(limits.admit(.emptyData, now: 5000)) }
        XCTAssertFalse(limits.admit(.emptyData, now: 5999))
        XCTAssertTrue(limits.admit(.ping, now: 5999), "kinds are counted apart")
        XCTAssertTrue(limits.admit(.ping, now: 5999))
        XCTAssertFalse(limits.admit(.ping, now: 5999))
        XCTAssertTrue(limits.admit(.settings, now: 5999))
        XCTAssertFalse(limits.admit(.settings, now: 5999))
    }

    func testANewWindowStartsAfterOneSecond() {
        var limits = FrameRateLimits(maxEmptyDataFramesPerSecond: 1, maxPingsPerSecond: 1, maxSettingsPerSecond: 1)
        XCTAssertTrue(limits.admit(.ping, now: 1000))
        XCTAssertFalse(limits.admit(.ping, now: 1999))
        XCTAssertTrue(limits.admit(.ping, now: 2000))
        XCTAssertTrue(limits.admit(.emptyData, now: 2000))
    }
}
