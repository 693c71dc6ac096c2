internal import CSQLite
import Foundation

/// The writer connection's WAL write coalescing: the "ubq-walbuf" wrapper VFS (Sources/CSQLite/shim.h)
/// gathers the contiguous frame writes of a commit and writes each run with one pwrite instead of
/// two per frame. It flushes right after a commit frame's page (before wal.c publishes the commit
/// to readers, also under synchronous=NORMAL) and before every other call on the WAL file (xSync,
/// xRead, ...); a failed flush is that call's error. Only files opened as WAL are wrapped.
/// docs/storage.md "WAL write coalescing".
enum WALCoalescing {
    private static let lock = NSLock()

    /// The VFS the writer connection opens with: the coalescing wrapper over `base` (nil: the
    /// default VFS; `FaultInjection.vfsName`: the fault VFS under the wrapper). Another base VFS
    /// is returned unwrapped.
    static func writerVFS(over base: String?) -> String? {
        let index: Int32
        switch base {
        case nil: index = 0
        case FaultInjection.vfsName?: index = 1
        default: return base
        }
        lock.lock(); defer { lock.unlock() }
        if index == 1 { FaultInjection.register() }
        guard ubq_walbuf_vfs_register(index) == SQLITE_OK else { return base }
        return index == 0 ? "ubq-walbuf" : "ubq-walbuf-fault"
    }
}
