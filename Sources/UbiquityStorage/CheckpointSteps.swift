internal import CSQLite
internal import CSQLiteWALBuffer
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Logging
import Synchronization
import UbiquityLock

/// The fence of the stepped checkpoint (docs/storage.md rule 5, "Checkpoints in steps"): a
/// read-only connection of the writer's whose read transaction, begun after one commit, keeps
/// the next PASSIVE checkpoint from copying past that commit's frames (SQLite never backfills
/// past a live reader's read mark). A checkpoint that stops short of the WAL's end does not sync
/// the database file, so the copy step costs the writer no disk wait. Like every reader it opens
/// read-only and never checkpoints (`NO_CKPT_ON_CLOSE`): only the writer connection writes or
/// checkpoints (SPEC §4.8). Opened, used and closed only by the thread serving the writer queue.
final class CheckpointFence {
    private let path: String
    private let config: StorageConfiguration
    private var conn: Connection?
    /// The fence holds a read transaction.
    private(set) var isHeld = false

    init(path: String, config: StorageConfiguration) { self.path = path; self.config = config }

    /// Begins the read transaction at the WAL as it is now, ending the one it held.
    func begin() {
        end()
        do {
            let c = try connection()
            try c.exec("BEGIN")
            // A deferred BEGIN takes its snapshot at the first read.
            _ = try c.scalar("PRAGMA schema_version")
            isHeld = true
        } catch {
            config.logger.debug("checkpoint fence not begun: \(error)")
            if let c = conn, !c.isAutocommit { try? c.exec("ROLLBACK") }
        }
    }

    /// Ends the read transaction (before any checkpoint that must reach the WAL's end, and before
    /// every exclusive job: a fence would stop a RESTART or TRUNCATE checkpoint).
    func end() {
        guard isHeld, let c = conn else { return }
        isHeld = false
        if (try? c.exec("COMMIT")) == nil, !c.isAutocommit { try? c.exec("ROLLBACK") }
    }

    func close() {
        end()
        conn?.close()
        conn = nil
    }

    /// Its connection follows the writer connection from thread to thread (`WriterEngine.enter`).
    func adoptThread() { conn?.adoptThread() }
    func releaseThread() { conn?.releaseThread() }

    private func connection() throws -> Connection {
        if let c = conn { return c }
        let c = try Connection(path: path, readOnly: true, vfs: config.vfsName, busyTimeoutMS: config.busyTimeoutMilliseconds, cacheLimit: 4)
        c.noCheckpointOnClose()
        try c.exec("PRAGMA query_only=1")
        conn = c
        return c
    }
}

/// Writes the database file's dirty pages to the device on the writeback thread while and after
/// a copy step, so that the sync at the end of the checkpoint — by the writer, with saves
/// waiting — finds almost nothing left to write (docs/benchmarks.md, issue 22: that sync was
/// 7-33 ms, mostly in the block layer's writeback throttling). While the writer copies, the
/// thread submits what is dirty every millisecond (so the device works during the copy, not
/// after it); once the copy is done it submits the rest and waits for all of it. It uses its own
/// read-only descriptor of the file; only the kernel's page cache is shared, so SQLite's files
/// and locks are untouched. The descriptor is closed only after the writer connection has
/// closed: closing any descriptor of a file drops the process's POSIX locks on it, SQLite's
/// included. Made lazily by the writer at its first copy step; `shutdown` runs once the writer
/// connection has closed. One thread serves every store (`WritebackThread`), one writeback at a
/// time: a store's writeback may wait for another store's, which only delays its next copy step
/// (the checkpoint policy waits for `isDone`).
final class DatabaseWriteback: @unchecked Sendable {
    // Invariant: `fd`, `logger` and `record` are written once in init. `cond` (NSCondition, not
    // `Lock`: `shutdown` waits on it) orders each writeback's end with `shutdown`'s check.
    fileprivate let fd: Int32
    fileprivate let logger: Logger
    fileprivate let record: @Sendable (Double) -> Void
    /// Writebacks asked for and not finished.
    fileprivate let pending = Atomic<Int>(0)
    /// The writer is copying pages into the file.
    fileprivate let copyingNow = Atomic<Bool>(false)
    private let cond = NSCondition()

    /// `record`: called on the writeback thread with each writeback's seconds (from the copy's
    /// start to the last page on the device).
    init?(path: String, logger: Logger, record: @escaping @Sendable (Double) -> Void) {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            logger.warning("database writeback off: cannot open \(path): errno \(errno)")
            return nil
        }
        self.fd = fd
        self.logger = logger
        self.record = record
    }

    /// The writer begins a copy step: write back from now on, until `copied()` and then all of it.
    func copying() {
        copyingNow.store(true, ordering: .releasing)
        pending.add(1, ordering: .relaxed)
        WritebackThread.shared.submit(self)
    }

    /// The copy step is done: the thread writes back what is left and waits for it.
    func copied() { copyingNow.store(false, ordering: .releasing) }

    /// No writeback asked for is still running.
    var isDone: Bool { pending.load(ordering: .acquiring) == 0 }

    /// On the writeback thread: one writeback asked for by `copying`.
    fileprivate func writeBack() {
        let t0 = DispatchTime.now().uptimeNanoseconds
        // Errors only mean SQLite's own sync at the end of the checkpoint writes the pages
        // itself, as it did before the steps.
        while copyingNow.load(ordering: .acquiring) {
            _ = ubq_writeback_start(fd)
            usleep(1000)
        }
        let err = ubq_writeback_file(fd)
        if err != 0 { logger.debug("database writeback: errno \(err)") }
        record(Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e9)
        cond.lock()
        pending.subtract(1, ordering: .releasing)
        cond.broadcast()
        cond.unlock()
    }

    /// Waits for the writebacks asked for and closes the descriptor. Only after the writer
    /// connection has closed (see above).
    func shutdown() {
        copyingNow.store(false, ordering: .releasing)
        cond.lock()
        while pending.load(ordering: .acquiring) > 0 { cond.wait() }
        cond.unlock()
        Glibc.close(fd)
    }
}

/// The one `ubq-writeback` thread (docs/threading.md rule 18), started at the first copy step of
/// any store, for the life of the process. Started from a writer thread, so it first sets the
/// process's nice value (rule 14: only writers have their own).
final class WritebackThread: Sendable {
    static let shared = WritebackThread()
    private let queue = JobQueue<DatabaseWriteback>()
    private let thread = Lock<NamedThread?>(nil)

    func submit(_ w: DatabaseWriteback) {
        thread.withLock { t in
            if t != nil { return }
            let queue = self.queue
            t = NamedThread(name: "ubq-writeback", stackSize: 256 << 10) {
                ThreadPriority.prepareStoreThread(nice: 0)
                while true {
                    for w in queue.pop(max: 1) { w.writeBack() }
                }
            }
        }
        _ = queue.push(w)
    }
}
