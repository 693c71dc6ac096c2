import Dispatch
#if canImport(Glibc)
import Glibc
#endif
import Logging
import Synchronization
import UbiquityLock
import UbiquityLoop

/// A gRPC server: `eventLoops` loop threads, each with its own listener (SO_REUSEPORT when more
/// than one) and its own connections. Handlers run on Swift concurrency's executors, except the
/// opt-in `.inline` (on the loop thread) and `.blocking` (on a fixed worker pool) unary kinds
/// (docs/threading.md, rule 4).
public final class GRPCServer: Sendable {
    public let configuration: ServerConfiguration
    public let counters: ServerCounters
    private let env: ConnectionEnvironment
    private let loops: [EventLoopThread]
    private let states: [LoopBound<LoopState>]
    private let shutdownStarted = Atomic<Bool>(false)
    private let drainHooks = Lock<[@Sendable () -> Void]>([])
    private let boundPort = Atomic<Int>(0)
    private let finished = DispatchSemaphore(value: 0)
    private let loopsDone = Atomic<Int>(0)
    /// Serve TLS with this context (reloaded on SIGHUP); nil: h2c.
    private let tls: TLSContextStore?

    /// `counters` may be created first so services can read them (Admin.GetServerStats).
    public init(configuration: ServerConfiguration, router: Router, logger: Logger, counters: ServerCounters = ServerCounters(),
                tls: TLSContextStore? = nil) {
        self.configuration = configuration
        self.counters = counters
        self.tls = tls
        var pool: BlockingPool?
        if router.methods.values.contains(where: { $0.execution == .blocking }) {
            let n = configuration.blockingThreads > 0 ? configuration.blockingThreads : Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))
            pool = BlockingPool(threads: n)
        }
        env = ConnectionEnvironment(configuration: configuration, router: router, counters: counters, logger: logger,
                                    blockingPool: pool)
        var loops: [EventLoopThread] = []
        var states: [LoopBound<LoopState>] = []
        for i in 0..<max(1, configuration.eventLoops) {
            let t = EventLoopThread(name: "ubq-loop-\(i)")
            loops.append(t)
            states.append(LoopBound(LoopState(), loop: t.loop))
        }
        self.loops = loops
        self.states = states
    }

    /// The port bound by `start()`.
    public var port: Int { boundPort.load(ordering: .relaxed) }

    /// Runs `hook` (once, on some thread) when graceful shutdown begins, before GOAWAY is sent —
    /// e.g. to turn health to NOT_SERVING.
    public func onDrain(_ hook: @escaping @Sendable () -> Void) {
        drainHooks.withLock { $0.append(hook) }
    }

    /// Starts the loop threads and binds every listener. Throws if the address cannot be bound.
    public func start() throws {
        ignoreSIGPIPE()
        var port = configuration.port
        for (i, thread) in loops.enumerated() {
            let result = Lock<Result<Int, UVError>?>(nil)
            let ready = DispatchSemaphore(value: 0)
            let state = states[i]
            let env = self.env
            let reusePort = loops.count > 1
            let bindPort = port
            thread.start { [self] loop in
                let r: Result<Int, UVError>
                do {
                    let listener = try TCPListener(loop: loop, host: env.configuration.host, port: bindPort, reusePort: reusePort) { tcp in
                        self.accept(tcp, state: state.get)
                    }
                    state.get.listener = listener
                    self.startTimeoutSweep(state.get, loop: loop)
                    r = .success(listener.port)
                } catch {
                    r = .failure((error as? UVError) ?? UVError(-22))
                }
                if i == 0 {
                    // Signals are watched on the first loop; they start a graceful shutdown.
                    for sig in [SIGTERM, SIGINT] {
                        state.get.signals.append(SignalWatcher(loop: loop, signal: sig) { [self] _ in self.beginShutdown() })
                    }
                    if let tls = self.tls {
                        state.get.signals.append(SignalWatcher(loop: loop, signal: SIGHUP) { [self] _ in self.reloadTLS(tls) })
                    }
                }
                result.withLock { $0 = r }
                ready.signal()
            }
            ready.wait()
            switch result.withLock({ $0 })! {
            case .success(let p):
                port = p
            case .failure(let e):
                for (j, t) in loops.prefix(i + 1).enumerated() {
                    // The listener's and signal watchers' callbacks hold the server: drop them
                    // on the loop before it stops, or the server and all it owns stay a cycle
                    // that is never freed (LeakSanitizer, port-in-use start).
                    let state = states[j]
                    t.loop.execute { state.get.closeListenerAndSignals() }
                    t.loop.stop()
                    t.join()
                }
                env.blockingPool?.shutdown()
                throw e
            }
        }
        boundPort.store(port, ordering: .relaxed)
    }

    private func accept(_ tcp: TCPConnection, state: LoopState) {
        if env.counters.openConnections.load(ordering: .relaxed) >= UInt64(configuration.maxConnections) || state.shuttingDown {
            env.counters.refusedConnections.wrappingAdd(1, ordering: .relaxed)
            tcp.close()
            return
        }
        let io: any ConnectionIO
        if let tls {
            do {
                io = try TLSConnection(tcp: tcp, context: tls.context, logger: env.logger)
            } catch {
                env.logger.error("cannot start TLS on a connection", metadata: ["peer": "\(tcp.peerDescription)", "error": "\(error)"])
                env.counters.refusedConnections.wrappingAdd(1, ordering: .relaxed)
                tcp.close()
                return
            }
        } else {
            io = tcp
        }
        env.counters.acceptedConnections.wrappingAdd(1, ordering: .relaxed)
        env.counters.openConnections.wrappingAdd(1, ordering: .relaxed)
        let conn = HTTP2Connection(tcp: io, env: env) { [self] c in
            env.counters.openConnections.wrappingSubtract(1, ordering: .relaxed)
            state.connections.removeValue(forKey: ObjectIdentifier(c))
            maybeStopLoop(state, loop: tcp.loop)
        }
        state.connections[ObjectIdentifier(conn)] = conn
    }

    /// SIGHUP: read the certificate and key again. Open connections keep the context they
    /// started with; a file that no longer loads leaves the previous one in use.
    private func reloadTLS(_ tls: TLSContextStore) {
        do {
            try tls.reload()
            env.logger.notice("TLS certificate reloaded", metadata: ["certificate": "\(tls.configuration.certificateChainFile)"])
        } catch {
            env.logger.error("TLS reload failed; still serving the previous certificate", metadata: ["error": "\(error)"])
        }
    }

    /// One timer per loop checks its connections' handshake and idle timeouts
    /// (ConnectionTimeouts): cheaper than a timer per connection, restarted on every stream.
    private func startTimeoutSweep(_ state: LoopState, loop: EventLoop) {
        guard let every = ConnectionTimeouts.sweepInterval(handshakeTimeout: configuration.handshakeTimeoutMilliseconds,
                                                           idleTimeout: configuration.idleTimeoutMilliseconds) else { return }
        let timer = LoopTimer(loop: loop)
        state.sweepTimer = timer
        timer.start(milliseconds: every, repeatMilliseconds: every) {
            let now = loop.now
            for c in Array(state.connections.values) { c.checkTimeouts(now: now) }
        }
    }

    /// Begins a graceful shutdown (safe from any thread, idempotent): drain hooks run, listeners
    /// close, every connection gets GOAWAY, in-flight calls may finish within the grace period,
    /// then whatever remains is cancelled and closed.
    public func beginShutdown() {
        guard !shutdownStarted.exchange(true, ordering: .acquiringAndReleasing) else { return }
        env.logger.info("graceful shutdown started", metadata: ["grace_seconds": "\(configuration.shutdownGraceSeconds)"])
        for hook in drainHooks.withLock({ $0 }) { hook() }
        let graceMs = UInt64(max(0, configuration.shutdownGraceSeconds) * 1000)
        for (i, thread) in loops.enumerated() {
            let state = states[i]
            thread.loop.execute { [self] in
                let s = state.get
                s.shuttingDown = true
                s.closeListenerAndSignals()
                for c in s.connections.values { c.beginGracefulShutdown() }
                let timer = LoopTimer(loop: thread.loop)
                s.graceTimer = timer
                timer.start(milliseconds: graceMs) {
                    for c in Array(s.connections.values) { c.close(reason: .shutdown) }
                }
                maybeStopLoop(s, loop: thread.loop)
            }
        }
    }

    private func maybeStopLoop(_ state: LoopState, loop: EventLoop) {
        guard state.shuttingDown, state.connections.isEmpty, !state.stopped else { return }
        state.stopped = true
        state.graceTimer?.close()
        state.graceTimer = nil
        state.sweepTimer?.close()
        state.sweepTimer = nil
        loop.stop()
        if loopsDone.add(1, ordering: .acquiringAndReleasing).newValue == loops.count {
            finished.signal()
        }
    }

    /// Blocks until shutdown has completed on every loop.
    public func waitUntilFinished() {
        finished.wait()
        for t in loops { t.join() }
        // Every call is over (connections closed), so no job still wants a loop; queued ones see
        // their cancellation and skip the handler.
        env.blockingPool?.shutdown()
        env.logger.info("shutdown complete")
    }
}

/// What one loop owns (loop thread only).
final class LoopState {
    var listener: TCPListener?
    var connections: [ObjectIdentifier: HTTP2Connection] = [:]
    var signals: [SignalWatcher] = []
    var shuttingDown = false
    var stopped = false
    var graceTimer: LoopTimer?
    /// The handshake / idle timeout sweep (GRPCServer.startTimeoutSweep).
    var sweepTimer: LoopTimer?

    /// Stops accepting, watching signals and sweeping for timeouts. Their callbacks hold the
    /// server or this state, so this also breaks the server → state → listener/watcher/timer →
    /// server cycles (LeakSanitizer, docs/testing.md).
    func closeListenerAndSignals() {
        listener?.close()
        listener = nil
        for w in signals { w.close() }
        signals.removeAll()
        sweepTimer?.close()
        sweepTimer = nil
    }
}
