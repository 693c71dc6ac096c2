internal import CSQLite
import Foundation
import Logging

public enum SynchronousMode: String, Codable, Sendable { case off = "OFF", normal = "NORMAL", full = "FULL", extra = "EXTRA" }

/// Per-store engine settings. Defaults are the documented defaults (docs/storage.md).
public struct StorageConfiguration: Sendable {
    /// Read-only connections per store, opened as reads need them; also the least number of
    /// threads in the shared reader pool (`ReaderPool`). Default: active processor count.
    public var readerCount: Int = ProcessInfo.processInfo.activeProcessorCount
    /// Most threads of the shared writer pool (`WriterPool`, docs/threading.md rule 18) that
    /// serves every open store's writer queue; threads start only when every one is busy and
    /// another store has work. A store's queue uses one thread at a time, so this bounds how
    /// many stores commit at once (each commit mostly waits for its fsync). 8: W6 (100 stores
    /// saving at once) gained nothing from 32 (docs/benchmarks.md, "Writer threads": its saves
    /// are bound by CPU on this machine); a bound, not a cost: threads start only when needed.
    /// `ubiquityd --writer-threads`.
    public var writerThreads: Int = 8
    /// The most `writerThreads` can be (`WriterPool` caps it there whatever the configuration says).
    public static let writerThreadLimit = 64
    /// FULL: an acknowledged save survives power loss.
    public var synchronous: SynchronousMode = .full
    public var busyTimeoutMilliseconds: Int32 = 5000
    /// SQLite VFS name (nil: the default); must be registered. The fault tests use "ubq-fault" (Sources/CSQLiteFaultVFS).
    public var vfsName: String? = nil
    /// A PASSIVE checkpoint runs after a commit once the WAL holds more than this (its content:
    /// frames since the last restart). 32 MiB: W2 on a 1M-object store checkpointed for 1.2-3.8 s
    /// of every 10 s round at 4 MiB and 0.7-1.8 s at 16; W2 into an empty store checkpoints half
    /// as often at 32 as at 16 (0.24 vs 0.40 ms of the writer's time per save).
    public var checkpointThresholdBytes: Int = 32 << 20
    /// The threshold instead, while no reader has begun since the WAL last restarted (a store
    /// only written to, e.g. an import or a burst of saves); 0 or not above
    /// `checkpointThresholdBytes`: always that one. Each checkpoint copies every page the WAL
    /// holds back into the database and syncs it, and the writer waits for that I/O: a larger WAL
    /// copies a page rewritten by many commits once. Readers pay for a large WAL instead (SQLite
    /// looks every page they read up in the WAL index, whose cost grows with the WAL), so the
    /// first read after a restart brings the smaller threshold back. 128 MiB: W2 (100-object
    /// saves into a new store, nobody reading) 74-79k rows/s at 32, 83-98k at 64, 94-116k at 128
    /// (docs/benchmarks.md, fifth round).
    public var checkpointThresholdBytesWithoutReaders: Int = 128 << 20
    /// A writer idle this long (seconds) after a commit that left more than
    /// `checkpointThresholdBytes` in the WAL checkpoints and restarts it then (0: never): a store
    /// written without readers and then only read would otherwise keep its long WAL, and every
    /// read would pay for it, until the next save.
    public var idleCheckpointSeconds: Double = 0.1
    /// Past twice the threshold the writer restarts the WAL: reader jobs not yet started wait up
    /// to this long (seconds) for the ones in flight to finish; the writer itself never waits.
    public var walRestartMaxReaderWait: Double = 0.5
    /// Before its checkpoint (WAL past the threshold) the writer waits at most this long (seconds)
    /// for the readers already in flight to finish, so the checkpoint copies the whole WAL back
    /// and the WAL restarts without closing the reader gate. New readers are never held up.
    public var checkpointReaderWait: Double = 0.01
    /// Past this WAL size the writer does wait for in-flight readers (up to the busy timeout) to
    /// restart the WAL: the one case where a reader can hold up the writer. Default 128 MiB (4x
    /// the threshold, so the reader-gate fallback at 2x comes first).
    public var walHardLimitBytes: Int = 128 << 20
    /// Page cache of the writer's connection, in KiB (`PRAGMA cache_size=-N`). SQLite's default
    /// (2 MiB) no longer holds the index pages a save touches once a store has about a million
    /// objects; the cache fills only as pages are used, so a small store costs no more.
    public var writerCacheKiB: Int = 32 << 10
    /// Bytes of the store file each read connection maps into memory (`PRAGMA mmap_size`; 0: no
    /// mapping, every page a reader's cache misses is a `pread`). Pages still in the WAL are read
    /// from the WAL as before; the mapping is address space, not memory: the pages are the OS
    /// page cache's. An I/O error on a mapped page is a SIGBUS instead of an error code (SQLite's
    /// documented trade-off of memory-mapped I/O).
    public var readerMmapBytes: Int = 1 << 30
    /// How long a read connection may keep its read transaction after a job, in milliseconds, for
    /// later reads at a generation that snapshot contains (`HeldSnapshot`, docs/storage.md rule
    /// 4); 0: every read job runs its own `BEGIN … COMMIT`. Held snapshots are ended before every
    /// checkpoint and reader-gate closure, so the WAL stays bounded as before. 200: SQLite resets
    /// a connection's page cache and mapping at most once per hold instead of once per commit
    /// (W4 at ~60-100 saves/s: reader threads' kernel share 27-32% at 0, 19% at 50, 7-9% at 200,
    /// 4-6% at 1000); a hold shorter than the time between commits saves nothing (5 ms: none).
    public var readerSnapshotHoldMilliseconds: Int = 200
    /// A read connection unused this long (seconds) closes; the next read opens one again
    /// (`IdleReaderPolicy`, docs/storage.md "Idle read connections"; 0: never). Each open one
    /// holds two descriptors (database and WAL) and its page cache. 10: a store read at least
    /// every 10 s keeps its connections; one read less often pays a connection open (~0.1-0.2
    /// ms) on its next read.
    public var readerIdleSeconds: Double = 10
    /// Page cache of each read connection, in KiB (`PRAGMA cache_size=-N`); nil: SQLite's
    /// default (2 MiB).
    public var readerCacheKiB: Int? = nil
    /// Nice value (CPU priority) of each store's writer thread, 0...19; 0: the process's.
    /// Higher: when reads and saves compete for the cores, reads get more of them (the writer
    /// still runs, at a smaller CFS share). docs/threading.md rule 14, docs/operations.md.
    public var writerNice: Int = 0
    /// The WAL file is trimmed to this size at the first commit after a restart (RESTART keeps
    /// the file otherwise: later commits overwrite it rather than grow it).
    public var journalSizeLimitBytes: Int = 128 << 20
    /// Largest string or binary value accepted in a save.
    public var maxValueBytes: Int = 4 << 20
    /// Most saves the writer groups into one SQLite transaction.
    public var maxGroupCommit: Int = 64
    /// Run one GC batch after this many commits (0: only on request).
    public var gcEveryCommits: Int = 256
    public var gcBatchSize: Int = 500
    /// Backups a migration takes under their default names (`MigrationBackups`) kept per store:
    /// after each migration the older ones are removed. At least 1.
    public var migrationBackupsKept: Int = 3
    /// History transactions older than this many generations behind current are trimmed by GC (nil: keep all).
    public var historyRetentionGenerations: Int64? = nil
    /// Every generation stays readable at least this long (seconds) after it stops being current:
    /// GC keeps its row versions meanwhile (SPEC §4.2; 0: only pins and reads in flight keep
    /// them). 60: a token read a moment ago still works under write load, where GC used to
    /// collect it after about `gcEveryCommits` commits of other writers.
    public var minimumReadableWindowSeconds: Double = 60
    /// History transactions committed longer ago than this (seconds) are trimmed by GC (nil: no
    /// age limit). 30 days: a device offline for a month still resumes its feed from its token
    /// (Firestore keeps a week of point-in-time history; CloudKit change tokens are not known to
    /// expire in practice, so a shorter floor would surprise its users).
    public var historyRetentionSeconds: Double? = 30 * 86_400
    /// GC trims the oldest history transactions while the history's change records hold more
    /// than this many bytes (nil: no size limit). 1 GiB: a bound on disk use by a write-heavy
    /// store (about 8M one-object saves), far above what a month of interactive use writes.
    public var historyRetentionBytes: Int64? = 1 << 30
    /// Tombstone index entries (deleted object IDs, `Store.deletions`) older than this (seconds)
    /// are trimmed by GC — never while the history still holds their transaction, so the index
    /// always outlives the full history (nil: keep them all). 180 days: a device offline for
    /// months learns what was deleted instead of wiping its cache; an entry is ~30 bytes.
    public var tombstoneRetentionSeconds: Double? = 180 * 86_400
    /// The change feed's in-memory window of recent transactions (`ChangeFeed`): subscribers
    /// within it are served from memory, older positions read `ubq_history` from disk.
    public var changeFeedWindowTransactions: Int = 4096
    /// The window's bound in history-record bytes.
    public var changeFeedWindowBytes: Int = 16 << 20
    /// Prepared statements cached per connection.
    public var statementCacheSize: Int = 64
    /// The writer connection's WAL frames go out in one write per run of frames instead of two
    /// writes per frame (docs/storage.md "WAL write coalescing"). false: SQLite's own writes.
    public var walWriteCoalescing: Bool = true
    /// Monotonic seconds, for pin leases and the readable window (tests inject a manual clock).
    public var clock: @Sendable () -> Double = { ProcessInfo.processInfo.systemUptime }
    /// Wall-clock seconds since 1970: tombstone times and the "now" the history's and the
    /// tombstones' age limits compare with (tests inject a clock that moves ahead of real time).
    public var wallClock: @Sendable () -> Double = { Date().timeIntervalSince1970 }
    public var logger: Logger = Logger(label: "ubiquity.storage")
    /// Commit, checkpoint and reader-wait reports (metrics); empty: none.
    public var observer = StorageObserver()
    public init() {}
}

