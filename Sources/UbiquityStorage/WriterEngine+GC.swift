import Foundation

extension WriterEngine {
    /// Raises the horizon to min(current, the readable window's floor, live pins, active reads),
    /// then deletes at most `limit` versions that ended at or before it, and applies the history
    /// and tombstone retention (`applyRetention`), in one short transaction.
    func gcBatch(_ conn: Connection, limit: Int) throws -> Int {
        guard let model = state.withLock({ $0.model }) else { return 0 }
        let now = config.clock()
        let horizon = state.withLock { s -> Int64 in
            s.pins = s.pins.filter { $0.value.expiry > now }
            var h = s.window.floor(current: s.generation, now: now)
            for p in s.pins.values { h = min(h, p.gen) }
            for g in s.activeReads.keys { h = min(h, g) }
            s.gcHorizon = max(s.gcHorizon, h)
            return s.gcHorizon
        }
        var removed = 0
        try conn.exec("BEGIN IMMEDIATE")
        do {
            try Meta.set(conn, "gc_horizon", .integer(horizon))
            for r in model.roots where removed < limit {
                let t = q(ResolvedModel.tableName(root: r))
                try conn.run(Self.gcVersionsSQL(table: t), [.integer(horizon), .integer(Int64(limit - removed))])
                removed += conn.changes
            }
            for j in model.joinTables where removed < limit {
                try conn.run("DELETE FROM \(q(j)) WHERE (src, dst, ended_gen) IN (SELECT src, dst, ended_gen FROM \(q(j)) WHERE ended_gen <= ? LIMIT ?)", [.integer(horizon), .integer(Int64(limit - removed))])
                removed += conn.changes
            }
            try applyRetention(conn, limit: limit)
            try conn.exec("COMMIT")
        } catch { if !conn.isAutocommit { try? conn.exec("ROLLBACK") }; throw error }
        return removed
    }

    /// One GC batch of a root table `t` (quoted): deletes at most ?2 versions that ended at or
    /// before ?1. The literal `ended_gen < live` lets SQLite pick the partial index
    /// `ubq_gc_<root>` (`WHERE ended_gen < live`, Model.swift): a bound parameter alone cannot
    /// prove the index's condition, so without it every batch scanned the whole table (W2 on a
    /// growing store: a 20-50 ms writer pause every 256 commits, ~8.5% of the writer's time).
    static func gcVersionsSQL(table t: String) -> String {
        "DELETE FROM \(t) WHERE (pk, ended_gen) IN (SELECT pk, ended_gen FROM \(t) WHERE ended_gen < \(ResolvedModel.live) AND ended_gen <= ?1 LIMIT ?2)"
    }

    func trimHistory(_ conn: Connection, through g: Int64) throws {
        try conn.exec("BEGIN IMMEDIATE")
        do { try trimHistoryInTxn(conn, through: g); try conn.exec("COMMIT") } catch { if !conn.isAutocommit { try? conn.exec("ROLLBACK") }; throw error }
    }

    func trimHistoryInTxn(_ conn: Connection, through g: Int64) throws {
        let cut = min(g, state.withLock { $0.generation })
        try HistorySize.forget(conn, through: cut)
        try conn.run("DELETE FROM ubq_history WHERE generation <= ?", [.integer(cut)])
        // idempotency records live as long as the history of their save
        try conn.run("DELETE FROM ubq_client_tx WHERE generation <= ?", [.integer(cut)])
        let h = max(cut, state.withLock { $0.historyHorizon })
        try Meta.set(conn, "history_horizon", .integer(h))
        state.withLock { $0.historyHorizon = h }
    }
}
