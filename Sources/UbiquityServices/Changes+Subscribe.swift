import Foundation
import UbiquityGRPC
import UbiquityLock
import UbiquityProtos
import UbiquityStorage

// Changes.Subscribe: a subscription's checks and admission here; its loop in `SubscriptionRunner`.

extension ChangesService {
    /// Longest coalescing window a subscriber may ask for.
    static let maxCoalesceWindowMS: UInt32 = 10_000

    func subscribe(_ req: Ubiquity_V1_SubscribeRequest, writer: EncodedWriter<Ubiquity_V1_SubscribeResponse>, context: ServerContext) async throws {
        if req.hasKeyValues {
            if req.acknowledgesStoreEvents {
                throw ServiceError.invalid("acknowledges_store_events", "store subscriptions only: acknowledge a transition's WILL_CHANGE on a subscription to the store (docs/lifecycle.md \"Acknowledgements\")",
                                           reason: .invalidArgument)
            }
            return try await subscribeKeyValues(req, writer: writer, context: context)
        }
        if req.hasLiveQuery && !req.filter.entities.isEmpty {
            throw ServiceError.invalid("filter.entities", "a live query names its entity in live_query.entity: leave filter.entities empty", reason: .invalidArgument)
        }
        guard req.coalesceWindowMs <= Self.maxCoalesceWindowMS else {
            throw ServiceError.invalid("coalesce_window_ms", "at most \(Self.maxCoalesceWindowMS) ms", reason: .limitExceeded)
        }
        let (backend, subscriptions) = (self.backend, self.subscriptions)
        // Leaves the registry only after the store's lease is given back, so a replace or
        // destroy that waited for the registry to empty finds the store unused.
        let admitted = Lock<Subscription?>(nil)
        defer { if let sub = admitted.withLock({ $0 }) { subscriptions.remove(sub) } }
        try await backend.withStore(req.storeID, account: context.account) { store in
            let model = backend.modelIfAny(of: store)
            var filter = req.filter
            var live: LiveQueryView?
            if req.hasLiveQuery {
                live = try LiveQueryView(req.liveQuery, includeValues: filter.includeValues, model: model)
                // the feed's own entity filter (sub-entities included) picks the transactions to evaluate
                filter.entities = [req.liveQuery.entity]
            }
            let selection = try ChangeSelection(filter, model: model, field: "filter")
            let start = try Self.start(req.hasFrom ? req.from : nil, defaultsToNow: true, store: store, field: "from")
            let sub = try subscriptions.admit(storeID: store.id, peer: context.peer, feed: store.feed, account: context.account,
                                              acknowledgesStoreEvents: req.acknowledgesStoreEvents)
            admitted.withLock { $0 = sub }
            if context.account.usingLocalStorage {
                let t = store.currentToken
                try await writer.send(LocalStorageEvent.response(start: GenerationToken(storeID: t.storeID, epoch: t.epoch, generation: start)))
            }
            let runner = SubscriptionRunner(store: store, model: model, selection: selection, live: live, device: context.account.device,
                                            subscription: sub, writer: writer,
                                            limits: subscriptions.limits, coalesceNanos: UInt64(req.coalesceWindowMs) * 1_000_000,
                                            acknowledging: req.acknowledgesStoreEvents && backend.limits.transitionAckSeconds > 0
                                                ? .init(acks: subscriptions.acknowledgements, seconds: backend.limits.transitionAckSeconds) : nil,
                                            state: SubscriptionState(start: start, storeGeneration: store.currentToken.generation))
            // The loop runs in its own task so the registry can cancel it out of a blocked send
            // (a client that stopped reading) and end the call with its resume token.
            let task = Task { try await runner.run() }
            sub.setTask(task)
            try await withTaskCancellationHandler { try await task.value } onCancel: { task.cancel() }
        }
    }
}

/// Runs one subscription: executes `SubscriptionState`'s actions against the store's history and
/// feed, and sends what passes the filter.
struct SubscriptionRunner: Sendable {
    let store: Store
    let model: ModelInfo?
    let selection: ChangeSelection
    /// Set: transactions are sent as their effect on this live query's result set.
    let live: LiveQueryView?
    /// The subscriber's device: it gets the store events that concern it (all devices', its own).
    let device: String?
    let subscription: Subscription
    let writer: EncodedWriter<Ubiquity_V1_SubscribeResponse>
    let limits: FeedLimits
    let coalesceNanos: UInt64
    /// Set when the subscriber acknowledges WILL_CHANGE events.
    let acknowledging: Acknowledging?
    let state: SubscriptionState

