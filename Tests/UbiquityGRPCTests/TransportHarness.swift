import CNGHTTP2
import Dispatch
import Logging
import UbiquityLock
import UbiquityLoop
import XCTest
@testable import UbiquityGRPC

/// The socket's stand-in for `HTTP2Connection`: what the connection writes waits in `pending`
/// until the harness hands it to the client (the "kernel" taking the bytes).
final class FakeIO: ConnectionIO {
    let loop: EventLoop
    let peerDescription = "transport-test"
    private(set) var isClosed = false
    private(set) var reading = false
    private(set) var finSent = false
    var pending: [UInt8] = []
    var queuedWriteBytes: Int { pending.count }
    /// Called when the connection starts a write (loop thread).
    var onFlush: () -> Void = {}
    var onClose: () -> Void = {}
    private var connection: HTTP2Connection?

    init(loop: EventLoop) { self.loop = loop }

    func write(_ bytes: UnsafeRawBufferPointer) { pending.append(contentsOf: bytes) }
    func flush() { if !pending.isEmpty { onFlush() } }
    func startReading() { reading = true }
    func stopReading() { reading = false }
    func shutdownWrites() { finSent = true }
    func close() {
        isClosed = true
        connection = nil
        onClose()
    }
    func attach(_ connection: HTTP2Connection) { self.connection = connection }
}

/// Drives one `HTTP2Connection` over a `FakeIO` with an nghttp2 *client* session: requests go
/// in as the client's bytes, and the server's bytes come back into the client, whose callbacks
/// record what it received. Everything runs on one loop thread; the test thread waits for
/// recorded events (no sleeps) and reads them under `events`' lock.
final class TransportHarness: @unchecked Sendable {
    // @unchecked: `io`, `conn`, `client` and `bodies` are touched on the loop thread only
    // (through `onLoop`); `events` is under its lock.
    struct Received {
        var headerBlocks: [[(name: String, value: String)]] = []
        var data: [UInt8] = []
        var closedWith: UInt32?
        var resetWith: UInt32?

        func header(_ name: String, block: Int? = nil) -> String? {
            let blocks = block.map { [headerBlocks[$0]] } ?? headerBlocks
            return blocks.lazy.flatMap { $0 }.first { $0.name == name }?.value
        }
    }

    struct Events {
        var streams: [Int32: Received] = [:]
        var goaways: [(lastStreamID: Int32, errorCode: UInt32)] = []
        var finSent = false
        var closed = false
    }

    let thread: EventLoopThread
    var loop: EventLoop { thread.loop }
    let counters = ServerCounters()
    let events = Lock(Events())
    private let changed = DispatchSemaphore(value: 0)
    private var io: FakeIO!
    private var conn: HTTP2Connection!
    private var client: OpaquePointer?
    private var bodies: [Int32: (bytes: [UInt8], offset: Int, end: Bool)] = [:]
    private var deliveryScheduled = false

    init(router: Router, configure: (inout ServerConfiguration) -> Void = { _ in }) {
        var config = ServerConfiguration()
        configure(&config)
        thread = EventLoopThread(name: "transport-test")
        thread.start()
        let env = ConnectionEnvironment(configuration: config, router: router, counters: counters,
                                        logger: Logger(label: "transport-test"), blockingPool: nil)
        onLoop { [self] in
            io = FakeIO(loop: loop)
            io.onFlush = { [self] in scheduleDelivery() }
            io.onClose = { [self] in record { $0.closed = true } }
            conn = HTTP2Connection(tcp: io, env: env) { _ in }
            client = makeClient()
            nghttp2_submit_settings(client, UInt8(NGHTTP2_FLAG_NONE.rawValue), nil, 0)
            transmit()
        }
    }

    func shutDown() {
        onLoop { [self] in
            conn.close()
            nghttp2_session_del(client)
            client = nil
        }
        loop.stop()
        thread.join()
    }

    // MARK: test-thread API

    /// Runs `body` on the loop thread and waits for it.
    func onLoop<R>(_ body: @escaping () -> R) -> R {
        let box = ResultBox<R>(body)
        let done = DispatchSemaphore(value: 0)
        loop.execute { box.run(); done.signal() }
        done.wait()
        return box.result!
    }

