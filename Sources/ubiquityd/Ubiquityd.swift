import ArgumentParser
import Foundation
import Logging
import UbiquityGRPC
import UbiquityHTTP
import UbiquityInterop
import UbiquityProtos
import UbiquityServices
import UbiquityStorage

@main
struct Ubiquityd: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ubiquityd",
        abstract: "Ubiquity: Core Data–style object stores served over gRPC.",
        version: UbiquityVersion.current)

    @Option(help: "Address to listen on (IPv4 or IPv6 literal).")
    var host = "127.0.0.1"
    @Option(help: "TCP port; 0 picks a free port (the chosen one is printed).")
    var port = 50051
    @Option(help: "Directory for store files (created if missing).")
    var dataDir = "./data"
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
    @Option(help: "Seconds in-flight calls get to finish after SIGTERM/SIGINT.")
    var shutdownGraceSeconds = 10.0
    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical.")
    var logLevel = "info"
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
    @Option(help: "Serve Prometheus metrics (GET /metrics) and a health check (GET /healthz) over HTTP/1.1 on host:port ([v6]:port for IPv6; port 0 picks one, printed). Off unless given; keep it on loopback or a private network.")
    var metricsAddress = ""
    @Option(help: "Milliseconds a metrics connection has, from its accept or last response, to send a whole request before it is closed.")
    var metricsRequestTimeoutMs: UInt64 = HTTPServerConfiguration().requestTimeoutMilliseconds
    @Option(help: "Authentication of data RPCs: on (default; `authorization: Bearer <session token>`, docs/accounts.md) or off (every call acts for the default account; refused unless --host is a loopback address — for measuring the cost of auth).")
    var auth = "on"
    @Option(help: "Seconds a session lasts from Accounts.SignIn.")
    var sessionLifetimeSeconds = 86_400
    @Flag(help: "Also serve grpc.testing.TestService (the gRPC interop test service). For tests only.")
    var enableInteropTesting = false
    @Option(help: "Serve TLS (HTTP/2 over TLS 1.2+, ALPN h2) with this PEM certificate chain; needs --tls-key. SIGHUP reloads both.")
    var tlsCert: String?
    @Option(help: "PEM private key of --tls-cert.")
    var tlsKey: String?
    @Option(help: "PEM CA bundle: require every client to present a certificate issued by it (mutual TLS).")
    var tlsClientCa: String?
    @Flag(help: "Serve plaintext h2c on a non-loopback --host (refused without it: only loopback is plaintext by default).")
    var allowPlaintext = false
    @Option(help: "Restore a full backup (a directory `ubiq admin backup` wrote, with its manifest) into --data-dir, which must be empty or missing, then exit without serving. docs/operations.md \"Back up and restore\".")
    var restoreFrom: String?

    func validate() throws {
        guard (0...65535).contains(port) else { throw ValidationError("--port must be 0...65535") }
        guard eventLoops >= 1 && eventLoops <= 64 else { throw ValidationError("--event-loops must be 1...64") }
        guard blockingThreads >= 0 && blockingThreads <= 256 else { throw ValidationError("--blocking-threads must be 0...256") }
        guard maxReceiveMessageBytes >= 1024 else { throw ValidationError("--max-receive-message-bytes must be at least 1024") }
        guard maxConcurrentStreams >= 1 else { throw ValidationError("--max-concurrent-streams must be at least 1") }
        guard maxHeaderListBytes >= 1024 else { throw ValidationError("--max-header-list-bytes must be at least 1024") }
        guard maxConnections >= 1 else { throw ValidationError("--max-connections must be at least 1") }
        guard maxWriteQueueBytes >= 64 * 1024 else { throw ValidationError("--max-write-queue-bytes must be at least 65536") }
        guard Logger.Level(rawValue: logLevel) != nil else { throw ValidationError("--log-level: unknown level \(logLevel)") }
        guard ["full", "normal"].contains(synchronous.lowercased()) else { throw ValidationError("--synchronous must be full or normal") }
        guard maxOpenStores >= 1 else { throw ValidationError("--max-open-stores must be at least 1") }
        guard writerCacheMib >= 1 else { throw ValidationError("--writer-cache-mib must be at least 1") }
        guard ["on", "off"].contains(walWriteCoalescing.lowercased()) else { throw ValidationError("--wal-write-coalescing must be on or off") }
        guard (0...65536).contains(readerMmapMib) else { throw ValidationError("--reader-mmap-mib must be 0...65536") }
        guard readerCacheMib >= 0 else { throw ValidationError("--reader-cache-mib must be at least 0") }
        guard (0...1000).contains(readerSnapshotHoldMs) else { throw ValidationError("--reader-snapshot-hold-ms must be 0...1000") }
        guard (0...19).contains(writerNice) else { throw ValidationError("--writer-nice must be 0...19") }
        guard (1...1024).contains(checkpointThresholdMib) else { throw ValidationError("--checkpoint-threshold-mib must be between 1 and 1024") }
        guard (0...60_000).contains(idleCheckpointMs) else { throw ValidationError("--idle-checkpoint-ms must be between 0 (off) and 60000") }
        guard (0...4096).contains(checkpointThresholdUnreadMib) else { throw ValidationError("--checkpoint-threshold-unread-mib must be between 0 (off) and 4096") }
        guard maxFetchResults >= 1, maxChangesPerSave >= 1, maxContextsPerAccount >= 1, maxPendingChanges >= 1 else {
            throw ValidationError("--max-fetch-results, --max-changes-per-save, --max-contexts-per-account and --max-pending-changes must be at least 1")
        }
        guard contextIdleSeconds >= 1 else { throw ValidationError("--context-idle-seconds must be at least 1") }
        guard maxPredicateLength >= 16 else { throw ValidationError("--max-predicate-length must be at least 16") }
        guard (0...86_400).contains(minReadableWindowSeconds) else { throw ValidationError("--min-readable-window-seconds must be 0...86400") }
        guard historyRetentionGenerations >= 0, historyRetentionSeconds >= 0, historyRetentionBytes >= 0, tombstoneRetentionSeconds >= 0 else {
            throw ValidationError("--history-retention-generations, --history-retention-seconds, --history-retention-bytes and --tombstone-retention-seconds must be at least 0 (0: no limit)")
        }
        if historyRetentionSeconds > 0 && tombstoneRetentionSeconds > 0 && tombstoneRetentionSeconds < historyRetentionSeconds {
            throw ValidationError("--tombstone-retention-seconds must be at least --history-retention-seconds: the tombstone index outlives the history")
        }
        guard maxSubscribersPerStore >= 1, maxSubscribersPerConnection >= 1 else { throw ValidationError("--max-subscribers-per-store and --max-subscribers-per-connection must be at least 1") }
        guard maxSubscriberLag >= 1 else { throw ValidationError("--max-subscriber-lag must be at least 1") }
        guard feedProgressIntervalMs >= 10 else { throw ValidationError("--feed-progress-interval-ms must be at least 10") }
        guard maxFeedResponseBytes >= 4096 else { throw ValidationError("--max-feed-response-bytes must be at least 4096") }
        guard streamSendBufferBytes >= 1024 else { throw ValidationError("--stream-send-buffer-bytes must be at least 1024") }
        guard feedWindowTransactions >= 1 else { throw ValidationError("--feed-window-transactions must be at least 1") }
        if !metricsAddress.isEmpty && MetricsAddress(metricsAddress) == nil {
            throw ValidationError("--metrics-address must be host:port or [v6]:port, e.g. 127.0.0.1:9464")
        }
        guard metricsRequestTimeoutMs >= 10 else { throw ValidationError("--metrics-request-timeout-ms must be at least 10") }
        guard (tlsCert == nil) == (tlsKey == nil) else { throw ValidationError("--tls-cert and --tls-key go together") }
        guard tlsClientCa == nil || tlsCert != nil else { throw ValidationError("--tls-client-ca needs --tls-cert and --tls-key") }
        if tlsCert == nil && !allowPlaintext && !ServerConfiguration.isLoopback(host: host) {
            throw ValidationError("--host \(host) is not a loopback address: give --tls-cert and --tls-key to serve TLS there, or --allow-plaintext to serve unencrypted h2c (anyone on the network can read and alter it)")
        }
        guard ["on", "off"].contains(auth) else { throw ValidationError("--auth must be on or off") }
        if auth == "off" && !ServerConfiguration.isLoopback(host: host) {
            throw ValidationError("--auth off is only allowed with --host 127.0.0.1 or ::1: anyone who can reach the port could read and write every store")
        }
        guard (1...31_536_000).contains(sessionLifetimeSeconds) else { throw ValidationError("--session-lifetime-seconds must be 1...31536000") }
    }

    func run() throws {
        let level = Logger.Level(rawValue: logLevel) ?? .info
        LoggingSystem.bootstrap { label in
            var h = JSONLogHandler(label: label)
            h.logLevel = level
            return h
        }
        let logger = Logger(label: "ubiquityd")

        try FileManager.default.createDirectory(atPath: dataDir, withIntermediateDirectories: true)
        // Before anything records: the call metrics are made as methods register.
        let metrics = metricsAddress.isEmpty ? nil : DaemonMetrics()

        var config = ServerConfiguration()
        config.host = host
        config.port = port
        config.eventLoops = eventLoops
        config.blockingThreads = blockingThreads
        config.maxReceiveMessageBytes = maxReceiveMessageBytes
        config.maxSendMessageBytes = maxSendMessageBytes
        config.maxConcurrentStreams = maxConcurrentStreams
        config.maxHeaderListBytes = maxHeaderListBytes
        config.maxConnections = maxConnections
        config.maxWriteQueueBytes = maxWriteQueueBytes
        config.streamOutboundHighWater = streamSendBufferBytes
        config.handshakeTimeoutMilliseconds = handshakeTimeoutMs
        config.idleTimeoutMilliseconds = idleTimeoutMs
        config.shutdownGraceSeconds = shutdownGraceSeconds

        var storage = StorageConfiguration()
        storage.synchronous = synchronous.lowercased() == "normal" ? .normal : .full
        storage.writerCacheKiB = writerCacheMib << 10
        storage.walWriteCoalescing = walWriteCoalescing.lowercased() == "on"
        storage.checkpointThresholdBytes = checkpointThresholdMib << 20
        storage.checkpointThresholdBytesWithoutReaders = checkpointThresholdUnreadMib << 20
        storage.idleCheckpointSeconds = Double(idleCheckpointMs) / 1000
        storage.readerMmapBytes = readerMmapMib << 20
        storage.readerCacheKiB = readerCacheMib > 0 ? readerCacheMib << 10 : nil
        storage.readerSnapshotHoldMilliseconds = readerSnapshotHoldMs
        storage.writerNice = writerNice
        storage.journalSizeLimitBytes = max(checkpointThresholdMib, checkpointThresholdUnreadMib) << 20
        storage.walHardLimitBytes = max(storage.walHardLimitBytes, 4 * storage.checkpointThresholdBytes)
        storage.minimumReadableWindowSeconds = minReadableWindowSeconds
        storage.historyRetentionGenerations = historyRetentionGenerations > 0 ? historyRetentionGenerations : nil
        storage.historyRetentionSeconds = historyRetentionSeconds > 0 ? historyRetentionSeconds : nil
        storage.historyRetentionBytes = historyRetentionBytes > 0 ? historyRetentionBytes : nil
        storage.tombstoneRetentionSeconds = tombstoneRetentionSeconds > 0 ? tombstoneRetentionSeconds : nil
        storage.logger = Logger(label: "ubiquity.storage")
        if metrics != nil { storage.observer = DaemonMetrics.storageObserver() }
        var serviceLimits = ServiceLimits()
        serviceLimits.maxFetchResults = maxFetchResults
        serviceLimits.maxChangesPerSave = maxChangesPerSave
        serviceLimits.maxContextsPerAccount = maxContextsPerAccount
        serviceLimits.maxPendingChangesPerContext = maxPendingChanges
        serviceLimits.contextIdleSeconds = contextIdleSeconds
        serviceLimits.query.maxPredicateLength = maxPredicateLength
        storage.changeFeedWindowTransactions = feedWindowTransactions
        var feedLimits = FeedLimits()
        feedLimits.maxSubscribersPerStore = maxSubscribersPerStore
        feedLimits.maxSubscribersPerConnection = maxSubscribersPerConnection
        feedLimits.maxLagGenerations = maxSubscriberLag
        feedLimits.progressIntervalSeconds = Double(feedProgressIntervalMs) / 1000
        // a response never exceeds what the transport may send
        feedLimits.maxResponseBytes = min(maxFeedResponseBytes, maxSendMessageBytes)
        var kvQuotas = KeyValueQuotas()
        kvQuotas.maxKeys = kvMaxKeys
        kvQuotas.maxAccountBytes = kvMaxAccountBytes
        kvQuotas.maxKeyBytes = kvMaxKeyBytes
        kvQuotas.maxValueBytes = kvMaxValueBytes
        if let restoreFrom {
            let (storage, serviceLimits, feedLimits, kvQuotas, maxOpenStores) = (storage, serviceLimits, feedLimits, kvQuotas, maxOpenStores)
            try restore(from: restoreFrom, logger: logger) {
                try Backend(dataDirectory: $0, storage: storage, maxOpenStores: maxOpenStores, limits: serviceLimits, feedLimits: feedLimits, keyValueQuotas: kvQuotas)
            }
            return
        }
        let backend: Backend
        do {
            backend = try Backend(dataDirectory: dataDir, storage: storage, maxOpenStores: maxOpenStores, limits: serviceLimits, feedLimits: feedLimits,
                                  keyValueQuotas: kvQuotas,
                                  authRequired: auth == "on", sessionLifetimeSeconds: Double(sessionLifetimeSeconds))
        } catch let e as StorageError where e.reason == .directoryLocked {
            logger.critical("data directory in use", metadata: ["data_dir": "\(dataDir)", "error": "\(e)"])
            FileHandle.standardError.write(Data("ubiquityd: \(e.message) (one ubiquityd per data directory)\n".utf8))
            throw ExitCode(2)
        }
        // Every exit from here on, a failed start included, closes every store (checkpointing
        // its WAL) and the catalog: with the port taken, the catalog's SQLite connection used to
        // stay open to exit (LeakSanitizer).
        defer {
            let done = DispatchSemaphore(value: 0)
            Task { await backend.shutdown(); done.signal() }
            done.wait()
        }

        let limitsConfig = config
        let counters = ServerCountersBox()
        var router = Router(callMetrics: metrics != nil)
        let serviceNames = ServiceNamesBox()
        let dataServices = ["ubiquity.v1.Accounts", "ubiquity.v1.Models", "ubiquity.v1.Stores", "ubiquity.v1.Contexts", "ubiquity.v1.Changes",
                            "ubiquity.v1.KeyValue"]
        let health = HealthService(services: ["ubiquity.v1.Admin"] + dataServices)
        let contexts = ContextRegistry(limits: serviceLimits)
        ModelsService(backend: backend).register(into: &router)
        StoresService(backend: backend, contexts: contexts).register(into: &router)
        AccountsService(backend: backend, contexts: contexts).register(into: &router)
        let contextsService = ContextsService(backend: backend, registry: contexts)
        contextsService.register(into: &router)
        ChangesService(backend: backend).register(into: &router)
        KeyValueService(backend: backend).register(into: &router)
        backend.subscriptions.startSweeper()
        let expiry = contextsService.startExpiry(interval: min(30, max(0.5, contextIdleSeconds / 4)))
        defer { expiry.cancel() }  // before the backend shuts down (defers run last-first)
        var admin = AdminService(version: UbiquityVersion.current, counters: counters.counters) {
            var info = Ubiquity_V1_ServerInfo()
            info.name = "ubiquityd"
            info.version = UbiquityVersion.current
            info.listenAddress = counters.listenAddress
            info.startedAtMicros = counters.startedAtMicros
            info.services = serviceNames.names
            info.eventLoops = UInt32(limitsConfig.eventLoops)
            var limits = Ubiquity_V1_TransportLimits()
            limits.maxReceiveMessageBytes = UInt32(limitsConfig.maxReceiveMessageBytes)
            limits.maxSendMessageBytes = UInt32(limitsConfig.maxSendMessageBytes)
            limits.maxConcurrentStreams = UInt32(limitsConfig.maxConcurrentStreams)
            limits.maxHeaderListBytes = UInt32(limitsConfig.maxHeaderListBytes)
            limits.maxConnections = UInt32(limitsConfig.maxConnections)
            limits.maxWriteQueueBytes = UInt32(limitsConfig.maxWriteQueueBytes)
            info.limits = limits
            return info
        }
        admin.backups = Backups(backend: backend, contexts: contexts, serverVersion: UbiquityVersion.current)
        admin.register(into: &router)
        health.register(into: &router)
        if enableInteropTesting {
            InteropTestService.register(into: &router)
            health.set("grpc.testing.TestService", .serving)
        }
        let reflection = try ReflectionService { serviceNames.names }
        reflection.register(into: &router)
        serviceNames.names = router.services

        var tls: TLSContextStore?
        if let tlsCert, let tlsKey {
            do {
                tls = try TLSContextStore(TLSConfiguration(certificateChainFile: tlsCert, privateKeyFile: tlsKey, clientCAFile: tlsClientCa))
            } catch {
                logger.critical("cannot load the TLS certificate", metadata: ["error": "\(error)"])
                FileHandle.standardError.write(Data("ubiquityd: cannot load the TLS certificate: \(error)\n".utf8))
                throw ExitCode(2)
            }
        } else if !ServerConfiguration.isLoopback(host: host) {
            logger.warning("serving plaintext h2c on a non-loopback address (--allow-plaintext): traffic and credentials can be read and altered on the network", metadata: ["host": "\(host)"])
        }
        let server = GRPCServer(configuration: config, router: router, logger: logger, counters: counters.counters, tls: tls)
        // Subscriptions never end on their own: end them (UNAVAILABLE + resume token) when the
        // drain starts, so they do not hold up the graceful shutdown.
        server.onDrain { health.drain(); backend.endSubscriptions(); metrics?.drain() }
        do {
            try server.start()
            MemoryTrimmer.start()
        } catch {
            logger.critical("cannot listen", metadata: ["host": "\(host)", "port": "\(port)", "error": "\(error)"])
            throw ExitCode(2)
        }
        let address = host.contains(":") ? "[\(host)]:\(server.port)" : "\(host):\(server.port)"
        counters.listenAddress = address
        FileHandle.standardOutput.write(Data("ubiquityd listening on \(address)\n".utf8))
        if let metrics, let metricsAt = MetricsAddress(metricsAddress) {
            metrics.sampleTransport(counters.counters, maxConnections: maxConnections)
            metrics.sampleStorage(backend.directory, maxOpenStores: maxOpenStores)
            metrics.sampleServices(contexts: contexts, subscriptions: backend.subscriptions)
            do {
                let bound = try metrics.start(address: metricsAt, requestTimeoutMilliseconds: metricsRequestTimeoutMs)
                FileHandle.standardOutput.write(Data("ubiquityd metrics on http://\(bound)/metrics\n".utf8))
            } catch {
                logger.critical("cannot serve metrics", metadata: ["address": "\(metricsAddress)", "error": "\(error)"])
                server.beginShutdown()
                server.waitUntilFinished()
                throw ExitCode(2)
            }
        }
        defer { metrics?.stop() }
        logger.info("listening", metadata: ["address": "\(address)", "data_dir": "\(dataDir)", "tls": "\(tls != nil)",
                                            "event_loops": "\(config.eventLoops)", "services": "\(router.services.joined(separator: ","))"])
        server.waitUntilFinished()
    }

    /// `--restore-from`: an offline full restore, then exit (a restart with the flag still set
    /// finds the data directory no longer empty and refuses, instead of restoring twice).
    func restore(from backup: String, logger: Logger, open: @escaping @Sendable (String) throws -> Backend) throws {
        let box = RestoreResultBox()
        let done = DispatchSemaphore(value: 0)
        let dataDir = dataDir
        Task {
            do { box.result = .success(try await Backups.restoreAll(from: backup, into: dataDir, open: open)) } catch { box.result = .failure(error) }
            done.signal()
        }
        done.wait()
        switch box.result! {
        case .success(let m):
            logger.info("restored", metadata: ["backup": "\(backup)", "data_dir": "\(dataDir)", "stores": "\(m.stores.count)"])
            FileHandle.standardOutput.write(Data("ubiquityd: restored \(m.stores.count) stores from \(backup) (taken \(m.createdAt)) into \(dataDir)\n".utf8))
        case .failure(let e):
            logger.critical("restore failed", metadata: ["backup": "\(backup)", "error": "\(e)"])
            FileHandle.standardError.write(Data("ubiquityd: restore from \(backup) failed: \(e)\n".utf8))
            throw ExitCode(2)
        }
    }
}

/// Values filled in after the router is built (read by Admin.GetServerInfo).
final class ServerCountersBox: @unchecked Sendable {
    // @unchecked: every field is written once during start-up, before the server accepts a connection.
    let counters = ServerCounters()
    var listenAddress = ""
    let startedAtMicros = Int64(Date().timeIntervalSince1970 * 1_000_000)
}

final class RestoreResultBox: @unchecked Sendable {
    // @unchecked: written by the restore task before it signals, read after the wait.
    var result: Result<BackupManifest, Error>?
}

final class ServiceNamesBox: @unchecked Sendable {
    // @unchecked: written once during start-up, before the server accepts a connection.
    var names: [String] = []
}

enum UbiquityVersion {
    static let current = "0.1.0"
}
