internal import CSQLite
import Foundation
import Synchronization
import UbiquityLock

public enum UbiquityStorageVersion { public static let schema = 1 }

/// A value as SQLite stores it. Internal: the public API speaks `StorageValue`.
enum SQLValue: Equatable, Hashable, Sendable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob([UInt8])
}

/// Flag a request's owner sets when the request is cancelled; the progress handler of the
/// connection running the request reads it.
final class CancelFlag: Sendable {
    private let value = Atomic<Bool>(false)
    /// Another source of cancellation, asked too (a synchronous caller's call cancellation).
    private let poll: (@Sendable () -> Bool)?
    init(poll: (@Sendable () -> Bool)? = nil) { self.poll = poll }
    func cancel() { value.store(true, ordering: .releasing) }
    var isCancelled: Bool { value.load(ordering: .acquiring) || (poll?() ?? false) }
}

/// One SQLite connection. Not thread-safe: the writer's belongs to the writer thread, a reader's
/// to whichever thread has it checked out (rules 1-2 in docs/storage.md); every method must be
/// called on that thread.
final class Connection {
    let db: OpaquePointer
    let path: String
    let readOnly: Bool
    private var cache: [String: OpaquePointer] = [:]
    /// The cached statements' SQL, oldest first: the first one out when the cache is full.
    private var cacheOrder = FIFOQueue<String>()
    private let cacheLimit: Int
    /// The cancel flag of the request currently running on this connection (progress handler reads it).
    var currentCancel: CancelFlag?
    /// Busy-handler polls (200 µs each) before SQLITE_BUSY; 0 makes a call fail at once if busy.
    var busyPolls: Int32 = 0
    /// How often this connection's busy handler ran (tests: the writer never waits for readers).
    var busyWaits = 0
    /// A read connection's read transaction kept open after its job (`HeldSnapshot`,
    /// docs/storage.md rule 4); nil when the connection is in autocommit mode between jobs.
    var heldSnapshot: HeldSnapshot?
    /// When a read connection was last checked in (`ReadConnections`, `IdleReaderPolicy`), in
    /// `DispatchTime` nanoseconds.
    var idleSince: UInt64 = 0
    /// Set only around the engine's own `VACUUM INTO` (backups, baselines).
    var allowVacuumInto = false
    /// Frames in the WAL after this connection's last commit, kept by the WAL hook
    /// `trackWALFrames()` installs (the writer's checkpoint policy; 0 until then).
    var walFrames: Int32 = 0
    /// Bytes of one WAL frame (page size + 24-byte frame header); set by `trackWALFrames()`.
    var walFrameBytes = 0
    /// The thread that may use this connection (`ConnectionOwner`): the opener, until it hands it over.
    private let owner = ConnectionOwner()
    /// Table-name prefixes the authorizer admits.
    static let allowedTablePrefixes = ["t_", "j_", "ubq_", "sqlite_"]

