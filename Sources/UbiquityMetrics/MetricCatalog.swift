/// Every metric `/metrics` exposes: name, type, help text, and histogram buckets. One list, so
/// the exposition always has HELP and TYPE (`promtool check metrics` wants both) and
/// docs/operations.md can be checked against it (`MetricCatalogDocsTests`).
public struct MetricInfo: Sendable {
    public enum Kind: String, Sendable { case counter, gauge, histogram }
    public let name: String
    public let kind: Kind
    public let help: String
    /// Histogram bucket upper bounds (seconds for `_seconds` names).
    public let buckets: [Double]

    init(_ name: String, _ kind: Kind, _ help: String, buckets: [Double] = []) {
        self.name = name
        self.kind = kind
        self.help = help
        self.buckets = buckets
    }
}

public enum MetricCatalog {
    /// Latency buckets from 50 µs (a Ping on loopback) to 10 s (a large import).
    static let latencyBuckets: [Double] = [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                           0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]
    /// Durations of fsync-bound work: 250 µs to 30 s.
    static let diskBuckets: [Double] = [0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                        1, 2.5, 5, 10, 30]

    public static let all: [MetricInfo] = [
        // gRPC calls (recorded by the transport, per method; go-grpc-prometheus names).
        MetricInfo("grpc_server_handled_total", .counter,
                   "gRPC calls completed, by service, method, type and status code."),
        MetricInfo("grpc_server_handling_seconds", .histogram,
                   "Time from a call's admission to its status, by service, method and type.", buckets: latencyBuckets),
        // Transport (sampled at scrape time).
        MetricInfo("ubiquity_grpc_connections_open", .gauge, "HTTP/2 connections open now."),
        MetricInfo("ubiquity_grpc_connections_max", .gauge, "Most HTTP/2 connections the server accepts (--max-connections)."),
        MetricInfo("ubiquity_grpc_connections_accepted_total", .counter, "HTTP/2 connections accepted."),
        MetricInfo("ubiquity_grpc_connections_refused_total", .counter,
                   "Connections closed on accept because --max-connections were open or the server was draining."),
        MetricInfo("ubiquity_grpc_connections_timed_out_total", .counter,
                   "Connections closed by the handshake or idle timeout."),
        MetricInfo("ubiquity_grpc_streams_open", .gauge, "HTTP/2 streams (calls in flight) open now."),
        MetricInfo("ubiquity_grpc_protocol_errors_total", .counter,
                   "Connections ended for an HTTP/2 protocol error or abuse (floods, bad frames)."),
        // Storage (sampled at scrape time, over the open stores).
        MetricInfo("ubiquity_stores_open", .gauge, "Stores open now (each holds a writer thread and readers)."),
        MetricInfo("ubiquity_stores_max_open", .gauge, "Most stores kept open at once (--max-open-stores)."),
        MetricInfo("ubiquity_store_evictions_total", .counter,
                   "Open stores closed to make room for another (least recently used first)."),
        MetricInfo("ubiquity_store_writer_queue_jobs", .gauge,
                   "Writer jobs (saves, exclusive work) queued over all open stores."),
        MetricInfo("ubiquity_store_writer_queue_jobs_max", .gauge,
                   "Writer jobs queued at the open store with the longest queue."),
        MetricInfo("ubiquity_store_wal_bytes", .gauge,
                   "WAL content (bytes since each WAL's last restart) over all open stores, as of their last commit."),
        MetricInfo("ubiquity_store_wal_bytes_max", .gauge,
                   "WAL content of the open store with the largest WAL, as of its last commit."),
        MetricInfo("ubiquity_store_reader_queue_jobs", .gauge,
                   "Read jobs waiting for a reader thread over all open stores."),
        // Storage (recorded by the writer and reader threads, over all stores).
        MetricInfo("ubiquity_store_commit_seconds", .histogram,
                   "Duration of one group commit (BEGIN to COMMIT of its saves, fsync included).", buckets: diskBuckets),
        MetricInfo("ubiquity_store_group_commit_saves", .histogram,
                   "Saves committed together in one group commit.", buckets: [1, 2, 4, 8, 16, 32, 64, 128]),
        MetricInfo("ubiquity_store_checkpoint_seconds", .histogram,
                   "Duration of one WAL checkpoint by a store's writer.", buckets: diskBuckets),
        MetricInfo("ubiquity_store_reader_wait_seconds", .histogram,
                   "Time a read waited in its store's queue for a free reader thread.", buckets: latencyBuckets),
        MetricInfo("ubiquity_store_open_seconds", .histogram,
                   "Time to open a closed store on demand (first read connection and state; writer and schema too if the file needs them; pools), on the calling request's path.",
                   buckets: latencyBuckets),
        MetricInfo("ubiquity_store_close_seconds", .histogram,
                   "Time to close an open store (evicted to make room, or idle), its TRUNCATE checkpoint included if it was written to.",
                   buckets: diskBuckets),
        // Services (sampled at scrape time).
        MetricInfo("ubiquity_contexts_open", .gauge, "Editing contexts open now (each may pin a generation)."),
        MetricInfo("ubiquity_feed_subscribers", .gauge, "Subscribe calls (change-feed subscribers) open now."),
        MetricInfo("ubiquity_feed_subscriber_lag_generations_max", .gauge,
                   "Generations the furthest-behind subscriber trails its store's current generation."),
        // Process (standard names of Prometheus client libraries).
        MetricInfo("process_resident_memory_bytes", .gauge, "Resident memory size in bytes."),
        MetricInfo("process_virtual_memory_bytes", .gauge, "Virtual memory size in bytes."),
        MetricInfo("process_open_fds", .gauge, "Number of open file descriptors."),
        MetricInfo("process_max_fds", .gauge, "Maximum number of open file descriptors (RLIMIT_NOFILE)."),
        MetricInfo("process_cpu_seconds_total", .counter, "Total user and system CPU time spent in seconds."),
        MetricInfo("process_start_time_seconds", .gauge, "Start time of the process since unix epoch in seconds."),
    ]

    static let byName: [String: MetricInfo] = Dictionary(uniqueKeysWithValues: all.map { ($0.name, $0) })

    public static func info(_ name: String) -> MetricInfo? { byName[name] }
}
