#if canImport(Glibc)
import Glibc
#endif

/// CPU priority (nice value) of one thread (docs/threading.md rule on thread priorities).
///
/// Linux schedules threads, not processes: `setpriority(PRIO_PROCESS, tid, n)` with a thread
/// id changes that one thread only. Used for the store writer thread (`writerNice`), so saves
/// yield CPU to reads when both want it, and still get all idle CPU (CFS weights, not
/// exclusion: a thread at nice 19 still gets ~1.5% of a core that a nice-0 thread saturates).
enum ThreadPriority {
    /// Nice values accepted: 0 (unchanged) to 19 (lowest). Raising a thread's priority above
    /// the process's (negative values) would need CAP_SYS_NICE, so it is not offered.
    static let niceRange = 0...19

    /// Sets the calling thread's nice value; false if the OS refused (or is not Linux).
    @discardableResult
    static func setCurrentThreadNice(_ n: Int) -> Bool {
        #if os(Linux)
        guard let tid = currentThreadID() else { return false }
        return setpriority(__priority_which_t(PRIO_PROCESS.rawValue), id_t(tid), Int32(n)) == 0
        #else
        return false
        #endif
    }

    /// The process's own nice value: the main thread's (its kernel id is the process id).
    static func processNice() -> Int? {
        #if os(Linux)
        errno = 0
        let v = getpriority(__priority_which_t(PRIO_PROCESS.rawValue), id_t(getpid()))
        return v == -1 && errno != 0 ? nil : Int(v)
        #else
        return nil
        #endif
    }

    /// First thing a store thread does: set its nice value to `nice`, or to the process's when
    /// `nice` is 0. A new thread inherits its creator's — a store opened from a Dispatch worker
    /// would otherwise run at that worker's priority (seen: nice −2). (Its name is set by
    /// `NamedThread`, which starts it.) Best effort: lowering a nice value needs CAP_SYS_NICE,
    /// raising it never does.
    static func prepareStoreThread(nice: Int) {
        if let n = nice != 0 ? nice : processNice(), n != currentThreadNice() { setCurrentThreadNice(n) }
    }

    /// The calling thread's nice value (nil if it cannot be read).
    static func currentThreadNice() -> Int? {
        #if os(Linux)
        guard let tid = currentThreadID() else { return nil }
        errno = 0
        let v = getpriority(__priority_which_t(PRIO_PROCESS.rawValue), id_t(tid))
        return v == -1 && errno != 0 ? nil : Int(v)
        #else
        return nil
        #endif
    }

    #if os(Linux)
    /// The calling thread's kernel id, from the `/proc/thread-self` link ("<pid>/task/<tid>"):
    /// Swift imports neither glibc's `gettid` nor the variadic `syscall`.
    static func currentThreadID() -> pid_t? {
        var buf = [CChar](repeating: 0, count: 64)
        let n = readlink("/proc/thread-self", &buf, buf.count - 1)
        guard n > 0 else { return nil }
        let link = String(decoding: buf[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard let last = link.split(separator: "/").last else { return nil }
        return pid_t(last)
    }
    #endif
}
