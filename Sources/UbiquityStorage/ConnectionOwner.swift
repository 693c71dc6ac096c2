#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

/// Which thread may use a `Connection` (docs/threading.md, "SQLite connections"). Connections are
/// opened NOMUTEX: SQLite does not serialize calls into one, so two threads inside it at once
/// corrupt its state without any error. Each connection belongs to one thread at a time — the
/// thread that opened it until it hands it over (`releaseThread`), then the thread that takes it
/// (`adoptThread`): the writer thread its connection, a reader the connection it checked out.
/// In debug builds every use checks this and traps otherwise (GRDB's SchedulingWatchdog does the
/// same for its queues); release builds skip the checks, which run per statement step.
struct ConnectionOwner: ~Copyable {
    private static let nobody: UInt = 0
    private let owner = Atomic<UInt>(ConnectionOwner.currentThread)

    static var currentThread: UInt {
        #if canImport(Glibc)
        UInt(pthread_self())
        #else
        UInt(bitPattern: pthread_self())
        #endif
    }

    var isCurrentThread: Bool { owner.load(ordering: .acquiring) == Self.currentThread }

    /// Traps (debug builds) unless the calling thread owns the connection.
    func check(_ path: String) {
        #if DEBUG
        let o = owner.load(ordering: .acquiring)
        if o != Self.currentThread {
            preconditionFailure("SQLite connection to \(path) used on a thread that does not own it (owner: \(o == Self.nobody ? "none, released" : "another thread"))")
        }
        #endif
    }

    /// The calling thread takes the connection over; it must be released (or already its own).
    func adopt(_ path: String) {
        let me = Self.currentThread
        let (taken, was) = owner.compareExchange(expected: Self.nobody, desired: me, ordering: .acquiringAndReleasing)
        #if DEBUG
        if !taken && was != me { preconditionFailure("SQLite connection to \(path) taken over while another thread owns it") }
        #else
        _ = (taken, was)
        #endif
    }

    /// The owning thread hands the connection over (to whichever thread adopts it next).
    func release(_ path: String) {
        check(path)
        owner.store(Self.nobody, ordering: .releasing)
    }
}
