import Foundation

/// A store transition's announcement (SPEC §4.6: StoresWillChange / StoresDidChange), kept as an
/// entry of the store's history (docs/lifecycle.md "Where events live").
///
/// An event takes a generation of its own, written by the store's writer like a save's record:
/// its order with the transactions around it is the writer's commit order, and a subscriber that
/// resumes from an older token replays it in that order from disk or the feed, with a resume
/// token of its own. The history row keeps `changes` for the event (`{"storeEvent":{…}}` instead
/// of a list of changes; a read sees a transaction without changes carrying `event`), so store
/// files need no new table or column and older rows read as before.
public struct StoreEventRecord: Codable, Sendable, Equatable {
    public enum Phase: String, Codable, Sendable { case willChange, didChange }
    public enum Transition: String, Codable, Sendable { case accountAdded, accountRemoved, contentRemoved, initialImportCompleted }

    /// What an initial import did (`didChange` of `initialImportCompleted`).
    public struct ImportCounts: Codable, Sendable, Equatable {
        public var inserted: Int64, merged: Int64, deduplicated: Int64
        /// Local key-value entries moved into the account, and kept as the account had them. Nil
        /// on events written before they were counted (their JSON lacks them) and read as 0.
        public var keyValuesMoved: Int64?, keyValuesKept: Int64?
        public init(inserted: Int64, merged: Int64, deduplicated: Int64, keyValuesMoved: Int64? = nil, keyValuesKept: Int64? = nil) {
            self.inserted = inserted; self.merged = merged; self.deduplicated = deduplicated
            self.keyValuesMoved = keyValuesMoved; self.keyValuesKept = keyValuesKept
        }
        /// What `counts` says, as an event records it.
        public init(_ c: ImportJobCounts) {
            self.init(inserted: c.inserted, merged: c.merged, deduplicated: c.deduplicated,
                      keyValuesMoved: c.keyValuesMoved, keyValuesKept: c.keyValuesKept)
        }
    }

    public var phase: Phase
    public var transition: Transition
    /// The device it concerns (a sign-out concerns one device); nil: every device.
    public var device: String?
    /// Whether the device(s) concerned now work in a local fallback store.
    public var usingLocalStorage: Bool
    public var importCounts: ImportCounts?
    /// The transition both phases belong to (one UUID per `StoreTransitions.run`): what pairs a
    /// DID_CHANGE with its WILL_CHANGE in `AnnouncementLog`, where two sign-outs of one account
    /// interleave. Nil on events written before it existed. Not sent to clients.
    public var transitionID: String?
    /// Set (true) on a DID_CHANGE that closes a WILL_CHANGE whose transition did not happen: its
    /// body failed, a later store's announcement failed, or the process was killed before the
    /// transition was recorded (docs/lifecycle.md "Every WILL_CHANGE is closed"). Nil, not false,
    /// otherwise, so older history rows and this one's bytes stay as they were.
    public var cancelled: Bool?

    public init(phase: Phase, transition: Transition, device: String? = nil, usingLocalStorage: Bool = false,
                importCounts: ImportCounts? = nil, transitionID: String? = nil, cancelled: Bool? = nil) {
        self.phase = phase; self.transition = transition; self.device = device
        self.usingLocalStorage = usingLocalStorage; self.importCounts = importCounts
        self.transitionID = transitionID; self.cancelled = cancelled
    }

    /// The DID_CHANGE that closes this WILL_CHANGE as not having happened: nothing changed, so
    /// the devices work where they did before.
    public func cancelling() -> StoreEventRecord {
        StoreEventRecord(phase: .didChange, transition: transition, device: device, usingLocalStorage: usingLocalStorage,
                         transitionID: transitionID, cancelled: true)
    }

    /// The DID_CHANGE that closes this WILL_CHANGE as having happened (`after`: whether the
    /// devices now work in a local store).
    public func completing(usingLocalStorage after: Bool) -> StoreEventRecord {
        StoreEventRecord(phase: .didChange, transition: transition, device: device, usingLocalStorage: after, transitionID: transitionID)
    }

    /// Whether a subscriber of `device` (nil: authentication off) gets it.
    public func concerns(device subscriber: String?) -> Bool { device == nil || device == subscriber }

    /// The history row's author: events are told apart by their record, this only reads well.
    static let author = "ubiquity.store-event"

    private struct Wrapper: Codable { var storeEvent: StoreEventRecord }

    func encoded() throws -> [UInt8] { Array(try JSONEncoder().encode(Wrapper(storeEvent: self))) }

    /// The event a history record holds, if it is one (a save's record is a JSON list).
    static func decode(_ record: [UInt8]) -> StoreEventRecord? {
        guard record.first == UInt8(ascii: "{") else { return nil }
        return try? JSONDecoder().decode(Wrapper.self, from: Data(record)).storeEvent
    }
}

extension Store {
    /// Appends `event` to the store's history at the next generation, alone on the writer (not
    /// grouped with saves), and hands it to the change feed like a committed save. Returns its
    /// generation token.
    ///
    /// `once`: a key making the append idempotent — the event is written in the same transaction
    /// as a note of the key (`ubq_meta` "event:<key>"), and an append whose key is already noted
    /// writes nothing and returns the token it was written at. A job that announces and is killed
    /// before recording so (the first-sign-in import's DID_CHANGE) redoes the append safely.
    /// The store's `AnnouncementLog` (which WILL_CHANGE events are still open) is updated in the
    /// same transaction.
    public func appendEvent(_ event: StoreEventRecord, once: String? = nil) async throws -> GenerationToken {
        let json = try event.encoded()
        return try await onWriter { conn, engine in
            let (gen, epoch) = engine.state.withLock { ($0.generation + 1, $0.epoch) }
            if let once, case .integer(let at) = try Meta.get(conn, "event:" + once) {
                return GenerationToken(storeID: engine.storeID, epoch: epoch, generation: at)
            }
            let ms = Int64(Date().timeIntervalSince1970 * 1000)
            try conn.exec("BEGIN IMMEDIATE")
            do {
                var log = try AnnouncementLog.read(conn)
                log.append(event)
                try log.write(conn)
                try Meta.set(conn, "generation", .integer(gen))
                if let once { try Meta.set(conn, "event:" + once, .integer(gen)) }
                try conn.run("INSERT INTO ubq_history (generation, timestamp, author, context, changes) VALUES (?, ?, ?, NULL, ?)",
                             [.integer(gen), .integer(ms), .text(StoreEventRecord.author), .text(String(decoding: json, as: UTF8.self))])
                try conn.exec("COMMIT")
            } catch { if !conn.isAutocommit { try? conn.exec("ROLLBACK") }; throw error }
            let now = engine.config.clock()
            engine.state.withLock { $0.generation = gen; $0.window.advanced(from: gen - 1, to: gen, at: now) }
            // in order with the saves before it: the feed's window stays whole
            engine.feed.publish([CommittedRecord(generation: gen, timestampMS: ms, author: StoreEventRecord.author, contextName: nil, changes: json)], epoch: epoch)
            engine.afterCommit(conn)
            return GenerationToken(storeID: engine.storeID, epoch: epoch, generation: gen)
        }
    }
}
