import Foundation
import SwiftProtobuf
import XCTest
import UbiquityProtos
import UbiquityQuery
import UbiquityTestSupport
@testable import UbiquityStorage
@testable import UbiquityServices

/// The hand codecs the benchmark keeps (docs/benchmarks.md, "Hand codecs") against SwiftProtobuf
/// on randomly generated messages: a request serialized by SwiftProtobuf is decoded by each
/// method's `RequestDecoder` exactly as the generic route decodes it, every field; a response the
/// hand encoder writes decodes with SwiftProtobuf to the message the generic conversion builds.
/// Seeded, so a failure names the seed that reproduces it.
final class HandCodecRandomTests: XCTestCase {
    typealias Seeded = SplitMix

    static let cases = 2_000

    // MARK: random pieces

    static func text(_ g: inout Seeded, max: Int = 12) -> String {
        let alphabet = Array("abcXYZ019 _-.$=<>'\"éüß漢😀\u{0}\u{7F}")
        return String((0..<Int.random(in: 0...max, using: &g)).map { _ in alphabet.randomElement(using: &g)! })
    }

    static func scalar(_ g: inout Seeded) -> Ubiquity_V1_Value {
        var v = Ubiquity_V1_Value()
        switch Int.random(in: 0..<9, using: &g) {
        case 0: v.nullValue = .nullValue
        case 1: v.stringValue = text(&g)
        case 2: v.boolValue = Bool.random(using: &g)
        case 3: v.int16Value = Int32.random(in: -32768...32767, using: &g)
        case 4: v.int32Value = Int32.random(in: .min ... .max, using: &g)
        case 5: v.int64Value = Int64.random(in: .min ... .max, using: &g)
        case 6: v.floatValue = Float.random(in: -1e6...1e6, using: &g)
        case 7: v.doubleValue = [0, -0.0, .infinity, -.infinity, 1e300, Double.random(in: -1e9...1e9, using: &g)].randomElement(using: &g)!
        default: break  // no kind
        }
        return v
    }

    /// Any value kind, valid or not (a malformed decimal or UUID the conversion refuses).
    static func value(_ g: inout Seeded) -> Ubiquity_V1_Value {
        var v = scalar(&g)
        switch Int.random(in: 0..<14, using: &g) {
        case 0: v.decimalValue = ["12.50", "-0.001", "1e3", "abc", ""].randomElement(using: &g)!
        case 1:
            var ts = Google_Protobuf_Timestamp()
            ts.seconds = Int64.random(in: -62_135_596_800...253_402_300_799, using: &g)
            ts.nanos = Int32.random(in: 0...999_999_999, using: &g)
            v.dateValue = ts
        case 2: v.binaryValue = Data((0..<Int.random(in: 0...8, using: &g)).map { _ in UInt8.random(in: 0...255, using: &g) })
        case 3: v.uuidValue = Bool.random(using: &g) ? UUID().uuidString : text(&g)
        case 4: v.uriValue = "https://example.com/" + text(&g)
        default: break
        }
        return v
    }

    static func token(_ g: inout Seeded, store: UUID) -> Data {
        switch Int.random(in: 0..<4, using: &g) {
        case 0: return Data()
        case 1: return Data((0..<Int.random(in: 1...40, using: &g)).map { _ in UInt8.random(in: 0...255, using: &g) })  // malformed
        default:
            return Data(GenerationToken(storeID: Bool.random(using: &g) ? store : UUID(), epoch: UInt64.random(in: 0...5, using: &g),
                                        generation: Int64.random(in: 0...1_000_000, using: &g)).bytes)
        }
    }

    // MARK: requests

    func testGetObjectsRequestsDecodeLikeSwiftProtobuf() throws {
        var g = Seeded(state: 16)
        var fast = 0
        for n in 0..<Self.cases {
            var r = Ubiquity_V1_GetObjectsRequest()
            r.storeID = Bool.random(using: &g) ? UUID().uuidString : Self.text(&g)
            r.objectIds = (0..<Int.random(in: 0...6, using: &g)).map { _ in "x-ubiquity://\(UUID().uuidString)/" + Self.text(&g) }
            if Int.random(in: 0..<4, using: &g) == 0 { r.at.token = Self.token(&g, store: UUID()) }
            if Int.random(in: 0..<6, using: &g) == 0 { r.at.minimumGeneration = Int64.random(in: 0...100, using: &g) }
            let bytes: [UInt8] = try r.serializedBytes()
            XCTAssertEqual(try GetObjectsRequestDecoder.decode(bytes), r, "case \(n)")
            if let hand = RequestDecoding.getObjects(bytes) {
                XCTAssertEqual(hand, r, "case \(n)")
                fast += 1
            }
        }
        XCTAssertGreaterThan(fast, Self.cases / 3, "the hand decoder must take the common form")
    }

