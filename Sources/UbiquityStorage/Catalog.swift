import Foundation

/// The data directory's catalog (`<root>/catalog.sqlite`): accounts and their named stores.
/// Store files are named by server-generated UUIDs (§4.8); names live only here.
///
/// Small and rarely written: one connection behind a lock, with every record also cached in
/// memory so the per-call "which account owns this store" check costs no SQL.
public final class Catalog: Sendable {
    /// One store of an account.
    public struct StoreRecord: Sendable, Equatable {
        public var id: UUID
        public var account: String
        public var name: String
        public var createdAt: Double

        public init(id: UUID, account: String, name: String, createdAt: Double) {
            self.id = id; self.account = account; self.name = name; self.createdAt = createdAt
        }
    }

    private struct State {
        var conn: Connection?
        var byID: [UUID: StoreRecord] = [:]
        var accounts: Set<String> = []
        /// Accounts archived or being deleted: no new store record for them (a call that
        /// resolved its session just before the transition began cannot add one behind it).
        var closed: Set<String> = []
        /// The store ID texts `store(idText:)` found: the first found since the last change in
        /// `memo` (one compare, for a run of calls on one store), every other in `byText` (one
        /// hash, for calls spread over many stores: W6). Invariant: each `text` has
        /// `byID[UUID.parse(text)] == record`; every change of `byID` goes through
        /// `withConnection`, which clears both (a removed or replaced store is never answered
        /// from them).
        var memo: (text: String, record: StoreRecord)?
        var byText: [String: StoreRecord] = [:]
    }
    private let state: GuardedState<State>

    /// Opens (creating if needed) the catalog database at `path`.
    public init(path: String) throws {
        let c = try Connection(path: path, readOnly: false, vfs: nil, busyTimeoutMS: 5000)
        do {
            try c.exec("PRAGMA journal_mode=WAL")
            try c.exec("PRAGMA synchronous=FULL")
            // rarely written and small: every deleted row is zeroed, so nothing of a deleted
            // account stays in a free page (DeleteAccount)
            try c.exec("PRAGMA secure_delete=ON")
            // a kill between a deletion's commit and its checkpoint left the zeroed pages only in
            // the WAL and the old ones in the file: copy them in now (Connection.erasing)
            _ = c.checkpoint(.truncate)
            try c.exec("""
                CREATE TABLE IF NOT EXISTS ubq_accounts(id TEXT PRIMARY KEY, state TEXT NOT NULL, created_at REAL NOT NULL);
                CREATE TABLE IF NOT EXISTS ubq_stores(id TEXT PRIMARY KEY, account TEXT NOT NULL, name TEXT NOT NULL,
                    created_at REAL NOT NULL, UNIQUE(account, name));
                CREATE TABLE IF NOT EXISTS ubq_destroyed_stores(id TEXT PRIMARY KEY, account TEXT NOT NULL, name TEXT NOT NULL,
                    destroyed_at REAL NOT NULL);
                CREATE TABLE IF NOT EXISTS ubq_announcements(id TEXT PRIMARY KEY, stores TEXT NOT NULL);
                """)
        } catch { c.close(); throw error }
        var s = State(conn: c)
        try c.query("SELECT id FROM ubq_accounts") { s.accounts.insert($0.text(0)) }
        try c.query("SELECT id, account, name, created_at FROM ubq_stores") { st in
            guard let id = UUID(uuidString: st.text(0)) else { return }
            let created: Double = if case .real(let d) = st.value(3) { d } else { 0 }
            s.byID[id] = StoreRecord(id: id, account: st.text(1), name: st.text(2), createdAt: created)
        }
        c.releaseThread()  // used by whichever thread holds the lock (`withConnection`)
        state = GuardedState(s)
    }

    public func close() { state.withLock { $0.conn?.adoptThread(); $0.conn?.close(); $0.conn = nil } }

