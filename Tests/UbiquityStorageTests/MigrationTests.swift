import Foundation
import XCTest
@testable import UbiquityStorage

final class MigrationTests: StorageTestCase, @unchecked Sendable {
    /// A store with data: 2 departments, 3 employees, friends, a passport, notes.
    func seeded(_ name: String) async throws -> (Store, [String: ObjectID]) {
        let s = try open(name)
        var r = SaveRequest()
        r.inserts = [
            InsertOperation(temporaryID: "d1", entity: "Department", values: ["title": "A"]),
            InsertOperation(temporaryID: "d2", entity: "Department", values: ["title": "B"]),
            InsertOperation(temporaryID: "e1", entity: "Employee", values: ["name": "Ann", "email": "ann@x"], relationships: ["department": [.temporary("d1")]]),
            InsertOperation(temporaryID: "e2", entity: "Employee", values: ["name": "Bob"], relationships: ["department": [.temporary("d1")], "friends": [.temporary("e1")]]),
            InsertOperation(temporaryID: "p1", entity: "Person", values: ["name": "Cy", "age": 40], relationships: ["passport": [.temporary("pp")]]),
            InsertOperation(temporaryID: "pp", entity: "Passport", values: ["number": "N1"]),
            InsertOperation(temporaryID: "n1", entity: "Note", values: ["text": "hello", "n": 1]),
            InsertOperation(temporaryID: "n2", entity: "Note", values: ["text": "hello", "n": 2]),
        ]
        let res = try await s.save(r)
        _ = try await update(s, res.permanentIDs["n1"]!, ["n": 5])  // leaves an old row version behind
        return (s, res.permanentIDs)
    }

    func edit(_ body: (inout [EntityDefinition]) -> Void) -> ModelDefinition {
        var m = Fixtures.model
        body(&m.entities)
        m.versionIdentifier = "2"
        return m
    }

    func idx(_ es: [EntityDefinition], _ n: String) -> Int { es.firstIndex { $0.name == n }! }

    func indexSQL(_ s: Store) async throws -> [String] {
        try await s.read { ctx in try ctx.rows("SELECT name || ': ' || sql FROM sqlite_schema WHERE type = 'index' AND sql IS NOT NULL").compactMap {
            if case .string(let v) = $0[0] { return v }; return nil
        } }
    }

