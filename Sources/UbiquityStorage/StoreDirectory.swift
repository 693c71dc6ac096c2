internal import CSQLite
import Foundation
import Synchronization

/// A data directory of stores: `<root>/stores/<uuid>.sqlite`. Stores open lazily on first use,
/// close when idle or when more than `maxOpenStores` are open (least recently used first), and
/// one process owns the directory (an exclusive `flock` on `<root>/ubiquity.lock`).
public actor StoreDirectory {
    public nonisolated let root: String
    private nonisolated let configuration: StorageConfiguration
    private nonisolated let maxOpenStores: Int
    private nonisolated let lockFD: Int32
    /// The open stores. A lock, not actor isolation, guards them so that `withStore` (once per
    /// request) resolves a store on the caller's thread without an actor hop. Everything that
    /// changes which stores are open (open, evict, idle close, destroy, replace, shutdown) runs
    /// under this lock from start to end, as it ran exclusively on the actor before.
    private nonisolated let state = Locked(OpenStores())

    /// An open store's count of running `withStore` bodies. Taken under `state`'s lock (with the
    /// lookup), given back without it (`Lease.end`: no second lock and hash of the ID per request).
    /// Everything that closes a store reads the count under the lock, where it can only fall.
    private final class Lease: Sendable {
        private let count = Atomic<Int>(1)
        var active: Int { count.load(ordering: .acquiring) }
        func take() { count.add(1, ordering: .relaxed) }
        func end() { count.subtract(1, ordering: .releasing) }
    }
    private struct Entry {
        var store: Store; var lastUse: UInt64; let lease: Lease; var lastUseTime: Double
        var leases: Int { lease.active }
    }
    private struct OpenStores { var open: [UUID: Entry] = [:]; var tick: UInt64 = 0; var closed = false }

    /// Takes the directory lock; throws `.directoryLocked` if another process holds it.
    public init(root: String, configuration: StorageConfiguration = StorageConfiguration(), maxOpenStores: Int = 256) throws {
        self.root = root
        self.configuration = configuration
        self.maxOpenStores = max(1, maxOpenStores)
        try FileManager.default.createDirectory(atPath: root + "/stores", withIntermediateDirectories: true)
        let fd = Glibc.open(root + "/ubiquity.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw StorageError(.io, "cannot open lock file: errno \(errno)") }
        if flock(fd, LOCK_EX | LOCK_NB) != 0 {
            Glibc.close(fd)
            throw StorageError(.directoryLocked, "data directory \(root) is in use by another process")
        }
        let pid = "\(getpid())\n"
        _ = ftruncate(fd, 0)
        _ = pid.withCString { Glibc.write(fd, $0, strlen($0)) }
        lockFD = fd
    }

    /// Closes every store and releases the directory lock.
    public func shutdown() {
        let first = state.withLock { d -> Bool in
            if d.closed { return false }
            d.closed = true
            for (_, e) in d.open { e.store.close() }
            d.open.removeAll()
            return true
        }
        if !first { return }
        sweeper?.cancel()
        sweeper = nil
        flock(lockFD, LOCK_UN)
        Glibc.close(lockFD)
    }

    public nonisolated func path(for id: UUID) -> String { root + "/stores/" + id.uuidString.lowercased() + ".sqlite" }

    public func exists(_ id: UUID) -> Bool { FileManager.default.fileExists(atPath: path(for: id)) }

    /// IDs of the stores on disk.
    public func storeIDs() throws -> [UUID] {
        try FileManager.default.contentsOfDirectory(atPath: root + "/stores").compactMap { n in
            n.hasSuffix(".sqlite") ? UUID(uuidString: String(n.dropLast(7))) : nil
        }.sorted { $0.uuidString < $1.uuidString }
    }

    public nonisolated var openCount: Int { state.withLock { $0.open.count } }

    /// Runs `body` with the store open (creating it with `model` if missing and `create`).
    /// The store is not closed by eviction while `body` runs.
    /// Runs on the caller's executor: the store is resolved under a lock, with no actor hop.
    public nonisolated func withStore<T: Sendable>(_ id: UUID, create: Bool = false, model: ModelDefinition? = nil,
                                                   _ body: @Sendable (Store) async throws -> T) async throws -> T {
        let (store, lease) = try acquire(id, create: create, model: model)
        defer { lease.end() }
        return try await body(store)
    }

    /// `withStore` for synchronous callers (e.g. a blocking request handler on a worker thread).
    public nonisolated func withStoreSync<T>(_ id: UUID, create: Bool = false, model: ModelDefinition? = nil,
                                             _ body: (Store) throws -> T) throws -> T {
        let (store, lease) = try acquire(id, create: create, model: model)
        defer { lease.end() }
        return try body(store)
    }

    private nonisolated func acquire(_ id: UUID, create: Bool, model: ModelDefinition?) throws -> (Store, Lease) {
        try state.withLock { d in
            if d.closed { throw StorageError(.storeClosed, "directory is shut down") }
            d.tick += 1
            let now = configuration.clock()
            // One hash of the ID: the entry is updated in place through its index.
            if let i = d.open.index(forKey: id) {
                d.open.values[i].lastUse = d.tick
                d.open.values[i].lastUseTime = now
                let e = d.open.values[i]
                e.lease.take()
                return (e.store, e.lease)
            }
            let p = path(for: id)
            if !create && !FileManager.default.fileExists(atPath: p) { throw StorageError(.notFound, "no store \(id)") }
            Self.evict(&d, toAdmit: 1, max: maxOpenStores)
            let s = try Store.open(path: p, id: id, model: model, configuration: configuration)
            let e = Entry(store: s, lastUse: d.tick, lease: Lease(), lastUseTime: now)
            d.open[id] = e
            return (s, e.lease)
        }
    }

    /// Closes least recently used stores with no lease until there is room.
    private static func evict(_ d: inout OpenStores, toAdmit n: Int, max: Int) {
        while d.open.count + n > max {
            guard let victim = d.open.filter({ $0.value.leases == 0 }).min(by: { $0.value.lastUse < $1.value.lastUse }) else { return }
            victim.value.store.close()
            d.open[victim.key] = nil
        }
    }

    /// Closes stores unused for `idleSeconds` (by the configuration's clock). Returns how many.
    @discardableResult
    public func closeIdle(idleSeconds: Double) -> Int {
        state.withLock { d in
            let now = configuration.clock()
            let idle = d.open.filter { $0.value.leases == 0 && now - $0.value.lastUseTime >= idleSeconds }
            for (k, e) in idle { e.store.close(); d.open[k] = nil }
            return idle.count
        }
    }

    private var sweeper: Task<Void, Never>?

    /// Closes stores idle for `idleSeconds`, every `interval` seconds, until `shutdown()`.
    public func startIdleSweeper(interval: Double, idleSeconds: Double) {
        sweeper?.cancel()
        sweeper = Task { [weak self] in
            while !Task.isCancelled {
                try? await Task.sleep(nanoseconds: UInt64(max(0.01, interval) * 1e9))
                guard let self else { return }
                await self.closeIdle(idleSeconds: idleSeconds)
            }
        }
    }

    /// Closes the store for a file operation and runs `body` still holding the lock, so no
    /// `withStore` can reopen the store while its files change.
    private func closedForFileOperation<T>(_ id: UUID, _ body: () throws -> T) throws -> T {
        try state.withLock { d in
            if let e = d.open[id] {
                if e.leases > 0 { throw StorageError(.busy, "store \(id) is in use") }
                e.store.close()
                d.open[id] = nil
            }
            return try body()
        }
    }

    /// Destroys a store: pool closed first, then its files removed (database, WAL, shared memory).
    public func destroy(_ id: UUID) throws {
        try closedForFileOperation(id) { try removeFiles(id) }
    }

    private func removeFiles(_ id: UUID) throws {
        let p = path(for: id)
        for suffix in ["-wal", "-shm", ""] {
            let f = p + suffix
            if FileManager.default.fileExists(atPath: f) { try FileManager.default.removeItem(atPath: f) }
        }
    }

    /// Replaces a store's contents with another store file (copied with SQLite's backup API into
    /// the closed store, then given a new epoch: older tokens fail with STORE_REPLACED).
    public func replace(_ id: UUID, from sourcePath: String) throws {
        try closedForFileOperation(id) { try copyReplacement(id, from: sourcePath) }
    }

    private func copyReplacement(_ id: UUID, from sourcePath: String) throws {
        var src: OpaquePointer?
        guard sqlite3_open_v2(sourcePath, &src, SQLITE_OPEN_READONLY, nil) == SQLITE_OK, let src else {
            if let src { sqlite3_close_v2(src) }
            throw StorageError(.notFound, "cannot open replacement \(sourcePath)")
        }
        defer { sqlite3_close_v2(src) }
        let dst = try Connection(path: path(for: id), readOnly: false, vfs: configuration.vfsName, busyTimeoutMS: configuration.busyTimeoutMilliseconds)
        defer { dst.close() }
        var check: OpaquePointer?
        guard sqlite3_prepare_v2(src, "SELECT value FROM ubq_meta WHERE key = 'model_json'", -1, &check, nil) == SQLITE_OK else {
            throw StorageError.invalid("replacement is not a Ubiquity store")
        }
        sqlite3_finalize(check)
        guard let b = sqlite3_backup_init(dst.db, "main", src, "main") else { throw dst.error(sqlite3_errcode(dst.db), sql: "backup") }
        let rc = sqlite3_backup_step(b, -1)
        sqlite3_backup_finish(b)
        guard rc == SQLITE_DONE else { throw dst.error(rc, sql: "backup") }
        try dst.exec("PRAGMA journal_mode=WAL")
        try dst.exec("BEGIN IMMEDIATE")
        try Meta.set(dst, "store_id", .text(id.uuidString))
        try Meta.set(dst, "epoch", .integer(Int64(bitPattern: UInt64.random(in: 1...UInt64.max))))
        try dst.exec("COMMIT")
    }

    /// Integrity check of a store (opened if needed).
    public func integrityCheck(_ id: UUID) async throws -> [String] {
        try await withStore(id) { try await $0.integrityCheck() }
    }
}
