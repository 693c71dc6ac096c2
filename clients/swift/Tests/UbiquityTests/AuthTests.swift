import Foundation
import GRPCCore
import Testing
@testable import Ubiquity

/// Sign-in with an API key against a server with authentication on (docs/accounts.md): typed
/// refusals, a short session renewed without the caller noticing, sign-out, and a change feed
/// that outlives the end of its session without a gap.
@Suite(.timeLimit(.minutes(2))) struct AuthTests {
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

    @Test func aCallRefusedAsSessionExpiredIsSentOnceMoreWithANewSession() async throws {
        let swap = SendExpiredSessionOnce()
        let f = try await Fixture.make(serverOptions: ["--session-lifetime-seconds", "2"], interceptors: [swap])
        defer { Task { await f.close() } }
        // A session the server has seen expire: what a client whose clock runs behind would send.
        let other = try UbiquityClient(target: f.server.target, credentials: .apiKey(f.apiKey, deviceID: "other"))
        defer { Task { await other.close() } }
        try await other.signIn()
        let stale = try #require(await other.sessionToken())
        let probe = try UbiquityClient(target: f.server.target, credentials: .sessionToken(stale))
        defer { Task { await probe.close() } }
        try await pollUntil("the other session expires", timeout: .seconds(30)) { () -> Bool? in
            do { _ = try await probe.listStores(); return nil } catch let e as UbiquityError where e.kind == .sessionExpired {
                return true
            }
        }
        swap.arm(stale)
        // Refused as SESSION_EXPIRED, then sent again (without the swap) with a new session.
        #expect(try await f.client.listStores().map(\.id) == [f.store.id])
        #expect(swap.sent == 1)
    }

    @Test func signOutEndsTheSessionAndTheNextCallSignsInAgain() async throws {
        let f = try await Fixture.make()
        defer { Task { await f.close() } }
        let ctx = try await f.store.context(name: "before-sign-out")
        try await f.client.signOut()
        // The session's contexts closed with it (SPEC §4.4); the client itself carries on.
        let closed = await #expect(throws: UbiquityError.self) { try await ctx.refreshState() }
        // Reset by the sign-out's store transition after its chance to save (docs/lifecycle.md).
        #expect(closed?.kind == .failedPrecondition && closed?.reason == "STORE_CHANGED")
        #expect(try await f.client.listStores().map(\.id) == [f.store.id])
        #expect(await f.client.signIns == 2)
    }

    @Test func aRevokedKeyEndsTheSessionAndTheNextSignInFails() async throws {
        let f = try await Fixture.make()
        defer { Task { await f.close() } }
        try await revokeApiKey(f.server, f.apiKey)
        let revoked = await #expect(throws: UbiquityError.self) { try await f.client.listStores() }
        #expect(revoked?.kind == .sessionRevoked && revoked?.code == .unauthenticated)
        // Not retried with the same key silently: the next call signs in, and the key is gone.
        let signIn = await #expect(throws: UbiquityError.self) { try await f.client.listStores() }
        #expect(signIn?.kind == .badCredentials)
    }

    @Test func aFeedSurvivesItsSessionExpiringWithoutAGap() async throws {
        let f = try await Fixture.make(
            serverOptions: ["--session-lifetime-seconds", "2", "--feed-progress-interval-ms", "50"])
        defer { Task { await f.close() } }
        // From a token taken before the first save (not `.now`, which the save could overtake).
        var feed = f.store.changes(from: .token(try await f.store.currentToken())).makeAsyncIterator()
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
        var feed = f.store.changes(from: .token(try await f.store.currentToken())).makeAsyncIterator()
        defer { feed.cancel() }
        let a = try await f.store.save(inserts: [Insert("a", "Person", ["name": "A"])])
        let first = try await nextTransaction(&feed)
        #expect(first.generation == a.generation)
        // Sign-out ends the stream at once with SESSION_REVOKED; the feed signs in again.
        try await f.client.signOut()
        let b = try await f.store.save(inserts: [Insert("b", "Person", ["name": "B"])])
        let tx = try await nextTransaction(&feed)
        // between them the sign-out's StoresWillChange and StoresDidChange, a generation each
        // (docs/lifecycle.md): nothing else skipped or repeated
        #expect(tx.generation == a.generation + 3 && tx.generation == b.generation)
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

/// Once armed, replaces the `authorization` of the next data call with an expired session.
final class SendExpiredSessionOnce: ClientInterceptor, Sendable {
    private let state = Synchronization.Mutex<(token: String?, sent: Int)>((nil, 0))
    var sent: Int { state.withLock { $0.sent } }
    func arm(_ token: String) { state.withLock { $0.token = token } }

    func intercept<Input: Sendable, Output: Sendable>(
        request: StreamingClientRequest<Input>, context: ClientContext,
        next: (StreamingClientRequest<Input>, ClientContext) async throws -> StreamingClientResponse<Output>
    ) async throws -> StreamingClientResponse<Output> {
        guard context.descriptor.service.fullyQualifiedService != "ubiquity.v1.Accounts",
            let token = state.withLock({ s -> String? in
                defer { s.token = nil }
                if s.token != nil { s.sent += 1 }
                return s.token
            })
        else { return try await next(request, context) }
        var request = request
        request.metadata.replaceOrAddString("Bearer \(token)", forKey: "authorization")
        return try await next(request, context)
    }
}

import Synchronization
