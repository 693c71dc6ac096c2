import Foundation

/// History and tombstone retention, applied by every GC batch inside its transaction
/// (docs/storage.md "History retention"). `DeleteHistory` (`Store.deleteHistory`) is the
/// explicit trim; this is the automatic one.
extension WriterEngine {
    /// Trims the oldest history transactions that any retention rule drops — more than
    /// `historyRetentionGenerations` behind current, committed before `historyRetentionSeconds`
    /// ago, or while the history holds more than `historyRetentionBytes` — reading at most
    /// `limit` history rows (the generation rule alone is not bounded, as before); then the
    /// tombstone index's entries older than `tombstoneRetentionSeconds` whose history is gone.
    func applyRetention(_ conn: Connection, limit: Int) throws {
        let (current, historyHorizon, tombstoneHorizon) = state.withLock { ($0.generation, $0.historyHorizon, $0.tombstoneHorizon) }
        let wallNow = config.wallClock()
        var cut = historyHorizon
        if let keep = config.historyRetentionGenerations { cut = max(cut, current - keep) }
        let ageCutoff = config.historyRetentionSeconds.map { Int64((wallNow - $0) * 1000) }
        let maxBytes = config.historyRetentionBytes
        let bytes = maxBytes == nil ? nil : try HistorySize.account(conn, through: current)
        if ageCutoff != nil || bytes.map({ $0 > maxBytes! }) == true {
            var remaining = bytes ?? 0
            var stopped = false
            var read = 0
            // what the generation rule trims anyway is not walked
            var after = cut
            if cut > historyHorizon, maxBytes != nil,
               case .integer(let gone) = try conn.scalar("SELECT coalesce(sum(length(changes)), 0) FROM ubq_history WHERE generation > ? AND generation <= ?",
                                                        [.integer(historyHorizon), .integer(cut)]) {
                remaining -= gone
            }
            // Small chunks, oldest first: usually the first row is kept and the walk ends there
            // (a statement cannot stop early, and each row read is an old, likely cold, page).
            // The record's length only when the size rule needs it: `length` reads the text.
            let sql = "SELECT generation, timestamp\(maxBytes == nil ? ", 0" : ", length(changes)") FROM ubq_history WHERE generation > ? ORDER BY generation LIMIT ?"
            while !stopped && read < max(1, limit) {
                let chunk = min(max(1, limit) - read, read == 0 ? 1 : 32)
                var n = 0
                try conn.query(sql, [.integer(after), .integer(Int64(chunk))]) { st in
                    n += 1
                    after = st.int(0)
                    if stopped { return }
                    let g = st.int(0)
                    let old = ageCutoff.map { st.int(1) < $0 } ?? false
                    let big = maxBytes.map { remaining > $0 } ?? false
                    if old || big { cut = max(cut, g); remaining -= st.int(2) } else { stopped = true }
                }
                read += n
                if n < chunk { break }
            }
        }
        cut = min(cut, current)
        if cut > historyHorizon { try trimHistoryInTxn(conn, through: cut) }
        if let keep = config.tombstoneRetentionSeconds {
            let h = state.withLock { $0.historyHorizon }
            // raised before COMMIT: a reader that finds the horizon unmoved after its read read
            // before the trim (`Store.deletions`)
            if let t = try Tombstones.trim(conn, olderThan: wallNow - keep, historyHorizon: h, horizon: tombstoneHorizon, limit: max(1, limit)) {
                state.withLock { $0.tombstoneHorizon = max($0.tombstoneHorizon, t) }
            }
        }
    }
}

/// The size of the history's change records (SQLite's `length`, characters of the JSON), kept
/// in ubq_meta as (bytes, through generation) and brought up to date by GC — never by a save:
/// a GC batch adds the records committed since the last one, a trim subtracts the records it
/// deletes, in the same transaction. A store without the keys (older, or a baseline copy) is
/// measured once, whole.
enum HistorySize {
    static let bytesKey = "history_bytes", throughKey = "history_bytes_through"

    /// The size of every record through `current` (which must be the store's current generation).
    static func account(_ c: Connection, through current: Int64) throws -> Int64 {
        var bytes: Int64 = 0, from: Int64 = -1
        if case .integer(let b) = try Meta.get(c, bytesKey), case .integer(let t) = try Meta.get(c, throughKey) { (bytes, from) = (b, t) }
        if from >= current { return bytes }
        if case .integer(let added) = try c.scalar("SELECT coalesce(sum(length(changes)), 0) FROM ubq_history WHERE generation > ?", [.integer(from)]) {
            bytes += added
        }
        try Meta.set(c, bytesKey, .integer(bytes))
        try Meta.set(c, throughKey, .integer(current))
        return bytes
    }

    /// Before deleting the history through `cut`: the records it deletes leave the size.
    static func forget(_ c: Connection, through cut: Int64) throws {
        guard case .integer(let b) = try Meta.get(c, bytesKey), case .integer(let t) = try Meta.get(c, throughKey) else { return }
        if case .integer(let gone) = try c.scalar("SELECT coalesce(sum(length(changes)), 0) FROM ubq_history WHERE generation <= ?", [.integer(min(cut, t))]) {
            try Meta.set(c, bytesKey, .integer(max(0, b - gone)))
        }
    }

    /// The last accounted size (nil: never measured).
    static func lastKnown(_ c: Connection) throws -> (bytes: Int64, through: Int64)? {
        guard case .integer(let b) = try Meta.get(c, bytesKey), case .integer(let t) = try Meta.get(c, throughKey) else { return nil }
        return (b, t)
    }

    /// A copy that no longer has the history the keys measured (a baseline) measures again.
    static func reset(_ c: Connection) throws {
        try c.run("DELETE FROM ubq_meta WHERE key IN (?, ?)", [.text(bytesKey), .text(throughKey)])
    }
}
