import CMalloc
import Glibc
import UbiquityLock

/// Gives memory freed in bulk back to the kernel (issue 15, item 5).
///
/// glibc keeps freed memory in its arenas (one per thread that allocated, up to 8 per core) and
/// returns it only from the top of the main heap. Swift tasks free on other threads than they
/// allocated on, so after a burst — 200 FetchStream calls whose client did not read, then were
/// reset — RSS stayed at 202 MiB against 53 MiB before, though nothing was in use: a manual
/// `malloc_trim(0)` brought it to 57 MiB (docs/operations.md, "Memory"). So every few seconds
/// the server looks at how much its arenas hold free and trims when that is large.
///
/// `mallinfo2` and `malloc_trim` each take every arena's lock briefly; at one check per
/// `interval` the cost does not show in any workload.
enum MemoryTrimmer {
    static let intervalSeconds: UInt32 = 5
    /// Free bytes in the arenas past which a check trims.
    static let thresholdBytes = 32 * 1024 * 1024

    /// Starts the checker thread (it runs until the process exits).
    static func start() {
        _ = NamedThread(name: "ubq-trim") {
            while true {
                sleep(intervalSeconds)
                if Int(ubq_malloc_free_bytes()) > thresholdBytes { _ = ubq_malloc_trim() }
            }
        }
    }
}