/// A lease keeping a generation readable (and its row versions from GC).
public struct PinLease: Sendable, Hashable {
    public let id: UUID
    public let token: GenerationToken
}

struct StoreState {
    var model: ResolvedModel?
    var generation: Int64
    var epoch: UInt64
    var gcHorizon: Int64
    var historyHorizon: Int64
    /// The tombstone index holds every deletion after this generation.
    var tombstoneHorizon: Int64
    /// When recent generations stopped being current (GC's floor for the readable window).
    var window: ReadableWindow
    var pins: [UUID: (gen: Int64, expiry: Double)] = [:]
    var activeReads: [Int64: Int] = [:]
    var closed = false
    var writerBusyWaits = 0
    var walRestarts = 0
    var walRestartsSkipped = 0
    var checkpoints = 0
    /// Checkpoints the writer ran because it was idle after a long WAL (also in `checkpoints`).
    var idleCheckpoints = 0
    var checkpointSeconds = 0.0
    var checkpointMaxSeconds = 0.0
    /// Copy steps of stepped checkpoints (rule 5): count, total and longest seconds.
    var checkpointCopies = 0
    var copySeconds = 0.0
    var copyMaxSeconds = 0.0
    /// Copy steps that copied the whole WAL (no fence held it back: they synced the database).
    var copiesToTheEnd = 0
    /// Database writebacks after copy steps (on the writeback thread): count, total and longest seconds.
    var writebacks = 0
    var writebackSeconds = 0.0
    var writebackMaxSeconds = 0.0
    /// WAL content after the last commit (`StoreStatistics.walBytes`).
    var walBytes = 0
}