    func testFetchRequestsDecodeLikeTheGenericRoute() throws {
        var g = Seeded(state: 3)
        var fast = 0
        for n in 0..<Self.cases {
            var r = Ubiquity_V1_FetchRequest()
            let store = UUID()
            r.storeID = store.uuidString
            r.fetch.entity = Int.random(in: 0..<10, using: &g) == 0 ? "" : Self.text(&g)
            if Bool.random(using: &g) { r.fetch.predicate = Self.text(&g, max: 30) }
            if Bool.random(using: &g) { r.fetch.havingPredicate = Self.text(&g) }
            r.fetch.fetchLimit = Int32.random(in: -2...50, using: &g)
            r.fetch.fetchOffset = Int32.random(in: -2...50, using: &g)
            r.fetch.fetchBatchSize = Int32.random(in: -2...50, using: &g)
            r.fetch.resultType = [.unspecified, .objects, .objectIds, .count, .dictionaries, .UNRECOGNIZED(7)].randomElement(using: &g)!
            r.fetch.returnsDistinctResults = Bool.random(using: &g)
            r.fetch.excludesSubentities = Bool.random(using: &g)
            for _ in 0..<Int.random(in: 0...4, using: &g) {
                var a = Ubiquity_V1_Argument()
                if Int.random(in: 0..<8, using: &g) == 0 { a.list.values = [Self.scalar(&g)] } else { a.value = Self.scalar(&g) }
                r.fetch.variables[Self.text(&g, max: 4)] = a
            }
            if Int.random(in: 0..<5, using: &g) == 0 { r.fetch.sortDescriptors = [Ubiquity_V1_SortDescriptor()] }
            if Int.random(in: 0..<3, using: &g) == 0 { r.at.token = Self.token(&g, store: store) }
            if Int.random(in: 0..<5, using: &g) == 0 { r.at.minimumGeneration = Int64.random(in: 0...100, using: &g) }
            let bytes: [UInt8] = try r.serializedBytes()
            let generic = FetchRequestDecodingTests.generic(bytes)
            let viaTable = try? FetchRequestDecoder.decode(bytes)
            switch (viaTable, generic) {
            case (nil, nil): break
            case let (table?, generic?): XCTAssertTrue(FetchRequestDecodingTests.same(generic, table), "case \(n): \(r)")
            default: XCTFail("case \(n): the table's decoder and the generic route disagree on \(r)")
            }
            if let hand = FetchDecoding.decode(bytes) {
                XCTAssertTrue(generic.map { FetchRequestDecodingTests.same($0, hand) } ?? false, "case \(n): \(r)")
                fast += 1
            }
        }
        XCTAssertGreaterThan(fast, Self.cases / 10, "the hand decoder must take the common form")
    }

    /// The engine's save as the Save method makes it from either form (Stores+Writes.swift).
    private func engineSave(_ request: SaveRequestDecoder.Request, store: UUID) throws -> SaveRequest {
        switch request {
        case .common(let d, let bytes):
            if d.foreignReference(store: store) { return try StoresService.saveRequest(Ubiquity_V1_SaveRequest(serializedBytes: bytes), store: store) }
            return d.saveRequest
        case .general(let r):
            return try StoresService.saveRequest(r, store: store)
        }
    }

    private func render(_ s: SaveRequest) throws -> String {
        // JSON of the engine's Codable types, keys sorted: every field, doubles included.
        let e = JSONEncoder()
        e.outputFormatting = .sortedKeys
        e.nonConformingFloatEncodingStrategy = .convertToString(positiveInfinity: "+inf", negativeInfinity: "-inf", nan: "nan")
        let parts: [String] = [
            "\(s.mergePolicy) \(String(describing: s.author)) \(String(describing: s.contextName)) \(String(describing: s.clientTransactionID)) \(s.dryRun)",
            String(decoding: try e.encode(s.inserts), as: UTF8.self), "\(s.updates.count) \(s.deletes.count)",
        ]
        return parts.joined(separator: "\n")
    }