    /// Transactions read per step from disk or the feed.
    static let pageSize = 256

    /// What serving a subscriber that acknowledges WILL_CHANGE events takes: the transitions
    /// that may wait for it, and `--transition-ack-seconds` for the deadline it is told.
    struct Acknowledging: Sendable {
        let acks: StoreEventAcks
        let seconds: Double
    }

    /// What the loop carries between steps besides the state machine.
    private struct Progress {
        /// The generation of the last resume token queued to the client.
        var sent: Int64
        var lastSend = ContinuousClock.now
        var risk = CursorRiskWatch()
    }

    func run() async throws {
        var machine = state
        var progress = Progress(sent: machine.position)
        var action = machine.startAction
        let feed = store.feed
        do {
            while true {
                if let r = subscription.ending { action = machine.event(.end(r)) } else { try Task.checkCancellation() }
                if action.reads, let warning = await progress.risk.check(position: progress.sent, store: store, interval: limits.progressIntervalSeconds) {
                    try await send(warning, at: progress.sent, &progress)
                }
                switch action {
                case .readDisk(let after):
                    // Every generation up to the store's current one before the read is in the
                    // read's snapshot: an exhausted page covers them all.
                    let before = store.currentToken.generation
                    let page: HistoryPage
                    do { page = try await store.history(after: token(after), limit: Self.pageSize) } catch {
                        throw ChangesService.historyError(error, store: store, after: after)
                    }
                    let through = page.hasMore ? page.nextToken.generation : max(page.nextToken.generation, before)
                    try await deliver(page.transactions, through: through, after: after, &progress)
                    action = machine.event(.diskPage(through: through, exhausted: !page.hasMore))
                case .readFeed(let after):
                    switch feed.read(after: after, limit: Self.pageSize) {
                    case .transactions(var txs):
                        if coalesceNanos > 0 { txs = await coalesced(txs) }
                        let through = txs[txs.count - 1].generation
                        try await deliver(txs.map(\.transaction), shared: txs, through: through, after: after, &progress)
                        action = machine.event(.feed(.transactions(through: through)))
                    case .behind: action = machine.event(.feed(.behind))
                    case .upToDate: action = machine.event(.feed(.upToDate))
                    case .closed: action = machine.event(.feed(.closed))
                    }
                case .sendCaughtUp(let at):
                    try await send(SubscribeEncoding.marker(field: SubscribeEncoding.caughtUpField, resume: token(at)), at: at, &progress)
                    action = machine.event(.caughtUpSent)
                case .wait(let after):
                    if progress.sent < after && ContinuousClock.now - progress.lastSend >= .seconds(limits.progressIntervalSeconds) {
                        try await send(SubscribeEncoding.marker(field: SubscribeEncoding.progressField, resume: token(after)), at: after, &progress)
                    }
                    await feed.wait(after: after, id: subscription.id)
                    action = machine.event(.woke)
                case .end(let reason):
                    throw ending(reason, resume: progress.sent)
                }
            }
        } catch is CancellationError {
            if let r = subscription.ending { throw ending(r, resume: progress.sent) }
            throw CancellationError()
        }
    }

    private func token(_ generation: Int64) -> GenerationToken {
        let t = store.currentToken
        return GenerationToken(storeID: t.storeID, epoch: t.epoch, generation: generation)
    }

    /// Waits the coalescing window once, then takes whatever else the feed has by then.
    private func coalesced(_ first: [FeedTransaction]) async -> [FeedTransaction] {
        try? await Task.sleep(nanoseconds: coalesceNanos)
        var txs = first
        while txs.count < 4 * Self.pageSize, case .transactions(let more) = store.feed.read(after: txs[txs.count - 1].generation, limit: Self.pageSize) {
            txs += more
        }
        return txs
    }

