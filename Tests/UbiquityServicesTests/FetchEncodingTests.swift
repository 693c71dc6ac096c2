import Foundation
import XCTest
import UbiquityProtos
import UbiquityQuery
import UbiquityStorage
@testable import UbiquityServices

/// `FetchEncoding` (with `ObjectEncoding`) writes Fetch responses straight into wire form; decoded, they must equal what
/// the generic conversion (`Convert.fetchResults`, SwiftProtobuf's encoder) gives.
final class FetchEncodingTests: XCTestCase {
    static let model = EncodingFixtures.model("enc", relationships: [
        RelationshipDefinition(name: "one", destination: "Thing"),
        RelationshipDefinition(name: "many", destination: "Thing", toMany: true),
    ], extra: .string)
    let store = UUID()
    var info: ModelInfo { ModelInfo(Self.model, hash: "h") }

    func id(_ pk: Int64, _ e: String = "Thing") -> ObjectID { ObjectID(storeID: store, entity: e, pk: pk) }

    /// Objects covering every value form the engine returns (stored forms and typed values), nulls,
    /// negative and extreme numbers, long texts (multi-byte lengths) and relationships.
    func objects() -> [ObjectSnapshot] {
        let long = String(repeating: "é", count: 300)
        var out: [ObjectSnapshot] = []
        out.append(ObjectSnapshot(id: id(1), version: 1, values: [
            "s": .string("hello"), "b": .bool(true), "i16": .int(-5), "i32": .int(-2_000_000_000), "i64": .int(Int64.min),
            "f": .double(1.25), "d": .double(-0.0), "dec": .decimal("12.50"), "date": .date(-1.25), "bin": .binary(Data([0, 1, 255])),
            "u": .uuid(UUID(uuidString: "1B4E28BA-2FA1-11D2-883F-0016D3CCA427")!), "uri": .uri("https://example.com/x"),
        ], relationships: ["one": [id(2)], "many": [id(2), id(3), id(900_000_000_000), ObjectID(storeID: UUID(), entity: "Thing", pk: 7), id(0), id(Int64.min + 1)]]))
        out.append(ObjectSnapshot(id: id(2), version: 0, values: [
            "s": .null, "b": .int(0), "i16": .int(70_000), "i32": .int(7), "i64": .int(0), "f": .int(3), "d": .int(-4),
            "dec": .null, "date": .date(0), "bin": .binary(Data()), "u": .null, "uri": .null,
        ], relationships: ["one": [], "many": []]))
        out.append(ObjectSnapshot(id: id(3, "SubThing"), version: 77, values: [
            "s": .string(long), "b": .bool(false), "i16": .double(3.9), "i32": .double(-3.9), "i64": .double(1e15), "f": .double(.infinity),
            "d": .double(.nan), "date": .date(1_700_000_000.999_999_9), "bin": .binary(Data(repeating: 7, count: 20_000)),
            "extra": .string(""), "unknown": .int(5),
        ], relationships: [:]))
        out.append(ObjectSnapshot(id: id(-4), version: 2, values: ["s": .string("temporary")], relationships: ["many": (1...40).map { id($0) }]))
        out.append(ObjectSnapshot(id: id(5, ""), version: -3, values: [:], relationships: [:]))
        return out
    }

    func token() -> GenerationToken { GenerationToken(storeID: store, epoch: 3, generation: 123_456) }

    func assertSameResponse(_ r: FetchResult, _ type: FetchResultType, model: ModelInfo?, file: StaticString = #filePath, line: UInt = #line) throws {
        let expected = Convert.fetchResults(r, type: type, model: model)
        let bytes = try FetchEncoding.fetchResults(r, type: type, model: model)
        let decoded = try Ubiquity_V1_FetchResults(serializedBytes: bytes)
        // NaN never equals itself: compare those values by bit pattern, the rest as messages
        func nanFree(_ m: Ubiquity_V1_FetchResults) -> Ubiquity_V1_FetchResults {
            var m = m
            for i in m.objects.indices {
                for (k, v) in m.objects[i].values { if case .doubleValue(let d)? = v.kind, d.isNaN { var x = v; x.stringValue = "NaN \(d.bitPattern)"; m.objects[i].values[k] = x } }
            }
            return m
        }
        XCTAssertEqual(nanFree(decoded), nanFree(expected), file: file, line: line)
        XCTAssertEqual(bytes.count, try expected.serializedData().count, "same size", file: file, line: line)
    }

    func testEveryResultTypeDecodesToTheGenericConversion() throws {
        var r = FetchResult(token: token())
        r.objects = objects()
        r.objectIDs = r.objects.map(\.id)
        r.count = r.objects.count
        r.prefetched = Array(objects().prefix(2))
        for model in [info, nil] {
            try assertSameResponse(r, .objects, model: model)
            try assertSameResponse(r, .objectIDs, model: model)
            try assertSameResponse(r, .count, model: model)
        }
        var d = FetchResult(token: token())
        d.dictionaries = [["s": .string("x"), "n": .int(3), "none": .null], [:]]
        d.count = 2
        try assertSameResponse(d, .dictionaries, model: info)
        // empty results
        try assertSameResponse(FetchResult(token: token()), .objects, model: info)
        try assertSameResponse(FetchResult(token: token()), .count, model: info)
    }

    func testLengthPrefixesOfEverySize() throws {
        // object sizes around the one-, two- and three-byte length boundaries
        for n in [0, 1, 50, 100, 110, 120, 126, 127, 128, 129, 200, 16_250, 16_383, 16_384, 16_400, 70_000] {
            var r = FetchResult(token: token())
            r.objects = [ObjectSnapshot(id: id(Int64(n) + 1), version: 1, values: ["s": .string(String(repeating: "a", count: n))], relationships: [:])]
            r.objectIDs = r.objects.map(\.id)
            r.count = 1
            try assertSameResponse(r, .objects, model: info)
        }
    }
}
