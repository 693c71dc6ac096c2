import Foundation
import XCTest
import UbiquityStorage
import UbiquityTestSupport
@testable import UbiquityQuery

/// A fresh temporary directory per test; stores opened through `open` close at teardown.
// Tests run one at a time; helpers called from @Sendable closures only read `dir`.
class QueryTestCase: XCTestCase, @unchecked Sendable {
    private var temporary: TemporaryDirectory?
    var dir: String { temporary?.path ?? "" }
    var stores: [Store] = []

    override func setUpWithError() throws {
        temporary = try TemporaryDirectory(prefix: "ubq-query")
    }

    override func tearDownWithError() throws {
        for s in stores { s.close() }
        stores.removeAll()
        temporary?.remove()
    }

    func open(_ name: String = "store", model: ModelDefinition = QFixtures.model, configure: (inout StorageConfiguration) -> Void = { _ in }) throws -> Store {
        var c = StorageConfiguration()
        c.readerCount = 2
        c.synchronous = .off
        c.logger.logLevel = .error
        configure(&c)
        let s = try Store.open(path: dir + "/" + name + ".sqlite", id: UUID(), model: model, configuration: c)
        stores.append(s)
        return s
    }

    func queryError(file: StaticString = #filePath, line: UInt = #line, _ body: () async throws -> Void) async -> QueryError? {
        do { try await body(); XCTFail("expected a QueryError", file: file, line: line); return nil } catch let e as QueryError { return e } catch {
            XCTFail("unexpected error \(error)", file: file, line: line); return nil
        }
    }

    func syncQueryError(file: StaticString = #filePath, line: UInt = #line, _ body: () throws -> Void) -> QueryError? {
        do { try body(); XCTFail("expected a QueryError", file: file, line: line); return nil } catch let e as QueryError { return e } catch {
            XCTFail("unexpected error \(error)", file: file, line: line); return nil
        }
    }

    /// Inserts objects in one save; returns temporary ID → permanent ID.
    func insert(_ s: Store, _ ops: [InsertOperation]) async throws -> [String: ObjectID] {
        var r = SaveRequest()
        r.inserts = ops
        return try await s.save(r).permanentIDs
    }

    func fetch(_ s: Store, _ entity: String, _ predicate: String? = nil, configure: (inout FetchRequest) -> Void = { _ in }) async throws -> FetchResult {
        var r = FetchRequest(entity: entity)
        r.predicate = predicate
        configure(&r)
        return try await s.fetch(r)
    }
}

func ins(_ t: String, _ e: String, _ v: [String: StorageValue], _ rels: [String: [String]] = [:]) -> InsertOperation {
    InsertOperation(temporaryID: t, entity: e, values: v, relationships: rels.mapValues { $0.map { ObjectReference.temporary($0) } })
}

enum QFixtures {
    /// Person ← Employee; Dept ↔ employees; Person ↔ friends (many-to-many, self-inverse);
    /// Person ↔ tags (many-to-many); Person ↔ notes (one-to-many); Person → mentor (no inverse);
    /// Item (bulk, indexed).
    static var model: ModelDefinition {
        ModelDefinition(versionIdentifier: "q1", entities: [
            EntityDefinition(name: "Person", attributes: [
                AttributeDefinition(name: "name", type: .string),
                AttributeDefinition(name: "email", type: .string),
                AttributeDefinition(name: "age", type: .int32),
                AttributeDefinition(name: "score", type: .double),
                AttributeDefinition(name: "flag", type: .bool),
                AttributeDefinition(name: "born", type: .date),
                AttributeDefinition(name: "salary", type: .decimal),
                AttributeDefinition(name: "code", type: .uuid),
                AttributeDefinition(name: "photo", type: .binary),
                AttributeDefinition(name: "site", type: .uri),
            ], relationships: [
                RelationshipDefinition(name: "friends", destination: "Person", toMany: true, inverse: "friends"),
                RelationshipDefinition(name: "tags", destination: "Tag", toMany: true, inverse: "people"),
                RelationshipDefinition(name: "notes", destination: "Note", toMany: true, inverse: "owner", deleteRule: .cascade),
                RelationshipDefinition(name: "mentor", destination: "Person"),
            ], indexes: [["name"], ["age"]]),
            EntityDefinition(name: "Employee", parent: "Person", attributes: [
                AttributeDefinition(name: "title", type: .string),
            ], relationships: [
                RelationshipDefinition(name: "dept", destination: "Dept", inverse: "employees"),
            ]),
            EntityDefinition(name: "Dept", attributes: [
                AttributeDefinition(name: "title", type: .string),
                AttributeDefinition(name: "budget", type: .double),
            ], relationships: [
                RelationshipDefinition(name: "employees", destination: "Employee", toMany: true, inverse: "dept", deleteRule: .deny),
            ]),
            EntityDefinition(name: "Tag", attributes: [
                AttributeDefinition(name: "label", type: .string),
            ], relationships: [
                RelationshipDefinition(name: "people", destination: "Person", toMany: true, inverse: "tags"),
            ]),
            EntityDefinition(name: "Note", attributes: [
                AttributeDefinition(name: "text", type: .string),
                AttributeDefinition(name: "n", type: .int64),
            ], relationships: [
                RelationshipDefinition(name: "owner", destination: "Person", inverse: "notes"),
            ]),
            EntityDefinition(name: "Item", attributes: [
                AttributeDefinition(name: "seq", type: .int64),
                AttributeDefinition(name: "cat", type: .int32),
                AttributeDefinition(name: "label", type: .string),
            ], indexes: [["cat"], ["seq"], ["label"]]),
        ])
    }
}

extension StorageValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral {
    public init(stringLiteral v: String) { self = .string(v) }
    public init(integerLiteral v: Int64) { self = .int(v) }
}
