import Foundation
import GRPCCore
import Synchronization

/// A store's committed saves, in generation order, as an `AsyncSequence` (`Changes.Subscribe`,
/// SPEC §4.5). It survives reconnects: each event carries the resume token the server sent with
/// it, and when the stream breaks (server restart or drain, network, a slow-subscriber cut) the
/// feed subscribes again from the last one, so nothing is skipped or repeated. HISTORY_EXPIRED
/// cannot be resumed: the `onHistoryExpired` hook re-baselines (for instance a fetch at the
/// error's `historyExpired.currentToken`) and returns the token to continue from, or nil to end
/// the feed with the error. A client signed in with an API key keeps its feeds across the end of
/// a session: a stream ended with SESSION_EXPIRED or SESSION_REVOKED signs in again and resumes
/// from the token in the error's `ResumeDetails`, so the session's end costs no transaction.
///
/// ```swift
/// for try await event in store.changes(from: .now) {
///     for tx in event.transactions { print(tx.generation, tx.changes.map(\.objectID)) }
/// }
/// ```
/// Leaving the loop (or cancelling its task) ends the subscription. Events wait in memory until
/// read: read them promptly.
public struct ChangeFeed: AsyncSequence, Sendable {
    public typealias Element = FeedEvent
    /// Re-baselines after HISTORY_EXPIRED; returns the token to subscribe from, or nil to end.
    public typealias HistoryExpiredHook = @Sendable (UbiquityError) async throws -> GenerationToken?

    /// Where a feed starts.
    public enum Start: Sendable, Hashable {
        /// After the store's generation when the subscribe reaches the server. That happens in
        /// the feed's own task, after `makeAsyncIterator()` returns, so a save made right after
        /// may come first and not be delivered: to see every save after a point, start from
        /// `.token(try await store.currentToken())` taken before it, or wait for `.caughtUp`.
        case now
        /// From the oldest retained transaction.
        case oldest
        /// After the save this token names.
        case token(GenerationToken)
    }

    let client: UbiquityClient
    let storeID: String
    let start: Start
    let filter: Ubiquity_V1_ChangeFilter
    let reconnectFor: Duration
    let onHistoryExpired: HistoryExpiredHook?
    /// Opted in to acknowledging store transitions (`SubscribeRequest.acknowledges_store_events`):
    /// each `.willChange` carries a ``StoreEvent/acknowledgement``, and the transition waits for
    /// it (see ``UbiquityClient/acknowledge(_:)``).
    let acknowledgesStoreEvents: Bool
    /// `SubscribeRequest.coalesce_window_ms`.
    var coalesceWindowMilliseconds: UInt32 = 0
    /// Set for a live query (``Store/liveQuery(_:where:_:from:includeValues:excludeAuthors:reconnectFor:)``).
    var liveQuery: Ubiquity_V1_LiveQuery? = nil
    /// Set for the account's key-value feed (``KeyValueStore/changes(from:excludeAuthors:reconnectFor:)``),
    /// with `storeID` empty.
    var keyValues: Ubiquity_V1_KeyValueSubscription? = nil

    public func makeAsyncIterator() -> Iterator {
        let (stream, continuation) = AsyncThrowingStream<FeedEvent, any Error>.makeStream()
        let progress = FeedProgress(
            FeedResumer(
                start: start, reconnectFor: reconnectFor, signsIn: client.keeper != nil,
                localSession: client.keeper?.isLocal ?? false))
        let task = client.feeds.start { [self] in
            await run(continuation, progress)
        }
        continuation.onTermination = { _ in task.cancel() }
        return Iterator(base: stream.makeAsyncIterator(), progress: progress, task: task)
    }

    /// Subscribes, and subscribes again, until the consumer stops or the feed cannot go on.
    private func run(
        _ continuation: AsyncThrowingStream<FeedEvent, any Error>.Continuation, _ progress: FeedProgress
    ) async {
        let options = client.options(timeout: nil)  // a feed runs for as long as it is read
        while !Task.isCancelled {
            var request = progress.resumer.withLock { $0.request(storeID: storeID, filter: filter) }
            request.acknowledgesStoreEvents = acknowledgesStoreEvents
            request.coalesceWindowMs = coalesceWindowMilliseconds
            if let liveQuery { request.liveQuery = liveQuery }
            if let keyValues {
                request.keyValues = keyValues
                request.clearFilter()
            }
            var session: String?
            do {
                session = try await client.sessionToken()
                try await client.changes.subscribe(request, metadata: bearer(session), options: options) {
                    [session] response in
                    for try await message in response.messages {
                        let event = progress.resumer.withLock { $0.received(message, session: session) }
                        continuation.yield(event)
                    }
                }
                progress.resumer.withLock { $0.ended() }  // the server closed the stream: resume
            } catch {
                if Task.isCancelled { break }
                guard let failure = UbiquityError.from(error) as? UbiquityError else { break }
                let action = progress.resumer.withLock { $0.failed(failure, now: .now) }
                switch action {
                case .resubscribe(let delay):
                    try? await Task.sleep(for: delay)
                case .signInAgain:
                    _ = await client.sessionEnded(session, by: failure)
                case .historyExpired(let err):
                    do {
                        guard let hook = onHistoryExpired, let token = try await hook(err) else {
                            continuation.finish(throwing: err)
                            return
                        }
                        progress.resumer.withLock { $0.rebaselined(token) }
                    } catch {
                        continuation.finish(throwing: error)
                        return
                    }
                case .fail(let err):
                    continuation.finish(throwing: err)
                    return
                }
            }
        }
        continuation.finish()
    }

