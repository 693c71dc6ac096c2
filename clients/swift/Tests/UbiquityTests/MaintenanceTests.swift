import Foundation
import Testing
import Ubiquity

/// Seed, Deduplicate and ReplaceStore against a real ubiquityd.
@Suite(.timeLimit(.minutes(2))) struct MaintenanceTests {
    @Test func aSeedAppliesOnceEver() async throws {
        let f = try await Fixture.make()
        defer { Task { await f.close() } }
        let people = [Insert("ann", "Person", ["name": "Ann"]), Insert("bob", "Person", ["name": "Bob"])]
        let first = try await f.store.seed("starter-people-v1", people, author: "seeder")
        #expect(first.applied && first.permanentIDs.count == 2)
        let again = try await f.store.seed("starter-people-v1", people)
        #expect(!again.applied && again.permanentIDs == first.permanentIDs && again.token == first.token)
        #expect(try await f.store.fetch("Person", resultType: .count).count == 2)
        #expect(try await f.store.currentToken() == first.token)
    }

    @Test func deduplicateKeepsOneObjectPerKey() async throws {
        let f = try await Fixture.make()
        defer { Task { await f.close() } }
        try await f.store.batchInsert("Person", [["name": "Ann"], ["name": "Ann"], ["name": "Ann"], ["name": "Bob"]])
        let result = try await f.store.deduplicate("Person", uniqueKey: ["name"])
        #expect(result.groups == 1 && result.removed == 2)
        #expect(result.details.count == 1 && result.details.first?.removed.count == 2)
        let left = try await f.store.fetch("Person", sort: [.ascending("name")])
        #expect(left.objects.map { $0["name"]?.string } == ["Ann", "Bob"])
        #expect(left.objects.first?.id == result.details.first?.winner)
        #expect(try await f.store.currentToken() == result.token)
    }

    @Test func replaceTakesTheSourcesContentsAndEndsTheOldEpoch() async throws {
        let f = try await Fixture.make()
        defer { Task { await f.close() } }
        try await f.store.batchInsert("Person", [["name": "Old"]])
        let old = try await f.store.currentToken()
        let source = try await f.client.openStore("source-\(UUID().uuidString)")
        try await source.registerModel(personModel())
        try await source.batchInsert("Person", [["name": "New 1"], ["name": "New 2"]])
        let token = try await f.store.replace(with: source)
        #expect(try await f.store.currentToken() == token)
        let now = try await f.store.fetch("Person", sort: [.ascending("name")])
        #expect(now.objects.map { $0["name"]?.string } == ["New 1", "New 2"])
        #expect(try await source.fetch("Person", resultType: .count).count == 2)
        let e = await #expect(throws: UbiquityError.self) { try await f.store.fetch("Person", at: old) }
        #expect(e?.kind == .generationExpired, "\(String(describing: e))")
    }
}
