import Foundation

// Trimming key-value tombstones (docs/keyvalue.md "Tombstones"). A deleted key stays as a
// tombstone so that a subscriber resuming from an older token learns of the deletion; kept
// forever, an account that churns through key names grows without bound. Like a store's history
// (docs/changes.md "Retention"), tombstones are kept for a retention period, and a token older
// than what was trimmed can no longer be served gap-free: it fails with HISTORY_EXPIRED and the
// client starts again from a baseline.
extension KeyValueStore {
    /// Removes every tombstone last changed before `cutoffMS` (milliseconds since 1970), in one
    /// transaction that also raises each account's trim floor (`ubq_kv_accounts.trimmed`) to the
    /// highest seq it removed — from then on a position below the floor may have missed a
    /// deletion (`trimFloor`) — and its `trimmed_version` to the highest version it removed: a key
    /// set anew starts above it, so an `expected_version` of a trimmed incarnation never matches
    /// (no ABA, as while the tombstone was kept). Returns how many tombstones it removed.
    ///
    /// Its cost scales with what it trims, not with the table: it reads the tombstones older than
    /// the cutoff through `ubq_kv_tombstones` (a partial, covering index of tombstones only, by
    /// age), updates the accounts they belong to, and deletes them through the same index. On a
    /// table of 1,000,000 entries of 100,000 accounts, trimming 100 tombstones took 11 ms (mostly
    /// the commit's fsync) and 1,000 took 19 ms, where the full scan it replaced took 0.4–0.5 s
    /// whatever it trimmed (docs/benchmarks.md "Key-value tombstone trim").
    @discardableResult
    public func trimTombstones(before cutoffMS: Int64) throws -> Int {
        try writer.withConnection { c in
            try c.run("BEGIN IMMEDIATE")
            do {
                var floors: [(account: String, seq: Int64, version: Int64)] = []
                try c.query(Self.trimStatements[0], [.integer(cutoffMS)]) { floors.append(($0.text(0), $0.int(1), $0.int(2))) }
                for f in floors {
                    try c.run("""
                        UPDATE ubq_kv_accounts SET trimmed = max(trimmed, ?), trimmed_version = max(trimmed_version, ?) WHERE account = ?
                        """, [.integer(f.seq), .integer(f.version), .text(f.account)])
                }
                try c.run(Self.trimStatements[1], [.integer(cutoffMS)])
                let removed = Int(c.changes)
                try c.run("COMMIT")
                return removed
            } catch { try? c.run("ROLLBACK"); throw error }
        }
    }

    /// The trim's reads of the table, each bound to the cutoff: the trimmed tombstones' highest
    /// seq and version per account, then their deletion. INDEXED BY: without statistics the
    /// planner prefers the primary key's order for the GROUP BY, a scan of every entry
    /// (`KeyValueTrimTests` checks both plans).
    static let trimStatements = [
        """
        SELECT account, max(seq), max(version) FROM ubq_kv INDEXED BY ubq_kv_tombstones
        WHERE deleted = 1 AND updated_ms < ? GROUP BY account
        """,
        "DELETE FROM ubq_kv INDEXED BY ubq_kv_tombstones WHERE deleted = 1 AND updated_ms < ?",
    ]

    /// The account's trim floor: the highest seq of a tombstone trimmed (0: none ever was). A
    /// subscriber at a position below it may have missed a deletion.
    public func trimFloor(account: String) throws -> Int64 {
        try reader.withConnection { c in try Self.floor(c, account) }
    }

    private static func floor(_ c: Connection, _ account: String) throws -> Int64 {
        if case .integer(let v) = try c.scalar("SELECT trimmed FROM ubq_kv_accounts WHERE account = ?", [.text(account)]) { return v }
        return 0
    }

    /// `changes(account:after:limit:)` and the trim floor from one snapshot: with the floor at
    /// or below `seq`, no tombstone after `seq` had been trimmed when the page was read, so the
    /// page misses nothing (two separate reads could let a trim fall between them).
    public func changesAndFloor(account: String, after seq: Int64, limit: Int) throws -> (entries: [Entry], floor: Int64) {
        try reader.withConnection { c in
            try c.run("BEGIN")
            defer { try? c.run("COMMIT") }
            return (try Self.changes(c, account: account, after: seq, limit: limit), try Self.floor(c, account))
        }
    }
}
