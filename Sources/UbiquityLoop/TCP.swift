import CLibUV

#if canImport(Glibc)
import Glibc
#endif

/// What a connection's owner hears from it. All calls arrive on the loop thread.
public protocol TCPConnectionDelegate: AnyObject {
    /// Bytes read from the peer; valid only during the call (the loop's shared read buffer).
    func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer)
    /// The peer closed its side, or reading failed.
    func connectionDidReachEOF(_ connection: TCPConnection, error: UVError?)
    /// The write queue emptied below the bound after having been above it, or a write finished.
    func connectionDidDrainWrites(_ connection: TCPConnection)
    /// The handle is closed and its memory released; the delegate is dropped after this.
    func connectionDidClose(_ connection: TCPConnection)
}

/// A TCP connection on one loop.
///
/// Writes are batched: bytes appended while a write is in flight are gathered and sent together
/// in the next `uv_write`, so there is at most one write in flight per connection (as Node's http2
/// and Redis do). Memory: the pending buffer and the in-flight buffer; both are reused.
public final class TCPConnection {
    // Invariant: created, used and released on `loop`'s thread only.
    public let loop: EventLoop
    let handle: UnsafeMutablePointer<uv_tcp_t>
    private let writeRequest: UnsafeMutablePointer<uv_write_t>
    /// Strong on purpose (the connection and its delegate form a cycle that `close()` breaks in the
    /// close callback): a weak reference would move every retain of the delegate to the slow path.
    public var delegate: TCPConnectionDelegate?
    /// Bytes waiting for the next write.
    // @exclusivity(unchecked): loop-thread only and never accessed through overlapping accesses
    // (no callback re-enters while it is being modified). Measured: without the five here the
    // server runs 22.8k instead of 21.6k instructions per Admin.Ping (+5.5%) (callgrind, release
    // server, 20k calls of ubiquity-load -c 4 -m 16 after a 5k warm-up, 2026-11-25).
    @exclusivity(unchecked) public private(set) var pending = ByteBuffer()
    /// Bytes of the write in flight.
    @exclusivity(unchecked) private var inFlight = ByteBuffer()
    // @exclusivity(unchecked), as above: flags read on every write (3 per call).
    @exclusivity(unchecked) private var writeInFlight = false
    @exclusivity(unchecked) public private(set) var isReading = false
    @exclusivity(unchecked) public private(set) var isClosed = false
    public let peerDescription: String
    /// Keeps self alive while the libuv handle is open (released in the close callback).
    private var selfRetain: Unmanaged<TCPConnection>?

    /// Bytes not yet handed to the kernel: pending plus in flight.
    public var queuedWriteBytes: Int { pending.count + inFlight.count }

    init(loop: EventLoop, handle: UnsafeMutablePointer<uv_tcp_t>) {
        self.loop = loop
        self.handle = handle
        writeRequest = .allocate(capacity: 1)
        peerDescription = TCPConnection.describePeer(handle)
        selfRetain = Unmanaged.passRetained(self)
        handle.pointee.data = selfRetain!.toOpaque()
        uv_tcp_nodelay(handle, 1)
    }

    deinit {
        writeRequest.deallocate()
    }