    private func withConnection<T>(_ body: (Connection, inout State) throws -> T) throws -> T {
        try state.withLock { s in
            guard let c = s.conn else { throw StorageError(.storeClosed, "catalog is closed") }
            s.memo = nil
            s.byText = [:]
            c.adoptThread()
            defer { c.releaseThread() }
            return try body(c, &s)
        }
    }

    /// The catalog's connection alone, for tables the in-memory records do not mirror.
    func withSQL<T>(_ body: (Connection) throws -> T) throws -> T { try withConnection { c, _ in try body(c) } }

    /// Creates the account if it does not exist (active).
    public func ensureAccount(_ account: String) throws {
        try withConnection { c, s in
            if s.accounts.contains(account) { return }
            try c.run("INSERT OR IGNORE INTO ubq_accounts(id, state, created_at) VALUES (?, 'active', ?)",
                      [.text(account), .real(Date().timeIntervalSince1970)])
            s.accounts.insert(account)
        }
    }

    /// The account's store called `name`, creating its record (with a new UUID) if missing and
    /// `create`. Returns the record and whether this call created it.
    public func store(account: String, name: String, create: Bool) throws -> (StoreRecord, created: Bool)? {
        try withConnection { c, s in
            if let r = s.byID.values.first(where: { $0.account == account && $0.name == name }) { return (r, false) }
            guard create, !s.closed.contains(account) else { return nil }
            let r = StoreRecord(id: UUID(), account: account, name: name, createdAt: Date().timeIntervalSince1970)
            try c.run("INSERT INTO ubq_stores(id, account, name, created_at) VALUES (?, ?, ?, ?)",
                      [.text(r.id.uuidString.lowercased()), .text(account), .text(name), .real(r.createdAt)])
            s.byID[r.id] = r
            return (r, true)
        }
    }

    /// Puts back the record of a store restored from a backup (same ID, account and name).
    /// Refused if the account already has another store of that name.
    public func restoreStore(_ r: StoreRecord) throws {
        try withConnection { c, s in
            if s.byID[r.id] != nil { return }
            if let other = s.byID.values.first(where: { $0.account == r.account && $0.name == r.name }) {
                throw StorageError.invalid("the account already has a store named \"\(r.name)\" (\(other.id.uuidString.lowercased())): destroy it or restore into that store")
            }
            if !s.accounts.contains(r.account) {
                try c.run("INSERT OR IGNORE INTO ubq_accounts(id, state, created_at) VALUES (?, 'active', ?)", [.text(r.account), .real(Date().timeIntervalSince1970)])
                s.accounts.insert(r.account)
            }
            try c.run("INSERT INTO ubq_stores(id, account, name, created_at) VALUES (?, ?, ?, ?)",
                      [.text(r.id.uuidString.lowercased()), .text(r.account), .text(r.name), .real(r.createdAt)])
            s.byID[r.id] = r
        }
    }

    /// Copies the catalog into a new file (VACUUM INTO, for a backup). The catalog's lock is
    /// held meanwhile — it is small, and the copy is then exactly the records in memory.
    public func backup(to destination: String) throws {
        try withConnection { c, _ in try c.vacuumInto(destination) }
    }

    /// A store by ID (from memory).
    public func store(id: UUID) -> StoreRecord? { state.withLock { $0.byID[id] } }

    public enum Lookup: Sendable, Equatable { case malformed, missing, found(StoreRecord) }

    /// Most texts `store(idText:)` remembers: a client can spell one UUID in 2^32 letter cases,
    /// so the memory is emptied when full rather than grown (it refills at one parse per text).
    static let maxRememberedTexts = 4096