/// One open store: a writer connection with its queue on the shared writer threads, and read
/// connections used by the shared reader threads and blocking handlers. No thread of its own.
/// All methods may be called from any thread or task.
public final class Store: Sendable {
    public let id: UUID
    public let path: String
    let canonicalPath: String
    let config: StorageConfiguration
    let state: Locked<StoreState>
    let readers: ReaderPool
    let readConnections: ReadConnections
    let writer: WriterQueue<WriterJob>
    let writerState: WriterOwned
    let readerGate: ReaderGate
    /// The store's change feed: committed transactions in memory for every subscriber.
    public let feed: ChangeFeed

    /// Opens (creating if missing) the store file at `path`. If the store has no model yet and
    /// `model` is given, it is installed. An existing store keeps its model (use `migrate`).
    public static func open(path: String, id: UUID, model: ModelDefinition? = nil, configuration: StorageConfiguration = StorageConfiguration()) throws -> Store {
        try Store(path: path, id: id, model: model, config: configuration)
    }

    /// Files open as stores in this process: a second `Store` on the same file would be a second
    /// writer (rule 1).
    static let openPaths = Locked(Set<String>())

    private init(path: String, id: UUID, model: ModelDefinition?, config: StorageConfiguration) throws {
        let canonical = CanonicalPath.of(path)
        guard Store.openPaths.withLock({ $0.insert(canonical).inserted }) else {
            throw StorageError(.busy, "store file is already open in this process")
        }
        var opened = false
        defer { if !opened { Store.openPaths.withLock { _ = $0.remove(canonical) } } }
        self.canonicalPath = canonical
        self.path = path
        self.config = config
        let cfg = config
        // A file with everything in place opens on its first read connection (Store+Open.swift).
        let w: Connection?, firstReader: Connection?, st: StoreState
        let probe = try? Store.openReader(path: path, config: cfg)
        if let probe, let lazy = Store.stateWithoutWriter(probe, id: id, model: model, config: cfg) {
            w = nil; firstReader = probe; st = lazy
        } else {
            // the probe is not kept: readers open after the writer's schema transaction, as before
            probe?.close()
            let eager = try Store.openWriter(path: path, config: cfg)
            do { st = try Store.schemaTransaction(eager, id: id, model: model, config: cfg) } catch { eager.close(); throw error }
            w = eager; firstReader = nil
        }
        self.id = id
        state = Locked(st)
        let wo = WriterOwned(checkpoints: CheckpointPolicy(configuration: config))
        writerState = wo
        let gate = ReaderGate(maxWait: config.walRestartMaxReaderWait)
        readerGate = gate
        do {
            readConnections = try ReadConnections(count: max(1, config.readerCount), holdNanos: UInt64(max(0, config.readerSnapshotHoldMilliseconds)) * 1_000_000,
                                                   idleNanos: UInt64(max(0, config.readerIdleSeconds) * 1e9),
                                                   logger: config.logger, first: firstReader) {
                try Store.openReader(path: path, config: cfg)
            }
        } catch { w?.close(); throw error }
        let rcs = readConnections
        gate.releaseSnapshots = { rcs.releaseSnapshots() }
        readers = ReaderPool(count: max(1, config.readerCount), connections: readConnections, gate: gate,
                             waited: config.observer.readerWaited)
        feed = ChangeFeed(storeID: id, epoch: st.epoch, generation: st.generation,
                          maxTransactions: config.changeFeedWindowTransactions, maxBytes: config.changeFeedWindowBytes)
        let engine = WriterEngine(storeID: id, config: config, state: state, owned: wo, path: path, gate: gate, feed: feed)
        w?.releaseThread()  // the thread serving the writer queue adopts it for each run
        let writer = WriterQueue<WriterJob>(connection: w, connect: { try Store.openWriter(path: path, config: cfg) },
                                            fail: { error, jobs in jobs.forEach { $0.fail(error) } }, maxBatch: config.maxGroupCommit, nice: config.writerNice, maxThreads: config.writerThreads,
                                            handler: { conn, jobs in engine.handle(conn, jobs) },
                                            idle: { engine.idleCheckpointWait }, onIdle: { conn in engine.idleCheckpoint(conn) },
                                            enter: { conn in engine.enter(conn) }, leave: { conn in engine.leave(conn) },
                                            onClose: { conn in engine.closing(conn) }, afterClose: { engine.closed() })
        self.writer = writer
        gate.onDrained = { [weak writer] gate in
            let ok = writer?.submit(.exclusive(CancelFlag(), { opened in
                guard case .success(let (conn, engine)) = opened else { gate.open(); return }
                rcs.releaseSnapshots()  // any kept by readers that went ahead after the gate's wait
                engine.restartWAL(conn)
            })) ?? false
            if !ok { gate.open() }
        }
        opened = true
    }

    /// Closes the pools: queued work finishes, later calls fail with `.storeClosed`. Blocks until the threads exit.
    public func close() {
        let already = state.withLock { s -> Bool in defer { s.closed = true }; return s.closed }
        if already { return }
        // Readers first: the writer is then the last connection, so its close-time TRUNCATE
        // checkpoint runs with nobody reading (rule 5).
        readers.shutdown()
        readConnections.close()
        writer.shutdown()  // its close step also ends the writeback (WriterEngine.closed)
        feed.close()
        let w = walStats
        config.logger.debug("store \(id) closed: \(w.checkpoints) checkpoints (\(idleCheckpointCount) when idle, \(Int(w.seconds * 1000)) ms, longest \(Int(w.maxSeconds * 1000)) ms), WAL restarts \(w.restarts), skipped \(w.restartsSkipped), reader gate closed \(w.gateClosures) times; \(stepStatsLine)")
        Store.openPaths.withLock { _ = $0.remove(canonicalPath) }
    }

    deinit { close() }

    // MARK: State

