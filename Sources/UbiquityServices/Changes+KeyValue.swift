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
        let state = KeyValueSubscriptionState(start: start, initialSyncThrough: initialSyncThrough, excluded: Set(req.keyValues.excludeAuthors))
        let floor = try backend.keyValues.trimFloor(account: account)
        if state.expired(floor: floor) { throw Self.keyValueHistoryExpired(account: account, after: start, floor: floor, current: current) }
        let feed = backend.keyValueFeed
        let id = try feed.admit(context.account)
        defer { feed.remove(id) }
        let runner = KeyValueSubscriptionRunner(store: backend.keyValues, feed: feed, id: id, account: account,
                                                sessionExpiresAt: context.account.expiresAt, writer: writer,
                                                progressSeconds: subscriptions.limits.progressIntervalSeconds)
        let task = Task { try await runner.run(state) }
        feed.setTask(id, task)
        try await withTaskCancellationHandler { try await task.value } onCancel: { task.cancel() }
    }
}

extension ChangesService {
    /// FAILED_PRECONDITION HISTORY_EXPIRED for a key-value position below the account's trim
    /// floor (docs/keyvalue.md "Tombstones"): deletions after it may have been trimmed, so the
    /// changes from it would not converge. `HistoryExpiredDetails` carries key-value feed tokens:
    /// the floor and the current position.
    static func keyValueHistoryExpired(account: String, after seq: Int64, floor: Int64, current: Int64) -> ServiceError {
        var d = Ubiquity_V1_HistoryExpiredDetails()
        d.oldestRetainedToken = Data(KeyValueFeedToken(account: account, seq: floor).bytes)
        d.currentToken = Data(KeyValueFeedToken(account: account, seq: current).bytes)
        var e = ServiceError.precondition(
            "key-value deletions after position \(seq) were trimmed (kept from position \(floor) on): replace your copy with a baseline — List every page, then subscribe from the first page's feed_token, or subscribe from oldest (an initial sync)",
            reason: .historyExpired)
        e.details = [d]
        return e
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
                for notice in feed.takeEvents(id) {
                    var r = response(at: state.sent)
                    switch notice {
                    case .storeEvent(let event):
                        r.storeEvent = Convert.storeEvent(event)
                    case .quotaViolation(let key, let author):
                        guard state.wants(author: author) else { continue }
                        r.keyValueChange = Self.quotaViolation(key: key, author: author)
                    }
                    try await send(r, at: state.sent)
                }
                if let reason = feed.ending(id) { throw ending(reason, state.sent) }
                try Task.checkCancellation()
                // a wake-up without a new commit (the progress timer) reads nothing
                let (page, floor) = changed ? try store.changesAndFloor(account: account, after: state.position, limit: Self.pageSize) : ([], 0)
                if state.expired(floor: floor) {
                    // a trim passed a subscriber that lagged behind it (a client that stopped
                    // reading for longer than the tombstone retention)
                    throw ChangesService.keyValueHistoryExpired(account: account, after: state.position, floor: floor,
                                                                current: try store.position(account: account).seq)
                }
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
                    // an account over a quota (lowered since its values were written) says so
                    // first: the client learns why its next write may be refused
                    if store.quotas.excess(try store.position(account: account).usage) != nil {
                        var q = response(at: state.sent)
                        q.keyValueChange = Self.quotaViolation(key: "", author: "")
                        try await send(q, at: state.sent)
                    }
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

    /// A QUOTA_VIOLATION change: nothing was written, so it carries no value or version.
    static func quotaViolation(key: String, author: String) -> Ubiquity_V1_KeyValueChange {
        var c = Ubiquity_V1_KeyValueChange()
        c.reason = .quotaViolation
        c.key = key
        c.author = author
        return c
    }

    /// The reason's status (as a store subscription's ending) with the last resume token sent.
    private func ending(_ reason: SubscriptionState.EndReason, _ sent: Int64) -> Error {
        reason.error(resumeToken: KeyValueFeedToken(account: account, seq: sent).bytes, generation: sent, maxLagGenerations: 0)
    }
}