    /// Every inferable change applies to a store holding data, keeps the data, and the store stays writable.
    func testInferableChanges() async throws {
        let cases: [(String, ModelDefinition, (Store, [String: ObjectID]) async throws -> Void)] = [
            ("add entity", edit { $0.append(EntityDefinition(name: "Tag", attributes: [AttributeDefinition(name: "label", type: .string)])) }, { s, _ in
                try await self.insert(s, "Tag", ["label": "x"])
            }),
            ("remove entity", edit { es in es.remove(at: self.idx(es, "Note")) }, { s, _ in
                let d = try await s.dump()
                XCTAssertFalse(d.objects.contains { $0.id.entity == "Note" })
            }),
            ("add optional attribute", edit { es in es[self.idx(es, "Note")].attributes.append(AttributeDefinition(name: "extra", type: .string)) }, { s, ids in
                let o = try await s.object(ids["n1"]!); XCTAssertEqual(o.values["extra"], .null); XCTAssertEqual(o.values["n"], 5)
            }),
            ("add defaulted required attribute", edit { es in es[self.idx(es, "Note")].attributes.append(AttributeDefinition(name: "prio", type: .int32, optional: false, defaultValue: 3)) }, { s, ids in
                let o = try await s.object(ids["n2"]!); XCTAssertEqual(o.values["prio"], 3)
            }),
            ("remove attribute", edit { es in es[self.idx(es, "Person")].attributes.removeAll { $0.name == "photo" } }, { s, ids in
                let o = try await s.object(ids["p1"]!); XCTAssertNil(o.values["photo"]); XCTAssertEqual(o.values["age"], 40)
            }),
            ("rename attribute", edit { es in
                let i = self.idx(es, "Note"); let j = es[i].attributes.firstIndex { $0.name == "text" }!
                es[i].attributes[j].name = "body"; es[i].attributes[j].renamingIdentifier = "text"
            }, { s, ids in
                let o = try await s.object(ids["n1"]!); XCTAssertEqual(o.values["body"], "hello"); XCTAssertNil(o.values["text"])
            }),
            ("rename entity", edit { es in
                let i = self.idx(es, "Note"); es[i].name = "Memo"; es[i].renamingIdentifier = "Note"
            }, { s, ids in
                let memos = try await s.objectIDs(entity: "Memo"); XCTAssertEqual(memos.count, 2)
                XCTAssertEqual(memos.map(\.pk).sorted(), [ids["n1"]!.pk, ids["n2"]!.pk].sorted(), "object pks survive")
            }),
            ("optional to required with default", edit { es in
                let i = self.idx(es, "Person"); let j = es[i].attributes.firstIndex { $0.name == "age" }!
                es[i].attributes[j].optional = false; es[i].attributes[j].defaultValue = 18
            }, { s, ids in
                let ann = try await s.object(ids["e1"]!); XCTAssertEqual(ann.values["age"], 18)
                let cy = try await s.object(ids["p1"]!); XCTAssertEqual(cy.values["age"], 40)
            }),
            ("required to optional", edit { es in
                let i = self.idx(es, "Department"); es[i].attributes[0].optional = true
            }, { s, _ in try await self.insert(s, "Department", [:]) }),
            ("add relationship", edit { es in
                es[self.idx(es, "Note")].relationships.append(RelationshipDefinition(name: "author", destination: "Person"))
            }, { s, ids in
                _ = try await self.update(s, ids["n1"]!, [:], rels: ["author": [.permanent(ids["p1"]!)]])
                let o = try await s.object(ids["n1"]!); XCTAssertEqual(o.relationships["author"], [ids["p1"]!])
            }),
            ("remove relationship", edit { es in
                es[self.idx(es, "Person")].relationships.removeAll { $0.name == "friends" }
            }, { s, ids in
                let o = try await s.object(ids["e1"]!); XCTAssertNil(o.relationships["friends"]); XCTAssertEqual(o.relationships["department"], [ids["d1"]!])
            }),
            ("to-one to to-many", edit { es in
                let i = self.idx(es, "Employee"); es[i].relationships[0].toMany = true   // department: many-to-many now
            }, { s, ids in
                let ann = try await s.object(ids["e1"]!); XCTAssertEqual(ann.relationships["department"], [ids["d1"]!])
                let d = try await s.object(ids["d1"]!); XCTAssertEqual(d.relationships["employees"], [ids["e1"]!, ids["e2"]!].sorted())
                _ = try await self.update(s, ids["e1"]!, [:], rels: ["department": [.permanent(ids["d1"]!), .permanent(ids["d2"]!)]])
                let d2 = try await s.object(ids["d2"]!); XCTAssertEqual(d2.relationships["employees"], [ids["e1"]!])
            }),
            ("add index", edit { es in es[self.idx(es, "Person")].indexes.append(["age"]) }, { s, _ in
                let sql = try await self.indexSQL(s)
                XCTAssertTrue(sql.contains { $0.contains("\"a_age\"") && $0.contains("ubq_ix_Person_1") }, "\(sql)")
            }),
            ("remove index", edit { es in es[self.idx(es, "Person")].indexes = [] }, { s, _ in
                let sql = try await self.indexSQL(s)
                XCTAssertFalse(sql.contains { $0.contains("ubq_ix_Person") }, "\(sql)")
            }),
            ("add uniqueness constraint", edit { es in es[self.idx(es, "Note")].uniquenessConstraints.append(["n"]) }, { s, _ in
                let why = await self.reason { try await self.insert(s, "Note", ["n": 2]) }
                guard case .constraintConflict? = why else { return XCTFail("constraint not enforced") }
            }),
        ]
        for (i, (name, model, check)) in cases.enumerated() {
            let (s, ids) = try await seeded("m\(i)")
            let oldToken = s.currentToken
            let preview = try await s.migrate(to: model, dryRun: true)
            XCTAssertFalse(preview.steps.isEmpty, "\(name): preview lists steps")
            XCTAssertEqual(s.modelVersionHash, Fixtures.model.versionHash, "\(name): dry run changes nothing")
            let report = try await s.migrate(to: model, backupPath: dir + "/m\(i).backup")
            XCTAssertEqual(s.modelVersionHash, model.versionHash, name)
            XCTAssertTrue(FileManager.default.fileExists(atPath: dir + "/m\(i).backup"), "\(name): backup left")
            XCTAssertNotNil(report.token)
            try await check(s, ids)
            let why = await reason { _ = try await s.dump(at: .token(oldToken)) }
            XCTAssertEqual(why, .generationExpired, "\(name): pre-migration tokens expire")
            let problems = try await s.integrityCheck()
            XCTAssertEqual(problems, [], name)
            // reopen with the stored model
            s.close()
            let again = try open("m\(i)", id: s.id, model: nil)
            XCTAssertEqual(again.modelVersionHash, model.versionHash)
            _ = try await again.dump()
        }
    }

