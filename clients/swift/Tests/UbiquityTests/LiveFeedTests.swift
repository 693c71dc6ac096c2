import Foundation
import Testing
@testable import Ubiquity

/// The feed's next event of the kind `pick` decodes, skipping the others (caught-up, progress);
/// a failure naming `what` if the feed ends or none comes in time.
func nextTyped<T>(
    _ feed: inout ChangeFeed.Iterator, _ what: String, within: Duration = feedEventDeadline, _ pick: (FeedEvent) -> T?
) async throws -> T {
    let deadline = ContinuousClock.now + within
    while true {
        let event = try await nextEvent(&feed, what, within: max(.zero, deadline - .now))
        if let value = pick(event) { return value }
    }
}

/// What the feeds carry beyond names: a store feed's relationships, tombstones and coalescing, a
/// live query's result set, and the account's key-value store — against a real ubiquityd.
@Suite(.timeLimit(.minutes(2))) struct LiveFeedTests {
    @Test func aStoreFeedCarriesRelationshipsAndTombstonesAndCoalesces() async throws {
        let f = try await Fixture.make()
        defer { Task { await f.close() } }
        let (store, ids) = try await QueryAndModelTests().notesStore(f)
        let start = try await store.currentToken()
        var feed = store.changes(from: .token(start), includeValues: true, includeTombstones: true).makeAsyncIterator()
        var coalesced = store.changes(from: .token(start), coalesceWindow: .milliseconds(100)).makeAsyncIterator()
        defer {
            feed.cancel()
            coalesced.cancel()
        }
        let note = try await store.save(inserts: [
            Insert("n", "Note", ["text": "four"], relationships: ["author": [.object(ids["cy"]!)]])
        ])
        let gone = try await store.save(deletes: [ids["dee"]!])
        let inserted = try await nextTransaction(&feed)
        #expect(inserted.changes.first?.relationships["author"] == [ids["cy"]!])
        #expect(inserted.changes.first?.values["text"] == "four")
        let deleted = try await nextTransaction(&feed)
        #expect(deleted.changes.first?.kind == .delete && deleted.changes.first?.tombstone["name"] == "Dee")
        #expect(deleted.changes.first?.tombstone["city"] == nil && deleted.generation == gone.generation)
        // Coalesced: the same transactions, in order, each once (however they were grouped).
        var generations: [Int64] = []
        while generations.count < 2 {
            let event = try await nextEvent(&coalesced, "coalesced transactions")
            generations += event.transactions.map(\.generation)
        }
        #expect(generations == [note.generation, gone.generation])
        // A window past the server's bound ends the feed, typed.
        var tooLong = store.changes(coalesceWindow: .seconds(20)).makeAsyncIterator()
        defer { tooLong.cancel() }
        let refused = await #expect(throws: UbiquityError.self) { _ = try await nextEvent(&tooLong, "the refusal") }
        #expect(refused?.code == .invalidArgument && refused?.reason == "LIMIT_EXCEEDED")
    }

    @Test func aLiveQueryReportsWhatEntersChangesInsideAndLeaves() async throws {
        let f = try await Fixture.make()
        defer { Task { await f.close() } }
        let start = try await f.store.currentToken()
        var adults = f.store.liveQuery("Person", where: "age >= $min", ["min": 18], from: .token(start), includeValues: true)
            .makeAsyncIterator()
        defer { adults.cancel() }

        let saved = try await f.store.save(inserts: [
            Insert("ann", "Person", ["name": "Ann", "age": 30]), Insert("kid", "Person", ["name": "Kid", "age": 5]),
        ])
        let ann = saved.permanentIDs["ann"]!
        let entered = try await nextTyped(&adults, "Ann entering") { $0.liveQuery }
        #expect(entered.entered.map(\.objectID) == [ann] && entered.changed.isEmpty && entered.left.isEmpty)
        #expect(entered.entered.first?.object?["name"] == "Ann" && entered.generation == saved.generation)

        // A change to a member, one to a non-member (no update: the token moves past it), and one
        // taking the member out.
        _ = try await f.store.save(updates: [Update(ann, ["age": 31])])
        let changed = try await nextTyped(&adults, "Ann changing") { $0.liveQuery }
        #expect(changed.changed.map(\.objectID) == [ann] && changed.changed.first?.object?["age"]?.int == 31)
        _ = try await f.store.save(updates: [Update(saved.permanentIDs["kid"]!, ["age": 6])])
        let out = try await f.store.save(updates: [Update(ann, ["age": 10])])
        let left = try await nextTyped(&adults, "Ann leaving") { $0.liveQuery }
        #expect(left.left == [ann] && left.entered.isEmpty && left.changed.isEmpty)
        #expect(left.generation == out.generation && left.token == adults.token)

        // A predicate that does not check ends the feed with the query layer's error.
        var bad = f.store.liveQuery("Person", where: "age >").makeAsyncIterator()
        defer { bad.cancel() }
        let refused = await #expect(throws: UbiquityError.self) { _ = try await nextEvent(&bad, "the refusal") }
        #expect(refused?.code == .invalidArgument && refused?.reason == "PREDICATE_SYNTAX")
    }

    @Test func theKeyValueFeedSyncsFromTheOldestThenGoesLiveAndResumes() async throws {
        let f = try await Fixture.make()
        defer { Task { await f.close() } }
        let kv = f.client.keyValues
        _ = try await kv.set("theme", Data("dark".utf8), author: "phone")
        var feed = kv.changes(from: .oldest).makeAsyncIterator()
        defer { feed.cancel() }
        let sync = try await nextTyped(&feed, "the initial sync") { $0.keyValueChange }
        #expect(sync.reason == .initialSync && sync.key == "theme" && sync.value == Data("dark".utf8))
        #expect(try await nextEvent(&feed, "caught-up").kind == .caughtUp)

        let version = try await kv.set("font", Data("serif".utf8), author: "laptop")
        let set = try await nextTyped(&feed, "the font set") { $0.keyValueChange }
        #expect(set == KeyValueChange(
            reason: .serverChange, key: "font", value: Data("serif".utf8), version: version, deleted: false, author: "laptop"))
        let resumeFrom = try #require(feed.token)
        #expect(try await kv.delete("theme", author: "laptop"))
        let deleted = try await nextTyped(&feed, "the theme delete") { $0.keyValueChange }
        #expect(deleted.key == "theme" && deleted.deleted && deleted.value.isEmpty)

        // A new feed from the token resumes after the set: the delete and nothing before it;
        // one excluding the laptop's changes skips it.
        var resumed = kv.changes(from: .token(resumeFrom)).makeAsyncIterator()
        defer { resumed.cancel() }
        let again = try await nextTyped(&resumed, "the delete, resumed") { $0.keyValueChange }
        #expect(again.key == "theme" && again.deleted)
        var others = kv.changes(from: .token(resumeFrom), excludeAuthors: ["laptop"]).makeAsyncIterator()
        defer { others.cancel() }
        _ = try await kv.set("lang", Data("nb".utf8), author: "phone")
        let fromPhone = try await nextTyped(&others, "the phone's change") { $0.keyValueChange }
        #expect(fromPhone.key == "lang" && fromPhone.author == "phone")
    }
}