    public var currentToken: GenerationToken { state.withLock { GenerationToken(storeID: id, epoch: $0.epoch, generation: $0.generation) } }
    public var modelDefinition: ModelDefinition? { state.withLock { $0.model?.definition } }
    public var modelVersionHash: String? { state.withLock { $0.model?.hash } }
    /// The oldest position history can be read after (`history(after:)` from it reads all retained history).
    public var oldestHistoryToken: GenerationToken { state.withLock { GenerationToken(storeID: id, epoch: $0.epoch, generation: $0.historyHorizon) } }
    /// The oldest generation still readable.
    public var oldestReadableGeneration: Int64 { state.withLock { $0.gcHorizon } }

    /// Validates a read generation and registers an active read at it (unregister with `endRead`).
    /// Registration under the same lock GC uses to raise its horizon makes "validated, then read" race-free.
    func beginRead(_ g: ReadGeneration, minimumGeneration: Int64? = nil) throws -> (Int64, ResolvedModel) {
        let (gen, model, _) = try beginTokenRead(g, minimumGeneration: minimumGeneration)
        return (gen, model)
    }

    /// `beginRead` that also returns the store's epoch (for the read's token), under the same lock.
    func beginTokenRead(_ g: ReadGeneration, minimumGeneration: Int64? = nil) throws -> (Int64, ResolvedModel, UInt64) {
        try state.withLock { s in
            if s.closed { throw StorageError(.storeClosed, "store is closed") }
            guard let m = s.model else { throw StorageError.noModelYet }
            if let mg = minimumGeneration, s.generation < mg {
                throw StorageError(.generationNotReached, "store is at generation \(s.generation), read requires \(mg)")
            }
            let gen: Int64
            switch g {
            case .current: gen = s.generation
            case .token(let t): gen = try validate(t, s)
            }
            s.activeReads[gen, default: 0] += 1
            return (gen, m, s.epoch)
        }
    }

    func endRead(_ gen: Int64) {
        state.withLock { s in
            if let n = s.activeReads[gen] { if n <= 1 { s.activeReads[gen] = nil } else { s.activeReads[gen] = n - 1 } }
        }
    }

    func validate(_ t: GenerationToken, _ s: StoreState) throws -> Int64 {
        guard t.storeID == id else { throw StorageError(.tokenOfAnotherStore(t.storeID), "the token belongs to another store") }
        guard t.epoch == s.epoch else { throw StorageError(.storeReplaced, "store was replaced since this token was issued") }
        guard t.generation <= s.generation else { throw StorageError(.invalidArgument, "token names a generation this store has not reached") }
        guard t.generation >= s.gcHorizon else {
            throw StorageError(.generationExpired, "generation \(t.generation) was collected (oldest readable: \(s.gcHorizon))")
        }
        return t.generation
    }

    // MARK: Pins

    /// Pins a generation (current if nil) for `lease` seconds; its row versions survive GC until the
    /// lease ends (`unpin`, or expiry without `renew`).
    public func pin(_ token: GenerationToken? = nil, lease: Double) throws -> PinLease {
        try state.withLock { s in
            let g = try token.map { try validate($0, s) } ?? s.generation
            let pid = UUID()
            s.pins[pid] = (g, config.clock() + lease)
            return PinLease(id: pid, token: GenerationToken(storeID: id, epoch: s.epoch, generation: g))
        }
    }

    /// Extends a lease; throws `.generationExpired` if it already expired.
    public func renew(_ pin: PinLease, lease: Double) throws {
        try state.withLock { s in
            let now = config.clock()
            guard let p = s.pins[pin.id], p.expiry > now else { s.pins[pin.id] = nil; throw StorageError(.generationExpired, "pin lease expired") }
            s.pins[pin.id] = (p.gen, now + lease)
        }
    }

    public func unpin(_ pin: PinLease) { state.withLock { _ = $0.pins.removeValue(forKey: pin.id) } }

    public var pinCount: Int { state.withLock { s in let now = config.clock(); return s.pins.values.filter { $0.expiry > now }.count } }

    // MARK: Async plumbing