    init(path: String, readOnly: Bool, vfs: String?, busyTimeoutMS: Int32, cacheLimit: Int = 64, create: Bool = true) throws {
        var handle: OpaquePointer?
        var flags = SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE
        flags |= readOnly ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0))
        let rc: Int32
        if let vfs { rc = sqlite3_open_v2(path, &handle, flags, vfs) } else { rc = sqlite3_open_v2(path, &handle, flags, nil) }
        guard rc == SQLITE_OK, let handle else {
            let msg = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open"
            if let handle { sqlite3_close_v2(handle) }
            throw StorageError.sqlite(rc, msg, sql: nil)
        }
        db = handle
        self.path = path
        self.readOnly = readOnly
        self.cacheLimit = cacheLimit
        sqlite3_extended_result_codes(db, 1)
        // Busy handler polling every 200 µs up to the timeout (SQLite's own handler backs off to
        // 100 ms sleeps, which makes the writer's WAL-restart waits for short readers far too long).
        busyPolls = Int32(max(1, busyTimeoutMS)) * 5
        // Context pointer: this object, unretained (the handler is removed in `close()`).
        sqlite3_busy_handler(db, { ctx, n in
            guard let ctx else { return 0 }
            let conn = Unmanaged<Connection>.fromOpaque(ctx).takeUnretainedValue()
            conn.busyWaits += 1
            if n >= conn.busyPolls { return 0 }
            usleep(200)
            return 1
        }, Unmanaged.passUnretained(self).toOpaque())
        // §4.8 hardening: no double-quoted string literals, defensive mode, no ATTACH, own tables only.
        _ = ubq_sqlite3_db_config_int(db, SQLITE_DBCONFIG_DQS_DML, 0, nil)
        _ = ubq_sqlite3_db_config_int(db, SQLITE_DBCONFIG_DQS_DDL, 0, nil)
        _ = ubq_sqlite3_db_config_int(db, SQLITE_DBCONFIG_DEFENSIVE, 1, nil)
        _ = ubq_sqlite3_db_config_int(db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, nil)
        _ = ubq_sqlite3_db_config_int(db, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 0, nil)
        // Context pointer: this object, unretained (the authorizer is removed in `close()`).
        sqlite3_set_authorizer(db, { ctx, action, a1, a2, _, _ in
            switch action {
            case SQLITE_ATTACH, SQLITE_DETACH:
                // VACUUM INTO attaches its target internally; only the engine's own copy paths allow it.
                if let ctx, Unmanaged<Connection>.fromOpaque(ctx).takeUnretainedValue().allowVacuumInto { return SQLITE_OK }
                return SQLITE_DENY
            case SQLITE_READ, SQLITE_INSERT, SQLITE_UPDATE, SQLITE_DELETE, SQLITE_CREATE_TABLE, SQLITE_DROP_TABLE,
                SQLITE_CREATE_INDEX, SQLITE_DROP_INDEX, SQLITE_ALTER_TABLE:
                // ALTER TABLE passes (schema, table); the others pass the table or index name first
                guard let p = action == SQLITE_ALTER_TABLE ? a2 : a1 else { return SQLITE_OK }
                let name = String(cString: p)
                for p in Connection.allowedTablePrefixes where name.hasPrefix(p) { return SQLITE_OK }
                return SQLITE_DENY
            default: return SQLITE_OK
            }
        }, Unmanaged.passUnretained(self).toOpaque())
        // Progress handler: stop SQL of cancelled requests. The context pointer is this object,
        // unretained: the handler is removed in `close()` before the object can go away.
        sqlite3_progress_handler(db, 1000, { ctx in
            guard let ctx else { return 0 }
            let conn = Unmanaged<Connection>.fromOpaque(ctx).takeUnretainedValue()
            return (conn.currentCancel?.isCancelled ?? false) ? 1 : 0
        }, Unmanaged.passUnretained(self).toOpaque())
    }

    /// Statements found still running when a connection closed (tests assert it stays 0).
    static let leakedStatements = Locked(0)

    /// True if the calling thread owns this connection.
    var isOwnedByCurrentThread: Bool { owner.isCurrentThread }
    /// Traps in debug builds unless the calling thread owns this connection.
    func checkThread() { owner.check(path) }
    /// The calling thread takes over this released connection.
    func adoptThread() { owner.adopt(path) }
    /// The owning thread hands this connection over; nobody may use it until a thread adopts it.
    func releaseThread() { owner.release(path) }

    func close() {
        checkThread()
        let busy = openStatementCount
        if busy > 0 { Connection.leakedStatements.withLock { $0 += busy } }
        recent.removeAll()
        for (_, s) in cache { sqlite3_finalize(s) }
        cache.removeAll()
        cacheEpoch = Connection.newEpoch()
        sqlite3_progress_handler(db, 0, nil, nil)
        sqlite3_set_authorizer(db, nil, nil)
        sqlite3_busy_handler(db, nil, nil)
        sqlite3_wal_hook(db, nil, nil)
        sqlite3_close_v2(db)
    }

    var openStatementCount: Int {
        var n = 0
        var s = sqlite3_next_stmt(db, nil)
        while let st = s { if sqlite3_stmt_busy(st) != 0 { n += 1 }; s = sqlite3_next_stmt(db, st) }
        return n
    }

    func error(_ rc: Int32, sql: String?) -> StorageError {
        if rc == SQLITE_INTERRUPT || (rc & 0xff) == SQLITE_INTERRUPT { return StorageError(.cancelled, "statement interrupted", sqliteCode: rc) }
        return StorageError.sqlite(rc, String(cString: sqlite3_errmsg(db)), sql: sql)
    }

    func exec(_ sql: String) throws {
        checkThread()
        let rc = sqlite3_exec(db, sql, nil, nil, nil)
        if rc != SQLITE_OK { throw error(rc, sql: sql) }
    }

    /// A cached prepared statement; reset and cleared of bindings when returned by `with`.
    func statement(_ sql: String) throws -> Statement {
        checkThread()
        // The last few statements first: callers pass the same cached texts (per model, per
        // connection) again and again, and comparing a string with itself is one word compare,
        // where hashing a 200-byte SELECT for the dictionary cost ~1k instructions per call.
        let n = sql.utf8.count
        for r in recent where r.count == n && r.sql == sql { return Statement(stmt: r.stmt, conn: self, sql: sql) }
        let stmt: OpaquePointer
        if let s = cache[sql] {
            stmt = s
        } else {
            var prepared: OpaquePointer?
            let rc = sqlite3_prepare_v3(db, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &prepared, nil)
            guard rc == SQLITE_OK, let prepared else { throw error(rc, sql: sql) }
            stmt = prepared
            if cache.count >= cacheLimit, let old = cacheOrder.popFirst() {
                recent.removeAll { $0.sql == old }  // never hand out a finalized statement
                if let o = cache.removeValue(forKey: old) { sqlite3_finalize(o) }
                cacheEpoch = Connection.newEpoch()  // nor let a PreparedSQL use it
            }
            cache[sql] = stmt
            cacheOrder.append(sql)
        }
        if recent.count >= Connection.recentCount { recent.removeFirst() }
        recent.append((sql, n, stmt))
        return Statement(stmt: stmt, conn: self, sql: sql)
    }

    /// Statements most recently handed out (a subset of `cache`, newest last).
    private var recent: [(sql: String, count: Int, stmt: OpaquePointer)] = []
    private static let recentCount = 4

    func clearStatementCache() {
        recent.removeAll()
        for (_, s) in cache { sqlite3_finalize(s) }
        cache.removeAll(); cacheOrder.removeAll()
        cacheEpoch = Connection.newEpoch()
    }

    /// Changes whenever this connection finalizes a cached statement; never the same on two
    /// connections. A `PreparedSQL` holding a statement found at this epoch may use it directly.
    private var cacheEpoch = Connection.newEpoch()
    private static let epochs = Locked(0)
    private static func newEpoch() -> Int { epochs.withLock { $0 += 1; return $0 } }

    /// `statement(ref.sql)`, remembered in `ref` while this connection's cache keeps it (no
    /// hashing of the text on later calls).
    func statement(_ ref: PreparedSQL) throws -> Statement {
        checkThread()
        if ref.epoch == cacheEpoch, let s = ref.stmt { return Statement(stmt: s, conn: self, sql: ref.sql) }
        let st = try statement(ref.sql)
        ref.stmt = st.stmt
        ref.epoch = cacheEpoch
        return st
    }

    /// Statements run through `query` on this connection (tests: set-based loads run a bounded number).
    var statementCount = 0
    /// Per-model read data of the last model read through this connection (`ReadShapes.of`).
    var readShapes: ReadShapes?
    /// Names of the function sets installed on this connection (`ReadContext.installFunctions`).
    var installedFunctionSets: Set<String> = []
    /// The query layer's per-connection object (its compiled fetch plans) and the model it was
    /// made for (`ReadContext.connectionCache`, rule 11).
    var queryCache: (model: ResolvedModel, object: AnyObject)?

    /// Runs a statement with bindings, calling `row` per result row.
    func query(_ sql: String, _ args: [SQLValue] = [], row: (Statement) throws -> Void) throws {
        statementCount += 1
        let st = try statement(sql)
        defer { st.reset() }
        try st.bind(args)
        while try st.step() { try row(st) }
    }

    func run(_ sql: String, _ args: [SQLValue] = []) throws {
        try query(sql, args) { _ in }
    }

    func scalar(_ sql: String, _ args: [SQLValue] = []) throws -> SQLValue {
        var v = SQLValue.null
        try query(sql, args) { st in v = st.value(0) }
        return v
    }

    func rows(_ sql: String, _ args: [SQLValue] = []) throws -> [[SQLValue]] {
        var out: [[SQLValue]] = []
        try query(sql, args) { st in out.append((0..<st.columnCount).map { st.value($0) }) }
        return out
    }

    func noCheckpointOnClose() { _ = ubq_sqlite3_db_config_int(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nil) }

    /// `VACUUM INTO path` (a consistent copy through SQLite).
    func vacuumInto(_ path: String) throws {
        allowVacuumInto = true
        defer { allowVacuumInto = false }
        try run("VACUUM INTO ?", [.text(path)])
    }

    /// Most `?` parameters one statement may have (`SQLITE_LIMIT_VARIABLE_NUMBER`).
    private(set) lazy var variableLimit = Int(sqlite3_limit(db, SQLITE_LIMIT_VARIABLE_NUMBER, -1))

    var changes: Int { Int(sqlite3_changes(db)) }
    var isAutocommit: Bool { sqlite3_get_autocommit(db) != 0 }

    /// PASSIVE/TRUNCATE checkpoint; returns (frames in WAL, frames checkpointed).
    func checkpoint(truncate: Bool) -> (rc: Int32, log: Int32, done: Int32) {
        checkpoint(truncate ? .truncate : .passive)
    }

    enum CheckpointMode { case passive, restart, truncate }

    /// `.restart` is `.truncate` without shrinking the WAL file: the next commit writes from the
    /// start of the file again, over blocks the file already has (`journal_size_limit` caps its size).
    func checkpoint(_ mode: CheckpointMode) -> (rc: Int32, log: Int32, done: Int32) {
        checkThread()
        var log: Int32 = 0, done: Int32 = 0
        let m: Int32
        switch mode {
        case .passive: m = SQLITE_CHECKPOINT_PASSIVE
        case .restart: m = SQLITE_CHECKPOINT_RESTART
        case .truncate: m = SQLITE_CHECKPOINT_TRUNCATE
        }
        let rc = sqlite3_wal_checkpoint_v2(db, nil, m, &log, &done)
        return (rc, log, done)
    }

    /// Keeps `walFrames` up to date from SQLite's WAL hook (called on this connection's thread at
    /// every commit with the frames now in the WAL). Replaces SQLite's auto-checkpoint hook, which
    /// the writer turns off anyway (`wal_autocheckpoint=0`). The context pointer is this object,
    /// unretained: the hook is removed in `close()`.
    func trackWALFrames() throws {
        if case .integer(let n) = try scalar("PRAGMA page_size") { walFrameBytes = Int(n) + 24 }
        sqlite3_wal_hook(db, { ctx, _, _, frames in
            if let ctx { Unmanaged<Connection>.fromOpaque(ctx).takeUnretainedValue().walFrames = frames }
            return SQLITE_OK
        }, Unmanaged.passUnretained(self).toOpaque())
    }

    /// The WAL's content after the last commit, in bytes (header + frames), as `trackWALFrames()` counts it.
    var walContentBytes: Int { walFrames > 0 ? 32 + Int(walFrames) * walFrameBytes : 0 }
}

