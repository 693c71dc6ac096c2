import CNGHTTP2
import UbiquityLoop

/// The one response path, for all three handler kinds: response HEADERS with a data provider
/// (`startResponse`), DATA read from the handler's output as nghttp2 asks (`readData`: a
/// `ServerCall`'s queue for `.task`, the `SyncReply` for `.inline` / `.blocking`), then the
/// status in trailers (`endResponse`); or, when nothing was sent, the status alone
/// (`respondTrailersOnly`, gRPC's Trailers-Only).
extension HTTP2Connection {
    /// Submits response HEADERS (the static block, or with `metadata`) and a data provider.
    func startResponse(_ stream: StreamState, metadata: Metadata?) {
        guard let session else { return }
        var provider = nghttp2_data_provider()
        provider.source.ptr = nil
        provider.read_callback = Self.readCallback
        let rc: Int32
        if let metadata, !metadata.isEmpty {
            var headers: [(String, String)] = [(":status", "200"), ("content-type", "application/grpc"),
                                               ("grpc-accept-encoding", "identity")]
            headers += metadata.wireHeaders()
            rc = withHeaderArray(headers) { nva, n in nghttp2_submit_response(session, stream.id, nva, n, &provider) }
        } else {
            // The common case: the same three headers every time, built once.
            let block = StaticHeaders.response
            rc = nghttp2_submit_response(session, stream.id, block.nva, block.count, &provider)
        }
        if rc != 0 { perform(stream, stream.machine.event(.responseNotStarted)) }
    }

    /// A `.task` call has news (output, a status, wanted headers): start or resume its response.
    func service(_ stream: StreamState, _ call: ServerCall) {
        if stream.machine.summary.wantsCallView {
            let view = call.loopView()
            let action = stream.machine.event(.callUpdated(pending: view.pending, wantsHeaders: view.wantsHeaders,
                                                           ended: view.status != nil))
            switch action {
            case .startResponse: startResponse(stream, metadata: view.metadata)
            case .respondWithCallStatus: respondTrailersOnly(stream, view.status!)
            default: perform(stream, action)
            }
        } else {
            perform(stream, stream.machine.event(.outputReady))
        }
    }

    /// Answers with HEADERS + END_STREAM carrying the status (gRPC "Trailers-Only"). Only as
    /// the stream's machine says (`respondTrailersOnly`): it makes sure a status goes out once.
    func respondTrailersOnly(_ stream: StreamState, _ status: RPCError, httpStatus: Int = 200) {
        guard let session else { return }
        var headers: [(String, String)] = [(":status", String(httpStatus)), ("content-type", "application/grpc")]
        headers += statusHeaders(status)
        if status.code == .unimplemented, stream.head.encoding != nil { headers.append(("grpc-accept-encoding", "identity")) }
        let rc = withHeaderArray(headers) { nva, n in nghttp2_submit_response(session, stream.id, nva, n, nil) }
        if rc != 0 { statusNotSubmitted(stream, rc: rc) }
        callEnded(stream, status.code)
        stream.closeTimer()
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
            "stream": "\(stream.id)", "error": "\(NGHTTP2Session.describe(rc))"])
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
        let (n, status) = if stream.machine.summary.hasTaskCall, let call = stream.machine.call {
            call.takeOutbound(into: buf, length: length)
        } else {
            stream.reply.take(into: buf, length: length)
        }
        if let status {
            if case .submitTrailers = stream.machine.event(.responseFinished) { endResponse(stream, status, flags: flags) }
            return n
        }
        if n == 0 {
            perform(stream, stream.machine.event(.responseDeferred))
            return Int(NGHTTP2_ERR_DEFERRED.rawValue)
        }
        return n
    }

    /// Everything is out: end DATA without END_STREAM, then trailers end the stream.
    private func endResponse(_ stream: StreamState, _ status: RPCError, flags: UnsafeMutablePointer<UInt32>) {
        flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue | NGHTTP2_DATA_FLAG_NO_END_STREAM.rawValue
        if status.code == .ok && status.message.isEmpty && status.details == nil && status.metadata.isEmpty {
            let block = StaticHeaders.okTrailers
            nghttp2_submit_trailer(session, stream.id, block.nva, block.count)
        } else {
            let rc = withHeaderArray(statusHeaders(status)) { nva, count in nghttp2_submit_trailer(session, stream.id, nva, count) }
            if rc != 0 { statusNotSubmitted(stream, rc: rc) }
        }
        callEnded(stream, status.code)
        stream.closeTimer()
    }
}

extension HTTP2Connection {
    /// Counts a call's status: server-wide, and per method when the router records call metrics.
    func callEnded(_ stream: StreamState, _ code: StatusCode) {
        env.counters.countStatus(code)
        if let metrics = stream.metrics {
            stream.metrics = nil
            metrics.ended(code, startNanos: stream.admittedNanos)
        }
    }
}

/// A synchronous call's reply, read out by nghttp2's data provider as a `ServerCall`'s queue is:
/// the 5-byte gRPC prefix, the message, then the status once everything is out.
struct SyncReply {
    private var message: [UInt8] = []
    /// Bytes of the framed reply (prefix + message) already handed out.
    private var read = 0
    private var status: RPCError?

    init() {}

    init(message: [UInt8], status: RPCError) {
        self.message = message
        self.status = status
    }

    /// Copies the next bytes into `buf`; the status comes with the last of them.
    mutating func take(into buf: UnsafeMutablePointer<UInt8>, length: Int) -> (count: Int, status: RPCError?) {
        guard status != nil else { return (0, nil) }
        let count = message.count
        var off = read
        var written = 0
        while written < length && off < 5 {
            buf[written] = off == 0 ? 0 : UInt8(truncatingIfNeeded: UInt32(count) >> (8 * UInt32(4 - off)))
            written += 1
            off += 1
        }
        let take = min(length - written, count + 5 - off)
        if take > 0 {
            message.withUnsafeBufferPointer { p in
                (buf + written).update(from: p.baseAddress! + (off - 5), count: take)
            }
            written += take
            off += take
        }
        read = off
        guard off == count + 5 else { return (written, nil) }
        message = []
        // Moved out, not copied: a copy of the status and its release were ~100 instructions
        // per call (callgrind on W0).
        var last: RPCError?
        swap(&last, &status)
        return (written, last)
    }
}
