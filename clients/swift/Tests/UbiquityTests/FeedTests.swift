import Foundation
import GRPCCore
import Testing
import Ubiquity

/// The next committed transaction (skipping caught-up and progress events). Each event these tests
/// wait for holds one transaction (one save each), so taking events one at a time loses none.
func nextTransaction(_ feed: inout ChangeFeed.Iterator) async throws -> Ubiquity.Transaction {
    while let event = try await feed.next() {
        if !event.transactions.isEmpty {
            #expect(event.transactions.count == 1)
            return event.transactions[0]
        }
    }
    throw ServerError("the feed ended")
}

/// The change feed as an AsyncSequence: order, resume after a server restart, HISTORY_EXPIRED hook.
@Suite struct FeedTests {
    @Test func feedDeliversSavesInOrderWithValues() async throws {
        let f = try await Fixture.make()
        defer { Task { await f.close() } }
        var feed = f.store.changes(from: .now, includeValues: true).makeAsyncIterator()
        defer { feed.cancel() }
        #expect(try await feed.next()?.kind == .caughtUp)
        let r1 = try await f.store.save(inserts: [Insert("a", "Person", ["name": "Ann", "age": 30])], author: "tests")
        let ann = try #require(r1.permanentIDs["a"])
        _ = try await f.store.save(updates: [Update(ann, ["age": 31])])
        let t1 = try await nextTransaction(&feed)
        let t2 = try await nextTransaction(&feed)
        #expect(t1.generation == r1.generation && t2.generation == r1.generation + 1)
        #expect(t1.author == "tests")
        #expect(t1.changes.map(\.kind) == [.insert] && t1.changes.map(\.objectID) == [ann])
        #expect(t2.changes.first?.kind == .update && t2.changes.first?.values["age"]?.int == 31)
        #expect(feed.token == t2.token)
    }

    @Test func feedResumesFromItsLastTokenAfterAServerRestart() async throws {
        let server = try await Server().start()
        // Sessions outlive the restart (the server keeps them in its credentials database).
        let client = try UbiquityClient(
            target: server.target, credentials: .apiKey(try await makeApiKey(server), deviceID: "feed-tests"))
        defer { Task { await client.close() } }
        let store = try await client.openStore("feed")
        try await store.registerModel(personModel())
        var feed = store.changes(from: .now, reconnectFor: .seconds(60)).makeAsyncIterator()
        defer { feed.cancel() }
        _ = try await store.save(inserts: [Insert("a", "Person", ["name": "Ann"])])
        let before = try await nextTransaction(&feed)
        #expect(try await server.stop() == 0)
        // Same data directory, same port: the client's channel reconnects to the new process.
        try await server.start(port: server.port)
        let r = try await store.save(inserts: [Insert("b", "Person", ["name": "Bob"])])
        let after = try await nextTransaction(&feed)
        // Exactly the next transaction: nothing lost, nothing delivered twice.
        #expect(after.generation == before.generation + 1 && after.generation == r.generation)
        #expect(after.changes.map(\.objectID) == [r.permanentIDs["b"]])
        #expect(feed.reconnects >= 1)
        server.kill()
    }

    @Test func historyExpiredCallsTheHookWhichRebaselines() async throws {
        let f = try await Fixture.make()
        defer { Task { await f.close() } }
        let old = try await f.store.currentToken()
        _ = try await f.store.save(inserts: [Insert("a", "Person", ["name": "Ann"])])
        let trimmedAt = try #require(try await f.store.save(inserts: [Insert("b", "Person", ["name": "Bob"])]).token)
        try await f.store.deleteHistory(through: trimmedAt)
        let seen = Seen()
        let store = f.store
        var feed = store.changes(from: .token(old)) { error in
            seen.add(error)
            // A real cache would fetch everything at the current token here, then continue from it.
            let current = try #require(error.historyExpired?.currentToken)
            #expect(try await store.fetch("Person", at: current).objects.count == 2)
            return current
        }.makeAsyncIterator()
        defer { feed.cancel() }
        // The refused subscribe calls the hook; the feed goes on from the baseline's token.
        #expect(try await feed.next()?.kind == .caughtUp)
        let r = try await f.store.save(inserts: [Insert("c", "Person", ["name": "Cid"])])
        #expect(try await nextTransaction(&feed).generation == r.generation)
        let errors = seen.errors
        #expect(errors.count == 1)
        #expect(errors.first?.reason == "HISTORY_EXPIRED" && errors.first?.historyExpired?.currentToken == trimmedAt)
        #expect(errors.first?.historyExpired?.oldestRetainedToken != nil)
    }

    @Test func historyExpiredWithoutAHookEndsTheFeedWithTheError() async throws {
        let f = try await Fixture.make()
        defer { Task { await f.close() } }
        let old = try await f.store.currentToken()
        let saved = try await f.store.save(inserts: [Insert("a", "Person", ["name": "Ann"])])
        try await f.store.deleteHistory(through: try #require(saved.token))
        var feed = f.store.changes(from: .token(old)).makeAsyncIterator()
        let error = await #expect(throws: UbiquityError.self) { _ = try await feed.next() }
        #expect(error?.kind == .historyExpired && error?.historyExpired?.currentToken != nil)
    }
}

final class Seen: Sendable {
    private let list = Synchronization.Mutex<[UbiquityError]>([])
    func add(_ e: UbiquityError) { list.withLock { $0.append(e) } }
    var errors: [UbiquityError] { list.withLock { $0 } }
}

import Synchronization
