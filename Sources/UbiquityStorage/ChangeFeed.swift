import Foundation
import UbiquityLock

/// One committed save as the writer hands it over: what it already had when it wrote the history
/// row, undecoded (the writer's only extra work per save is keeping a reference to the bytes).
struct CommittedRecord: Sendable {
    let generation: Int64
    let timestampMS: Int64
    let author: String?
    let contextName: String?
    /// The history record's JSON (`HistoryJSON`), as stored in `ubq_history.changes`.
    let changes: [UInt8]
}

/// A committed transaction in the feed's window, decoded at most once — by its first reader, so
/// a store nobody subscribes to never pays for it — and shared by every subscriber. `derived`
/// holds what the layers above make from it once per transaction (its changed values, an encoded
/// form) instead of once per subscriber.
public final class FeedTransaction: Sendable {
    private let record: CommittedRecord
    private let token: GenerationToken
    private let decoded = Lock<HistoryTransaction?>(nil)
    /// The history record's size: what the window counts against `changeFeedWindowBytes`.
    public var recordBytes: Int { record.changes.count + 64 }
    /// Made on first use by a subscriber and kept for the others (two first users may both make
    /// a field; either result is kept).
    public let derived = Lock<Derived>(Derived())

    /// What subscribers derive from a transaction, typed.
    public struct Derived: Sendable {
        /// The transaction's encoded message for subscribers that take every change, names only.
        public var namesOnlyEncoding: [UInt8]?
        /// The values its inserts and updates wrote; nil until read.
        public var values: TransactionValues?
    }

    /// A transaction's changed values, read at its generation.
    public struct TransactionValues: Sendable {
        /// Values by object; nil when the versions it wrote were already collected.
        public var byObject: [ObjectID: ObjectSnapshot]?
        public init(byObject: [ObjectID: ObjectSnapshot]?) { self.byObject = byObject }
    }

    init(_ record: CommittedRecord, token: GenerationToken) {
        self.record = record
        self.token = token
    }

    public var generation: Int64 { record.generation }

    /// The transaction, decoded on first use (under its lock, so once).
    public var transaction: HistoryTransaction {
        decoded.withLock { d in
            if let d { return d }
            let t = HistoryTransaction(decoding: record.changes, token: token, timestampMS: record.timestampMS,
                                       author: record.author, contextName: record.contextName)
            d = t
            return t
        }
    }
}

/// What a reader of the feed finds after its position.
public enum FeedRead: Sendable {
    /// The transactions after the position, oldest first (at most the asked-for number).
    case transactions([FeedTransaction])
    /// The position is older than the window: read `ubq_history` from disk (`Store.history`),
    /// then ask again.
    case behind
    /// Nothing after the position yet: `wait` for it.
    case upToDate
    /// The store closed: no more transactions will come through this feed.
    case closed
}

/// The store's change feed: ONE component per store that every subscriber reads, so new history
/// costs at most one decode per transaction, not one SQLite query per subscriber
/// (docs/changes.md).
///
/// The writer hands over each committed group's records after the saves are acknowledged
/// (`publish`: an append to a window of recent transactions under a lock — the bytes it already
/// had, not decoded: decoding a 100-insert record on a queue beside the writer cost W2 35% of its
/// rate on two cores — and, only if subscribers wait, one dispatch that wakes them). Subscribers
/// keep only their position: a slow one that falls out of the window reads the history from
/// disk (`.behind`), which costs it, never the writer or the others, anything.
///
/// The window holds consecutive history: every transaction with a generation in
/// (`base`, `published`]. A generation change the feed was not told about in order (an
/// exclusive writer job: migration, bulk load) resets it (`base = published = generation`):
/// readers behind it then read those transactions from disk.
public final class ChangeFeed: Sendable {
    let storeID: UUID
    private let maxTransactions: Int
    private let maxBytes: Int
    private let queue: DispatchQueue

    private struct State {
        var epoch: UInt64
        var base: Int64
        var published: Int64
        /// The window, oldest first, from `head` (trimming moves `head`; the array is compacted
        /// once most of it is trimmed, so a trim is O(1) amortised and a read a binary search).
        var entries: [FeedTransaction] = []
        var head = 0
        var count: Int { entries.count - head }
        mutating func clear() { entries = []; head = 0; bytes = 0 }
        var bytes = 0
        var closed = false
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
        var poked: Set<UInt64> = []
    }
    private let state: Lock<State>

    init(storeID: UUID, epoch: UInt64, generation: Int64, maxTransactions: Int, maxBytes: Int) {
        self.storeID = storeID
        self.maxTransactions = max(1, maxTransactions)
        self.maxBytes = max(1, maxBytes)
        queue = DispatchQueue(label: "ubiquity.feed." + storeID.uuidString.prefix(8).lowercased(), qos: .userInitiated)
        state = Lock(State(epoch: epoch, base: generation, published: generation))
    }

    /// The newest generation the feed has published.
    public var publishedGeneration: Int64 { state.withLock { $0.published } }

    // MARK: writer side

