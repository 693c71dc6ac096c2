import Foundation

/// Every account's key-value entries, in one server-wide database (`<root>/keyvalue.sqlite`;
/// docs/keyvalue.md "Storage" says why one file and not one per account).
///
/// Small and rarely written: one writer connection behind a lock, the database's only writer
/// (SPEC §4.8), and one read-only connection behind another for every read, so a read never
/// waits for a write's fsync (WAL: readers see the last commit). Every write is one SQLite
/// transaction with `synchronous=FULL`: durable when it returns.
///
/// Each key keeps its latest state — a deleted key stays as a tombstone — with the account's
/// change sequence number (`seq`) of its last change, so "what changed after seq S" is one range
/// read (`changes(account:after:limit:)`): the key-value change feed is this table, compacted to
/// each key's latest change.
public final class KeyValueStore: Sendable {
    /// One key's latest state.
    public struct Entry: Sendable, Equatable {
        public var key: String
        /// Empty for a tombstone.
        public var value: [UInt8]
        public var version: Int64
        /// The account's change sequence number of this key's last change.
        public var seq: Int64
        public var deleted: Bool
        public var author: String
        public var updatedMS: Int64
        /// How its last change came about.
        public var origin: Origin

        public init(key: String, value: [UInt8], version: Int64, seq: Int64, deleted: Bool, author: String, updatedMS: Int64,
                    origin: Origin = .write) {
            self.key = key; self.value = value; self.version = version; self.seq = seq
            self.deleted = deleted; self.author = author; self.updatedMS = updatedMS; self.origin = origin
        }
    }

    /// How a key's last change came about (`ubq_kv.origin`): the feed's reason for it.
    public enum Origin: Int64, Sendable, Equatable {
        /// A device's Set or Delete.
        case write = 0
        /// Moved in from a device's local key-value entries at its first sign-in
        /// (`moveLocalEntries`): the account changed under the device.
        case accountChange = 1
    }

    /// A write's condition on the key's current state.
    public enum Condition: Sendable, Equatable {
        case none
        /// The key is set at exactly this version.
        case version(Int64)
        case mustNotExist
    }

    /// What a write did.
    public enum WriteOutcome: Sendable, Equatable {
        /// Written: the key's new state (a tombstone for a delete).
        case written(Entry)
        /// A delete of a key that is not set: nothing changed. `seq` is the account's position.
        case absent(version: Int64, seq: Int64)
        /// The condition does not hold: nothing changed.
        case conflict(exists: Bool, version: Int64)
        /// The write would exceed a quota: nothing changed.
        case quota(KeyValueQuotas.Violation)
        /// The account's entries were moved into another account at a first sign-in
        /// (`moveLocalEntries`): it takes no more writes, nothing changed. A write that got past
        /// authentication before the move revoked its session lands here instead of in a store
        /// nobody reads any more.
        case movedAway
    }

    /// A page of `list`.
    public struct Page: Sendable {
        public var entries: [Entry]
        /// More keys with the prefix follow the last entry.
        public var hasMore: Bool
        /// The account's position when the page was read.
        public var seq: Int64
        public var usage: KeyValueUsage
    }

    public let quotas: KeyValueQuotas
    let writer: ConnectionLock
    let reader: ConnectionLock

    /// Copies every account's entries into a new file (VACUUM INTO, for a backup), on the
    /// writer connection: VACUUM INTO writes its target through the source connection, and the
    /// reader is read-only. Key-value writes wait for the copy (the file is small).
    public func backup(to destination: String) throws {
        try writer.withConnection { try $0.vacuumInto(destination) }
    }

    /// The connection under an NSLock: it is not Sendable, and is adopted and released inside the
    /// lock (`ConnectionOwner`), so only the thread holding the lock uses it.
    final class ConnectionLock: @unchecked Sendable {
        private let lock = NSLock()
        private var conn: Connection?
        init(_ c: Connection) { conn = c }
        func withConnection<R>(_ body: (Connection) throws -> R) throws -> R {
            lock.lock(); defer { lock.unlock() }
            guard let c = conn else { throw StorageError(.storeClosed, "the key-value store is closed") }
            c.adoptThread()
            defer { c.releaseThread() }
            return try body(c)
        }
        func close() {
            lock.lock(); defer { lock.unlock() }
            conn?.adoptThread(); conn?.close(); conn = nil
        }
    }

