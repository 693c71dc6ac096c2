import CLibUV
import UbiquityLock
#if canImport(Glibc)
import Glibc
#endif

/// A joinable POSIX thread with a name visible to debuggers and `top -H` (Linux keeps 15 bytes
/// of it). For threads that are not loops — the blocking workers — so that layers above this one
/// need no libuv or pthread calls of their own.
public final class NamedThread: Sendable {
    private let thread: Lock<pthread_t?>

    /// Starts `body` on a new thread named `name`.
    public init(name: String, _ body: @escaping @Sendable () -> Void) {
        let short = String(name.prefix(15))
        let box = Unmanaged.passRetained(NamedThreadStart { ubq_set_thread_name(short); body() })
        var tid = pthread_t()
        let rc = pthread_create(&tid, nil, { arg in
            Unmanaged<NamedThreadStart>.fromOpaque(arg!).takeRetainedValue().body()
            return nil
        }, box.toOpaque())
        precondition(rc == 0, "pthread_create failed: \(rc)")
        thread = Lock(tid)
    }

    /// Waits for the thread to end; later calls return at once.
    public func join() {
        guard let tid = thread.withLock({ t -> pthread_t? in defer { t = nil }; return t }) else { return }
        pthread_join(tid, nil)
    }
}

private final class NamedThreadStart {
    let body: () -> Void
    init(body: @escaping () -> Void) { self.body = body }
}
