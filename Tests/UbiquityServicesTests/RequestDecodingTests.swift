import Foundation
import SwiftProtobuf
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

/// Fetch's hand-written request decoder (`RequestDecoding.fetch`), held to the same rule: when it
/// accepts bytes, SwiftProtobuf decodes them to the same message; it accepts the common forms
/// (the benchmark's `age == $age` request among them); everything else is left to SwiftProtobuf.
final class FetchRequestDecodingTests: XCTestCase {
    typealias Req = Ubiquity_V1_FetchRequest

    @discardableResult
    private func agree(_ bytes: [UInt8], file: StaticString = #filePath, line: UInt = #line) -> Req? {
        let fast = RequestDecoding.fetch(bytes)
        if let fast {
            // (a NaN double decodes to a message unequal to itself: compare the text forms then)
            let slow = try? Req(serializedBytes: bytes)
            XCTAssertTrue(slow == fast || slow?.textFormatString() == fast.textFormatString(),
                          "bytes \(bytes): \(String(describing: slow)) vs \(fast)", file: file, line: line)
        }
        return fast
    }

    private static func value(_ k: Ubiquity_V1_Value.OneOf_Kind?) -> Ubiquity_V1_Argument {
        var v = Ubiquity_V1_Value()
        v.kind = k
        var a = Ubiquity_V1_Argument()
        a.value = v
        return a
    }

    static func common() -> [Req] {
        var out: [Req] = [Req()]
        var r = Req()
        r.storeID = "7f1c2f7e-5a0b-4c1e-9a43-0d9b8f2e6a11"
        r.fetch.entity = "Person"
        r.fetch.predicate = "age == $age"
        r.fetch.variables = ["age": value(.int64Value(4242))]
        out.append(r)
        var pinned = r
        pinned.at.token = Data([1, 2, 3, 0, 255])
        pinned.at.minimumGeneration = 17
        out.append(pinned)
        var all = r
        all.fetch.variables = [
            "n": value(.nullValue(.nullValue)), "s": value(.stringValue("héllo")), "e": value(.stringValue("")), "b": value(.boolValue(true)),
            "f": value(.boolValue(false)), "i16": value(.int16Value(-3)), "i32": value(.int32Value(Int32.min)), "i64": value(.int64Value(Int64.min)),
            "fl": value(.floatValue(1.5)), "d": value(.doubleValue(-.infinity)), "z": value(.int64Value(0)), "none": Ubiquity_V1_Argument(), "": value(nil),
        ]
        all.fetch.fetchLimit = 10
        all.fetch.fetchOffset = -1
        all.fetch.fetchBatchSize = 7
        all.fetch.resultType = .count
        all.fetch.havingPredicate = "x > 1"
        all.fetch.returnsDistinctResults = true
        all.fetch.excludesSubentities = true
        out.append(all)
        var emptyFetch = Req()
        emptyFetch.fetch = Ubiquity_V1_FetchSpec()  // present, empty
        out.append(emptyFetch)
        for t in [Ubiquity_V1_ResultType.unspecified, .objects, .objectIds, .dictionaries] {
            var x = r
            x.fetch.resultType = t
            out.append(x)
        }
        return out
    }

    func testCommonFormsDecodeLikeSwiftProtobuf() throws {
        for r in Self.common() {
            XCTAssertEqual(agree(try r.serializedBytes()), r)
        }
        // a repeated singular scalar: the last wins
        var a = Req()
        a.storeID = "a"
        var b = Req()
        b.storeID = "b"
        b.fetch.entity = "E"
        let twice: [UInt8] = try a.serializedBytes() + b.serializedBytes()
        XCTAssertEqual(agree(twice)?.storeID, "b")
    }

