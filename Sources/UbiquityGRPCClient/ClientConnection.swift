#if canImport(Glibc)
import Glibc
#endif
import CNGHTTP2
import UbiquityGRPC
import UbiquityLoop

/// How a call ended, handed to its completion on the loop thread.
///
/// `response` points into the call's receive buffer and is valid only during the completion
/// callback: copy it (or decode it) there. Metadata is collected only for calls started with
/// `collectMetadata: true`; otherwise it is empty and costs nothing.
public struct ClientCallResult {
    /// The value passed to `startCall` (a load generator puts the start time here).
    public var tag: UInt64
    public var status: StatusCode
    /// `grpc-message`, percent-decoded ("" when absent).
    public var message: String
    /// Raw `grpc-status-details-bin` bytes (a serialized `google.rpc.Status`), if sent.
    public var details: [UInt8]?
    /// The first response message (without its 5-byte prefix), unless messages went to `onMessage`.
    public var response: UnsafeRawBufferPointer?
    /// Response messages received.
    public var responseCount: Int
    public var initialMetadata: Metadata
    public var trailingMetadata: Metadata
}

/// One call in flight. Pooled per connection and reused, so a call costs no allocation of ours
/// once the pool is warm. Loop thread only.
// @exclusivity(unchecked) on every field: a ClientStream is touched only on its connection's loop
// thread and never through overlapping accesses (nghttp2 callbacks and completions do not re-enter
// while a field is being modified). Measured: without them the generator runs 15.5k instead of
// 14.7k instructions per call (+5%)
// (callgrind, release, ubiquity-load -c 4 -m 16 Admin.Ping, 25k − 5k calls, 2026-11-25).
final class ClientStream {
    @exclusivity(unchecked) var streamID: Int32 = 0
    @exclusivity(unchecked) var request: PreparedRequest?
    @exclusivity(unchecked) var bodyOffset = 0
    @exclusivity(unchecked) var tag: UInt64 = 0
    @exclusivity(unchecked) var onComplete: ((ClientCallResult) -> Void)?
    @exclusivity(unchecked) var onMessage: ((UnsafeRawBufferPointer) -> Void)?
    @exclusivity(unchecked) var collectMetadata = false
    @exclusivity(unchecked) var httpStatus = 0
    @exclusivity(unchecked) var sawContentType = false
    @exclusivity(unchecked) var grpcContentType = false
    @exclusivity(unchecked) var grpcStatus = -1
    @exclusivity(unchecked) var grpcMessage = ""
    @exclusivity(unchecked) var details: [UInt8]?
    @exclusivity(unchecked) var initialMetadata = Metadata()
    @exclusivity(unchecked) var trailingMetadata = Metadata()
    @exclusivity(unchecked) var receivedHeaders = false
    @exclusivity(unchecked) var inbound = ByteBuffer()
    @exclusivity(unchecked) var responseCount = 0
    /// Set when we ended the call ourselves (cancel, deadline, limit): it wins over what follows.
    @exclusivity(unchecked) var localStatus: (StatusCode, String)?
    @exclusivity(unchecked) var timer: LoopTimer?
    /// Index in the connection's `active` array, -1 when not active.
    @exclusivity(unchecked) var activeIndex = -1

    // `inbound` owns hand-allocated memory (ByteBuffer copies alias it; this stream is its one
    // owner): without this every stream leaked its largest response buffer (LeakSanitizer).
    deinit { inbound.deallocate() }

    func reset() {
        streamID = 0
        request = nil
        bodyOffset = 0
        onComplete = nil
        onMessage = nil
        collectMetadata = false
        httpStatus = 0
        sawContentType = false
        grpcContentType = false
        grpcStatus = -1
        if !grpcMessage.isEmpty { grpcMessage = "" }
        details = nil
        if !initialMetadata.isEmpty { initialMetadata = Metadata() }
        if !trailingMetadata.isEmpty { trailingMetadata = Metadata() }
        receivedHeaders = false
        inbound.removeAll()
        responseCount = 0
        localStatus = nil
        timer?.close()
        timer = nil
        activeIndex = -1
    }
}