    /// Sends the transactions that pass the filter, in responses of at most `maxResponseBytes`
    /// (a larger transaction in parts), the last one ending at `through`. Skipped transactions
    /// send nothing (the progress marker covers them).
    private func deliver(_ txs: [HistoryTransaction], shared: [FeedTransaction]? = nil, through: Int64, after: Int64, _ p: inout Progress) async throws {
        if let live { return try await deliverLive(live, txs, through: through, &p) }
        var batch: [[UInt8]] = [], batchBytes = 0, batchEnd = after
        for (i, tx) in txs.enumerated() {
            if let event = tx.event {
                guard event.concerns(device: device) else { continue }
                // in order: the transactions before it go first, each response its own token
                if !batch.isEmpty { try await send(SubscribeEncoding.batch(batch, resume: token(batchEnd)), at: batchEnd, &p); batch = []; batchBytes = 0 }
                try await sendEvent(event, of: tx, &p)
                batchEnd = tx.token.generation
                continue
            }
            guard let changes = selection.changes(of: tx) else { continue }
            let encoded = await encode(tx, changes: changes, shared: shared?[i])
            if SubscribeEncoding.framedSize(encoded.count) > limits.maxResponseBytes {
                if !batch.isEmpty { try await send(SubscribeEncoding.batch(batch, resume: token(batchEnd)), at: batchEnd, &p); batch = []; batchBytes = 0 }
                try await sendInParts(tx, changes: changes, before: batchEnd, &p)
                batchEnd = tx.token.generation
                continue
            }
            if batchBytes + SubscribeEncoding.framedSize(encoded.count) > limits.maxResponseBytes {
                try await send(SubscribeEncoding.batch(batch, resume: token(batchEnd)), at: batchEnd, &p)
                batch = []; batchBytes = 0
            }
            batch.append(encoded)
            batchBytes += SubscribeEncoding.framedSize(encoded.count)
            batchEnd = tx.token.generation
        }
        if !batch.isEmpty {
            // the last response's token also covers the skipped transactions after it
            try await send(SubscribeEncoding.batch(batch, resume: token(max(batchEnd, through))), at: max(batchEnd, through), &p)
        }
        subscription.moved(to: through)
    }

    /// A live query's updates, one response per transaction that changed its result set (the
    /// progress marker covers the others).
    private func deliverLive(_ live: LiveQueryView, _ txs: [HistoryTransaction], through: Int64, _ p: inout Progress) async throws {
        for tx in txs {
            if let event = tx.event {
                if event.concerns(device: device) { try await sendEvent(event, of: tx, &p) }
                continue
            }
            guard let changes = selection.changes(of: tx), let update = try await live.update(tx, changes: changes, store: store) else { continue }
            var r = Ubiquity_V1_SubscribeResponse()
            r.resumeToken = Data(tx.token.bytes)
            r.resumeGeneration = tx.token.generation
            r.liveQuery = update
            try await send((try? r.serializedBytes()) ?? [], at: tx.token.generation, &p)
        }
        subscription.moved(to: through)
    }

    /// One transaction's `Transaction` message. The names-only, unfiltered form is encoded once
    /// per transaction and shared by every subscriber that wants it; values are read once per
    /// transaction.
    private func encode(_ tx: HistoryTransaction, changes: [HistoryChange], shared: FeedTransaction?) async -> [UInt8] {
        if selection.isEverythingNamesOnly, let shared {
            if let bytes = shared.derived.withLock({ $0.namesOnlyEncoding }) { return bytes }
            let bytes = Self.serialize(ChangeEncoding.transaction(tx, changes: changes, selection: selection, values: [:], model: model))
            shared.derived.withLock { $0.namesOnlyEncoding = bytes }
            return bytes
        }
        var values: ChangeEncoding.Values = [:]
        if selection.includeValues {
            if let read = shared?.derived.withLock({ $0.values }) {
                values = read.byObject
            } else {
                // every change of the transaction, so the shared values serve every filter
                values = await ChangeEncoding.readValues(tx, changes: tx.changes, store: store)
                shared?.derived.withLock { $0.values = FeedTransaction.TransactionValues(byObject: values) }
            }
        }
        return Self.serialize(ChangeEncoding.transaction(tx, changes: changes, selection: selection, values: values, model: model))
    }

    static func serialize(_ t: Ubiquity_V1_Transaction) -> [UInt8] { (try? t.serializedBytes()) ?? [] }

