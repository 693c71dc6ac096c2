import CNGHTTP2
import UbiquityLoop

/// Starting a stream's handler in the place its `HandlerExecution` names (docs/threading.md,
/// rule 4), taking its outcome back, and its deadline. Whatever the kind, the answer goes out
/// through the one response path (HTTP2Connection+Response).
extension HTTP2Connection {
    func startTask(_ call: ServerCall, _ handler: @escaping RawHandler) {
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

    /// Runs or queues a synchronous unary handler with its single request message.
    func runSync(_ stream: StreamState, _ method: MethodDescriptor, request: [UInt8]) {
        let handler = method.syncHandler!
        if method.execution == .inline {
            // Rule 4's exception: pure, bounded CPU work, run right here on the loop thread.
            let context = SyncCallContext(path: stream.head.path, metadata: stream.head.metadata, deadline: stream.deadline,
                                          peer: tcp.peerDescription, connection: local, cancellation: .never)
            do {
                completeSync(stream, .success(try handler(request, context)))
            } catch {
                completeSync(stream, .failure(RPCError(converting: error)))
            }
            return
        }
        guard env.blockingPool != nil else {
            completeSync(stream, .failure(RPCError(.internal, "no blocking worker pool")))
            return
        }
        // Queued here and handed to the pool once per read (submitPendingJobs): one lock of the
        // pool's queue for all the calls a read completed.
        let job = BlockingJob(handler: handler, request: request, path: stream.head.path, metadata: stream.head.metadata,
                              deadline: stream.deadline, peer: tcp.peerDescription, connection: local, loop: loop,
                              target: LoopBound((self, stream), loop: loop))
        _ = stream.machine.event(.jobQueued(job))
        pendingJobs.append(job)
    }

    func submitPendingJobs() {
        guard !pendingJobs.isEmpty, let pool = env.blockingPool else { return }
        pool.submit(pendingJobs)
        pendingJobs.removeAll(keepingCapacity: true)
    }

    /// A worker finished a `.blocking` call (loop thread, from `EventLoop.execute`).
    func blockingFinished(_ stream: StreamState, _ outcome: Result<SyncUnaryReply, RPCError>) {
        // The stream may have closed meanwhile (reset, connection closed): its object was then
        // freed, not reused (`StreamStateMachine.Release.reusable`).
        guard streams.find(stream.id) === stream else { return }
        completeSync(stream, outcome)
        // Outcomes arrive in batches (`EventLoop.execute`): flush once per batch, not per call.
        guard !flushScheduled else { return }
        flushScheduled = true
        loop.afterCurrentBatch { [self] in
            flushScheduled = false
            sendPending()
        }
    }

    /// A synchronous call's outcome goes out the way an async handler's `finish(message:)` or
    /// throw does: response headers, DATA and trailers, or Trailers-Only for an error.
    private func completeSync(_ stream: StreamState, _ outcome: Result<SyncUnaryReply, RPCError>) {
        switch outcome {
        case .failure(let status):
            perform(stream, stream.machine.event(.syncFailed(status)))
        case .success(let reply) where reply.message.count > config.maxSendMessageBytes:
            perform(stream, stream.machine.event(.syncFailed(RPCError(.resourceExhausted,
                "response message of \(reply.message.count) bytes exceeds the send limit of \(config.maxSendMessageBytes) bytes"))))
        case .success(let reply):
            stream.reply = SyncReply(message: reply.message, status: RPCError(.ok, metadata: reply.trailingMetadata))
            let action = stream.machine.event(.syncReplied)
            // Ignored: the call was answered meanwhile (its deadline); nobody reads the reply.
            if case .none = action { stream.reply = SyncReply() }
            perform(stream, action)
        }
    }

    // MARK: deadline

    func startDeadlineTimer(_ stream: StreamState, nanos: Int64) {
        let timer = LoopTimer(loop: loop)
        stream.timer = timer
        let ms = UInt64(max(0, (nanos + 999_999) / 1_000_000))
        let id = stream.id
        // Strong capture (no weak references: they would put every retain of the connection on
        // the slow side-table path); the timer drops the closure when the stream ends.
        timer.start(milliseconds: ms) { [self] in self.deadlineExpired(id) }
    }

    private func deadlineExpired(_ streamID: Int32) {
        guard let stream = stream(streamID) else { return }
        stream.closeTimer()
        perform(stream, stream.machine.event(.deadlineExpired))
        sendPending()
    }

    // MARK: CallOwner (loop thread)

    func callNeedsService(_ call: ServerCall) {
        guard let stream = stream(call.streamID), stream.machine.summary.hasTaskCall, stream.machine.call === call else { return }
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
}