/// Options of a client connection.
public struct ClientConnectionOptions: Sendable {
    /// SETTINGS_INITIAL_WINDOW_SIZE we advertise (per stream receive window).
    public var initialWindowSize = 1 << 20
    /// Connection-level receive window.
    public var connectionWindowSize = 16 << 20
    /// Largest response message accepted; larger ones end the call with RESOURCE_EXHAUSTED.
    public var maxReceiveMessageBytes = 4 << 20
    /// Stop pulling frames from nghttp2 past this many bytes queued for the socket.
    public var maxWriteQueueBytes = 1 << 20
    /// How long `connect` waits for the server's first SETTINGS frame.
    public var settingsTimeoutMilliseconds: UInt64 = 10_000
    /// Speak TLS (ALPN h2; the server's certificate must name the host) instead of h2c.
    public var tls: TLSContext?
    public init() {}
}

/// One HTTP/2 connection of a gRPC client: an nghttp2 *client* session over a `TCPConnection`,
/// driven exactly like the server side (`mem_recv` on read, `mem_send` into one batched write).
///
/// This is the cheap layer: a call is a `PreparedRequest` (headers and framed message built
/// once), a tag, and a completion closure that runs on the loop thread. No Task, no per-call
/// allocation of ours (streams are pooled; nghttp2 allocates its own stream state).
///
/// Threading: created, used and released on its loop's thread only (docs/threading.md rule 1).
/// nghttp2 is never re-entered: callbacks only record state; completions run after `mem_recv`
/// returns (so a completion may start the next call), and frames go out once per batch.
public final class ClientConnection {
    public let loop: EventLoop
    public let authority: String
    let tcp: TCPConnection
    /// Between nghttp2 and `tcp` when the connection speaks TLS (docs/tls.md); nil for h2c,
    /// which then pays one nil check per flush, not a protocol witness per call.
    private let tls: TLSConnection?
    private let options: ClientConnectionOptions
    // @exclusivity(unchecked) here and on the flags below: loop-thread only and never accessed
    // through overlapping accesses (no callback re-enters while it is being modified). Measured:
    // without them the generator runs 16.6k instead of 14.7k instructions per call (+12%)
    // (callgrind, release, ubiquity-load -c 4 -m 16 Admin.Ping, 25k − 5k calls, 2026-11-25).
    @exclusivity(unchecked) private var session: OpaquePointer?
    @exclusivity(unchecked) private var pool: [ClientStream] = []
    @exclusivity(unchecked) private var active: [ClientStream] = []
    /// `active[i].streamID`, kept beside it so a lookup scans plain integers: at most
    /// max-concurrent-streams entries, usually a handful, which beats hashing the id (nghttp2's
    /// stream map) for each of the ~8 callbacks of a call. Same invariant as `active`.
    @exclusivity(unchecked) private var activeIDs: [Int32] = []
    /// The stream the last lookup found: a stream's callbacks (headers, DATA, trailers, close)
    /// come in a run. Cleared when it leaves `active`. Same invariant as `active`.
    @exclusivity(unchecked) private var lastStream: ClientStream?
    @exclusivity(unchecked) private var completed: [ClientStream] = []
    /// True while inside `mem_recv` or while running completions: `startCall` then leaves the
    /// flush to the end of the batch.
    @exclusivity(unchecked) private var batching = false
    @exclusivity(unchecked) private var flushScheduled = false
    @exclusivity(unchecked) private var inRecv = false
    @exclusivity(unchecked) private var closeRequested = false
    @exclusivity(unchecked) private var closing = false
    @exclusivity(unchecked) public private(set) var isClosed = false
    /// The peer sent GOAWAY: no new calls on this connection.
    @exclusivity(unchecked) public private(set) var receivedGoAway = false
    /// Why TLS ended the connection (OpenSSL's reason), for the calls' and `connect`'s errors.
    fileprivate var tlsRefusal: String?
    /// Called once when the connection is closed (by either side), after pending calls failed.
    public var onClose: ((UVError?) -> Void)?