    /// Every non-inferable change is refused with an explanation, and nothing changes.
    func testNonInferableChangesAreRefusedWithNothingChanged() async throws {
        let cases: [(String, ModelDefinition, String)] = [
            ("attribute type", edit { es in
                let i = self.idx(es, "Note"); let j = es[i].attributes.firstIndex { $0.name == "text" }!; es[i].attributes[j].type = .int64
            }, "changing the type"),
            ("new required attribute without default", edit { es in
                es[self.idx(es, "Note")].attributes.append(AttributeDefinition(name: "must", type: .string, optional: false))
            }, "needs a default"),
            ("optional to required without default (nulls exist)", edit { es in
                let i = self.idx(es, "Person"); let j = es[i].attributes.firstIndex { $0.name == "age" }!; es[i].attributes[j].optional = false
            }, "needs a default"),
            ("to-many to to-one", edit { es in
                let i = self.idx(es, "Department"); es[i].relationships[0].toMany = false
                let k = self.idx(es, "Employee"); es[k].relationships[0].toMany = true
            }, "to-many → to-one"),
            ("relationship destination", edit { es in
                es[self.idx(es, "Passport")].relationships[0].destination = "Employee"
                es[self.idx(es, "Person")].relationships.removeAll { $0.name == "passport" }
                es[self.idx(es, "Employee")].relationships.append(RelationshipDefinition(name: "passport", destination: "Passport", inverse: "owner"))
            }, "changing the destination"),
            ("parent entity", edit { es in es[self.idx(es, "Employee")].parent = nil
                es[self.idx(es, "Employee")].attributes += [AttributeDefinition(name: "name", type: .string)]
            }, "parent entity"),
            ("uniqueness constraint with duplicates", edit { es in es[self.idx(es, "Note")].uniquenessConstraints.append(["text"]) }, "duplicates"),
        ]
        for (i, (name, model, explanation)) in cases.enumerated() {
            let (s, _) = try await seeded("x\(i)")
            let before = try await s.dump()
            let hashBefore = s.modelVersionHash
            for dry in [true, false] {
                let e = await storageError { _ = try await s.migrate(to: model, dryRun: dry, backupPath: self.dir + "/x\(i)-\(dry).backup") }
                guard case .migrationNotInferable(let why)? = e?.reason else { XCTFail("\(name): not refused: \(String(describing: e))"); continue }
                XCTAssertTrue(why.joined().contains(explanation), "\(name): explanation \(why)")
            }
            XCTAssertEqual(s.modelVersionHash, hashBefore, name)
            let after = try await s.dump()
            XCTAssertEqual(after, before, "\(name): nothing changed")
            let old = try await s.dump(at: .token(before.token))
            XCTAssertEqual(old, before, "\(name): old tokens still valid")
        }
    }

