#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A joinable OS thread with a name the kernel, `top -H`, `gdb` and `perf` show: the one way
/// the server and the client start a thread of their own (the event loops, the store's writer,
/// readers and snapshot sweeper, the memory trimmer).
///
/// Not Foundation's `Thread`, whose name did not reliably reach the kernel (one of two new
/// threads kept its creator's name), and not a Dispatch queue: a loop or a worker owns its
/// thread for life and is joined on shutdown.
public final class NamedThread: Sendable {
    private let thread: Lock<pthread_t?>
    public let name: String

    /// Starts `body` on a new thread named `name` (the kernel keeps the first 15 bytes).
    /// `stackSize` in bytes; nil takes the C library's default, which follows `ulimit -s` and so
    /// differs between machines: a thread whose stack need is known (the store's SQLite threads)
    /// says so.
    public init(name: String, stackSize: Int? = nil, _ body: @escaping @Sendable () -> Void) {
        self.name = name
        let start = Unmanaged.passRetained(Start(name: name, body: body)).toOpaque()
        #if canImport(Glibc)
        var tid = pthread_t()
        #else
        var tid: pthread_t?
        #endif
        var attr = pthread_attr_t()
        pthread_attr_init(&attr)
        defer { pthread_attr_destroy(&attr) }
        if let stackSize {
            let rc = pthread_attr_setstacksize(&attr, stackSize)
            precondition(rc == 0, "pthread_attr_setstacksize(\(stackSize)) failed: \(rc)")
        }
        let rc = pthread_create(&tid, &attr, { arg in
            let start = Unmanaged<Start>.fromOpaque(arg!).takeRetainedValue()
            NamedThread.setCurrentName(start.name)
            start.body()
            return nil
        }, start)
        precondition(rc == 0, "pthread_create failed: \(rc)")
        thread = Lock(tid)
    }

    /// Waits for the thread's body to return. Later calls (from any thread) return at once.
    public func join() {
        guard let tid = thread.withLock({ t -> pthread_t? in defer { t = nil }; return t }) else { return }
        pthread_join(tid, nil)
    }

    /// Names the calling thread, keeping at most 15 bytes (cut at a character boundary): Linux
    /// refuses longer names (ERANGE) rather than truncating them.
    public static func setCurrentName(_ name: String) {
        var bytes: [CChar] = []
        for c in name {
            let utf8 = Array(c.utf8)
            if bytes.count + utf8.count > 15 { break }
            bytes += utf8.map { CChar(bitPattern: $0) }
        }
        bytes.append(0)
        #if canImport(Glibc)
        if let setName = setNameFunction { _ = setName(pthread_self(), bytes) }
        #else
        _ = pthread_setname_np(bytes)
        #endif
    }

    #if canImport(Glibc)
    private typealias SetName = @convention(c) (pthread_t, UnsafePointer<CChar>) -> Int32
    /// glibc's `pthread_setname_np`, which Swift's Glibc module does not import (it is a GNU
    /// extension behind `_GNU_SOURCE`): looked up once, called with the C convention.
    private static let setNameFunction: SetName? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "pthread_setname_np") else { return nil }
        return unsafeBitCast(symbol, to: SetName.self)
    }()
    #endif

    private final class Start {
        let name: String
        let body: @Sendable () -> Void
        init(name: String, body: @escaping @Sendable () -> Void) { self.name = name; self.body = body }
    }
}