    /// Opens (creating if needed) the key-value database at `path`.
    public init(path: String, quotas: KeyValueQuotas = KeyValueQuotas()) throws {
        let c = try Connection(path: path, readOnly: false, vfs: nil, busyTimeoutMS: 5000)
        do {
            try c.exec("PRAGMA journal_mode=WAL")
            try c.exec("PRAGMA synchronous=FULL")
            // a value overwritten or a row deleted leaves no copy in its page's free space (no
            // extra I/O in FAST mode): a deleted account's entries do not outlive it on disk
            try c.exec("PRAGMA secure_delete=FAST")
            // a kill between a deletion's commit and its checkpoint left the zeroed pages only in
            // the WAL and the old ones in the file: copy them in now (Connection.erasing)
            _ = c.checkpoint(.truncate)
            try c.exec("""
                CREATE TABLE IF NOT EXISTS ubq_kv(account TEXT NOT NULL, key TEXT NOT NULL, value BLOB NOT NULL,
                    version INTEGER NOT NULL, seq INTEGER NOT NULL, deleted INTEGER NOT NULL, author TEXT NOT NULL,
                    updated_ms INTEGER NOT NULL, origin INTEGER NOT NULL DEFAULT 0, PRIMARY KEY(account, key)) WITHOUT ROWID;
                CREATE INDEX IF NOT EXISTS ubq_kv_by_seq ON ubq_kv(account, seq);
                CREATE TABLE IF NOT EXISTS ubq_kv_accounts(account TEXT PRIMARY KEY, seq INTEGER NOT NULL,
                    keys INTEGER NOT NULL, bytes INTEGER NOT NULL, trimmed INTEGER NOT NULL DEFAULT 0,
                    trimmed_version INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID;
                CREATE TABLE IF NOT EXISTS ubq_kv_moved(local TEXT PRIMARY KEY, account TEXT NOT NULL, moved INTEGER NOT NULL,
                    kept INTEGER NOT NULL, moved_ms INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID;
                CREATE INDEX IF NOT EXISTS ubq_kv_moved_by_account ON ubq_kv_moved(account);
                """)
            // the tombstone trim's index (KeyValueStore+Trim.swift): tombstones only, so a write
            // that sets a key never touches it, and covering, so a trim reads nothing else.
            // Created here for a file from before it too (one pass over the table, once).
            try c.exec("CREATE INDEX IF NOT EXISTS ubq_kv_tombstones ON ubq_kv(updated_ms, seq, version, deleted) WHERE deleted = 1")
            // columns a file from before the import, the tombstone trim and the moves' expiry lacks
            // (the hardened connection's authorizer refuses pragma_table_info: probe each column
            // instead); a move recorded without its time reads as moved long ago (forgetMoves)
            for (table, column) in [("ubq_kv", "origin"), ("ubq_kv_accounts", "trimmed"), ("ubq_kv_accounts", "trimmed_version"),
                                    ("ubq_kv_moved", "moved_ms")] {
                do { try c.query("SELECT \(column) FROM \(table) LIMIT 1") { _ in } } catch {
                    try c.exec("ALTER TABLE \(table) ADD COLUMN \(column) INTEGER NOT NULL DEFAULT 0")
                }
            }
        } catch { c.close(); throw error }
        c.releaseThread()  // used by whichever thread holds the lock
        writer = ConnectionLock(c)
        do {
            let r = try Connection(path: path, readOnly: true, vfs: nil, busyTimeoutMS: 5000)
            r.releaseThread()
            reader = ConnectionLock(r)
        } catch { writer.close(); throw error }
        self.quotas = quotas
    }

    public func close() { reader.close(); writer.close() }

    static let columns = "key, value, version, seq, deleted, author, updated_ms, origin"

    static func entry(_ st: Statement) -> Entry {
        let value: [UInt8] = if case .blob(let b) = st.value(1) { b } else { [] }
        return Entry(key: st.text(0), value: value, version: st.int(2), seq: st.int(3), deleted: st.int(4) != 0,
                     author: st.text(5), updatedMS: st.int(6), origin: Origin(rawValue: st.int(7)) ?? .write)
    }

    static func row(_ c: Connection, account: String, key: String) throws -> Entry? {
        var found: Entry?
        try c.query("SELECT \(columns) FROM ubq_kv WHERE account = ? AND key = ?", [.text(account), .text(key)]) { found = entry($0) }
        return found
    }

    /// An account's counters: its position, its usage, and the highest version a trimmed
    /// tombstone had (a key set anew starts above it: `KeyValueStore+Trim.swift`).
    struct AccountRow {
        var seq: Int64 = 0
        var usage = KeyValueUsage()
        var trimmedVersion: Int64 = 0
    }

