import Foundation
import GRPCCore
import Testing
import Ubiquity

/// Sign-in with an API key against a server with authentication on (docs/accounts.md): typed
/// refusals, a short session renewed without the caller noticing, sign-out, and a change feed
/// that outlives the end of its session without a gap.
@Suite struct AuthTests {
    @Test func aBadApiKeyIsRefusedAsBadCredentials() async throws {
        let server = try await Server().start()
        defer { server.kill() }
        let client = try UbiquityClient(
            target: server.target, credentials: .apiKey("ubk_0123456789abcdef.notTheSecret", deviceID: "swift-tests"))
        defer { Task { await client.close() } }
        let signIn = await #expect(throws: UbiquityError.self) { try await client.signIn() }
        #expect(signIn?.code == .unauthenticated && signIn?.kind == .badCredentials && signIn?.reason == "BAD_CREDENTIALS")
        // A data call signs in first and fails the same way; nothing was created.
        let open = await #expect(throws: UbiquityError.self) { try await client.openStore("never") }
        #expect(open?.kind == .badCredentials)
        #expect(await client.signIns == 0)
        let good = try UbiquityClient(target: server.target, credentials: .apiKey(try await makeApiKey(server), deviceID: "d"))
        defer { Task { await good.close() } }
        #expect(try await good.listStores().isEmpty)
    }

    @Test func aCallWithoutCredentialsIsMissingCredentials() async throws {
        let server = try await Server().start()
        defer { server.kill() }
        let client = try UbiquityClient(target: server.target)
        defer { Task { await client.close() } }
        let e = await #expect(throws: UbiquityError.self) { try await client.listStores() }
        #expect(e?.code == .unauthenticated && e?.kind == .missingCredentials)
    }

    @Test func signInNamesTheAccount() async throws {
        let f = try await Fixture.make()
        defer { Task { await f.close() } }
        #expect(await f.client.accountID == "default")
        #expect(await f.client.signIns == 1)
    }

    @Test func aShortSessionIsRenewedWithoutTheCallerNoticing() async throws {
        let f = try await Fixture.make(serverOptions: ["--session-lifetime-seconds", "2"])
        defer { Task { await f.close() } }
        // Saves go on across several session lifetimes; every one succeeds and is stored once.
        var saved = 0
        try await pollUntil("three sessions", timeout: .seconds(30)) { () -> Bool? in
            _ = try await f.store.save(inserts: [Insert("p", "Person", ["name": .string("P\(saved)")])])
            saved += 1
            return await f.client.signIns >= 3 ? true : nil
        }
        #expect(try await f.store.fetch("Person", resultType: .count).count == Int64(saved))
    }

    @Test func signOutEndsTheSessionAndTheNextCallSignsInAgain() async throws {
        let f = try await Fixture.make()
        defer { Task { await f.close() } }
        let ctx = try await f.store.context(name: "before-sign-out")
        try await f.client.signOut()
        // The session's contexts closed with it (SPEC §4.4); the client itself carries on.
        let closed = await #expect(throws: UbiquityError.self) { try await ctx.refreshState() }
        #expect(closed?.kind == .notFound)
        #expect(try await f.client.listStores().map(\.id) == [f.store.id])
        #expect(await f.client.signIns == 2)
    }

    @Test func aFeedSurvivesItsSessionExpiringWithoutAGap() async throws {
        let f = try await Fixture.make(
            serverOptions: ["--session-lifetime-seconds", "2", "--feed-progress-interval-ms", "50"])
        defer { Task { await f.close() } }
        var feed = f.store.changes(from: .now).makeAsyncIterator()
        defer { feed.cancel() }
        // One save at a time, each read back from the feed, until the feed's first session has
        // ended (SESSION_EXPIRED) and it has resubscribed with a new one at least once.
        let first = try await f.store.save(inserts: [Insert("a", "Person", ["name": "A"])])
        var last = try await nextTransaction(&feed)
        #expect(last.generation == first.generation)
        try await pollUntil("the feed resubscribes with a new session", timeout: .seconds(30)) { () -> Bool? in
            let r = try await f.store.save(inserts: [Insert("a", "Person", ["name": "A"])])
            let tx = try await nextTransaction(&feed)
            // Exactly the next generation: nothing skipped or repeated across the session's end.
            #expect(tx.generation == last.generation + 1 && tx.generation == r.generation)
            last = tx
            return feed.reconnects >= 1 ? true : nil
        }
        let r = try await f.store.save(inserts: [Insert("z", "Person", ["name": "Z"])])
        let tx = try await nextTransaction(&feed)
        #expect(tx.generation == last.generation + 1 && tx.changes.map(\.objectID) == [r.permanentIDs["z"]])
    }

    @Test func aFeedSurvivesSignOut() async throws {
        let f = try await Fixture.make()
        defer { Task { await f.close() } }
        var feed = f.store.changes(from: .now).makeAsyncIterator()
        defer { feed.cancel() }
        let a = try await f.store.save(inserts: [Insert("a", "Person", ["name": "A"])])
        let first = try await nextTransaction(&feed)
        #expect(first.generation == a.generation)
        // Sign-out ends the stream at once with SESSION_REVOKED; the feed signs in again.
        try await f.client.signOut()
        let b = try await f.store.save(inserts: [Insert("b", "Person", ["name": "B"])])
        let tx = try await nextTransaction(&feed)
        #expect(tx.generation == a.generation + 1 && tx.generation == b.generation)
        #expect(feed.reconnects >= 1)
    }

    @Test func aServerWithoutAuthStillWorksWithoutCredentials() async throws {
        let server = try await Server(options: ["--auth", "off"]).start()
        defer { server.kill() }
        let client = try UbiquityClient(target: server.target)
        defer { Task { await client.close() } }
        let store = try await client.openStore("open")
        try await store.registerModel(personModel())
        let ids = try await addPeople(store, [["name": "Ann"]])
        #expect(try await store.get(ids)[ids[0]]?["name"]?.string == "Ann")
    }
}
