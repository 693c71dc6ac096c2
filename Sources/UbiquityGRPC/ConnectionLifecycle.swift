/// A connection's life as a value: active → draining (GOAWAY sent; open streams finish, new ones
/// are refused) → flushing (our last frames are being written) → lingering (FIN sent; reading and
/// discarding until the peer closes) → closed. The connection reports events; the returned action
/// says what to do to nghttp2 and the socket. No nghttp2 and no loop here: unit-tested alone
/// (`ConnectionLifecycleTests`). Loop thread only, like its connection.
///
/// Why linger: a close() with unread input in the socket makes the kernel send RST, and the peer
/// may then lose responses it has not read yet (ECONNRESET). So the last frames go out, then a
/// half-close, and the socket is closed when the peer closes or `lingerMilliseconds` pass.
struct ConnectionLifecycle: Equatable {
    enum State: Equatable {
        case active
        /// A GOAWAY is out or on its way. After a graceful shutdown's notice the final GOAWAY
        /// (naming the last stream processed) follows when the drain timer fires.
        case draining(finalGoAwayPending: Bool)
        case flushing
        case lingering
        case closed
    }

    enum Event: Equatable {
        /// The server shuts down: GOAWAY in two steps (a shutdown notice, then the final one).
        case gracefulShutdown
        case drainTimerFired
        /// No stream for the idle timeout (ConnectionTimeouts): GOAWAY(NO_ERROR), then close.
        case idleTimeout
        /// Frames were pulled from nghttp2 into the socket. `sessionWantsIO` is nghttp2's
        /// want_read || want_write; false once both sides said GOAWAY and every stream is done.
        case outputPumped(sessionWantsIO: Bool, streamsOpen: Bool, queuedBytes: Int)
        /// Nothing more will be sent but what is queued (a protocol error's GOAWAY).
        case finish(queuedBytes: Int)
        /// The socket took bytes; `queuedBytes` are still waiting.
        case writesDrained(queuedBytes: Int)
        /// The socket is being closed at once.
        case close
    }

    enum Action: Equatable {
        case none
        /// Submit the shutdown notice and start the drain timer.
        case sendShutdownNotice
        case sendFinalGoAway
        case sendIdleGoAway
        /// Half-close the socket, keep reading and discarding, start the linger timer.
        case linger
        /// Pull more frames from nghttp2 (and resume reading if writes had paused it).
        case resumeOutput
        /// Close the socket and free the session; cancel open calls.
        case close
    }

    /// How long a connection we are done with waits for the peer to close after our FIN.
    static let lingerMilliseconds: UInt64 = 500
    /// Between the shutdown notice and the final GOAWAY: time for requests already in flight
    /// to arrive and be counted as processed.
    static let drainMilliseconds: UInt64 = 100

    private(set) var state = State.active

    /// Input is parsed (in flushing and lingering it is read and discarded).
    var readsInput: Bool {
        switch state {
        case .active, .draining: return true
        case .flushing, .lingering, .closed: return false
        }
    }

    /// New streams are served (draining refuses them with UNAVAILABLE).
    var acceptsStreams: Bool { state == .active }

    var isDraining: Bool {
        if case .draining = state { return true }
        return false
    }

    mutating func event(_ event: Event) -> Action {
        switch (state, event) {
        case (.closed, _):
            return .none
        case (_, .close):
            state = .closed
            return .close
        case (.active, .gracefulShutdown):
            state = .draining(finalGoAwayPending: true)
            return .sendShutdownNotice
        case (.draining(finalGoAwayPending: true), .drainTimerFired):
            state = .draining(finalGoAwayPending: false)
            return .sendFinalGoAway
        case (.active, .idleTimeout):
            // The GOAWAY names the last stream processed; a stream the client opened meanwhile
            // runs to completion, anything newer is refused and retried elsewhere.
            state = .draining(finalGoAwayPending: false)
            return .sendIdleGoAway
        case (.active, .outputPumped(false, _, let queued)), (.draining, .outputPumped(false, _, let queued)),
             (.draining(finalGoAwayPending: false), .outputPumped(_, false, let queued)):
            return startFlushing(queuedBytes: queued)
        case (.active, .finish(let queued)), (.draining, .finish(let queued)):
            return startFlushing(queuedBytes: queued)
        case (.flushing, .writesDrained(0)):
            state = .lingering
            return .linger
        case (.active, .writesDrained), (.draining, .writesDrained):
            return .resumeOutput
        default:
            return .none
        }
    }

    private mutating func startFlushing(queuedBytes: Int) -> Action {
        if queuedBytes == 0 {
            state = .lingering
            return .linger
        }
        state = .flushing
        return .none
    }
}
