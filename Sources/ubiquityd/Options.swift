import ArgumentParser
import UbiquityGRPC
import UbiquityHTTP
import UbiquityServices
import UbiquityStorage

/// Where the settings come from (read before parsing by `LayeredArguments`; declared here for
/// `--help` and so the parser accepts them).
struct ConfigurationOptions: ParsableArguments {
    @Option(name: .customLong("config"), help: "YAML config file: KEY: VALUE per line, keys named like the flags (ubiquityd --list-settings). Precedence: flag > environment (UBIQUITY_KEY) > file > default. Also UBIQUITY_CONFIG.")
    var configFile: String?
    @Flag(help: "Validate the configuration (flags, environment, --config file), print the settings that are not at their default and where each came from, and exit: 0 if valid.")
    var checkConfig = false
    @Flag(help: "Print every setting: config-file key, environment variable, default, group; then exit.")
    var listSettings = false
}

/// One-shot actions: the server does them and exits. Not settings, so no config-file key or
/// environment variable (`SettingsTable.meta`): a config file must not restore at every start.
struct ActionOptions: ParsableArguments {
    @Option(help: "Restore a full backup (a directory `ubiq admin backup` wrote, with its manifest) into --data-dir, which must be empty or missing, then exit without serving. docs/operations.md \"Back up and restore\".")
    var restoreFrom: String?
}

/// The flags most deployments set: where to listen, TLS, where the data lives, logging.
struct ServerOptions: ParsableArguments {
    @Option(help: "Address to listen on (IPv4 or IPv6 literal).")
    var host = "127.0.0.1"
    @Option(help: "TCP port; 0 picks a free port (the chosen one is printed).")
    var port = 50051
    @Option(help: "Directory for store files (created if missing).")
    var dataDir = "./data"
    @Option(help: "Seconds in-flight calls get to finish after SIGTERM/SIGINT.")
    var shutdownGraceSeconds = 10.0
    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical.")
    var logLevel = "info"
    @Option(help: "Serve TLS (HTTP/2 over TLS 1.2+, ALPN h2) with this PEM certificate chain; needs --tls-key. SIGHUP reloads both.")
    var tlsCert: String?
    @Option(help: "PEM private key of --tls-cert.")
    var tlsKey: String?
    @Option(help: "PEM CA bundle: require every client to present a certificate issued by it (mutual TLS).")
    var tlsClientCa: String?
    @Flag(help: "Serve plaintext h2c on a non-loopback --host (refused without it: only loopback is plaintext by default).")
    var allowPlaintext = false
    @Option(help: "Authentication of data RPCs: on (default; `authorization: Bearer <session token>`, docs/accounts.md) or off (every call acts for the default account; refused unless --host is a loopback address — for measuring the cost of auth).")
    var auth = "on"
    @Option(help: "Seconds a session lasts from Accounts.SignIn.")
    var sessionLifetimeSeconds = 86_400
    @Flag(help: "Let devices not yet signed in work in local stores of their own (Accounts.StartLocalSession), imported into an account on their first sign-in (docs/accounts.md \"Local stores\").")
    var localStores = false
    @Flag(help: "Shut down gracefully (as on SIGTERM) when standard input reaches end of file: for a supervisor or test harness that holds a pipe to the server's stdin, so the server never outlives it.")
    var exitOnStdinEof = false
    @Option(help: "Serve Prometheus metrics (GET /metrics) and a health check (GET /healthz) over HTTP/1.1 on host:port ([v6]:port for IPv6; port 0 picks one, printed). Off unless given; keep it on loopback or a private network.")
    var metricsAddress = ""
}