    /// Waits until `condition` holds for what the client received; fails the test after 10 s.
    func wait(_ what: String, file: StaticString = #filePath, line: UInt = #line, until condition: (Events) -> Bool) {
        while !events.withLock({ condition($0) }) {
            if changed.wait(timeout: .now() + 10) == .timedOut {
                XCTFail("timed out waiting for \(what)", file: file, line: line)
                return
            }
        }
    }

    func received(_ id: Int32) -> Received { events.withLock { $0.streams[id] ?? Received() } }

    /// Opens a stream: HEADERS (POST, `path`, `contentType`, then `extra`), then `messages`
    /// framed in DATA; END_STREAM after them when `end`.
    @discardableResult
    func request(_ path: String, contentType: String = "application/grpc", extra: [(String, String)] = [],
                 messages: [[UInt8]] = [], end: Bool = true) -> Int32 {
        let headers = [(":method", "POST"), (":scheme", "http"), (":path", path), (":authority", "test"),
                       ("content-type", contentType), ("te", "trailers")] + extra
        let body = messages.flatMap(Self.frame)
        return onLoop { [self] in
            // A request's DATA goes with its HEADERS (the stream exists only once they are sent).
            let headersEnd = body.isEmpty && end
            var provider = Self.bodyProvider
            let id = withHeaderArray(headers) { nva, n in
                headersEnd ? nghttp2_submit_request(client, nil, nva, n, nil, nil)
                           : nghttp2_submit_request(client, nil, nva, n, &provider, nil)
            }
            precondition(id > 0, "nghttp2_submit_request failed: \(id)")
            if !headersEnd { bodies[id] = (body, 0, end) }
            transmit()
            return id
        }
    }

    /// Sends `messages` on an open stream, then END_STREAM when `end`.
    func send(_ id: Int32, messages: [[UInt8]] = [], end: Bool) {
        let body = messages.flatMap(Self.frame)
        onLoop { [self] in
            submitBody(id, body, end: end)
            transmit()
        }
    }

    func reset(_ id: Int32) {
        onLoop { [self] in
            nghttp2_submit_rst_stream(client, UInt8(NGHTTP2_FLAG_NONE.rawValue), id, NGHTTP2_CANCEL.rawValue)
            transmit()
        }
    }

    func beginGracefulShutdown() { onLoop { [self] in conn.beginGracefulShutdown() } }

    /// The peer closes its side (EOF on the socket).
    func peerCloses() { onLoop { [self] in conn.didReachEOF() } }

