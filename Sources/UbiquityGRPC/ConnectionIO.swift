import UbiquityLoop
import Logging

/// What an `HTTP2Connection` needs of its socket: where its bytes go, reading on and off, the
/// half-close and close, and the loop it lives on. `TCPConnection` in the server; a recording
/// fake in the transport tests (`HTTP2ConnectionTests`), which feed client bytes in and read the
/// server's bytes out with no socket.
///
/// Loop thread only, both sides: the connection calls these from its loop, and an implementation
/// reports back (`HTTP2Connection.didRead` and its siblings) on the same loop.
protocol ConnectionIO: FrameSink {
    var loop: EventLoop { get }
    var peerDescription: String { get }
    var isClosed: Bool { get }
    func startReading()
    func stopReading()
    /// Sends FIN after the queued bytes; reading goes on.
    func shutdownWrites()
    func close()
    /// Makes `connection` the receiver of this socket's events.
    func attach(_ connection: HTTP2Connection)
}

extension TCPConnection: ConnectionIO {
    func attach(_ connection: HTTP2Connection) { delegate = connection }
}

extension HTTP2Connection: TCPConnectionDelegate {
    func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) { didRead(bytes) }
    func connectionDidReachEOF(_ connection: TCPConnection, error: UVError?) { didReachEOF() }
    func connectionDidDrainWrites(_ connection: TCPConnection) { didDrainWrites() }
    func connectionDidClose(_ connection: TCPConnection) { didClose() }
}

/// Shared by all connections of a server: configuration, routes, counters, logger.
final class ConnectionEnvironment: Sendable {
    let configuration: ServerConfiguration
    let router: Router
    let counters: ServerCounters
    let logger: Logger
    /// Workers for `.blocking` handlers; nil when the router has none.
    let blockingPool: BlockingPool?
    init(configuration: ServerConfiguration, router: Router, counters: ServerCounters, logger: Logger,
         blockingPool: BlockingPool? = nil) {
        self.configuration = configuration
        self.router = router
        self.counters = counters
        self.logger = logger
        self.blockingPool = blockingPool
    }
}
