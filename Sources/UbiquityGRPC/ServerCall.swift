import UbiquityLock
import UbiquityLoop

/// The four gRPC call shapes.
public enum RPCKind: Sendable {
    case unary, serverStreaming, clientStreaming, bidirectional

    /// Whether the client sends a stream (otherwise exactly one request message).
    public var clientStreams: Bool { self == .clientStreaming || self == .bidirectional }
}

/// What a handler knows about its call.
public struct CallContext: Sendable {
    /// `/package.Service/Method`.
    public let path: String
    /// Request metadata (custom headers; `-bin` values decoded).
    public let metadata: Metadata
    /// When the client's `grpc-timeout` runs out, if it sent one.
    public let deadline: ContinuousClock.Instant?
    /// The peer's address, "ip:port".
    public let peer: String
    /// What the services keep for the call's connection (the transport never reads it).
    public let connection: ConnectionLocal
}

/// Why the transport cancelled a call.
enum CancelReason: Sendable {
    case deadline, reset, connectionClosed, shutdown, protocolError

    var status: RPCError {
        switch self {
        case .deadline: return RPCError(.deadlineExceeded, "deadline exceeded (grpc-timeout)")
        case .reset: return RPCError(.cancelled, "the client reset the stream")
        case .connectionClosed: return RPCError(.cancelled, "the connection closed")
        case .shutdown: return RPCError(.unavailable, "the server is shutting down")
        case .protocolError: return RPCError(.internal, "protocol error")
        }
    }
}

/// Implemented by the connection that owns a call; called on the loop thread only.
protocol CallOwner: AnyObject {
    func callNeedsService(_ call: ServerCall)
    func consumeInbound(streamID: Int32, bytes: Int)
}

/// One call as seen from both sides: the handler (any thread, async) and the loop thread.
///
/// Everything mutable lives in `state`, under one `Lock`; the loop learns about handler-side
/// changes through one `EventLoop.execute` per batch (`wakePosted` coalesces them). The handler learns about
/// loop-side changes (messages, cancellation, drained output) through continuations resumed outside
/// the lock.
public final class ServerCall: Sendable {
    public let context: CallContext
    public let kind: RPCKind
    let streamID: Int32
    let loop: EventLoop
    private let owner: LoopBound<CallOwner>
    /// Suspend `send` while more than this many bytes wait for the peer (flow-control backpressure).
    let outboundHighWater: Int
    /// Stop widening the flow-control window while more than this many request bytes wait for the handler.
    let inboundHighWater: Int
    let maxSendMessageBytes: Int

    struct State: ~Copyable {
        var outbound = ByteBuffer()
        var outboundRead = 0
        var wantsHeaders = false
        var status: RPCError?
        var cancelled: CancelReason?
        var taskCancelled = false
        var wakePosted = false
        var writeWaiter: CheckedContinuation<Void, any Error>?
        var inbound: [[UInt8]] = []
        var inboundHead = 0
        var inboundBytes = 0
        var inboundFinished = false
        var readWaiter: CheckedContinuation<[UInt8]?, any Error>?
        var deferredConsume = 0
        var task: Task<Void, Never>?
        var initialMetadata = Metadata()
        var outboundPending: Int { outbound.count - outboundRead }
    }
    private let state = Lock(State())

    init(context: CallContext, kind: RPCKind, streamID: Int32, loop: EventLoop, owner: CallOwner,
         outboundHighWater: Int, inboundHighWater: Int, maxSendMessageBytes: Int) {
        self.context = context
        self.kind = kind
        self.streamID = streamID
        self.loop = loop
        self.owner = LoopBound(owner, loop: loop)
        self.outboundHighWater = outboundHighWater
        self.inboundHighWater = inboundHighWater
        self.maxSendMessageBytes = maxSendMessageBytes
    }

    deinit {
        state.withLock { $0.outbound.deallocate() }
    }

    // MARK: handler side (any thread)