/// The flags an operator rarely needs to change: transport and storage tuning, limits and quotas.
/// A separate group so `--help` shows the essential flags first (config file key = flag name).
struct TuningOptions: ParsableArguments {
    @Option(help: "Event-loop threads (more than one shares the port with SO_REUSEPORT).")
    var eventLoops = 1
    @Option(help: "Worker threads for blocking (synchronous) handlers; 0 = one per core.")
    var blockingThreads = 0
    @Option(help: "Largest request message accepted, in bytes.")
    var maxReceiveMessageBytes = 4 * 1024 * 1024
    @Option(help: "Largest response message sent, in bytes.")
    var maxSendMessageBytes = 4 * 1024 * 1024
    @Option(help: "SETTINGS_MAX_CONCURRENT_STREAMS per connection.")
    var maxConcurrentStreams = 100
    @Option(help: "Largest request header list, in bytes.")
    var maxHeaderListBytes = 16 * 1024
    @Option(help: "Most simultaneous connections.")
    var maxConnections = 1024
    @Option(help: "Milliseconds a new connection has to send the HTTP/2 preface and SETTINGS before it is closed; 0: no limit.")
    var handshakeTimeoutMs: UInt64 = ServerConfiguration().handshakeTimeoutMilliseconds
    @Option(help: "Milliseconds a connection may go without an open stream before it gets GOAWAY and is closed; 0: never.")
    var idleTimeoutMs: UInt64 = ServerConfiguration().idleTimeoutMilliseconds
    @Option(help: "Per-connection write queue bound in bytes; past it the server stops reading that connection.")
    var maxWriteQueueBytes = 1024 * 1024
    @Option(help: "SQLite synchronous level for store writes: full (default; a save that returned OK survives power loss) or normal.")
    var synchronous = "full"
    @Option(help: "Coalesce each store writer's WAL frame writes into one write per run of frames: on (default) or off.")
    var walWriteCoalescing = "on"
    @Option(help: "Stores kept open at once (least recently used close first).")
    var maxOpenStores = 256
    @Option(help: "Page cache of each open store's writer connection, in MiB (filled only as pages are used).")
    var writerCacheMib = 32
    @Option(help: "Bytes of each store file a read connection maps into memory, in MiB (PRAGMA mmap_size); 0: no mapping.")
    var readerMmapMib = 1024
    @Option(help: "Page cache of each store read connection, in MiB; 0: SQLite's default (2 MiB).")
    var readerCacheMib = 0
    @Option(help: "How long a store read connection may keep its SQLite snapshot for later reads at a generation it contains, in milliseconds (0-1000); 0: one transaction per read.")
    var readerSnapshotHoldMs = StorageConfiguration().readerSnapshotHoldMilliseconds
    @Option(help: "A store read connection unused this long, in seconds, closes (the next read opens one again); 0: never.")
    var readerIdleSeconds = StorageConfiguration().readerIdleSeconds
    @Option(help: "Most threads of the shared writer pool every open store's saves and checkpoints run on (1-64); it bounds how many stores commit, and wait for their fsyncs, at once.")
    var writerThreads = StorageConfiguration().writerThreads
    @Option(help: "CPU priority (nice value, 0-19) of each store's writer thread; higher lets reads take more of the cores while saves run. 0: the process's.")
    var writerNice = 0
    @Option(help: "WAL content, in MiB, past which a store's writer checkpoints after a commit (also the WAL file's size cap).")
    var checkpointThresholdMib = 32
    @Option(help: "The threshold instead while nobody has read a store since its WAL last restarted (write-only bursts: fewer, cheaper checkpoints); 0: always --checkpoint-threshold-mib. Also the WAL file's size cap.")
    var checkpointThresholdUnreadMib = 128
    @Option(help: "Milliseconds a store's writer waits, idle after a commit that left its WAL above --checkpoint-threshold-mib, before it checkpoints and restarts the WAL by itself (0: only commits checkpoint).")
    var idleCheckpointMs = 100
    @Option(help: "Objects returned by one Fetch or GetObjects call.")
    var maxFetchResults = 10_000
    @Option(help: "Changes in one Save, objects in one BatchInsert, Seed or ImportStore.")
    var maxChangesPerSave = 10_000
    @Option(help: "Open contexts per account.")
    var maxContextsPerAccount = 256
    @Option(help: "Pending changes per context.")
    var maxPendingChanges = 10_000
    @Option(help: "Seconds a context may sit unused before it is closed and its pin released.")
    var contextIdleSeconds = 600.0
    @Option(help: "Seconds a store transition (sign-out, …) waits for the contexts concerned to save before it resets them.")
    var transitionSaveSeconds = 30.0
    @Option(help: "Seconds a store transition waits, after StoresWillChange, for the subscribers that asked to acknowledge it (acknowledges_store_events) before it goes on; 0: it does not wait.")
    var transitionAckSeconds = 10.0
    @Option(help: "Longest predicate accepted, in characters.")
    var maxPredicateLength = 16_384
    @Option(help: "Seconds every generation stays readable after it stops being current (a token read a moment ago still works under write load); 0: only pins and reads in flight keep old generations.")
    var minReadableWindowSeconds = StorageConfiguration().minimumReadableWindowSeconds
    @Option(help: "History transactions more than this many generations behind current are trimmed; 0: no such limit (the default).")
    var historyRetentionGenerations: Int64 = 0
    @Option(help: "History transactions older than this many seconds are trimmed (default 30 days); 0: no age limit.")
    var historyRetentionSeconds = StorageConfiguration().historyRetentionSeconds ?? 0
    @Option(help: "The oldest history transactions are trimmed while a store's history records hold more than this many bytes (default 1 GiB); 0: no size limit.")
    var historyRetentionBytes = StorageConfiguration().historyRetentionBytes ?? 0
    @Option(help: "Tombstone index entries (IDs of deleted objects, FetchDeletions) older than this many seconds are trimmed once their history is gone (default 180 days); 0: keep them all.")
    var tombstoneRetentionSeconds = StorageConfiguration().tombstoneRetentionSeconds ?? 0
    @Option(help: "Per streaming call: response bytes queued for a peer that is not reading before the handler waits (a Subscribe's buffer).")
    var streamSendBufferBytes = ServerConfiguration().streamOutboundHighWater
    @Option(help: "Key-value store: keys per account.")
    var kvMaxKeys = KeyValueQuotas().maxKeys
    @Option(help: "Key-value store: bytes per account (every key's UTF-8 plus its value).")
    var kvMaxAccountBytes = KeyValueQuotas().maxAccountBytes
    @Option(help: "Key-value store: UTF-8 bytes of one key.")
    var kvMaxKeyBytes = KeyValueQuotas().maxKeyBytes
    @Option(help: "Key-value store: bytes of one value.")
    var kvMaxValueBytes = KeyValueQuotas().maxValueBytes
    @Option(help: "Key-value store: deleted keys' tombstones older than this many seconds are trimmed (default 30 days, like history); a subscriber resuming from before a trimmed one gets HISTORY_EXPIRED. 0: keep them all.")
    var kvTombstoneRetentionSeconds: Double = 30 * 24 * 3600
    @Option(help: "Change feed: open Subscribe calls per store.")
    var maxSubscribersPerStore = FeedLimits().maxSubscribersPerStore
    @Option(help: "Change feed: open Subscribe calls per connection.")
    var maxSubscribersPerConnection = FeedLimits().maxSubscribersPerConnection
    @Option(help: "Change feed: a subscriber that stopped reading is ended (RESOURCE_EXHAUSTED, with its resume token) once it is this many generations behind its store.")
    var maxSubscriberLag: Int64 = FeedLimits().maxLagGenerations
    @Option(help: "Change feed: milliseconds between progress markers to an idle filtered subscriber (and between checks for subscribers that stopped reading).")
    var feedProgressIntervalMs = Int(FeedLimits().progressIntervalSeconds * 1000)
    @Option(help: "Change feed: bytes of transactions in one Subscribe response (a larger transaction is sent in parts); at most --max-send-message-bytes.")
    var maxFeedResponseBytes = FeedLimits().maxResponseBytes
    @Option(help: "Change feed: recent transactions each open store keeps in memory for its subscribers (older positions read history from disk).")
    var feedWindowTransactions = StorageConfiguration().changeFeedWindowTransactions
    @Option(help: "Milliseconds a metrics connection has, from its accept or last response, to send a whole request before it is closed.")
    var metricsRequestTimeoutMs: UInt64 = HTTPServerConfiguration().requestTimeoutMilliseconds
    @Flag(help: "Also serve grpc.testing.TestService (the gRPC interop test service). For tests only.")
    var enableInteropTesting = false
}
