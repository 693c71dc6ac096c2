import XCTest
import UbiquityStorage
@testable import UbiquityServices

/// Key rules and the key-value tokens, as pure functions.
final class KeyValueKeysTests: XCTestCase {
    func testWhichKeysAreRefusedAndWhy() {
        for ok in ["theme", "settings.theme", "a b", "ünïcode ✓", "🙂", "x:y|z", "."] {
            XCTAssertNil(KeyValueKeys.problem(ok), ok)
        }
        XCTAssertEqual(KeyValueKeys.problem("")?.hasPrefix("a key is required"), true)
        for (bad, at) in [("a\u{0}b", "U+0000 at character 1"), ("\tx", "U+0009 at character 0"), ("x\u{7F}", "U+007F"), ("x\u{85}", "U+0085")] {
            XCTAssertEqual(KeyValueKeys.problem(bad)?.contains(at), true, bad)
        }
        XCTAssertEqual(KeyValueKeys.problem("a/b")?.contains("path separator \"/\" at character 1"), true)
        XCTAssertEqual(KeyValueKeys.problem("a\\b")?.contains("path separator"), true)
    }

    func testTheKeyLengthIsAQuotaInBytes() {
        var q = KeyValueQuotas()
        q.maxKeyBytes = 4
        XCTAssertNoThrow(try KeyValueKeys.check("éé", quotas: q))
        XCTAssertThrowsError(try KeyValueKeys.check("ééé", quotas: q)) { e in
            XCTAssertEqual((e as? ServiceError)?.code, .resourceExhausted)
            XCTAssertEqual((e as? ServiceError)?.reason, .keyValueQuota)
        }
        XCTAssertThrowsError(try KeyValueKeys.check("a/b", quotas: q)) { e in XCTAssertEqual((e as? ServiceError)?.reason, .badKey) }
    }

    func testFeedTokensRoundTripAndAreTiedToTheirAccount() {
        let t = KeyValueFeedToken(account: "acc", seq: 42)
        XCTAssertEqual(t.bytes.count, KeyValueFeedToken.length)
        XCTAssertEqual(KeyValueFeedToken.parse(t.bytes, account: "acc"), t)
        XCTAssertNil(KeyValueFeedToken.parse(t.bytes, account: "other"))
        XCTAssertNil(KeyValueFeedToken.parse(Array(t.bytes.dropLast()), account: "acc"))
        XCTAssertNil(KeyValueFeedToken.parse([UInt8](repeating: 0, count: 33), account: "acc"))
        var negative = t.bytes
        negative[10] = 0x80
        XCTAssertNil(KeyValueFeedToken.parse(negative, account: "acc"))
    }

    func testPageTokensAreTiedToAccountAndPrefix() {
        let t = KeyValuePageToken(afterKey: "p.ü")
        let bytes = t.bytes(account: "acc", prefix: "p.")
        XCTAssertEqual(KeyValuePageToken.parse(bytes, account: "acc", prefix: "p."), t)
        XCTAssertNil(KeyValuePageToken.parse(bytes, account: "acc", prefix: "p.x"))
        XCTAssertNil(KeyValuePageToken.parse(bytes, account: "other", prefix: "p."))
        XCTAssertNil(KeyValuePageToken.parse(Array(bytes.prefix(10)), account: "acc", prefix: "p."))
        // a key outside the prefix or bytes that are not UTF-8 never become a position
        XCTAssertNil(KeyValuePageToken.parse(KeyValuePageToken(afterKey: "q").bytes(account: "acc", prefix: "p."), account: "acc", prefix: "p."))
        XCTAssertNil(KeyValuePageToken.parse(Array(bytes.prefix(10)) + [0xFF], account: "acc", prefix: ""))
    }

    func testTheHashSeparatesItsParts() {
        XCTAssertNotEqual(fnv64(["ab", "c"]), fnv64(["a", "bc"]))
    }
}