    private var stream: UnsafeMutablePointer<uv_stream_t> {
        UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_stream_t.self)
    }

    public func startReading() {
        loop.assertInEventLoop()
        guard !isReading, !isClosed else { return }
        isReading = true
        uv_read_start(stream, { handle, _, buf in
            // One shared buffer per loop: the read callback consumes it before the next alloc.
            let conn = Unmanaged<TCPConnection>.fromOpaque(handle!.pointee.data).takeUnretainedValue()
            buf!.pointee = uv_buf_init(conn.loop.readBuffer.assumingMemoryBound(to: CChar.self),
                                       UInt32(conn.loop.readBufferSize))
        }, { stream, nread, _ in
            let conn = Unmanaged<TCPConnection>.fromOpaque(stream!.pointee.data).takeUnretainedValue()
            if nread > 0 {
                conn.delegate?.connection(conn, didRead: UnsafeRawBufferPointer(start: conn.loop.readBuffer, count: nread))
            } else if nread < 0 {
                conn.isReading = false
                uv_read_stop(stream)
                conn.delegate?.connectionDidReachEOF(conn, error: nread == Int(UV_EOF.rawValue) ? nil : UVError(Int32(nread)))
            }
        })
    }

    public func stopReading() {
        loop.assertInEventLoop()
        guard isReading, !isClosed else { return }
        isReading = false
        uv_read_stop(stream)
    }

    /// Queues bytes; they go out with the next write (started now if none is in flight).
    public func write(_ bytes: UnsafeRawBufferPointer) {
        guard !isClosed, bytes.count > 0 else { return }
        pending.append(bytes)
    }

    /// Appends to the pending buffer directly (avoids a copy for producers that can write in place).
    public func withPendingBuffer<R>(_ body: (inout ByteBuffer) -> R) -> R {
        body(&pending)
    }

    /// Starts a write of everything pending unless one is already in flight.
    public func flush() {
        loop.assertInEventLoop()
        guard !isClosed, !writeInFlight, pending.count > 0 else { return }
        swap(&pending, &inFlight)
        pending.removeAll()
        writeInFlight = true
        var buf = uv_buf_init(inFlight.base!.assumingMemoryBound(to: CChar.self), UInt32(inFlight.count))
        writeRequest.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        let rc = uv_write(writeRequest, stream, &buf, 1) { req, status in
            let conn = Unmanaged<TCPConnection>.fromOpaque(req!.pointee.data).takeUnretainedValue()
            conn.writeInFlight = false
            conn.inFlight.removeAll()
            if status < 0 {
                // The peer went away (EPIPE, ECONNRESET) or we closed: drop what is queued.
                conn.pending.removeAll()
                conn.delegate?.connectionDidReachEOF(conn, error: UVError(status))
                return
            }
            if conn.pending.count > 0 { conn.flush() }
            conn.delegate?.connectionDidDrainWrites(conn)
        }
        if rc != 0 {
            writeInFlight = false
            inFlight.removeAll()
            delegate?.connectionDidReachEOF(self, error: UVError(rc))
        }
    }

    public var hasWriteInFlight: Bool { writeInFlight }

    /// Half-closes: sends FIN once the writes libuv holds are out (`uv_shutdown`); reading goes
    /// on. Call with nothing pending (`queuedWriteBytes == 0`), or bytes written later are lost.
    /// Closing before the shutdown completes is fine (libuv then cancels it).
    public func shutdownWrites() {
        loop.assertInEventLoop()
        guard !isClosed else { return }
        let request = UnsafeMutablePointer<uv_shutdown_t>.allocate(capacity: 1)
        if uv_shutdown(request, stream, { req, _ in req?.deallocate() }) != 0 {
            request.deallocate()
        }
    }

    /// Closes the handle; `connectionDidClose` follows from the close callback.
    public func close() {
        loop.assertInEventLoop()
        guard !isClosed else { return }
        isClosed = true
        isReading = false
        uv_close(UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_handle_t.self)) { h in
            let conn = Unmanaged<TCPConnection>.fromOpaque(h!.pointee.data).takeUnretainedValue()
            conn.pending.deallocate()
            conn.inFlight.deallocate()
            UnsafeMutableRawPointer(conn.handle).deallocate()
            conn.delegate?.connectionDidClose(conn)
            conn.delegate = nil
            conn.selfRetain?.release()
            conn.selfRetain = nil
        }
    }

    private static func describePeer(_ handle: UnsafeMutablePointer<uv_tcp_t>) -> String {
        var storage = sockaddr_storage()
        var len = Int32(MemoryLayout<sockaddr_storage>.size)
        let rc = withUnsafeMutablePointer(to: &storage) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { uv_tcp_getpeername(handle, $0, &len) }
        }
        guard rc == 0 else { return "unknown" }
        return SocketAddress.describe(&storage)
    }
}

extension TCPConnection {
    /// Opens an outbound connection to `host:port` (an IPv4 or IPv6 literal, or a name resolved with
    /// `getaddrinfo`, which blocks the loop thread briefly — fine for clients, which connect rarely).
    /// `completion` runs once on the loop thread. Call on the loop thread.
    public static func connect(loop: EventLoop, host: String, port: Int,
                               _ completion: @escaping (Result<TCPConnection, UVError>) -> Void) {
        loop.assertInEventLoop()
        var storage = sockaddr_storage()
        if let rc = SocketAddress.resolve(host: host, port: port, into: &storage), rc != 0 {
            completion(.failure(UVError(rc)))
            return
        }
        let handle = UnsafeMutablePointer<uv_tcp_t>.allocate(capacity: 1)
        uv_tcp_init(loop.uvLoop, handle)
        let request = UnsafeMutablePointer<uv_connect_t>.allocate(capacity: 1)
        let pending = PendingConnect(loop: loop, handle: handle, completion: completion)
        request.pointee.data = Unmanaged.passRetained(pending).toOpaque()
        let rc = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { addr in
                uv_tcp_connect(request, handle, addr) { req, status in
                    let pending = Unmanaged<PendingConnect>.fromOpaque(req!.pointee.data).takeRetainedValue()
                    req!.deallocate()
                    pending.finish(status)
                }
            }
        }
        if rc != 0 {
            Unmanaged<PendingConnect>.fromOpaque(request.pointee.data).release()
            request.deallocate()
            pending.finish(rc)
        }
    }
}