    /// Runs `body` on a reader thread. Cancellation of the calling task interrupts its SQL.
    /// `use`: `.at(gen, model)` for reads filtered to one generation (they may share a held
    /// snapshot, `runRead`), `.fresh` for the others.
    func onReader<T: Sendable>(transaction: Bool = true, use: ReadSnapshotUse = .fresh, _ body: @escaping @Sendable (Connection) throws -> T) async throws -> T {
        let flag = CancelFlag()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (cont: CheckedContinuation<T, Error>) in
                readers.submit(ReaderJob { [self] conn in
                    guard let conn else { return { cont.resume(throwing: StorageError(.storeClosed, "store is closed")) } }
                    let result = Result { try runRead(on: conn, flag: flag, transaction: transaction, use: use, body) }
                    return { cont.resume(with: result) }
                })
            }
        } onCancel: { flag.cancel() }
    }

    /// `onReader` for synchronous callers (a blocking worker thread, never a task): the caller
    /// checks a read connection out and runs the read transaction on its own thread (rule 2);
    /// `isCancelled` interrupts its SQL like a task's cancellation does.
    /// `transaction(conn)` says whether the job needs `BEGIN … COMMIT` (rule 4); false only for a
    /// job that runs a single statement, which reads one snapshot by itself.
    func onReaderSync<T>(isCancelled: (@Sendable () -> Bool)?, use: ReadSnapshotUse, transaction: (Connection) -> Bool = { _ in true },
                         _ body: (Connection) throws -> T) throws -> T {
        let flag = CancelFlag(poll: isCancelled)
        // Same order as a `ReaderPool` thread: inside the gate while holding a connection (and
        // maybe its held snapshot, rule 4); the checkin, which may end it, before leaving.
        let ticket = readerGate.enter()
        defer { readerGate.leave(ticket) }
        guard let conn = readConnections.checkout() else { throw StorageError(.storeClosed, "store is closed") }
        defer { readConnections.checkin(conn) }
        return try runRead(on: conn, flag: flag, transaction: transaction(conn), use: use, body)
    }

    /// `read` for synchronous callers (see `onReaderSync`): same generation checks, same
    /// registration of the active read, same read transaction.
    public func readSync<T>(at g: ReadGeneration = .current, minimumGeneration: Int64? = nil, isCancelled: (@Sendable () -> Bool)? = nil,
                            _ body: (ReadContext) throws -> T) throws -> T {
        let (gen, model, epoch) = try beginTokenRead(g, minimumGeneration: minimumGeneration)
        defer { endRead(gen) }
        let sid = id
        return try onReaderSync(isCancelled: isCancelled, use: .at(generation: gen, model: model)) { conn in
            try body(ReadContext(conn: conn, model: model, storeID: sid, token: GenerationToken(storeID: sid, epoch: epoch, generation: gen)))
        }
    }

    /// `readSync { try body($0, $0.objects(ids)) }` for point reads (GetObjects): the same checks,
    /// registration and results, but when loading the objects is a single SELECT (one root table,
    /// at most one chunk of IDs, no relationships to load) it runs in SQLite's autocommit mode
    /// instead of inside `BEGIN … COMMIT`: one statement reads one WAL snapshot by itself, which
    /// includes the read's generation (published only after its commit, rule 7), and the
    /// generation filter in the SQL does the rest (storage rule 4).
    public func objectsSync<T>(_ ids: [ObjectID], at g: ReadGeneration = .current, minimumGeneration: Int64? = nil,
                               isCancelled: (@Sendable () -> Bool)? = nil,
                               _ body: (ReadContext, [ObjectSnapshot?]) throws -> T) throws -> T {
        let (gen, model, epoch) = try beginTokenRead(g, minimumGeneration: minimumGeneration)
        defer { endRead(gen) }
        let sid = id
        return try onReaderSync(isCancelled: isCancelled, use: .at(generation: gen, model: model), transaction: { conn in
            !RowReader(conn: conn, model: model, storeID: sid, gen: gen).loadsInOneStatement(ids)
        }) { conn in
            let ctx = ReadContext(conn: conn, model: model, storeID: sid, token: GenerationToken(storeID: sid, epoch: epoch, generation: gen))
            return try body(ctx, try ctx.objects(ids))
        }
    }

    /// Runs `body` alone on the writer thread (not grouped with saves).
    func onWriter<T: Sendable>(_ body: @escaping @Sendable (Connection, WriterEngine) throws -> T) async throws -> T {
        let flag = CancelFlag()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (cont: CheckedContinuation<T, Error>) in
                let ok = writer.submit(.exclusive(flag, { opened in
                    let conn: Connection, engine: WriterEngine
                    do { (conn, engine) = try opened.get() } catch { cont.resume(throwing: error); return }
                    if flag.isCancelled { cont.resume(throwing: StorageError(.cancelled, "request cancelled")); return }
                    conn.currentCancel = flag
                    defer { conn.currentCancel = nil }
                    cont.resume(with: Result { try body(conn, engine) })
                }))
                if !ok { cont.resume(throwing: StorageError(.storeClosed, "store is closed")) }
            }
        } onCancel: { flag.cancel() }
    }

    // MARK: Reads

    /// Reads objects by ID at a generation; nil where the object does not exist at that generation.
    public func objects(_ ids: [ObjectID], at g: ReadGeneration = .current, minimumGeneration: Int64? = nil) async throws -> [ObjectSnapshot?] {
        let (gen, model) = try beginRead(g, minimumGeneration: minimumGeneration)
        defer { endRead(gen) }
        let sid = id
        return try await onReader(use: .at(generation: gen, model: model)) { conn in
            let r = RowReader(conn: conn, model: model, storeID: sid, gen: gen)
            return try ids.map { try r.object($0) }
        }
    }

    /// One object by ID; throws `.notFound` if it does not exist at that generation.
    public func object(_ oid: ObjectID, at g: ReadGeneration = .current, minimumGeneration: Int64? = nil) async throws -> ObjectSnapshot {
        guard let o = try await objects([oid], at: g, minimumGeneration: minimumGeneration)[0] else {
            throw StorageError(.notFound, "\(oid) does not exist at this generation")
        }
        return o
    }

    /// Every object at a generation, ordered by entity then pk.
    public func dump(at g: ReadGeneration = .current) async throws -> StoreDump {
        let (gen, model) = try beginRead(g)
        defer { endRead(gen) }
        let sid = id
        let epoch = state.withLock { $0.epoch }
        return try await onReader(use: .at(generation: gen, model: model)) { conn in
            let r = RowReader(conn: conn, model: model, storeID: sid, gen: gen)
            return StoreDump(token: GenerationToken(storeID: sid, epoch: epoch, generation: gen), objects: try r.all())
        }
    }

    /// Object IDs of live objects of an entity (and sub-entities) at a generation, ordered by pk.
    public func objectIDs(entity: String, at g: ReadGeneration = .current) async throws -> [ObjectID] {
        let (gen, model) = try beginRead(g)
        defer { endRead(gen) }
        guard model.entities[entity] != nil else { throw StorageError(.validationFailed([ValidationIssue(.unknownEntity, entity: entity, "no such entity")]), "unknown entity") }
        let sid = id
        return try await onReader(use: .at(generation: gen, model: model)) { conn in
            let fam = model.family[entity]!
            var out: [ObjectID] = []
            try conn.query("SELECT pk, z_ent FROM \(q(model.table(of: entity))) WHERE created_gen <= ?1 AND ended_gen > ?1 ORDER BY pk", [.integer(gen)]) { st in
                let e = st.text(1)
                if fam.contains(e) { out.append(ObjectID(storeID: sid, entity: e, pk: st.int(0))) }
            }
            return out
        }
    }

    /// The table mapping, for the query layer.
    public func tableMapping() throws -> [String: EntityMapping] {
        guard let m = state.withLock({ $0.model }) else { throw StorageError.noModelYet }
        return ReadContext.mapping(m)
    }

    /// Runs `body` on a reader thread inside one read transaction at a generation: the query
    /// layer's entry point. SQL must select only visible versions (`EntityMapping.visible`, bound
    /// to `context.generation`); the authorizer admits only the store's own tables.
    public func read<T: Sendable>(at g: ReadGeneration = .current, minimumGeneration: Int64? = nil,
                                  _ body: @escaping @Sendable (ReadContext) throws -> T) async throws -> T {
        let (gen, model, epoch) = try beginTokenRead(g, minimumGeneration: minimumGeneration)
        defer { endRead(gen) }
        let sid = id
        return try await onReader(use: .at(generation: gen, model: model)) { conn in
            try body(ReadContext(conn: conn, model: model, storeID: sid, token: GenerationToken(storeID: sid, epoch: epoch, generation: gen)))
        }
    }

    // MARK: Writes

    /// A save's checks of attribute values that need only the model — unknown attribute, type,
    /// range, size, bounds — run by the save's own checker (`ValueChecker`) before anything is
    /// queued: Contexts.Insert/Update run them when a change is made, a batch update once for
    /// the values it sets on every matching object. With `nullAllowed`, nil for a required
    /// attribute passes (a context may fill it in before saving; its save checks it). An unknown
    /// entity passes too: the caller's lookup reports it in its own terms. Throws
    /// `.validationFailed` with each issue's request path (`field` + "." + attribute), at most
    /// `StorageError.maxReportedIssues` of them.
    public func validateValues(entity: String, values: [String: StorageValue], field: String, nullAllowed: Bool = false) throws {
        guard let m = state.withLock({ $0.model }) else { throw StorageError.noModelYet }
        guard m.entities[entity] != nil else { return }  // the caller's own lookup of the entity reports it
        var issues: [ValidationIssue] = []
        ValueChecker(model: m, config: config).checkValues(entity, values, object: nil, into: &issues)
        if nullAllowed { issues.removeAll { $0.code == .missingRequired } }
        if issues.isEmpty { return }
        throw StorageError.validationFailed(issues, "invalid values") { listed in
            for k in listed.indices { listed[k].field = listed[k].property.map { field + "." + $0 } ?? field }
        }
    }

    /// Applies a save (see `SaveRequest`). Concurrent saves are grouped into one SQLite transaction,
    /// each inside its own savepoint: each save is all-or-nothing on its own.
    public func save(_ request: SaveRequest) async throws -> SaveResult {
        // The inserts' model-only work (validation, defaults, row values) on this thread, not the
        // writer's (concurrency rule 12).
        let prepared = request.inserts.isEmpty ? nil : state.withLock({ $0.model }).map { InsertPreparer.prepare(request, model: $0, config: config, storeID: id) }
        return try await save(request, prepared: prepared)
    }

    /// Queues a save with its inserts prepared against some model (used only if it is still the store's).
    func save(_ request: SaveRequest, prepared: PreparedSave?) async throws -> SaveResult {
        let flag = CancelFlag()
        var result = try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (cont: CheckedContinuation<SaveResult, Error>) in
                let ok = writer.submit(.save(SaveJob(request: request, prepared: prepared, flag: flag, complete: { cont.resume(with: $0) })))
                if !ok { cont.resume(throwing: StorageError(.storeClosed, "store is closed")) }
            }
        } onCancel: { flag.cancel() }
        result.addNewObjects(request)  // here, not on the writer thread (SaveResult.firstNewPK)
        // The writer dropped its references before completing (`SaveJob.take`): the last ones
        // are freed here, on this thread.
        withExtendedLifetime(prepared) {}
        return result
    }

    /// Inserts many objects in one transaction and one history record; with `upsert`, objects that
    /// clash on a uniqueness constraint update the existing object instead.
    public func batchInsert(entity: String, objects: [[String: StorageValue]], upsert: Bool = false, author: String? = nil, contextName: String? = nil) async throws -> SaveResult {
        var req = SaveRequest()
        req.inserts = objects.enumerated().map { InsertOperation(temporaryID: "b\($0.offset)", entity: entity, values: $0.element) }
        req.mergePolicy = upsert ? .mergeByPropertyObjectTrump : .error
        req.author = author
        req.contextName = contextName
        return try await save(req)
    }

    /// One GC batch: raises the horizon to the oldest generation any live pin or read needs, then
    /// deletes up to `batchSize` row versions nobody can see (its own short transaction). Returns
    /// the number of rows removed; call again while it returns `batchSize`.
    @discardableResult
    public func collectGarbage(batchSize: Int? = nil) async throws -> Int {
        let n = batchSize ?? config.gcBatchSize
        return try await onWriter { conn, engine in try engine.gcBatch(conn, limit: n) }
    }

    /// Runs GC batches until nothing is left to collect.
    public func collectAllGarbage() async throws {
        let n = config.gcBatchSize
        while try await collectGarbage(batchSize: n) >= n {}
    }

    /// Checkpoint from the writer. `truncate`: wait for readers and truncate the WAL to zero bytes.
    public func checkpoint(truncate: Bool = false) async throws -> (walFrames: Int, checkpointedFrames: Int) {
        try await onWriter { conn, _ in
            let r = conn.checkpoint(truncate: truncate)
            if r.rc != SQLITE_OK { throw conn.error(r.rc, sql: "checkpoint") }
            return (Int(r.log), Int(r.done))
        }
    }

    public var walFileSize: Int { Store.fileSize(path + "-wal") }

    /// Times the writer connection's busy handler ran, as of the last group commit (it should not:
    /// the writer never waits for readers).
    public var writerBusyWaits: Int { state.withLock { $0.writerBusyWaits } }
    /// WAL restarts (TRUNCATE checkpoints after the reader gate drained) done / skipped because busy.
    public var walRestartCounts: (done: Int, skipped: Int) { state.withLock { ($0.walRestarts, $0.walRestartsSkipped) } }
    /// Checkpoints the writer ran when idle after a commit that left a long WAL (also counted in
    /// `walStats.checkpoints`).
    public var statistics: StoreStatistics {
        StoreStatistics(writerQueueJobs: writer.queuedJobs, readerQueueJobs: readers.queuedJobs,
                        walBytes: state.withLock { $0.walBytes })
    }

    public var idleCheckpointCount: Int { state.withLock { $0.idleCheckpoints } }
    /// Checkpoint activity since open: threshold checkpoints (count, total and longest seconds,
    /// bounded reader waits included), WAL restarts, reader-gate closures.
    public var walStats: (checkpoints: Int, seconds: Double, maxSeconds: Double, restarts: Int, restartsSkipped: Int, gateClosures: Int) {
        let g = readerGate.closeCount
        return state.withLock { ($0.checkpoints, $0.checkpointSeconds, $0.checkpointMaxSeconds, $0.walRestarts, $0.walRestartsSkipped, g) }
    }

    /// Stepped checkpoints since open (rule 5): copy steps on the writer (count, total and
    /// longest seconds, how many copied the whole WAL because no fence held them back) and
    /// database writebacks on the writeback thread (count, total and longest seconds).
    public var checkpointStepStats: (copies: Int, copySeconds: Double, copyMaxSeconds: Double, copiesToTheEnd: Int, writebacks: Int, writebackSeconds: Double, writebackMaxSeconds: Double) {
        state.withLock { ($0.checkpointCopies, $0.copySeconds, $0.copyMaxSeconds, $0.copiesToTheEnd, $0.writebacks, $0.writebackSeconds, $0.writebackMaxSeconds) }
    }

    private var stepStatsLine: String {
        let s = checkpointStepStats
        return "\(s.copies) copy steps (\(Int(s.copySeconds * 1000)) ms, longest \(Int(s.copyMaxSeconds * 1000)) ms), \(s.writebacks) writebacks (\(Int(s.writebackSeconds * 1000)) ms, longest \(Int(s.writebackMaxSeconds * 1000)) ms)"
    }

    static func fileSize(_ p: String) -> Int {
        var st = stat()
        return stat(p, &st) == 0 ? Int(st.st_size) : 0
    }

    /// `PRAGMA integrity_check` on a reader; returns the problems (empty: ok).
    public func integrityCheck() async throws -> [String] {
        try await onReader(use: .fresh) { conn in
            var out: [String] = []
            try conn.query("PRAGMA integrity_check") { st in let s = st.text(0); if s != "ok" { out.append(s) } }
            return out
        }
    }

    // MARK: History

    /// Transactions after `token` (exclusive), oldest first, at most `limit`.
    public func history(after token: GenerationToken?, limit: Int = 100) async throws -> HistoryPage {
        let (after, epoch, current) = try state.withLock { s -> (Int64, UInt64, Int64) in
            if let t = token {
                guard t.storeID == id else { throw StorageError(.tokenOfAnotherStore(t.storeID), "the token belongs to another store") }
                guard t.epoch == s.epoch else { throw StorageError(.storeReplaced, "store was replaced since this token was issued") }
            }
            let after = token?.generation ?? s.historyHorizon
            if after < s.historyHorizon { throw historyExpired(after: after, s, "history through generation \(s.historyHorizon) was trimmed") }
            return (after, s.epoch, s.generation)
        }
        let sid = id
        let page = try await onReader(use: .fresh) { conn in
            var txs: [HistoryTransaction] = []
            try conn.query("SELECT generation, timestamp, author, context, changes FROM ubq_history WHERE generation > ? ORDER BY generation LIMIT ?",
                           [.integer(after), .integer(Int64(max(1, limit)))]) { st in
                txs.append(HistoryTransaction(decoding: Array(st.text(4).utf8), token: GenerationToken(storeID: sid, epoch: epoch, generation: st.int(0)), timestampMS: st.int(1),
                                              author: st.isNull(2) ? nil : st.text(2), contextName: st.isNull(3) ? nil : st.text(3)))
            }
            let last = txs.last?.token.generation ?? after
            return HistoryPage(transactions: txs, nextToken: GenerationToken(storeID: sid, epoch: epoch, generation: last), hasMore: last < current && txs.count >= limit)
        }
        // A trim raises the horizon before it commits: unmoved now, the read missed no row.
        try state.withLock { s in
            if after < s.historyHorizon { throw historyExpired(after: after, s, "history through generation \(s.historyHorizon) was trimmed") }
        }
        return page
    }

    /// Deletes history transactions at or before `token`'s generation.
    public func deleteHistory(through token: GenerationToken) async throws {
        _ = try state.withLock { s in
            guard token.storeID == id else { throw StorageError(.tokenOfAnotherStore(token.storeID), "the token belongs to another store") }
            guard token.epoch == s.epoch else { throw StorageError(.storeReplaced, "store was replaced since this token was issued") }
        }
        try await onWriter { conn, engine in try engine.trimHistory(conn, through: token.generation) }
    }

    // MARK: Migration

    /// Infers a lightweight migration to `model`; with `dryRun` reports it and changes nothing.
    /// Otherwise backs the store up to `backupPath` (VACUUM INTO) and applies it atomically.
    /// Without a `backupPath` the backup gets a fresh name next to the store file, and only the
    /// newest `migrationBackupsKept` of those are kept (`MigrationBackups`, docs/storage.md).
    public func migrate(to model: ModelDefinition, dryRun: Bool = false, backupPath: String? = nil) async throws -> MigrationReport {
        let new = try ResolvedModel(model)
        let backups = MigrationBackups(storePath: path)
        let report = try await onWriter { conn, engine in
            try engine.migrate(conn, to: new, dryRun: dryRun, backupPath: dryRun ? nil : backupPath ?? backups.newName(generation: engine.state.withLock { $0.generation }))
        }
        if backupPath == nil && report.backupPath != nil { backups.prune(keeping: config.migrationBackupsKept) }
        return report
    }

    // MARK: Baseline

    /// Writes a new store file at `destination` holding exactly this store at `token`'s generation
    /// (VACUUM INTO from a reader, then older and newer versions pruned in the copy).
    public func baseline(at g: ReadGeneration, to destination: String) async throws -> GenerationToken {
        let (gen, _) = try beginRead(g)
        defer { endRead(gen) }
        if FileManager.default.fileExists(atPath: destination) { throw StorageError.invalid("baseline destination exists") }
        let (epoch, sid) = (state.withLock { $0.epoch }, id)
        try await copySnapshot(to: destination)
        // The copy is a new file nobody else has open: prune it through its own connection.
        let c = try Connection(path: destination, readOnly: false, vfs: nil, busyTimeoutMS: config.busyTimeoutMilliseconds)
        defer { c.close() }
        try c.exec("BEGIN IMMEDIATE")
        do {
            var tables: [String] = []
            try c.query("SELECT name FROM sqlite_schema WHERE type='table' AND (name LIKE 't\\_%' ESCAPE '\\' OR name LIKE 'j\\_%' ESCAPE '\\')") { tables.append($0.text(0)) }
            for t in tables {
                try c.run("DELETE FROM \(q(t)) WHERE NOT (created_gen <= ?1 AND ended_gen > ?1)", [.integer(gen)])
                try c.run("UPDATE \(q(t)) SET ended_gen = \(ResolvedModel.live)", [])
            }
            try c.run("DELETE FROM ubq_history WHERE generation > ?", [.integer(gen)])
            try c.run("DELETE FROM ubq_client_tx WHERE generation > ?", [.integer(gen)])
            try c.run("DELETE FROM ubq_tombstones WHERE generation > ?", [.integer(gen)])
            try HistorySize.reset(c)
            try Meta.set(c, "generation", .integer(gen))
            try Meta.set(c, "gc_horizon", .integer(gen))
            try c.exec("COMMIT")
        } catch { try? c.exec("ROLLBACK"); throw error }
        try c.exec("PRAGMA journal_mode=DELETE")
        return GenerationToken(storeID: sid, epoch: epoch, generation: gen)
    }
}

