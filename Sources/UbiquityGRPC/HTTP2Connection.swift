import CNGHTTP2
import Logging
import UbiquityLoop

/// One HTTP/2 connection: an nghttp2 server session over a socket (loop thread only).
///
/// Input: bytes read → `nghttp2_session_mem_recv` → callbacks (HTTP2Connection+Input) build
/// streams and calls. Output: `nghttp2_session_mem_send` → the socket's write batch, one write in
/// flight; past `maxWriteQueueBytes` we stop pulling frames from nghttp2 and stop reading the
/// socket until the kernel takes the bytes. nghttp2 is never re-entered from its own callbacks.
///
/// The protocol decisions are values the connection asks: `ConnectionLifecycle` (GOAWAY, drain,
/// linger), `ConnectionTimeouts` (handshake, idle), `FrameRateLimits` (floods), `RequestHead`
/// (request validation), `MessageDeframer`; per stream, `StreamStateMachine`.
/// This class executes what they decide against nghttp2 and the socket (`ConnectionIO`).
///
/// Files: this one (socket events, output, lifecycle), +Input (nghttp2's input callbacks),
/// +StreamActions (executing a stream machine's actions), +Handlers (starting the three handler
/// kinds), +Response (the one response path), NGHTTP2Session.
final class HTTP2Connection: CallOwner {
    let tcp: any ConnectionIO
    /// `tcp.loop`, kept here: through the existential each use was a witness call and a
    /// retain/release, a few per call (measured with `RequestHead.Verdict`, which see).
    let loop: EventLoop
    let env: ConnectionEnvironment
    var session: OpaquePointer?
    // @exclusivity(unchecked): loop-thread only and never accessed through overlapping accesses
    // (no callback re-enters while it is being modified); the dynamic check was a measurable
    // share of every call (docs/benchmarks.md, "Where the time goes").
    @exclusivity(unchecked) var streams = StreamTable()
    /// The stream the last lookup found: nghttp2's callbacks for one stream come in a run (its
    /// headers, DATA, frame-received), so this saves most lookups (~14 per call). Same invariant
    /// as `streams`; cleared when that stream closes.
    @exclusivity(unchecked) var lastStream: StreamState?
    /// Recently routed paths (the path strings come from `headerStrings`, so comparing is cheap)
    /// with their methods: saves hashing the path for every call. Same invariant as `streams`.
    @exclusivity(unchecked) var recentRoutes: [(path: String, method: MethodDescriptor)] = []
    /// Closed streams' objects, reused for new streams (saves an allocation, ~25 field
    /// initialisations and a deinit per call). Only objects no `.blocking` job can still answer
    /// (`StreamStateMachine.Release.reusable`). Same invariant as `streams`; freed with the connection.
    @exclusivity(unchecked) var spareStreams: [StreamState] = []
    /// `.blocking` jobs started during this read, submitted together after it (`sendPending`,
    /// which every read ends with). Same invariant as `streams`.
    @exclusivity(unchecked) var pendingJobs: [BlockingJob] = []
    /// A flush is queued with `afterCurrentBatch` for the `.blocking` outcomes of the batch being
    /// drained. Same invariant as `streams`.
    @exclusivity(unchecked) var flushScheduled = false
    /// Interned header strings (`RequestHead`). Same invariant as `streams`.
    @exclusivity(unchecked) var headerStrings = HeaderStrings()
    /// What the services keep for this connection (its calls' `connection`); freed with it.
    let local = ConnectionLocal()

    private let onClosed: (HTTP2Connection) -> Void
    private var pausedForWrites = false
    var lifecycle = ConnectionLifecycle()
    private var drainTimer: LoopTimer?
    private var lingerTimer: LoopTimer?
    /// Handshake and idle timeouts (the loop's sweep calls `checkTimeouts`).
    var timeouts: ConnectionTimeouts
    var rateLimits: FrameRateLimits
    /// True while nghttp2 runs our callbacks (inside `mem_recv` / `mem_send`, the only calls that
    /// run them): `sendPending` must not be reached from there (nghttp2 is not re-entrant).
    /// Checked in debug builds.
    private var inSession = false
    private var protocolErrorCounted = false
    /// The connection was ended for abuse: frames still in the read buffer reach the callbacks
    /// and would trip the guard again (12,000 log lines for one empty-DATA flood).
    var endedForAbuse = false
    var config: ServerConfiguration { env.configuration }

    /// Whether the connection is draining (GOAWAY sent; new streams are refused).
    var draining: Bool { lifecycle.isDraining }

    init(tcp: any ConnectionIO, env: ConnectionEnvironment, onClosed: @escaping (HTTP2Connection) -> Void) {
        self.tcp = tcp
        self.loop = tcp.loop
        self.env = env
        self.onClosed = onClosed
        let config = env.configuration
        self.timeouts = ConnectionTimeouts(now: tcp.loop.now, handshakeTimeout: config.handshakeTimeoutMilliseconds,
                                           idleTimeout: config.idleTimeoutMilliseconds)
        self.rateLimits = FrameRateLimits(maxEmptyDataFramesPerSecond: config.maxEmptyDataFramesPerSecond,
                                          maxPingsPerSecond: config.maxPingsPerSecond,
                                          maxSettingsPerSecond: config.maxSettingsPerSecond)
        tcp.attach(self)
        session = NGHTTP2Session.make(self, config: config)
        tcp.startReading()
        sendPending()
    }

    func stream(_ id: Int32) -> StreamState? {
        if let s = lastStream, s.id == id { return s }
        let s = streams.find(id)
        if s != nil { lastStream = s }
        return s
    }

    // MARK: socket events

