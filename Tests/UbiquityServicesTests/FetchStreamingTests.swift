import Foundation
import XCTest
import UbiquityProtos
import UbiquityQuery
import UbiquityStorage
import UbiquityTestSupport
@testable import UbiquityServices

/// Plan-cached object fetches stream their rows into `FetchResponseWriter` (no snapshots); the
/// response, decoded, must equal the generic conversion of the same fetch read at the same
/// generation, for every attribute type, nulls, sub-entities, pinned tokens and while saves run.
/// Entities with relationships take the snapshot route and must still be right.
final class FetchStreamingTests: XCTestCase, @unchecked Sendable {
    /// Every attribute type and an int64 key to select by.
    static let allTypes: [AttributeDefinition] = EncodingFixtures.allTypes + [AttributeDefinition(name: "k", type: .int64)]
    static let model = ModelDefinition(versionIdentifier: "stream", entities: [
        EntityDefinition(name: "Plain", attributes: allTypes),
        EntityDefinition(name: "SubPlain", parent: "Plain", attributes: [AttributeDefinition(name: "extra", type: .string)]),
        EntityDefinition(name: "Linked", attributes: allTypes, relationships: [
            RelationshipDefinition(name: "next", destination: "Linked"),
            RelationshipDefinition(name: "all", destination: "Linked", toMany: true),
        ]),
    ])
    var temporary: TemporaryDirectory?
    var store: Store!

    override func setUpWithError() throws {
        let dir = try TemporaryDirectory(prefix: "ubq-stream")
        temporary = dir
        var c = StorageConfiguration()
        c.readerCount = 1
        c.synchronous = .off
        c.logger.logLevel = .error
        store = try Store.open(path: dir.file("s.sqlite"), id: UUID(), model: Self.model, configuration: c)
    }

    override func tearDownWithError() throws {
        store.close()
        temporary?.remove()
    }

    /// Values of every type and form: nulls, extremes, non-ASCII and empty texts, fractions.
    static func values(_ i: Int) -> [String: StorageValue] {
        var v: [String: StorageValue] = [
            "s": [.string("plain-\(i)"), .string("é-\(i)-ü"), .string(""), .null][i % 4],
            "b": [.bool(true), .bool(false), .null][i % 3],
            "i16": [.int(-5), .int(32_767), .null][i % 3],
            "i32": [.int(-2_000_000_000), .int(Int64(i)), .null][i % 3],
            "i64": [.int(Int64.min), .int(Int64.max), .int(0), .null][i % 4],
            "f": [.double(1.25), .double(-3), .double(.infinity), .null][i % 4],
            "d": [.double(-0.0), .double(1e300), .double(Double(i) / 3), .null][i % 4],
            "dec": [.decimal("12.50"), .null][i % 2],
            "date": [.date(-1.25), .date(1_700_000_000.5), .date(0), .null][i % 4],
            "bin": [.binary(Data([0, 1, 255])), .binary(Data()), .null][i % 3],
            "u": [.uuid(UUID()), .null][i % 2],
            "uri": [.uri("https://example.com/\(i)"), .null][i % 2],
            "k": .int(Int64(i % 3)),
        ]
        if i % 5 == 0 { v["s"] = .string(String(repeating: "x", count: 300 + i)) }
        return v
    }

    func insert(_ n: Int, from: Int = 0) async throws {
        var r = SaveRequest()
        for i in from..<(from + n) {
            let entity = ["Plain", "SubPlain", "Linked"][i % 3]
            var v = Self.values(i)
            if entity == "SubPlain" { v["extra"] = i % 2 == 0 ? .string("sub \(i)") : .null }
            r.inserts.append(InsertOperation(temporaryID: "t\(i)", entity: entity, values: v,
                                             relationships: entity == "Linked" && i >= from + 3 ? ["next": [.temporary("t\(i - 3)")], "all": [.temporary("t\(from + 2)")]] : [:]))
        }
        _ = try await store.save(r)
    }

    func request(_ entity: String, _ predicate: String?, _ vars: [String: QueryArgument] = [:], sort: Bool = true) -> FetchRequest {
        var r = FetchRequest(entity: entity)
        r.predicate = predicate
        r.variables = vars
        if sort { r.sortDescriptors = [SortDescriptor(keyPath: "i32", ascending: false), SortDescriptor(keyPath: "i64")] }
        return r
    }

    /// Fetches `r` through the writer and the generic way at the writer's generation; returns
    /// whether the rows were streamed.
    @discardableResult
    func assertSame(_ r: FetchRequest, at: ReadGeneration = .current, file: StaticString = #filePath, line: UInt = #line) throws -> Bool {
        let info = ModelInfo(Self.model, hash: "h")
        let out = FetchResponseWriter()
        let streamed = try store.fetchSync(r, at: at, sink: out)
        let bytes = try out.finish(streamed, type: r.resultType, model: { info })
        let decoded = try Ubiquity_V1_FetchResults(serializedBytes: bytes)
        let generic = try store.fetchSync(r, at: .token(streamed.token))
        XCTAssertFalse(generic.objectsStreamed, file: file, line: line)
        let expected = Convert.fetchResults(generic, type: r.resultType, model: info)
        XCTAssertEqual(decoded, expected, "\(r.entity) \(r.predicate ?? "")", file: file, line: line)
        XCTAssertEqual(decoded.token, Data(streamed.token.bytes), file: file, line: line)
        return streamed.objectsStreamed
    }

