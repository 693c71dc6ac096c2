import CNGHTTP2
import Logging
import UbiquityLoop

/// Per-stream state, owned by its connection (loop thread only).
// @exclusivity(unchecked) on every field: a StreamState is touched only on its loop thread and
// never through overlapping accesses (callbacks do not re-enter while a field is being modified);
// the dynamic checks were ~800 instructions per call (callgrind).
final class StreamState {
    /// Set when the object is taken for a stream; a connection reuses its StreamState objects
    /// (`HTTP2Connection.spareStreams`), never across connections.
    @exclusivity(unchecked) var id: Int32
    @exclusivity(unchecked) var method = ""
    @exclusivity(unchecked) var path = ""
    @exclusivity(unchecked) var contentType = ""
    @exclusivity(unchecked) var encoding: String?
    @exclusivity(unchecked) var timeout: String?
    @exclusivity(unchecked) var metadata = Metadata()
    @exclusivity(unchecked) var headerBytes = 0
    @exclusivity(unchecked) var headerOverflow = false
    @exclusivity(unchecked) var badMetadata: String?
    @exclusivity(unchecked) var deframer = ByteBuffer()
    @exclusivity(unchecked) var descriptor: MethodDescriptor?
    @exclusivity(unchecked) var call: ServerCall?
    @exclusivity(unchecked) var messages = 0
    @exclusivity(unchecked) var handlerStarted = false
    /// We answered without a call (an error): further request data is discarded.
    @exclusivity(unchecked) var rejected = false
    @exclusivity(unchecked) var responseStarted = false
    @exclusivity(unchecked) var responseEnded = false
    @exclusivity(unchecked) var dataDeferred = false
    @exclusivity(unchecked) var timer: LoopTimer?
    /// Synchronous (`.inline` / `.blocking`) unary calls have no `ServerCall`: the request, the
    /// deadline, the reply and its status live here, on the loop thread.
    @exclusivity(unchecked) var deadline: ContinuousClock.Instant?
    @exclusivity(unchecked) var request: [UInt8] = []
    @exclusivity(unchecked) var reply: [UInt8] = []
    /// Bytes of the framed reply (5-byte prefix + `reply`) already handed to nghttp2.
    @exclusivity(unchecked) var replyRead = 0
    @exclusivity(unchecked) var replyStatus: RPCError?
    /// A `.blocking` call handed to a worker and not yet answered.
    @exclusivity(unchecked) var blocking: BlockingJob?
    /// When request bytes last arrived (its HEADERS, then each DATA chunk), loop milliseconds:
    /// a request that stops arriving before it is complete is failed (`failStalledRequests`).
    /// Unchecked like every field here (the class comment: loop thread only, the checks cost
    /// ~800 instructions a call); written once per HEADERS and once per DATA chunk.
    @exclusivity(unchecked) var lastInput: UInt64 = 0

    init(id: Int32) { self.id = id }

    func release() {
        timer?.close()
        timer = nil
        deframer.deallocate()
    }

    /// Whether this object may serve another stream once its stream closed: not while a
    /// `.blocking` job may still post its result to it (`blocking` is cleared only when the
    /// result arrived, in `blockingFinished`), so a recycled object never receives a stale result.
    var reusable: Bool { blocking == nil }

    /// Makes a closed stream's object fresh for stream `newID`, keeping buffer capacity (the
    /// metadata array and a small deframer) so the next call allocates nothing for them.
    func recycle(_ newID: Int32) {
        id = newID
        method = ""
        path = ""
        contentType = ""
        encoding = nil
        timeout = nil
        metadata.removeAllKeepingCapacity()
        headerBytes = 0
        headerOverflow = false
        badMetadata = nil
        if deframer.capacity > 64 * 1024 { deframer.deallocate() } else { deframer.removeAll() }
        descriptor = nil
        call = nil
        messages = 0
        handlerStarted = false
        rejected = false
        responseStarted = false
        responseEnded = false
        dataDeferred = false
        deadline = nil
        request = []
        reply = []
        replyRead = 0
        replyStatus = nil
    }
}

/// A connection's open streams. At most SETTINGS_MAX_CONCURRENT_STREAMS (plus a few nghttp2 has
/// not closed yet), usually a handful: a linear scan of the ids beats hashing each lookup
/// (SipHash was ~5 hashes and ~800 instructions per call). Loop thread only, like its owner.
struct StreamTable {
    private var ids: [Int32] = []
    private(set) var all: [StreamState] = []

    var isEmpty: Bool { ids.isEmpty }

    func find(_ id: Int32) -> StreamState? {
        ids.withUnsafeBufferPointer { p in
            for i in 0..<p.count where p[i] == id { return all[i] }
            return nil
        }
    }

    mutating func insert(_ stream: StreamState) {
        ids.append(stream.id)
        all.append(stream)
    }

    /// Removes and returns the stream (order is not kept: the last one takes its slot).
    mutating func remove(_ id: Int32) -> StreamState? {
        guard let i = ids.firstIndex(of: id) else { return nil }
        let s = all[i]
        let last = ids.count - 1
        if i != last {
            ids[i] = ids[last]
            all[i] = all[last]
        }
        ids.removeLast()
        all.removeLast()
        return s
    }

    mutating func removeAll() {
        ids.removeAll()
        all.removeAll()
    }
}

/// Shared by all connections of a server: configuration, routes, counters, logger.
final class ConnectionEnvironment: Sendable {
    let configuration: ServerConfiguration
    let router: Router
    let counters: ServerCounters
    let logger: Logger
    /// Workers for `.blocking` handlers; nil when the router has none.
    let blockingPool: BlockingPool?
    init(configuration: ServerConfiguration, router: Router, counters: ServerCounters, logger: Logger,
         blockingPool: BlockingPool? = nil) {
        self.configuration = configuration
        self.router = router
        self.counters = counters
        self.logger = logger
        self.blockingPool = blockingPool
    }
}