    public struct Iterator: AsyncIteratorProtocol {
        var base: AsyncThrowingStream<FeedEvent, any Error>.AsyncIterator
        let progress: FeedProgress
        let task: Task<Void, Never>

        /// The resume token of the last event the feed received: where a new feed would resume.
        public var token: GenerationToken? { progress.resumer.withLock { $0.token } }
        /// How often the feed subscribed again after its stream broke.
        public var reconnects: Int { progress.resumer.withLock { $0.reconnects } }

        public mutating func next() async throws -> FeedEvent? {
            try await base.next()
        }

        /// Ends the subscription; `next()` then returns nil.
        public func cancel() { task.cancel() }
    }
}

/// The subscribing tasks of a client's running feeds, so `close()` can end them.
final class FeedRegistry: Sendable {
    private let state = Mutex<(next: Int, tasks: [Int: Task<Void, Never>])>((0, [:]))

    /// Runs `body` as a registered task, which unregisters itself when `body` returns. Started
    /// under the lock, so a feed that ends at once cannot unregister before it is registered.
    func start(_ body: @escaping @Sendable () async -> Void) -> Task<Void, Never> {
        state.withLock { s in
            let id = s.next
            s.next += 1
            let task = Task { [self] in
                await body()
                _ = state.withLock { $0.tasks.removeValue(forKey: id) }
            }
            s.tasks[id] = task
            return task
        }
    }

    func cancelAll() {
        for task in state.withLock({ Array($0.tasks.values) }) { task.cancel() }
    }
}

/// The resume state shared by a feed's subscribing task and its iterator.
final class FeedProgress: Sendable {
    let resumer: Mutex<FeedResumer>
    init(_ resumer: FeedResumer) { self.resumer = Mutex(resumer) }
}

/// Where a feed is and what to do when its stream fails: a value type without I/O, so the resume
/// rules are unit-tested alone. Resubscribe from the last resume token after a resumable failure
/// (backing off, for at most `reconnectFor` of consecutive failures), hand HISTORY_EXPIRED to the
/// hook, sign in again after the session ended (with an API key), end on everything else.
struct FeedResumer: Sendable {
    enum Action: Sendable {
        case resubscribe(after: Duration)
        /// The session ended (expired, signed out): sign in again and resubscribe at once.
        case signInAgain
        case historyExpired(UbiquityError)
        case fail(UbiquityError)
    }

    let start: ChangeFeed.Start
    let reconnectFor: Duration
    /// The client has an API key, so an ended session can be replaced.
    let signsIn: Bool
    /// The session is a local device's: SESSION_REVOKED means its stores were imported into an
    /// account (or it was revoked on purpose), and a new local session would follow a store that
    /// is gone. Only an expired one is replaced.
    let localSession: Bool
    private(set) var token: GenerationToken?
    private(set) var reconnects = 0
    /// Sessions ended since the last message: a fresh session ended again before the stream
    /// delivered anything is not a passing expiry, and the feed stops rather than loop.
    private var renewals = 0
    private var failingSince: ContinuousClock.Instant?
    private var delay: Duration = .milliseconds(50)

    init(start: ChangeFeed.Start, reconnectFor: Duration, signsIn: Bool = false, localSession: Bool = false) {
        self.start = start
        self.reconnectFor = reconnectFor
        self.signsIn = signsIn
        self.localSession = localSession
        if case .token(let t) = start { token = t }
    }

    func request(storeID: String, filter: Ubiquity_V1_ChangeFilter) -> Ubiquity_V1_SubscribeRequest {
        var request = Ubiquity_V1_SubscribeRequest()
        request.storeID = storeID
        request.filter = filter
        switch (token, start) {
        case (let t?, _): request.from.token = t.bytes
        case (nil, .oldest): request.from.oldest = true
        default: request.from.now = true
        }
        return request
    }

    /// `session`: the one the stream was opened with, which an acknowledgement of a store event
    /// it delivered must carry.
    mutating func received(_ message: Ubiquity_V1_SubscribeResponse, session: String? = nil) -> FeedEvent {
        if let t = GenerationToken(ifPresent: message.resumeToken) { token = t }
        failingSince = nil
        delay = .milliseconds(50)
        renewals = 0
        return FeedEvent(proto: message, session: session)
    }