    func didRead(_ bytes: UnsafeRawBufferPointer) {
        guard let session, lifecycle.readsInput else { return }
        inSession = true
        let rc = nghttp2_session_mem_recv(session, bytes.baseAddress!.assumingMemoryBound(to: UInt8.self), bytes.count)
        inSession = false
        if rc < 0 {
            countProtocolError()
            env.logger.debug("closing connection after HTTP/2 error", metadata: [
                "peer": "\(tcp.peerDescription)", "error": "\(NGHTTP2Session.describe(Int32(rc)))"])
            if Int32(rc) == NGHTTP2_ERR_BAD_CLIENT_MAGIC.rawValue {
                // Not HTTP/2 at all (garbage instead of the preface): nothing to say, close.
                close()
            } else {
                // nghttp2 has queued a GOAWAY: send it, then close.
                sendPending()
                perform(lifecycle.event(.finish(queuedBytes: tcp.queuedWriteBytes)))
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

    func didReachEOF() {
        close()
    }

    func didDrainWrites() {
        perform(lifecycle.event(.writesDrained(queuedBytes: tcp.queuedWriteBytes)))
    }

    func didClose() {
        onClosed(self)
    }

    // MARK: output

    /// Pulls frames from nghttp2 into the socket's write batch, up to the write-queue bound.
    func sendPending() {
        assert(!inSession, "sendPending re-entered nghttp2 from one of its callbacks")
        submitPendingJobs()
        guard let session, !tcp.isClosed else { return }
        inSession = true
        let ok = NGHTTP2Glue.pump(session, into: tcp, limit: config.maxWriteQueueBytes)
        inSession = false
        guard ok else {
            countProtocolError()
            close()
            return
        }
        let wantsIO = nghttp2_session_want_read(session) != 0 || nghttp2_session_want_write(session) != 0
        perform(lifecycle.event(.outputPumped(sessionWantsIO: wantsIO, streamsOpen: !streams.isEmpty,
                                              queuedBytes: tcp.queuedWriteBytes)))
    }

    /// Carries out what the lifecycle decided.
    private func perform(_ action: ConnectionLifecycle.Action) {
        guard let session else { return }
        switch action {
        case .none:
            return
        case .sendShutdownNotice:
            nghttp2_submit_shutdown_notice(session)
            sendPending()
            let timer = LoopTimer(loop: loop)
            drainTimer = timer
            // Strong capture: the timer drops its closure when closed (here or in close()).
            timer.start(milliseconds: ConnectionLifecycle.drainMilliseconds) { [self] in
                drainTimer?.close()
                drainTimer = nil
                perform(lifecycle.event(.drainTimerFired))
            }
        case .sendFinalGoAway:
            nghttp2_submit_goaway(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), nghttp2_session_get_last_proc_stream_id(session),
                                  NGHTTP2_NO_ERROR.rawValue, nil, 0)
            sendPending()
        case .sendIdleGoAway:
            let debug = Array("idle timeout".utf8)
            nghttp2_submit_goaway(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), nghttp2_session_get_last_proc_stream_id(session),
                                  NGHTTP2_NO_ERROR.rawValue, debug, debug.count)
            sendPending()
        case .linger:
            lingerThenClose()
        case .resumeOutput:
            sendPending()
            if pausedForWrites && tcp.queuedWriteBytes < config.maxWriteQueueBytes / 2 {
                pausedForWrites = false
                tcp.startReading()
            }
        case .close:
            closeNow(reason: .connectionClosed)
        }
    }

    /// Half-close (FIN after our data), keep reading and discarding until the peer closes or
    /// `lingerMilliseconds` pass, then close (ConnectionLifecycle says why).
    private func lingerThenClose() {
        guard !tcp.isClosed, lingerTimer == nil else { return }
        tcp.shutdownWrites()
        tcp.startReading()
        let timer = LoopTimer(loop: loop)
        lingerTimer = timer
        // Strong capture: the timer drops its closure when closed (in close()).
        timer.start(milliseconds: ConnectionLifecycle.lingerMilliseconds) { [self] in self.close() }
    }

    /// Closes at once: every open call is cancelled.
    func close(reason: CancelReason = .connectionClosed) {
        guard !tcp.isClosed else { return }
        _ = lifecycle.event(.close)
        closeNow(reason: reason)
    }

    private func closeNow(reason: CancelReason) {
        guard !tcp.isClosed else { return }
        for stream in streams.all {
            if case .release(let release) = stream.machine.event(.closed(reason)) {
                settle(stream, release, connectionClosing: true)
            } else {
                stream.release()
            }
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

    /// GOAWAY in two steps (a shutdown notice, then the final GOAWAY with the last stream we
    /// processed); the connection closes when its streams are done.
    func beginGracefulShutdown() {
        guard session != nil else { return }
        perform(lifecycle.event(.gracefulShutdown))
    }

    // MARK: timeouts

    /// Called by the loop's periodic sweep: closes a connection that never finished its handshake,
    /// and sends GOAWAY to one idle past the idle timeout (ConnectionTimeouts).
    func checkTimeouts(now: UInt64) {
        guard session != nil, lifecycle.readsInput else { return }
        failStalledRequests(now: now)
        guard lifecycle.acceptsStreams else { return }
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
            perform(lifecycle.event(.idleTimeout))
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
            s.machine.summary.awaitsRequest && now >= s.lastInput && now - s.lastInput >= limit
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

    /// Counts this connection as ended by a protocol error, once.
    func countProtocolError() {
        guard !protocolErrorCounted else { return }
        protocolErrorCounted = true
        env.counters.protocolErrors.wrappingAdd(1, ordering: .relaxed)
    }
}
