import UbiquityHTTP
import XCTest

final class HTTPRequestParserTests: XCTestCase {
    private func feed(_ parser: HTTPRequestParser, _ text: String) -> Result<[HTTPRequest], HTTPRequestParser.Failure> {
        Array(text.utf8).withUnsafeBytes { parser.feed($0) }
    }

    func testOneGetWithKeepAlive() throws {
        let p = HTTPRequestParser()
        let r = try feed(p, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").get()
        XCTAssertEqual(r, [HTTPRequest(method: "GET", target: "/metrics", keepAlive: true)])
    }

    func testRequestSplitAcrossReadsAndPipelined() throws {
        let p = HTTPRequestParser()
        XCTAssertEqual(try feed(p, "GET /metr").get(), [])
        XCTAssertEqual(try feed(p, "ics?x=1 HTTP/1.1\r\nHost: x\r\n").get(), [])
        let r = try feed(p, "\r\nGET /healthz HTTP/1.0\r\n\r\n").get()
        XCTAssertEqual(r.map(\.target), ["/metrics?x=1", "/healthz"])
        XCTAssertEqual(r.map(\.path), ["/metrics", "/healthz"])
        // HTTP/1.0 without keep-alive closes after its response.
        XCTAssertEqual(r.map(\.keepAlive), [true, false])
    }

    func testConnectionCloseIsHonoured() throws {
        let r = try feed(HTTPRequestParser(), "GET / HTTP/1.1\r\nConnection: close\r\n\r\n").get()
        XCTAssertEqual(r.first?.keepAlive, false)
    }

    func testGarbageIsMalformedAndStaysFailed() {
        let p = HTTPRequestParser()
        guard case .failure(.malformed) = feed(p, "\u{16}\u{03}\u{01} not http\r\n\r\n") else { return XCTFail("accepted garbage") }
        guard case .failure(.malformed) = feed(p, "GET / HTTP/1.1\r\n\r\n") else { return XCTFail("recovered after a failure") }
    }

    func testHTTP2PrefaceIsRefused() {
        // A gRPC client pointed at the metrics port by mistake.
        guard case .failure = feed(HTTPRequestParser(), "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n") else { return XCTFail("accepted h2 preface") }
    }

    func testOversizedHeadersAreRefusedAtTheBound() {
        let p = HTTPRequestParser(maxRequestBytes: 256)
        let big = "GET / HTTP/1.1\r\nX-Big: " + String(repeating: "a", count: 300) + "\r\n\r\n"
        XCTAssertEqual(feed(p, big), .failure(.tooLarge))
    }

    func testTheBoundIsPerRequest() throws {
        // Many small keep-alive requests on one connection are fine: the count starts over.
        let p = HTTPRequestParser(maxRequestBytes: 64)
        for _ in 0..<20 {
            XCTAssertEqual(try feed(p, "GET /metrics HTTP/1.1\r\nHost: h\r\n\r\n").get().count, 1)
        }
    }
}

final class HTTPRoutesTests: XCTestCase {
    private let routes: HTTPRoutes = {
        var r = HTTPRoutes()
        r.get("/metrics") { .text(200, "m\n") }
        return r
    }()

    func testGetOfAKnownPath() {
        let r = routes.respond(to: HTTPRequest(method: "GET", target: "/metrics?debug=1", keepAlive: true))
        XCTAssertEqual(r.status, 200)
        XCTAssertEqual(r.body, Array("m\n".utf8))
    }

    func testUnknownPathIs404AndOtherMethodsAre405() {
        XCTAssertEqual(routes.respond(to: HTTPRequest(method: "GET", target: "/nope", keepAlive: true)).status, 404)
        let post = routes.respond(to: HTTPRequest(method: "POST", target: "/metrics", keepAlive: true))
        XCTAssertEqual(post.status, 405)
        XCTAssertTrue(post.headers.contains { $0 == ("Allow", "GET") })
    }
}
