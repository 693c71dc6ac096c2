internal import CSQLite
import Foundation
import Synchronization
import UbiquityLock

/// A data directory of stores: `<root>/accounts/<account id>/stores/<uuid>.sqlite` (`path(for:)`,
/// the one place a store's path is made; docs/accounts.md). Stores open lazily on first use,
/// close when idle or when more than `maxOpenStores` are open (least recently used first), and
/// one process owns the directory (an exclusive `flock` on `<root>/ubiquity.lock`).
///
/// A class whose state sits behind one lock, held only for bookkeeping: a store's open and close
/// (thread starts and joins, the close-time TRUNCATE checkpoint) run outside it. Each store's slot
/// is a small state machine — opening → open → closing → gone — and a caller that finds a slot in
/// transition waits for that one transition only, so opening one store never waits for another.
/// The methods that were actor-isolated stay `async`, so callers are unchanged.
public final class StoreDirectory: Sendable {
    public let root: String
    private let configuration: StorageConfiguration
    private let maxOpenStores: Int
    private let lockFD: Int32
    /// How a store is opened (`Store.open`; tests: one that can be held mid-open).
    private let openStore: @Sendable (_ path: String, _ id: UUID, _ model: ModelDefinition?, _ configuration: StorageConfiguration) throws -> Store
    /// The account a store belongs to (the catalog's record), which names its folder; nil: the
    /// account-less folder `<root>/stores` (storage tests, and stores with no record).
    private let locator = Lock<AccountLocator?>(nil)
    let state = Lock(Slots())

    /// An open store's count of running `withStore` bodies. Taken under the lock (with the lookup),
    /// given back without it (`Lease.end`: no second lock and hash of the ID per request).
    /// Everything that closes a store reads the count under the lock, where it can only fall.
    final class Lease: Sendable {
        private let count = Atomic<Int>(1)
        var active: Int { count.load(ordering: .acquiring) }
        func take() { count.add(1, ordering: .relaxed) }
        func end() { count.subtract(1, ordering: .releasing) }
    }

    /// An open or close in progress; whoever meets it waits for it, then looks again.
    final class Transition: Sendable {
        private let group = DispatchGroup()
        init() { group.enter() }
        func finish() { group.leave() }
        func wait() { group.wait() }
    }

    struct Entry {
        let store: Store; var lastUse: UInt64; let lease: Lease; var lastUseTime: Double
        var leases: Int { lease.active }
    }
    enum Slot {
        case opening(Transition)
        case open(Entry)
        /// Closing, or closed for a file operation (destroy, replace): no open until it ends.
        case closing(Transition)
    }
    struct Slots {
        var slots: [UUID: Slot] = [:]
        /// Stores of archived (or deleting) accounts (StoreDirectory+Archive.swift): never opened,
        /// so a call that raced the archive cannot create an empty store at the emptied path.
        var parked: Set<UUID> = []
        var tick: UInt64 = 0
        var closed = false
        var sweeper: Task<Void, Never>?
        /// Open stores closed to make room (`evictionCount`).
        var evictions = 0
        /// Whether a victim closes on the `ubq-closer` thread or on the caller's path.
        var eviction = EvictionPolicy()
        /// Slots that count against `maxOpenStores` (a closing store is on its way out).
        var admitted: Int { slots.values.reduce(0) { n, s in if case .closing = s { return n } else { return n + 1 } } }
    }

    /// Takes the directory lock; throws `.directoryLocked` if another process holds it.
    public convenience init(root: String, configuration: StorageConfiguration = StorageConfiguration(), maxOpenStores: Int = 256) throws {
        try self.init(root: root, configuration: configuration, maxOpenStores: maxOpenStores) { try Store.open(path: $0, id: $1, model: $2, configuration: $3) }
    }

