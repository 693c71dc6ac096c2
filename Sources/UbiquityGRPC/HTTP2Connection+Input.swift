import CNGHTTP2
import UbiquityLoop

/// nghttp2's input callbacks: streams open, their headers are collected and checked, DATA is
/// cut into messages, and frames are counted against the flood limits. Inside
/// `nghttp2_session_mem_recv` only: nothing here calls `sendPending`.
extension HTTP2Connection {
    func beginHeaders(_ streamID: Int32) {
        guard stream(streamID) == nil else { return }
        let s: StreamState
        if let spare = spareStreams.popLast() {
            spare.recycle(streamID)
            s = spare
        } else {
            s = StreamState(id: streamID)
        }
        s.lastInput = loop.now
        streams.insert(s)
        lastStream = s
        timeouts.streamOpened()
        env.counters.openStreams.wrappingAdd(1, ordering: .relaxed)
    }

    /// Returns false to make nghttp2 fail the whole connection (abuse far over the limit).
    func header(_ streamID: Int32, name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let stream = stream(streamID) else { return true }
        // Request trailers (after our response started) only count toward the size limit.
        return stream.head.add(name: name, value: value, maxHeaderListBytes: config.maxHeaderListBytes,
                               keep: stream.machine.summary.keepsHeaderFields, strings: &headerStrings)
    }

    func requestHeadersComplete(_ stream: StreamState) {
        let verdict = stream.head.admit(maxHeaderListBytes: config.maxHeaderListBytes, draining: !lifecycle.acceptsStreams,
                                        route: route(stream.head.path))
        switch verdict {
        case .reject(let rejection):
            perform(stream, stream.machine.event(.rejected(rejection.status, httpStatus: rejection.httpStatus)))
        case .admit(let method, let timeoutNanos):
            if let metrics = method.metrics {
                stream.metrics = metrics
                stream.admittedNanos = monotonicNanos()
            }
            let deadline = timeoutNanos.map { ContinuousClock.now.advanced(by: .nanoseconds($0)) }
            stream.deadline = deadline
            let admitted: StreamStateMachine.Admitted
            if method.execution == .task {
                let context = CallContext(path: stream.head.path, metadata: stream.head.metadata, deadline: deadline,
                                          peer: tcp.peerDescription, connection: local)
                admitted = .task(ServerCall(context: context, kind: method.kind, streamID: stream.id, loop: loop, owner: self,
                                            outboundHighWater: config.streamOutboundHighWater,
                                            inboundHighWater: config.streamInboundHighWater,
                                            maxSendMessageBytes: config.maxSendMessageBytes))
            } else {
                admitted = .sync
            }
            if let nanos = timeoutNanos { startDeadlineTimer(stream, nanos: nanos) }
            perform(stream, stream.machine.event(.admitted(method, admitted)))
        }
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

    func dataChunk(_ streamID: Int32, _ data: UnsafeBufferPointer<UInt8>) {
        guard let session else { return }
        guard let stream = stream(streamID), stream.machine.summary.readsRequest, let kind = stream.machine.summary.kind else {
            // Nobody will read it: give the flow-control credit back right away.
            nghttp2_session_consume(session, streamID, data.count)
            return
        }
        stream.lastInput = loop.now
        var consumeNow = data.count
        let call = stream.machine.summary.hasTaskCall ? stream.machine.call : nil
        let failure = stream.deframer.feed(UnsafeRawBufferPointer(data), maxMessageBytes: config.maxReceiveMessageBytes,
                                           singleMessage: !kind.clientStreams) { message, wireBytes in
            guard let call else {
                stream.request = message // a synchronous call: kept until END_STREAM
                return
            }
            if !call.deliver(message, wireBytes: wireBytes) {
                // The handler is behind: hold back credit for this message until it reads.
                let held = min(consumeNow, wireBytes)
                call.deferConsume(held)
                consumeNow -= held
            }
        }
        if let failure {
            failStream(stream, failure.status(kind: kind, maxMessageBytes: config.maxReceiveMessageBytes))
        }
        if consumeNow > 0 { nghttp2_session_consume(session, streamID, consumeNow) }
    }

    /// The request broke a rule (a bad message, a stall): nothing more is read, and the call
    /// ends with `status`.
    func failStream(_ stream: StreamState, _ status: RPCError) {
        stream.deframer.discard()
        stream.request = []
        perform(stream, stream.machine.event(.requestFailed(status)))
    }

    func endOfRequest(_ stream: StreamState) {
        guard stream.machine.summary.readsRequest, let kind = stream.machine.summary.kind else { return }
        if let failure = stream.deframer.finish(singleMessage: false) {
            return failStream(stream, failure.status(kind: kind, maxMessageBytes: config.maxReceiveMessageBytes))
        }
        if !kind.clientStreams, let failure = stream.deframer.finish(singleMessage: true) {
            return failStream(stream, failure.status(kind: kind, maxMessageBytes: config.maxReceiveMessageBytes))
        }
        perform(stream, stream.machine.event(.requestEnded))
    }

    func frameReceived(_ frame: UnsafePointer<nghttp2_frame>) -> Int32 {
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
            if hd.length == 0 && !endStream && !rateLimits.admit(.emptyData, now: loop.now) {
                return abuse("empty DATA frame flood")
            }
            if endStream, let stream = stream(hd.stream_id) { endOfRequest(stream) }
        case NGHTTP2_PING.rawValue:
            if hd.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) == 0 && !rateLimits.admit(.ping, now: loop.now) {
                return abuse("PING flood")
            }
        case NGHTTP2_SETTINGS.rawValue:
            if hd.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) == 0 {
                timeouts.settingsReceived()
                if !rateLimits.admit(.settings, now: loop.now) { return abuse("SETTINGS flood") }
            }
        default:
            break
        }
        return 0
    }

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

    func frameSent(_ frame: UnsafePointer<nghttp2_frame>) {
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
    func frameNotSent(_ frame: UnsafePointer<nghttp2_frame>, errorCode: Int32) {
        let hd = frame.pointee.hd
        guard UInt32(hd.type) == NGHTTP2_HEADERS.rawValue, let session else { return }
        // The client reset the stream before its headers went out: an ordinary cancellation,
        // and a closed stream must not get another RST_STREAM (RFC 9113 §5.4.2).
        if errorCode == NGHTTP2_ERR_STREAM_CLOSED.rawValue || errorCode == NGHTTP2_ERR_STREAM_CLOSING.rawValue { return }
        env.logger.error("a response header block was not sent; resetting the stream", metadata: [
            "stream": "\(hd.stream_id)", "error": "\(NGHTTP2Session.describe(errorCode))"])
        nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), hd.stream_id, NGHTTP2_INTERNAL_ERROR.rawValue)
    }

    func streamClosed(_ streamID: Int32, errorCode: UInt32) {
        guard let stream = streams.remove(streamID) else { return }
        if lastStream === stream { lastStream = nil }
        timeouts.streamClosed(now: loop.now)
        env.counters.openStreams.wrappingSubtract(1, ordering: .relaxed)
        perform(stream, stream.machine.event(.closed(.reset)))
    }
}
