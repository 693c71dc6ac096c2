import Foundation

// A device's local key-value entries moved into its account at first sign-in (docs/keyvalue.md
// "First sign-in"). One SQLite transaction copies them and removes them from the device's local
// pseudo-account, so a kill leaves them either all still local or all moved: the import job redoes
// the move after a restart and finds nothing left to move — never twice, never lost.
//
// The same transaction records the move in `ubq_kv_moved` (keyed by the local pseudo-account):
// - its counts, which a redo returns — the SignIn reports them (`ImportCounts`) even when a kill
//   fell between the move's commit and the job's next state;
// - a seal: a write to the local pseudo-account after the move is refused (`.movedAway`), so a
//   write that got past authentication just before the import revoked its session can never
//   commit into entries nobody will read (docs/keyvalue.md "First sign-in"). The local
//   pseudo-account is never reused (a device working locally again gets a new one), so the seal
//   never has to be lifted.
// Neither is needed for ever: `forgetMoves` removes a record once its import job has ended (no
// redo asks for the counts) and no write of the sealed pseudo-account can still be in flight.
extension KeyValueStore {
    /// How many local keys a move took into the account, and how many the account already had set.
    public struct MoveCounts: Sendable, Equatable {
        public var moved: Int64 = 0
        public var kept: Int64 = 0
        public init(moved: Int64 = 0, kept: Int64 = 0) { self.moved = moved; self.kept = kept }
    }

    /// What moving a device's local entries into its account does (or would do).
    public struct Move: Sendable, Equatable {
        /// The account's rows written: local keys the account did not have set, now set to the
        /// local value (origin `.accountChange`), in key order.
        public var written: [Entry] = []
        /// Local keys the account already had set: the account's value was kept.
        public var kept: [String] = []
        /// The account's usage before and after.
        public var usageBefore = KeyValueUsage()
        public var usage = KeyValueUsage()
        /// The account's position after (its last write's seq; unchanged if nothing was written).
        public var seq: Int64 = 0
        /// `written` and `kept` counted; for a redo of a move already made (`written` and `kept`
        /// empty), the counts that move recorded.
        public var counts = MoveCounts()
    }

    /// The rule for a key in both (NSUbiquitousKeyValueStore's: on an account's initial sync the
    /// account's values are the truth): a key the account has set keeps the account's value; a
    /// local key the account does not have set (never written, or deleted) takes the local value
    /// with the next version. Pure: the local keys' entries, the account's rows for those keys,
    /// and its position and usage in; the rows to write out.
    static func plan(local: [Entry], account rows: [String: Entry], seq: Int64, usage: KeyValueUsage, trimmedVersion: Int64 = 0,
                     nowMS: Int64) -> Move {
        var m = Move(usageBefore: usage, usage: usage, seq: seq)
        for e in local.sorted(by: { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }) where !e.deleted {
            let current = rows[e.key]
            if let c = current, !c.deleted { m.kept.append(e.key); continue }
            m.seq += 1
            m.written.append(Entry(key: e.key, value: e.value, version: (current?.version ?? trimmedVersion) + 1, seq: m.seq, deleted: false,
                                   author: e.author, updatedMS: nowMS, origin: .accountChange))
            m.usage = m.usage.setting(keyBytes: e.key.utf8.count, oldValueBytes: nil, valueBytes: e.value.count)
        }
        m.counts = MoveCounts(moved: Int64(m.written.count), kept: Int64(m.kept.count))
        return m
    }

    /// The counts of the move already made out of `local`, if one was.
    static func recordedMove(_ c: Connection, _ local: String) throws -> MoveCounts? {
        var found: MoveCounts?
        try c.query("SELECT moved, kept FROM ubq_kv_moved WHERE local = ?", [.text(local)]) { found = MoveCounts(moved: $0.int(0), kept: $0.int(1)) }
        return found
    }

    static func movedAway(_ c: Connection, _ account: String) throws -> Bool { try recordedMove(c, account) != nil }

    private static func plan(_ c: Connection, from local: String, to account: String, nowMS: Int64) throws -> Move {
        var entries: [Entry] = []
        try c.query("SELECT \(columns) FROM ubq_kv WHERE account = ? AND deleted = 0", [.text(local)]) { entries.append(entry($0)) }
        var rows: [String: Entry] = [:]
        for e in entries { rows[e.key] = try row(c, account: account, key: e.key) }
        let acct = try Self.account(c, account)
        return plan(local: entries, account: rows, seq: acct.seq, usage: acct.usage, trimmedVersion: acct.trimmedVersion, nowMS: nowMS)
    }

