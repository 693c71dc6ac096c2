import Foundation

/// How a store opens (docs/storage.md rule 10, "What an open costs"). A file that already has
/// every table and meta key opens on its first read connection alone: the writer connection, its
/// pragmas and the schema transaction wait for the first writer job (`WriterQueue`), so a store
/// opened only to be read never opens one. Any other file (new, a model to install, a table or
/// key missing, not yet in WAL mode) opens as before: writer first, schema transaction, then the
/// readers.
extension Store {
    /// Tables every store file has once its schema transaction has run.
    static let requiredTables: Set<String> = ["ubq_meta", "ubq_history", "ubq_client_tx", "ubq_tombstones"]

    /// The writer connection with its pragmas (rule 1: one per file, opened by the store's writer only).
    static func openWriter(path: String, config: StorageConfiguration) throws -> Connection {
        let writerVFS = config.walWriteCoalescing ? WALCoalescing.writerVFS(over: config.vfsName, logger: config.logger) : config.vfsName
        let w = try Connection(path: path, readOnly: false, vfs: writerVFS, busyTimeoutMS: config.busyTimeoutMilliseconds, cacheLimit: config.statementCacheSize)
        do {
            try w.exec("PRAGMA journal_mode=WAL")
            try w.exec("PRAGMA synchronous=\(config.synchronous.rawValue)")
            try w.exec("PRAGMA journal_size_limit=\(config.journalSizeLimitBytes)")
            try w.exec("PRAGMA wal_autocheckpoint=0")  // checkpoints follow our policy, from this thread only
            try w.trackWALFrames()  // the policy measures the WAL's content, not its file (which RESTART keeps)
            try w.exec("PRAGMA cache_size=-\(max(0, config.writerCacheKiB))")
            // Every save runs in a SAVEPOINT (group commit), so SQLite copies each page a save
            // touches to a statement journal first; past 64 KiB that journal spills to a temp
            // file: as many 4 KiB write syscalls per save as WAL frames (W2: ~100 per save).
            // In memory it is dropped at RELEASE; it holds at most one save's pages.
            try w.exec("PRAGMA temp_store=MEMORY")
            try w.exec("PRAGMA foreign_keys=OFF")
        } catch { w.close(); throw error }
        return w
    }

    /// A read connection (rule 2): read-only, `query_only`, and it never checkpoints on close (rule 5).
    static func openReader(path: String, config cfg: StorageConfiguration) throws -> Connection {
        let c = try Connection(path: path, readOnly: true, vfs: cfg.vfsName, busyTimeoutMS: cfg.busyTimeoutMilliseconds, cacheLimit: cfg.statementCacheSize)
        do {
            try c.exec("PRAGMA query_only=1")
            try c.exec("PRAGMA mmap_size=\(max(0, cfg.readerMmapBytes))")
            if let kib = cfg.readerCacheKiB { try c.exec("PRAGMA cache_size=-\(max(0, kib))") }
        } catch { c.close(); throw error }
        c.noCheckpointOnClose()
        return c
    }

    /// The store's state read by a read connection, in one read transaction; nil if the file
    /// needs the writer's open (anything missing, another store's ID, a model to install) or
    /// cannot be read this way (the writer's open then reports the error as before). After a
    /// crash this connection is the first on the file: SQLite rebuilds the WAL index from the
    /// WAL here (recovery writes only the -shm, which read-only connections open read-write), so
    /// the state includes every commit in the WAL.
    static func stateWithoutWriter(_ c: Connection, id: UUID, model: ModelDefinition?, config: StorageConfiguration) -> StoreState? {
        do {
            try c.exec("BEGIN")
            defer { try? c.exec("COMMIT") }
            var tables = Set<String>()
            try c.query("SELECT name FROM sqlite_schema WHERE type = 'table' AND name LIKE 'ubq\\_%' ESCAPE '\\'") { st in tables.insert(st.text(0)) }
            guard tables.isSuperset(of: requiredTables) else { return nil }
            // after the first read: the pager knows the file's mode only once it has read it
            guard case .text(let mode) = try c.scalar("PRAGMA journal_mode"), mode.lowercased() == "wal" else { return nil }
            guard case .text(let s) = try Meta.get(c, "store_id"), UUID(uuidString: s) == id else { return nil }
            guard case .integer = try Meta.get(c, "next_pk") else { return nil }  // read by the writer's first insert
            let resolved: ResolvedModel?
            switch try Meta.get(c, "model_json") {
            case .text(let json): resolved = try ModelCache.resolved(json: json)
            case .null where model == nil: resolved = nil
            default: return nil  // a model to install at open: the writer's schema transaction does it
            }
            return try state(c, model: resolved, config: config)  // a key missing throws: nil below
        } catch {
            return nil
        }
    }