    static func account(_ c: Connection, _ account: String) throws -> AccountRow {
        var r = AccountRow()
        try c.query("SELECT seq, keys, bytes, trimmed_version FROM ubq_kv_accounts WHERE account = ?", [.text(account)]) { st in
            r = AccountRow(seq: st.int(0), usage: KeyValueUsage(keys: st.int(1), bytes: st.int(2)), trimmedVersion: st.int(3))
        }
        return r
    }

    /// The key's value if it is set.
    public func get(account: String, key: String) throws -> Entry? {
        try reader.withConnection { c in try Self.row(c, account: account, key: key).flatMap { $0.deleted ? nil : $0 } }
    }

    /// The account's position (the seq of its last change; 0 if it never changed) and usage.
    public func position(account: String) throws -> (seq: Int64, usage: KeyValueUsage) {
        try reader.withConnection { c in let r = try Self.account(c, account); return (r.seq, r.usage) }
    }

    /// How many accounts hold more keys or bytes than the quotas allow (lowered since their
    /// values were written): ubiquityd reports it at startup; their subscribers are told when they
    /// subscribe (QUOTA_VIOLATION).
    public func accountsOverQuota() throws -> Int {
        try reader.withConnection { c in
            if case .integer(let n) = try c.scalar("SELECT count(*) FROM ubq_kv_accounts WHERE keys > ? OR bytes > ?",
                                                    [.integer(quotas.maxKeys), .integer(quotas.maxAccountBytes)]) { return Int(n) }
            return 0
        }
    }

    /// Sets a key if `condition` holds and the quotas allow it.
    public func set(account: String, key: String, value: [UInt8], condition: Condition, author: String,
                    nowMS: Int64 = Int64(Date().timeIntervalSince1970 * 1000)) throws -> WriteOutcome {
        try write(account, key: key) { current, acct in
            if let refused = Self.refusal(condition, current) { return (refused, nil) }
            let live = current.flatMap { $0.deleted ? nil : $0 }
            let keyBytes = key.utf8.count
            if let v = quotas.check(usage: acct.usage, keyBytes: keyBytes, oldValueBytes: live?.value.count, valueBytes: value.count) {
                return (.quota(v), nil)
            }
            let e = Entry(key: key, value: value, version: (current?.version ?? acct.trimmedVersion) + 1, seq: acct.seq + 1, deleted: false,
                          author: author, updatedMS: nowMS)
            return (.written(e), acct.usage.setting(keyBytes: keyBytes, oldValueBytes: live?.value.count, valueBytes: value.count))
        }
    }

    /// Deletes a key if `condition` holds (a key that is not set: `.absent`, nothing written).
    public func delete(account: String, key: String, condition: Condition, author: String,
                       nowMS: Int64 = Int64(Date().timeIntervalSince1970 * 1000)) throws -> WriteOutcome {
        try write(account, key: key) { current, acct in
            if let refused = Self.refusal(condition, current) { return (refused, nil) }
            guard let live = current, !live.deleted else { return (.absent(version: current?.version ?? 0, seq: acct.seq), nil) }
            let e = Entry(key: key, value: [], version: live.version + 1, seq: acct.seq + 1, deleted: true, author: author, updatedMS: nowMS)
            return (.written(e), acct.usage.deleting(keyBytes: key.utf8.count, valueBytes: live.value.count))
        }
    }

    private static func refusal(_ condition: Condition, _ current: Entry?) -> WriteOutcome? {
        let exists = current.map { !$0.deleted } ?? false
        let version = current?.version ?? 0
        switch condition {
        case .none: return nil
        case .mustNotExist: return exists ? .conflict(exists: true, version: version) : nil
        case .version(let v): return exists && version == v ? nil : .conflict(exists: exists, version: version)
        }
    }

    /// One write transaction (BEGIN IMMEDIATE: the read and the write see no other write in
    /// between): `decide` sees the key's row and the account's position and usage,
    /// and returns the outcome and, for a write, the usage after it; the row and the account's
    /// counters are then written and committed together.
    private func write(_ account: String, key: String,
                       _ decide: (Entry?, AccountRow) -> (WriteOutcome, KeyValueUsage?)) throws -> WriteOutcome {
        try writer.withConnection { c in
            try c.run("BEGIN IMMEDIATE")
            do {
                // checked inside the transaction: the writer lock orders this write and the move
                if try Self.movedAway(c, account) { try c.run("ROLLBACK"); return .movedAway }
                let acct = try Self.account(c, account)
                let outcome = decide(try Self.row(c, account: account, key: key), acct)
                if case .written(let e) = outcome.0, let usage = outcome.1 {
                    try Self.put(c, account: account, e)
                    try Self.putAccount(c, account: account, seq: e.seq, usage: usage)
                    try c.run("COMMIT")
                } else {
                    try c.run("ROLLBACK")
                }
                return outcome.0
            } catch { try? c.run("ROLLBACK"); throw error }
        }
    }