    func testModelValidationAndStableHash() throws {
        let m = Fixtures.model
        XCTAssertEqual(m.versionHash, Fixtures.model.versionHash)
        XCTAssertEqual(m.versionHash.count, 64)
        var shuffled = m
        shuffled.entities.reverse()
        shuffled.versionIdentifier = "other"
        XCTAssertEqual(shuffled.versionHash, m.versionHash, "order and version identifier do not change the hash")
        var changed = m
        changed.entities[0].attributes[0].maximum = 99
        XCTAssertNotEqual(changed.versionHash, m.versionHash)
        // Fixed vector: stores record this hash, so it must never change (it was computed by the
        // in-house SHA-256 before swift-crypto replaced it; the same value proves them identical).
        XCTAssertEqual(m.versionHash, "c371e701e615f3f3d19a300b0f46c8076a2acb4fb588f01dfb23f5b9f2de4619")
        // JSON round trip (the CLI format)
        let json = try m.jsonData()
        XCTAssertEqual(try ModelDefinition.fromJSON(json), m)
        let minimal = #"{"entities":[{"name":"A","attributes":[{"name":"x","type":"int32","defaultValue":{"int":3}}]}]}"#
        let parsed = try ModelDefinition.fromJSON(Data(minimal.utf8))
        XCTAssertEqual(parsed.entities[0].attributes[0].defaultValue, .int(3))
        XCTAssertTrue(parsed.entities[0].attributes[0].optional)

        func issues(_ m: ModelDefinition) -> [ValidationIssue] { ResolvedModel.validate(m) }
        XCTAssertEqual(issues(ModelDefinition(entities: [EntityDefinition(name: "1bad")])).map(\.code), [.invalidName])
        XCTAssertEqual(issues(ModelDefinition(entities: [EntityDefinition(name: "A", parent: "Z")])).first?.message, "parent entity Z does not exist")
        let badInverse = ModelDefinition(entities: [
            EntityDefinition(name: "A", relationships: [RelationshipDefinition(name: "b", destination: "B", inverse: "a")]),
            EntityDefinition(name: "B", relationships: [RelationshipDefinition(name: "a", destination: "A", inverse: "other")]),
        ])
        XCTAssertFalse(issues(badInverse).isEmpty)
        let badDefault = ModelDefinition(entities: [EntityDefinition(name: "A", attributes: [AttributeDefinition(name: "x", type: .int16, defaultValue: .string("no"))])])
        XCTAssertEqual(issues(badDefault).first?.property, "x")
        let badIndex = ModelDefinition(entities: [EntityDefinition(name: "A", indexes: [["nope"]])])
        XCTAssertEqual(issues(badIndex).first?.property, "nope")
        XCTAssertThrowsError(try Store.open(path: dir + "/bad.sqlite", id: UUID(), model: badIndex))
    }

    /// Reader connections cache per-model read data (`ReadShapes`): after a migration the same
    /// connections must read with the new model (new and renamed columns), never the cached old one.
    func testBatchedReadsAfterMigrationUseTheNewModel() async throws {
        let (s, ids) = try await seeded("shapes")
        let notes = [ids["n1"]!, ids["n2"]!]
        // warm every reader connection's cache with the old model
        for _ in 0..<8 {
            let before = try await s.read { ctx in try ctx.objects(notes) }
            XCTAssertEqual(before.compactMap { $0?.values["text"] }, ["hello", "hello"])
        }
        _ = try await s.migrate(to: edit { es in
            let i = self.idx(es, "Note"); let j = es[i].attributes.firstIndex { $0.name == "text" }!
            es[i].attributes[j].name = "body"; es[i].attributes[j].renamingIdentifier = "text"
            es[i].attributes.append(AttributeDefinition(name: "prio", type: .int32, optional: false, defaultValue: 3))
        })
        for _ in 0..<8 {
            let after = try await s.read { ctx in try ctx.objects(notes) }
            XCTAssertEqual(after.compactMap { $0?.values["body"] }, ["hello", "hello"])
            XCTAssertEqual(after.compactMap { $0?.values["prio"] }, [3, 3])
            XCTAssertEqual(after.compactMap { $0?.values["n"] }, [5, 2])
            XCTAssertTrue(after.allSatisfy { $0?.values["text"] == nil })
        }
    }

