import XCTest
@testable import UbiquityGRPC

/// The status headers stay inside their budget whatever the status holds (issue 15: a large
/// error message used to produce a header block nghttp2 would not send, and the call hung).
final class StatusTrailersTests: XCTestCase {
    private func size(_ headers: [(String, String)]) -> Int {
        headers.reduce(0) { $0 + StatusTrailers.entrySize($1.0, $1.1) }
    }

    private func value(_ name: String, _ headers: [(String, String)]) -> String? {
        headers.first { $0.0 == name }?.1
    }

    func testASmallStatusIsSentUnchanged() {
        let status = RPCError(.invalidArgument, "entity: 100% wrong", details: [1, 2, 3],
                                metadata: Metadata(dictionaryLiteral: ("x-a", "b")))
        let h = StatusTrailers.headers(for: status)
        XCTAssertEqual(value("grpc-status", h), "3")
        XCTAssertEqual(value("grpc-message", h), "entity: 100%25 wrong")
        XCTAssertEqual(value("grpc-status-details-bin", h), Base64.encode([1, 2, 3], padded: false))
        XCTAssertEqual(value("x-a", h), "b")
    }

    func testAHugeMessageIsCutOnACharacterBoundaryWithAMarker() {
        for unit in ["x", "é", "😀", "%"] {
            let status = RPCError(.invalidArgument, String(repeating: unit, count: 20_000))
            let h = StatusTrailers.headers(for: status)
            let message = try! XCTUnwrap(value("grpc-message", h))
            XCTAssertLessThanOrEqual(message.utf8.count, StatusTrailers.maxMessageBytes)
            XCTAssertTrue(message.hasSuffix(StatusTrailers.truncationMarker))
            // Decodes to whole characters of the original, then the marker.
            let decoded = PercentEncoding.decode(message)
            let body = decoded.dropLast(StatusTrailers.truncationMarker.count)
            XCTAssertFalse(body.isEmpty)
            XCTAssertTrue(body.allSatisfy { String($0) == unit }, "cut inside a character for \(unit)")
            XCTAssertLessThanOrEqual(size(h), StatusTrailers.budgetBytes)
        }
    }

    func testOversizedDetailsAreDroppedAndTheMessageSaysSo() {
        let status = RPCError(.aborted, "conflict", details: [UInt8](repeating: 7, count: 30_000))
        let h = StatusTrailers.headers(for: status)
        XCTAssertNil(value("grpc-status-details-bin", h))
        XCTAssertTrue(PercentEncoding.decode(value("grpc-message", h)!).contains("too large to send"))
        XCTAssertEqual(value("grpc-status", h), "10")
    }

    func testDetailsWithinTheirCapSurviveAMessageThatTakesTheRest() {
        let details = [UInt8](repeating: 1, count: 4096)
        let status = RPCError(.aborted, String(repeating: "m", count: 50_000), details: details)
        let h = StatusTrailers.headers(for: status)
        XCTAssertEqual(value("grpc-status-details-bin", h), Base64.encode(details, padded: false))
        XCTAssertLessThanOrEqual(size(h), StatusTrailers.budgetBytes)
    }

    func testTrailingMetadataPastTheBudgetIsDropped() {
        var metadata = Metadata()
        for i in 0..<100 { metadata.add("x-big-\(i)", String(repeating: "v", count: 500)) }
        let status = RPCError(.ok, metadata: metadata)
        let h = StatusTrailers.headers(for: status)
        XCTAssertEqual(value("grpc-status", h), "0")
        XCTAssertEqual(value("x-big-0", h), String(repeating: "v", count: 500))
        XCTAssertNil(value("x-big-99", h))
        XCTAssertLessThanOrEqual(size(h), StatusTrailers.budgetBytes)
    }

    func testUnderASmallLimitTheMessageStaysWholeAndTheDetailsGo() {
        // grpcio-status requires grpc-message to equal the details' message: never cut the
        // message under details that hold it whole.
        let message = String(repeating: "m", count: 500)
        let status = RPCError(.invalidArgument, message, details: [UInt8](repeating: 1, count: 3000))
        let h = StatusTrailers.headers(for: status, budget: 4096 - 128)
        XCTAssertNil(value("grpc-status-details-bin", h))
        XCTAssertTrue(PercentEncoding.decode(value("grpc-message", h)!).hasPrefix(message + " (error details of"))
        XCTAssertLessThanOrEqual(size(h), 4096 - 128)
    }

    func testASmallerPeerLimitIsRespected() {
        let status = RPCError(.invalidArgument, String(repeating: "m", count: 5000),
                                details: [UInt8](repeating: 1, count: 3000))
        let h = StatusTrailers.headers(for: status, budget: 2048)
        XCTAssertLessThanOrEqual(size(h), 2048)
        XCTAssertNotNil(value("grpc-message", h))
        XCTAssertEqual(value("grpc-status", h), "3")
    }
}
