import Foundation
import XCTest
import UbiquityStorage
@testable import UbiquityQuery

/// Batch update, batch delete and deduplication: one transaction each, recorded in history,
/// relationships never dangling.
final class BatchTests: QueryTestCase, @unchecked Sendable {
    static var catalog: ModelDefinition {
        ModelDefinition(versionIdentifier: "c1", entities: [
            EntityDefinition(name: "Customer", attributes: [
                AttributeDefinition(name: "email", type: .string),
                AttributeDefinition(name: "name", type: .string),
                AttributeDefinition(name: "level", type: .int32, minimum: 0, maximum: 10),
            ], relationships: [
                RelationshipDefinition(name: "orders", destination: "Order", toMany: true, inverse: "customer", deleteRule: .cascade),
                RelationshipDefinition(name: "profile", destination: "Profile", inverse: "owner", deleteRule: .cascade),
                RelationshipDefinition(name: "groups", destination: "Group", toMany: true, inverse: "members"),
                RelationshipDefinition(name: "referrer", destination: "Customer"),
            ], indexes: [["email"]]),
            EntityDefinition(name: "Order", attributes: [
                AttributeDefinition(name: "number", type: .string),
                AttributeDefinition(name: "total", type: .double),
            ], relationships: [
                RelationshipDefinition(name: "customer", destination: "Customer", inverse: "orders"),
            ], uniquenessConstraints: [["number"]]),
            EntityDefinition(name: "Profile", attributes: [AttributeDefinition(name: "bio", type: .string)], relationships: [
                RelationshipDefinition(name: "owner", destination: "Customer", inverse: "profile"),
            ]),
            EntityDefinition(name: "Group", attributes: [AttributeDefinition(name: "label", type: .string)], relationships: [
                RelationshipDefinition(name: "members", destination: "Customer", toMany: true, inverse: "groups", deleteRule: .deny),
            ]),
            EntityDefinition(name: "Invoice", attributes: [AttributeDefinition(name: "amount", type: .double)], relationships: [
                RelationshipDefinition(name: "billTo", destination: "Customer"),
            ]),
            EntityDefinition(name: "Watchlist", attributes: [AttributeDefinition(name: "label", type: .string)], relationships: [
                RelationshipDefinition(name: "watched", destination: "Customer", toMany: true),
            ]),
        ])
    }

    func testBatchUpdate() async throws {
        let s = try open(model: Self.catalog)
        let ids = try await insert(s, (0..<10).map { ins("c\($0)", "Customer", ["email": .string("u\($0)@x"), "level": .int(Int64($0 % 3))]) }
            + [ins("o1", "Order", ["number": "A"]), ins("o2", "Order", ["number": "B"])])
        let before = s.currentToken
        let r = try await s.batchUpdate(entity: "Customer", predicate: "level == $l", variables: ["l": .scalar(.int(1))], values: ["name": "one", "level": .int(5)], author: "admin")
        XCTAssertEqual(r.count, 3)
        XCTAssertEqual(Set(r.objectIDs), Set([1, 4, 7].map { ids["c\($0)"]! }))
        XCTAssertEqual(r.token.generation, before.generation + 1)
        let objs = try await s.objects(r.objectIDs)
        XCTAssertTrue(objs.allSatisfy { $0?.values["name"] == "one" && $0?.values["level"] == .int(5) && $0?.version == 2 })
        let h = try await s.history(after: before)
        XCTAssertEqual(h.transactions.count, 1)
        XCTAssertEqual(h.transactions[0].author, "admin")
        XCTAssertEqual(Set(h.transactions[0].changes.map(\.objectID)), Set(r.objectIDs))
        XCTAssertTrue(h.transactions[0].changes.allSatisfy { $0.kind == .update && $0.changedProperties == ["level", "name"] })
        // nothing matched: no generation, no history
        let none = try await s.batchUpdate(entity: "Customer", predicate: "level == 9", values: ["name": "x"])
        XCTAssertEqual(none.count, 0)
        XCTAssertEqual(s.currentToken, r.token)
        // the values are checked once, before any object is read (one issue, not one per object),
        // and a failure applies nothing
        do { _ = try await s.batchUpdate(entity: "Customer", predicate: nil, values: ["level": .int(11)]); XCTFail() } catch let e as StorageError {
            guard case .validationFailed(let issues) = e.reason else { return XCTFail("\(e)") }
            XCTAssertEqual(issues.map(\.field), ["values.level"])
        }
        do { _ = try await s.batchUpdate(entity: "Customer", predicate: nil, values: ["nope": .int(1)]); XCTFail() } catch let e as StorageError {
            guard case .validationFailed = e.reason else { return XCTFail("\(e)") }
        }
        // a uniqueness clash fails the whole batch
        do { _ = try await s.batchUpdate(entity: "Order", predicate: nil, values: ["number": "same"]); XCTFail() } catch let e as StorageError {
            guard case .constraintConflict = e.reason else { return XCTFail("\(e)") }
        }
        XCTAssertEqual(s.currentToken, r.token)
        let e = await queryError { _ = try await s.batchUpdate(entity: "Customer", predicate: "levl == 1", values: ["name": "x"]) }
        XCTAssertEqual(e?.reason, .unknownKeyPath)
    }

