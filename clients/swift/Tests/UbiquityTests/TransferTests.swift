import Foundation
import Testing
@testable import Ubiquity

/// FetchStream, ExportBaseline, ImportStore, GetModel, FetchHistory and FetchDeletions through
/// the Store API, against a real ubiquityd.
@Suite(.timeLimit(.minutes(2))) struct TransferTests {
    @Test func fetchStreamDeliversEveryBatchAtOneGeneration() async throws {
        let f = try await Fixture.make()
        defer { Task { await f.close() } }
        try await f.store.batchInsert("Person", (1...5).map { ["name": .string("P\($0)")] })
        let token = try await f.store.currentToken()
        var batches: [FetchResult] = []
        for try await batch in f.store.fetchStream(FetchRequest("Person", sort: [.ascending("name")]), batchSize: 2) {
            batches.append(batch)
        }
        #expect(batches.map(\.objects.count) == [2, 2, 1])
        #expect(batches.flatMap { $0.objects.map { $0["name"]?.string } } == ["P1", "P2", "P3", "P4", "P5"])
        #expect(batches.allSatisfy { $0.token == token })
        // Bad input fails the sequence with the server's typed error.
        let bad = await #expect(throws: UbiquityError.self) {
            for try await _ in f.store.fetchStream(FetchRequest("NoSuchEntity")) {}
        }
        #expect(bad?.code == .invalidArgument, "\(String(describing: bad))")
    }

    @Test func exportBaselineIsOneSnapshotToSubscribeFrom() async throws {
        let f = try await Fixture.make()
        defer { Task { await f.close() } }
        try await f.store.batchInsert("Person", (1...5).map { ["name": .string("P\($0)")] })
        let token = try await f.store.currentToken()
        var chunks: [BaselineChunk] = []
        for try await chunk in f.store.exportBaseline(batchSize: 2) { chunks.append(chunk) }
        #expect(chunks.flatMap(\.objects).count == 5 && chunks.allSatisfy { $0.token == token })
        #expect(chunks.last?.last == true && chunks.last?.total == 5 && chunks.dropLast().allSatisfy { !$0.last })
        // Subscribing from the baseline's token: the next save is the first change.
        var feed = f.store.changes(from: .token(try #require(chunks.first?.token))).makeAsyncIterator()
        defer { feed.cancel() }
        let r = try await f.store.save(inserts: [Insert("n", "Person", ["name": "New"])])
        #expect(try await nextTransaction(&feed).generation == r.generation)
    }

    @Test func importStoreCopiesAnotherStoresObjects() async throws {
        let f = try await Fixture.make()
        defer { Task { await f.close() } }
        let source = try await f.client.openStore("source-\(UUID().uuidString)")
        try await source.registerModel(personModel())
        let ids = try await addPeople(source, [["name": "Ann"], ["name": "Bob"]])
        let result = try await f.store.importStore(from: source, author: "importer")
        #expect(result.imported == 2 && Set(result.objectIDMap.keys) == Set(ids))
        #expect(try await f.store.currentToken() == result.token)
        let copied = try await f.store.get(Array(result.objectIDMap.values))
        #expect(copied.values.compactMap { $0["name"]?.string }.sorted() == ["Ann", "Bob"])
        #expect(try await source.fetch("Person", resultType: .count).count == 2)
    }

    @Test func modelIsTheRegisteredOneOrNil() async throws {
        let f = try await Fixture.make()
        defer { Task { await f.close() } }
        let registered = try await f.store.registerModel(personModel())  // already registered: unchanged
        let model = try #require(try await f.store.model())
        #expect(model.versionHash == registered.versionHash && model.model.entities.map(\.name) == ["Person"])
        let empty = try await f.client.openStore("empty-\(UUID().uuidString)")
        #expect(try await empty.model() == nil)
    }

    @Test func historyIsReadInPagesUntilItExpires() async throws {
        let f = try await Fixture.make()
        defer { Task { await f.close() } }
        let start = try await f.store.currentToken()
        var saves: [SaveResult] = []
        for name in ["A", "B", "C"] {
            saves.append(try await f.store.save(inserts: [Insert("p", "Person", ["name": .string(name)])]))
        }
        let first = try await f.store.history(after: start, pageSize: 2)
        #expect(first.transactions.map(\.generation) == saves.prefix(2).map(\.generation) && first.hasMore)
        let second = try await f.store.history(after: first.nextToken, pageSize: 2)
        #expect(second.transactions.map(\.generation) == [saves[2].generation] && !second.hasMore)
        #expect(second.currentToken == saves[2].token)
        // Trimmed history is refused, typed.
        try await f.store.deleteHistory(through: try #require(saves[1].token))
        let expired = await #expect(throws: UbiquityError.self) { try await f.store.history(after: start) }
        #expect(expired?.kind == .historyExpired && expired?.historyExpired?.currentToken == saves[2].token)
    }

    @Test func deletionsAreReadInPages() async throws {
        let f = try await Fixture.make()
        defer { Task { await f.close() } }
        let ids = try await addPeople(f.store, [["name": "A"], ["name": "B"], ["name": "C"], ["name": "D"]])
        let after = try await f.store.currentToken()
        _ = try await f.store.save(deletes: [ids[0], ids[1]])
        let last = try await f.store.save(deletes: [ids[2]])
        // One at a time: the second page starts inside the first transaction's deletions.
        var deleted: [DeletionsPage.Deleted] = []
        var page = try await f.store.deletions(after: after, pageSize: 1)
        deleted += page.deletions
        while page.hasMore {
            page = try await f.store.deletions(after: try #require(page.nextToken), pageSize: 1)
            deleted += page.deletions
        }
        #expect(deleted.count == 3 && Set(deleted.prefix(2).map(\.objectID)) == Set(ids[0...1]))
        #expect(deleted.last?.objectID == ids[2] && deleted.last?.generation == last.generation)
        #expect(deleted.allSatisfy { $0.entity == "Person" } && page.currentToken == last.token)
    }
}
