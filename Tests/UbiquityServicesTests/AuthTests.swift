import XCTest
@testable import UbiquityServices

/// The pure parts of authentication: the `authorization` value, which methods are reads, and
/// the failed-sign-in limiter (time passed in, no clock).
final class AuthTests: XCTestCase {
    private let token = "ubs_" + String(repeating: "A", count: 43)

    func testBearerSessionTokenParses() {
        XCTAssertEqual(BearerToken.parse("Bearer " + token), .success(.session(token)))
        XCTAssertEqual(BearerToken.parse("bearer   " + token), .success(.session(token)), "scheme case-insensitive, spaces skipped")
        XCTAssertEqual(BearerToken.parse("Bearer ubo_operator"), .success(.other("ubo_operator")))
    }

    /// Session tokens of both forms parse as sessions (`SessionToken`): 22 characters (128 bits,
    /// issued now) and 43 (256 bits, issued before issue 18 and valid until their sessions
    /// expire); a session token of any other length is malformed, one character either side too.
    func testSessionTokensOfBothFormsAndNoOtherLength() {
        for n in [22, 43] {
            let t = "ubs_" + String(repeating: "A", count: n)
            XCTAssertEqual(BearerToken.parse("Bearer " + t), .success(.session(t)), "\(n) characters")
            XCTAssertEqual(BearerToken.parse("BEARER  " + t), .success(.session(t)), "\(n) characters, scheme in capitals")
        }
        for n in [0, 1, 21, 23, 32, 42, 44, 100, 600] {
            XCTAssertEqual(BearerToken.parse("Bearer ubs_" + String(repeating: "A", count: n)), .failure(.malformed), "\(n) characters")
        }
        XCTAssertEqual(BearerToken.parse("Bearer ubs_" + String(repeating: "A", count: 21) + "\u{e9}"), .failure(.malformed),
                       "22 characters but 23 bytes, one not ASCII")
        XCTAssertEqual(BearerToken.parse("Bearer ubs_" + String(repeating: "A", count: 21) + " "), .failure(.malformed),
                       "a space inside the length")
    }

    func testMissingAndMalformedValues() {
        XCTAssertEqual(BearerToken.parse(nil), .failure(.missing))
        XCTAssertEqual(BearerToken.parse(""), .failure(.missing))
        for bad in ["Bearer", "Bearer ", "Basic dXNlcjpwYXNz", token, "Bearer ubs_short", "Bearer " + token + "x",
                    "Bearer a b", "Bearer caf\u{e9}", "Bearer\u{0}x", "Bearer " + String(repeating: "x", count: 600),
                    // a combining mark joins the space before it into one Character: read as bytes, refused
                    "Bearer \u{301}" + token, "Bearer " + token.dropLast() + "\u{301}", "Bearer\t" + token] {
            XCTAssertEqual(BearerToken.parse(bad), .failure(.malformed), bad)
        }
    }

    func testReadMethodsAndEverythingElseWrites() {
        for read in ["/ubiquity.v1.Stores/Fetch", "/ubiquity.v1.Stores/GetObjects", "/ubiquity.v1.Changes/Subscribe",
                     "/ubiquity.v1.Models/GetModel", "/ubiquity.v1.Contexts/Fetch", "/ubiquity.v1.Stores/ExportBaseline"] {
            XCTAssertEqual(Access.of(path: read), .read, read)
        }
        for write in ["/ubiquity.v1.Stores/Save", "/ubiquity.v1.Stores/DestroyStore", "/ubiquity.v1.Contexts/Save",
                      "/ubiquity.v1.Models/RegisterModel", "/ubiquity.v1.Changes/DeleteHistory", "/ubiquity.v1.Stores/NewMethod"] {
            XCTAssertEqual(Access.of(path: write), .write, write)
        }
    }

    func testFailuresPerKeyAreLimitedForOneWindow() {
        var l = SignInLimiter()
        for i in 0..<l.maxFailuresPerKey {
            XCTAssertNil(l.retryAfter(key: "k", address: "a\(i)", now: 100))
            l.failed(key: "k", address: "a\(i)", now: 100)
        }
        XCTAssertEqual(l.retryAfter(key: "k", address: "fresh", now: 110), 50, "the key is limited from any address")
        XCTAssertNil(l.retryAfter(key: "other", address: "fresh", now: 110), "other keys are not")
        XCTAssertNil(l.retryAfter(key: "k", address: "fresh", now: 160), "a new window starts clean")
    }

    func testFailuresPerAddressAreLimitedWhateverTheKey() {
        var l = SignInLimiter()
        for i in 0..<l.maxFailuresPerAddress { l.failed(key: "k\(i)", address: "10.0.0.1", now: 0) }
        XCTAssertNotNil(l.retryAfter(key: "new", address: "10.0.0.1", now: 1))
        XCTAssertNotNil(l.retryAfter(key: nil, address: "10.0.0.1", now: 1), "malformed keys count per address")
        XCTAssertNil(l.retryAfter(key: "new", address: "10.0.0.2", now: 1))
    }

    func testDistinctKeysCannotGrowTheLimiterPastItsBound() {
        var l = SignInLimiter()
        l.maxEntries = 100
        for i in 0..<1000 { l.failed(key: "k\(i)", address: "a\(i % 7)", now: Double(i) / 1000) }
        XCTAssertLessThanOrEqual(l.trackedEntries, 107)
    }

    func testPeerHostDropsThePort() {
        XCTAssertEqual(peerHost("127.0.0.1:5000"), "127.0.0.1")
        XCTAssertEqual(peerHost("[::1]:5000"), "[::1]")
    }
}