    init(root: String, configuration: StorageConfiguration, maxOpenStores: Int,
         openStore: @escaping @Sendable (String, UUID, ModelDefinition?, StorageConfiguration) throws -> Store) throws {
        self.root = root
        self.configuration = configuration
        self.maxOpenStores = max(1, maxOpenStores)
        self.openStore = openStore
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
    public func shutdown() async {
        let (first, stores, pending, sweeper) = state.withLock { d -> (Bool, [Store], [Transition], Task<Void, Never>?) in
            if d.closed { return (false, [], [], nil) }
            d.closed = true
            var stores: [Store] = [], pending: [Transition] = []
            for (_, slot) in d.slots {
                switch slot {
                case .open(let e): stores.append(e.store)
                case .opening(let t), .closing(let t): pending.append(t)
                }
            }
            d.slots.removeAll()
            defer { d.sweeper = nil }
            return (true, stores, pending, d.sweeper)
        }
        if !first { return }
        sweeper?.cancel()
        for s in stores { s.close() }
        // an open in progress sees `closed` and closes its store itself; a close finishes
        for t in pending { t.wait() }
        flock(lockFD, LOCK_UN)
        Glibc.close(lockFD)
    }

    /// Names each store's account folder from now on (the services pass the catalog's lookup).
    public func locateAccounts(_ accountOf: @escaping @Sendable (UUID) -> String?) {
        let locator = AccountLocator(accountOf)
        self.locator.withLock { $0 = locator }
    }

    /// `locateAccounts`' lookup, kept in a class rather than as the lock's value itself. A
    /// function value that is a generic lock's `Value` is re-abstracted at each `withLock`: the
    /// inout access wraps it in a thunk and writes it back wrapped, so every lookup made every
    /// later one two calls deeper. Seen in W6 (docs/benchmarks.md, "Cold calls, traced"): after a few
    /// thousand stores had been opened a path cost ~1.3 ms of CPU — under the directory's lock,
    /// on every open — and the stack it needed kept growing with the server's uptime. A class
    /// reference is stored as it is. (`testAccountLookupStaysAtOneDepth`.)
    final class AccountLocator: Sendable {
        let accountOf: @Sendable (UUID) -> String?
        init(_ accountOf: @escaping @Sendable (UUID) -> String?) { self.accountOf = accountOf }
    }

    /// The folder of an account's stores. Account IDs are server-generated (a UUID, or
    /// "default"), never a client's text, so they are safe as path components.
    public static func folder(account: String?) -> String {
        account.map { "accounts/\($0)/stores" } ?? "stores"
    }

    public func path(for id: UUID) -> String {
        let account = locator.withLock { $0 }?.accountOf(id)
        return root + "/" + Self.folder(account: account) + "/" + id.uuidString.lowercased() + ".sqlite"
    }

    /// Moves a store's files from the account-less `<root>/stores` (data directories made before
    /// accounts) into its account's folder, if they are still there. Run at startup, before any
    /// store opens. Returns whether it moved anything.
    @discardableResult
    public func adoptLegacyFiles(_ id: UUID) throws -> Bool {
        let old = root + "/" + Self.folder(account: nil) + "/" + id.uuidString.lowercased() + ".sqlite"
        let new = path(for: id)
        guard old != new, FileManager.default.fileExists(atPath: old), !FileManager.default.fileExists(atPath: new) else { return false }
        try FileManager.default.createDirectory(atPath: (new as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        // sidecars first, the database last: a crash in between leaves the database at the old
        // path (found there again next start) rather than a WAL separated from its database
        for suffix in ["-wal", "-shm", ""] where FileManager.default.fileExists(atPath: old + suffix) {
            guard rename(old + suffix, new + suffix) == 0 else { throw StorageError(.io, "cannot move \(old + suffix) to \(new + suffix): errno \(errno)") }
        }
        return true
    }

    public func exists(_ id: UUID) async -> Bool { FileManager.default.fileExists(atPath: path(for: id)) }

    /// IDs of the stores on disk (account-less and every account's).
    public func storeIDs() async throws -> [UUID] {
        let fm = FileManager.default
        let accounts = (try? fm.contentsOfDirectory(atPath: root + "/accounts")) ?? []
        let folders = [Self.folder(account: nil)] + accounts.map { Self.folder(account: $0) }
        return folders.flatMap { f in
            ((try? fm.contentsOfDirectory(atPath: root + "/" + f)) ?? []).compactMap { n in
                n.hasSuffix(".sqlite") ? UUID(uuidString: String(n.dropLast(7))) : nil
            }
        }.sorted { $0.uuidString < $1.uuidString }
    }

    /// Whether running calls hold the store (`withStore` bodies), or it is opening or closing.
    public func isInUse(_ id: UUID) -> Bool {
        state.withLock { d in
            switch d.slots[id] {
            case .open(let e)?: e.leases > 0
            case .opening?, .closing?: true
            case nil: false
            }
        }
    }

    /// Open stores (stores being opened count too).
    public var openCount: Int { state.withLock { $0.admitted } }
    /// Open stores closed so far to make room for another (least recently used first).
    public var evictionCount: Int { state.withLock { $0.evictions } }

    /// Queue and WAL state of every open store (read outside the directory lock).
    public func openStoreStatistics() -> [StoreStatistics] {
        let stores = state.withLock { d in d.slots.values.compactMap { slot -> Store? in
            if case .open(let e) = slot { return e.store } else { return nil }
        } }
        return stores.map(\.statistics)
    }

    /// Runs `body` with the store open (creating it with `model` if missing and `create`).
    /// The store is not closed by eviction while `body` runs.
    /// Runs on the caller's executor: the store is resolved under a lock, with no hop.
    public func withStore<T: Sendable>(_ id: UUID, create: Bool = false, model: ModelDefinition? = nil,
                                       _ body: @Sendable (Store) async throws -> T) async throws -> T {
        let (store, lease) = try acquire(id, create: create, model: model)
        defer { lease.end() }
        return try await body(store)
    }

    /// `withStore` for synchronous callers (e.g. a blocking request handler on a worker thread).
    public func withStoreSync<T>(_ id: UUID, create: Bool = false, model: ModelDefinition? = nil,
                                 _ body: (Store) throws -> T) throws -> T {
        let (store, lease) = try acquire(id, create: create, model: model)
        defer { lease.end() }
        return try body(store)
    }

    enum Lookup {
        case found(Store, Lease)
        case wait(Transition)
        /// This caller opens the store; `evict` are closed first (outside the lock), `handOff`
        /// go to the closer thread.
        case open(Transition, evict: [(UUID, Store, Transition)], handOff: [(UUID, Store, Transition)])
        /// This caller set the slot closing for a file operation (closing `store` first, if open).
        case closing(Store?, Transition)
    }

    private func acquire(_ id: UUID, create: Bool, model: ModelDefinition?) throws -> (Store, Lease) {
        while true {
            let lookup = try state.withLock { d -> Lookup in
                if d.closed { throw StorageError(.storeClosed, "directory is shut down") }
                d.tick += 1
                // One hash of the ID: the entry is updated in place through its index.
                if let i = d.slots.index(forKey: id) {
                    switch d.slots.values[i] {
                    case .open(var e):
                        e.lastUse = d.tick
                        e.lastUseTime = configuration.clock()
                        e.lease.take()
                        d.slots.values[i] = .open(e)
                        return .found(e.store, e.lease)
                    case .opening(let t), .closing(let t):
                        return .wait(t)
                    }
                }
                if d.parked.contains(id) { throw StorageError(.notFound, "no store \(id)") }
                if !create && !FileManager.default.fileExists(atPath: path(for: id)) { throw StorageError(.notFound, "no store \(id)") }
                var evict: [(UUID, Store, Transition)] = [], handOff: [(UUID, Store, Transition)] = []
                for v in Self.evict(&d, toAdmit: 1, max: maxOpenStores) {
                    if d.eviction.place() == .background { handOff.append(v) } else { evict.append(v) }
                }
                let t = Transition()
                d.slots[id] = .opening(t)
                return .open(t, evict: evict, handOff: handOff)
            }
            switch lookup {
            case .found(let s, let l): return (s, l)
            case .wait(let t): t.wait()
            case .closing: preconditionFailure("not an open lookup")
            case .open(let t, let evict, let handOff):
                for v in handOff {
                    // The slot stays closing until the close ends: a call for that store waits
                    // for it, and no file operation touches its files meanwhile (SPEC §4.8).
                    StoreCloser.shared.submit { [self] in
                        close([v])
                        state.withLock { $0.eviction.finished() }
                    }
                }
                close(evict)
                return try open(id, model: model, transition: t)
            }
        }
    }

    /// Opens the store of a slot this caller set to `.opening`, outside the lock.
    private func open(_ id: UUID, model: ModelDefinition?, transition t: Transition) throws -> (Store, Lease) {
        defer { t.finish() }
        let started = DispatchTime.now().uptimeNanoseconds
        let opened = Result {
            let p = path(for: id)
            // an account's folder is made with its first store (mkdir only: EEXIST after that)
            try FileManager.default.createDirectory(atPath: (p as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            return try openStore(p, id, model, configuration)
        }
        if case .success = opened { configuration.observer.storeOpened?(Self.seconds(since: started)) }
        let entry = state.withLock { d -> Entry? in
            if d.closed { return nil }  // shut down meanwhile: the slot is gone already
            guard case .success(let s) = opened else { d.slots[id] = nil; return nil }
            let e = Entry(store: s, lastUse: d.tick, lease: Lease(), lastUseTime: configuration.clock())
            d.slots[id] = .open(e)
            return e
        }
        if let entry { return (entry.store, entry.lease) }
        try opened.get().close()  // the open's own error first
        throw StorageError(.storeClosed, "directory is shut down")
    }

    /// Marks least recently used stores with no lease as closing until there is room; the caller
    /// closes them (`close(_:)`) outside the lock.
    private static func evict(_ d: inout Slots, toAdmit n: Int, max: Int) -> [(UUID, Store, Transition)] {
        var out: [(UUID, Store, Transition)] = []
        while d.admitted + n > max {
            var victim: (UUID, Entry)?
            for (k, slot) in d.slots {
                if case .open(let e) = slot, e.leases == 0, victim.map({ e.lastUse < $0.1.lastUse }) ?? true { victim = (k, e) }
            }
            guard let (k, e) = victim else { break }
            let t = Transition()
            d.slots[k] = .closing(t)
            d.evictions += 1
            out.append((k, e.store, t))
        }
        return out
    }

    /// Closes stores marked closing, then frees their slots.
    private func close(_ stores: [(UUID, Store, Transition)]) {
        for (id, s, t) in stores {
            let started = DispatchTime.now().uptimeNanoseconds
            s.close()
            configuration.observer.storeClosed?(Self.seconds(since: started))
            state.withLock { d in if case .closing(let mine)? = d.slots[id], mine === t { d.slots[id] = nil } }
            t.finish()
        }
    }

    private static func seconds(since start: UInt64) -> Double {
        Double(DispatchTime.now().uptimeNanoseconds &- start) / 1e9
    }

    /// Closes stores unused for `idleSeconds` (by the configuration's clock). Returns how many.
    @discardableResult
    public func closeIdle(idleSeconds: Double) async -> Int {
        let idle = state.withLock { d -> [(UUID, Store, Transition)] in
            let now = configuration.clock()
            var out: [(UUID, Store, Transition)] = []
            for (k, slot) in d.slots {
                guard case .open(let e) = slot, e.leases == 0, now - e.lastUseTime >= idleSeconds else { continue }
                let t = Transition()
                d.slots[k] = .closing(t)
                out.append((k, e.store, t))
            }
            return out
        }
        close(idle)
        return idle.count
    }

    /// Closes stores idle for `idleSeconds`, every `interval` seconds, until `shutdown()`.
    public func startIdleSweeper(interval: Double, idleSeconds: Double) async {
        let task = Task { [weak self] in
            while !Task.isCancelled {
                try? await Task.sleep(nanoseconds: UInt64(max(0.01, interval) * 1e9))
                guard let self else { return }
                await self.closeIdle(idleSeconds: idleSeconds)
            }
        }
        let old = state.withLock { d -> Task<Void, Never>? in
            if d.closed { return task }
            defer { d.sweeper = task }
            return d.sweeper
        }
        old?.cancel()
    }

    /// Closes the store for a file operation and runs `body` while its slot stays closing, so no
    /// `withStore` can reopen the store while its files change.
    func closedForFileOperation<T>(_ id: UUID, _ body: () throws -> T) throws -> T {
        while true {
            let claim = try state.withLock { d -> Lookup in
                if d.closed { throw StorageError(.storeClosed, "directory is shut down") }
                let t = Transition()
                switch d.slots[id] {
                case .opening(let other)?, .closing(let other)?: return .wait(other)
                case .open(let e)?:
                    if e.leases > 0 { throw StorageError(.busy, "store \(id) is in use") }
                    d.slots[id] = .closing(t)
                    return .closing(e.store, t)
                case nil:
                    d.slots[id] = .closing(t)
                    return .closing(nil, t)
                }
            }
            switch claim {
            case .wait(let other): other.wait()
            case .found, .open: preconditionFailure("not a file-operation lookup")
            case .closing(let store, let t):
                defer {
                    state.withLock { d in if case .closing(let mine)? = d.slots[id], mine === t { d.slots[id] = nil } }
                    t.finish()
                }
                store?.close()
                return try body()
            }
        }
    }

    /// Destroys a store: pool closed first, then its files removed (database, WAL, shared memory).
    public func destroy(_ id: UUID) async throws {
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
    public func replace(_ id: UUID, from sourcePath: String) async throws {
        try closedForFileOperation(id) { try copyReplacement(id, from: sourcePath) }
    }

    private func copyReplacement(_ id: UUID, from sourcePath: String) throws {
        var src: OpaquePointer?
        guard sqlite3_open_v2(sourcePath, &src, SQLITE_OPEN_READONLY, nil) == SQLITE_OK, let src else {
            if let src { sqlite3_close_v2(src) }
            throw StorageError(.notFound, "cannot open replacement \(sourcePath)")
        }
        defer { sqlite3_close_v2(src) }
        // a restore may bring back a store whose folder is gone (or never existed here)
        try FileManager.default.createDirectory(atPath: (path(for: id) as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        let dst = try Connection(path: path(for: id), readOnly: false, vfs: configuration.vfsName, busyTimeoutMS: configuration.busyTimeoutMilliseconds)
        defer { dst.close() }
        var check: OpaquePointer?
        guard sqlite3_prepare_v2(src, "SELECT value FROM ubq_meta WHERE key = 'model_json'", -1, &check, nil) == SQLITE_OK else {
            throw StorageError.invalid("replacement is not a Ubiquity store")
        }
        sqlite3_finalize(check)
        try dst.backup(from: src)
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
