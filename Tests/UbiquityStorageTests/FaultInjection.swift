import CSQLite
import CSQLiteFaultVFS
import Foundation

/// Fault injection through the "ubq-fault" wrapping VFS (Sources/CSQLiteFaultVFS). Open a store
/// with `StorageConfiguration.vfsName = FaultInjection.vfsName` and arm a fault.
enum FaultInjection {
    private static let registration: Int32 = ubq_fault_register()  // once, thread-safe (a static let)
    /// The VFS name; reading it registers the VFS.
    static var vfsName: String {
        precondition(registration == SQLITE_OK, "ubq-fault registration failed: \(registration)")
        return "ubq-fault"
    }
    /// The `writeNth`-th xWrite and/or the `syncNth`-th xSync from now fails once (0 = no fault).
    /// `diskFull` makes the failure SQLITE_FULL instead of SQLITE_IOERR_WRITE/FSYNC.
    static func arm(writeNth: Int = 0, syncNth: Int = 0, diskFull: Bool = false) {
        _ = vfsName
        ubq_fault_arm(Int32(writeNth), Int32(syncNth), diskFull ? SQLITE_FULL : SQLITE_IOERR)
    }
    /// The `nth` writer connection opened from now (a read-write open of a database file) fails
    /// once with SQLITE_CANTOPEN.
    static func armWriterOpen(nth: Int = 1) { _ = vfsName; ubq_fault_arm_writer_open(Int32(nth)) }
    /// Writer connections opened through the VFS so far (read-write opens of a database file).
    static var writerOpenCount: Int { Int(ubq_fault_writer_open_count()) }
    static func disarm() { ubq_fault_arm(0, 0, SQLITE_IOERR) }
    static var firedCount: Int { Int(ubq_fault_fired_count()) }
    static var writeCount: Int { Int(ubq_fault_write_count()) }
    static var syncCount: Int { Int(ubq_fault_sync_count()) }
}