    func testStreamedObjectsEqualTheGenericResponse() async throws {
        try await insert(60)
        for k in 0..<3 {
            XCTAssertTrue(try assertSame(request("Plain", "k == $k", ["k": .scalar(.int(Int64(k)))])))
            XCTAssertTrue(try assertSame(request("SubPlain", "k == $k", ["k": .scalar(.int(Int64(k)))])))
            XCTAssertTrue(try assertSame(request("Plain", "k == $k", ["k": .scalar(.int(Int64(k)))], sort: false)))
            // relationships: the snapshot route, same response
            XCTAssertFalse(try assertSame(request("Linked", "k == $k", ["k": .scalar(.int(Int64(k)))])))
        }
        XCTAssertTrue(try assertSame(request("Plain", nil)))
        XCTAssertTrue(try assertSame(request("Plain", "k == 99")))  // empty
        // propertiesToFetch, other result types, prefetching: not streamed, same response
        var p = request("Plain", "k == $k", ["k": .scalar(.int(1))])
        p.propertiesToFetch = ["s", "d"]
        XCTAssertFalse(try assertSame(p))
        for type in [FetchResultType.objectIDs, .count] {
            var t = request("Plain", "k == $k", ["k": .scalar(.int(1))])
            t.resultType = type
            XCTAssertFalse(try assertSame(t))
        }
        var limited = request("Plain", nil)
        limited.fetchLimit = 3
        limited.fetchOffset = 2
        XCTAssertTrue(try assertSame(limited))
    }

    /// A save accepts any finite date, and a `Timestamp` with seconds near Int64.max is one; read
    /// back, its seconds no longer fit an Int64 after rounding (2^63). Both encoders used to trap
    /// (the server crashed on the fetch); now they saturate, the same way.
    func testDatesBeyondInt64SecondsEncodeWithoutTrapping() async throws {
        var r = SaveRequest()
        let dates: [Double] = [Double(Int64.max) + Double(999_999_999) / 1e9, -Double(Int64.max), 1e300, -1e300]
        for (i, d) in dates.enumerated() {
            var v = Self.values(i)
            v["date"] = .date(d)
            v["k"] = .int(7)
            r.inserts.append(InsertOperation(temporaryID: "x\(i)", entity: "Plain", values: v))
        }
        _ = try await store.save(r)
        XCTAssertTrue(try assertSame(request("Plain", "k == $k", ["k": .scalar(.int(7))])))
        let out = FetchResponseWriter()
        let streamed = try store.fetchSync(request("Plain", "k == 7", sort: false), sink: out)
        let decoded = try Ubiquity_V1_FetchResults(serializedBytes: try out.finish(streamed, type: .objects, model: { nil }))
        XCTAssertEqual(Set(decoded.objects.map { $0.values["date"]!.dateValue.seconds }), [Int64.max, Int64.min])
    }

    func testStreamedFetchAtAPinnedTokenSeesItsGeneration() async throws {
        try await insert(30)
        let old = store.currentToken
        let r = request("Plain", "k == $k", ["k": .scalar(.int(0))])
        let before = try store.fetchSync(r, at: .token(old))
        var u = SaveRequest()
        let ids = before.objectIDs
        XCTAssertFalse(ids.isEmpty)
        for id in ids { u.updates.append(UpdateOperation(objectID: id, values: ["s": .string("changed"), "k": .int(2)])) }
        _ = try await store.save(u)
        try await insert(30, from: 30)
        XCTAssertTrue(try assertSame(r, at: .token(old)))
        XCTAssertTrue(try assertSame(r))
        // the old generation still shows the objects before the update
        let info = ModelInfo(Self.model, hash: "h")
        let out = FetchResponseWriter()
        let again = try store.fetchSync(r, at: .token(old), sink: out)
        let decoded = try Ubiquity_V1_FetchResults(serializedBytes: try out.finish(again, type: .objects, model: { info }))
        XCTAssertEqual(decoded.objectIds, before.objectIDs.map(\.uri))
        XCTAssertFalse(decoded.objects.contains { $0.values["s"]?.stringValue == "changed" })
    }

    /// A plan remembers its prepared statement; after the connection's statement cache evicted
    /// it (first in, first out: more distinct statements than the cache holds) the plan must
    /// prepare it again, never use the finalized one.
    func testStreamedFetchAfterTheStatementCacheTurnedOver() async throws {
        try await insert(30)
        let r = request("Plain", "k == $k", ["k": .scalar(.int(1))])
        XCTAssertTrue(try assertSame(r))
        for n in 1...80 {
            let p = (0..<n).map { "i32 == \($0)" }.joined(separator: " OR ")
            XCTAssertTrue(try assertSame(request("Plain", p)))
            // used every time, so its plan stays cached while the statement cache turns over
            XCTAssertTrue(try assertSame(r))
        }
        XCTAssertTrue(try assertSame(r))
        XCTAssertTrue(try assertSame(request("Plain", "k == $k", ["k": .scalar(.int(2))])))
    }

    func testStreamedFetchesWhileSavesRun() async throws {
        try await insert(30)
        let s = store!
        let saver = Task {
            for round in 0..<20 { try await self.insertDetached(s, round) }
        }
        for i in 0..<60 { XCTAssertTrue(try assertSame(request("Plain", "k == $k", ["k": .scalar(.int(Int64(i % 3)))]))) }
        try await saver.value
        XCTAssertTrue(try assertSame(request("Plain", nil)))
    }

    func insertDetached(_ s: Store, _ round: Int) async throws {
        var r = SaveRequest()
        for i in 0..<10 { r.inserts.append(InsertOperation(temporaryID: "x\(i)", entity: i % 2 == 0 ? "Plain" : "SubPlain", values: Self.values(1000 + round * 10 + i))) }
        _ = try await s.save(r)
    }
}
