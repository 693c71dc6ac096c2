import Foundation
import UbiquityProtos
import UbiquityStorage

// Changes.Subscribe with `key_values`: the account's key-value changes (docs/keyvalue.md
// "Change feed"). Its own position (`KeyValueFeedToken`), not a store's generation: key-value
// writes and a store's saves commit in different databases, so no order between them exists to
// promise, and a token covering both would claim one.

extension ChangesService {
    func subscribeKeyValues(_ req: Ubiquity_V1_SubscribeRequest, writer: EncodedWriter<Ubiquity_V1_SubscribeResponse>, context: ServerContext) async throws {
        if !req.storeID.isEmpty || req.hasFilter || req.hasLiveQuery || req.coalesceWindowMs != 0 {
            throw ServiceError.invalid("key_values", "a key-value subscription follows the account's key-value store: leave store_id, filter, live_query and coalesce_window_ms unset",
                                       reason: .invalidArgument)
        }
        let account = context.account.id
        let current = try backend.keyValues.position(account: account).seq
        var start = current, initialSyncThrough: Int64 = 0
        switch req.hasFrom ? req.from.start : nil {
        case .token(let bytes)?:
            guard let t = KeyValueFeedToken.parse(Array(bytes), account: account) else {
                throw ServiceError.invalid("from.token", "not a key-value feed token of this account: pass back a resume_token of a key-value subscription, or a feed_token of a KeyValue write or List",
                                           reason: .badToken)
            }
            guard t.seq <= current else {
                throw ServiceError.invalid("from.token", "the token is at position \(t.seq) but the account's key-value store is at \(current): pass a token this server gave you", reason: .badToken)
            }
            start = t.seq
        case .oldest(true)?:
            (start, initialSyncThrough) = (0, current)
        case .now(true)?, nil:
            break
        case .oldest(false)?, .now(false)?:
            throw ServiceError.invalid("from", "set token, now = true or oldest = true", reason: .invalidArgument)
        }
        let feed = backend.keyValueFeed
        let id = try feed.admit(context.account)
        defer { feed.remove(id) }
        let runner = KeyValueSubscriptionRunner(store: backend.keyValues, feed: feed, id: id, account: account,
                                                sessionExpiresAt: context.account.expiresAt, writer: writer,
                                                progressSeconds: subscriptions.limits.progressIntervalSeconds)
        let state = KeyValueSubscriptionState(start: start, initialSyncThrough: initialSyncThrough, excluded: Set(req.keyValues.excludeAuthors))
        let task = Task { try await runner.run(state) }
        feed.setTask(id, task)
        try await withTaskCancellationHandler { try await task.value } onCancel: { task.cancel() }
    }
}

/// Runs one key-value subscription: reads the account's changes after its position from the
/// store, sends them one per response as `KeyValueSubscriptionState` decides, then waits for the
/// next write.
struct KeyValueSubscriptionRunner: Sendable {
    let store: KeyValueStore
    let feed: KeyValueFeed
    let id: UInt64
    let account: String
    /// When its session expires (seconds since 1970): the stream ends then, as a store's does.
    let sessionExpiresAt: Double
    let writer: EncodedWriter<Ubiquity_V1_SubscribeResponse>
    let progressSeconds: Double

    static let pageSize = 256

    func run(_ initial: KeyValueSubscriptionState) async throws {
        var state = initial
        var changed = true
        var lastSend = ContinuousClock.now
        func send(_ r: Ubiquity_V1_SubscribeResponse, at seq: Int64) async throws {
            try await writer.send(try r.serializedBytes())
            state.didSend(at: seq)
            lastSend = ContinuousClock.now
        }
        do {
            while true {
                // it wakes at least every progress interval, so it ends within one of its expiry
                if sessionExpiresAt <= Date().timeIntervalSince1970 { feed.end(only: id, .sessionExpired) }
                // store transition events go first, also on the way out (a sign-out's DID_CHANGE)
                for event in feed.takeEvents(id) {
                    var r = response(at: state.sent)
                    r.storeEvent = Convert.storeEvent(event)
                    try await send(r, at: state.sent)
                }
                if let reason = feed.ending(id) { throw ending(reason, state.sent) }
                try Task.checkCancellation()
                // a wake-up without a new commit (the progress timer) reads nothing
                let page = changed ? try store.changes(account: account, after: state.position, limit: Self.pageSize) : []
                for e in page {
                    guard let reason = state.read(e) else { continue }
                    var r = response(at: e.seq)
                    r.keyValueChange = Self.change(e, reason: reason)
                    try await send(r, at: e.seq)
                }
                if page.count == Self.pageSize { continue }
                let due = ContinuousClock.now - lastSend >= .seconds(progressSeconds)
                switch state.readAll(progressDue: due) {
                case .caughtUp?:
                    var r = response(at: state.position)
                    r.caughtUp = Ubiquity_V1_CaughtUp()
                    try await send(r, at: state.position)
                case .progress?:
                    var r = response(at: state.position)
                    r.progress = Ubiquity_V1_Progress()
                    try await send(r, at: state.position)
                case nil:
                    break
                }
                changed = await feed.wait(id, account: account, after: state.position, timeoutSeconds: progressSeconds)
            }
        } catch is CancellationError {
            if let reason = feed.ending(id) { throw ending(reason, state.sent) }
            throw CancellationError()
        }
    }

    private func response(at seq: Int64) -> Ubiquity_V1_SubscribeResponse {
        var r = Ubiquity_V1_SubscribeResponse()
        r.resumeToken = Data(KeyValueFeedToken(account: account, seq: seq).bytes)
        r.resumeGeneration = seq
        return r
    }

    static func change(_ e: KeyValueStore.Entry, reason: Ubiquity_V1_KeyValueChange.Reason) -> Ubiquity_V1_KeyValueChange {
        var c = Ubiquity_V1_KeyValueChange()
        c.reason = reason
        c.key = e.key
        c.value = Data(e.value)
        c.version = e.version
        c.deleted = e.deleted
        c.author = e.author
        return c
    }

    /// The reason's status (as a store subscription's ending) with the last resume token sent.
    private func ending(_ reason: SubscriptionState.EndReason, _ sent: Int64) -> Error {
        reason.error(resumeToken: KeyValueFeedToken(account: account, seq: sent).bytes, generation: sent, maxLagGenerations: 0)
    }
}