/// A borrowed prepared statement (owned by the connection's cache).
struct Statement {
    let stmt: OpaquePointer
    unowned let conn: Connection
    let sql: String

    func bind(_ args: [SQLValue]) throws {
        for (i, a) in args.enumerated() { try bind(Int32(i + 1), a) }
    }

    /// Binds parameter `idx` (1-based).
    func bind(_ idx: Int32, _ a: SQLValue) throws {
        let rc: Int32
        switch a {
        case .null: rc = sqlite3_bind_null(stmt, idx)
        case .integer(let v): rc = sqlite3_bind_int64(stmt, idx, v)
        case .real(let v): rc = sqlite3_bind_double(stmt, idx, v)
        case .text(let v):
            // The string's own UTF-8 (small strings: a copy on the stack), not a C-string copy on the heap.
            var v = v
            rc = v.withUTF8 { u in
                guard let b = u.baseAddress, u.count > 0 else { return sqlite3_bind_text(stmt, idx, "", 0, ubq_sqlite_transient()) }  // "" is not NULL
                return b.withMemoryRebound(to: CChar.self, capacity: u.count) { sqlite3_bind_text(stmt, idx, $0, Int32(u.count), ubq_sqlite_transient()) }
            }
        case .blob(let v):
            rc = v.withUnsafeBytes { sqlite3_bind_blob(stmt, idx, $0.baseAddress ?? UnsafeRawPointer(bitPattern: 1), Int32($0.count), ubq_sqlite_transient()) }
        }
        if rc != SQLITE_OK { throw conn.error(rc, sql: sql) }
    }

