import CoreMetrics
import UbiquityGRPC
import UbiquityHTTP
import UbiquityLock
import UbiquityMetrics
import UbiquityServices
import UbiquityStorage

/// ubiquityd's Prometheus endpoint (`--metrics-address`): bootstraps swift-metrics with the
/// exporter (so the transport's call metrics and the storage observer record into it), samples
/// what is a state at scrape time, and serves GET /metrics and /healthz over HTTP/1.1.
final class DaemonMetrics: Sendable {
    let exporter = MetricsExporter()
    private let draining = Lock(false)
    private let server = Lock<HTTPServer?>(nil)

    /// Call once per process, before the router registers its methods (their metrics are made
    /// then, through the bootstrapped backend).
    init() {
        MetricsSystem.bootstrap(exporter.factory)
        ProcessMetrics.register(in: exporter)
    }

    /// The storage engine's reports, into histograms aggregated over all stores: per-store
    /// series would be 10,000 × each histogram's buckets at full scale, and per-open-store
    /// series would appear and vanish with eviction. The per-store worst case is the `_max`
    /// gauges of `sampleStorage`.
    static func storageObserver() -> StorageObserver {
        let commit = CoreMetrics.Timer(label: "ubiquity_store_commit_seconds")
        let saves = Recorder(label: "ubiquity_store_group_commit_saves", aggregate: true)
        let checkpoint = CoreMetrics.Timer(label: "ubiquity_store_checkpoint_seconds")
        let readerWait = CoreMetrics.Timer(label: "ubiquity_store_reader_wait_seconds")
        let opened = CoreMetrics.Timer(label: "ubiquity_store_open_seconds")
        let closed = CoreMetrics.Timer(label: "ubiquity_store_close_seconds")
        var o = StorageObserver()
        o.groupCommitted = { n, seconds in
            commit.recordNanoseconds(Int64(seconds * 1e9))
            saves.record(n)
        }
        o.checkpointed = { checkpoint.recordNanoseconds(Int64($0 * 1e9)) }
        o.readerWaited = { readerWait.recordNanoseconds(Int64($0 * 1e9)) }
        o.storeOpened = { opened.recordNanoseconds(Int64($0 * 1e9)) }
        o.storeClosed = { closed.recordNanoseconds(Int64($0 * 1e9)) }
        return o
    }

    func sampleTransport(_ counters: ServerCounters, maxConnections: Int) {
        let e = exporter
        let open = e.gauge("ubiquity_grpc_connections_open"), streams = e.gauge("ubiquity_grpc_streams_open")
        e.gauge("ubiquity_grpc_connections_max").set(Double(maxConnections))
        let accepted = e.sampledCounter("ubiquity_grpc_connections_accepted_total")
        let refused = e.sampledCounter("ubiquity_grpc_connections_refused_total")
        let timedOut = e.sampledCounter("ubiquity_grpc_connections_timed_out_total")
        let protocolErrors = e.sampledCounter("ubiquity_grpc_protocol_errors_total")
        e.addSampler {
            open.set(Double(counters.openConnections.load(ordering: .relaxed)))
            streams.set(Double(counters.openStreams.load(ordering: .relaxed)))
            accepted.set(total: counters.acceptedConnections.load(ordering: .relaxed))
            refused.set(total: counters.refusedConnections.load(ordering: .relaxed))
            timedOut.set(total: counters.timedOutConnections.load(ordering: .relaxed))
            protocolErrors.set(total: counters.protocolErrors.load(ordering: .relaxed))
        }
    }

    func sampleStorage(_ directory: StoreDirectory, maxOpenStores: Int) {
        let e = exporter
        let open = e.gauge("ubiquity_stores_open")
        e.gauge("ubiquity_stores_max_open").set(Double(maxOpenStores))
        let evictions = e.sampledCounter("ubiquity_store_evictions_total")
        let writerQueue = e.gauge("ubiquity_store_writer_queue_jobs"), writerQueueMax = e.gauge("ubiquity_store_writer_queue_jobs_max")
        let wal = e.gauge("ubiquity_store_wal_bytes"), walMax = e.gauge("ubiquity_store_wal_bytes_max")
        let readerQueue = e.gauge("ubiquity_store_reader_queue_jobs")
        e.addSampler {
            open.set(Double(directory.openCount))
            evictions.set(total: Double(directory.evictionCount))
            let stats = directory.openStoreStatistics()
            writerQueue.set(Double(stats.reduce(0) { $0 + $1.writerQueueJobs }))
            writerQueueMax.set(Double(stats.map(\.writerQueueJobs).max() ?? 0))
            wal.set(Double(stats.reduce(0) { $0 + $1.walBytes }))
            walMax.set(Double(stats.map(\.walBytes).max() ?? 0))
            readerQueue.set(Double(stats.reduce(0) { $0 + $1.readerQueueJobs }))
        }
    }

    func sampleServices(contexts: ContextRegistry, subscriptions: Subscriptions) {
        let e = exporter
        let open = e.gauge("ubiquity_contexts_open")
        let subscribers = e.gauge("ubiquity_feed_subscribers"), lag = e.gauge("ubiquity_feed_subscriber_lag_generations_max")
        e.addSampler {
            open.set(Double(contexts.count))
            subscribers.set(Double(subscriptions.count()))
            lag.set(Double(subscriptions.maxLagGenerations()))
        }
    }

    /// Binds `host:port` (`[v6]:port` for IPv6) and serves; returns the bound address.
    func start(address: MetricsAddress, requestTimeoutMilliseconds: UInt64) throws -> String {
        var config = HTTPServerConfiguration()
        config.host = address.host
        config.port = address.port
        config.requestTimeoutMilliseconds = requestTimeoutMilliseconds
        let s = HTTPServer(configuration: config, routes: exporter.routes(healthy: { [self] in !draining.withLock { $0 } }), name: "ubq-metrics")
        try s.start()
        server.withLock { $0 = s }
        return address.host.contains(":") ? "[\(address.host)]:\(s.port)" : "\(address.host):\(s.port)"
    }

    /// The server is draining: /healthz answers 503 from now on (the endpoint stays up, so the
    /// drain can be watched, until `stop`).
    func drain() { draining.withLock { $0 = true } }

    func stop() {
        server.withLock { s in s?.stop(); s = nil }
    }
}

/// `--metrics-address`: `host:port`, `[v6]:port`.
struct MetricsAddress {
    let host: String
    let port: Int

    init?(_ text: String) {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]), (0...65535).contains(port) else { return nil }
        var host = String(text[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty else { return nil }
        self.host = host
        self.port = port
    }
}