    func testEverythingElseIsLeftToSwiftProtobuf() throws {
        let base = Self.common()[1]
        var unusual: [Req] = []
        func vary(_ f: (inout Req) -> Void) { var r = base; f(&r); unusual.append(r) }
        vary { $0.fetch.sortDescriptors = [Ubiquity_V1_SortDescriptor()] }
        vary { $0.fetch.propertiesToFetch = ["a"] }
        vary { $0.fetch.propertiesToGroupBy = ["a"] }
        vary { $0.fetch.relationshipKeyPathsForPrefetching = ["a"] }
        vary { $0.fetch.resultType = .UNRECOGNIZED(9) }
        vary { var l = Ubiquity_V1_Argument(); l.list.values = [Ubiquity_V1_Value()]; $0.fetch.variables["l"] = l }
        vary { $0.fetch.variables["d"] = Self.value(.dateValue(Google_Protobuf_Timestamp())) }
        vary { $0.fetch.variables["u"] = Self.value(.uuidValue("x")) }
        vary { $0.fetch.variables["x"] = Self.value(.binaryValue(Data([1]))) }
        vary { $0.fetch.variables["x"] = Self.value(.decimalValue("1")) }
        vary { $0.fetch.variables["x"] = Self.value(.uriValue("a:b")) }
        vary { $0.fetch.variables["x"] = Self.value(.nullValue(.UNRECOGNIZED(3))) }
        for r in unusual {
            XCTAssertNil(agree(try r.serializedBytes()), "\(r)")
        }
        let good: [UInt8] = try base.serializedBytes()
        XCTAssertNil(agree(good + [0x22, 0]))             // fetch given twice: SwiftProtobuf merges
        XCTAssertNil(agree(good + [0x1A, 0, 0x1A, 0]))    // at given twice
        XCTAssertNil(agree(good + [0x20, 1]))             // unknown field 4
        XCTAssertNil(agree([0x0A, 2, 0xC3, 0x28]))        // invalid UTF-8
        XCTAssertNil(agree([0x08, 1]))                    // store_id as a varint
        XCTAssertNil(agree([0x12, 2, 0x08, 1]))           // entity as a varint
        XCTAssertNil(agree([0x12, 3, 0x28, 0x80, 0x80]))  // truncated fetch_limit
        // a variables entry with its value twice, or an unknown field in it
        XCTAssertNil(agree([0x12, 6, 0x1A, 4, 0x12, 0, 0x12, 0]))
        XCTAssertNil(agree([0x12, 4, 0x1A, 2, 0x18, 1]))
        // a Value with two kinds, an Argument with two values
        XCTAssertNil(agree([0x12, 10, 0x1A, 8, 0x12, 6, 0x0A, 4, 0x18, 1, 0x18, 0]))
        XCTAssertNil(agree([0x12, 8, 0x1A, 6, 0x12, 4, 0x0A, 0, 0x0A, 0]))
        // every truncation of every common form
        for r in Self.common() {
            let bytes: [UInt8] = try r.serializedBytes()
            for n in 0..<bytes.count { agree(Array(bytes.prefix(n))) }
        }
    }

    func testRandomAndMutatedBytesNeverDisagree() throws {
        var rng = LCG(seed: 0xfe7c)
        let bases: [[UInt8]] = try Self.common().map { try $0.serializedBytes() }.filter { !$0.isEmpty }
        var accepted = 0
        for _ in 0..<30_000 {
            var bytes = bases[Int(rng.next() % UInt64(bases.count))]
            switch rng.next() % 4 {
            case 0: bytes = bytes.prefix(Int(rng.next() % UInt64(bytes.count + 1))).map { $0 }
            case 1: bytes[Int(rng.next() % UInt64(bytes.count))] = UInt8(truncatingIfNeeded: rng.next())
            case 2: bytes.insert(UInt8(truncatingIfNeeded: rng.next()), at: Int(rng.next() % UInt64(bytes.count + 1)))
            default: bytes = (0..<Int(rng.next() % 12)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            }
            if agree(bytes) != nil { accepted += 1 }
        }
        XCTAssertGreaterThan(accepted, 300)
    }
}

/// A fixed-seed 64-bit LCG (Knuth's MMIX constants), high bits out: the test must not depend on
/// the run, and mutation positions need no better randomness.
private struct LCG {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        return state >> 29
    }
}