    /// A store by its ID as a client sent it (`UUID.parse` form). Texts found are remembered:
    /// a call skips the UUID parse and the table lookup. W6 (100 stores in turn), per call
    /// under callgrind (scripts/w6-cost): 2,143 instructions with the last text alone
    /// remembered (a miss each time: the parse, the lookup, the memo's copy rewritten), 1,213
    /// with `byText` (the String's hash is most of it); W1 on one store still hits `memo`: 652
    /// before, 654 after.
    public func store(idText text: String) -> Lookup {
        state.withLock { s in
            if let m = s.memo, m.text == text { return .found(m.record) }
            if let r = s.byText[text] { return .found(r) }
            guard let id = UUID.parse(text) else { return .malformed }
            guard let r = s.byID[id] else { return .missing }
            if s.memo == nil {
                s.memo = (text, r)
            } else {
                if s.byText.count >= Self.maxRememberedTexts { s.byText = [:] }
                s.byText[text] = r
            }
            return .found(r)
        }
    }

    /// How many store ID texts `store(idText:)` remembers (for tests).
    var rememberedTexts: Int { state.withLock { $0.byText.count + ($0.memo == nil ? 0 : 1) } }

    /// Every store of every account.
    public func allStores() -> [StoreRecord] { state.withLock { Array($0.byID.values) } }

    /// The account's stores, by name.
    public func stores(account: String) -> [StoreRecord] {
        state.withLock { $0.byID.values.filter { $0.account == account }.sorted { $0.name < $1.name } }
    }

    /// Forgets a store (its files are removed by `StoreDirectory.destroy`, after this).
    /// Its ID, account and name are kept (`destroyedStore`): a token of the destroyed store is
    /// then told apart from one of an unrelated store once the name is used again (SPEC §4.2).
    public func removeStore(id: UUID) throws {
        try withConnection { c, s in
            let key = SQLValue.text(id.uuidString.lowercased())
            try c.run("BEGIN IMMEDIATE")
            do {
                if let r = s.byID[id] {
                    try c.run("INSERT OR REPLACE INTO ubq_destroyed_stores(id, account, name, destroyed_at) VALUES (?, ?, ?, ?)",
                              [key, .text(r.account), .text(r.name), .real(Date().timeIntervalSince1970)])
                }
                try c.run("DELETE FROM ubq_stores WHERE id = ?", [key])
                try c.run("COMMIT")
            } catch { try? c.run("ROLLBACK"); throw error }
            s.byID[id] = nil
        }
    }

    /// Stops (`false`) or resumes new stores for an account (its lifecycle; memory only: a
    /// start sets it again for every account not active).
    public func acceptStores(account: String, _ accept: Bool) {
        state.withLock { s in if accept { s.closed.remove(account) } else { s.closed.insert(account) } }
    }

    /// Forgets an account: its stores' records, its destroyed stores' records and its own, in one
    /// transaction (DeleteAccount, after the files are gone). Returns the store records it held.
    @discardableResult
    public func removeAccount(_ account: String) throws -> [StoreRecord] {
        try withConnection { c, s in
            let gone = s.byID.values.filter { $0.account == account }
            try c.erasing {
                try c.run("BEGIN IMMEDIATE")
                do {
                    try c.run("DELETE FROM ubq_stores WHERE account = ?", [.text(account)])
                    try c.run("DELETE FROM ubq_destroyed_stores WHERE account = ?", [.text(account)])
                    try c.run("DELETE FROM ubq_accounts WHERE id = ?", [.text(account)])
                    try c.run("COMMIT")
                } catch { try? c.run("ROLLBACK"); throw error }
            }
            for r in gone { s.byID[r.id] = nil }
            s.accounts.remove(account)
            return gone
        }
    }

    /// A destroyed store's last record (account and name), if `id` was one (read from disk: only
    /// failing calls ask).
    public func destroyedStore(id: UUID) -> StoreRecord? {
        try? withConnection { c, _ in
            var found: StoreRecord?
            try c.query("SELECT account, name FROM ubq_destroyed_stores WHERE id = ?", [.text(id.uuidString.lowercased())]) { st in
                found = StoreRecord(id: id, account: st.text(0), name: st.text(1), createdAt: 0)
            }
            return found
        }
    }
}
