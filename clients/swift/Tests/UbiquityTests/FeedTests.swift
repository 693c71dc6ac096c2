import Foundation
import GRPCCore
import Synchronization
import Testing
@testable import Ubiquity

/// How long a test waits for one feed event: a bound for a broken server or test, never a
/// measurement (an event normally arrives within milliseconds, a resubscribe within a second).
let feedEventDeadline: Duration = .seconds(30)

/// The feed's next event, or nil when the feed ended; `timedOut` when nothing came within
/// `within`, after which the feed is cancelled so the await ends instead of hanging the run
/// (issue 20: a CI run waited forever for a transaction the feed could never deliver).
func awaitNext(
    _ feed: inout ChangeFeed.Iterator, within: Duration = feedEventDeadline
) async throws -> (event: FeedEvent?, timedOut: Bool) {
    let subscription = feed.task
    let watchdog = Task { () -> Bool in
        do { try await Task.sleep(for: within) } catch { return false }
        subscription.cancel()  // next() then returns nil
        return true
    }
    let event = try await feed.next()
    watchdog.cancel()
    return (event, event == nil ? await watchdog.value : false)
}

/// The feed's next event; a failure naming `what` if the feed ends or nothing comes in time.
func nextEvent(
    _ feed: inout ChangeFeed.Iterator, _ what: String = "feed event", within: Duration = feedEventDeadline
) async throws -> FeedEvent {
    let (event, timedOut) = try await awaitNext(&feed, within: within)
    if let event { return event }
    throw ServerError(timedOut ? "timed out waiting for a \(what)" : "the feed ended while waiting for a \(what)")
}

/// The next committed transaction (skipping caught-up and progress events). Each event these tests
/// wait for holds one transaction (one save each), so taking events one at a time loses none.
func nextTransaction(
    _ feed: inout ChangeFeed.Iterator, within: Duration = feedEventDeadline
) async throws -> Ubiquity.Transaction {
    let deadline = ContinuousClock.now + within
    while true {
        let event = try await nextEvent(&feed, "transaction (in \(within))", within: max(.zero, deadline - .now))
        if !event.transactions.isEmpty {
            #expect(event.transactions.count == 1)
            return event.transactions[0]
        }
    }
}

/// The change feed as an AsyncSequence: order, resume after a server restart, HISTORY_EXPIRED hook.
@Suite(.timeLimit(.minutes(2))) struct FeedTests {
    @Test func feedDeliversSavesInOrderWithValues() async throws {
        let f = try await Fixture.make()
        defer { Task { await f.close() } }
        var feed = f.store.changes(from: .now, includeValues: true).makeAsyncIterator()
        defer { feed.cancel() }
        #expect(try await nextEvent(&feed).kind == .caughtUp)
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
        // From a token taken before the save, not `.now`: the feed subscribes in its own task, and
        // a save can reach the server first (issue 20's CI hang: the feed started after the save).
        let start = try await store.currentToken()
        var feed = store.changes(from: .token(start), reconnectFor: .seconds(60)).makeAsyncIterator()
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

    /// The CI hang of issue 20, made certain: the subscribe reaches the server only after a save.
    /// A feed from a token taken before the save delivers it; a feed from `.now` starts where the
    /// server admitted it — after the save, which it never delivers, so a test awaiting it waits
    /// forever (now: fails after `feedEventDeadline`).
    @Test func aSubscribeThatReachesTheServerAfterASaveStartsFromItsToken() async throws {
        let hold = HoldSubscribes()
        let f = try await Fixture.make(interceptors: [hold])
        defer { Task { await f.close() } }
        let start = try await f.store.currentToken()
        var fromToken = f.store.changes(from: .token(start)).makeAsyncIterator()
        var fromNow = f.store.changes(from: .now).makeAsyncIterator()
        defer {
            fromToken.cancel()
            fromNow.cancel()
        }
        let saved = try await f.store.save(inserts: [Insert("a", "Person", ["name": "Ann"])])
        hold.release()
        let tx = try await nextTransaction(&fromToken)
        #expect(tx.generation == saved.generation && tx.changes.map(\.objectID) == [saved.permanentIDs["a"]])
        let first = try await nextEvent(&fromNow, "caught-up event")
        #expect(first.kind == .caughtUp && first.resumeToken == saved.token)
    }

    /// A feed never ends by itself, and a client's graceful close waits for every call in flight:
    /// close() ends the client's feeds, so it returns and so does a reader's next().
    @Test func closingTheClientEndsItsFeeds() async throws {
        let f = try await Fixture.make()
        defer { f.server.kill() }
        var feed = f.store.changes(from: .now).makeAsyncIterator()
        #expect(try await nextEvent(&feed).kind == .caughtUp)
        await f.client.close()
        let (event, timedOut) = try await awaitNext(&feed)
        #expect(event == nil && !timedOut)
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
        #expect(try await nextEvent(&feed).kind == .caughtUp)
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
        let error = await #expect(throws: UbiquityError.self) { _ = try await nextEvent(&feed) }
        #expect(error?.kind == .historyExpired && error?.historyExpired?.currentToken != nil)
    }
}

final class Seen: Sendable {
    private let list = Synchronization.Mutex<[UbiquityError]>([])
    func add(_ e: UbiquityError) { list.withLock { $0.append(e) } }
    var errors: [UbiquityError] { list.withLock { $0 } }
}

import Synchronization

/// Holds every `Changes.Subscribe` call in the client until `release()`, so the subscribe reaches
/// the server after whatever the test does meanwhile, as it may on a loaded machine.
final class HoldSubscribes: ClientInterceptor, Sendable {
    private let state = Mutex<(released: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    func release() {
        let waiters = state.withLock { s in
            s.released = true
            defer { s.waiters = [] }
            return s.waiters
        }
        waiters.forEach { $0.resume() }
    }

    func intercept<Input: Sendable, Output: Sendable>(
        request: StreamingClientRequest<Input>, context: ClientContext,
        next: (StreamingClientRequest<Input>, ClientContext) async throws -> StreamingClientResponse<Output>
    ) async throws -> StreamingClientResponse<Output> {
        if context.descriptor.fullyQualifiedMethod == "ubiquity.v1.Changes/Subscribe" {
            await withCheckedContinuation { c in
                let go = state.withLock { s in
                    if !s.released { s.waiters.append(c) }
                    return s.released
                }
                if go { c.resume() }
            }
        }
        return try await next(request, context)
    }
}
