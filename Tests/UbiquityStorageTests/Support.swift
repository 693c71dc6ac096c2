import Foundation
import UbiquityTestSupport
import XCTest
@testable import UbiquityStorage

/// A fresh temporary directory per test, removed afterwards; stores opened through `open` are
/// closed at teardown and must leave no statement running.
// Tests run one at a time; helpers called from @Sendable closures only read `dir`.
class StorageTestCase: XCTestCase, @unchecked Sendable {
    private var temporary: TemporaryDirectory?
    var dir: String { temporary?.path ?? "" }
    var stores: [Store] = []

    override func setUpWithError() throws {
        temporary = try TemporaryDirectory(prefix: "ubq-storage")
        FaultInjection.disarm()
    }

    override func tearDownWithError() throws {
        FaultInjection.disarm()
        for s in stores { s.close() }
        stores.removeAll()
        XCTAssertEqual(Connection.leakedStatements.withLock { $0 }, 0, "a statement was still running when its connection closed")
        temporary?.remove()
    }

    func open(_ name: String = "store", id: UUID = UUID(), model: ModelDefinition? = Fixtures.model, configure: (inout StorageConfiguration) -> Void = { _ in }) throws -> Store {
        var c = StorageConfiguration()
        c.readerCount = 2
        c.synchronous = .normal
        configure(&c)
        let s = try Store.open(path: dir + "/" + name + ".sqlite", id: id, model: model, configuration: c)
        stores.append(s)
        return s
    }

    func reason(_ body: () async throws -> Void, file: StaticString = #filePath, line: UInt = #line) async -> StorageError.Reason? {
        do { try await body(); XCTFail("expected an error", file: file, line: line); return nil } catch let e as StorageError { return e.reason } catch {
            XCTFail("unexpected error \(error)", file: file, line: line); return nil
        }
    }

    func storageError(_ body: () async throws -> Void, file: StaticString = #filePath, line: UInt = #line) async -> StorageError? {
        do { try await body(); XCTFail("expected an error", file: file, line: line); return nil } catch let e as StorageError { return e } catch {
            XCTFail("unexpected error \(error)", file: file, line: line); return nil
        }
    }

    @discardableResult
    func insert(_ s: Store, _ entity: String, _ values: [String: StorageValue], rels: [String: [ObjectReference]] = [:]) async throws -> ObjectID {
        var r = SaveRequest()
        r.inserts = [InsertOperation(temporaryID: "t", entity: entity, values: values, relationships: rels)]
        return try await s.save(r).permanentIDs["t"]!
    }

    func update(_ s: Store, _ id: ObjectID, _ values: [String: StorageValue], version: Int64? = nil, policy: MergePolicy = .error,
                snapshot: [String: StorageValue]? = nil, rels: [String: [ObjectReference]] = [:]) async throws -> SaveResult {
        var r = SaveRequest()
        r.updates = [UpdateOperation(objectID: id, expectedVersion: version, values: values, relationships: rels, snapshot: snapshot)]
        r.mergePolicy = policy
        return try await s.save(r)
    }

    func delete(_ s: Store, _ id: ObjectID, version: Int64? = nil, policy: MergePolicy = .error) async throws -> SaveResult {
        var r = SaveRequest()
        r.deletes = [DeleteOperation(objectID: id, expectedVersion: version)]
        r.mergePolicy = policy
        return try await s.save(r)
    }
}

enum Fixtures {
    /// Person (abstract-free root) ← Employee (sub-entity); Department ↔ employees; Person ↔ friends (many-to-many);
    /// Person ↔ passport (one-to-one); Note (no relationships, for bulk data).
    static var model: ModelDefinition {
        ModelDefinition(versionIdentifier: "1", entities: [
            EntityDefinition(name: "Person", attributes: [
                AttributeDefinition(name: "name", type: .string, optional: false, maximum: 100, keepOnDelete: true),
                AttributeDefinition(name: "email", type: .string),
                AttributeDefinition(name: "age", type: .int16, minimum: 0, maximum: 150),
                AttributeDefinition(name: "score", type: .double, defaultValue: .double(1.5)),
                AttributeDefinition(name: "photo", type: .binary),
            ], relationships: [
                RelationshipDefinition(name: "friends", destination: "Person", toMany: true, inverse: "friends"),
                RelationshipDefinition(name: "passport", destination: "Passport", inverse: "owner", deleteRule: .cascade),
            ], indexes: [["name"]], uniquenessConstraints: [["email"]]),
            EntityDefinition(name: "Employee", parent: "Person", attributes: [
                AttributeDefinition(name: "salary", type: .decimal),
            ], relationships: [
                RelationshipDefinition(name: "department", destination: "Department", inverse: "employees"),
            ]),
            EntityDefinition(name: "Department", attributes: [
                AttributeDefinition(name: "title", type: .string, optional: false),
                AttributeDefinition(name: "founded", type: .date),
            ], relationships: [
                RelationshipDefinition(name: "employees", destination: "Employee", toMany: true, inverse: "department", deleteRule: .deny, maxCount: 3),
            ], uniquenessConstraints: [["title"]]),
            EntityDefinition(name: "Passport", attributes: [
                AttributeDefinition(name: "number", type: .string, optional: false),
                AttributeDefinition(name: "id", type: .uuid),
                AttributeDefinition(name: "site", type: .uri),
                AttributeDefinition(name: "ok", type: .bool, defaultValue: .bool(true)),
            ], relationships: [
                RelationshipDefinition(name: "owner", destination: "Person", inverse: "passport"),
            ]),
            EntityDefinition(name: "Note", attributes: [
                AttributeDefinition(name: "text", type: .string),
                AttributeDefinition(name: "n", type: .int64),
            ], indexes: [["n"]]),
            EntityDefinition(name: "Item", attributes: [
                AttributeDefinition(name: "seq", type: .int64, optional: false),
                AttributeDefinition(name: "part", type: .int16),
                AttributeDefinition(name: "payload", type: .binary),
            ], indexes: [["seq"]]),
        ])
    }
}

extension StorageValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral {
    public init(stringLiteral v: String) { self = .string(v) }
    public init(integerLiteral v: Int64) { self = .int(v) }
}