extension Store {
    /// Copies the store as of one committed generation into a new file at `destination` (an
    /// online backup; docs/operations.md "Back up and restore") and returns that generation and
    /// the epoch. Saves go on meanwhile: the copy is a read transaction (VACUUM INTO), so it
    /// holds the snapshot of the last commit before it began and never waits for the writer or
    /// makes it wait. Every save acknowledged before the call is in the copy; saves committed
    /// during it are not. The cost: the WAL cannot restart past the copy's snapshot until it
    /// ends, so a long copy under heavy writes leaves a longer WAL behind (checkpointed after).
    public func backup(to destination: String) async throws -> (generation: Int64, epoch: UInt64) {
        if FileManager.default.fileExists(atPath: destination) { throw StorageError.invalid("backup destination \(destination) exists") }
        try await copySnapshot(to: destination)
        // The generation is the copy's own: read from it, it cannot disagree with its contents.
        let c = try Connection(path: destination, readOnly: true, vfs: nil, busyTimeoutMS: config.busyTimeoutMilliseconds, create: false)
        defer { c.close() }
        let generation = try Meta.int(c, "generation")
        let epoch = UInt64(bitPattern: try Meta.int(c, "epoch"))
        return (generation, epoch)
    }

    /// VACUUM INTO `destination` in one read transaction. Reader connections are read-only, and
    /// VACUUM INTO writes its target through the source connection: the copy runs on a
    /// short-lived read-write connection that only reads this database and never checkpoints it
    /// (NO_CKPT_ON_CLOSE, so the writer stays the only connection that writes or checkpoints the
    /// store, SPEC §4.8), off the cooperative pool.
    func copySnapshot(to destination: String) async throws {
        let (src, cfg, gate) = (path, config, readerGate)
        try await withCheckedThrowingContinuation { (cont: CheckedContinuation<Void, Error>) in
            DispatchQueue.global().async {
                // counted as a reader by the gate, so a WAL restart waits for it instead of failing
                let ticket = gate.enter()
                defer { gate.leave(ticket) }
                cont.resume(with: Result {
                    let c = try Connection(path: src, readOnly: false, vfs: cfg.vfsName, busyTimeoutMS: cfg.busyTimeoutMilliseconds, create: false)
                    defer { c.close() }
                    c.noCheckpointOnClose()
                    try c.vacuumInto(destination)
                })
            }
        }
    }
}

