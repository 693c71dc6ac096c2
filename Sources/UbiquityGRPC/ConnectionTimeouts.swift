/// When a connection has been silent too long: the HTTP/2 handshake timeout and gRPC's
/// `max_connection_idle` (issue 15: 1,100 connections that sent nothing used to fill
/// `--max-connections` for as long as they stayed, and every new client got UNAVAILABLE).
///
/// A value-type state machine: the connection reports events (its peer's SETTINGS, streams
/// opening and closing) and its loop asks `check(now:)` on a periodic sweep; the verdict says
/// what to do. Times are the loop's milliseconds (`EventLoop.now`). Unit-tested without a socket
/// (`ConnectionTimeoutsTests`).
///
/// - Handshake: from accept until the client's first SETTINGS frame (which follows its
///   connection preface). A peer that has not finished it within `handshakeTimeout` is closed.
/// - Idle: while no stream is open, counted from the last stream's end (or from accept). A
///   connection idle for `idleTimeout` gets GOAWAY(NO_ERROR) and is closed; clients reconnect on
///   their next call, as they do with gRPC servers. PINGs do not count as activity (a keepalive
///   must not hold a connection forever); an open stream — a long Watch or Subscribe — does.
///
/// A timeout of 0 disables that check.
struct ConnectionTimeouts: Equatable {
    enum Verdict: Equatable {
        case keep
        case handshakeTimedOut
        case idleTimedOut
    }

    let handshakeTimeout: UInt64
    let idleTimeout: UInt64
    private(set) var handshakeDone = false
    private(set) var openStreams = 0
    /// Accept time, then the end of the last stream; meaningful while `openStreams == 0`.
    private var quietSince: UInt64
    /// A verdict other than `.keep` was given; the connection is on its way out.
    private var expired = false

    init(now: UInt64, handshakeTimeout: UInt64, idleTimeout: UInt64) {
        self.quietSince = now
        self.handshakeTimeout = handshakeTimeout
        self.idleTimeout = idleTimeout
    }

    /// The client's SETTINGS frame arrived: the handshake is complete.
    mutating func settingsReceived() { handshakeDone = true }

    mutating func streamOpened() { openStreams += 1 }

    mutating func streamClosed(now: UInt64) {
        openStreams = max(0, openStreams - 1)
        if openStreams == 0 { quietSince = now }
    }

    /// What to do with the connection now. Gives each non-`.keep` verdict once.
    mutating func check(now: UInt64) -> Verdict {
        guard !expired else { return .keep }
        let quiet = now >= quietSince ? now - quietSince : 0
        if !handshakeDone {
            guard handshakeTimeout > 0, quiet >= handshakeTimeout else { return .keep }
            expired = true
            return .handshakeTimedOut
        }
        guard idleTimeout > 0, openStreams == 0, quiet >= idleTimeout else { return .keep }
        expired = true
        return .idleTimedOut
    }

    /// How often a loop should sweep its connections for these timeouts: a quarter of the
    /// shorter one (so a verdict comes at most 25% late), between 50 ms and 1 s; nil when both
    /// are disabled.
    static func sweepInterval(handshakeTimeout: UInt64, idleTimeout: UInt64) -> UInt64? {
        let enabled = [handshakeTimeout, idleTimeout].filter { $0 > 0 }
        guard let shortest = enabled.min() else { return nil }
        return min(1000, max(50, shortest / 4))
    }
}