    /// Calls in flight.
    public var activeCalls: Int { active.count }
    /// Whether new calls can start here.
    public var isUsable: Bool { !isClosed && !closing && !receivedGoAway }

    /// Connects to `host:port` on `loop` and sends the HTTP/2 preface and SETTINGS. Call on the
    /// loop thread; `completion` runs there.
    public static func connect(loop: EventLoop, host: String, port: Int, options: ClientConnectionOptions = ClientConnectionOptions(),
                               _ completion: @escaping (Result<ClientConnection, RPCError>) -> Void) {
        TCPConnection.connect(loop: loop, host: host, port: port) { result in
            switch result {
            case .success(let tcp):
                let authority = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]:\(port)" : "\(host):\(port)"
                var tls: TLSConnection?
                if let context = options.tls {
                    do {
                        tls = try TLSConnection(connectedTCP: tcp, context: context, host: host)
                    } catch {
                        tcp.close()
                        completion(.failure(RPCError(.unavailable, "cannot start TLS to \(host):\(port): \(error)")))
                        return
                    }
                }
                let connection = ClientConnection(tcp: tcp, tls: tls, authority: authority, options: options)
                connection.awaitSettings(completion)
            case .failure(let error):
                completion(.failure(RPCError(.unavailable, "cannot connect to \(host):\(port): \(error)")))
            }
        }
    }

    init(tcp: TCPConnection, tls: TLSConnection? = nil, authority: String, options: ClientConnectionOptions) {
        self.tcp = tcp
        self.tls = tls
        self.loop = tcp.loop
        self.authority = authority
        self.options = options
        pool.reserveCapacity(64)
        active.reserveCapacity(64)
        activeIDs.reserveCapacity(64)
        completed.reserveCapacity(64)
        if let tls { tls.owner = ConnectionDelegate(self) } else { tcp.delegate = ConnectionDelegate(self) }
        session = Self.makeSession(self)
        var settings = [
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_ENABLE_PUSH.rawValue), value: 0),
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE.rawValue), value: UInt32(options.initialWindowSize)),
        ]
        nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &settings, settings.count)
        nghttp2_session_set_local_window_size(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), 0, Int32(options.connectionWindowSize))
        tcp.startReading()
        flush()
    }

    // MARK: readiness

    private var onReady: ((Result<ClientConnection, RPCError>) -> Void)?
    private var readyTimer: LoopTimer?
    private var sawSettings = false
    private var readyPending = false

    /// Reports the connection ready once the server's first SETTINGS frame arrived (as gRPC core
    /// does): before it, the server's SETTINGS_MAX_CONCURRENT_STREAMS is unknown and a burst of
    /// calls would be refused.
    private func awaitSettings(_ completion: @escaping (Result<ClientConnection, RPCError>) -> Void) {
        onReady = completion
        let timer = LoopTimer(loop: loop)
        readyTimer = timer
        timer.start(milliseconds: options.settingsTimeoutMilliseconds) { [self] in
            self.finishReady(RPCError(.unavailable, "no HTTP/2 SETTINGS from the server within \(self.options.settingsTimeoutMilliseconds) ms"))
        }
    }

    private func finishReady(_ error: RPCError?) {
        guard let ready = onReady else { return }
        onReady = nil
        readyTimer?.close()
        readyTimer = nil
        if let error {
            closeNow(nil)
            ready(.failure(error))
        } else {
            ready(.success(self))
        }
    }

    // MARK: calls

    /// Starts a call. `completion` runs exactly once, on the loop thread, after the call ended
    /// (also when it could not start: then with UNAVAILABLE, on a later loop turn).
    /// `onMessage`, if given, receives each response message as it arrives (server streaming);
    /// then `ClientCallResult.response` is nil. Returns the stream ID (for `cancel`), or 0.
    @discardableResult
    public func startCall(_ request: PreparedRequest, tag: UInt64 = 0, collectMetadata: Bool = false,
                          onMessage: ((UnsafeRawBufferPointer) -> Void)? = nil,
                          completion: @escaping (ClientCallResult) -> Void) -> Int32 {
        loop.assertInEventLoop()
        let stream = pool.popLast() ?? ClientStream()
        stream.request = request
        stream.tag = tag
        stream.onComplete = completion
        stream.onMessage = onMessage
        stream.collectMetadata = collectMetadata
        guard let session, isUsable else {
            fail(stream, .unavailable, isClosed || closing ? "the connection is closed" : "the server is going away (GOAWAY)")
            return 0
        }
        var provider = nghttp2_data_provider()
        provider.source.ptr = Unmanaged.passUnretained(stream).toOpaque()
        provider.read_callback = Self.readBody
        let id = nghttp2_submit_request(session, nil, request.nva, request.nvCount, &provider,
                                        Unmanaged.passUnretained(stream).toOpaque())
        if id < 0 {
            fail(stream, .unavailable, "cannot start a stream: \(String(cString: nghttp2_strerror(id)))")
            return 0
        }
        stream.streamID = id
        stream.activeIndex = active.count
        active.append(stream)
        activeIDs.append(id)
        if request.timeoutMilliseconds > 0 {
            let timer = LoopTimer(loop: loop)
            stream.timer = timer
            // Strong capture of self: the timer drops its closure when the stream ends (reset()).
            timer.start(milliseconds: request.timeoutMilliseconds) { [self] in
                self.endLocally(stream, id, .deadlineExceeded, "deadline exceeded (client)")
            }
        }
        if !batching { flush() }
        return id
    }

    /// Cancels a call in flight: RST_STREAM(CANCEL); its completion runs with CANCELLED.
    public func cancel(streamID: Int32) {
        loop.assertInEventLoop()
        // A linear search, not nghttp2's stream user data: a request still queued behind
        // SETTINGS_MAX_CONCURRENT_STREAMS has no nghttp2 stream yet (RST_STREAM cancels it there).
        guard streamID > 0, let stream = activeStream(streamID) else { return }
        endLocally(stream, streamID, .cancelled, "the call was cancelled by the client")
    }

    private func endLocally(_ stream: ClientStream, _ id: Int32, _ code: StatusCode, _ message: String) {
        guard stream.streamID == id, stream.activeIndex >= 0, stream.localStatus == nil, let session else { return }
        stream.localStatus = (code, message)
        stream.timer?.close()
        stream.timer = nil
        nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), id, NGHTTP2_CANCEL.rawValue)
        if !batching { flush() }
    }

    /// Completes a call that never got a stream, on a later loop turn (never inside the caller).
    private func fail(_ stream: ClientStream, _ code: StatusCode, _ message: String) {
        stream.localStatus = (code, message)
        completed.append(stream)
        scheduleFlush()
    }

    private func scheduleFlush() {
        guard !flushScheduled, !batching else { return }
        flushScheduled = true
        let me = LoopBound(self, loop: loop)
        loop.execute {
            let c = me.get
            c.flushScheduled = false
            c.flush()
        }
    }

    // MARK: connection lifecycle

    /// Sends GOAWAY (best effort: one write attempt) and closes now. Calls in flight end with
    /// UNAVAILABLE before this returns.
    public func close() {
        loop.assertInEventLoop()
        guard !isClosed else { return }
        if inRecv {
            // Called from a callback inside mem_recv: nghttp2 must not be deleted under itself.
            closeRequested = true
            return
        }
        if let session, !closing {
            nghttp2_session_terminate_session(session, NGHTTP2_NO_ERROR.rawValue)
            _ = pump(session)
        }
        closeNow(nil)
    }

    private func closeNow(_ error: UVError?) {
        guard !isClosed else { return }
        isClosed = true
        closing = true
        for stream in active where stream.localStatus == nil {
            stream.localStatus = (.unavailable, error.map { "the connection closed: \($0)" }
                                  ?? tlsRefusal.map { "the connection closed: TLS: \($0)" } ?? "the connection closed")
        }
        completed.append(contentsOf: active)
        for stream in active { stream.activeIndex = -1 }
        active.removeAll()
        activeIDs.removeAll()
        lastStream = nil
        if let session { nghttp2_session_del(session) }
        session = nil
        if let tls { tls.close() } else { tcp.close() }
        runCompletions()
        finishReady(RPCError(.unavailable, "the connection closed before the server's HTTP/2 SETTINGS arrived"
                                 + (tlsRefusal.map { " (TLS: \($0))" } ?? "")))
        let cb = onClose
        onClose = nil
        cb?(error)
    }

    // MARK: I/O

    fileprivate func didRead(_ bytes: UnsafeRawBufferPointer) {
        guard let session, !isClosed else { return }
        batching = true
        inRecv = true
        let rc = nghttp2_session_mem_recv(session, bytes.baseAddress!.assumingMemoryBound(to: UInt8.self), bytes.count)
        inRecv = false
        batching = false
        if rc < 0 {
            closeNow(nil)
            return
        }
        if closeRequested {
            close()
            return
        }
        if readyPending {
            // Outside mem_recv: the completion may start calls right away.
            readyPending = false
            finishReady(nil)
        }
        flush()
    }

    fileprivate func didReachEOF(_ error: UVError?) {
        closeNow(error)
    }

    fileprivate func didDrainWrites() {
        if closing {
            if queuedWriteBytes == 0 { closeNow(nil) }
            return
        }
        flush()
    }

    /// Runs finished calls' completions (which may start calls), then pulls frames into one write.
    public func flush() {
        runCompletions()
        guard let session, !isClosed else { return }
        if !pump(session) {
            closeNow(nil)
            return
        }
        if !closing, nghttp2_session_want_read(session) == 0, nghttp2_session_want_write(session) == 0 {
            // GOAWAY received and every stream done, or the session ended: nothing more to do.
            closing = true
            if queuedWriteBytes == 0 { closeNow(nil) }
        }
    }

    private var queuedWriteBytes: Int { tls?.queuedWriteBytes ?? tcp.queuedWriteBytes }

    private func pump(_ session: OpaquePointer) -> Bool {
        if let tls { return NGHTTP2Glue.pump(session, into: tls, limit: options.maxWriteQueueBytes) }
        return NGHTTP2Glue.pump(session, into: tcp, limit: options.maxWriteQueueBytes)
    }

    private func runCompletions() {
        // Completions may start calls (whose failures append here) or close the connection
        // (which runs this again): work on a batch swapped out, until nothing is left.
        while !completed.isEmpty {
            var batch: [ClientStream] = []
            swap(&batch, &completed)
            let wasBatching = batching
            batching = true
            for stream in batch { complete(stream) }
            batching = wasBatching
            batch.removeAll(keepingCapacity: true)
            if completed.isEmpty { swap(&batch, &completed) }
        }
    }

    private func complete(_ stream: ClientStream) {
        var status: StatusCode
        var message = ""
        if let (code, text) = stream.localStatus {
            status = code
            message = text
        } else if stream.httpStatus != 200 && stream.receivedHeaders {
            status = Self.statusForHTTP(stream.httpStatus)
            message = "HTTP status \(stream.httpStatus)"
        } else if stream.receivedHeaders && !stream.grpcContentType {
            status = .unknown
            message = "the response content-type is not application/grpc"
        } else if stream.grpcStatus >= 0 {
            status = StatusCode(rawValue: stream.grpcStatus)
            message = stream.grpcMessage
        } else if stream.grpcStatus == -2 {
            status = .internal
            message = "malformed grpc-status in the response"
        } else {
            status = .internal
            message = "the server ended the stream without grpc-status"
        }
        var response: UnsafeRawBufferPointer?
        if stream.onMessage == nil, stream.inbound.count >= 5 {
            let p = stream.inbound.base!.assumingMemoryBound(to: UInt8.self)
            let length = NGHTTP2Glue.messageLength(p)
            if stream.inbound.count >= 5 + length {
                response = UnsafeRawBufferPointer(start: p + 5, count: length)
            }
        }
        if status == .ok, stream.onMessage == nil, stream.inbound.count > 0, response == nil {
            status = .internal
            message = "the response ended inside a message"
        }
        let result = ClientCallResult(tag: stream.tag, status: status, message: message, details: stream.details,
                                      response: response, responseCount: stream.responseCount,
                                      initialMetadata: stream.initialMetadata, trailingMetadata: stream.trailingMetadata)
        let completion = stream.onComplete
        completion?(result)
        stream.reset()
        pool.append(stream)
    }

    /// HTTP status → gRPC status when the server did not answer with gRPC (gRPC's http-grpc-status-mapping).
    static func statusForHTTP(_ http: Int) -> StatusCode {
        switch http {
        case 400: return .internal
        case 401: return .unauthenticated
        case 403: return .permissionDenied
        case 404: return .unimplemented
        case 429, 502, 503, 504: return .unavailable
        default: return .unknown
        }
    }

    // MARK: nghttp2 callbacks (record state only)

    private static let readBody: nghttp2_data_source_read_callback = { _, _, buf, length, flags, source, _ in
        let stream = Unmanaged<ClientStream>.fromOpaque(source!.pointee.ptr!).takeUnretainedValue()
        guard let request = stream.request else {
            flags!.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
            return 0
        }
        let n = min(length, request.bodyCount - stream.bodyOffset)
        if n > 0 { buf!.update(from: request.body + stream.bodyOffset, count: n) }
        stream.bodyOffset += n
        if stream.bodyOffset == request.bodyCount { flags!.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue }
        return n
    }

    /// The call in flight on stream `id` (nil once it completed).
    private func stream(_ id: Int32) -> ClientStream? {
        if let s = lastStream, s.streamID == id { return s }
        let s = activeStream(id)
        if s != nil { lastStream = s }
        return s
    }

    private func activeStream(_ id: Int32) -> ClientStream? {
        activeIDs.withUnsafeBufferPointer { ids in
            for i in 0..<ids.count where ids[i] == id { return active[i] }
            return nil
        }
    }

    private func header(_ frame: UnsafePointer<nghttp2_frame>, name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) {
        guard let stream = stream(frame.pointee.hd.stream_id) else { return }
        let trailers = frame.pointee.headers.cat == NGHTTP2_HCAT_HEADERS
        if name.count > 0 && name[0] == UInt8(ascii: ":") {
            if !trailers && bytesEqual(name, ":status") { stream.httpStatus = parseInt(value) }
            return
        }
        if bytesEqual(name, "grpc-status") {
            stream.grpcStatus = parseInt(value)
        } else if bytesEqual(name, "grpc-message") {
            stream.grpcMessage = PercentEncoding.decode(String(decoding: value, as: UTF8.self))
        } else if bytesEqual(name, "grpc-status-details-bin") {
            stream.details = Base64.decode(String(decoding: value, as: UTF8.self))
        } else if !trailers && bytesEqual(name, "content-type") {
            stream.sawContentType = true
            stream.grpcContentType = value.count >= 16 && bytesEqual(UnsafeBufferPointer(rebasing: value[0..<16]), "application/grpc")
                && (value.count == 16 || value[16] == UInt8(ascii: "+") || value[16] == UInt8(ascii: ";"))
        } else if stream.collectMetadata {
            let key = String(decoding: name, as: UTF8.self)
            let text = String(decoding: value, as: UTF8.self)
            let entry: Metadata.Value
            if key.hasSuffix("-bin") {
                entry = .binary(Base64.decode(text) ?? [])
            } else {
                entry = .string(text)
            }
            if trailers { stream.trailingMetadata.add(key, entry) } else { stream.initialMetadata.add(key, entry) }
        }
    }

    private func frameReceived(_ frame: UnsafePointer<nghttp2_frame>) {
        let hd = frame.pointee.hd
        switch UInt32(hd.type) {
        case NGHTTP2_HEADERS.rawValue:
            guard let stream = stream(hd.stream_id) else { return }
            if frame.pointee.headers.cat == NGHTTP2_HCAT_RESPONSE { stream.receivedHeaders = true }
        case NGHTTP2_GOAWAY.rawValue:
            receivedGoAway = true
        case NGHTTP2_SETTINGS.rawValue:
            if hd.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) == 0 && !sawSettings {
                sawSettings = true
                readyPending = onReady != nil
            }
        default:
            break
        }
    }

    private func dataChunk(_ streamID: Int32, _ data: UnsafeBufferPointer<UInt8>) {
        guard let stream = stream(streamID), stream.localStatus == nil, let session else { return }
        stream.inbound.append(UnsafeRawBufferPointer(data))
        // Deframe: count messages, hand them to onMessage, enforce the size limit.
        var offset = stream.onMessage == nil ? skipDelivered(stream) : 0
        while stream.inbound.count - offset >= 5 {
            let p = stream.inbound.base!.assumingMemoryBound(to: UInt8.self) + offset
            let length = NGHTTP2Glue.messageLength(p)
            if p[0] != 0 {
                stream.localStatus = (.internal, "compressed response but no compression was negotiated")
                nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), streamID, NGHTTP2_CANCEL.rawValue)
                return
            }
            if length > options.maxReceiveMessageBytes {
                stream.localStatus = (.resourceExhausted, "response message of \(length) bytes exceeds the limit of \(options.maxReceiveMessageBytes) bytes")
                nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), streamID, NGHTTP2_CANCEL.rawValue)
                return
            }
            guard stream.inbound.count - offset >= 5 + length else { break }
            stream.responseCount += 1
            if let onMessage = stream.onMessage {
                onMessage(UnsafeRawBufferPointer(start: p + 5, count: length))
            }
            offset += 5 + length
        }
        if stream.onMessage != nil, offset > 0 { stream.inbound.removeFirst(offset) }
    }

    /// For calls without onMessage the first message stays at the front of `inbound` (it is the
    /// response); later bytes are scanned from after the messages already counted.
    private func skipDelivered(_ stream: ClientStream) -> Int {
        guard stream.responseCount > 0 else { return 0 }
        // Walk the messages already counted.
        var offset = 0
        var seen = 0
        let base = stream.inbound.base!.assumingMemoryBound(to: UInt8.self)
        while seen < stream.responseCount {
            offset += 5 + NGHTTP2Glue.messageLength(base + offset)
            seen += 1
        }
        return offset
    }

    /// A request HEADERS frame that nghttp2 dropped before sending (GOAWAY arrived while it waited
    /// behind SETTINGS_MAX_CONCURRENT_STREAMS): its stream never opened, so no stream-close callback
    /// follows. End the call here.
    private func frameNotSent(_ frame: UnsafePointer<nghttp2_frame>, errorCode: Int32) {
        guard UInt32(frame.pointee.hd.type) == NGHTTP2_HEADERS.rawValue,
              let stream = activeStream(frame.pointee.hd.stream_id) else { return }
        if stream.localStatus == nil {
            stream.localStatus = (.unavailable, "the request was not sent: \(String(cString: nghttp2_strerror(errorCode)))")
        }
        finishStream(stream)
    }

    private func streamClosed(_ streamID: Int32, errorCode: UInt32) {
        guard let stream = stream(streamID) else { return }
        finishStream(stream, errorCode: errorCode)
    }

    /// Takes a call out of `active` and queues its completion (run after mem_recv returns).
    private func finishStream(_ stream: ClientStream, errorCode: UInt32 = NGHTTP2_NO_ERROR.rawValue) {
        guard stream.activeIndex >= 0 else { return }
        let i = stream.activeIndex
        let last = active.removeLast()
        let lastID = activeIDs.removeLast()
        if last !== stream {
            active[i] = last
            activeIDs[i] = lastID
            last.activeIndex = i
        }
        stream.activeIndex = -1
        if lastStream === stream { lastStream = nil }
        if stream.localStatus == nil && stream.grpcStatus < 0 && errorCode != NGHTTP2_NO_ERROR.rawValue {
            switch errorCode {
            case NGHTTP2_REFUSED_STREAM.rawValue:
                stream.localStatus = (.unavailable, "the server refused the stream (REFUSED_STREAM)")
            case NGHTTP2_CANCEL.rawValue:
                stream.localStatus = (.cancelled, "the server cancelled the stream")
            case NGHTTP2_ENHANCE_YOUR_CALM.rawValue:
                stream.localStatus = (.resourceExhausted, "the server reset the stream (ENHANCE_YOUR_CALM)")
            default:
                stream.localStatus = (.internal, "the stream was reset (HTTP/2 error \(errorCode))")
            }
        }
        completed.append(stream)
    }

    private static func makeSession(_ conn: ClientConnection) -> OpaquePointer? {
        var callbacks: OpaquePointer?
        nghttp2_session_callbacks_new(&callbacks)
        defer { nghttp2_session_callbacks_del(callbacks) }
        nghttp2_session_callbacks_set_on_header_callback(callbacks) { _, frame, name, namelen, value, valuelen, _, userData in
            let c = Unmanaged<ClientConnection>.fromOpaque(userData!).takeUnretainedValue()
            c.header(frame!, name: UnsafeBufferPointer(start: name, count: namelen),
                     value: UnsafeBufferPointer(start: value, count: valuelen))
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks) { _, frame, userData in
            let c = Unmanaged<ClientConnection>.fromOpaque(userData!).takeUnretainedValue()
            c.frameReceived(frame!)
            return 0
        }
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks) { _, _, streamID, data, len, userData in
            let c = Unmanaged<ClientConnection>.fromOpaque(userData!).takeUnretainedValue()
            c.dataChunk(streamID, UnsafeBufferPointer(start: data, count: len))
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_not_send_callback(callbacks) { _, frame, errorCode, userData in
            let c = Unmanaged<ClientConnection>.fromOpaque(userData!).takeUnretainedValue()
            c.frameNotSent(frame!, errorCode: errorCode)
            return 0
        }
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks) { _, streamID, errorCode, userData in
            let c = Unmanaged<ClientConnection>.fromOpaque(userData!).takeUnretainedValue()
            c.streamClosed(streamID, errorCode: errorCode)
            return 0
        }
        var option: OpaquePointer?
        nghttp2_option_new(&option)
        defer { nghttp2_option_del(option) }
        nghttp2_option_set_max_send_header_block_length(option, 64 * 1024)
        // Until the server's SETTINGS say otherwise, assume the common limit of 100 streams.
        nghttp2_option_set_peer_max_concurrent_streams(option, 100)
        var session: OpaquePointer?
        let rc = nghttp2_session_client_new2(&session, callbacks, Unmanaged.passUnretained(conn).toOpaque(), option)
        precondition(rc == 0, "nghttp2_session_client_new2 failed: \(rc)")
        return session
    }
}