    /// Sends response headers now, with `metadata`, instead of with the first message.
    public func sendInitialMetadata(_ metadata: Metadata = Metadata()) {
        let post = state.withLock { s -> Bool in
            guard s.status == nil, s.cancelled == nil else { return false }
            s.initialMetadata = metadata
            s.wantsHeaders = true
            return Self.claimWake(&s)
        }
        if post { postWake() }
    }

    /// Queues one response message. While more than `outboundHighWater` bytes are queued (the
    /// peer is not reading) it suspends first, then queues: so a call holds at most the high-water
    /// mark plus one message, and a waiting handler holds only the message it is about to send
    /// (`waitUntilWritable` lets it hold nothing). Throws `CancellationError` once the call is
    /// cancelled or finished.
    public func send(_ message: [UInt8]) async throws {
        if message.count > maxSendMessageBytes {
            throw RPCError(.resourceExhausted, "response message of \(message.count) bytes exceeds the send limit of \(maxSendMessageBytes) bytes")
        }
        while true {
            let (post, mustWait) = try state.withLock { s -> (Bool, Bool) in
                if s.cancelled != nil || s.status != nil || s.taskCancelled { throw CancellationError() }
                if s.outboundPending > outboundHighWater { return (false, true) }
                Self.appendFrame(&s.outbound, message)
                return (Self.claimWake(&s), false)
            }
            if post { postWake() }
            if !mustWait { return }
            try await waitForDrain()
        }
    }

    /// Suspends while more than `outboundHighWater` bytes of responses are queued. A handler that
    /// produces expensive messages (FetchStream's batches) waits here before building the next
    /// one, so an unread call holds no batch while it waits (issue 15: ~1 MiB per unread
    /// FetchStream). Throws `CancellationError` once the call is cancelled or finished.
    public func waitUntilWritable() async throws {
        let mustWait = try state.withLock { s -> Bool in
            if s.cancelled != nil || s.status != nil || s.taskCancelled { throw CancellationError() }
            return s.outboundPending > outboundHighWater
        }
        if mustWait { try await waitForDrain() }
    }

