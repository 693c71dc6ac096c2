import Foundation
import GRPCCore
import Testing
import Ubiquity

/// Batch writes, DestroyStore and the key-value store against a real ubiquityd.
@Suite(.timeLimit(.minutes(2))) struct BatchAndKeyValueTests {
    @Test func batchInsertUpdateDeleteEachWriteOneTransaction() async throws {
        let f = try await Fixture.make()
        defer { Task { await f.close() } }
        let before = try await f.store.currentToken()
        let inserted = try await f.store.batchInsert(
            "Person", [["name": "Ann", "age": 30], ["name": "Bob", "age": 40], ["name": "Cid", "age": 50]],
            author: "importer", returnObjectIDs: true)
        #expect(inserted.count == 3 && inserted.objectIDs.count == 3)
        let updated = try await f.store.batchUpdate("Person", where: "age >= $min", ["min": 40], set: ["score": 1.5])
        #expect(updated.count == 2)
        let deleted = try await f.store.batchDelete("Person", ids: [inserted.objectIDs[0]])
        #expect(deleted.count == 1)
        let left = try await f.store.fetch("Person", sort: [.ascending("name")])
        #expect(left.objects.map { $0["name"]?.string } == ["Bob", "Cid"])
        #expect(left.objects.map { $0["score"]?.double } == [1.5, 1.5])
        // One generation per batch, in order, each in the history the feed reads.
        var feed = f.store.changes(from: .token(before)).makeAsyncIterator()
        defer { feed.cancel() }
        // Read from history, the three may come in one event.
        var txs: [Ubiquity.Transaction] = []
        while txs.count < 3 { txs += try await nextEvent(&feed, "transaction of the batches").transactions }
        let (t1, t2, t3) = (txs[0], txs[1], txs[2])
        #expect(txs.count == 3)
        #expect([t1.token, t2.token, t3.token] == [inserted.token, updated.token, deleted.token])
        #expect(t1.author == "importer" && t1.changes.count == 3 && t3.changes.map(\.kind) == [.delete])
        let all = try await f.store.batchDelete("Person")
        #expect(all.count == 2)
        #expect(try await f.store.fetch("Person", resultType: .count).count == 0)
    }

    @Test func aBatchWithABadPredicateIsRefusedAndChangesNothing() async throws {
        let f = try await Fixture.make()
        defer { Task { await f.close() } }
        try await f.store.batchInsert("Person", [["name": "Ann"]])
        let token = try await f.store.currentToken()
        let e = await #expect(throws: UbiquityError.self) {
            try await f.store.batchUpdate("Person", where: "age >", set: ["age": 1])
        }
        #expect(e?.kind == .invalidArgument && e?.reason == "PREDICATE_SYNTAX")
        #expect(try await f.store.currentToken() == token)
    }

    @Test func aUniquenessClashFailsABatchUnlessItUpserts() async throws {
        let f = try await Fixture.make()
        defer { Task { await f.close() } }
        try await f.store.batchInsert("Person", [["name": "Ann", "email": "ann@example.com"]])
        let clash = await #expect(throws: UbiquityError.self) {
            try await f.store.batchInsert("Person", [["name": "Other Ann", "email": "ann@example.com"]])
        }
        #expect(clash?.code == .aborted || clash?.code == .alreadyExists || clash?.code == .failedPrecondition, "\(String(describing: clash))")
        try await f.store.batchInsert("Person", [["name": "Ann B.", "email": "ann@example.com"]], upsert: true)
        let people = try await f.store.fetch("Person")
        #expect(people.objects.map { $0["name"]?.string } == ["Ann B."])
    }

    @Test func aDestroyedStoreIsGone() async throws {
        let f = try await Fixture.make()
        defer { Task { await f.close() } }
        try await f.store.batchInsert("Person", [["name": "Ann"]])
        try await f.store.destroy()
        let e = await #expect(throws: UbiquityError.self) { try await f.store.fetch("Person") }
        #expect(e?.kind == .notFound && e?.reason == "STORE_NOT_FOUND")
        #expect(try await f.client.listStores().contains { $0.id == f.store.id } == false)
    }

    @Test func keyValuesSetGetListDeleteWithCompareAndSet() async throws {
        let f = try await Fixture.make()
        defer { Task { await f.close() } }
        let kv = f.client.keyValues
        #expect(try await kv.get("prefs.theme") == nil)
        let v1 = try await kv.set("prefs.theme", Data("dark".utf8), if: .absent, author: "laptop")
        #expect(v1 == 1)
        let got = try #require(try await kv.get("prefs.theme"))
        #expect(got.value == Data("dark".utf8) && got.version == 1 && got.author == "laptop" && got.valueSize == 4)
        // A write against a version someone else already replaced changes nothing.
        let v2 = try await kv.set("prefs.theme", Data("light".utf8), if: .version(v1))
        let stale = await #expect(throws: UbiquityError.self) {
            try await kv.set("prefs.theme", Data("blue".utf8), if: .version(v1))
        }
        #expect(stale?.kind == .keyVersionConflict && stale?.code == .aborted)
        #expect(stale?.keyValueConflict?.exists == true && stale?.keyValueConflict?.currentVersion == v2)
        #expect(try await kv.get("prefs.theme")?.value == Data("light".utf8))
        let created = await #expect(throws: UbiquityError.self) {
            try await kv.set("prefs.theme", Data("x".utf8), if: .absent)
        }
        #expect(created?.kind == .keyVersionConflict)
        try await kv.set("prefs.font", Data("mono".utf8))
        try await kv.set("other", Data())
        // Pages of one entry: list reads them all, in key order.
        let prefs = try await kv.list(prefix: "prefs.", keysOnly: true, pageSize: 1)
        #expect(prefs.map(\.key) == ["prefs.font", "prefs.theme"] && prefs.allSatisfy { $0.value.isEmpty })
        #expect(prefs.map(\.valueSize) == [4, 5])
        #expect(try await kv.delete("prefs.theme", if: .version(v2)))
        #expect(try await kv.delete("prefs.theme") == false)
        #expect(try await kv.list().map(\.key) == ["other", "prefs.font"])
        let bad = await #expect(throws: UbiquityError.self) { try await kv.set("a/b", Data()) }
        #expect(bad?.kind == .invalidArgument && bad?.reason == "BAD_KEY")
    }
}