    static func frame(_ message: [UInt8]) -> [UInt8] {
        let n = UInt32(message.count)
        return [0, UInt8(n >> 24), UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF)] + message
    }

    // MARK: loop thread

    private func record(_ change: (inout Events) -> Void) {
        events.withLock { change(&$0) }
        changed.signal()
    }

    private func submitBody(_ id: Int32, _ body: [UInt8], end: Bool) {
        bodies[id] = (body, 0, end)
        var provider = Self.bodyProvider
        let rc = nghttp2_submit_data(client, UInt8(end ? NGHTTP2_FLAG_END_STREAM.rawValue : 0), id, &provider)
        precondition(rc == 0, "nghttp2_submit_data failed: \(rc)")
    }

    private static let bodyProvider: nghttp2_data_provider = {
        var provider = nghttp2_data_provider()
        provider.read_callback = { _, streamID, buf, length, flags, _, userData in
            Unmanaged<TransportHarness>.fromOpaque(userData!).takeUnretainedValue()
                .readBody(streamID, buf!, length, flags!)
        }
        return provider
    }()

    private func readBody(_ id: Int32, _ buf: UnsafeMutablePointer<UInt8>, _ length: Int,
                          _ flags: UnsafeMutablePointer<UInt32>) -> Int {
        guard var b = bodies[id] else { return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue) }
        let n = min(length, b.bytes.count - b.offset)
        b.bytes.withUnsafeBufferPointer { (buf).update(from: $0.baseAddress! + b.offset, count: n) }
        b.offset += n
        if b.offset == b.bytes.count {
            flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
            if !b.end { flags.pointee |= NGHTTP2_DATA_FLAG_NO_END_STREAM.rawValue }
            bodies[id] = nil
        } else {
            bodies[id] = b
        }
        return n
    }

    /// Client bytes into the server.
    private func transmit() {
        guard let client else { return }
        while true {
            var p: UnsafePointer<UInt8>?
            let n = nghttp2_session_mem_send(client, &p)
            guard n > 0 else { break }
            let bytes = [UInt8](UnsafeBufferPointer(start: p, count: n))
            bytes.withUnsafeBytes { conn.didRead($0) }
        }
    }

    /// Server bytes into the client, later in this loop turn's batch, as a socket would.
    private func scheduleDelivery() {
        guard !deliveryScheduled else { return }
        deliveryScheduled = true
        loop.execute { [self] in
            deliveryScheduled = false
            deliver()
        }
    }

    private func deliver() {
        guard let client, !io.pending.isEmpty else { return }
        let bytes = io.pending
        io.pending = []
        let rc = bytes.withUnsafeBufferPointer { nghttp2_session_mem_recv(client, $0.baseAddress!, $0.count) }
        precondition(rc >= 0, "the client rejected the server's bytes: \(rc)")
        conn.didDrainWrites()
        transmit()
        let fin = io.finSent
        record { $0.finSent = fin }
    }

    private func makeClient() -> OpaquePointer? {
        var callbacks: OpaquePointer?
        nghttp2_session_callbacks_new(&callbacks)
        defer { nghttp2_session_callbacks_del(callbacks) }
        nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks) { _, frame, userData in
            let h = Unmanaged<TransportHarness>.fromOpaque(userData!).takeUnretainedValue()
            h.events.withLock { $0.streams[frame!.pointee.hd.stream_id, default: Received()].headerBlocks.append([]) }
            return 0
        }
        nghttp2_session_callbacks_set_on_header_callback(callbacks) { _, frame, name, namelen, value, valuelen, _, userData in
            let h = Unmanaged<TransportHarness>.fromOpaque(userData!).takeUnretainedValue()
            let field = (String(decoding: UnsafeBufferPointer(start: name, count: namelen), as: UTF8.self),
                         String(decoding: UnsafeBufferPointer(start: value, count: valuelen), as: UTF8.self))
            h.events.withLock { e in
                let id = frame!.pointee.hd.stream_id
                e.streams[id, default: Received()].headerBlocks[e.streams[id]!.headerBlocks.count - 1].append(field)
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks) { _, _, id, data, len, userData in
            let h = Unmanaged<TransportHarness>.fromOpaque(userData!).takeUnretainedValue()
            h.events.withLock { $0.streams[id, default: Received()].data += UnsafeBufferPointer(start: data, count: len) }
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks) { _, frame, userData in
            let h = Unmanaged<TransportHarness>.fromOpaque(userData!).takeUnretainedValue()
            let f = frame!.pointee
            if UInt32(f.hd.type) == NGHTTP2_GOAWAY.rawValue {
                h.record { $0.goaways.append((f.goaway.last_stream_id, f.goaway.error_code)) }
            } else if UInt32(f.hd.type) == NGHTTP2_RST_STREAM.rawValue {
                h.record { $0.streams[f.hd.stream_id, default: Received()].resetWith = f.rst_stream.error_code }
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks) { _, id, errorCode, userData in
            let h = Unmanaged<TransportHarness>.fromOpaque(userData!).takeUnretainedValue()
            h.record { $0.streams[id, default: Received()].closedWith = errorCode }
            return 0
        }
        var session: OpaquePointer?
        let rc = nghttp2_session_client_new(&session, callbacks, Unmanaged.passUnretained(self).toOpaque())
        precondition(rc == 0, "nghttp2_session_client_new failed: \(rc)")
        return session
    }
}

/// Carries a loop-thread result back to the waiting test thread (the semaphore orders the two).
private final class ResultBox<R>: @unchecked Sendable {
    private let body: () -> R
    var result: R?
    init(_ body: @escaping () -> R) { self.body = body }
    func run() { result = body() }
}
