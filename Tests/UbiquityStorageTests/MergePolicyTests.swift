import Foundation
import XCTest
@testable import UbiquityStorage

/// Each merge policy × (one-side change / both-sides change / deleted in store / uniqueness clash).
final class MergePolicyTests: StorageTestCase, @unchecked Sendable {
    /// A person read at version 1 by the client; then the store changes `age` (and maybe `name`).
    func setUpConflict(_ s: Store, storeChangesName: Bool) async throws -> (ObjectID, [String: StorageValue]) {
        let id = try await insert(s, "Person", ["name": "Orig", "age": 10, "email": "o@x"])
        let snap = try await s.object(id).values
        var change: [String: StorageValue] = ["age": 11]
        if storeChangesName { change["name"] = "Store" }
        _ = try await update(s, id, change, version: 1)
        return (id, snap)
    }

    func testOneSideChange() async throws {
        // client changes `name`; store changed only `age` since the client's read
        let expected: [MergePolicy: (name: StorageValue, age: StorageValue)?] = [
            .error: nil,
            .mergeByPropertyStoreTrump: ("Client", 11),
            .mergeByPropertyObjectTrump: ("Client", 11),
            .overwrite: ("Client", 10),
            .rollback: ("Orig", 11),
        ]
        for policy in MergePolicy.allCases {
            let s = try open(policy.rawValue)
            let (id, snap) = try await setUpConflict(s, storeChangesName: false)
            if let want = expected[policy]! {
                let r = try await update(s, id, ["name": "Client"], version: 1, policy: policy, snapshot: snap)
                XCTAssertEqual(r.resolvedConflicts.count, 1, "\(policy)")
                let o = try await s.object(id)
                XCTAssertEqual(o.values["name"], want.name, "\(policy) name")
                XCTAssertEqual(o.values["age"], want.age, "\(policy) age")
            } else {
                let e = await storageError { _ = try await update(s, id, ["name": "Client"], version: 1, policy: policy, snapshot: snap) }
                guard case .mergeConflict(let recs)? = e?.reason else { XCTFail("error policy must fail"); continue }
                XCTAssertEqual(recs.count, 1)
                XCTAssertEqual(recs[0].objectID, id)
                XCTAssertEqual(recs[0].clientVersion, 1)
                XCTAssertEqual(recs[0].storeVersion, 2)
                XCTAssertEqual(recs[0].storeValues["age"], 11)
                XCTAssertEqual(recs[0].clientSnapshot["age"], 10)
                XCTAssertEqual(recs[0].clientChanges["name"], "Client")
                let o = try await s.object(id)
                XCTAssertEqual(o.values["name"], "Orig", "nothing applied")
            }
        }
    }

    func testBothSidesChange() async throws {
        // both sides changed `name`; client also changes `email`
        let expected: [MergePolicy: (name: StorageValue, email: StorageValue, age: StorageValue)?] = [
            .error: nil,
            .mergeByPropertyStoreTrump: ("Store", "c@x", 11),
            .mergeByPropertyObjectTrump: ("Client", "c@x", 11),
            .overwrite: ("Client", "c@x", 10),
            .rollback: ("Store", "o@x", 11),
        ]
        for policy in MergePolicy.allCases {
            let s = try open(policy.rawValue)
            let (id, _) = try await setUpConflict(s, storeChangesName: true)
            // no snapshot sent: the engine uses the retained row version the client names
            if let want = expected[policy]! {
                _ = try await update(s, id, ["name": "Client", "email": "c@x"], version: 1, policy: policy)
                let o = try await s.object(id)
                XCTAssertEqual(o.values["name"], want.name, "\(policy) name")
                XCTAssertEqual(o.values["email"], want.email, "\(policy) email")
                XCTAssertEqual(o.values["age"], want.age, "\(policy) age")
                XCTAssertEqual(o.version, policy == .rollback ? 2 : 3)
            } else {
                let why = await reason { _ = try await update(s, id, ["name": "Client"], version: 1, policy: policy) }
                guard case .mergeConflict(let recs)? = why else { XCTFail("expected conflict"); continue }
                XCTAssertEqual(recs.first?.clientSnapshot["name"], "Orig", "snapshot reconstructed from the row version")
            }
        }
    }