/// The meta key-value table.
enum Meta {
    static func get(_ c: Connection, _ k: String) throws -> SQLValue { try c.scalar("SELECT value FROM ubq_meta WHERE key = ?", [.text(k)]) }
    static func set(_ c: Connection, _ k: String, _ v: SQLValue) throws {
        try c.run("INSERT INTO ubq_meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value", [.text(k), v])
    }
    static func int(_ c: Connection, _ k: String) throws -> Int64 {
        if case .integer(let i) = try get(c, k) { return i }
        throw StorageError(.corrupt, "store meta \(k) missing")
    }
}

public struct HistoryChange: Codable, Sendable, Equatable {
    public enum Kind: String, Codable, Sendable { case insert, update, delete }
    public var kind: Kind
    public var objectID: ObjectID
    public var entity: String
    /// Changed property names (updates; all set properties for inserts).
    public var changedProperties: [String]
    /// Values of attributes marked keepOnDelete (deletes).
    public var tombstone: [String: StorageValue]?
}

public struct HistoryTransaction: Codable, Sendable, Equatable {
    public var token: GenerationToken
    public var timestamp: Date
    public var author: String?
    public var contextName: String?
    public var changes: [HistoryChange]
    /// Set on a store transition's announcement (`Store.appendEvent`): it has no changes.
    public var event: StoreEventRecord? = nil
}

public struct HistoryPage: Sendable {
    public var transactions: [HistoryTransaction]
    /// Resume point: pass it to the next `history(after:)`.
    public var nextToken: GenerationToken
    public var hasMore: Bool
}
