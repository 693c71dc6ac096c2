// A value guarded by a lock: `Synchronization.Mutex` in normal builds, a pthread mutex in builds
// compiled with `-DUBIQ_TSAN` (scripts/sanitize thread).
//
// Why two: on Linux, `Mutex`'s contended path locks through a futex in the (uninstrumented)
// standard library, so ThreadSanitizer sees no acquire/release on it and reports every access
// to a Mutex-guarded value from two threads as a race. `pthread_mutex_lock` is intercepted by
// TSan, so with it the reports are real ones only. Normal builds keep `Mutex` itself (a type
// alias, not a wrapper): not one instruction changes there.
//
// Every cross-thread lock of the server and the client (loop queue, blocking pool, calls,
// service state) is a `Lock`; plain `Mutex` is not used in Sources/ or Tests/. `NSLock`,
// `NSCondition` and `DispatchSemaphore` (storage, query) are visible to TSan as they are.

#if UBIQ_TSAN

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A pthread-mutex-backed stand-in for `Synchronization.Mutex`, with the same `init(_:)` and
/// `withLock(_:)`. Only sanitizer builds use it. Use a `Lock` exactly as a `Mutex` (a `let`,
/// only `withLock`): code must compile both ways, and `scripts/sanitize thread` is the only
/// build of this one.
public final class Lock<Value: ~Copyable>: @unchecked Sendable {
    // @unchecked: `value` is read and written only inside `withLock`, between
    // pthread_mutex_lock and pthread_mutex_unlock of `mutex`; it is handed over `sending`, like
    // Mutex's, so no non-Sendable state escapes the lock's region. Both live in their own
    // allocations so their addresses never move.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let value: UnsafeMutablePointer<Value>

    public init(_ initialValue: consuming sending Value) {
        mutex = .allocate(capacity: 1)
        let rc = pthread_mutex_init(mutex, nil)
        precondition(rc == 0, "pthread_mutex_init failed: \(rc)")
        value = .allocate(capacity: 1)
        value.initialize(to: initialValue)
    }

    deinit {
        value.deinitialize(count: 1)
        value.deallocate()
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with exclusive access to the value.
    public func withLock<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value.pointee)
    }
}

#else

import Synchronization

/// `Synchronization.Mutex` itself in normal builds (see the top of this file).
public typealias Lock<Value: ~Copyable> = Mutex<Value>

#endif