    /// Inserts prepared off the writer against the model of before a migration are not used:
    /// the writer prepares them again with its model (with the old preparation, `body` would be
    /// an unknown property and `prio` would get no default).
    func testInsertsPreparedWithAnOldModelArePreparedAgain() async throws {
        let (s, _) = try await seeded("prepared")
        let old = try XCTUnwrap(s.state.withLock { $0.model })
        _ = try await s.migrate(to: edit { es in
            let i = self.idx(es, "Note"); let j = es[i].attributes.firstIndex { $0.name == "text" }!
            es[i].attributes[j].name = "body"; es[i].attributes[j].renamingIdentifier = "text"
            es[i].attributes.append(AttributeDefinition(name: "prio", type: .int32, optional: false, defaultValue: 3))
        })
        var r = SaveRequest()
        r.inserts = [InsertOperation(temporaryID: "n", entity: "Note", values: ["body": "new", "n": 9])]
        let stale = InsertPreparer.prepare(r, model: old, config: s.config)
        XCTAssertFalse(stale.inserts[0].issues.isEmpty)
        let res = try await s.save(r, prepared: stale)
        let id = try XCTUnwrap(res.permanentIDs["n"])
        let got = try await s.read { ctx in try ctx.objects([id]) }
        XCTAssertEqual(got.first??.values["body"], "new")
        XCTAssertEqual(got.first??.values["prio"], 3)
        XCTAssertEqual(got.first??.values["n"], 9)
    }

    /// Issue 15 item 8: default backup names had one-second resolution, so a second migration in
    /// the same second failed ("backup path exists"), and backups were never removed.
    func testOnlyDefaultBackupNamesArePruned() {
        let b = MigrationBackups(storePath: "/d/s.sqlite")
        for name in ["s.sqlite.pre-migration-00001764000000000000-g3", "s.sqlite.pre-migration-00001764000000000000-g3-2",
                     "s.sqlite.pre-migration-1764000000"] {
            XCTAssertTrue(b.isDefaultName(name), name)
        }
        // names a caller chose (RegisterModel's backup path) are never taken for ours
        for name in ["s.sqlite.pre-migration-before-v2", "s.sqlite.pre-migration-", "s.sqlite.pre-migration-12-g", "s.sqlite.pre-migration-12-x3",
                     "s.sqlite.pre-migration-12-g3-2-1", "s.sqlite.pre-migration-12-g3-x", "other.sqlite.pre-migration-12", "s.sqlite"] {
            XCTAssertFalse(b.isDefaultName(name), name)
        }
    }

    func testMigrationsInOneSecondGetDistinctBackupsAndOnlyTheNewestAreKept() async throws {
        let s = try open("b", configure: { $0.migrationBackupsKept = 3 })
        try await insert(s, "Note", ["n": 1])
        var backups: [String] = []
        for i in 0..<5 {
            // alternate between two models, each a real migration (add / remove an index)
            let model = i % 2 == 0 ? edit { es in es[self.idx(es, "Note")].indexes.append(["text"]) } : Fixtures.model
            let r = try await s.migrate(to: model)
            backups.append(try XCTUnwrap(r.backupPath, "migration \(i) took a backup"))
        }
        XCTAssertEqual(Set(backups).count, 5, "every backup has its own name")
        let left = MigrationBackups(storePath: dir + "/b.sqlite").list()
        XCTAssertEqual(left, Array(backups.suffix(3)), "the newest three are kept, oldest first")
        XCTAssertFalse(FileManager.default.fileExists(atPath: backups[0]))
    }
}
