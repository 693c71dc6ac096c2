import XCTest
@testable import UbiquityGRPC

/// The handshake and idle timeout state machine, driven without a socket.
final class ConnectionTimeoutsTests: XCTestCase {
    func testNoHandshakeInTimeClosesOnce() {
        var t = ConnectionTimeouts(now: 1000, handshakeTimeout: 500, idleTimeout: 10_000)
        XCTAssertEqual(t.check(now: 1499), .keep)
        XCTAssertEqual(t.check(now: 1500), .handshakeTimedOut)
        XCTAssertEqual(t.check(now: 9000), .keep, "a verdict is given once")
    }

    func testSettingsEndTheHandshakeThenIdleTimeCountsFromAccept() {
        var t = ConnectionTimeouts(now: 0, handshakeTimeout: 500, idleTimeout: 2000)
        t.settingsReceived()
        XCTAssertEqual(t.check(now: 600), .keep)
        XCTAssertEqual(t.check(now: 1999), .keep)
        XCTAssertEqual(t.check(now: 2000), .idleTimedOut)
    }

    func testAnOpenStreamKeepsTheConnectionHoweverLong() {
        var t = ConnectionTimeouts(now: 0, handshakeTimeout: 500, idleTimeout: 1000)
        t.settingsReceived()
        t.streamOpened()
        XCTAssertEqual(t.check(now: 1_000_000), .keep)
        t.streamOpened()
        t.streamClosed(now: 1_000_100)
        XCTAssertEqual(t.check(now: 2_000_000), .keep, "one stream still open")
        t.streamClosed(now: 2_000_000)
        XCTAssertEqual(t.check(now: 2_000_999), .keep, "idle time restarts when the last stream ends")
        XCTAssertEqual(t.check(now: 2_001_000), .idleTimedOut)
    }

    func testZeroDisablesEachCheck() {
        var t = ConnectionTimeouts(now: 0, handshakeTimeout: 0, idleTimeout: 0)
        XCTAssertEqual(t.check(now: .max / 2), .keep)
        t.settingsReceived()
        XCTAssertEqual(t.check(now: .max / 2), .keep)
        var u = ConnectionTimeouts(now: 0, handshakeTimeout: 0, idleTimeout: 100)
        XCTAssertEqual(u.check(now: 1000), .keep, "no handshake limit; idle counts only after the handshake")
        u.settingsReceived()
        XCTAssertEqual(u.check(now: 1000), .idleTimedOut)
    }

    func testAClockThatSeemsToGoBackDoesNotTrap() {
        var t = ConnectionTimeouts(now: 5000, handshakeTimeout: 100, idleTimeout: 100)
        XCTAssertEqual(t.check(now: 10), .keep)
    }

    func testSweepInterval() {
        XCTAssertNil(ConnectionTimeouts.sweepInterval(handshakeTimeout: 0, idleTimeout: 0))
        XCTAssertEqual(ConnectionTimeouts.sweepInterval(handshakeTimeout: 10_000, idleTimeout: 300_000), 1000)
        XCTAssertEqual(ConnectionTimeouts.sweepInterval(handshakeTimeout: 0, idleTimeout: 1000), 250)
        XCTAssertEqual(ConnectionTimeouts.sweepInterval(handshakeTimeout: 100, idleTimeout: 0), 50)
    }
}