    func step() throws -> Bool {
        conn.checkThread()
        let rc = sqlite3_step(stmt)
        if rc == SQLITE_ROW { return true }
        if rc == SQLITE_DONE { return false }
        throw conn.error(rc, sql: sql)
    }

    func reset() {
        sqlite3_reset(stmt)
        sqlite3_clear_bindings(stmt)
    }

    var columnCount: Int { Int(sqlite3_column_count(stmt)) }
    func int(_ i: Int) -> Int64 { sqlite3_column_int64(stmt, Int32(i)) }
    func isNull(_ i: Int) -> Bool { sqlite3_column_type(stmt, Int32(i)) == SQLITE_NULL }
    func text(_ i: Int) -> String { Statement.text(stmt, Int32(i)) }

    /// Column `c`'s text, all of it: by its byte count, not up to the first NUL (strings are
    /// bound with their length, so "a\0b" is stored whole; `String(cString:)` read back "a" —
    /// found by scripts/fuzz). `sqlite3_column_bytes` after `_text`, as SQLite's docs ask.
    static func text(_ stmt: OpaquePointer, _ c: Int32) -> String {
        guard let p = sqlite3_column_text(stmt, c) else { return "" }
        return String(decoding: UnsafeBufferPointer(start: p, count: Int(sqlite3_column_bytes(stmt, c))), as: UTF8.self)
    }

    func value(_ i: Int) -> SQLValue { Statement.value(stmt, i) }

    /// Column `i` of `stmt`'s current row.
    static func value(_ stmt: OpaquePointer, _ i: Int) -> SQLValue {
        let c = Int32(i)
        switch sqlite3_column_type(stmt, c) {
        case SQLITE_INTEGER: return .integer(sqlite3_column_int64(stmt, c))
        case SQLITE_FLOAT: return .real(sqlite3_column_double(stmt, c))
        case SQLITE_TEXT: return .text(text(stmt, c))
        case SQLITE_BLOB:
            let n = Int(sqlite3_column_bytes(stmt, c))
            guard n > 0, let p = sqlite3_column_blob(stmt, c) else { return .blob([]) }
            return .blob(Array(UnsafeRawBufferPointer(start: p, count: n)))
        default: return .null
        }
    }
}

/// SQL identifier quoting (identifiers are also validated against the model before use).
func q(_ ident: String) -> String {
    // Foundation's replacingOccurrences only when there is a quote to double (never for model names in practice)
    ident.utf8.contains(34) ? "\"" + ident.replacingOccurrences(of: "\"", with: "\"\"") + "\"" : "\"" + ident + "\""
}