/// The TCP (or TLS) delegate. A separate object so `ClientConnection` need not expose the
/// protocols; it holds the connection strongly until the handle closes (the cycle ends in
/// `connectionDidClose` / `tlsDidClose`).
private final class ConnectionDelegate: TCPConnectionDelegate, TLSConnectionOwner {
    var owner: ClientConnection?
    init(_ owner: ClientConnection) { self.owner = owner }
    func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) { owner?.didRead(bytes) }
    func connectionDidReachEOF(_ connection: TCPConnection, error: UVError?) { owner?.didReachEOF(error) }
    func connectionDidDrainWrites(_ connection: TCPConnection) { owner?.didDrainWrites() }
    func connectionDidClose(_ connection: TCPConnection) { owner = nil }
    func tlsDidRead(_ bytes: UnsafeRawBufferPointer) { owner?.didRead(bytes) }
    func tlsDidReachEOF(refusal: String?) {
        if let refusal { owner?.tlsRefusal = refusal }
        owner?.didReachEOF(nil)
    }
    func tlsDidDrainWrites() { owner?.didDrainWrites() }
    func tlsDidClose() { owner = nil }
}

func bytesEqual(_ a: UnsafeBufferPointer<UInt8>, _ b: StaticString) -> Bool { NGHTTP2Glue.equal(a, b) }

func parseInt(_ v: UnsafeBufferPointer<UInt8>) -> Int {
    var n = 0
    for b in v {
        guard b >= 48, b <= 57, n < 1_000_000 else { return -2 }
        n = n * 10 + Int(b - 48)
    }
    return v.isEmpty ? -2 : n
}
