import Foundation
import UbiquityProtos
@testable import UbiquityServices
@testable import UbiquityStorage
import XCTest

/// GetObjects' hand-written response encoder must produce what the generic path does: fill a
/// `Ubiquity_V1_GetObjectsResponse` with `Convert.managedObject` and serialize it. Both are
/// decoded and compared as messages (map order on the wire is not defined), for every attribute
/// type with every kind of stored value, relationships, missing IDs and long fields.
final class ObjectEncodingTests: XCTestCase {
    static let model = EncodingFixtures.model("1", relationships: [RelationshipDefinition(name: "others", destination: "Thing", toMany: true, inverse: "others")],
                                              extra: .int16)

    /// Every stored value under every attribute name (types and values need not match: the
    /// conversion's fallbacks must agree too), plus the edge values of each kind, non-finite and
    /// out-of-range doubles and dates included (`Convert.int64(saturating:)`, `Convert.timestamp`).
    static let values: [StorageValue] = [
        .null, .string(""), .string("héllo ✓"), .string(String(repeating: "x", count: 300)), .bool(true), .bool(false),
        .int(0), .int(1), .int(-1), .int(127), .int(128), .int(40_000), .int(-40_000), .int(Int64.max), .int(Int64.min),
        .double(0), .double(-0.0), .double(1.5), .double(-2.25e10), .double(3e9), .double(.nan), .double(.infinity), .double(-.infinity),
        .double(1e300), .double(-1e300), .double(9_223_372_036_854_775_808.0), .date(.nan), .date(.infinity), .date(-.infinity), .date(1e300),
        .date(9_223_372_036_854_775_807.0), .date(-9_223_372_036_854_775_808.0),
        .decimal("12.50"), .date(0), .date(1_700_000_000.123456), .date(-1.5), .binary(Data()), .binary(Data([0, 1, 255])),
        .binary(Data(repeating: 7, count: 200)), .uuid(UUID(uuidString: "1B4E28BA-2FA1-11D2-883F-0016D3CCA427")!), .uri("https://example.com/a"),
    ]

    func attributes(_ entity: String) -> [String: AttributeDefinition]? {
        var out: [String: AttributeDefinition] = [:]
        var cur = Self.model.entities.first { $0.name == entity }
        guard cur != nil else { return nil }
        while let c = cur {
            for a in c.attributes where out[a.name] == nil { out[a.name] = a }
            cur = c.parent.flatMap { p in Self.model.entities.first { $0.name == p } }
        }
        return out
    }

    func generic(token: GenerationToken, ids: [ObjectID], found: [ObjectSnapshot?]) -> Ubiquity_V1_GetObjectsResponse {
        let model = ModelInfo(Self.model, hash: "h")
        var res = Ubiquity_V1_GetObjectsResponse()
        res.token = Data(token.bytes)
        for (id, o) in zip(ids, found) {
            if let o { res.objects.append(Convert.managedObject(o, model: model)) } else { res.missingObjectIds.append(id.uri) }
        }
        return res
    }

    func check(_ ids: [ObjectID], _ found: [ObjectSnapshot?], file: StaticString = #filePath, line: UInt = #line) throws {
        let token = GenerationToken(storeID: ids.first?.storeID ?? UUID(), epoch: 42, generation: 1_000_000_007)
        let bytes = ObjectEncoding.getObjectsResponse(token: token, ids: ids, found: found, attributes: attributes)
        let decoded = try Ubiquity_V1_GetObjectsResponse(serializedBytes: bytes)
        let expected = generic(token: token, ids: ids, found: found)
        // (a NaN double makes a message unequal to itself: compare the text forms then)
        XCTAssertTrue(decoded == expected || decoded.textFormatString() == expected.textFormatString(), "\(decoded) vs \(expected)", file: file, line: line)
    }

