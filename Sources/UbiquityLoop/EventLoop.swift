import CLibUV
import Synchronization
import UbiquityLock

#if canImport(Glibc)
import Glibc
#endif

/// One libuv loop driven by one thread.
///
/// Thread rules (see docs/threading.md):
/// 1. Everything reachable from `uvLoop` (handles, requests, their Swift owners) is touched only on
///    the loop thread, the thread that called `run()`.
/// 2. The only ways in from another thread are `execute(_:)` (a mutex-protected queue plus
///    `uv_async_send`, the one thread-safe libuv call) and `stop()`, which goes through `execute`.
/// 3. `uv_async_send` calls coalesce, so the wake-up callback drains the whole queue each time.
public final class EventLoop: @unchecked Sendable {
    // @unchecked: `uvLoop`, `wakeup`, `closing` and `onLoopThreadID` are written before `run()`
    // starts or on the loop thread only; `queue` is guarded by its Lock; `drained` (the spare
    // buffer drainQueue swaps with the queue), `afterBatch`, `afterBatchSpare` and `inDrain` are
    // touched only on the loop thread.
    public let uvLoop: UnsafeMutablePointer<uv_loop_t>
    private let wakeup: UnsafeMutablePointer<uv_async_t>
    private let queue = Lock(FIFOQueue<@Sendable () -> Void>())
    private var drained = FIFOQueue<@Sendable () -> Void>()
    /// Loop-thread work deferred to the end of the current `execute` batch (`afterCurrentBatch`).
    private var afterBatch: [() -> Void] = []
    private var afterBatchSpare: [() -> Void] = []
    private var inDrain = false
    private let loopThread = Atomic<UInt>(0)
    /// Reusable read buffer shared by all connections of this loop: a read callback consumes it
    /// synchronously before libuv allocates for the next read. Loop thread only; TLS decrypts
    /// into it once the read's ciphertext has been copied to OpenSSL (TLSConnection).
    public let readBuffer: UnsafeMutableRawPointer
    public let readBufferSize = 256 * 1024
    public let name: String

    public init(name: String = "loop") {
        self.name = name
        uvLoop = .allocate(capacity: 1)
        let rc = uv_loop_init(uvLoop)
        precondition(rc == 0, "uv_loop_init failed: \(UVError(rc))")
        wakeup = .allocate(capacity: 1)
        readBuffer = .allocate(byteCount: readBufferSize, alignment: 16)
        uv_async_init(uvLoop, wakeup) { handle in
            guard let handle, let data = handle.pointee.data else { return }
            Unmanaged<EventLoop>.fromOpaque(data).takeUnretainedValue().drainQueue()
        }
        wakeup.pointee.data = Unmanaged.passUnretained(self).toOpaque()
    }

    deinit {
        readBuffer.deallocate()
        uvLoop.deallocate()
    }

    /// True when called on this loop's thread.
    public var inEventLoop: Bool {
        loopThread.load(ordering: .relaxed) == UInt(pthread_self())
    }

    /// Traps when called off the loop thread (debug builds only).
    @inlinable public func assertInEventLoop(file: StaticString = #fileID, line: UInt = #line) {
        assert(inEventLoop, "called off the event loop thread", file: file, line: line)
    }

    /// Runs `work` on the loop thread, soon. Safe from any thread.
    public func execute(_ work: @escaping @Sendable () -> Void) {
        queue.withLock { $0.append(work) }
        uv_async_send(wakeup)
    }

    private func drainQueue() {
        // Several uv_async_send calls may have coalesced into this one callback: take everything.
        // The queue and `drained` swap buffers, so a drain allocates nothing (copying the queue
        // out and emptying it "keeping capacity" allocated a new buffer every time, the copy
        // still holding the old one).
        while true {
            var batch = drained
            drained = FIFOQueue()
            queue.withLock { q in swap(&q, &batch) }
            if batch.isEmpty {
                drained = batch
                return
            }
            inDrain = true
            while let work = batch.popFirst() { work() }
            inDrain = false
            drained = batch
            runAfterBatch()
        }
    }

    /// Loop thread only: runs `work` once the `execute` jobs being drained now have all run, or at
    /// once when called outside a drain (deferred work itself runs outside one). Lets jobs that each complete a call for the same
    /// connection share one flush (one `nghttp2_session_mem_send`, one socket write) instead of
    /// one each.
    public func afterCurrentBatch(_ work: @escaping () -> Void) {
        assertInEventLoop()
        if inDrain { afterBatch.append(work) } else { work() }
    }

    private func runAfterBatch() {
        while !afterBatch.isEmpty {
            var works = afterBatchSpare
            afterBatchSpare = []
            swap(&works, &afterBatch)
            for work in works { work() }
            works.removeAll(keepingCapacity: true)
            afterBatchSpare = works
        }
    }

    /// Runs the loop on the calling thread until `stop()`; then closes every handle and the loop.
    public func run() {
        adoptCurrentThread()
        uv_run(uvLoop, UV_RUN_DEFAULT)
        // Close whatever is still open (the wake-up handle among them) and let close callbacks run,
        // so handle memory is released only once libuv is done with it.
        uv_walk(uvLoop, { handle, _ in
            guard let handle, uv_is_closing(handle) == 0 else { return }
            uv_close(handle, nil)
        }, nil)
        uv_run(uvLoop, UV_RUN_DEFAULT)
        uv_loop_close(uvLoop)
        wakeup.deallocate()
    }

    /// Makes the calling thread the loop thread (before `run()`, for set-up work on that thread).
    func adoptCurrentThread() {
        loopThread.store(UInt(pthread_self()), ordering: .relaxed)
    }

    /// Stops `run()` after the work already queued has run. Safe from any thread.
    public func stop() {
        execute { [self] in uv_stop(uvLoop) }
    }
}

/// Runs a loop on a thread of its own (a `NamedThread` named after the loop).
public final class EventLoopThread: Sendable {
    public let loop: EventLoop
    private let thread = Lock<NamedThread?>(nil)

    public init(name: String) {
        loop = EventLoop(name: name)
    }

    /// Starts the thread. `body` runs on the loop thread before the loop starts turning.
    public func start(_ body: @escaping @Sendable (EventLoop) -> Void = { _ in }) {
        let loop = self.loop
        let started = NamedThread(name: loop.name) {
            loop.adoptCurrentThread()
            body(loop)
            loop.run()
        }
        thread.withLock { $0 = started }
    }

    /// Waits for the loop thread to end (after `loop.stop()`).
    public func join() {
        thread.withLock { $0 }?.join()
    }
}

/// A libuv error code with its name and message.
public struct UVError: Error, CustomStringConvertible, Sendable {
    public let code: Int32
    public init(_ code: Int32) { self.code = code }
    public var description: String {
        "\(String(cString: uv_err_name(code))): \(String(cString: uv_strerror(code)))"
    }
}

/// Wraps a value that may only be touched on one loop's thread; lets it ride in @Sendable closures.
/// Access checks the thread in debug builds.
public struct LoopBound<Value>: @unchecked Sendable {
    // @unchecked: `value` is read only through `get`, which asserts the loop thread.
    private let value: Value
    public let loop: EventLoop
    public init(_ value: Value, loop: EventLoop) {
        self.value = value
        self.loop = loop
    }
    public var get: Value {
        loop.assertInEventLoop()
        return value
    }
}

extension EventLoop {
    /// The loop's cached time in milliseconds (`uv_now`). Loop thread only.
    public var now: UInt64 { uv_now(uvLoop) }
}
