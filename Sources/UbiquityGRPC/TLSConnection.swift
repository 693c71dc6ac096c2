import Logging
import UbiquityLoop

/// TLS between a `TCPConnection` and an `HTTP2Connection`: the socket's reads go through
/// `TLSSession.receive` (handshake, then decryption into the loop's read buffer, handed to HTTP/2
/// in the same callback); HTTP/2's writes collect here as plaintext and are encrypted in one pass
/// per flush (fewer, fuller records than one per nghttp2 frame), then appended to the socket's
/// write batch. Everything happens on the loop thread in the socket's callbacks: no extra thread,
/// no blocking call.
///
/// The handshake is bounded by HTTP/2's handshake timeout (`ConnectionTimeouts`): the preface
/// cannot arrive before TLS is established, so a client that stalls mid-handshake is closed by
/// the same sweep as a silent plaintext one.
///
/// The client side (`ClientConnection` with a TLS context) is the same object in the client role:
/// it starts the handshake at once and checks the server's certificate names the host.
public final class TLSConnection: TCPConnectionDelegate, FrameSink {
    let tcp: TCPConnection
    private let session: TLSSession
    private let logger: Logger?
    /// Who hears the decrypted stream: the server's `HTTP2Connection` or a client connection.
    /// Strong, as `TCPConnection.delegate` is; the cycle is broken when the socket closes.
    public var owner: (any TLSConnectionOwner)?
    /// Plaintext written by HTTP/2, not yet encrypted (held during the handshake).
    // @exclusivity(unchecked), as TCPConnection's fields: loop-thread only, never accessed
    // through overlapping accesses (nothing this class calls re-enters a write or flush while
    // plaintextOut is being modified). Written per HTTP/2 frame and read per flush: the checks
    // were ~750 of the 2,640 instructions TLS added to a Ping once records were delivered
    // together (callgrind, server-cost-per-call --callgrind, docs/tls.md "Cost").
    @exclusivity(unchecked) private var plaintextOut = ByteBuffer()
    @exclusivity(unchecked) private var closeCalled = false
    /// The refusal's alert is being written: close once it is out.
    @exclusivity(unchecked) private var closeWhenWritten = false
    /// close_notify is queued behind a write in flight: half-close after it.
    @exclusivity(unchecked) private var shutdownWhenWritten = false

    /// The server side of an accepted connection.
    init(tcp: TCPConnection, context: TLSContext, logger: Logger) throws(TLSError) {
        self.tcp = tcp
        self.session = try TLSSession(context: context, role: .server)
        self.logger = logger
        tcp.delegate = self
    }

    /// The client side of a connected socket: sends the ClientHello now; the server's certificate
    /// must name `host`.
    public init(connectedTCP tcp: TCPConnection, context: TLSContext, host: String) throws(TLSError) {
        self.tcp = tcp
        self.session = try TLSSession(context: context, role: .client, peerName: host)
        self.logger = nil
        tcp.delegate = self
        if case .refused(let reason) = session.startHandshake() { throw TLSError(message: reason) }
        sendCiphertext()
    }

    public var loop: EventLoop { tcp.loop }
    public var peerDescription: String { tcp.peerDescription }
    public var isClosed: Bool { closeCalled || tcp.isClosed }
    public var queuedWriteBytes: Int { plaintextOut.count + tcp.queuedWriteBytes }

    public func startReading() { tcp.startReading() }
    public func stopReading() { tcp.stopReading() }

    public func write(_ bytes: UnsafeRawBufferPointer) {
        guard !isClosed else { return }
        plaintextOut.append(bytes)
    }

    public func flush() {
        guard !isClosed else { return }
        if session.machine.mayEncrypt && plaintextOut.count > 0 {
            let ok = session.encrypt(plaintextOut.bytes)
            plaintextOut.removeAll()
            if !ok {
                refused("encrypting failed: \(TLSError.opensslReason())")
                return
            }
        }
        sendCiphertext()
    }

    public func shutdownWrites() {
        guard !isClosed else { return }
        flush()
        session.closeNotify()
        sendCiphertext()
        // uv_shutdown waits for writes libuv holds, not for bytes still in the socket's batch.
        if tcp.pending.count == 0 { tcp.shutdownWrites() } else { shutdownWhenWritten = true }
    }

    public func close() {
        guard !closeCalled else { return }
        closeCalled = true
        plaintextOut.deallocate()
        // A refusal's alert (a few bytes) may still be in flight: let it reach the peer, which
        // then learns why (e.g. no_application_protocol) instead of seeing a bare reset.
        if closeWhenWritten && tcp.hasWriteInFlight { return }
        tcp.close()
    }

    private func sendCiphertext() {
        let out = session.outgoing
        if out.count > 0 {
            tcp.write(out)
            session.consumeOutgoing()
        }
        tcp.flush()
    }

    private func refused(_ reason: String) {
        logger?.debug("TLS connection refused", metadata: ["peer": "\(tcp.peerDescription)", "reason": "\(reason)"])
        sendCiphertext()
        closeWhenWritten = true
        owner?.tlsDidReachEOF(refusal: reason)
    }

    // MARK: TCPConnectionDelegate

    public func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {
        guard !isClosed else { return }
        let scratch = UnsafeMutableRawBufferPointer(start: loop.readBuffer, count: loop.readBufferSize)
        let result = session.receive(bytes, scratch: scratch) { plaintext in
            owner?.tlsDidRead(plaintext)
            return !isClosed
        }
        switch result {
        case .ok:
            // Handshake records, session tickets, and what HTTP/2 wrote during the handshake.
            flush()
        case .refused(let reason):
            refused(reason)
        case .endOfInput:
            owner?.tlsDidReachEOF(refusal: nil)
        }
    }

    public func connectionDidReachEOF(_ connection: TCPConnection, error: UVError?) {
        if closeCalled { tcp.close(); return }
        owner?.tlsDidReachEOF(refusal: nil)
    }

    public func connectionDidDrainWrites(_ connection: TCPConnection) {
        if closeCalled {
            if closeWhenWritten && !tcp.hasWriteInFlight { tcp.close() }
            return
        }
        if shutdownWhenWritten && tcp.pending.count == 0 {
            shutdownWhenWritten = false
            tcp.shutdownWrites()
        }
        owner?.tlsDidDrainWrites()
    }

    public func connectionDidClose(_ connection: TCPConnection) {
        owner?.tlsDidClose()
        owner = nil
    }
}

/// What a `TLSConnection` reports upward; the same events a `TCPConnectionDelegate` hears, on
/// the loop thread, with the bytes already decrypted.
public protocol TLSConnectionOwner: AnyObject {
    func tlsDidRead(_ bytes: UnsafeRawBufferPointer)
    /// End of input; `refusal` is OpenSSL's reason when TLS itself failed (handshake, record).
    func tlsDidReachEOF(refusal: String?)
    func tlsDidDrainWrites()
    func tlsDidClose()
}

extension TLSConnection: ConnectionIO {
    func attach(_ connection: HTTP2Connection) { owner = connection }
}

extension HTTP2Connection: TLSConnectionOwner {
    func tlsDidRead(_ bytes: UnsafeRawBufferPointer) { didRead(bytes) }
    func tlsDidReachEOF(refusal: String?) { didReachEOF() }  // TLSConnection logged the refusal
    func tlsDidDrainWrites() { didDrainWrites() }
    func tlsDidClose() { didClose() }
}