    func testSaveRequestsDecodeLikeTheGenericRoute() throws {
        var g = Seeded(state: 2)
        var fast = 0
        let store = UUID()
        for n in 0..<Self.cases {
            var r = Ubiquity_V1_SaveRequest()
            r.storeID = store.uuidString
            r.author = Self.text(&g, max: 4)
            r.contextName = Self.text(&g, max: 4)
            r.clientTransactionID = Self.text(&g, max: 4)
            r.dryRun = Bool.random(using: &g)
            r.conflictsInResponse = Bool.random(using: &g)
            r.mergePolicy = [.unspecified, .error, .mergeByPropertyObjectTrump, .mergeByPropertyStoreTrump, .UNRECOGNIZED(9)].randomElement(using: &g)!
            for i in 0..<Int.random(in: 0...4, using: &g) {
                var ins = Ubiquity_V1_Insert()
                ins.temporaryID = Int.random(in: 0..<12, using: &g) == 0 ? "" : "t\(i)"
                ins.entity = Int.random(in: 0..<12, using: &g) == 0 ? "" : Self.text(&g, max: 6)
                for _ in 0..<Int.random(in: 0...5, using: &g) { ins.values[Self.text(&g, max: 4)] = Self.value(&g) }
                if Int.random(in: 0..<4, using: &g) == 0 {
                    var ref = Ubiquity_V1_ObjectRef()
                    if Bool.random(using: &g) { ref.temporaryID = "t0" } else { ref.objectID = "x-ubiquity://\((Bool.random(using: &g) ? store : UUID()).uuidString)/Thing/p\(n)" }
                    var list = Ubiquity_V1_ObjectRefList()
                    list.refs = [ref]
                    ins.relationships[Self.text(&g, max: 3)] = list
                }
                r.inserts.append(ins)
            }
            if Int.random(in: 0..<8, using: &g) == 0 { r.deletes = [Ubiquity_V1_Delete()] }
            let bytes: [UInt8] = try r.serializedBytes()
            let generic = try? render(StoresService.saveRequest(Ubiquity_V1_SaveRequest(serializedBytes: bytes), store: store))
            let viaTable = try? render(engineSave(SaveRequestDecoder.decode(bytes), store: store))
            XCTAssertEqual(viaTable, generic, "case \(n): \(r)")
            if let hand = SaveDecoding.decode(bytes) {
                XCTAssertEqual(hand.storeID, r.storeID, "case \(n)")
                XCTAssertEqual(hand.conflictsInResponse, r.conflictsInResponse, "case \(n)")
                // (a target in another store goes to the general conversion, which refuses it)
                if !hand.foreignReference(store: store) {
                    XCTAssertNotNil(generic, "case \(n): the hand decoder accepted what the conversion refuses: \(r)")
                    fast += 1
                }
            }
        }
        XCTAssertGreaterThan(fast, Self.cases / 10, "the hand decoder must take the common form")
    }

    // MARK: responses

    static let model = ModelInfo(EncodingFixtures.model("random", relationships: [RelationshipDefinition(name: "next", destination: "Thing")],
                                                        extra: .string), hash: "h")

    static func storageValue(_ type: AttributeType, _ g: inout Seeded) -> StorageValue {
        if Int.random(in: 0..<8, using: &g) == 0 { return .null }
        switch type {
        case .string: return .string(text(&g))
        case .bool: return .bool(Bool.random(using: &g))
        case .int16: return .int(Int64.random(in: -32768...32767, using: &g))
        case .int32: return .int(Int64(Int32.random(in: .min ... .max, using: &g)))
        case .int64: return .int(Int64.random(in: .min ... .max, using: &g))
        case .float: return .double(Double(Float.random(in: -1e6...1e6, using: &g)))
        case .double: return .double(Double.random(in: -1e12...1e12, using: &g))
        case .decimal: return .decimal("\(Int.random(in: -999...999, using: &g)).\(Int.random(in: 0...99, using: &g))")
        case .date: return .date(Double.random(in: -1e10...1e10, using: &g))
        case .binary: return .binary(Data((0..<Int.random(in: 0...6, using: &g)).map { _ in UInt8.random(in: 0...255, using: &g) }))
        case .uuid: return .uuid(UUID())
        case .uri: return .uri("https://example.com/" + text(&g))
        }
    }

