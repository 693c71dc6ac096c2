import XCTest
@testable import UbiquityGRPC

/// Pure-logic tests of the transport's wire helpers (no socket).
final class WireFormatTests: XCTestCase {
    func testGRPCTimeoutUnits() {
        XCTAssertEqual(GRPCTimeout.parse("1H"), 3_600_000_000_000)
        XCTAssertEqual(GRPCTimeout.parse("2M"), 120_000_000_000)
        XCTAssertEqual(GRPCTimeout.parse("3S"), 3_000_000_000)
        XCTAssertEqual(GRPCTimeout.parse("100m"), 100_000_000)
        XCTAssertEqual(GRPCTimeout.parse("250u"), 250_000)
        XCTAssertEqual(GRPCTimeout.parse("99999999n"), 99_999_999)
    }

    func testGRPCTimeoutRejectsMalformedValues() {
        for bad in ["", "S", "10", "123456789S", "1s", "-1S", "1.5S", "1 S", "1SS"] {
            XCTAssertNil(GRPCTimeout.parse(bad), "accepted \(bad)")
        }
    }

    func testGRPCTimeoutSaturatesInsteadOfOverflowing() {
        XCTAssertEqual(GRPCTimeout.parse("99999999H"), Int64.max)
    }

    func testPercentEncodingOfGRPCMessage() {
        XCTAssertEqual(PercentEncoding.encode("plain text"), "plain text")
        XCTAssertEqual(PercentEncoding.encode("100%"), "100%25")
        XCTAssertEqual(PercentEncoding.encode("tab\there"), "tab%09here")
        XCTAssertEqual(PercentEncoding.encode("é"), "%C3%A9")
        let tricky = "test status message \t\n\u{1234} 🙂 %"
        XCTAssertEqual(PercentEncoding.decode(PercentEncoding.encode(tricky)), tricky)
    }

    func testBase64RoundTripsPaddedAndUnpadded() {
        for n in 0..<40 {
            let bytes = (0..<n).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
            XCTAssertEqual(Base64.decode(Base64.encode(bytes, padded: true)), bytes)
            XCTAssertEqual(Base64.decode(Base64.encode(bytes, padded: false)), bytes)
        }
        XCTAssertEqual(Base64.encode(Array("foobar".utf8)), "Zm9vYmFy")
        XCTAssertEqual(Base64.encode(Array("fo".utf8), padded: false), "Zm8")
        XCTAssertNil(Base64.decode("Zm9v*mFy"))
        XCTAssertNil(Base64.decode("Zg==Zg"))
    }

    func testRouterTellsUnknownServiceFromUnknownMethod() {
        var router = Router()
        router.register("/pkg.Svc/Known", kind: .unary) { _ in }
        switch router.lookup("/pkg.Svc/Known") {
        case .success(let m): XCTAssertEqual(m.kind, .unary)
        case .failure(let e): XCTFail("\(e)")
        }
        switch router.lookup("/pkg.Svc/Other") {
        case .success: XCTFail("found a method that was never registered")
        case .failure(let e):
            XCTAssertEqual(e.code, .unimplemented)
            XCTAssertEqual(e.message, "unknown method Other for service pkg.Svc")
        }
        switch router.lookup("/pkg.Nope/Known") {
        case .success: XCTFail("found a service that was never registered")
        case .failure(let e):
            XCTAssertEqual(e.code, .unimplemented)
            XCTAssertEqual(e.message, "unknown service pkg.Nope")
        }
        XCTAssertEqual(router.services, ["pkg.Svc"])
    }

    func testErrorsMapToStatusOnPurpose() {
        struct Domain: RPCErrorConvertible { var rpcError: RPCError { RPCError(.failedPrecondition, "stale") } }
        struct Other: Error {}
        XCTAssertEqual(RPCError(converting: RPCError(.notFound, "x")).code, .notFound)
        XCTAssertEqual(RPCError(converting: Domain()).code, .failedPrecondition)
        XCTAssertEqual(RPCError(converting: CancellationError()).code, .cancelled)
        // Anything that does not say which status it becomes is UNKNOWN, never INTERNAL.
        XCTAssertEqual(RPCError(converting: Other()).code, .unknown)
    }

    func testMetadataBinaryValuesGoOutAsUnpaddedBase64() {
        var md = Metadata()
        md.add("X-Trace", "abc")
        md.add("x-blob-bin", binary: [0xFF, 0x00, 0x01])
        XCTAssertEqual(md["x-trace"], "abc")
        let wire = md.wireHeaders()
        XCTAssertEqual(wire[0].0, "x-trace")
        XCTAssertEqual(wire[1].1, "/wAB")
    }
}