/// One HTTP/2 connection: an nghttp2 server session over a TCP connection (loop thread only).
///
/// Input: bytes read → `nghttp2_session_mem_recv` → callbacks build streams and calls.
/// Output: `nghttp2_session_mem_send` → the connection's write batch, one write in flight; past
/// `maxWriteQueueBytes` we stop pulling frames from nghttp2 and stop reading the socket until the
/// kernel takes the bytes. nghttp2 is never re-entered from its own callbacks.
final class HTTP2Connection: TCPConnectionDelegate, CallOwner {
    let tcp: TCPConnection
    let env: ConnectionEnvironment
    private var session: OpaquePointer?
    // @exclusivity(unchecked): loop-thread only and never accessed through overlapping accesses
    // (no callback re-enters while it is being modified); the dynamic check was a measurable
    // share of every call (docs/benchmarks.md, "Where the time goes").
    @exclusivity(unchecked) private var streams = StreamTable()
    /// The stream the last lookup found: nghttp2's callbacks for one stream come in a run (its
    /// headers, DATA, frame-received), so this saves most dictionary lookups (~14 per call, each
    /// hashing the id). Same invariant as `streams`; cleared when that stream closes.
    @exclusivity(unchecked) private var lastStream: StreamState?
    /// Recently routed paths (the path strings come from `recentPaths`, so comparing is cheap)
    /// with their methods: saves hashing the path for every call. Same invariant as `streams`.
    @exclusivity(unchecked) private var recentRoutes: [(path: String, method: MethodDescriptor)] = []
    /// Closed streams' objects, reused for new streams (saves an allocation, ~25 field
    /// initialisations and a deinit per call). Only objects no `.blocking` job can still answer
    /// (`StreamState.reusable`). Same invariant as `streams`; freed with the connection.
    @exclusivity(unchecked) private var spareStreams: [StreamState] = []
    /// `.blocking` jobs started during this read, submitted together after it (`sendPending`,
    /// which every read ends with). Same invariant as `streams`.
    @exclusivity(unchecked) private var pendingJobs: [BlockingJob] = []
    /// A flush is queued with `afterCurrentBatch` for the `.blocking` outcomes of the batch being
    /// drained. Same invariant as `streams`.
    @exclusivity(unchecked) private var flushScheduled = false

    @inline(__always)
    private func stream(_ id: Int32) -> StreamState? {
        if let s = lastStream, s.id == id { return s }
        let s = streams.find(id)
        if s != nil { lastStream = s }
        return s
    }
    private let onClosed: (HTTP2Connection) -> Void
    private var pausedForWrites = false
    private var closing = false
    private(set) var draining = false
    private var inCallback = false
    private var drainTimer: LoopTimer?
    private var lingerTimer: LoopTimer?
    // Abuse guards: counts in the current one-second window.
    private var windowStart: UInt64 = 0
    private var emptyDataFrames = 0
    private var pings = 0
    private var settingsFrames = 0
    /// Handshake and idle timeouts (loop thread only; the loop's sweep calls `checkTimeouts`).
    private var timeouts: ConnectionTimeouts
    private var config: ServerConfiguration { env.configuration }
    @exclusivity(unchecked) private var recentPaths = RecentStrings(capacity: 16)
    @exclusivity(unchecked) private var recentMetadata = RecentStrings(capacity: 16)