    private func waitForDrain() async throws {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (cont: CheckedContinuation<Void, any Error>) in
                let resumeNow: (any Error)?? = state.withLock { s in
                    if s.cancelled != nil || s.taskCancelled { return .some(CancellationError()) }
                    if s.outboundPending <= outboundHighWater { return .some(nil) }
                    s.writeWaiter = cont
                    return .none
                }
                if let r = resumeNow {
                    if let e = r { cont.resume(throwing: e) } else { cont.resume() }
                }
            }
        } onCancel: {
            let w = state.withLock { s -> CheckedContinuation<Void, any Error>? in
                s.taskCancelled = true
                defer { s.writeWaiter = nil }
                return s.writeWaiter
            }
            w?.resume(throwing: CancellationError())
        }
    }

    /// Ends the call with `status` once queued messages are out. Later calls are ignored.
    public func finish(_ status: RPCError) {
        let post = state.withLock { s -> Bool in
            guard s.status == nil, s.cancelled == nil else { return false }
            s.status = status
            return Self.claimWake(&s)
        }
        if post { postWake() }
    }

    /// One message and OK in one step (the unary fast path: one lock, one wake-up).
    public func finish(message: [UInt8], trailingMetadata: Metadata = Metadata()) {
        if message.count > maxSendMessageBytes {
            finish(RPCError(.resourceExhausted, "response message of \(message.count) bytes exceeds the send limit of \(maxSendMessageBytes) bytes"))
            return
        }
        let post = state.withLock { s -> Bool in
            guard s.status == nil, s.cancelled == nil else { return false }
            Self.appendFrame(&s.outbound, message)
            s.status = RPCError(.ok, metadata: trailingMetadata)
            return Self.claimWake(&s)
        }
        if post { postWake() }
    }

    /// The next request message, or nil after the client half-closed. Throws once cancelled.
    public func receive() async throws -> [UInt8]? {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (cont: CheckedContinuation<[UInt8]?, any Error>) in
                var consume = 0
                let result: Result<[UInt8]?, any Error>? = state.withLock { s in
                    if let r = Self.popInbound(&s, highWater: inboundHighWater, consume: &consume) { return r }
                    if s.cancelled != nil || s.taskCancelled { return .failure(CancellationError()) }
                    s.readWaiter = cont
                    return nil
                }
                if consume > 0 { postConsume(consume) }
                if let result { cont.resume(with: result) }
            }
        } onCancel: {
            let w = state.withLock { s -> CheckedContinuation<[UInt8]?, any Error>? in
                s.taskCancelled = true
                defer { s.readWaiter = nil }
                return s.readWaiter
            }
            w?.resume(throwing: CancellationError())
        }
    }

    /// True once the transport cancelled the call (deadline, reset, connection closed).
    public var isCancelled: Bool { state.withLock { $0.cancelled != nil } }

    private static func popInbound(_ s: inout State, highWater: Int, consume: inout Int) -> Result<[UInt8]?, any Error>? {
        if s.inboundHead < s.inbound.count {
            let m = s.inbound[s.inboundHead]
            s.inbound[s.inboundHead] = []
            s.inboundHead += 1
            if s.inboundHead == s.inbound.count { s.inbound.removeAll(keepingCapacity: true); s.inboundHead = 0 }
            s.inboundBytes -= m.count
            if s.deferredConsume > 0 && s.inboundBytes <= highWater {
                consume = s.deferredConsume
                s.deferredConsume = 0
            }
            return .success(m)
        }
        if s.inboundFinished { return .success(nil) }
        return nil
    }

    private static func appendFrame(_ buf: inout ByteBuffer, _ message: [UInt8]) {
        let n = UInt32(message.count)
        let prefix: [UInt8] = [0, UInt8(n >> 24), UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF)]
        buf.append(prefix)
        buf.append(message)
    }

    private static func claimWake(_ s: inout State) -> Bool {
        if s.wakePosted { return false }
        s.wakePosted = true
        return true
    }

    private func postWake() {
        let owner = self.owner
        loop.execute { [self] in
            state.withLock { $0.wakePosted = false }
            owner.get.callNeedsService(self)
        }
    }

    private func postConsume(_ bytes: Int) {
        let owner = self.owner
        let id = streamID
        loop.execute { owner.get.consumeInbound(streamID: id, bytes: bytes) }
    }

    // MARK: loop side

    func setTask(_ task: Task<Void, Never>) {
        let cancelNow = state.withLock { s -> Bool in
            s.task = task
            return s.cancelled != nil
        }
        if cancelNow { task.cancel() }
    }

    /// Snapshot for the loop: whether headers are wanted, what status is set, bytes pending.
    func loopView() -> (wantsHeaders: Bool, status: RPCError?, pending: Int, metadata: Metadata) {
        state.withLock { s in (s.wantsHeaders, s.status, s.outboundPending, s.initialMetadata) }
    }

    /// Copies up to `length` pending bytes into `dest`. `eof` when everything is out and a status is set.
    func takeOutbound(into dest: UnsafeMutableRawPointer, length: Int) -> (count: Int, status: RPCError?) {
        let destAddress = UInt(bitPattern: dest)
        let (n, status, waiter) = state.withLock { s -> (Int, RPCError?, CheckedContinuation<Void, any Error>?) in
            let n = min(length, s.outboundPending)
            if n > 0 {
                UnsafeMutableRawPointer(bitPattern: destAddress)!.copyMemory(from: s.outbound.base! + s.outboundRead, byteCount: n)
                s.outboundRead += n
                if s.outboundRead == s.outbound.count {
                    // Everything is out: a buffer a burst grew is given back (a stream may
                    // now stay quiet for long), a small one kept for the next message.
                    if s.outbound.capacity > 64 * 1024 { s.outbound.deallocate() } else { s.outbound.removeAll() }
                    s.outboundRead = 0
                } else if s.outboundRead > 64 * 1024 && s.outboundRead * 2 > s.outbound.count {
                    s.outbound.removeFirst(s.outboundRead)
                    s.outboundRead = 0
                }
            }
            var waiter: CheckedContinuation<Void, any Error>?
            if s.outboundPending <= outboundHighWater, let w = s.writeWaiter {
                waiter = w
                s.writeWaiter = nil
            }
            return (n, s.outboundPending == 0 ? s.status : nil, waiter)
        }
        waiter?.resume()
        return (n, status)
    }

    /// A complete request message arrived. Returns whether its bytes may be acknowledged now.
    func deliver(_ message: [UInt8], wireBytes: Int) -> Bool {
        var reader: CheckedContinuation<[UInt8]?, any Error>?
        let consumeNow = state.withLock { s -> Bool in
            if let r = s.readWaiter {
                reader = r
                s.readWaiter = nil
                return true
            }
            s.inbound.append(message)
            s.inboundBytes += message.count
            return s.inboundBytes <= inboundHighWater
        }
        reader?.resume(returning: message)
        return consumeNow
    }

    /// Records flow-control credit held back until the handler reads.
    func deferConsume(_ bytes: Int) {
        state.withLock { $0.deferredConsume += bytes }
    }

    /// Credit still held back (released by the connection when the stream closes).
    func takeDeferredConsume() -> Int {
        state.withLock { s in defer { s.deferredConsume = 0 }; return s.deferredConsume }
    }

    /// The client half-closed.
    func finishInbound() {
        let reader = state.withLock { s -> CheckedContinuation<[UInt8]?, any Error>? in
            s.inboundFinished = true
            guard s.inboundHead >= s.inbound.count, let r = s.readWaiter else { return nil }
            s.readWaiter = nil
            return r
        }
        reader?.resume(returning: nil)
    }

    /// Number of request messages received and not yet read (unary calls check it is exactly one).
    func takeSingleRequest() -> (message: [UInt8]?, count: Int) {
        state.withLock { s in
            let count = s.inbound.count - s.inboundHead
            guard count == 1 else { return (nil, count) }
            let m = s.inbound[s.inboundHead]
            s.inbound.removeAll()
            s.inboundHead = 0
            s.inboundBytes = 0
            return (m, 1)
        }
    }

    /// Cancels from the loop: the handler's waits throw, its task is cancelled, later output is dropped.
    /// With `overrideStatus` the call ends with the reason's status and queued output is discarded.
    /// Returns false when the call had already ended.
    @discardableResult
    func cancel(_ reason: CancelReason, overrideStatus: Bool) -> Bool {
        end(reason, status: overrideStatus ? reason.status : nil)
    }

    /// Ends the call from the loop with `status` (for errors found by the transport, e.g. a second
    /// request message on a unary call), dropping queued output.
    func failFromLoop(_ status: RPCError) {
        _ = end(.protocolError, status: status)
    }

    /// The one path by which the loop ends a call: mark it, replace its status if asked, and wake
    /// or cancel whatever the handler is waiting on (outside the lock).
    private func end(_ reason: CancelReason, status: RPCError?) -> Bool {
        var reader: CheckedContinuation<[UInt8]?, any Error>?
        var writer: CheckedContinuation<Void, any Error>?
        var task: Task<Void, Never>?
        let did = state.withLock { s -> Bool in
            guard s.cancelled == nil else { return false }
            s.cancelled = reason
            if let status {
                s.status = status
                s.outbound.removeAll()
                s.outboundRead = 0
            }
            reader = s.readWaiter; s.readWaiter = nil
            writer = s.writeWaiter; s.writeWaiter = nil
            task = s.task
            return true
        }
        reader?.resume(throwing: CancellationError())
        writer?.resume(throwing: CancellationError())
        task?.cancel()
        return did
    }
}