    func testEveryValueUnderEveryAttributeTypeEncodesAsTheGenericPathDoes() throws {
        let store = UUID()
        let names = attributes("SubThing")!.keys.sorted() + ["unknown"]
        for v in Self.values {
            for n in names {
                for entity in ["Thing", "SubThing"] {
                    let id = ObjectID(storeID: store, entity: entity, pk: 7)
                    try check([id], [ObjectSnapshot(id: id, version: 3, values: [n: v], relationships: [:])])
                }
            }
        }
    }

    /// A double under an integer attribute (a REAL in an integer column: written before a
    /// migration changed the type, or by another SQLite client) is sent truncated and saturated,
    /// NaN as 0, never trapping; a date no Timestamp holds saturates with nanos 0. Both encoders.
    func testNonFiniteAndOutOfRangeNumbersHaveDefinedValues() throws {
        let cases: [(Double, Int64)] = [(.nan, 0), (.infinity, .max), (-.infinity, .min), (1e300, .max), (-1e300, .min),
                                        (9_223_372_036_854_775_808.0, .max), (-9_223_372_036_854_775_808.0, .min), (-2.7, -2), (2.7, 2)]
        for (d, want) in cases {
            for type in [AttributeType.int16, .int32, .int64] {
                XCTAssertEqual(Convert.protoValue(.double(d), type: type).int64Value, want, "\(d)")
                var w = ProtoWriter(capacity: 16)
                ObjectEncoding.value(.double(d), type: type, into: &w)
                XCTAssertEqual(try Ubiquity_V1_Value(serializedBytes: w.finishBytes()).int64Value, want, "\(d)")
            }
        }
        let dates: [(Double, Int64, Int32)] = [(.nan, 0, 0), (.infinity, .max, 0), (-.infinity, .min, 0), (1e300, .max, 0), (-1.5, -2, 500_000_000)]
        for (d, secs, nanos) in dates {
            let t = Convert.protoValue(.date(d), type: nil).dateValue
            XCTAssertEqual(t.seconds, secs, "\(d)")
            XCTAssertEqual(t.nanos, nanos, "\(d)")
            var w = ProtoWriter(capacity: 16)
            ObjectEncoding.value(.date(d), type: nil, into: &w)
            XCTAssertEqual(try Ubiquity_V1_Value(serializedBytes: w.finishBytes()).dateValue, t, "\(d)")
        }
    }

    func testWholeObjectsRelationshipsMissingIDsAndOrder() throws {
        let store = UUID()
        let a = ObjectID(storeID: store, entity: "Thing", pk: 1)
        let b = ObjectID(storeID: store, entity: "SubThing", pk: 123_456_789_012)
        let gone = ObjectID(storeID: store, entity: "Thing", pk: 99)
        var all: [String: StorageValue] = [:]
        for (i, n) in attributes("Thing")!.keys.sorted().enumerated() { all[n] = Self.values[(i * 7) % Self.values.count] }
        all["d"] = .double(2.5)
        let objA = ObjectSnapshot(id: a, version: 0, values: all, relationships: ["others": [b]])
        let many = (1...40).map { ObjectID(storeID: store, entity: "Thing", pk: Int64($0) * 1_000_003) }
        let objB = ObjectSnapshot(id: b, version: Int64.max, values: ["extra": .int(-5), "s": .string(String(repeating: "é", count: 100))],
                                  relationships: ["others": many])
        let empty = ObjectSnapshot(id: a, version: 1, values: [:], relationships: ["others": []])
        try check([a, gone, b], [objA, nil, objB])
        // IDs of another store in between, in objects, relationships and missing IDs: the writer
        // writes a store's first ID straight and keeps its prefix from the second on, per store
        let other = ObjectID(storeID: UUID(), entity: "Thing", pk: 7)
        let objO = ObjectSnapshot(id: other, version: 2, values: [:], relationships: ["others": [a, other, b, other, a]])
        try check([other], [objO])
        try check([other], [nil])
        try check([a, other, gone, b, other, a], [objA, objO, nil, objB, nil, nil])
        try check([gone, gone], [nil, nil])
        try check([a], [empty])
        try check([], [])
    }
}