    func testBatchDeleteKeepsReferencesValid() async throws {
        let s = try open(model: Self.catalog)
        let ids = try await insert(s, [
            ins("a", "Customer", ["email": "a@x", "level": 1], ["orders": ["o1", "o2"], "profile": ["p1"]]),
            ins("b", "Customer", ["email": "b@x", "level": 2], ["referrer": ["a"]]),
            ins("c", "Customer", ["email": "c@x", "level": 1], ["groups": ["g1"]]),
            ins("o1", "Order", ["number": "1"]), ins("o2", "Order", ["number": "2"]), ins("p1", "Profile", ["bio": "hi"]),
            ins("g1", "Group", ["label": "team"]),
            ins("i1", "Invoice", ["amount": .double(5)], ["billTo": ["a"]]),
            ins("w1", "Watchlist", ["label": "vip"], ["watched": ["a", "b"]]),
        ])
        let before = s.currentToken
        let r = try await s.batchDelete(entity: "Customer", predicate: "email BEGINSWITH 'a'", author: "ops")
        XCTAssertEqual(r.objectIDs, [ids["a"]!])
        XCTAssertEqual(r.token.generation, before.generation + 1)
        let gone = try await s.objects([ids["a"]!, ids["o1"]!, ids["o2"]!, ids["p1"]!])
        XCTAssertTrue(gone.allSatisfy { $0 == nil }, "cascade reaches orders and profile")
        // references without an inverse are cleared, not left dangling
        let left = try await s.objects([ids["b"]!, ids["i1"]!, ids["w1"]!])
        XCTAssertEqual(left[0]?.relationships["referrer"], [])
        XCTAssertEqual(left[1]?.relationships["billTo"], [])
        XCTAssertEqual(left[2]?.relationships["watched"], [ids["b"]!])
        let h = try await s.history(after: before)
        XCTAssertEqual(h.transactions.count, 1)
        XCTAssertEqual(Set(h.transactions[0].changes.filter { $0.kind == .delete }.map(\.objectID)), Set(["a", "o1", "o2", "p1"].map { ids[$0]! }))
        // deny: a group with members cannot go, and nothing of the batch applies
        do { _ = try await s.batchDelete(entity: "Group", predicate: nil); XCTFail() } catch let e as StorageError {
            guard case .validationFailed(let issues) = e.reason else { return XCTFail("\(e)") }
            XCTAssertEqual(issues.first?.code, .deleteDenied)
        }
        // by IDs (with and without a predicate); unknown or already deleted IDs are skipped
        let byIDs = try await s.batchDelete(entity: "Customer", predicate: "level == 2", objectIDs: [ids["b"]!, ids["c"]!, ids["a"]!])
        XCTAssertEqual(byIDs.objectIDs, [ids["b"]!])
        let e = await queryError { _ = try await s.batchDelete(entity: "Customer", predicate: nil, objectIDs: [ids["o1"]!]) }
        XCTAssertEqual(e?.field, "objectIDs")
        let all = try await s.dump().objects
        XCTAssertEqual(Set(all.map(\.id)), Set(["c", "g1", "i1", "w1"].map { ids[$0]! }))
        let problems = try await s.integrityCheck()
        XCTAssertEqual(problems, [])
    }