    func testDeletedOnOneSide() async throws {
        for policy in MergePolicy.allCases {
            // store deleted the object the client updates
            let s = try open(policy.rawValue)
            let id = try await insert(s, "Person", ["name": "Gone"])
            _ = try await delete(s, id)
            let gen = s.currentToken.generation
            if policy == .error {
                let why = await reason { _ = try await update(s, id, ["name": "Back"], version: 1, policy: policy) }
                guard case .mergeConflict(let recs)? = why else { XCTFail("expected conflict"); continue }
                XCTAssertEqual(recs.first?.kind, .deletedInStore)
            } else {
                let r = try await update(s, id, ["name": "Back"], version: 1, policy: policy)
                XCTAssertEqual(r.skipped, [id], "\(policy): the store's delete wins")
                let o = try await s.objects([id])
                XCTAssertNil(o[0])
                XCTAssertEqual(r.token.generation, gen + 1)
            }
            // client deletes an object the store changed since the client read it
            let id2 = try await insert(s, "Person", ["name": "Changed"])
            _ = try await update(s, id2, ["age": 3], version: 1)
            let deleteWins: Bool? = [MergePolicy.error: nil, .mergeByPropertyStoreTrump: false, .rollback: false,
                                     .mergeByPropertyObjectTrump: true, .overwrite: true][policy]!
            if let deleteWins {
                _ = try await delete(s, id2, version: 1, policy: policy)
                let o = try await s.objects([id2])
                XCTAssertEqual(o[0] == nil, deleteWins, "\(policy)")
            } else {
                let why = await reason { _ = try await delete(s, id2, version: 1, policy: policy) }
                guard case .mergeConflict? = why else { XCTFail("expected conflict"); continue }
            }
        }
    }

    func testUniquenessClash() async throws {
        for policy in MergePolicy.allCases {
            let s = try open(policy.rawValue)
            let existing = try await insert(s, "Person", ["name": "Existing", "email": "same@x"])
            var r = SaveRequest()
            r.inserts = [InsertOperation(temporaryID: "n", entity: "Person", values: ["name": "Incoming", "email": "same@x", "age": 33])]
            r.mergePolicy = policy
            if policy == .error {
                let why = await reason { _ = try await s.save(r) }
                guard case .constraintConflict(let recs)? = why else { XCTFail("expected constraint conflict"); continue }
                XCTAssertEqual(recs.first?.objectID, existing)
                XCTAssertEqual(recs.first?.constraint, ["email"])
                XCTAssertEqual(recs.first?.temporaryID, "n")
                continue
            }
            let res = try await s.save(r)
            XCTAssertEqual(res.permanentIDs["n"], existing, "\(policy): upsert returns the existing ID")
            let o = try await s.object(existing)
            let want: (StorageValue, StorageValue) = switch policy {
            case .mergeByPropertyObjectTrump, .overwrite: ("Incoming", 33)
            case .mergeByPropertyStoreTrump: ("Existing", 33)   // store keeps its values, fills what it lacks
            default: ("Existing", .null)                         // rollback: store untouched
            }
            XCTAssertEqual(o.values["name"], want.0, "\(policy)")
            XCTAssertEqual(o.values["age"], want.1, "\(policy)")
            let n = try await s.objectIDs(entity: "Person").count
            XCTAssertEqual(n, 1)
        }
    }

    /// Issue 15 item 7: an object pointing at a clashing insert's temporary ID used to turn the
    /// clash into a validation failure (unknownTemporaryID); the clash is what the client must see.
    func testClashReportedWhenAnotherInsertPointsAtTheClashingObject() async throws {
        let s = try open()
        let existing = try await insert(s, "Person", ["name": "Existing", "email": "same@x"])
        var r = SaveRequest()
        r.inserts = [InsertOperation(temporaryID: "p", entity: "Person", values: ["name": "Incoming", "email": "same@x"]),
                     InsertOperation(temporaryID: "pp", entity: "Passport", values: ["number": "X1"], relationships: ["owner": [.temporary("p")]])]
        r.mergePolicy = .error
        let why = await reason { _ = try await s.save(r) }
        guard case .constraintConflict(let recs)? = why else { XCTFail("expected constraint conflict, got \(String(describing: why))"); return }
        XCTAssertEqual(recs.map(\.objectID), [existing])
        XCTAssertEqual(recs.first?.temporaryID, "p")
        let n = try await s.objectIDs(entity: "Passport").count
        XCTAssertEqual(n, 0, "nothing applied")
    }
}
