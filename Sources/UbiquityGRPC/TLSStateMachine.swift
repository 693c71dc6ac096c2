/// The life of one TLS connection, as a value (`TLSSession` executes what it decides):
///
///     handshaking ──(finished, ALPN h2)──▶ established ──(we send close_notify)──▶ closing
///          │  └─(finished without h2)─▶ closed           │ (peer's close_notify)    │
///          └──(handshake failed)──▶ closed               └─(record error)─▶ closed ◀─┘
///
/// Application bytes the HTTP/2 layer writes while handshaking are held and released when the
/// handshake finishes (the server's SETTINGS are written before the client's Finished arrives);
/// from `closing` on, nothing more is encrypted.
struct TLSStateMachine: Equatable {
    enum State: Equatable {
        case handshaking
        case established
        /// Our close_notify is out; the peer's records are still read (and dropped by HTTP/2).
        case closing
        case closed
    }

    enum Event: Equatable {
        case handshakeFinished(alpnSelectedH2: Bool)
        case handshakeFailed
        /// A bad record, a failed MAC, an alert from the peer after the handshake.
        case recordError
        case peerClosed
        /// The HTTP/2 layer half-closes (`shutdownWrites`).
        case localClose
    }

    enum Action: Equatable {
        case none
        /// Encrypt and send the application bytes held during the handshake.
        case releaseHeldOutput
        /// Send close_notify.
        case sendCloseNotify
        /// Send whatever alert OpenSSL queued, then close the socket: the peer is refused.
        case refuse(Refusal)
        /// The peer ended the TLS session: the HTTP/2 layer sees end of input.
        case endOfInput
    }

    enum Refusal: Equatable {
        case handshakeFailed
        /// The handshake finished without ALPN choosing h2 (the server's ALPN callbacks refuse
        /// such clients during the handshake; this is the check behind them).
        case noH2
        case recordError
    }

    private(set) var state = State.handshaking

    /// Application bytes may be encrypted now.
    var mayEncrypt: Bool { state == .established }
    /// Records from the peer are still processed (decrypted and handed on).
    var readsRecords: Bool { state == .established || state == .closing }

    mutating func event(_ event: Event) -> Action {
        switch (state, event) {
        case (.handshaking, .handshakeFinished(let h2)):
            if h2 {
                state = .established
                return .releaseHeldOutput
            }
            state = .closed
            return .refuse(.noH2)
        case (.handshaking, .handshakeFailed):
            state = .closed
            return .refuse(.handshakeFailed)
        case (.handshaking, .localClose):
            // Nothing was said in TLS yet: there is no session to close.
            state = .closed
            return .none
        case (.established, .localClose):
            state = .closing
            return .sendCloseNotify
        case (.established, .recordError), (.closing, .recordError), (.handshaking, .recordError):
            state = .closed
            return .refuse(.recordError)
        case (.established, .peerClosed), (.closing, .peerClosed), (.handshaking, .peerClosed):
            state = .closed
            return .endOfInput
        case (.closed, _), (.closing, _), (.established, _):
            // Late events after the end, a second close, or a handshake event out of turn.
            return .none
        }
    }
}