    /// A transaction larger than a response: its changes in parts, each part's resume token the
    /// one before the transaction except the last's (a resume replays the whole transaction).
    private func sendInParts(_ tx: HistoryTransaction, changes: [HistoryChange], before: Int64, _ p: inout Progress) async throws {
        var values: ChangeEncoding.Values = [:]
        if selection.includeValues { values = await ChangeEncoding.readValues(tx, changes: changes, store: store) }
        var parts: [[Ubiquity_V1_Change]] = [[]]
        var size = 0
        let room = max(1024, limits.maxResponseBytes - 256)
        for c in changes {
            let e = ChangeEncoding.change(c, selection: selection, values: values, model: model)
            let n = (try? e.serializedBytes() as [UInt8])?.count ?? 0
            if size + n + 8 > room && !parts[parts.count - 1].isEmpty { parts.append([]); size = 0 }
            parts[parts.count - 1].append(e)
            size += n + 8
        }
        for (i, part) in parts.enumerated() {
            var t = ChangeEncoding.header(tx)
            t.changes = part
            t.part.index = UInt32(i)
            t.part.count = UInt32(parts.count)
            let last = i == parts.count - 1
            let resume = last ? tx.token.generation : before
            try await send(SubscribeEncoding.batch([Self.serialize(t)], resume: token(resume)), at: resume, &p)
        }
    }

    /// A store event (SPEC §4.6) with the resume token of its own generation; a WILL_CHANGE to a
    /// subscriber that acknowledges carries how to (docs/lifecycle.md "Acknowledgements").
    private func sendEvent(_ event: StoreEventRecord, of tx: HistoryTransaction, _ p: inout Progress) async throws {
        var r = Ubiquity_V1_SubscribeResponse()
        let generation = tx.token.generation
        let t = token(generation)
        r.resumeToken = Data(t.bytes)
        r.resumeGeneration = generation
        r.storeEvent = Convert.storeEvent(event)
        if let acknowledging, event.phase == .willChange {
            r.storeEvent.acknowledgement.eventToken = Data(t.bytes)
            (r.storeEvent.acknowledgement.deadline.seconds, r.storeEvent.acknowledgement.deadline.nanos) =
                Convert.timestamp(tx.timestamp.timeIntervalSince1970 + acknowledging.seconds)
            // before it goes out: a transition waiting for this event waits for this subscriber too
            acknowledging.acks.received(subscription.acknowledger, generation: generation)
        }
        try await send((try? r.serializedBytes()) ?? [], at: generation, &p)
    }

    private func send(_ bytes: [UInt8], at generation: Int64, _ p: inout Progress) async throws {
        subscription.willSend()
        defer { subscription.didSend() }
        try await writer.send(bytes)
        p.sent = generation
        p.lastSend = ContinuousClock.now
    }

    /// The status an ending sends, with the last resume token queued before it.
    private func ending(_ reason: SubscriptionState.EndReason, resume: Int64) -> Error {
        let t = token(resume)
        return reason.error(resumeToken: t.bytes, generation: t.generation, maxLagGenerations: limits.maxLagGenerations)
    }
}

extension SubscriptionState.EndReason {
    /// The status a subscription (a store's or the key-value store's) ends with, carrying the
    /// last resume token queued before it in a `ResumeDetails`.
    func error(resumeToken: [UInt8], generation: Int64, maxLagGenerations: Int64) -> ServiceError {
        var d = Ubiquity_V1_ResumeDetails()
        d.resumeToken = Data(resumeToken)
        d.resumeGeneration = generation
        var e: ServiceError
        switch self {
        case .tooFarBehind:
            e = .exhausted("the subscriber stopped reading and fell more than \(maxLagGenerations) generations behind: resume from the resume_token in the ResumeDetails",
                           reason: .subscriberTooSlow)
        case .shutdown:
            e = ServiceError(code: .unavailable, reason: .shuttingDown, message: "the server is shutting down: resume from the resume_token in the ResumeDetails once it is back")
        case .storeClosed:
            e = ServiceError(code: .unavailable, reason: .storeClosed, message: "the store closed: resume from the resume_token in the ResumeDetails")
        case .storeReplaced:
            e = .precondition("the store was replaced: read a baseline at its current generation, then subscribe from it", reason: .storeReplaced)
        case .storeDestroyed:
            e = .notFound("the store was destroyed", reason: .storeNotFound)
        case .sessionRevoked:
            e = Authenticator.unauthenticated(reason: .sessionRevoked, "the session was signed out or its API key revoked: sign in again and resume from the resume_token in the ResumeDetails")
        case .sessionExpired:
            e = Authenticator.unauthenticated(reason: .sessionExpired, "the session expired: sign in again and resume from the resume_token in the ResumeDetails")
        }
        e.details = [d]
        return e
    }
}
