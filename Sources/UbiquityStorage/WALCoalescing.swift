internal import CSQLite
internal import CSQLiteWALBuffer
import Logging
import UbiquityLock

/// The writer connection's WAL write coalescing: the "ubq-walbuf" wrapper VFS
/// (Sources/CSQLiteWALBuffer/walbuf.c) gathers the contiguous frame writes of a commit and writes
/// each run with one pwrite instead of two per frame. It flushes right after a commit frame's page
/// (before wal.c publishes the commit to readers, also under synchronous=NORMAL) and before every
/// other call on the WAL file (xSync, xRead, ...); a failed flush is that call's error. Only files
/// opened as WAL are wrapped. docs/storage.md "WAL write coalescing".
///
/// It recognises a commit frame by the shape of wal.c's private writes (a 24-byte frame header,
/// then the page), so it is enabled only on the SQLite it was validated on (and crash-tested:
/// CrashTests); on another version the writer uses the plain VFS and says so in the log.
enum WALCoalescing {
    /// The base VFSes that get the wrapper: the default, and the tests' fault-injection VFS
    /// (Sources/CSQLiteFaultVFS), so that faults hit the coalesced writes. Any other VFS is used as is.
    static let wrappableBases: Set<String?> = [nil, "ubq-fault"]
    /// The registered wrapper per base VFS name (nil key: the default VFS).
    private static let registered = Lock<[String?: String]>([:])

    /// Whether coalescing may run on this SQLite (`sqlite3_libversion_number()`).
    static func isValidated(sqliteVersion: Int32) -> Bool { sqliteVersion == UBQ_WALBUF_VALIDATED_SQLITE }

    /// The VFS the writer connection opens with: the coalescing wrapper over `base` (nil: the
    /// default VFS), or `base` itself if it is not wrappable, this SQLite is not the validated
    /// one, or the wrapper cannot be registered.
    static func writerVFS(over base: String?, logger: Logger, sqliteVersion: Int32 = sqlite3_libversion_number()) -> String? {
        guard wrappableBases.contains(base) else { return base }
        guard isValidated(sqliteVersion: sqliteVersion) else {
            logger.warning("WAL write coalescing off: validated on SQLite \(UBQ_WALBUF_VALIDATED_SQLITE), this is \(sqliteVersion)")
            return base
        }
        return registered.withLock { names -> String? in
            if let name = names[base] { return name }
            guard let c = ubq_walbuf_register(base) else {
                logger.warning("WAL write coalescing off: cannot wrap VFS \(base ?? "default")")
                return base
            }
            let name = String(cString: c)
            names[base] = name
            return name
        }
    }
}
