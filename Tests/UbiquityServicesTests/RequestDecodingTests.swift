import Foundation
import UbiquityProtos
@testable import UbiquityServices
import XCTest

/// GetObjects' hand-written request decoder must never disagree with SwiftProtobuf: whenever it
/// accepts bytes, SwiftProtobuf decodes them to the same message; it accepts the common forms
/// (so the fast path is really taken); and it declines, for SwiftProtobuf to answer, everything
/// else — `at`, unknown fields, invalid UTF-8, truncation, other wire types, random bytes.
final class RequestDecodingTests: XCTestCase {
    typealias Req = Ubiquity_V1_GetObjectsRequest

    private func request(_ store: String, _ ids: [String]) -> Req {
        var r = Req()
        r.storeID = store
        r.objectIds = ids
        return r
    }

    /// The fast decoder's answer, checked against SwiftProtobuf's.
    @discardableResult
    private func agree(_ bytes: [UInt8], file: StaticString = #filePath, line: UInt = #line) -> Req? {
        let fast = RequestDecoding.getObjects(bytes)
        if let fast {
            XCTAssertEqual(try? Req(serializedBytes: bytes), fast, "bytes \(bytes)", file: file, line: line)
        }
        return fast
    }

    func testCommonFormsDecodeLikeSwiftProtobuf() throws {
        let store = "7f1c2f7e-5a0b-4c1e-9a43-0d9b8f2e6a11"
        let long = "x-ubiquity://\(store)/" + String(repeating: "E", count: 300) + "/p1"
        let cases: [Req] = [
            Req(),
            request(store, []),
            request("", ["x-ubiquity://\(store)/Note/p1"]),
            request(store, ["x-ubiquity://\(store)/Note/p1"]),
            request(store, (1...50).map { "x-ubiquity://\(store)/Note/p\($0)" }),
            request(store, ["", "a", long, ""]),
            request(String(repeating: "s", count: 20_000), ["q"]),
        ]
        for r in cases {
            let bytes: [UInt8] = try r.serializedBytes()
            XCTAssertEqual(agree(bytes), r)
        }
        // Fields repeated or out of order: the last store_id wins, IDs keep their order.
        let mixed: [UInt8] = [0x12, 1, 0x61, 0x0A, 1, 0x62, 0x12, 1, 0x63, 0x0A, 1, 0x64]
        XCTAssertEqual(agree(mixed), request("d", ["a", "c"]))
        // A non-minimal length varint is still a length, a non-minimal tag still a tag.
        XCTAssertEqual(agree([0x0A, 0x81, 0x00, 0x7A]), request("z", []))
        XCTAssertEqual(agree([0x8A, 0x00, 1, 0x61]), request("a", []))
        // Valid UTF-8 beyond ASCII.
        XCTAssertEqual(agree(try request("s", ["é"]).serializedBytes()), request("s", ["é"]))
        XCTAssertEqual(agree(try request("ü", []).serializedBytes()), request("ü", []))
    }

    func testEverythingElseIsLeftToSwiftProtobuf() throws {
        var withAt = request("s", ["i"])
        withAt.at.minimumGeneration = 5
        XCTAssertNil(agree(try withAt.serializedBytes()))
        XCTAssertNil(agree([0x0A, 2, 0xC3, 0x28]))          // invalid UTF-8: SwiftProtobuf's error
        XCTAssertNil(agree([0x0A, 5, 0x61]))                // truncated text
        XCTAssertNil(agree([0x0A]))                         // missing length
        XCTAssertNil(agree([0x0A, 0x80]))                   // truncated length
        XCTAssertNil(agree([0x0A, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F]))  // oversized length
        XCTAssertNil(agree([0x08, 1]))                      // field 1 as a varint
        XCTAssertNil(agree([0x20, 1]))                      // unknown field 4
        XCTAssertNil(agree([0x0A, 3, 0x61, 0xED, 0xA0]))    // truncated UTF-8 sequence
        XCTAssertNil(agree([0x12, 3, 0xED, 0xA0, 0x80]))    // a surrogate in UTF-8 (invalid)
        XCTAssertNil(agree([0x0B, 0x0C]))                   // a group
        XCTAssertNil(agree([0x00]))                         // field 0
        let unknown: [UInt8] = try request("s", ["i"]).serializedBytes() + [0x2A, 1, 0x61]
        XCTAssertNil(agree(unknown))
    }

    func testRandomAndMutatedBytesNeverDisagree() throws {
        var rng = LCG(seed: 0x5eed)
        let base: [UInt8] = try request("7f1c2f7e-5a0b-4c1e-9a43-0d9b8f2e6a11", ["x-ubiquity://a/Note/p1", "b"]).serializedBytes()
        var accepted = 0
        for _ in 0..<20_000 {
            var bytes = base
            switch rng.next() % 4 {
            case 0: bytes = bytes.prefix(Int(rng.next() % UInt64(bytes.count + 1))).map { $0 }
            case 1: bytes[Int(rng.next() % UInt64(bytes.count))] = UInt8(truncatingIfNeeded: rng.next())
            case 2: bytes.insert(UInt8(truncatingIfNeeded: rng.next()), at: Int(rng.next() % UInt64(bytes.count + 1)))
            default: bytes = (0..<Int(rng.next() % 12)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            }
            if agree(bytes) != nil { accepted += 1 }
        }
        XCTAssertGreaterThan(accepted, 100)  // the comparison really ran on accepted inputs
    }
}

/// A fixed-seed 64-bit LCG (Knuth's MMIX constants), high bits out: the test must not depend on
/// the run, and mutation positions need no better randomness.
struct LCG {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        return state >> 29
    }
}