    /// Writes a key's row (inside the caller's transaction).
    static func put(_ c: Connection, account: String, _ e: Entry) throws {
        try c.run("""
            INSERT INTO ubq_kv(account, key, value, version, seq, deleted, author, updated_ms, origin) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT(account, key) DO UPDATE SET value = excluded.value, version = excluded.version, seq = excluded.seq,
                deleted = excluded.deleted, author = excluded.author, updated_ms = excluded.updated_ms, origin = excluded.origin
            """, [.text(account), .text(e.key), .blob(e.value), .integer(e.version), .integer(e.seq),
                  .integer(e.deleted ? 1 : 0), .text(e.author), .integer(e.updatedMS), .integer(e.origin.rawValue)])
    }

    /// Writes an account's position and usage (inside the caller's transaction).
    static func putAccount(_ c: Connection, account: String, seq: Int64, usage: KeyValueUsage) throws {
        try c.run("""
            INSERT INTO ubq_kv_accounts(account, seq, keys, bytes) VALUES (?, ?, ?, ?)
            ON CONFLICT(account) DO UPDATE SET seq = excluded.seq, keys = excluded.keys, bytes = excluded.bytes
            """, [.text(account), .integer(seq), .integer(usage.keys), .integer(usage.bytes)])
    }

    /// Up to `limit` set keys starting with `prefix`, in key order (byte order of the UTF-8:
    /// SQLite's BINARY collation), after `afterKey` if given; one read, so the page, its `seq` and
    /// its usage are consistent.
    public func list(account: String, prefix: String, afterKey: String?, limit: Int) throws -> Page {
        try reader.withConnection { c in
            try c.run("BEGIN")
            defer { try? c.run("COMMIT") }
            let acct = try Self.account(c, account)
            var entries: [Entry] = []
            var more = false
            // Keys with the prefix are contiguous in byte order, starting at the prefix itself.
            let (op, from) = afterKey.map { (">", $0) } ?? (">=", prefix)
            let st = try c.statement("SELECT \(Self.columns) FROM ubq_kv WHERE account = ? AND key \(op) ? AND deleted = 0 ORDER BY key")
            defer { st.reset() }
            try st.bind([.text(account), .text(from)])
            while try st.step() {
                let e = Self.entry(st)
                guard e.key.utf8.starts(with: prefix.utf8) else { break }
                if entries.count == limit { more = true; break }
                entries.append(e)
            }
            return Page(entries: entries, hasMore: more, seq: acct.seq, usage: acct.usage)
        }
    }

    /// The account's keys changed after `seq` — each key's latest state, tombstones included — in
    /// change order, at most `limit`.
    public func changes(account: String, after seq: Int64, limit: Int) throws -> [Entry] {
        try reader.withConnection { c in try Self.changes(c, account: account, after: seq, limit: limit) }
    }

    static func changes(_ c: Connection, account: String, after seq: Int64, limit: Int) throws -> [Entry] {
        var out: [Entry] = []
        try c.query("SELECT \(columns) FROM ubq_kv WHERE account = ? AND seq > ? ORDER BY seq LIMIT ?",
                    [.text(account), .integer(seq), .integer(Int64(limit))]) { out.append(entry($0)) }
        return out
    }

    /// Removes every entry of the account and its counters, in one transaction (DeleteAccount,
    /// SPEC §4.6: a crash leaves either all of them or none). Its feed positions start again at
    /// 0, so the account's old tokens must not outlive it: account IDs are never reused.
    /// Returns how many entries it removed (tombstones of deleted keys not counted).
    @discardableResult
    public func removeAccount(_ account: String) throws -> Int {
        try writer.withConnection { c in try c.erasing {
            try c.run("BEGIN IMMEDIATE")
            do {
                var removed = 0
                try c.query("SELECT count(*) FROM ubq_kv WHERE account = ? AND deleted = 0", [.text(account)]) { removed = Int($0.int(0)) }
                try c.run("DELETE FROM ubq_kv WHERE account = ?", [.text(account)])
                try c.run("DELETE FROM ubq_kv_accounts WHERE account = ?", [.text(account)])
                try c.run("DELETE FROM ubq_kv_moved WHERE account = ?", [.text(account)])
                try c.run("COMMIT")
                return removed
            } catch { try? c.run("ROLLBACK"); throw error }
        } }
    }
}