    /// The writer's open of a file: creates what is missing (tables, meta keys, the model) and
    /// reads the store's state, in one write transaction.
    static func schemaTransaction(_ w: Connection, id: UUID, model: ModelDefinition?, config: StorageConfiguration) throws -> StoreState {
        try w.exec("BEGIN IMMEDIATE")
        do {
            try w.exec("CREATE TABLE IF NOT EXISTS ubq_meta (key TEXT PRIMARY KEY, value ANY) STRICT")
            try w.exec("CREATE TABLE IF NOT EXISTS ubq_history (generation INTEGER PRIMARY KEY, timestamp REAL NOT NULL, author TEXT, context TEXT, changes BLOB NOT NULL)")
            try w.exec("CREATE TABLE IF NOT EXISTS ubq_client_tx (id TEXT PRIMARY KEY, generation INTEGER NOT NULL, result BLOB NOT NULL)")
            let tombstonesExisted = try Tombstones.createTable(w)
            let existingID = try Meta.get(w, "store_id")
            if case .text(let s) = existingID {
                guard UUID(uuidString: s) == id else { throw StorageError(.invalidArgument, "store file belongs to store \(s), not \(id)") }
            } else {
                try Meta.set(w, "store_id", .text(id.uuidString))
                try Meta.set(w, "epoch", .integer(Int64(bitPattern: UInt64.random(in: 1...UInt64.max))))
                for k in ["generation", "gc_horizon", "history_horizon", Tombstones.horizonKey] { try Meta.set(w, k, .integer(0)) }
                try Meta.set(w, "next_pk", .integer(1))
            }
            // A store from before the index: deletions up to now were never indexed.
            if !tombstonesExisted, case .null = try Meta.get(w, Tombstones.horizonKey) {
                try Meta.set(w, Tombstones.horizonKey, .integer(try Meta.int(w, "generation")))
            }
            var resolved: ResolvedModel?
            if case .text(let json) = try Meta.get(w, "model_json") {
                resolved = try ModelCache.resolved(json: json)
            } else if let model {
                let r = try ResolvedModel(model)
                for s in r.createStatements() { try w.exec(s) }
                try Meta.set(w, "model_json", .text(String(decoding: try model.jsonData(), as: UTF8.self)))
                try Meta.set(w, "model_hash", .text(r.hash))
                resolved = r
            }
            let st = try state(w, model: resolved, config: config)
            try w.exec("COMMIT")
            return st
        } catch { try? w.exec("ROLLBACK"); throw error }
    }

    /// The store's state from `ubq_meta` (inside the caller's transaction), its readable window
    /// starting now; a key missing or not an integer throws (`Meta.int`).
    private static func state(_ c: Connection, model: ResolvedModel?, config: StorageConfiguration) throws -> StoreState {
        var st = StoreState(model: model, generation: try Meta.int(c, "generation"), epoch: UInt64(bitPattern: try Meta.int(c, "epoch")),
                            gcHorizon: try Meta.int(c, "gc_horizon"), historyHorizon: try Meta.int(c, "history_horizon"),
                            tombstoneHorizon: try Meta.int(c, Tombstones.horizonKey), window: ReadableWindow(seconds: config.minimumReadableWindowSeconds))
        st.window.reopened(oldest: st.gcHorizon, current: st.generation, at: config.clock())
        return st
    }
}
