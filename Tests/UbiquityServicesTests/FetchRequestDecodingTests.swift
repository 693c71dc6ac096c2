import Foundation
import SwiftProtobuf
import UbiquityProtos
import UbiquityQuery
import UbiquityStorage
@testable import UbiquityServices
import XCTest

/// Fetch's hand-written request reader (`FetchDecoding.decode`) must never disagree with the
/// generic route: whenever it accepts bytes, SwiftProtobuf decodes them and `Convert` converts
/// them without error to the same request, store, generation and minimum; it accepts the common
/// forms (the benchmark's `age == $age` among them); everything else is left to the generic route.
final class FetchRequestDecodingTests: XCTestCase {
    typealias Req = Ubiquity_V1_FetchRequest

    /// The generic route's result, or nil where it fails.
    static func generic(_ bytes: [UInt8]) -> DecodedFetch? {
        guard let m = try? Req(serializedBytes: bytes), let fr = try? Convert.fetchRequest(m.fetch, field: "fetch"),
              let (at, minGen) = try? Convert.readGeneration(m.at, field: "at") else { return nil }
        return DecodedFetch(storeID: m.storeID, request: fr, at: at, minimumGeneration: minGen)
    }

    /// Equal, a NaN variable value counting as equal to a NaN (it is unequal to itself).
    static func same(_ a: DecodedFetch, _ b: DecodedFetch) -> Bool {
        if a == b { return true }
        var x = a, y = b
        x.request.variables = [:]
        y.request.variables = [:]
        guard x == y, a.request.variables.count == b.request.variables.count else { return false }
        return a.request.variables.allSatisfy { k, v in
            switch (v, b.request.variables[k]) {
            case (.scalar(.double(let p)), .scalar(.double(let q))?): p == q || (p.isNaN && q.isNaN)
            default: v == b.request.variables[k]
            }
        }
    }

    @discardableResult
    private func agree(_ bytes: [UInt8], file: StaticString = #filePath, line: UInt = #line) -> DecodedFetch? {
        let fast = FetchDecoding.decode(bytes)
        if let fast {
            let slow = Self.generic(bytes)
            XCTAssertTrue(slow.map { Self.same($0, fast) } ?? false, "bytes \(bytes): \(String(describing: slow)) vs \(fast)", file: file, line: line)
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
        var out: [Req] = []
        var r = Req()
        r.storeID = "7f1c2f7e-5a0b-4c1e-9a43-0d9b8f2e6a11"
        r.fetch.entity = "Person"
        r.fetch.predicate = "age == $age"
        r.fetch.variables = ["age": value(.int64Value(4242))]
        out.append(r)
        var pinned = r
        pinned.at.token = Data(GenerationToken(storeID: UUID(), epoch: 3, generation: 99).bytes)
        pinned.at.minimumGeneration = 17
        out.append(pinned)
        var all = r
        all.fetch.variables = [
            "n": value(.nullValue(.nullValue)), "s": value(.stringValue("héllo")), "e": value(.stringValue("")), "b": value(.boolValue(true)),
            "f": value(.boolValue(false)), "i16": value(.int16Value(-3)), "i32": value(.int32Value(Int32.min)), "i64": value(.int64Value(Int64.min)),
            "fl": value(.floatValue(1.5)), "d": value(.doubleValue(-.infinity)), "z": value(.int64Value(0)), "none": Ubiquity_V1_Argument(), "": value(nil),
        ]
        all.fetch.fetchLimit = 10
        all.fetch.fetchOffset = 0
        all.fetch.fetchBatchSize = 7
        all.fetch.resultType = .count
        all.fetch.havingPredicate = "x > 1"
        all.fetch.returnsDistinctResults = true
        all.fetch.excludesSubentities = true
        out.append(all)
        var minimal = Req()
        minimal.fetch.entity = "E"
        out.append(minimal)
        for t in [Ubiquity_V1_ResultType.unspecified, .objects, .objectIds, .dictionaries] {
            var x = r
            x.fetch.resultType = t
            out.append(x)
        }
        return out
    }

    func testCommonFormsDecodeLikeTheGenericRoute() throws {
        for r in Self.common() {
            let bytes: [UInt8] = try r.serializedBytes()
            XCTAssertNotNil(agree(bytes), "\(r)")
        }
        let benchmark = try XCTUnwrap(agree(try Self.common()[1].serializedBytes()))
        XCTAssertEqual(benchmark.request.variables, ["age": .scalar(.int(4242))])
        XCTAssertEqual(benchmark.request.predicate, "age == $age")
        // a repeated singular scalar: the last wins
        var a = Req()
        a.storeID = "a"
        a.fetch.entity = "A"
        var b = Req()
        b.storeID = "b"
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
        // what the conversion rejects: the generic route answers with its error
        vary { $0.fetch.entity = "" }
        vary { $0.fetch.fetchLimit = -1 }
        vary { $0.fetch.fetchOffset = -5 }
        vary { $0.fetch.fetchBatchSize = Int32.min }
        vary { $0.at.token = Data([1, 2, 3]) }
        for r in unusual {
            XCTAssertNil(agree(try r.serializedBytes()), "\(r)")
        }
        let good: [UInt8] = try base.serializedBytes()
        XCTAssertNil(agree(good + [0x22, 0]))             // fetch given twice: SwiftProtobuf merges
        XCTAssertNil(agree(good + [0x1A, 0, 0x1A, 0]))    // at given twice
        XCTAssertNil(agree([]))                           // no entity
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

    /// Mutations of the common forms — a bit flipped, a byte dropped, a run repeated, a cut —
    /// and random bytes: whatever the fast decoder accepts, SwiftProtobuf decodes the same.
    func testMutatedAndRandomBytesNeverDisagree() throws {
        var rng = LCG(seed: 0xfe7c)  // RequestDecodingTests.swift
        let bases: [[UInt8]] = try Self.common().map { try $0.serializedBytes() }.filter { !$0.isEmpty }
        var accepted = 0
        for _ in 0..<30_000 {
            var b = bases[below(&rng, bases.count)]
            switch below(&rng, 5) {
            case 0: b[below(&rng, b.count)] ^= UInt8(1 << below(&rng, 8))
            case 1: b.remove(at: below(&rng, b.count))
            case 2: let i = below(&rng, b.count); b.insert(contentsOf: b[i..<min(b.count, i + 1 + below(&rng, 4))], at: i)
            case 3: b = Array(b[below(&rng, b.count)...])
            default: b = (0..<below(&rng, 16)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            }
            if agree(b) != nil { accepted += 1 }
        }
        XCTAssertGreaterThan(accepted, 300)
    }

    private func below(_ rng: inout LCG, _ n: Int) -> Int { Int(rng.next() % UInt64(max(1, n))) }
}
