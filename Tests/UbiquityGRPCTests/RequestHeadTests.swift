import XCTest
@testable import UbiquityGRPC

/// Request-header collection and admission, without nghttp2: each check's status, and that the
/// first failing check decides.
final class RequestHeadTests: XCTestCase {
    private var router: Router = {
        var r = Router()
        r.register("/test.Echo/Unary", kind: .unary) { _ in }
        return r
    }()

    private func head(_ fields: [(String, String)], limit: Int = 8192) -> RequestHead {
        var strings = HeaderStrings()
        return head(fields, limit: limit, strings: &strings)
    }

    /// One request's head, with the strings of a connection that may have sent others before.
    private func head(_ fields: [(String, String)], limit: Int = 8192, strings: inout HeaderStrings) -> RequestHead {
        var h = RequestHead()
        for (name, value) in fields {
            let ok = Array(name.utf8).withUnsafeBufferPointer { n in
                Array(value.utf8).withUnsafeBufferPointer { v in
                    h.add(name: n, value: v, maxHeaderListBytes: limit, keep: true, strings: &strings)
                }
            }
            XCTAssertTrue(ok)
        }
        return h
    }

    private let valid = [(":method", "POST"), (":path", "/test.Echo/Unary"), (":scheme", "http"),
                         ("content-type", "application/grpc"), ("te", "trailers")]

    private func admit(_ h: RequestHead, draining: Bool = false) -> RequestHead.Verdict {
        var h = h
        return h.admit(maxHeaderListBytes: 8192, draining: draining, route: router.lookup(h.path))
    }

    private func rejection(_ fields: [(String, String)], draining: Bool = false) -> RequestHead.Rejection? {
        if case .reject(let r) = admit(head(fields), draining: draining) { return r }
        return nil
    }

    func testAValidRequestIsAdmittedWithItsMetadataAndTimeout() {
        let h = head(valid + [("grpc-timeout", "250m"), ("x-trace", "abc"), ("x-id-bin", "AQID"), ("user-agent", "t")])
        XCTAssertEqual(h.path, "/test.Echo/Unary")
        XCTAssertEqual(h.metadata["x-trace"], "abc")
        XCTAssertEqual(h.metadata.first(where: { $0.key == "x-id-bin" })?.value, .binary([1, 2, 3]))
        XCTAssertNil(h.metadata["te"], "protocol headers are not metadata")
        guard case .admit(let method, let timeoutNanos) = admit(h) else { return XCTFail("rejected a valid request") }
        XCTAssertEqual(method.path, "/test.Echo/Unary")
        XCTAssertEqual(timeoutNanos, 250_000_000)
    }

    func testEachCheckAnswersItsStatus() {
        XCTAssertEqual(rejection([(":method", "GET")] + valid.dropFirst())?.httpStatus, 405)
        XCTAssertEqual(rejection([(":method", "GET")] + valid.dropFirst())?.status.code, .unimplemented)
        let json = valid.map { $0.0 == "content-type" ? ($0.0, "application/json") : $0 }
        XCTAssertEqual(rejection(json)?.httpStatus, 415)
        XCTAssertEqual(rejection(json)?.status.message, "content-type \"application/json\" is not application/grpc")
        XCTAssertNil(rejection(valid.map { $0.0 == "content-type" ? ($0.0, "application/grpc+proto") : $0 }))
        XCTAssertEqual(rejection(valid + [("grpc-encoding", "gzip")])?.status.code, .unimplemented)
        XCTAssertNil(rejection(valid + [("grpc-encoding", "identity")]))
        XCTAssertEqual(rejection(valid + [("x-bad-bin", "!!!")])?.status.code, .invalidArgument)
        XCTAssertEqual(rejection(valid + [("grpc-timeout", "soon")])?.status.message, "malformed grpc-timeout \"soon\"")
        let unknown = valid.map { $0.0 == ":path" ? ($0.0, "/test.Echo/Nope") : $0 }
        XCTAssertEqual(rejection(unknown)?.status.code, .unimplemented)
        XCTAssertEqual(rejection(unknown)?.status.message, "unknown method Nope for service test.Echo")
        XCTAssertEqual(rejection(valid, draining: true)?.status.code, .unavailable)
    }

    func testTheFirstFailingCheckDecides() {
        // Wrong method and wrong content-type: the method is checked first.
        let both = [(":method", "PUT"), (":path", "/x/y"), ("content-type", "text/plain")]
        XCTAssertEqual(rejection(both)?.httpStatus, 405)
        // A routing failure comes before draining.
        XCTAssertEqual(rejection([(":method", "POST"), (":path", "/x/y"), ("content-type", "application/grpc")],
                                 draining: true)?.status.code, .unimplemented)
    }

    func testAnOversizedHeaderListIsRejectedAndFarPastTheLimitFailsTheConnection() {
        var h = RequestHead()
        var strings = HeaderStrings()
        let value = Array(repeating: UInt8(ascii: "a"), count: 1000)
        func add() -> Bool {
            Array("x-big".utf8).withUnsafeBufferPointer { n in
                value.withUnsafeBufferPointer { v in h.add(name: n, value: v, maxHeaderListBytes: 4096, keep: true, strings: &strings) }
            }
        }
        for _ in 0..<4 { XCTAssertTrue(add()) }
        XCTAssertTrue(add(), "past the limit: answered, not yet a connection error")
        XCTAssertTrue(h.headerOverflow)
        if case .reject(let r) = h.admit(maxHeaderListBytes: 4096, draining: false, route: router.lookup(h.path)) {
            XCTAssertEqual(r.httpStatus, 431)
            XCTAssertEqual(r.status.code, .resourceExhausted)
        } else {
            XCTFail("admitted an oversized header list")
        }
        var ok = true
        for _ in 0..<100 where ok { ok = add() }
        XCTAssertFalse(ok, "4x the limit plus 64 KiB fails the connection")
    }

    /// `authorization` takes its own path (a literal key, the connection's last value reused):
    /// each request still gets exactly the values it sent, whether they repeat the connection's
    /// last one or not, and a request with two keeps both, in order.
    func testAuthorizationIsEachRequestsOwnWhetherItRepeatsOrChanges() {
        var strings = HeaderStrings()
        for value in ["Bearer ubs_a", "Bearer ubs_a", "Bearer ubs_b", "Bearer ubs_a", "Bearer ubs_", "Bearer ubs_a"] {
            let h = head(valid + [("authorization", value), ("x-trace", "t")], strings: &strings)
            XCTAssertEqual(h.metadata["authorization"], value)
            XCTAssertEqual(h.metadata.values(for: "authorization"), [.string(value)])
            XCTAssertEqual(h.metadata["x-trace"], "t")
        }
        let two = head(valid + [("authorization", "Bearer ubs_a"), ("authorization", "Bearer ubs_b")], strings: &strings)
        XCTAssertEqual(two.metadata.values(for: "authorization"), [.string("Bearer ubs_a"), .string("Bearer ubs_b")])
        let none = head(valid, strings: &strings)
        XCTAssertNil(none.metadata["authorization"], "nothing of the last request's value")
        XCTAssertEqual(head(valid + [("authorization", "")], strings: &strings).metadata["authorization"], "")
    }

    func testResetKeepsNothingOfTheLastRequest() {
        var h = head(valid + [("x-a", "1"), ("grpc-timeout", "1S")])
        h.reset()
        XCTAssertEqual(h.path, "")
        XCTAssertNil(h.timeout)
        XCTAssertTrue(h.metadata.isEmpty)
        XCTAssertEqual(h.headerBytes, 0)
    }
}