    func testDeduplicate() async throws {
        let s = try open(model: Self.catalog)
        let ids = try await insert(s, [
            // a@x three times, b@x twice, c@x once, two without email
            ins("a1", "Customer", ["email": "a@x", "name": "first"], ["orders": ["o1"], "groups": ["g1"]]),
            ins("b1", "Customer", ["email": "b@x"], ["profile": ["p1"]]),
            ins("a2", "Customer", ["email": "a@x", "name": "second"], ["orders": ["o2", "o3"], "profile": ["p2"], "groups": ["g1", "g2"]]),
            ins("c1", "Customer", ["email": "c@x"], ["referrer": ["a3"]]),
            ins("a3", "Customer", ["email": "a@x"], ["profile": ["p3"], "referrer": ["a2"]]),
            ins("b2", "Customer", ["email": "b@x"], ["profile": ["p4"]]),
            ins("n1", "Customer", ["name": "no email"]), ins("n2", "Customer", ["name": "no email"]),
            ins("o1", "Order", ["number": "1"]), ins("o2", "Order", ["number": "2"]), ins("o3", "Order", ["number": "3"]),
            ins("p1", "Profile", ["bio": "b1"]), ins("p2", "Profile", ["bio": "a2"]), ins("p3", "Profile", ["bio": "a3"]), ins("p4", "Profile", ["bio": "b2"]),
            ins("g1", "Group", ["label": "g1"]), ins("g2", "Group", ["label": "g2"]),
            ins("i1", "Invoice", ["amount": .double(1)], ["billTo": ["a2"]]),
            ins("w1", "Watchlist", ["label": "w"], ["watched": ["a3", "b2", "c1"]]),
        ])
        let before = s.currentToken
        let report = try await s.deduplicate(entity: "Customer", uniqueKey: ["email"], batchSize: 1, author: "dedup")
        XCTAssertEqual(report.groups, 2)
        XCTAssertEqual(report.winners, [ids["a1"]!: [ids["a2"]!, ids["a3"]!], ids["b1"]!: [ids["b2"]!]])
        XCTAssertEqual(report.removed, [ids["a2"]!, ids["a3"]!, ids["b2"]!])
        XCTAssertEqual(report.token.generation, before.generation + 3, "batchSize 1: one save per loser")
        let h = try await s.history(after: before)
        XCTAssertTrue(h.transactions.allSatisfy { $0.author == "dedup" && $0.contextName == "deduplicate" })

        let byID = Dictionary(uniqueKeysWithValues: try await s.dump().objects.map { ($0.id, $0) })
        func rel(_ t: String, _ r: String) -> Set<ObjectID> { Set(byID[ids[t]!]?.relationships[r] ?? []) }
        for t in ["a2", "a3", "b2"] { XCTAssertNil(byID[ids[t]!]) }
        // the winner took every order and group of its losers; it had no profile, so it took the oldest loser's
        XCTAssertEqual(rel("a1", "orders"), Set(["o1", "o2", "o3"].map { ids[$0]! }))
        XCTAssertEqual(rel("a1", "groups"), Set(["g1", "g2"].map { ids[$0]! }))
        XCTAssertEqual(rel("a1", "profile"), [ids["p2"]!])
        XCTAssertEqual(rel("g2", "members"), [ids["a1"]!])
        XCTAssertNil(byID[ids["p3"]!], "a loser's own profile follows its delete rule (cascade) when the winner keeps one")
        XCTAssertEqual(rel("b1", "profile"), [ids["p1"]!])
        XCTAssertNil(byID[ids["p4"]!])
        // references without an inverse are re-pointed to the winner
        XCTAssertEqual(rel("c1", "referrer"), [ids["a1"]!])
        XCTAssertEqual(rel("i1", "billTo"), [ids["a1"]!])
        XCTAssertEqual(rel("w1", "watched"), Set(["a1", "b1", "c1"].map { ids[$0]! }))
        XCTAssertNotNil(byID[ids["n1"]!]); XCTAssertNotNil(byID[ids["n2"]!])  // nil keys are never duplicates
        // running again finds nothing
        let again = try await s.deduplicate(entity: "Customer", uniqueKey: ["email"])
        XCTAssertEqual(again.groups, 0)
        XCTAssertEqual(again.token, s.currentToken)
        let e = await queryError { _ = try await s.deduplicate(entity: "Customer", uniqueKey: ["mail"]) }
        XCTAssertEqual(e?.field, "uniqueKey")
        let problems = try await s.integrityCheck()
        XCTAssertEqual(problems, [])
    }

    func testDeduplicateByKeyPath() async throws {
        let s = try open(model: Self.catalog)
        let ids = try await insert(s, [
            ins("c1", "Customer", ["email": "x"]), ins("c2", "Customer", ["email": "y"]),
            ins("o1", "Order", ["number": "1", "total": .double(5)], ["customer": ["c1"]]),
            ins("o2", "Order", ["number": "2", "total": .double(5)], ["customer": ["c1"]]),
            ins("o3", "Order", ["number": "3", "total": .double(5)], ["customer": ["c2"]]),
            ins("o4", "Order", ["number": "4", "total": .double(6)], ["customer": ["c1"]]),
        ])
        // orders with the same customer e-mail and total
        let r = try await s.deduplicate(entity: "Order", uniqueKey: ["customer.email", "total"])
        XCTAssertEqual(r.winners, [ids["o1"]!: [ids["o2"]!]])
        let left = try await s.fetch({ var f = FetchRequest(entity: "Order"); f.resultType = .objectIDs; return f }())
        XCTAssertEqual(Set(left.objectIDs), Set(["o1", "o3", "o4"].map { ids[$0]! }))
    }
}
