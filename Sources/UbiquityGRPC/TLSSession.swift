import COpenSSL

/// One TLS endpoint over two OpenSSL memory BIOs, with no socket: the peer's ciphertext goes in
/// with `receive`, plaintext comes out through its `deliver` closure; plaintext goes in with
/// `encrypt`, ciphertext for the peer collects in `outgoing`. `TLSConnection` puts it between a
/// `TCPConnection` and HTTP/2; the transport tests connect two of them back to back.
///
/// Never blocks: a memory BIO that runs dry says "retry" (SSL_ERROR_WANT_READ), and the
/// outgoing one grows, so OpenSSL never waits for the network — the libuv loop does.
/// Loop thread only (one `SSL` is not thread-safe).
final class TLSSession {
    enum Role { case server, client }

    enum ReceiveResult: Equatable {
        case ok
        /// Send `outgoing` (an alert, if OpenSSL queued one), then close.
        case refused(String)
        /// The peer sent close_notify.
        case endOfInput
    }

    private let ssl: OpaquePointer
    /// Ciphertext from the peer, waiting for OpenSSL (SSL owns both BIOs).
    private let inbound: OpaquePointer
    /// Ciphertext for the peer, waiting for the socket.
    private let outbound: OpaquePointer
    // @exclusivity(unchecked): loop-thread only, and every transition is a whole-value
    // `machine.event(...)` that calls nothing back (TLSConnection's fields say what it saved).
    @exclusivity(unchecked) private(set) var machine = TLSStateMachine()

    /// `peerName`: client side, the host the server's certificate must name.
    init(context: TLSContext, role: Role, peerName: String? = nil) throws(TLSError) {
        guard let ssl = SSL_new(context.raw) else { throw TLSError("SSL_new") }
        guard let inbound = ubq_bio_new_mem(), let outbound = ubq_bio_new_mem() else {
            SSL_free(ssl)
            throw TLSError("BIO_new")
        }
        self.ssl = ssl
        self.inbound = inbound
        self.outbound = outbound
        SSL_set_bio(ssl, inbound, outbound)
        if role == .server { SSL_set_accept_state(ssl) } else { SSL_set_connect_state(ssl) }
        if let peerName, ubq_ssl_set_peer_name(ssl, peerName) != 1 {
            throw TLSError("server name \(peerName)")  // deinit frees the SSL
        }
    }

    deinit { SSL_free(ssl) }

    /// Ciphertext waiting for the peer; valid until the next call on this session.
    var outgoing: UnsafeRawBufferPointer {
        var p: UnsafePointer<UInt8>?
        let n = ubq_bio_mem_data(outbound, &p)
        return UnsafeRawBufferPointer(start: p, count: n > 0 ? n : 0)
    }

    /// Drops `outgoing` once the socket has it (the BIO keeps its buffer for the next records).
    func consumeOutgoing() { _ = ubq_bio_reset(outbound) }

    /// A client starts the handshake (its ClientHello lands in `outgoing`); servers wait.
    func startHandshake() -> ReceiveResult {
        advanceHandshake()
    }

    /// Takes the peer's ciphertext, advances the handshake, and hands the decrypted bytes (in
    /// `scratch`) to `deliver`, which returns false to stop reading (the connection closed).
    ///
    /// Every record this ciphertext completes is decrypted into `scratch` before `deliver` runs,
    /// and `deliver` runs again only when `scratch` is full: HTTP/2 then sees one socket read's
    /// calls in one `didRead`, answers them in one flush, and that flush is one `SSL_write`, as
    /// over h2c. Handing over each record alone (`SSL_read` returns one record at a time) made a
    /// peer that sends one record per call cost one nghttp2 pass, one `SSL_write` and one record
    /// per call: 40,161 against 23,386 server instructions per Ping (docs/tls.md, "Cost").
    func receive(_ ciphertext: UnsafeRawBufferPointer, scratch: UnsafeMutableRawBufferPointer,
                 deliver: (UnsafeRawBufferPointer) -> Bool) -> ReceiveResult {
        guard machine.state != .closed else { return .ok }
        ERR_clear_error()
        if ciphertext.count > 0 {
            // A memory BIO takes all it is given (it grows), so this never writes short.
            guard BIO_write(inbound, ciphertext.baseAddress, Int32(ciphertext.count)) == Int32(ciphertext.count) else {
                return refuse(.recordError)
            }
        }
        if machine.state == .handshaking {
            let r = advanceHandshake()
            guard r == .ok, machine.readsRecords else { return r }
        }
        guard machine.readsRecords, let base = scratch.baseAddress, scratch.count > 0 else { return .ok }
        var filled = 0
        while true {
            let n = SSL_read(ssl, base + filled, Int32(clamping: scratch.count - filled))
            if n > 0 {
                filled += Int(n)
                if filled < scratch.count { continue }
            }
            // Asked now: `deliver` runs HTTP/2, whose flush calls SSL_write, after which
            // SSL_get_error would describe that call instead.
            let error = n > 0 ? SSL_ERROR_NONE : SSL_get_error(ssl, n)
            // Full, or nothing more to decrypt now: what came before an end or an error is the
            // peer's data all the same.
            if filled > 0 {
                if !deliver(UnsafeRawBufferPointer(start: base, count: filled)) { return .ok }
                filled = 0
            }
            switch error {
            case SSL_ERROR_NONE:
                continue
            case SSL_ERROR_WANT_READ:
                return .ok
            case SSL_ERROR_ZERO_RETURN:
                _ = machine.event(.peerClosed)
                return .endOfInput
            default:
                return refuse(.recordError)
            }
        }
    }

    /// Encrypts application bytes into `outgoing`. False if the session can no longer send
    /// (not established, or OpenSSL failed): the caller closes.
    func encrypt(_ plaintext: UnsafeRawBufferPointer) -> Bool {
        guard machine.mayEncrypt else { return false }
        guard plaintext.count > 0 else { return true }
        ERR_clear_error()
        // With memory BIOs SSL_write takes everything at once (split into records of ≤16 KiB).
        return SSL_write(ssl, plaintext.baseAddress, Int32(plaintext.count)) == Int32(plaintext.count)
    }

    /// Half-closes: close_notify goes into `outgoing` if the session was established.
    func closeNotify() {
        if machine.event(.localClose) == .sendCloseNotify {
            ERR_clear_error()
            _ = SSL_shutdown(ssl)
        }
    }

    /// Client side, TLS 1.2, tests: asks the server to renegotiate (ours refuses). The request
    /// goes out with the next `encrypt` or `receive`.
    func requestRenegotiation() -> Bool {
        ERR_clear_error()
        guard SSL_renegotiate(ssl) == 1 else { return false }
        _ = SSL_do_handshake(ssl)  // queues the new ClientHello; the answer comes with `receive`
        return true
    }

    /// The negotiated protocol version ("TLSv1.3").
    var protocolVersion: String { String(cString: SSL_get_version(ssl)) }

    private func advanceHandshake() -> ReceiveResult {
        ERR_clear_error()
        let rc = SSL_do_handshake(ssl)
        if rc == 1 {
            let action = machine.event(.handshakeFinished(alpnSelectedH2: ubq_ssl_alpn_is_h2(ssl) == 1))
            if case .refuse = action { return .refused("the handshake finished without ALPN selecting h2") }
            return .ok
        }
        if SSL_get_error(ssl, rc) == SSL_ERROR_WANT_READ { return .ok }
        return refuse(.handshakeFailed)
    }

    private func refuse(_ event: TLSStateMachine.Event) -> ReceiveResult {
        _ = machine.event(event)
        return .refused(TLSError.opensslReason())
    }
}
