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
/// checkpoints (SPEC §4.8). Opened, used and closed on the writer thread only.
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

    private func connection() throws -> Connection {
        if let c = conn { return c }
        let c = try Connection(path: path, readOnly: true, vfs: config.vfsName, busyTimeoutMS: config.busyTimeoutMilliseconds, cacheLimit: 4)
        c.noCheckpointOnClose()
        try c.exec("PRAGMA query_only=1")
        conn = c
        return c
    }
}

/// Writes the database file's dirty pages to the device on its own thread (`ubq-writeback`)
/// while and after a copy step, so that the sync at the end of the checkpoint — on the writer
/// thread, with saves waiting — finds almost nothing left to write (docs/benchmarks.md, issue
/// 22: that sync was 7-33 ms, mostly in the block layer's writeback throttling). While the
/// writer copies, the thread submits what is dirty every millisecond (so the device works during
/// the copy, not after it); once the copy is done it submits the rest and waits for all of it.
/// It uses its own read-only descriptor of the file; only the kernel's page cache is shared, so
/// SQLite's files and locks are untouched. The descriptor is closed only after the writer
/// connection has closed: closing any descriptor of a file drops the process's POSIX locks on
/// it, SQLite's included. Made lazily by the writer thread at its first copy step; `shutdown`
/// runs once the writer thread has exited.
final class DatabaseWriteback: Sendable {
    private let fd: Int32
    private let queue = JobQueue<Void>()
    private let thread: NamedThread
    /// Shared with the thread's closure (a class: atomics cannot be captured).
    private final class Shared: Sendable {
        /// Writebacks asked for and not finished.
        let pending = Atomic<Int>(0)
        /// The writer is copying pages into the file.
        let copying = Atomic<Bool>(false)
    }
    private let shared = Shared()

    /// `record`: called on the writeback thread with each writeback's seconds (from the copy's
    /// start to the last page on the device).
    init?(path: String, logger: Logger, record: @escaping @Sendable (Double) -> Void) {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            logger.warning("database writeback off: cannot open \(path): errno \(errno)")
            return nil
        }
        self.fd = fd
        let shared = self.shared
        let queue = self.queue
        thread = NamedThread(name: "ubq-writeback", stackSize: 256 << 10) {
            // The writer thread starts it: without this it would run at the writer's nice value
            // (docs/threading.md rule 14: only the writer thread has its own).
            ThreadPriority.prepareStoreThread(nice: 0)
            while true {
                if queue.pop(max: 1).isEmpty { break }
                let t0 = DispatchTime.now().uptimeNanoseconds
                // Errors only mean SQLite's own sync at the end of the checkpoint writes the
                // pages itself, as it did before the steps.
                while shared.copying.load(ordering: .acquiring) {
                    _ = ubq_writeback_start(fd)
                    usleep(1000)
                }
                let err = ubq_writeback_file(fd)
                if err != 0 { logger.debug("database writeback: errno \(err)") }
                record(Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e9)
                shared.pending.subtract(1, ordering: .releasing)
            }
        }
    }

    /// The writer begins a copy step: write back from now on, until `copied()` and then all of it.
    func copying() {
        shared.copying.store(true, ordering: .releasing)
        shared.pending.add(1, ordering: .relaxed)
        if !queue.push(()) { shared.pending.subtract(1, ordering: .relaxed) }
    }

    /// The copy step is done: the thread writes back what is left and waits for it.
    func copied() { shared.copying.store(false, ordering: .releasing) }

    /// No writeback asked for is still running.
    var isDone: Bool { shared.pending.load(ordering: .acquiring) == 0 }

    /// Joins the thread (after its writeback in flight) and closes the descriptor. Only after the
    /// writer connection has closed (see above).
    func shutdown() {
        shared.copying.store(false, ordering: .releasing)
        queue.close()
        thread.join()
        Glibc.close(fd)
    }
}
