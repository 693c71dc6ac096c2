import CNGHTTP2

/// Carrying out what a stream's `StreamStateMachine` decided: the one place its actions touch
/// nghttp2, the call and its job. The machine decides; this executes.
extension HTTP2Connection {
    func perform(_ stream: StreamState, _ action: StreamStateMachine.Action) {
        switch action {
        case .none:
            return
        case .respondTrailersOnly(let status, let httpStatus):
            respondTrailersOnly(stream, status, httpStatus: httpStatus)
        case .cancelJobAndRespond(let job, let status):
            _ = job.cancel()
            respondTrailersOnly(stream, status)
        case .startResponse:
            // A synchronous reply's; a `.task` call's response starts in `service`, which has
            // the call's initial metadata.
            startResponse(stream, metadata: nil)
        case .respondWithCallStatus:
            assertionFailure("service(_:_:) answers with the call's status: it holds the view")
        case .resumeData:
            if let session { nghttp2_session_resume_data(session, stream.id) }
        case .submitTrailers:
            // Only the data provider gets this (`readData`), and it submits them itself: it
            // holds the status.
            assertionFailure("trailers are submitted by the data provider")
        case .startTask(let call, let handler, let halfClosed):
            if halfClosed { call.finishInbound() }
            startTask(call, handler)
        case .runSync(let method):
            var request: [UInt8] = []
            swap(&request, &stream.request)
            runSync(stream, method, request: request)
        case .finishInbound(let call):
            call.finishInbound()
        case .failCall(let call, let status):
            call.failFromLoop(status)
            service(stream, call)
        case .cancelCall(let call, let reason, let overrideStatus):
            call.cancel(reason, overrideStatus: overrideStatus)
            if overrideStatus { service(stream, call) }
        case .release(let release):
            settle(stream, release, connectionClosing: false)
        }
    }

    /// A closed stream: cancel what still runs for it, give back the flow-control credit its
    /// call held, and keep the object for the next stream when nothing can still post to it.
    /// When the whole connection closes, its session is about to go: no credit, no reuse.
    func settle(_ stream: StreamState, _ release: StreamStateMachine.Release, connectionClosing: Bool) {
        switch release.cancel {
        case .call(let call, let reason)?:
            if call.cancel(reason, overrideStatus: false) { callEnded(stream, .cancelled) }
        case .job(let job)?:
            if job.cancel() { callEnded(stream, .cancelled) }
        case nil:
            break
        }
        stream.closeTimer()
        guard !connectionClosing, let session else { return stream.release() }
        if let call = release.creditFrom {
            let held = call.takeDeferredConsume()
            if held > 0 { nghttp2_session_consume_connection(session, held) }
        }
        if release.reusable && spareStreams.count < 32 {
            spareStreams.append(stream)
        } else {
            stream.release()
        }
    }
}