    /// An entity's attributes with the inherited ones (what a read context answers).
    static func attributes(_ entity: String) -> [String: AttributeDefinition]? {
        let entities = model.definition.entities
        var out: [String: AttributeDefinition] = [:]
        var cur = entities.first { $0.name == entity }
        guard cur != nil else { return nil }
        while let c = cur {
            for a in c.attributes where out[a.name] == nil { out[a.name] = a }
            cur = c.parent.flatMap { p in entities.first { $0.name == p } }
        }
        return out
    }

    static func snapshot(_ store: UUID, _ g: inout Seeded) -> ObjectSnapshot {
        let entity = Bool.random(using: &g) ? "Thing" : "SubThing"
        var values: [String: StorageValue] = [:]
        for a in EncodingFixtures.allTypes where Int.random(in: 0..<4, using: &g) > 0 { values[a.name] = storageValue(a.type, &g) }
        if entity == "SubThing" { values["extra"] = storageValue(.string, &g) }
        var rels: [String: [ObjectID]] = [:]
        if Bool.random(using: &g) { rels["next"] = (0..<Int.random(in: 0...2, using: &g)).map { ObjectID(storeID: store, entity: "Thing", pk: Int64($0 + 1)) } }
        return ObjectSnapshot(id: ObjectID(storeID: store, entity: entity, pk: Int64.random(in: 1...Int64.max, using: &g)),
                              version: Int64.random(in: 0...9, using: &g), values: values, relationships: rels)
    }

    func testGetObjectsResponsesDecodeToTheGenericMessage() throws {
        var g = Seeded(state: 5)
        let model = Self.model
        for n in 0..<Self.cases / 4 {
            let store = UUID()
            let found: [ObjectSnapshot?] = (0..<Int.random(in: 0...5, using: &g)).map { _ in Bool.random(using: &g) ? Self.snapshot(store, &g) : nil }
            let ids = found.map { $0?.id ?? ObjectID(storeID: store, entity: "Thing", pk: Int64.random(in: 1...1000, using: &g)) }
            let token = GenerationToken(storeID: store, epoch: 1, generation: Int64.random(in: 0...1_000_000, using: &g))
            let bytes = ObjectEncoding.getObjectsResponse(token: token, ids: ids, found: found, attributes: Self.attributes)
            var expected = Ubiquity_V1_GetObjectsResponse()
            expected.token = Data(token.bytes)
            for (id, o) in zip(ids, found) {
                if let o { expected.objects.append(Convert.managedObject(o, model: model)) } else { expected.missingObjectIds.append(id.uri) }
            }
            XCTAssertEqual(try Ubiquity_V1_GetObjectsResponse(serializedBytes: bytes), expected, "case \(n)")
        }
    }

    func testSaveResultsDecodeToTheGenericMessage() throws {
        var g = Seeded(state: 7)
        for n in 0..<Self.cases / 4 {
            let store = UUID()
            func id() -> ObjectID { ObjectID(storeID: Bool.random(using: &g) ? store : UUID(), entity: Self.text(&g, max: 5), pk: Int64.random(in: 1...Int64.max, using: &g)) }
            var permanent: [String: ObjectID] = [:]
            var versions: [ObjectID: Int64] = [:]
            for i in 0..<Int.random(in: 0...5, using: &g) { permanent["t\(i)" + Self.text(&g, max: 2)] = id() }
            for _ in 0..<Int.random(in: 0...5, using: &g) { versions[id()] = Int64.random(in: -2...Int64.max, using: &g) }
            let r = SaveResult(token: GenerationToken(storeID: store, epoch: UInt64.random(in: 0...3, using: &g), generation: Int64.random(in: 0...99, using: &g)),
                               permanentIDs: permanent, versions: versions, resolvedConflicts: [],
                               skipped: (0..<Int.random(in: 0...3, using: &g)).map { _ in id() },
                               dryRun: Bool.random(using: &g), replayed: Bool.random(using: &g))
            XCTAssertEqual(try Ubiquity_V1_SaveResult(serializedBytes: SaveEncoding.saveResult(r, model: nil)), Convert.saveResult(r, model: nil), "case \(n)")
        }
    }
}
