import XCTest
@testable import UbiquityStorage

/// Where evicted stores close (`EvictionPolicy`): in the background up to its bound, then on
/// the caller's path until a background close finishes.
final class EvictionPolicyTests: XCTestCase {
    func testBackgroundUpToTheBoundThenTheCaller() {
        var p = EvictionPolicy(maxBackground: 3)
        XCTAssertEqual((0..<3).map { _ in p.place() }, [.background, .background, .background])
        XCTAssertEqual(p.pending, 3)
        XCTAssertEqual(p.place(), .caller, "the closer is 3 behind: the caller closes its victim itself")
        XCTAssertEqual(p.pending, 3, "a caller's own close is not pending")
        p.finished()
        XCTAssertEqual(p.place(), .background, "room again after one finished")
        XCTAssertEqual(p.place(), .caller)
    }

    func testZeroClosesEveryVictimOnTheCallersPath() {
        var p = EvictionPolicy(maxBackground: 0)
        XCTAssertEqual(p.place(), .caller)
        XCTAssertEqual(p.pending, 0)
        XCTAssertEqual(EvictionPolicy(maxBackground: -2).maxBackground, 0)
    }

    func testTheDefaultBound() {
        XCTAssertEqual(EvictionPolicy().maxBackground, 8)
    }
}