/// An outbound connect in progress (loop thread only).
private final class PendingConnect {
    let loop: EventLoop
    let handle: UnsafeMutablePointer<uv_tcp_t>
    let completion: (Result<TCPConnection, UVError>) -> Void

    init(loop: EventLoop, handle: UnsafeMutablePointer<uv_tcp_t>, completion: @escaping (Result<TCPConnection, UVError>) -> Void) {
        self.loop = loop
        self.handle = handle
        self.completion = completion
    }

    func finish(_ status: Int32) {
        if status == 0 {
            completion(.success(TCPConnection(loop: loop, handle: handle)))
            return
        }
        uv_close(UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_handle_t.self)) { h in
            UnsafeMutableRawPointer(h!).deallocate()
        }
        completion(.failure(UVError(status)))
    }
}

/// Listens on one address and hands accepted connections to `onAccept` on the loop thread.
public final class TCPListener {
    // Invariant: used on `loop`'s thread only.
    public let loop: EventLoop
    private let handle: UnsafeMutablePointer<uv_tcp_t>
    private let onAccept: (TCPConnection) -> Void
    private var selfRetain: Unmanaged<TCPListener>?
    public private(set) var isClosed = false
    /// The bound port (useful with port 0).
    public private(set) var port: Int = 0

    /// Binds and listens. `reusePort` sets SO_REUSEPORT so several loops can share one port.
    public init(loop: EventLoop, host: String, port: Int, backlog: Int32 = 1024, reusePort: Bool,
                onAccept: @escaping (TCPConnection) -> Void) throws(UVError) {
        self.loop = loop
        self.onAccept = onAccept
        handle = .allocate(capacity: 1)
        var storage = sockaddr_storage()
        let family: Int32
        if host.contains(":") {
            family = AF_INET6
            let rc = withUnsafeMutablePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { uv_ip6_addr(host, Int32(port), $0) }
            }
            if rc != 0 { UnsafeMutableRawPointer(handle).deallocate(); throw UVError(rc) }
        } else {
            family = AF_INET
            let rc = withUnsafeMutablePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { uv_ip4_addr(host, Int32(port), $0) }
            }
            if rc != 0 { UnsafeMutableRawPointer(handle).deallocate(); throw UVError(rc) }
        }
        uv_tcp_init_ex(loop.uvLoop, handle, UInt32(family))
        selfRetain = Unmanaged.passRetained(self)
        handle.pointee.data = selfRetain!.toOpaque()
        func fail(_ rc: Int32) -> UVError {
            close()
            return UVError(rc)
        }
        if reusePort {
            let rc = ubq_set_reuseport(handle)
            if rc != 0 { throw fail(Int32(-EINVAL)) }
        }
        var rc = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { uv_tcp_bind(handle, $0, family == AF_INET6 ? UInt32(UV_TCP_IPV6ONLY.rawValue) : 0) }
        }
        if rc != 0 { throw fail(rc) }
        rc = uv_listen(UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_stream_t.self), backlog) { server, status in
            let listener = Unmanaged<TCPListener>.fromOpaque(server!.pointee.data).takeUnretainedValue()
            guard status == 0 else { return }
            listener.acceptOne()
        }
        if rc != 0 { throw fail(rc) }
        var bound = sockaddr_storage()
        var len = Int32(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &bound) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { uv_tcp_getsockname(handle, $0, &len) }
        }
        self.port = SocketAddress.port(&bound)
    }

    private func acceptOne() {
        let client = UnsafeMutablePointer<uv_tcp_t>.allocate(capacity: 1)
        uv_tcp_init(loop.uvLoop, client)
        let rc = uv_accept(UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_stream_t.self),
                           UnsafeMutableRawPointer(client).assumingMemoryBound(to: uv_stream_t.self))
        if rc != 0 {
            uv_close(UnsafeMutableRawPointer(client).assumingMemoryBound(to: uv_handle_t.self)) { h in
                UnsafeMutableRawPointer(h!).deallocate()
            }
            return
        }
        onAccept(TCPConnection(loop: loop, handle: client))
    }

    /// Stops listening and releases the handle.
    public func close() {
        guard !isClosed else { return }
        isClosed = true
        uv_close(UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_handle_t.self)) { h in
            let listener = Unmanaged<TCPListener>.fromOpaque(h!.pointee.data).takeUnretainedValue()
            UnsafeMutableRawPointer(h!).deallocate()
            listener.selfRetain?.release()
            listener.selfRetain = nil
        }
    }
}