    /// Called on the writer thread after a group committed: hands the records over (no decoding
    /// here: the writer is W2's bottleneck).
    func publish(_ records: [CommittedRecord], epoch: UInt64) {
        if records.isEmpty { return }
        let sid = storeID
        append(records.map { FeedTransaction($0, token: GenerationToken(storeID: sid, epoch: epoch, generation: $0.generation)) }, epoch: epoch)
    }

    /// Called on the writer thread after an exclusive job (migration, bulk load, trims): if the
    /// generation moved without `publish`, the window restarts at it.
    func noteGeneration(_ generation: Int64, epoch: UInt64) {
        let waiters = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            guard generation > s.published || epoch != s.epoch else { return [] }
            s.epoch = epoch
            s.clear()
            s.base = generation; s.published = generation
            return Self.takeWaiters(&s)
        }
        resume(waiters)
    }

    /// Wakes subscribers off the writer thread (resuming a continuation schedules its task).
    private func resume(_ waiters: [CheckedContinuation<Void, Never>]) {
        if waiters.isEmpty { return }
        queue.async { waiters.forEach { $0.resume() } }
    }

    private func append(_ txs: [FeedTransaction], epoch: UInt64) {
        let waiters = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            if s.closed { return [] }
            if epoch != s.epoch || txs[0].generation <= s.published || txs[0].generation != s.published + 1 && !s.entries.isEmpty {
                // Not the next transactions in order (an exclusive job moved the generation in
                // between): restart the window before them.
                s.epoch = epoch
                s.clear()
                s.base = txs[0].generation - 1
            } else if s.entries.isEmpty {
                s.base = txs[0].generation - 1
            }
            for t in txs {
                s.entries.append(t); s.bytes += t.recordBytes
            }
            s.published = txs[txs.count - 1].generation
            while s.count > maxTransactions || (s.bytes > maxBytes && s.count > 1) {
                let old = s.entries[s.head]
                s.bytes -= old.recordBytes
                s.base = old.generation
                s.head += 1
            }
            if s.head > 1024 && s.head * 2 > s.entries.count { s.entries.removeFirst(s.head); s.head = 0 }
            return Self.takeWaiters(&s)
        }
        resume(waiters)
    }

    private static func takeWaiters(_ s: inout State) -> [CheckedContinuation<Void, Never>] {
        if s.waiters.isEmpty { return [] }
        defer { s.waiters.removeAll(keepingCapacity: true) }
        return Array(s.waiters.values)
    }

    // MARK: reader side

    /// Up to `limit` transactions after `generation`, or where to get them instead.
    public func read(after generation: Int64, limit: Int) -> FeedRead {
        state.withLock { s in
            if s.closed { return .closed }
            if generation >= s.published { return .upToDate }
            if generation < s.base { return .behind }
            // first entry with generation > `generation`
            var lo = s.head, hi = s.entries.count
            while lo < hi {
                let mid = (lo + hi) / 2
                if s.entries[mid].generation <= generation { lo = mid + 1 } else { hi = mid }
            }
            let end = min(s.entries.count, lo + max(1, limit))
            return .transactions(Array(s.entries[lo..<end]))
        }
    }

    /// Returns once the feed has something after `generation`, the store closed, `wake(id)` was
    /// called (before or during the wait), or the task was cancelled. `id` names the waiter (one
    /// per subscriber).
    public func wait(after generation: Int64, id: UInt64) async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                let now = state.withLock { s -> Bool in
                    if s.poked.remove(id) != nil || s.closed || s.published > generation { return true }
                    s.waiters[id] = c
                    return false
                }
                if now { c.resume() }
            }
        } onCancel: {
            wake(id)
        }
    }

    /// Wakes waiter `id` (its next `wait` returns at once if it is not waiting now).
    public func wake(_ id: UInt64) {
        let c = state.withLock { s -> CheckedContinuation<Void, Never>? in
            if let c = s.waiters.removeValue(forKey: id) { return c }
            s.poked.insert(id)
            return nil
        }
        c?.resume()
    }

    /// Clears a leftover wake-up of waiter `id` (a subscription that ended).
    public func forget(_ id: UInt64) {
        let c = state.withLock { s -> CheckedContinuation<Void, Never>? in
            s.poked.remove(id)
            return s.waiters.removeValue(forKey: id)
        }
        c?.resume()
    }

    /// The store closed: waiters return and see `.closed`.
    func close() {
        let waiters = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            s.closed = true
            s.clear()
            return Self.takeWaiters(&s)
        }
        waiters.forEach { $0.resume() }
    }
}

extension HistoryTransaction {
    /// A history row as stored (`ubq_history`): the one decoding of the record for disk reads and
    /// the feed. A record that does not decode reads as no changes (it was written by this code);
    /// a store event's record reads as no changes carrying the event.
    init(decoding changes: [UInt8], token: GenerationToken, timestampMS: Int64, author: String?, contextName: String?) {
        let event = StoreEventRecord.decode(changes)
        self.init(token: token, timestamp: Date(timeIntervalSince1970: Double(timestampMS) / 1000), author: author, contextName: contextName,
                  changes: event != nil ? [] : (try? JSONDecoder().decode([HistoryChange].self, from: Data(changes))) ?? [], event: event)
    }
}
