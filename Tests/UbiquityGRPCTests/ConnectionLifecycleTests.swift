import XCTest
@testable import UbiquityGRPC

/// The connection's life (GOAWAY, drain, flush, linger) driven without nghttp2 or a socket.
final class ConnectionLifecycleTests: XCTestCase {
    func testGracefulShutdownSendsNoticeThenFinalGoAwayThenClosesWhenStreamsEnd() {
        var c = ConnectionLifecycle()
        XCTAssertTrue(c.acceptsStreams)
        XCTAssertEqual(c.event(.gracefulShutdown), .sendShutdownNotice)
        XCTAssertFalse(c.acceptsStreams, "a draining connection refuses new streams")
        XCTAssertTrue(c.readsInput, "open streams still receive")
        XCTAssertEqual(c.event(.gracefulShutdown), .none, "shutdown is begun once")
        // Streams are done but the final GOAWAY has not gone out: keep the connection.
        XCTAssertEqual(c.event(.outputPumped(sessionWantsIO: true, streamsOpen: false, queuedBytes: 0)), .none)
        XCTAssertEqual(c.event(.drainTimerFired), .sendFinalGoAway)
        XCTAssertEqual(c.event(.drainTimerFired), .none)
        XCTAssertEqual(c.event(.outputPumped(sessionWantsIO: true, streamsOpen: true, queuedBytes: 10)), .none,
                       "an open stream runs to completion")
        XCTAssertEqual(c.event(.outputPumped(sessionWantsIO: true, streamsOpen: false, queuedBytes: 10)), .none)
        XCTAssertEqual(c.state, .flushing)
        XCTAssertFalse(c.readsInput)
        XCTAssertEqual(c.event(.writesDrained(queuedBytes: 4)), .none)
        XCTAssertEqual(c.event(.writesDrained(queuedBytes: 0)), .linger)
        XCTAssertEqual(c.event(.writesDrained(queuedBytes: 0)), .none, "linger starts once")
        XCTAssertEqual(c.event(.close), .close)
        XCTAssertEqual(c.event(.close), .none)
        XCTAssertEqual(c.state, .closed)
    }

    func testIdleTimeoutSendsOneGoAwayAndLingersAtOnceWhenNothingIsQueued() {
        var c = ConnectionLifecycle()
        XCTAssertEqual(c.event(.idleTimeout), .sendIdleGoAway)
        XCTAssertEqual(c.event(.idleTimeout), .none)
        XCTAssertEqual(c.event(.gracefulShutdown), .none, "already draining")
        XCTAssertEqual(c.event(.outputPumped(sessionWantsIO: true, streamsOpen: false, queuedBytes: 0)), .linger)
        XCTAssertEqual(c.state, .lingering)
    }

    func testSessionDoneClosesAfterFlushEvenWhenActive() {
        var c = ConnectionLifecycle()
        XCTAssertEqual(c.event(.outputPumped(sessionWantsIO: true, streamsOpen: false, queuedBytes: 0)), .none,
                       "an active connection with no streams stays")
        XCTAssertEqual(c.event(.writesDrained(queuedBytes: 0)), .resumeOutput)
        XCTAssertEqual(c.event(.outputPumped(sessionWantsIO: false, streamsOpen: false, queuedBytes: 100)), .none)
        XCTAssertEqual(c.state, .flushing)
        XCTAssertEqual(c.event(.drainTimerFired), .none)
        XCTAssertEqual(c.event(.writesDrained(queuedBytes: 0)), .linger)
    }

    func testProtocolErrorFinishesAfterItsGoAwayIsWritten() {
        var c = ConnectionLifecycle()
        XCTAssertEqual(c.event(.finish(queuedBytes: 17)), .none)
        XCTAssertEqual(c.state, .flushing)
        XCTAssertEqual(c.event(.finish(queuedBytes: 0)), .none, "finish is taken once")
        XCTAssertEqual(c.event(.writesDrained(queuedBytes: 0)), .linger)
    }

    func testNothingHappensAfterClose() {
        var c = ConnectionLifecycle()
        XCTAssertEqual(c.event(.close), .close)
        for e: ConnectionLifecycle.Event in [.gracefulShutdown, .drainTimerFired, .idleTimeout, .finish(queuedBytes: 0),
                                              .writesDrained(queuedBytes: 0),
                                              .outputPumped(sessionWantsIO: false, streamsOpen: false, queuedBytes: 0)] {
            XCTAssertEqual(c.event(e), .none, "\(e)")
        }
    }
}
