import Dispatch
import UbiquityLock
import UbiquityLoop

/// Limits of the HTTP/1.1 server (`/metrics` is for a scraper or two, not for the world).
public struct HTTPServerConfiguration: Sendable {
    public var host = "127.0.0.1"
    public var port = 9464
    /// Connections open at once; more are closed as soon as they are accepted.
    public var maxConnections = 16
    /// Most bytes of one request (line, headers, body); past it: 431 and close.
    public var maxRequestBytes = 8192
    /// A connection gets this long, from its accept or its last response, to send a whole
    /// request; then it is closed (a slow or idle client holds a slot for no longer).
    public var requestTimeoutMilliseconds: UInt64 = 10_000

    public init() {}
}

/// A small HTTP/1.1 server on a libuv loop of its own: GET of a few paths (`HTTPRoutes`),
/// keep-alive, bounded requests and connections, slow clients timed out. Its own loop so a
/// scrape (rendering every series, sampling every open store) never stalls a gRPC loop.
public final class HTTPServer: Sendable {
    public let configuration: HTTPServerConfiguration
    private let routes: HTTPRoutes
    private let thread: EventLoopThread
    private let state: LoopBound<HTTPServerState>
    private let boundPort = Lock<Int>(0)

    public init(configuration: HTTPServerConfiguration, routes: HTTPRoutes, name: String = "ubq-http") {
        self.configuration = configuration
        self.routes = routes
        thread = EventLoopThread(name: name)
        state = LoopBound(HTTPServerState(configuration: configuration, routes: routes), loop: thread.loop)
    }

    /// The bound port (useful with port 0); valid after `start`.
    public var port: Int { boundPort.withLock { $0 } }

    /// Starts the loop thread and binds. Throws if the address cannot be bound.
    public func start() throws {
        let result = Lock<Result<Int, UVError>?>(nil)
        let ready = DispatchSemaphore(value: 0)
        let state = self.state
        let configuration = self.configuration
        thread.start { loop in
            let r: Result<Int, UVError>
            do {
                let s = state.get
                s.listener = try TCPListener(loop: loop, host: configuration.host, port: configuration.port, reusePort: false) { tcp in
                    s.accept(tcp)
                }
                s.startSweep(loop: loop)
                r = .success(s.listener!.port)
            } catch {
                r = .failure((error as? UVError) ?? UVError(-22))
            }
            result.withLock { $0 = r }
            ready.signal()
        }
        ready.wait()
        switch result.withLock({ $0 })! {
        case .success(let p):
            boundPort.withLock { $0 = p }
        case .failure(let e):
            stop()
            throw e
        }
    }

    /// Closes the listener and every connection, then ends the loop thread. Idempotent.
    public func stop() {
        let state = self.state
        thread.loop.execute { state.get.closeAll() }
        thread.loop.stop()
        thread.join()
    }
}

/// The server's loop-thread state.
final class HTTPServerState {
    // Invariant: used on the server loop's thread only.
    let configuration: HTTPServerConfiguration
    let routes: HTTPRoutes
    var listener: TCPListener?
    var sweep: LoopTimer?
    var connections: [ObjectIdentifier: HTTPConnection] = [:]

    init(configuration: HTTPServerConfiguration, routes: HTTPRoutes) {
        self.configuration = configuration
        self.routes = routes
    }

    func accept(_ tcp: TCPConnection) {
        guard connections.count < configuration.maxConnections else { return tcp.close() }
        let conn = HTTPConnection(tcp: tcp, routes: routes, maxRequestBytes: configuration.maxRequestBytes) { [unowned self] c in
            connections.removeValue(forKey: ObjectIdentifier(c))
        }
        connections[ObjectIdentifier(conn)] = conn
    }

    /// One timer for all connections: a connection that has not completed a request within the
    /// timeout of its accept or last response is closed.
    func startSweep(loop: EventLoop) {
        let timeout = configuration.requestTimeoutMilliseconds
        let period = max(1, min(1000, timeout / 4))
        let timer = LoopTimer(loop: loop)
        timer.start(milliseconds: period, repeatMilliseconds: period) { [unowned self] in
            let now = loop.now
            for conn in connections.values where now &- conn.since > timeout { conn.timeOut() }
        }
        sweep = timer
    }

    func closeAll() {
        sweep?.close()
        sweep = nil
        listener?.close()
        listener = nil
        for conn in connections.values { conn.tcp.close() }
    }
}

/// One HTTP/1.1 connection: parse, answer each request in order, close on error or when asked.
final class HTTPConnection: TCPConnectionDelegate {
    // Invariant: used on its loop's thread only.
    let tcp: TCPConnection
    private let routes: HTTPRoutes
    private let parser: HTTPRequestParser
    private let onClose: (HTTPConnection) -> Void
    /// Loop milliseconds at accept or at the last response: the request timeout runs from here.
    private(set) var since: UInt64
    /// A response that ends the connection is queued: no more requests are parsed.
    private var closing = false
    private var finSent = false

    init(tcp: TCPConnection, routes: HTTPRoutes, maxRequestBytes: Int, onClose: @escaping (HTTPConnection) -> Void) {
        self.tcp = tcp
        self.routes = routes
        self.parser = HTTPRequestParser(maxRequestBytes: maxRequestBytes)
        self.onClose = onClose
        self.since = tcp.loop.now
        tcp.delegate = self
        tcp.startReading()
    }

    func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {
        guard !closing else { return }
        switch parser.feed(bytes) {
        case .success(let requests):
            for request in requests where !closing {
                send(routes.respond(to: request), close: !request.keepAlive)
            }
        case .failure(.tooLarge):
            send(.text(431, "request larger than \(parser.maxRequestBytes) bytes\n"), close: true)
        case .failure(.malformed(let why)):
            send(.text(400, "malformed HTTP/1.1 request (\(why))\n"), close: true)
        }
    }

    func timeOut() {
        guard !closing else { return tcp.close() }
        send(.text(408, "no complete request in time\n"), close: true)
    }

    private func send(_ response: HTTPResponse, close: Bool) {
        since = tcp.loop.now
        response.serialized(close: close).withUnsafeBytes { tcp.write($0) }
        tcp.flush()
        if close {
            closing = true
            finishIfWritten()
        }
    }

    // A connection that ends with a response is closed gracefully: FIN once the response is
    // out, then what the client still sends is read and dropped until it closes too (or the
    // request timeout passes). Closing with unread bytes would send RST, and a client may then
    // lose the response (the 400 or 431 saying why) before it reads it.
    func connectionDidReachEOF(_ connection: TCPConnection, error: UVError?) {
        tcp.close()
    }

    func connectionDidDrainWrites(_ connection: TCPConnection) {
        finishIfWritten()
    }

    private func finishIfWritten() {
        guard closing, !finSent, tcp.queuedWriteBytes == 0 else { return }
        finSent = true
        tcp.shutdownWrites()
    }

    func connectionDidClose(_ connection: TCPConnection) {
        onClose(self)
    }
}