    init(tcp: TCPConnection, env: ConnectionEnvironment, onClosed: @escaping (HTTP2Connection) -> Void) {
        self.tcp = tcp
        self.env = env
        self.onClosed = onClosed
        self.timeouts = ConnectionTimeouts(now: tcp.loop.now, handshakeTimeout: env.configuration.handshakeTimeoutMilliseconds,
                                           idleTimeout: env.configuration.idleTimeoutMilliseconds)
        tcp.delegate = self
        session = Self.makeSession(self, config: env.configuration)
        var settings = [
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue), value: UInt32(config.maxConcurrentStreams)),
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE.rawValue), value: UInt32(config.maxHeaderListBytes)),
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE.rawValue), value: UInt32(config.initialWindowSize)),
        ]
        nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &settings, settings.count)
        nghttp2_session_set_local_window_size(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), 0, Int32(config.connectionWindowSize))
        tcp.startReading()
        sendPending()
    }

    // MARK: TCP events

    func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {
        guard let session, !closing else { return }
        let rc = nghttp2_session_mem_recv(session, bytes.baseAddress!.assumingMemoryBound(to: UInt8.self), bytes.count)
        if rc < 0 {
            countProtocolError()
            env.logger.debug("closing connection after HTTP/2 error", metadata: [
                "peer": "\(tcp.peerDescription)", "error": "\(String(cString: nghttp2_strerror(Int32(rc))))"])
            if Int32(rc) == NGHTTP2_ERR_BAD_CLIENT_MAGIC.rawValue {
                // Not HTTP/2 at all (garbage instead of the preface): nothing to say, close.
                close()
            } else {
                // nghttp2 has queued a GOAWAY: send it, then close.
                sendPending()
                closeAfterFlush()
            }
            return
        }
        sendPending()
        if tcp.queuedWriteBytes >= config.maxWriteQueueBytes {
            // The peer is not reading what we send: stop reading what it sends (SPEC §3).
            pausedForWrites = true
            tcp.stopReading()
        }
    }

    func connectionDidReachEOF(_ connection: TCPConnection, error: UVError?) {
        close()
    }

    func connectionDidDrainWrites(_ connection: TCPConnection) {
        if closing {
            if tcp.queuedWriteBytes == 0 { lingerThenClose() }
            return
        }
        sendPending()
        if pausedForWrites && tcp.queuedWriteBytes < config.maxWriteQueueBytes / 2 {
            pausedForWrites = false
            tcp.startReading()
        }
    }

    func connectionDidClose(_ connection: TCPConnection) {
        onClosed(self)
    }

    // MARK: output

    /// Pulls frames from nghttp2 into the socket's write batch, up to the write-queue bound.
    func sendPending() {
        submitPendingJobs()
        guard let session, !inCallback, !tcp.isClosed else { return }
        guard NGHTTP2Glue.pump(session, into: tcp, limit: config.maxWriteQueueBytes) else {
            countProtocolError()
            close()
            return
        }
        if !closing && nghttp2_session_want_read(session) == 0 && nghttp2_session_want_write(session) == 0 {
            closeAfterFlush()
        } else if draining && streams.isEmpty && drainTimer == nil {
            closeAfterFlush()
        }
    }

    private func closeAfterFlush() {
        closing = true
        if tcp.queuedWriteBytes == 0 { lingerThenClose() }
    }

    /// How long a connection we are done with waits for the peer to close after our FIN.
    static let lingerMilliseconds: UInt64 = 500

    /// Ends a connection whose last frames (the final GOAWAY) are out without resetting it: a
    /// close() with unread input in the socket makes the kernel send RST, and the peer may then
    /// lose responses it has not read yet (ECONNRESET). So: half-close (FIN after our data), keep
    /// reading and discarding (`closing` makes didRead ignore it) until the peer closes or
    /// `lingerMilliseconds` pass, then close.
    private func lingerThenClose() {
        guard !tcp.isClosed, lingerTimer == nil else { return }
        tcp.shutdownWrites()
        tcp.startReading()
        let timer = LoopTimer(loop: tcp.loop)
        lingerTimer = timer
        // Strong capture: the timer drops its closure when closed (in close()).
        timer.start(milliseconds: Self.lingerMilliseconds) { [self] in self.close() }
    }

    /// Closes at once: every open call is cancelled.
    func close(reason: CancelReason = .connectionClosed) {
        guard !tcp.isClosed else { return }
        closing = true
        for stream in streams.all {
            if let call = stream.call, !stream.responseEnded {
                if call.cancel(reason, overrideStatus: false) { env.counters.countStatus(.cancelled) }
            }
            if let b = stream.blocking, !stream.responseEnded, b.cancel() { env.counters.countStatus(.cancelled) }
            stream.release()
            env.counters.openStreams.wrappingSubtract(1, ordering: .relaxed)
        }
        streams.removeAll()
        lastStream = nil
        recentRoutes.removeAll()
        for s in spareStreams { s.release() }
        spareStreams.removeAll()
        pendingJobs.removeAll() // their calls were cancelled above: nobody wants the answers
        drainTimer?.close()
        drainTimer = nil
        lingerTimer?.close()
        lingerTimer = nil
        if let session { nghttp2_session_del(session) }
        session = nil
        tcp.close()
    }

    // MARK: graceful shutdown

    /// GOAWAY in two steps (a shutdown notice, then the final GOAWAY with the last stream we
    /// processed); the connection closes when its streams are done.
    func beginGracefulShutdown() {
        guard let session, !draining, !closing else { return }
        draining = true
        nghttp2_submit_shutdown_notice(session)
        sendPending()
        let timer = LoopTimer(loop: tcp.loop)
        drainTimer = timer
        // Strong capture: the timer drops its closure when closed (here or in close()).
        timer.start(milliseconds: 100) { [self] in
            guard let session = self.session else { return }
            self.drainTimer?.close()
            self.drainTimer = nil
            nghttp2_submit_goaway(session, UInt8(NGHTTP2_FLAG_NONE.rawValue),
                                  nghttp2_session_get_last_proc_stream_id(session),
                                  NGHTTP2_NO_ERROR.rawValue, nil, 0)
            self.sendPending()
        }
    }

    // MARK: timeouts

    /// Called by the loop's periodic sweep: closes a connection that never finished its handshake,
    /// and sends GOAWAY to one idle past the idle timeout (ConnectionTimeouts).
    func checkTimeouts(now: UInt64) {
        guard let session, !closing else { return }
        failStalledRequests(now: now)
        guard !draining else { return }
        switch timeouts.check(now: now) {
        case .keep:
            return
        case .handshakeTimedOut:
            env.logger.debug("closing connection: no HTTP/2 handshake within the timeout", metadata: [
                "peer": "\(tcp.peerDescription)", "timeout_ms": "\(timeouts.handshakeTimeout)"])
            env.counters.timedOutConnections.wrappingAdd(1, ordering: .relaxed)
            close()
        case .idleTimedOut:
            env.logger.debug("closing idle connection with GOAWAY", metadata: [
                "peer": "\(tcp.peerDescription)", "timeout_ms": "\(timeouts.idleTimeout)"])
            env.counters.timedOutConnections.wrappingAdd(1, ordering: .relaxed)
            // The GOAWAY names the last stream processed; a stream the client opened meanwhile
            // runs to completion (draining), anything newer is refused and retried elsewhere.
            draining = true
            let debug = Array("idle timeout".utf8)
            nghttp2_submit_goaway(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), nghttp2_session_get_last_proc_stream_id(session),
                                  NGHTTP2_NO_ERROR.rawValue, debug, debug.count)
            sendPending()
        }
    }

    /// A request that stops arriving before it is complete — HEADERS, then silence — would hold
    /// its stream, and an open stream keeps the connection from the idle timeout: 1,100 such
    /// connections would fill `maxConnections` again (review of issue 15). A stream whose
    /// handler has not started (unary and server-streaming calls start at the request's end)
    /// and that received nothing for the handshake timeout is answered DEADLINE_EXCEEDED.
    /// Client-streaming calls, whose handler runs from the headers on, decide for themselves.
    private func failStalledRequests(now: UInt64) {
        let limit = config.handshakeTimeoutMilliseconds
        guard limit > 0 else { return }
        let stalled = streams.all.filter { s in
            !s.handlerStarted && !s.responseStarted && !s.rejected && now >= s.lastInput && now - s.lastInput >= limit
        }
        guard !stalled.isEmpty else { return }
        for stream in stalled {
            env.logger.debug("failing a request that stopped arriving", metadata: [
                "peer": "\(tcp.peerDescription)", "stream": "\(stream.id)", "timeout_ms": "\(limit)"])
            failStream(stream, RPCError(.deadlineExceeded,
                "the request stopped arriving: nothing received for \(limit) ms before it was complete"))
        }
        sendPending()
    }

    // MARK: CallOwner (loop thread)

    func callNeedsService(_ call: ServerCall) {
        guard let stream = stream(call.streamID), stream.call === call, !stream.responseEnded else { return }
        service(stream, call)
        sendPending()
    }

    func consumeInbound(streamID: Int32, bytes: Int) {
        guard let session, bytes > 0 else { return }
        if stream(streamID) != nil {
            nghttp2_session_consume(session, streamID, bytes)
        } else {
            nghttp2_session_consume_connection(session, bytes)
        }
        sendPending()
    }

    private func service(_ stream: StreamState, _ call: ServerCall) {
        guard let session else { return }
        if !stream.responseStarted {
            let view = call.loopView()
            if view.pending == 0 && !view.wantsHeaders {
                // Nothing sent yet and the call is over: Trailers-Only.
                if let status = view.status { respondTrailersOnly(stream, status) }
                return
            }
            var provider = nghttp2_data_provider()
            provider.source.ptr = nil
            provider.read_callback = HTTP2Connection.readCallback
            stream.responseStarted = true
            let rc: Int32
            if view.metadata.isEmpty {
                // The common case: the same three headers every time, built once.
                let block = StaticHeaders.response
                rc = nghttp2_submit_response(session, stream.id, block.nva, block.count, &provider)
            } else {
                var headers: [(String, String)] = [(":status", "200"), ("content-type", "application/grpc"),
                                                   ("grpc-accept-encoding", "identity")]
                headers += view.metadata.wireHeaders()
                rc = withHeaderArray(headers) { nva, n in nghttp2_submit_response(session, stream.id, nva, n, &provider) }
            }
            if rc != 0 {
                stream.responseEnded = true
                call.cancel(.protocolError, overrideStatus: false)
            }
        } else if stream.dataDeferred {
            stream.dataDeferred = false
            nghttp2_session_resume_data(session, stream.id)
        }
    }

    /// Answers with HEADERS + END_STREAM carrying the status (gRPC "Trailers-Only").
    private func respondTrailersOnly(_ stream: StreamState, _ status: RPCError, httpStatus: Int = 200) {
        guard let session, !stream.responseEnded else { return }
        stream.responseStarted = true
        stream.responseEnded = true
        var headers: [(String, String)] = [(":status", String(httpStatus)), ("content-type", "application/grpc")]
        headers += statusHeaders(status)
        if status.code == .unimplemented, stream.encoding != nil { headers.append(("grpc-accept-encoding", "identity")) }
        let rc = withHeaderArray(headers) { nva, n in nghttp2_submit_response(session, stream.id, nva, n, nil) }
        if rc != 0 { statusNotSubmitted(stream, rc: rc) }
        env.counters.countStatus(status.code)
        stream.timer?.close()
        stream.timer = nil
    }

    /// The status headers, bounded (StatusTrailers) by our budget and by the header-list size the
    /// peer advertised, whichever is smaller.
    private func statusHeaders(_ status: RPCError) -> [(String, String)] {
        var budget = StatusTrailers.budgetBytes
        if let session {
            let peerLimit = nghttp2_session_get_remote_settings(session, NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE)
            // Less the :status and content-type a Trailers-Only answer puts before them.
            budget = min(budget, Int(peerLimit) - 128)
        }
        return StatusTrailers.headers(for: status, budget: budget)
    }

    /// A status header block nghttp2 refused (it should not happen within the budget): the
    /// stream still ends — RST_STREAM(INTERNAL_ERROR), which clients report as INTERNAL — so no
    /// call waits for trailers that will never come.
    private func statusNotSubmitted(_ stream: StreamState, rc: Int32) {
        env.logger.error("could not submit status headers; resetting the stream", metadata: [
            "stream": "\(stream.id)", "error": "\(String(cString: nghttp2_strerror(rc)))"])
        if let session {
            nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), stream.id, NGHTTP2_INTERNAL_ERROR.rawValue)
        }
    }

    private static let readCallback: nghttp2_data_source_read_callback = { session, streamID, buf, length, flags, _, userData in
        let conn = Unmanaged<HTTP2Connection>.fromOpaque(userData!).takeUnretainedValue()
        return conn.readData(streamID: streamID, buf: buf!, length: length, flags: flags!)
    }

    private func readData(streamID: Int32, buf: UnsafeMutablePointer<UInt8>, length: Int, flags: UnsafeMutablePointer<UInt32>) -> Int {
        guard let stream = stream(streamID) else {
            return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue)
        }
        guard let call = stream.call else {
            guard let status = stream.replyStatus else { return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue) }
            let n = copyReply(stream, into: buf, length: length)
            if stream.replyRead == stream.reply.count + 5 {
                endResponse(stream, status, flags: flags)
                stream.reply = []
            }
            return n
        }
        let (n, status) = call.takeOutbound(into: buf, length: length)
        if let status {
            endResponse(stream, status, flags: flags)
            return n
        }
        if n == 0 {
            stream.dataDeferred = true
            return Int(NGHTTP2_ERR_DEFERRED.rawValue)
        }
        return n
    }

    /// Everything is out: end DATA without END_STREAM, then trailers end the stream.
    private func endResponse(_ stream: StreamState, _ status: RPCError, flags: UnsafeMutablePointer<UInt32>) {
        flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue | NGHTTP2_DATA_FLAG_NO_END_STREAM.rawValue
        stream.responseEnded = true
        if status.code == .ok && status.message.isEmpty && status.details == nil && status.metadata.isEmpty {
            let block = StaticHeaders.okTrailers
            nghttp2_submit_trailer(session, stream.id, block.nva, block.count)
        } else {
            let rc = withHeaderArray(statusHeaders(status)) { nva, count in nghttp2_submit_trailer(session, stream.id, nva, count) }
            if rc != 0 { statusNotSubmitted(stream, rc: rc) }
        }
        env.counters.countStatus(status.code)
        stream.timer?.close()
        stream.timer = nil
    }

    /// Copies the next bytes of a synchronous call's framed reply (prefix, then message).
    private func copyReply(_ stream: StreamState, into buf: UnsafeMutablePointer<UInt8>, length: Int) -> Int {
        let count = stream.reply.count
        var off = stream.replyRead
        var written = 0
        while written < length && off < 5 {
            let n = UInt32(count)
            buf[written] = off == 0 ? 0 : UInt8(truncatingIfNeeded: n >> (8 * UInt32(4 - off)))
            written += 1
            off += 1
        }
        let take = min(length - written, count + 5 - off)
        if take > 0 {
            stream.reply.withUnsafeBufferPointer { p in
                (buf + written).update(from: p.baseAddress! + (off - 5), count: take)
            }
            written += take
            off += take
        }
        stream.replyRead = off
        return written
    }

    // MARK: synchronous unary calls (.inline, .blocking)

    /// Runs or queues a synchronous unary handler; its single request message is in `stream.request`.
    private func startSync(_ stream: StreamState, _ descriptor: MethodDescriptor) {
        let handler = descriptor.syncHandler!
        let request = stream.request
        stream.request = []
        if descriptor.execution == .inline {
            // Rule 4's exception: pure, bounded CPU work, run right here on the loop thread.
            let context = SyncCallContext(path: stream.path, metadata: stream.metadata, deadline: stream.deadline,
                                          peer: tcp.peerDescription, cancellation: .never)
            do {
                completeSync(stream, .success(try handler(request, context)))
            } catch {
                completeSync(stream, .failure(RPCError(converting: error)))
            }
            return
        }
        guard env.blockingPool != nil else {
            respondTrailersOnly(stream, RPCError(.internal, "no blocking worker pool"))
            return
        }
        // Queued here and handed to the pool once per read (submitPendingJobs): one lock of the
        // pool's queue for all the calls a read completed.
        let job = BlockingJob(handler: handler, request: request, path: stream.path, metadata: stream.metadata,
                              deadline: stream.deadline, peer: tcp.peerDescription,
                              target: LoopBound((self, stream), loop: tcp.loop))
        stream.blocking = job
        pendingJobs.append(job)
    }

    private func submitPendingJobs() {
        guard !pendingJobs.isEmpty, let pool = env.blockingPool else { return }
        pool.submit(pendingJobs)
        pendingJobs.removeAll(keepingCapacity: true)
    }

    /// A worker finished a `.blocking` call (loop thread, from `EventLoop.execute`).
    func blockingFinished(_ stream: StreamState, _ outcome: Result<SyncUnaryReply, RPCError>) {
        stream.blocking = nil
        // The stream may have ended meanwhile (deadline answered, reset, connection closed).
        guard streams.find(stream.id) === stream else { return }
        completeSync(stream, outcome)
        // Outcomes arrive in batches (`EventLoop.execute`): flush once per batch, not per call.
        guard !flushScheduled else { return }
        flushScheduled = true
        tcp.loop.afterCurrentBatch { [self] in
            flushScheduled = false
            sendPending()
        }
    }

    /// Submits a synchronous call's outcome: response headers, then DATA from `reply` and the
    /// trailers (via `readData`), or Trailers-Only for an error — the same wire form and status
    /// as an async handler's `finish(message:)` or throw.
    private func completeSync(_ stream: StreamState, _ outcome: Result<SyncUnaryReply, RPCError>) {
        guard let session, !stream.responseEnded else { return }
        switch outcome {
        case .failure(let e):
            respondTrailersOnly(stream, e)
        case .success(let reply):
            if reply.message.count > config.maxSendMessageBytes {
                respondTrailersOnly(stream, RPCError(.resourceExhausted,
                    "response message of \(reply.message.count) bytes exceeds the send limit of \(config.maxSendMessageBytes) bytes"))
                return
            }
            stream.reply = reply.message
            stream.replyRead = 0
            stream.replyStatus = RPCError(.ok, metadata: reply.trailingMetadata)
            stream.responseStarted = true
            var provider = nghttp2_data_provider()
            provider.source.ptr = nil
            provider.read_callback = HTTP2Connection.readCallback
            let block = StaticHeaders.response
            if nghttp2_submit_response(session, stream.id, block.nva, block.count, &provider) != 0 {
                stream.responseEnded = true
            }
        }
    }

    // MARK: input (nghttp2 callbacks)

    private func beginHeaders(_ streamID: Int32) {
        if stream(streamID) == nil {
            let s: StreamState
            if let spare = spareStreams.popLast() {
                spare.recycle(streamID)
                s = spare
            } else {
                s = StreamState(id: streamID)
            }
            s.lastInput = tcp.loop.now
            streams.insert(s)
            lastStream = s
            timeouts.streamOpened()
            env.counters.openStreams.wrappingAdd(1, ordering: .relaxed)
        }
    }

    /// Returns false to make nghttp2 fail the whole connection (abuse far over the limit).
    private func header(_ streamID: Int32, name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let stream = stream(streamID) else { return true }
        stream.headerBytes += name.count + value.count + 32
        if stream.headerBytes > config.maxHeaderListBytes {
            stream.headerOverflow = true
            // Far past the advertised limit: the peer ignores SETTINGS; drop the connection.
            return stream.headerBytes <= 4 * config.maxHeaderListBytes + 65536
        }
        if stream.responseStarted { return true } // request trailers: ignored
        // Names and well-known values are compared as bytes; Strings are made only for what a
        // call keeps, and repeated values (paths, user-agent) come from a per-connection cache.
        if name.first == UInt8(ascii: ":") {
            if NGHTTP2Glue.equal(name, ":method") {
                stream.method = NGHTTP2Glue.equal(value, "POST") ? "POST" : String(decoding: value, as: UTF8.self)
            } else if NGHTTP2Glue.equal(name, ":path") {
                stream.path = recentPaths.string(value)
            }
            return true
        }
        if NGHTTP2Glue.equal(name, "content-type") {
            stream.contentType = NGHTTP2Glue.equal(value, "application/grpc") ? "application/grpc" : String(decoding: value, as: UTF8.self)
        } else if NGHTTP2Glue.equal(name, "grpc-encoding") {
            stream.encoding = String(decoding: value, as: UTF8.self)
        } else if NGHTTP2Glue.equal(name, "grpc-timeout") {
            stream.timeout = String(decoding: value, as: UTF8.self)
        } else if NGHTTP2Glue.equal(name, "te") || NGHTTP2Glue.equal(name, "grpc-accept-encoding")
                    || NGHTTP2Glue.equal(name, "connection") || NGHTTP2Glue.equal(name, "host") {
            // Not metadata.
        } else {
            let key = recentMetadata.string(name)
            // The "-bin" suffix checked on the bytes (String.hasSuffix is Unicode-aware and slow).
            if name.count >= 4 && NGHTTP2Glue.equal(UnsafeBufferPointer(rebasing: name[(name.count - 4)...]), "-bin") {
                if let bytes = Base64.decode(String(decoding: value, as: UTF8.self)) {
                    stream.metadata.append(lowercased: key, .binary(bytes))
                } else {
                    stream.badMetadata = "metadata \(key): value is not valid base64"
                }
            } else {
                stream.metadata.append(lowercased: key, .string(recentMetadata.string(value)))
            }
        }
        return true
    }

    private func requestHeadersComplete(_ stream: StreamState) {
        if stream.headerOverflow {
            respondTrailersOnly(stream, RPCError(.resourceExhausted,
                "request header list exceeds \(config.maxHeaderListBytes) bytes"), httpStatus: 431)
            stream.rejected = true
            return
        }
        if stream.method != "POST" {
            respondTrailersOnly(stream, RPCError(.unimplemented, "gRPC requires POST, got \(stream.method)"), httpStatus: 405)
            stream.rejected = true
            return
        }
        let ct = stream.contentType
        let isGRPC = ct == "application/grpc" || ct.hasPrefix("application/grpc+") || ct.hasPrefix("application/grpc;")
        if !isGRPC {
            respondTrailersOnly(stream, RPCError(.unknown,
                "content-type \"\(ct)\" is not application/grpc"), httpStatus: 415)
            stream.rejected = true
            return
        }
        if let enc = stream.encoding, enc != "identity" {
            respondTrailersOnly(stream, RPCError(.unimplemented,
                "grpc-encoding \"\(enc)\" is not supported; this server accepts identity"))
            stream.rejected = true
            return
        }
        if let bad = stream.badMetadata {
            respondTrailersOnly(stream, RPCError(.invalidArgument, bad))
            stream.rejected = true
            return
        }
        var deadline: ContinuousClock.Instant?
        var timeoutNanos: Int64?
        if let t = stream.timeout {
            guard let nanos = GRPCTimeout.parse(t) else {
                respondTrailersOnly(stream, RPCError(.invalidArgument, "malformed grpc-timeout \"\(t)\""))
                stream.rejected = true
                return
            }
            timeoutNanos = nanos
            deadline = ContinuousClock.now.advanced(by: .nanoseconds(nanos))
        }
        let descriptor: MethodDescriptor
        switch route(stream.path) {
        case .failure(let error):
            respondTrailersOnly(stream, RPCError(error.code, error.message))
            stream.rejected = true
            return
        case .success(let d):
            descriptor = d
        }
        if draining {
            respondTrailersOnly(stream, CancelReason.shutdown.status)
            stream.rejected = true
            return
        }
        stream.descriptor = descriptor
        if descriptor.execution == .task {
            let context = CallContext(path: stream.path, metadata: stream.metadata, deadline: deadline, peer: tcp.peerDescription)
            stream.call = ServerCall(context: context, kind: descriptor.kind, streamID: stream.id, loop: tcp.loop, owner: self,
                                     outboundHighWater: config.streamOutboundHighWater,
                                     inboundHighWater: config.streamInboundHighWater,
                                     maxSendMessageBytes: config.maxSendMessageBytes)
        } else {
            stream.deadline = deadline
        }
        if let nanos = timeoutNanos {
            let timer = LoopTimer(loop: tcp.loop)
            stream.timer = timer
            let ms = UInt64(max(0, (nanos + 999_999) / 1_000_000))
            let id = stream.id
            // Strong capture (no weak references: they would put every retain of the connection on
            // the slow side-table path); the timer drops the closure when the stream ends.
            timer.start(milliseconds: ms) { [self] in self.deadlineExpired(id) }
        }
        if descriptor.kind.clientStreams { startHandler(stream) }
    }

    /// `Router.lookup` behind a small per-connection cache of the paths routed last.
    private func route(_ path: String) -> Result<MethodDescriptor, RPCError> {
        for r in recentRoutes where r.path == path { return .success(r.method) }
        let result = env.router.lookup(path)
        if case .success(let m) = result {
            if recentRoutes.count >= 8 { recentRoutes.removeFirst() }
            recentRoutes.append((path, m))
        }
        return result
    }

    private func deadlineExpired(_ streamID: Int32) {
        guard let stream = stream(streamID), !stream.responseEnded else { return }
        stream.timer?.close()
        stream.timer = nil
        if let call = stream.call {
            call.cancel(.deadline, overrideStatus: true)
            service(stream, call)
        } else {
            _ = stream.blocking?.cancel()
            respondTrailersOnly(stream, CancelReason.deadline.status)
        }
        sendPending()
    }

    private func startHandler(_ stream: StreamState) {
        guard let descriptor = stream.descriptor, !stream.handlerStarted else { return }
        stream.handlerStarted = true
        guard let call = stream.call else { return startSync(stream, descriptor) }
        let handler = descriptor.handler
        let task = Task {
            do {
                try await handler(call)
                call.finish(.ok)
            } catch {
                call.finish(RPCError(converting: error))
            }
        }
        call.setTask(task)
    }

    private func dataChunk(_ streamID: Int32, _ data: UnsafeBufferPointer<UInt8>) {
        guard let session else { return }
        guard let stream = stream(streamID), let descriptor = stream.descriptor, !stream.rejected, !stream.responseEnded else {
            // Nobody will read it: give the flow-control credit back right away.
            nghttp2_session_consume(session, streamID, data.count)
            return
        }
        stream.lastInput = tcp.loop.now
        var consumeNow = data.count
        if stream.deframer.count == 0 {
            // The common case: whole messages in this chunk are read in place (no deframer copy,
            // no buffer allocation); only a partial tail is kept.
            let input = UnsafeRawBufferPointer(data)
            let used = deframe(stream, descriptor, input, consumeNow: &consumeNow)
            if !stream.rejected && used < input.count {
                stream.deframer.append(UnsafeRawBufferPointer(rebasing: input[used...]))
            }
        } else {
            stream.deframer.append(UnsafeRawBufferPointer(data))
            let used = deframe(stream, descriptor, stream.deframer.bytes, consumeNow: &consumeNow)
            if !stream.rejected && used > 0 { stream.deframer.removeFirst(used) }
        }
        if consumeNow > 0 { nghttp2_session_consume(session, streamID, consumeNow) }
    }

    /// Hands every complete message in `input` to the call (or keeps it, for a synchronous call);
    /// returns the bytes used. Stops at a partial message or after failing the stream.
    private func deframe(_ stream: StreamState, _ descriptor: MethodDescriptor, _ input: UnsafeRawBufferPointer,
                         consumeNow: inout Int) -> Int {
        var offset = 0
        while input.count - offset >= 5 {
            let p = (input.baseAddress! + offset).assumingMemoryBound(to: UInt8.self)
            let compressed = p[0]
            let length = NGHTTP2Glue.messageLength(p)
            if compressed != 0 {
                failStream(stream, RPCError(.internal,
                    "compressed message received but no grpc-encoding was negotiated"))
                break
            }
            if length > config.maxReceiveMessageBytes {
                failStream(stream, RPCError(.resourceExhausted,
                    "received message of \(length) bytes exceeds the limit of \(config.maxReceiveMessageBytes) bytes"))
                break
            }
            guard input.count - offset >= 5 + length else { break }
            let message = [UInt8](UnsafeBufferPointer(start: p + 5, count: length))
            offset += 5 + length
            stream.messages += 1
            if !descriptor.kind.clientStreams && stream.messages > 1 {
                failStream(stream, RPCError(.internal,
                    "\(descriptor.kind == .unary ? "unary" : "server-streaming") call received more than one request message"))
                break
            }
            guard let call = stream.call else {
                stream.request = message // a synchronous call: kept until END_STREAM
                continue
            }
            if !call.deliver(message, wireBytes: length + 5) {
                // The handler is behind: hold back credit for this message until it reads.
                let held = min(consumeNow, length + 5)
                call.deferConsume(held)
                consumeNow -= held
            }
        }
        return offset
    }

    private func failStream(_ stream: StreamState, _ status: RPCError) {
        stream.rejected = true
        stream.deframer.removeAll()
        guard let call = stream.call else {
            // A synchronous call fails before its handler starts: nothing was sent yet.
            stream.request = []
            respondTrailersOnly(stream, status)
            return
        }
        call.failFromLoop(status)
        service(stream, call)
    }

    private func endOfRequest(_ stream: StreamState) {
        guard stream.descriptor != nil, !stream.rejected, !stream.responseEnded else { return }
        if stream.deframer.count > 0 {
            failStream(stream, RPCError(.internal,
                "request ended inside a message (\(stream.deframer.count) bytes of an incomplete frame)"))
            return
        }
        stream.call?.finishInbound()
        if !stream.descriptor!.kind.clientStreams {
            if stream.messages != 1 {
                failStream(stream, RPCError(.internal,
                    "\(stream.descriptor!.kind == .unary ? "unary" : "server-streaming") call received no request message"))
                return
            }
            startHandler(stream)
        }
    }

    private func frameReceived(_ frame: UnsafePointer<nghttp2_frame>) -> Int32 {
        let hd = frame.pointee.hd
        let type = UInt32(hd.type)
        let endStream = hd.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0
        switch type {
        case NGHTTP2_HEADERS.rawValue:
            guard let stream = stream(hd.stream_id) else { return 0 }
            if frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST {
                requestHeadersComplete(stream)
            }
            if endStream { endOfRequest(stream) }
        case NGHTTP2_DATA.rawValue:
            if hd.length == 0 && !endStream {
                if !withinRate(.emptyData) { return abuse("empty DATA frame flood") }
            }
            if endStream, let stream = stream(hd.stream_id) { endOfRequest(stream) }
        case NGHTTP2_PING.rawValue:
            if hd.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) == 0 && !withinRate(.ping) {
                return abuse("PING flood")
            }
        case NGHTTP2_SETTINGS.rawValue:
            if hd.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) == 0 {
                timeouts.settingsReceived()
                if !withinRate(.settings) { return abuse("SETTINGS flood") }
            }
        default:
            break
        }
        return 0
    }

    private enum RateCounter { case emptyData, ping, settings }

    /// Counts one frame of a kind in the current one-second window; false past its limit.
    private func withinRate(_ kind: RateCounter) -> Bool {
        let now = tcp.loop.now
        if now - windowStart >= 1000 {
            windowStart = now
            emptyDataFrames = 0
            pings = 0
            settingsFrames = 0
        }
        switch kind {
        case .emptyData:
            emptyDataFrames += 1
            return emptyDataFrames <= config.maxEmptyDataFramesPerSecond
        case .ping:
            pings += 1
            return pings <= config.maxPingsPerSecond
        case .settings:
            settingsFrames += 1
            return settingsFrames <= config.maxSettingsPerSecond
        }
    }

    private var protocolErrorCounted = false

    /// Counts this connection as ended by a protocol error, once.
    private func countProtocolError() {
        guard !protocolErrorCounted else { return }
        protocolErrorCounted = true
        env.counters.protocolErrors.wrappingAdd(1, ordering: .relaxed)
    }

    /// The connection was ended for abuse: frames still in the read buffer reach the callbacks
    /// and would trip the guard again (12,000 log lines for one empty-DATA flood).
    private var endedForAbuse = false

    private func abuse(_ what: String) -> Int32 {
        guard !endedForAbuse else { return 0 }
        endedForAbuse = true
        countProtocolError()
        env.logger.notice("closing abusive connection", metadata: ["peer": "\(tcp.peerDescription)", "reason": "\(what)"])
        if let session {
            nghttp2_session_terminate_session(session, NGHTTP2_ENHANCE_YOUR_CALM.rawValue)
        }
        return 0
    }

    private func frameSent(_ frame: UnsafePointer<nghttp2_frame>) {
        let hd = frame.pointee.hd
        let type = UInt32(hd.type)
        if type == NGHTTP2_GOAWAY.rawValue && frame.pointee.goaway.error_code != NGHTTP2_NO_ERROR.rawValue {
            // nghttp2 (or an abuse guard) ended the connection for a protocol violation.
            countProtocolError()
            return
        }
        guard type == NGHTTP2_HEADERS.rawValue || type == NGHTTP2_DATA.rawValue,
              hd.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0, let session else { return }
        // Our response is complete but the client is still sending: tell it to stop (gRPC spec).
        if nghttp2_session_get_stream_remote_close(session, hd.stream_id) == 0 {
            nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), hd.stream_id, NGHTTP2_NO_ERROR.rawValue)
        }
    }

    /// nghttp2 could not send a frame. For response HEADERS (headers or trailers) it leaves the
    /// stream open, and the client would wait forever: reset the stream instead (INTERNAL_ERROR).
    private func frameNotSent(_ frame: UnsafePointer<nghttp2_frame>, errorCode: Int32) {
        let hd = frame.pointee.hd
        guard UInt32(hd.type) == NGHTTP2_HEADERS.rawValue, let session else { return }
        // The client reset the stream before its headers went out: an ordinary cancellation,
        // and a closed stream must not get another RST_STREAM (RFC 9113 §5.4.2).
        if errorCode == NGHTTP2_ERR_STREAM_CLOSED.rawValue || errorCode == NGHTTP2_ERR_STREAM_CLOSING.rawValue { return }
        env.logger.error("a response header block was not sent; resetting the stream", metadata: [
            "stream": "\(hd.stream_id)", "error": "\(String(cString: nghttp2_strerror(errorCode)))"])
        nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), hd.stream_id, NGHTTP2_INTERNAL_ERROR.rawValue)
    }

    private func streamClosed(_ streamID: Int32, errorCode: UInt32) {
        guard let stream = streams.remove(streamID) else { return }
        if lastStream === stream { lastStream = nil }
        timeouts.streamClosed(now: tcp.loop.now)
        env.counters.openStreams.wrappingSubtract(1, ordering: .relaxed)
        if let call = stream.call {
            if !stream.responseEnded, call.cancel(.reset, overrideStatus: false) {
                env.counters.countStatus(.cancelled)
            }
            let held = call.takeDeferredConsume()
            if held > 0, let session { nghttp2_session_consume_connection(session, held) }
        }
        if let b = stream.blocking, !stream.responseEnded, b.cancel() { env.counters.countStatus(.cancelled) }
        stream.timer?.close()
        stream.timer = nil
        if stream.reusable && spareStreams.count < 32 {
            stream.call = nil
            spareStreams.append(stream)
        } else {
            stream.release()
        }
    }

    // MARK: session setup

    private static func makeSession(_ conn: HTTP2Connection, config: ServerConfiguration) -> OpaquePointer? {
        var callbacks: OpaquePointer?
        nghttp2_session_callbacks_new(&callbacks)
        defer { nghttp2_session_callbacks_del(callbacks) }
        nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks) { _, frame, userData in
            let c = Unmanaged<HTTP2Connection>.fromOpaque(userData!).takeUnretainedValue()
            if UInt32(frame!.pointee.hd.type) == NGHTTP2_HEADERS.rawValue {
                c.beginHeaders(frame!.pointee.hd.stream_id)
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_header_callback(callbacks) { _, frame, name, namelen, value, valuelen, _, userData in
            let c = Unmanaged<HTTP2Connection>.fromOpaque(userData!).takeUnretainedValue()
            let ok = c.header(frame!.pointee.hd.stream_id,
                              name: UnsafeBufferPointer(start: name, count: namelen),
                              value: UnsafeBufferPointer(start: value, count: valuelen))
            return ok ? 0 : NGHTTP2_ERR_CALLBACK_FAILURE.rawValue
        }
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks) { _, frame, userData in
            let c = Unmanaged<HTTP2Connection>.fromOpaque(userData!).takeUnretainedValue()
            return c.frameReceived(frame!)
        }
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks) { _, _, streamID, data, len, userData in
            let c = Unmanaged<HTTP2Connection>.fromOpaque(userData!).takeUnretainedValue()
            c.dataChunk(streamID, UnsafeBufferPointer(start: data, count: len))
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_send_callback(callbacks) { _, frame, userData in
            let c = Unmanaged<HTTP2Connection>.fromOpaque(userData!).takeUnretainedValue()
            c.frameSent(frame!)
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_not_send_callback(callbacks) { _, frame, errorCode, userData in
            let c = Unmanaged<HTTP2Connection>.fromOpaque(userData!).takeUnretainedValue()
            c.frameNotSent(frame!, errorCode: errorCode)
            return 0
        }
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks) { _, streamID, errorCode, userData in
            let c = Unmanaged<HTTP2Connection>.fromOpaque(userData!).takeUnretainedValue()
            c.streamClosed(streamID, errorCode: errorCode)
            return 0
        }
        var option: OpaquePointer?
        nghttp2_option_new(&option)
        defer { nghttp2_option_del(option) }
        // We acknowledge DATA ourselves (nghttp2_session_consume) once the handler can take it.
        nghttp2_option_set_no_auto_window_update(option, 1)
        nghttp2_option_set_max_outbound_ack(option, 1000)
        nghttp2_option_set_max_settings(option, 32)
        nghttp2_option_set_stream_reset_rate_limit(option, config.streamResetBurst, config.streamResetRate)
        nghttp2_option_set_max_continuations(option, 8)
        nghttp2_option_set_max_send_header_block_length(option, 64 * 1024)
        var session: OpaquePointer?
        let rc = nghttp2_session_server_new2(&session, callbacks, Unmanaged.passUnretained(conn).toOpaque(), option)
        precondition(rc == 0, "nghttp2_session_server_new2 failed: \(rc)")
        return session
    }
}

/// Header blocks every call sends the same way, built once for the process (never freed).
enum StaticHeaders {
    static let response = HeaderBlock([(":status", "200"), ("content-type", "application/grpc"),
                                       ("grpc-accept-encoding", "identity")])
    static let okTrailers = HeaderBlock([("grpc-status", "0")])
}
