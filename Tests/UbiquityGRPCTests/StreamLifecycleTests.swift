import XCTest
@testable import UbiquityGRPC

/// A stream's request and response phases, without nghttp2.
final class StreamLifecycleTests: XCTestCase {
    func testUnaryCall() {
        var s = StreamLifecycle()
        XCTAssertFalse(s.readsRequest, "no DATA before the headers are admitted")
        XCTAssertTrue(s.awaitsRequest)
        XCTAssertTrue(s.event(.admitted))
        XCTAssertTrue(s.readsRequest)
        XCTAssertTrue(s.event(.handlerStarting))
        XCTAssertFalse(s.event(.handlerStarting), "a handler starts once")
        XCTAssertFalse(s.awaitsRequest, "a running handler is not a stalled request")
        XCTAssertTrue(s.event(.responseStarted))
        XCTAssertFalse(s.keepsHeaderFields, "header fields after the response started are trailers")
        XCTAssertTrue(s.event(.dataDeferred))
        XCTAssertFalse(s.event(.dataDeferred))
        XCTAssertTrue(s.event(.dataReady))
        XCTAssertFalse(s.event(.dataReady), "only a deferred stream is resumed")
        XCTAssertTrue(s.event(.responseEnded))
        XCTAssertTrue(s.isAnswered)
        XCTAssertFalse(s.readsRequest, "an answered stream discards what still arrives")
        XCTAssertFalse(s.event(.responseEnded), "a status goes out once")
        XCTAssertFalse(s.event(.responseStarted))
    }

    func testRejectedAtTheHeaders() {
        var s = StreamLifecycle()
        XCTAssertTrue(s.event(.failed))
        XCTAssertTrue(s.event(.responseEnded), "Trailers-Only")
        XCTAssertFalse(s.event(.admitted))
        XCTAssertFalse(s.event(.handlerStarting))
        XCTAssertFalse(s.readsRequest)
        XCTAssertFalse(s.awaitsRequest)
    }

    func testClientStreamingAnswersWhileReceivingAndAFailureStopsReading() {
        var s = StreamLifecycle()
        XCTAssertTrue(s.event(.admitted))
        XCTAssertTrue(s.event(.handlerStarting))
        XCTAssertTrue(s.event(.responseStarted))
        XCTAssertTrue(s.readsRequest, "still receiving while the response streams")
        XCTAssertTrue(s.event(.failed))
        XCTAssertFalse(s.readsRequest)
        XCTAssertEqual(s.response, .streaming, "the failed call's status still goes out")
    }

    func testAStalledRequestIsOneWithoutHandlerOrAnswer() {
        var s = StreamLifecycle()
        XCTAssertTrue(s.awaitsRequest)
        _ = s.event(.admitted)
        XCTAssertTrue(s.awaitsRequest)
        _ = s.event(.responseEnded)
        XCTAssertFalse(s.awaitsRequest)
    }
}
