import UbiquityLoop

/// Per-stream storage, owned by its connection (loop thread only): the stream's life
/// (`machine`: what the call is and how far it got) and the buffers and timer a stream uses,
/// which a connection reuses for its next streams (`HTTP2Connection.spareStreams`).
// @exclusivity(unchecked) on every field: a StreamState is touched only on its loop thread and
// never through overlapping accesses (callbacks do not re-enter while a field is being modified);
// the dynamic checks were ~800 instructions per call (callgrind).
final class StreamState {
    /// Set when the object is taken for a stream; a connection reuses its StreamState objects,
    /// never across connections.
    @exclusivity(unchecked) var id: Int32
    @exclusivity(unchecked) var machine = StreamStateMachine()
    @exclusivity(unchecked) var head = RequestHead()
    @exclusivity(unchecked) var deframer = MessageDeframer()
    /// A synchronous call's request message, kept from its DATA until END_STREAM starts the
    /// handler (`StreamStateMachine.Admitted.sync` says why it is here).
    @exclusivity(unchecked) var request: [UInt8] = []
    /// A synchronous call's reply, read out by nghttp2's data provider (valid while the
    /// machine's runner is `.reply`; `StreamStateMachine.Runner.reply` says why it is here).
    @exclusivity(unchecked) var reply = SyncReply()
    /// The `grpc-timeout` deadline timer.
    @exclusivity(unchecked) var timer: LoopTimer?
    /// The request's deadline (its `grpc-timeout`), set at admission; a synchronous handler
    /// gets it in its context (a `.task` call has it in its `CallContext`).
    @exclusivity(unchecked) var deadline: ContinuousClock.Instant?
    /// When request bytes last arrived (its HEADERS, then each DATA chunk), loop milliseconds:
    /// a request that stops arriving before it is complete is failed (`failStalledRequests`).
    @exclusivity(unchecked) var lastInput: UInt64 = 0
    /// The admitted call's metrics and when it was admitted (`monotonicNanos`), while the
    /// router records call metrics; its status is counted once, then this is cleared.
    @exclusivity(unchecked) var metrics: MethodMetrics?
    @exclusivity(unchecked) var admittedNanos: UInt64 = 0

    init(id: Int32) { self.id = id }

    func release() {
        closeTimer()
        deframer.release()
    }

    func closeTimer() {
        timer?.close()
        timer = nil
    }

    /// Makes a closed stream's object fresh for stream `newID`, keeping buffer capacity (the
    /// metadata array and a small deframer) so the next call allocates nothing for them. Only
    /// for objects whose close said `reusable` (no `.blocking` job can still post to it).
    func recycle(_ newID: Int32) {
        id = newID
        machine = StreamStateMachine()
        head.reset()
        deframer.reset()
        deadline = nil
        metrics = nil
        request = []
        reply = SyncReply()
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