enum SocketAddress {
    static func describe(_ storage: UnsafeMutablePointer<sockaddr_storage>) -> String {
        var name = [CChar](repeating: 0, count: 64)
        if Int32(storage.pointee.ss_family) == AF_INET6 {
            return storage.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { sin in
                uv_ip6_name(sin, &name, name.count)
                return "[\(cString(name))]:\(UInt16(bigEndian: sin.pointee.sin6_port))"
            }
        }
        return storage.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { sin in
            uv_ip4_name(sin, &name, name.count)
            return "\(cString(name)):\(UInt16(bigEndian: sin.pointee.sin_port))"
        }
    }

    /// The text before the first NUL of a C string buffer.
    private static func cString(_ buffer: [CChar]) -> String {
        String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Fills `storage` with `host:port`: a literal first, else the first `getaddrinfo` answer.
    /// Returns nil on success, else a libuv error code.
    static func resolve(host: String, port: Int, into storage: inout sockaddr_storage) -> Int32? {
        let h = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        let rc4 = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { uv_ip4_addr(h, Int32(port), $0) }
        }
        if rc4 == 0 { return nil }
        let rc6 = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { uv_ip6_addr(h, Int32(port), $0) }
        }
        if rc6 == 0 { return nil }
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var result: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(h, String(port), &hints, &result) == 0, let first = result else {
            return Int32(UV_EAI_NONAME.rawValue)
        }
        defer { freeaddrinfo(result) }
        withUnsafeMutableBytes(of: &storage) { dst in
            dst.copyMemory(from: UnsafeRawBufferPointer(start: first.pointee.ai_addr, count: Int(first.pointee.ai_addrlen)))
        }
        return nil
    }

    static func port(_ storage: UnsafeMutablePointer<sockaddr_storage>) -> Int {
        if Int32(storage.pointee.ss_family) == AF_INET6 {
            return storage.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin6_port)) }
        }
        return storage.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin_port)) }
    }
}

/// A one-shot or repeating timer on one loop. Loop thread only.
public final class LoopTimer {
    private let handle: UnsafeMutablePointer<uv_timer_t>
    private var callback: (() -> Void)?
    private var selfRetain: Unmanaged<LoopTimer>?
    private var closed = false

    public init(loop: EventLoop) {
        handle = .allocate(capacity: 1)
        uv_timer_init(loop.uvLoop, handle)
        selfRetain = Unmanaged.passRetained(self)
        handle.pointee.data = selfRetain!.toOpaque()
    }

    /// Fires `callback` after `milliseconds`, then every `repeatMilliseconds` if non-zero.
    public func start(milliseconds: UInt64, repeatMilliseconds: UInt64 = 0, _ callback: @escaping () -> Void) {
        guard !closed else { return }
        self.callback = callback
        uv_timer_start(handle, { h in
            let timer = Unmanaged<LoopTimer>.fromOpaque(h!.pointee.data).takeUnretainedValue()
            timer.callback?()
        }, milliseconds, repeatMilliseconds)
    }

    public func stop() {
        guard !closed else { return }
        uv_timer_stop(handle)
    }

    /// Stops and releases the timer; it never fires again.
    public func close() {
        guard !closed else { return }
        closed = true
        callback = nil
        uv_close(UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_handle_t.self)) { h in
            let timer = Unmanaged<LoopTimer>.fromOpaque(h!.pointee.data).takeUnretainedValue()
            UnsafeMutableRawPointer(h!).deallocate()
            timer.selfRetain?.release()
            timer.selfRetain = nil
        }
    }
}

/// Watches a POSIX signal on one loop (libuv turns it into a loop callback). Loop thread only.
public final class SignalWatcher {
    private let handle: UnsafeMutablePointer<uv_signal_t>
    private let callback: (Int32) -> Void
    private var selfRetain: Unmanaged<SignalWatcher>?
    private var closed = false

    public init(loop: EventLoop, signal: Int32, _ callback: @escaping (Int32) -> Void) {
        handle = .allocate(capacity: 1)
        self.callback = callback
        uv_signal_init(loop.uvLoop, handle)
        selfRetain = Unmanaged.passRetained(self)
        handle.pointee.data = selfRetain!.toOpaque()
        uv_signal_start(handle, { h, signum in
            let w = Unmanaged<SignalWatcher>.fromOpaque(h!.pointee.data).takeUnretainedValue()
            w.callback(signum)
        }, signal)
    }

    public func close() {
        guard !closed else { return }
        closed = true
        uv_close(UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_handle_t.self)) { h in
            let w = Unmanaged<SignalWatcher>.fromOpaque(h!.pointee.data).takeUnretainedValue()
            UnsafeMutableRawPointer(h!).deallocate()
            w.selfRetain?.release()
            w.selfRetain = nil
        }
    }
}

/// Ignore SIGPIPE process-wide: a peer that vanishes mid-write must produce EPIPE, not a crash.
public func ignoreSIGPIPE() { ubq_ignore_sigpipe() }
