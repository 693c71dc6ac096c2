import CNGHTTP2
import Dispatch
import XCTest
@testable import UbiquityGRPC

/// The transport tier: one `HTTP2Connection` driven with an nghttp2 client's bytes and no socket
/// (TransportHarness). Stream lifecycle, resets, Trailers-Only errors, a limit, GOAWAY.
final class HTTP2ConnectionTests: XCTestCase {
    /// Signals from handlers to the test thread.
    final class Signals: Sendable {
        let started = DispatchSemaphore(value: 0)
        let cancelled = DispatchSemaphore(value: 0)
    }

    private func makeRouter(_ signals: Signals) -> Router {
        var router = Router()
        router.registerSync("/test.T/InlineEcho", execution: .inline) { request, _ in SyncUnaryReply(request) }
        router.register("/test.T/TaskEcho", kind: .unary) { call in
            let message = try await call.receive() ?? []
            call.finish(message: message, trailingMetadata: {
                var m = Metadata()
                m.add("x-echoed", "\(message.count)")
                return m
            }())
        }
        router.register("/test.T/Collect", kind: .clientStreaming) { call in
            signals.started.signal()
            var count = 0
            do {
                while try await call.receive() != nil { count += 1 }
            } catch {
                signals.cancelled.signal()
                throw error
            }
            call.finish(message: [UInt8(count)])
        }
        return router
    }

    private func closed(_ id: Int32) -> (TransportHarness.Events) -> Bool {
        { $0.streams[id]?.closedWith != nil }
    }

    func testUnaryCallsOfEveryKindGetHeadersOneMessageAndOKTrailers() {
        let h = TransportHarness(router: makeRouter(Signals()))
        defer { h.shutDown() }
        for path in ["/test.T/InlineEcho", "/test.T/TaskEcho"] {
            let id = h.request(path, messages: [[1, 2, 3]])
            h.wait("\(path) to complete", until: closed(id))
            let r = h.received(id)
            XCTAssertEqual(r.headerBlocks.count, 2, path)
            XCTAssertEqual(r.header(":status", block: 0), "200", path)
            XCTAssertEqual(r.header("content-type", block: 0), "application/grpc", path)
            XCTAssertEqual(r.data, TransportHarness.frame([1, 2, 3]), path)
            XCTAssertEqual(r.header("grpc-status", block: 1), "0", path)
            XCTAssertEqual(r.closedWith, NGHTTP2_NO_ERROR.rawValue, path)
        }
        XCTAssertEqual(h.received(3).header("x-echoed"), "3", "trailing metadata of a .task call")
        XCTAssertEqual(h.onLoop { h.counters.openStreams.load(ordering: .relaxed) }, 0)
        XCTAssertEqual(h.counters.callsByStatus[0], 2)
    }

    func testClientStreamingCallReceivesEveryMessageUntilEndStream() {
        let h = TransportHarness(router: makeRouter(Signals()))
        defer { h.shutDown() }
        let id = h.request("/test.T/Collect", messages: [[1], [2]], end: false)
        h.send(id, messages: [[3]], end: false)
        h.send(id, end: true)
        h.wait("the call to complete", until: closed(id))
        XCTAssertEqual(h.received(id).data, TransportHarness.frame([3]))
        XCTAssertEqual(h.received(id).header("grpc-status"), "0")
    }

    func testResetFromTheClientMidCallCancelsTheHandler() {
        let signals = Signals()
        let h = TransportHarness(router: makeRouter(signals))
        defer { h.shutDown() }
        let id = h.request("/test.T/Collect", messages: [[1]], end: false)
        XCTAssertEqual(signals.started.wait(timeout: .now() + 10), .success)
        h.reset(id)
        XCTAssertEqual(signals.cancelled.wait(timeout: .now() + 10), .success, "the handler saw the reset")
        h.wait("the stream to close", until: closed(id))
        XCTAssertEqual(h.received(id).closedWith, NGHTTP2_CANCEL.rawValue)
        XCTAssertTrue(h.received(id).headerBlocks.isEmpty, "nothing is sent on a reset stream")
        XCTAssertEqual(h.onLoop { h.counters.openStreams.load(ordering: .relaxed) }, 0)
        XCTAssertEqual(h.counters.callsByStatus[1], 1, "counted once as CANCELLED")
        // The connection serves the next call.
        let next = h.request("/test.T/InlineEcho", messages: [[9]])
        h.wait("the next call", until: closed(next))
        XCTAssertEqual(h.received(next).header("grpc-status"), "0")
    }