    /// What `moveLocalEntries` would do now (a first sign-in checks the quotas with it before the
    /// import job is recorded).
    public func planMove(from local: String, to account: String) throws -> Move {
        try reader.withConnection { c in
            try c.run("BEGIN")
            defer { try? c.run("COMMIT") }
            return try Self.plan(c, from: local, to: account, nowMS: Int64(Date().timeIntervalSince1970 * 1000))
        }
    }

    /// Moves `local`'s set keys into `account` by the rule of `plan`, removes `local`'s entries
    /// and counters, and records the move (its counts, and the seal that refuses `local` any
    /// further write), in one transaction; a redo writes nothing and returns the recorded
    /// counts. Quotas are not enforced here: the sign-in checked
    /// them before the job began, and an account that other devices filled meanwhile takes the
    /// device's keys anyway and is left over its quota (like one over a lowered quota: it can
    /// shrink) rather than lose them; the caller tells its subscribers (QUOTA_VIOLATION).
    public func moveLocalEntries(from local: String, to account: String,
                                 nowMS: Int64 = Int64(Date().timeIntervalSince1970 * 1000)) throws -> Move {
        try writer.withConnection { c in
            try c.run("BEGIN IMMEDIATE")
            do {
                if let done = try Self.recordedMove(c, local) {
                    try c.run("ROLLBACK")
                    let acct = try Self.account(c, account)
                    return Move(usageBefore: acct.usage, usage: acct.usage, seq: acct.seq, counts: done)
                }
                let m = try Self.plan(c, from: local, to: account, nowMS: nowMS)
                for e in m.written { try Self.put(c, account: account, e) }
                if !m.written.isEmpty { try Self.putAccount(c, account: account, seq: m.seq, usage: m.usage) }
                try c.run("DELETE FROM ubq_kv WHERE account = ?", [.text(local)])
                try c.run("DELETE FROM ubq_kv_accounts WHERE account = ?", [.text(local)])
                try c.run("INSERT INTO ubq_kv_moved(local, account, moved, kept, moved_ms) VALUES (?, ?, ?, ?, ?)",
                          [.text(local), .text(account), .integer(m.counts.moved), .integer(m.counts.kept), .integer(nowMS)])
                try c.run("COMMIT")
                return m
            } catch { try? c.run("ROLLBACK"); throw error }
        }
    }

    /// How long a move's record is kept past the move, at least, while the server runs: longer
    /// than any write of the sealed local pseudo-account can still be on its way. Such a write was
    /// authenticated before the import revoked the pseudo-account's sessions (which comes before
    /// the move), so it is already past authentication and waits only for this file's writer lock,
    /// whose holders are single short transactions and, at worst, a backup's copy of this small
    /// file (`backup(to:)`): seconds. A day is far beyond that, and a day of records is a few
    /// bytes per device that signed in. At startup, when nothing is in flight, no wait is needed.
    public static let movedRecordSeconds: Double = 86_400

    /// Removes, in one transaction, the records of moves made before `cutoffMS` (milliseconds
    /// since 1970) out of local pseudo-accounts not in `pending` (those whose import job has not
    /// ended: a redo of its move reads the counts). The caller picks the cutoff so that no write
    /// of a sealed pseudo-account can still be in flight: the start of the process, before it
    /// serves, or `movedRecordSeconds` ago. Without the record, a write of that pseudo-account is
    /// a write again — which nobody can make any more: its sessions are revoked, and it is never
    /// reused. Returns how many records it removed.
    @discardableResult
    public func forgetMoves(before cutoffMS: Int64, except pending: Set<String>) throws -> Int {
        try writer.withConnection { c in
            try c.run("BEGIN IMMEDIATE")
            do {
                var ended: [String] = []
                try c.query("SELECT local FROM ubq_kv_moved WHERE moved_ms < ?", [.integer(cutoffMS)]) { row in
                    let local = row.text(0)
                    if !pending.contains(local) { ended.append(local) }
                }
                for local in ended { try c.run("DELETE FROM ubq_kv_moved WHERE local = ?", [.text(local)]) }
                try c.run("COMMIT")
                return ended.count
            } catch { try? c.run("ROLLBACK"); throw error }
        }
    }

    /// How many move records are kept.
    func movedRecords() throws -> Int {
        try reader.withConnection { c in
            var n = 0
            try c.query("SELECT count(*) FROM ubq_kv_moved") { n = Int($0.int(0)) }
            return n
        }
    }
}
