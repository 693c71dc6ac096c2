import Foundation

/// The tombstone index: one compact row per deleted object (generation of its delete, pk,
/// entity, wall-clock second), written in the deleting save's own SQLite transaction and kept
/// longer than the history (`StorageConfiguration.tombstoneRetentionSeconds`). A client whose
/// feed token expired reads a baseline at the current generation and removes the IDs deleted
/// since its token instead of wiping its cache (docs/storage.md "Tombstone index").
///
/// `tombstone_horizon` (ubq_meta) is the generation after which every deletion is indexed: 0 for
/// a store made with the index, the generation at which an older store first opened with it.
enum Tombstones {
    static let horizonKey = "tombstone_horizon"

    /// WITHOUT ROWID on (generation, pk): rows are appended in key order (generations only
    /// grow), a page after a position is a range read, and a trim deletes a key prefix.
    /// Returns whether the table existed before.
    static func createTable(_ c: Connection) throws -> Bool {
        let existed = try c.scalar("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'ubq_tombstones'") != .integer(0)
        try c.exec("CREATE TABLE IF NOT EXISTS ubq_tombstones (generation INTEGER NOT NULL, pk INTEGER NOT NULL, entity TEXT NOT NULL, deleted_at INTEGER NOT NULL, PRIMARY KEY (generation, pk)) WITHOUT ROWID")
        return existed
    }

    /// One row per delete of a save (its history's final changes: an object inserted and deleted
    /// by the same save is in neither). Runs inside the save's savepoint: rolled back with it.
    static func record(_ c: Connection, generation: Int64, deletedAt: Double, _ changes: [HistoryChange]) throws {
        let at = Int64(deletedAt)
        for ch in changes where ch.kind == .delete {
            try c.run("INSERT INTO ubq_tombstones (generation, pk, entity, deleted_at) VALUES (?, ?, ?, ?)",
                      [.integer(generation), .integer(ch.objectID.pk), .text(ch.entity), .integer(at)])
        }
    }

    /// GC's part (inside its transaction): deletes whole generations, oldest first, whose rows
    /// were deleted before `olderThan` (wall-clock seconds) and whose history is gone (at or
    /// before `historyHorizon`), reading at most `limit` rows. Returns the new horizon if it moved.
    static func trim(_ c: Connection, olderThan cutoff: Double, historyHorizon: Int64, horizon: Int64, limit: Int) throws -> Int64? {
        var cut = horizon
        var stopped = false
        try c.query("SELECT generation, deleted_at FROM ubq_tombstones WHERE generation > ? AND generation <= ? ORDER BY generation, pk LIMIT ?",
                    [.integer(horizon), .integer(historyHorizon), .integer(Int64(limit))]) { st in
            if stopped { return }
            if Double(st.int(1)) < cutoff { cut = st.int(0) } else { stopped = true }
        }
        // The horizon moves only to a trimmed deletion: a token after it but before the next
        // deletion is still covered (nothing was deleted in between).
        guard cut > horizon else { return nil }
        try c.run("DELETE FROM ubq_tombstones WHERE generation <= ?", [.integer(cut)])
        try Meta.set(c, horizonKey, .integer(cut))
        return cut
    }
}

/// One entry of the tombstone index.
public struct DeletedObject: Sendable, Hashable {
    public var objectID: ObjectID
    /// The generation of the transaction that deleted it.
    public var generation: Int64
}

/// A page of `Store.deletions(after:)`.
public struct DeletionsPage: Sendable {
    /// In deletion order (generation, then pk).
    public var deletions: [DeletedObject]
    /// Where the next page starts: pass as `after` / `afterPK`. `afterPK` is `Int64.max` when
    /// the page ended at a generation's end (the position is then a plain generation token).
    public var nextToken: GenerationToken
    public var nextAfterPK: Int64
    public var hasMore: Bool
    /// The store's current generation when the page was read (deletions through it were looked at).
    public var current: GenerationToken
}