    func testBadContentTypeAndUnknownMethodAreAnsweredTrailersOnly() {
        let h = TransportHarness(router: makeRouter(Signals()))
        defer { h.shutDown() }
        let json = h.request("/test.T/InlineEcho", contentType: "application/json", messages: [[1]])
        let unknown = h.request("/test.T/Nope", messages: [[1]])
        let gzip = h.request("/test.T/InlineEcho", extra: [("grpc-encoding", "gzip")], messages: [[1]])
        for id in [json, unknown, gzip] { h.wait("stream \(id)", until: closed(id)) }

        let j = h.received(json)
        XCTAssertEqual(j.headerBlocks.count, 1, "Trailers-Only: one header block")
        XCTAssertEqual(j.header(":status"), "415")
        XCTAssertEqual(j.header("grpc-status"), "2")
        XCTAssertEqual(j.header("grpc-message"), "content-type \"application/json\" is not application/grpc")
        XCTAssertTrue(j.data.isEmpty)

        let u = h.received(unknown)
        XCTAssertEqual(u.headerBlocks.count, 1)
        XCTAssertEqual(u.header(":status"), "200")
        XCTAssertEqual(u.header("grpc-status"), "12")
        XCTAssertEqual(u.header("grpc-message"), "unknown method Nope for service test.T")
        XCTAssertTrue(u.data.isEmpty)

        let g = h.received(gzip)
        XCTAssertEqual(g.header("grpc-status"), "12")
        XCTAssertEqual(g.header("grpc-accept-encoding"), "identity")
    }

    func testAHeaderListOverTheLimitIsAnswered431ResourceExhausted() {
        let h = TransportHarness(router: makeRouter(Signals())) { $0.maxHeaderListBytes = 1024 }
        defer { h.shutDown() }
        let id = h.request("/test.T/InlineEcho", extra: [("x-big", String(repeating: "a", count: 2000))], messages: [[1]])
        h.wait("the answer", until: closed(id))
        let r = h.received(id)
        XCTAssertEqual(r.header(":status"), "431")
        XCTAssertEqual(r.header("grpc-status"), "8")
        XCTAssertTrue(r.data.isEmpty)
        let ok = h.request("/test.T/InlineEcho", messages: [[1]])
        h.wait("a call within the limit", until: closed(ok))
        XCTAssertEqual(h.received(ok).header("grpc-status"), "0", "the connection stays usable")
    }

    func testAMessageOverTheReceiveLimitEndsTheCallResourceExhausted() {
        let h = TransportHarness(router: makeRouter(Signals())) { $0.maxReceiveMessageBytes = 16 }
        defer { h.shutDown() }
        let id = h.request("/test.T/InlineEcho", messages: [Array(repeating: 1, count: 17)])
        h.wait("the answer", until: closed(id))
        XCTAssertEqual(h.received(id).header("grpc-status"), "8")
    }

    func testGracefulShutdownSendsTwoGoAwaysLetsTheOpenCallFinishThenHalfCloses() {
        let signals = Signals()
        let h = TransportHarness(router: makeRouter(signals))
        defer { h.shutDown() }
        let id = h.request("/test.T/Collect", messages: [[1]], end: false)
        XCTAssertEqual(signals.started.wait(timeout: .now() + 10), .success)
        h.beginGracefulShutdown()
        h.wait("the final GOAWAY", until: { $0.goaways.count == 2 })
        let goaways = h.events.withLock { $0.goaways }
        XCTAssertEqual(goaways[0].lastStreamID, Int32.max, "first a shutdown notice")
        XCTAssertEqual(goaways[1].lastStreamID, id, "then the last stream processed")
        XCTAssertTrue(goaways.allSatisfy { $0.errorCode == NGHTTP2_NO_ERROR.rawValue })
        XCTAssertFalse(h.events.withLock { $0.finSent }, "an open call keeps the connection")

        h.send(id, messages: [[2]], end: true)
        h.wait("the open call to complete", until: closed(id))
        XCTAssertEqual(h.received(id).header("grpc-status"), "0")
        XCTAssertEqual(h.received(id).data, TransportHarness.frame([2]))
        h.wait("the half-close", until: { $0.finSent })
        XCTAssertFalse(h.events.withLock { $0.closed }, "lingers for the peer to close")
        h.peerCloses()
        h.wait("the close", until: { $0.closed })
    }
}