    /// The server ended the stream with OK (it never should): subscribe again at once.
    mutating func ended() {
        reconnects += 1
    }

    mutating func failed(_ error: UbiquityError, now: ContinuousClock.Instant) -> Action {
        if error.kind == .historyExpired { return .historyExpired(error) }
        let renewable = error.kind == .sessionExpired || (error.kind == .sessionRevoked && !localSession)
        if signsIn, renewable, renewals < 2 {
            if let t = error.resumeToken { token = t }
            renewals += 1
            reconnects += 1
            return .signInAgain
        }
        let resumable: Set<RPCError.Code> = [.unavailable, .resourceExhausted, .internalError, .unknown]
        guard resumable.contains(error.code) else { return .fail(error) }
        if let t = error.resumeToken { token = t }
        let since = failingSince ?? now
        failingSince = since
        if now - since > reconnectFor { return .fail(error) }
        reconnects += 1
        defer { delay = min(delay * 2, .seconds(1)) }
        return .resubscribe(after: delay)
    }

    mutating func rebaselined(_ newToken: GenerationToken) {
        token = newToken
        reconnects += 1
    }
}

/// One message of the feed.
public struct FeedEvent: Sendable {
    public enum Kind: Sendable, Hashable {
        case transactions, caughtUp, progress, cursorAtRisk, storeEvent, keyValueChange, liveQuery
    }

    public var kind: Kind
    /// Where a feed resumes to continue after this event.
    public var resumeToken: GenerationToken?
    public var resumeGeneration: Int64
    /// Filled for `.transactions`.
    public var transactions: [Transaction]
    /// Filled for `.storeEvent`: a store transition (sign-out, first-sign-in import, …) before or
    /// after it happens, in order with the transactions (see ``StoreEvent``).
    public var storeEvent: StoreEvent?
    /// Filled for `.keyValueChange`, on the key-value feed.
    public var keyValueChange: KeyValueChange?
    /// Filled for `.liveQuery`, on a live query's feed.
    public var liveQuery: LiveQueryUpdate?
    /// The message itself (`cursorAtRisk`'s details, say).
    public var raw: Ubiquity_V1_SubscribeResponse

    init(proto m: Ubiquity_V1_SubscribeResponse, session: String? = nil) {
        switch m.event {
        case .transactions: kind = .transactions
        case .caughtUp: kind = .caughtUp
        case .cursorAtRisk: kind = .cursorAtRisk
        case .storeEvent: kind = .storeEvent
        case .keyValueChange: kind = .keyValueChange
        case .liveQuery: kind = .liveQuery
        case .progress, .none: kind = .progress
        }
        resumeToken = GenerationToken(ifPresent: m.resumeToken)
        resumeGeneration = m.resumeGeneration
        transactions = m.transactions.transactions.map(Transaction.init(proto:))
        storeEvent = kind == .storeEvent ? StoreEvent(proto: m.storeEvent, session: session) : nil
        keyValueChange = kind == .keyValueChange ? KeyValueChange(proto: m.keyValueChange) : nil
        liveQuery = kind == .liveQuery ? LiveQueryUpdate(proto: m.liveQuery) : nil
        raw = m
    }
}

/// One committed save of the store's history.
public struct Transaction: Sendable {
    public var token: GenerationToken?
    public var generation: Int64
    public var commitTime: Date
    public var author: String
    public var contextName: String
    public var changes: [Change]

    init(proto t: Ubiquity_V1_Transaction) {
        token = GenerationToken(ifPresent: t.token)
        generation = t.generation
        commitTime = t.commitTime.date
        author = t.author
        contextName = t.contextName
        changes = t.changes.map(Change.init(proto:))
    }
}

/// One object's change in a transaction.
public struct Change: Sendable {
    public enum Kind: Sendable, Hashable { case insert, update, delete, unspecified }

    public var kind: Kind
    public var entity: String
    public var objectID: String
    public var changedProperties: [String]
    /// With `includeValues`: the changed attributes' values after the transaction.
    public var values: [String: Value]
    /// With `includeValues`: the changed relationships' targets after the transaction.
    public var relationships: [String: [String]]
    /// With `includeTombstones`, on a delete: the last values of the attributes the model keeps
    /// on delete (`keep_on_delete`, Core Data's `preservesValueInHistoryOnDeletion`).
    public var tombstone: [String: Value]
    /// With `includeValues`: the values could not be read (history older than the store's
    /// readable window); live feeds always get them.
    public var valuesUnavailable: Bool

    init(proto c: Ubiquity_V1_Change) {
        switch c.kind {
        case .insert: kind = .insert
        case .update: kind = .update
        case .delete: kind = .delete
        default: kind = .unspecified
        }
        entity = c.entity
        objectID = c.objectID
        changedProperties = c.changedProperties
        values = swiftValues(c.values)
        relationships = c.relationships.mapValues(\.objectIds)
        tombstone = swiftValues(c.tombstone)
        valuesUnavailable = c.valuesUnavailable
    }
}
