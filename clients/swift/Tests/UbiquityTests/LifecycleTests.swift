import Foundation
import Testing
@testable import Ubiquity

/// The feed's next store event, skipping the other kinds (transactions, caught-up, progress);
/// a failure naming `what` if the feed ends or none comes in time.
func nextStoreEvent(
    _ feed: inout ChangeFeed.Iterator, _ what: String, within: Duration = feedEventDeadline
) async throws -> (event: StoreEvent, feedEvent: FeedEvent) {
    let deadline = ContinuousClock.now + within
    while true {
        let event = try await nextEvent(&feed, what, within: max(.zero, deadline - .now))
        if let storeEvent = event.storeEvent { return (storeEvent, event) }
    }
}

/// Store transitions as typed feed events, and local sessions imported on the first sign-in
/// (docs/lifecycle.md, docs/accounts.md "Local stores"), against a real ubiquityd.
@Suite(.timeLimit(.minutes(2))) struct LifecycleTests {
    @Test func signOutIsAnnouncedWillThenDidOnTheFeed() async throws {
        let f = try await Fixture.make()
        defer { Task { await f.close() } }
        var feed = f.store.changes(from: .token(try await f.store.currentToken())).makeAsyncIterator()
        defer { feed.cancel() }
        // The sign-out is announced on the stores its session subscribes to: wait until the
        // subscription is in place.
        #expect(try await nextEvent(&feed, "caught-up").kind == .caughtUp)
        try await f.client.signOut()
        let (will, willEvent) = try await nextStoreEvent(&feed, "StoresWillChange")
        #expect(will == StoreEvent(phase: .willChange, transition: .accountRemoved))
        #expect(willEvent.kind == .storeEvent && willEvent.transactions.isEmpty)
        let (did, didEvent) = try await nextStoreEvent(&feed, "StoresDidChange")
        #expect(did == StoreEvent(phase: .didChange, transition: .accountRemoved))
        // Each a history entry of its own, in order, nothing between them (no context to save).
        #expect(didEvent.resumeGeneration == willEvent.resumeGeneration + 1)
        // The stream then ended SESSION_REVOKED; the feed signed in again and goes on.
        let b = try await f.store.save(inserts: [Insert("b", "Person", ["name": "B"])])
        let tx = try await nextTransaction(&feed)
        #expect(tx.generation == b.generation && tx.generation == didEvent.resumeGeneration + 1)
        #expect(await f.client.signIns == 2)
    }

    /// Two feeds that opted in to acknowledging, on two stores of the session: the sign-out waits
    /// for both acknowledgements, sent from the feeds' consumer while `signOut()` is in flight
    /// (with the feeds' session, which is the one being ended). The acknowledgement deadline is
    /// ten minutes: were the acknowledgements not what lets the sign-out go on, it would outlast
    /// the client's 30 s call deadline and fail.
    @Test func signOutWaitsForTheAcknowledgementsOfOptedInFeeds() async throws {
        let f = try await Fixture.make(serverOptions: ["--transition-ack-seconds", "600"])
        defer { Task { await f.close() } }
        let other = try await f.client.openStore("other-\(UUID().uuidString)")
        try await other.registerModel(personModel())
        var first = f.store.changes(from: .token(try await f.store.currentToken()), acknowledgesStoreEvents: true)
            .makeAsyncIterator()
        var second = other.changes(from: .token(try await other.currentToken()), acknowledgesStoreEvents: true)
            .makeAsyncIterator()
        defer {
            first.cancel()
            second.cancel()
        }
        #expect(try await nextEvent(&first, "caught-up").kind == .caughtUp)
        #expect(try await nextEvent(&second, "caught-up").kind == .caughtUp)

        let signOut = Task { try await f.client.signOut() }
        let firstAck = try await acknowledgementOfSignOut(&first, "the first store")
        let secondAck = try await acknowledgementOfSignOut(&second, "the second store")
        // The server was waiting for each (one per store: the session follows both); a repeat
        // is a no-op.
        #expect(try await f.client.acknowledge(firstAck) == true)
        #expect(try await f.client.acknowledge(firstAck) == false)
        #expect(try await f.client.acknowledge(secondAck) == true)
        try await signOut.value

        try await expectDidChangeThenSaves(&first, f.store)
        try await expectDidChangeThenSaves(&second, other)
        // Acknowledging once the session is gone: nothing waits any more.
        #expect(try await f.client.acknowledge(secondAck) == false)
        // A token that is not a WILL_CHANGE: typed, and the server goes on.
        let notAnEvent = StoreEvent.Acknowledgement(eventToken: try await f.store.currentToken(), deadline: Date())
        let refused = await #expect(throws: UbiquityError.self) { try await f.client.acknowledge(notAnEvent) }
        #expect(refused?.code == .notFound && refused?.reason == "STORE_EVENT_NOT_FOUND")
    }

    /// A sign-out's WILL_CHANGE on an opted-in feed, and its acknowledgement.
    private func acknowledgementOfSignOut(
        _ feed: inout ChangeFeed.Iterator, _ name: String
    ) async throws -> StoreEvent.Acknowledgement {
        let (will, event) = try await nextStoreEvent(&feed, "WILL_CHANGE on \(name)")
        #expect(will.phase == .willChange && will.transition == .accountRemoved && !will.cancelled)
        let ack = try #require(will.acknowledgement, "an opted-in feed's WILL_CHANGE carries an acknowledgement")
        #expect(ack.eventToken == event.resumeToken)
        #expect(ack.deadline > Date())
        return ack
    }

    /// The sign-out's DID_CHANGE (not cancelled, nothing to acknowledge), then the feed going on
    /// with the client's new session.
    private func expectDidChangeThenSaves(_ feed: inout ChangeFeed.Iterator, _ store: Store) async throws {
        let (did, didEvent) = try await nextStoreEvent(&feed, "DID_CHANGE on \(store.name)")
        #expect(did == StoreEvent(phase: .didChange, transition: .accountRemoved))
        #expect(did.acknowledgement == nil && !did.cancelled)
        let saved = try await store.save(inserts: [Insert("a", "Person", ["name": "After"])])
        let tx = try await nextTransaction(&feed)
        #expect(tx.generation == saved.generation && tx.generation == didEvent.resumeGeneration + 1)
    }

    @Test func localWorkIsImportedIntoTheAccountOnFirstSignIn() async throws {
        let server = try await Server(options: ["--local-stores"]).start()
        defer { server.kill() }
        // A device without an account: the first local session registers it.
        let phone = try UbiquityClient(target: server.target, credentials: .localDevice(deviceID: "phone-1"))
        defer { Task { await phone.close() } }
        _ = try await phone.keyValues.set("theme", Data("dark".utf8))  // moves too, counted apart
        let local = try await phone.openStore("notes")
        try await local.registerModel(personModel())
        let secret = try #require(await phone.deviceSecret)
        #expect(secret.hasPrefix("ubd_"))
        var localFeed = local.changes(from: .token(try await local.currentToken())).makeAsyncIterator()
        defer { localFeed.cancel() }
        // First thing on a local session's feed: it works in local storage (no transition).
        let (state, _) = try await nextStoreEvent(&localFeed, "local-storage state")
        #expect(state == StoreEvent(phase: .didChange, transition: .none, usingLocalStorage: true))
        _ = try await addPeople(local, [["name": "Ann", "email": "ann@example.com"], ["name": "Bob", "email": "bob@example.com"]])
        _ = try await nextTransaction(&localFeed)

        // Signing in with the device's secret imports the local store into the account's.
        let account = try UbiquityClient(
            target: server.target,
            credentials: .apiKey(try await makeApiKey(server), deviceID: "phone-1", localDeviceSecret: secret))
        defer { Task { await account.close() } }
        try await account.signIn()
        #expect(await account.localImport == ImportCounts(inserted: 2, keyValuesMoved: 1))

        // The local feed hears the import coming, then its session ends for good.
        let (will, _) = try await nextStoreEvent(&localFeed, "StoresWillChange of the import")
        #expect(will == StoreEvent(phase: .willChange, transition: .initialImportCompleted, usingLocalStorage: true))
        var ended: UbiquityError?
        do {
            while true {
                let (event, timedOut) = try await awaitNext(&localFeed)
                if timedOut { throw ServerError("timed out waiting for the local feed to end") }
                if event == nil { break }
            }
        } catch let e as UbiquityError {
            ended = e
        }
        #expect(ended?.kind == .sessionRevoked, "\(String(describing: ended))")
        // The local client used again: refused once, then the device starts afresh.
        let revoked = await #expect(throws: UbiquityError.self) { try await phone.listStores() }
        #expect(revoked?.kind == .sessionRevoked)
        #expect(try await phone.listStores().isEmpty)
        #expect(await phone.deviceSecret != secret)

        // The account's store of the same name holds the objects, and its feed the import's DID.
        let store = try await account.openStore("notes", mustExist: true)
        let people = try await store.fetch("Person", sort: [.ascending("name")])
        #expect(people.objects.map { $0["name"]?.string } == ["Ann", "Bob"])
        var feed = store.changes(from: .oldest).makeAsyncIterator()
        defer { feed.cancel() }
        let (did, _) = try await nextStoreEvent(&feed, "StoresDidChange of the import")
        #expect(
            did
                == StoreEvent(
                    phase: .didChange, transition: .initialImportCompleted, usingLocalStorage: false,
                    importCounts: ImportCounts(inserted: 2, keyValuesMoved: 1)))
    }

    @Test func aLocalDeviceKeepsItsSecretAcrossClients() async throws {
        let server = try await Server(options: ["--local-stores"]).start()
        defer { server.kill() }
        let first = try UbiquityClient(target: server.target, credentials: .localDevice(deviceID: "tablet"))
        defer { Task { await first.close() } }
        let store = try await first.openStore("drafts")
        let secret = try #require(await first.deviceSecret)
        // A later session of the device needs the secret: with it, the same local store.
        let again = try UbiquityClient(target: server.target, credentials: .localDevice(deviceID: "tablet", secret: secret))
        defer { Task { await again.close() } }
        #expect(try await again.listStores().map(\.id) == [store.id])
        #expect(await again.deviceSecret == secret)
        // Without it (or with a wrong one) the device's stores are not reachable.
        let thief = try UbiquityClient(target: server.target, credentials: .localDevice(deviceID: "tablet", secret: "ubd_wrong"))
        defer { Task { await thief.close() } }
        let refused = await #expect(throws: UbiquityError.self) { try await thief.listStores() }
        #expect(refused?.kind == .badCredentials)
    }

    @Test func localSessionsNeedTheServersConsent() async throws {
        let server = try await Server().start()
        defer { server.kill() }
        let phone = try UbiquityClient(target: server.target, credentials: .localDevice(deviceID: "phone"))
        defer { Task { await phone.close() } }
        let refused = await #expect(throws: UbiquityError.self) { try await phone.signIn() }
        #expect(refused?.code == .failedPrecondition && refused?.reason == "LOCAL_STORES_DISABLED")
    }
}
