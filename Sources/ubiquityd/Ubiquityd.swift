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

    @OptionGroup(title: "Configuration") var configuration: ConfigurationOptions
    @OptionGroup(title: "Server") var options: ServerOptions
    @OptionGroup(title: "Tuning and limits") var tuning: TuningOptions
    @OptionGroup(title: "Actions") var actions: ActionOptions

    /// Folds the environment and the config file into the command line (`LayeredArguments`),
    /// then parses, validates and runs as ArgumentParser's own `main` would.
    static func main() {
        let layered: LayeredArguments
        do {
            layered = try LayeredArguments(commandLine: Array(CommandLine.arguments.dropFirst()), environment: ProcessInfo.processInfo.environment)
        } catch {
            FileHandle.standardError.write(Data("ubiquityd: \(error)\n".utf8))
            Foundation.exit(ExitCode.validationFailure.rawValue)
        }
        do {
            var command = try parseAsRoot(layered.arguments)
            if let daemon = command as? Ubiquityd, daemon.configuration.listSettings || daemon.configuration.checkConfig {
                try daemon.configuration.checkConfig ? daemon.reportConfiguration(layered) : Self.printSettings()
                return
            }
            try command.run()
        } catch {
            let code = exitCode(for: error)
            if code == .success { exit(withError: error) }
            FileHandle.standardError.write(Data("ubiquityd: \(layered.annotate(fullMessage(for: error)))\n".utf8))
            Foundation.exit(code.rawValue)
        }
    }

    static func printSettings() {
        print(["key", "environment", "kind", "default", "group"].joined(separator: "\t"))
        for s in SettingsTable.all {
            print([s.key, s.environmentVariable, s.isFlag ? "flag" : "value", s.defaultValue ?? "", s.group].joined(separator: "\t"))
        }
    }

    /// `--check-config`: everything `validate()` checks has passed; also load the TLS files
    /// (a start would fail on them), then say which settings are set and where from.
    func reportConfiguration(_ layered: LayeredArguments) throws {
        if let tlsCert = options.tlsCert, let tlsKey = options.tlsKey {
            do { _ = try TLSContextStore(TLSConfiguration(certificateChainFile: tlsCert, privateKeyFile: tlsKey, clientCAFile: options.tlsClientCa)) } catch {
                throw ValidationError("--tls-cert/--tls-key/--tls-client-ca: cannot load: \(error)")
            }
        }
        print("configuration OK\(layered.configPath.map { " (config file \($0))" } ?? "")")
        for name in layered.unknownEnvironment {
            print("note: environment variable \(name) is not a ubiquityd setting; ignored (ubiquityd --list-settings lists them)")
        }
        for key in layered.origins.keys.sorted() {
            guard let o = layered.origins[key] else { continue }
            print(o.origin == "command line" ? "\(key): from the command line" : "\(key): \(o.text)  (\(o.origin))")
        }
    }

    func validate() throws {
        guard (0...65535).contains(options.port) else { throw ValidationError("--port must be 0...65535") }
        guard tuning.eventLoops >= 1 && tuning.eventLoops <= 64 else { throw ValidationError("--event-loops must be 1...64") }
        guard tuning.blockingThreads >= 0 && tuning.blockingThreads <= 256 else { throw ValidationError("--blocking-threads must be 0...256") }
        guard tuning.maxReceiveMessageBytes >= 1024 else { throw ValidationError("--max-receive-message-bytes must be at least 1024") }
        guard tuning.maxConcurrentStreams >= 1 else { throw ValidationError("--max-concurrent-streams must be at least 1") }
        guard tuning.maxHeaderListBytes >= 1024 else { throw ValidationError("--max-header-list-bytes must be at least 1024") }
        guard tuning.maxConnections >= 1 else { throw ValidationError("--max-connections must be at least 1") }
        guard tuning.maxWriteQueueBytes >= 64 * 1024 else { throw ValidationError("--max-write-queue-bytes must be at least 65536") }
        guard Logger.Level(rawValue: options.logLevel) != nil else { throw ValidationError("--log-level: unknown level \(options.logLevel)") }
        guard ["full", "normal"].contains(tuning.synchronous.lowercased()) else { throw ValidationError("--synchronous must be full or normal") }
        guard tuning.maxOpenStores >= 1 else { throw ValidationError("--max-open-stores must be at least 1") }
        guard tuning.writerCacheMib >= 1 else { throw ValidationError("--writer-cache-mib must be at least 1") }
        guard ["on", "off"].contains(tuning.walWriteCoalescing.lowercased()) else { throw ValidationError("--wal-write-coalescing must be on or off") }
        guard (0...65536).contains(tuning.readerMmapMib) else { throw ValidationError("--reader-mmap-mib must be 0...65536") }
        guard tuning.readerCacheMib >= 0 else { throw ValidationError("--reader-cache-mib must be at least 0") }
        guard (0...1000).contains(tuning.readerSnapshotHoldMs) else { throw ValidationError("--reader-snapshot-hold-ms must be 0...1000") }
        guard tuning.readerIdleSeconds >= 0, tuning.readerIdleSeconds.isFinite else { throw ValidationError("--reader-idle-seconds must be at least 0") }
        guard (1...StorageConfiguration.writerThreadLimit).contains(tuning.writerThreads) else { throw ValidationError("--writer-threads must be 1...\(StorageConfiguration.writerThreadLimit)") }
        guard (0...19).contains(tuning.writerNice) else { throw ValidationError("--writer-nice must be 0...19") }
        guard (1...1024).contains(tuning.checkpointThresholdMib) else { throw ValidationError("--checkpoint-threshold-mib must be between 1 and 1024") }
        guard (0...60_000).contains(tuning.idleCheckpointMs) else { throw ValidationError("--idle-checkpoint-ms must be between 0 (off) and 60000") }
        guard (0...4096).contains(tuning.checkpointThresholdUnreadMib) else { throw ValidationError("--checkpoint-threshold-unread-mib must be between 0 (off) and 4096") }
        guard tuning.maxFetchResults >= 1, tuning.maxChangesPerSave >= 1, tuning.maxContextsPerAccount >= 1, tuning.maxPendingChanges >= 1 else {
            throw ValidationError("--max-fetch-results, --max-changes-per-save, --max-contexts-per-account and --max-pending-changes must be at least 1")
        }
        guard tuning.contextIdleSeconds >= 1 else { throw ValidationError("--context-idle-seconds must be at least 1") }
        guard (0...3600).contains(tuning.transitionSaveSeconds) else { throw ValidationError("--transition-save-seconds must be 0-3600") }
        guard (0...3600).contains(tuning.transitionAckSeconds) else { throw ValidationError("--transition-ack-seconds must be 0-3600") }
        guard tuning.maxPredicateLength >= 16 else { throw ValidationError("--max-predicate-length must be at least 16") }
        guard (0...86_400).contains(tuning.minReadableWindowSeconds) else { throw ValidationError("--min-readable-window-seconds must be 0...86400") }
        guard tuning.historyRetentionGenerations >= 0, tuning.historyRetentionSeconds >= 0, tuning.historyRetentionBytes >= 0, tuning.tombstoneRetentionSeconds >= 0 else {
            throw ValidationError("--history-retention-generations, --history-retention-seconds, --history-retention-bytes and --tombstone-retention-seconds must be at least 0 (0: no limit)")
        }
        if tuning.historyRetentionSeconds > 0 && tuning.tombstoneRetentionSeconds > 0 && tuning.tombstoneRetentionSeconds < tuning.historyRetentionSeconds {
            throw ValidationError("--tombstone-retention-seconds must be at least --history-retention-seconds: the tombstone index outlives the history")
        }
        guard tuning.kvTombstoneRetentionSeconds >= 0 else { throw ValidationError("--kv-tombstone-retention-seconds must be at least 0 (0: keep every tombstone)") }
        guard tuning.maxSubscribersPerStore >= 1, tuning.maxSubscribersPerConnection >= 1 else { throw ValidationError("--max-subscribers-per-store and --max-subscribers-per-connection must be at least 1") }
        guard tuning.maxSubscriberLag >= 1 else { throw ValidationError("--max-subscriber-lag must be at least 1") }
        guard tuning.feedProgressIntervalMs >= 10 else { throw ValidationError("--feed-progress-interval-ms must be at least 10") }
        guard tuning.maxFeedResponseBytes >= 4096 else { throw ValidationError("--max-feed-response-bytes must be at least 4096") }
        guard tuning.streamSendBufferBytes >= 1024 else { throw ValidationError("--stream-send-buffer-bytes must be at least 1024") }
        guard tuning.feedWindowTransactions >= 1 else { throw ValidationError("--feed-window-transactions must be at least 1") }
        if !options.metricsAddress.isEmpty && MetricsAddress(options.metricsAddress) == nil {
            throw ValidationError("--metrics-address must be host:port or [v6]:port, e.g. 127.0.0.1:9464")
        }
        guard tuning.metricsRequestTimeoutMs >= 10 else { throw ValidationError("--metrics-request-timeout-ms must be at least 10") }
        guard (options.tlsCert == nil) == (options.tlsKey == nil) else { throw ValidationError("--tls-cert and --tls-key go together") }
        guard options.tlsClientCa == nil || options.tlsCert != nil else { throw ValidationError("--tls-client-ca needs --tls-cert and --tls-key") }
        if options.tlsCert == nil && !options.allowPlaintext && !ServerConfiguration.isLoopback(host: options.host) {
            throw ValidationError("--host \(options.host) is not a loopback address: give --tls-cert and --tls-key to serve TLS there, or --allow-plaintext to serve unencrypted h2c (anyone on the network can read and alter it)")
        }
        guard ["on", "off"].contains(options.auth) else { throw ValidationError("--auth must be on or off") }
        if options.auth == "off" && !ServerConfiguration.isLoopback(host: options.host) {
            throw ValidationError("--auth off is only allowed with --host 127.0.0.1 or ::1: anyone who can reach the port could read and write every store")
        }
        guard (1...31_536_000).contains(options.sessionLifetimeSeconds) else { throw ValidationError("--session-lifetime-seconds must be 1...31536000") }
    }

    func run() throws {
        let level = Logger.Level(rawValue: options.logLevel) ?? .info
        LoggingSystem.bootstrap { label in
            var h = JSONLogHandler(label: label)
            h.logLevel = level
            return h
        }
        let logger = Logger(label: "ubiquityd")

        try FileManager.default.createDirectory(atPath: options.dataDir, withIntermediateDirectories: true)
        // Before anything records: the call metrics are made as methods register.
        let metrics = options.metricsAddress.isEmpty ? nil : DaemonMetrics()

        var config = ServerConfiguration()
        config.host = options.host
        config.port = options.port
        config.eventLoops = tuning.eventLoops
        config.blockingThreads = tuning.blockingThreads
        config.maxReceiveMessageBytes = tuning.maxReceiveMessageBytes
        config.maxSendMessageBytes = tuning.maxSendMessageBytes
        config.maxConcurrentStreams = tuning.maxConcurrentStreams
        config.maxHeaderListBytes = tuning.maxHeaderListBytes
        config.maxConnections = tuning.maxConnections
        config.maxWriteQueueBytes = tuning.maxWriteQueueBytes
        config.streamOutboundHighWater = tuning.streamSendBufferBytes
        config.handshakeTimeoutMilliseconds = tuning.handshakeTimeoutMs
        config.idleTimeoutMilliseconds = tuning.idleTimeoutMs
        config.shutdownGraceSeconds = options.shutdownGraceSeconds

        var storage = StorageConfiguration()
        storage.synchronous = tuning.synchronous.lowercased() == "normal" ? .normal : .full
        storage.writerCacheKiB = tuning.writerCacheMib << 10
        storage.walWriteCoalescing = tuning.walWriteCoalescing.lowercased() == "on"
        storage.checkpointThresholdBytes = tuning.checkpointThresholdMib << 20
        storage.checkpointThresholdBytesWithoutReaders = tuning.checkpointThresholdUnreadMib << 20
        storage.idleCheckpointSeconds = Double(tuning.idleCheckpointMs) / 1000
        storage.readerMmapBytes = tuning.readerMmapMib << 20
        storage.readerCacheKiB = tuning.readerCacheMib > 0 ? tuning.readerCacheMib << 10 : nil
        storage.readerSnapshotHoldMilliseconds = tuning.readerSnapshotHoldMs
        storage.readerIdleSeconds = tuning.readerIdleSeconds
        storage.writerNice = tuning.writerNice
        storage.writerThreads = tuning.writerThreads
        // Above the WAL a cycle reaches (the steps give way at 1.5x the threshold): a limit below it
        // trims the file at the first commit after every restart, on that save's path, and makes the
        // later commits grow the file again. Measured (issue 22, docs/benchmarks.md, two A/B runs):
        // W2 save p99 0.84x / 0.69x, p99.9 0.70x / 0.64x, rows/s 0.97x / 1.00x.
        storage.journalSizeLimitBytes = 2 * max(tuning.checkpointThresholdMib, tuning.checkpointThresholdUnreadMib) << 20
        storage.walHardLimitBytes = max(storage.walHardLimitBytes, 4 * storage.checkpointThresholdBytes)
        storage.minimumReadableWindowSeconds = tuning.minReadableWindowSeconds
        storage.historyRetentionGenerations = tuning.historyRetentionGenerations > 0 ? tuning.historyRetentionGenerations : nil
        storage.historyRetentionSeconds = tuning.historyRetentionSeconds > 0 ? tuning.historyRetentionSeconds : nil
        storage.historyRetentionBytes = tuning.historyRetentionBytes > 0 ? tuning.historyRetentionBytes : nil
        storage.tombstoneRetentionSeconds = tuning.tombstoneRetentionSeconds > 0 ? tuning.tombstoneRetentionSeconds : nil
        storage.logger = Logger(label: "ubiquity.storage")
        if metrics != nil { storage.observer = DaemonMetrics.storageObserver() }
        var serviceLimits = ServiceLimits()
        serviceLimits.maxFetchResults = tuning.maxFetchResults
        serviceLimits.maxChangesPerSave = tuning.maxChangesPerSave
        serviceLimits.maxContextsPerAccount = tuning.maxContextsPerAccount
        serviceLimits.maxPendingChangesPerContext = tuning.maxPendingChanges
        serviceLimits.contextIdleSeconds = tuning.contextIdleSeconds
        serviceLimits.transitionSaveSeconds = tuning.transitionSaveSeconds
        serviceLimits.transitionAckSeconds = tuning.transitionAckSeconds
        serviceLimits.query.maxPredicateLength = tuning.maxPredicateLength
        storage.changeFeedWindowTransactions = tuning.feedWindowTransactions
        var feedLimits = FeedLimits()
        feedLimits.maxSubscribersPerStore = tuning.maxSubscribersPerStore
        feedLimits.maxSubscribersPerConnection = tuning.maxSubscribersPerConnection
        feedLimits.maxLagGenerations = tuning.maxSubscriberLag
        feedLimits.progressIntervalSeconds = Double(tuning.feedProgressIntervalMs) / 1000
        // a response never exceeds what the transport may send
        feedLimits.maxResponseBytes = min(tuning.maxFeedResponseBytes, tuning.maxSendMessageBytes)
        var kvQuotas = KeyValueQuotas()
        kvQuotas.maxKeys = tuning.kvMaxKeys
        kvQuotas.maxAccountBytes = tuning.kvMaxAccountBytes
        kvQuotas.maxKeyBytes = tuning.kvMaxKeyBytes
        kvQuotas.maxValueBytes = tuning.kvMaxValueBytes
        if let restoreFrom = actions.restoreFrom {
            let (storage, serviceLimits, feedLimits, kvQuotas, maxOpenStores) = (storage, serviceLimits, feedLimits, kvQuotas, tuning.maxOpenStores)
            try restore(from: restoreFrom, logger: logger) {
                try Backend(dataDirectory: $0, storage: storage, maxOpenStores: maxOpenStores, limits: serviceLimits, feedLimits: feedLimits, keyValueQuotas: kvQuotas)
            }
            return
        }
        let backend: Backend
        do {
            backend = try Backend(dataDirectory: options.dataDir, storage: storage, maxOpenStores: tuning.maxOpenStores, limits: serviceLimits, feedLimits: feedLimits,
                                  keyValueQuotas: kvQuotas,
                                  authRequired: options.auth == "on", sessionLifetimeSeconds: Double(options.sessionLifetimeSeconds))
        } catch let e as StorageError where e.reason == .directoryLocked {
            logger.critical("data directory in use", metadata: ["data_dir": "\(options.dataDir)", "error": "\(e)"])
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
        var accounts = AccountsService(backend: backend, contexts: contexts)
        accounts.allowLocalStores = options.localStores
        accounts.register(into: &router)
        let finished = try accounts.finishLocalImports()
        if finished > 0 { logger.notice("finished local-store imports a stopped server left", metadata: ["jobs": "\(finished)"]) }
        let kvTrim = KeyValueTombstoneTrim(backend: backend, retentionSeconds: tuning.kvTombstoneRetentionSeconds)
        let trimmed = try kvTrim.trimNow()
        if trimmed > 0 { logger.info("trimmed key-value tombstones", metadata: ["removed": "\(trimmed)"]) }
        let forgotten = try kvTrim.forgetMovesNow(startup: true)
        if forgotten > 0 { logger.info("forgot first sign-ins' key-value move records", metadata: ["removed": "\(forgotten)"]) }
        let kvTrimming = kvTrim.start()
        defer { kvTrimming.cancel() }
        if case let over = try backend.keyValues.accountsOverQuota(), over > 0 {
            logger.notice("key-value accounts over a quota lowered since their values were written: they can shrink, not grow; their subscribers get QUOTA_VIOLATION",
                          metadata: ["accounts": "\(over)"])
        }
        let contextsService = ContextsService(backend: backend, registry: contexts)
        contextsService.register(into: &router)
        ChangesService(backend: backend).register(into: &router)
        KeyValueService(backend: backend).register(into: &router)
        backend.subscriptions.startSweeper()
        let expiry = contextsService.startExpiry(interval: min(30, max(0.5, tuning.contextIdleSeconds / 4)))
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
        if tuning.enableInteropTesting {
            InteropTestService.register(into: &router)
            health.set("grpc.testing.TestService", .serving)
        }
        let reflection = try ReflectionService { serviceNames.names }
        reflection.register(into: &router)
        serviceNames.names = router.services

        var tls: TLSContextStore?
        if let tlsCert = options.tlsCert, let tlsKey = options.tlsKey {
            do {
                tls = try TLSContextStore(TLSConfiguration(certificateChainFile: tlsCert, privateKeyFile: tlsKey, clientCAFile: options.tlsClientCa))
            } catch {
                logger.critical("cannot load the TLS certificate", metadata: ["error": "\(error)"])
                FileHandle.standardError.write(Data("ubiquityd: cannot load the TLS certificate: \(error)\n".utf8))
                throw ExitCode(2)
            }
        } else if !ServerConfiguration.isLoopback(host: options.host) {
            logger.warning("serving plaintext h2c on a non-loopback address (--allow-plaintext): traffic and credentials can be read and altered on the network", metadata: ["host": "\(options.host)"])
        }
        let server = GRPCServer(configuration: config, router: router, logger: logger, counters: counters.counters, tls: tls)
        // Subscriptions never end on their own: end them (UNAVAILABLE + resume token) when the
        // drain starts, so they do not hold up the graceful shutdown.
        server.onDrain { health.drain(); backend.endSubscriptions(); metrics?.drain() }
        do {
            try server.start()
            MemoryTrimmer.start()
        } catch {
            logger.critical("cannot listen", metadata: ["host": "\(options.host)", "port": "\(options.port)", "error": "\(error)"])
            throw ExitCode(2)
        }
        if options.exitOnStdinEof { StdinWatch.start { server.beginShutdown() } }
        let address = options.host.contains(":") ? "[\(options.host)]:\(server.port)" : "\(options.host):\(server.port)"
        counters.listenAddress = address
        FileHandle.standardOutput.write(Data("ubiquityd listening on \(address)\n".utf8))
        if let metrics, let metricsAt = MetricsAddress(options.metricsAddress) {
            metrics.sampleTransport(counters.counters, maxConnections: tuning.maxConnections)
            metrics.sampleStorage(backend.directory, maxOpenStores: tuning.maxOpenStores)
            metrics.sampleServices(contexts: contexts, subscriptions: backend.subscriptions)
            do {
                let bound = try metrics.start(address: metricsAt, requestTimeoutMilliseconds: tuning.metricsRequestTimeoutMs)
                FileHandle.standardOutput.write(Data("ubiquityd metrics on http://\(bound)/metrics\n".utf8))
            } catch {
                logger.critical("cannot serve metrics", metadata: ["address": "\(options.metricsAddress)", "error": "\(error)"])
                server.beginShutdown()
                server.waitUntilFinished()
                throw ExitCode(2)
            }
        }
        defer { metrics?.stop() }
        logger.info("listening", metadata: ["address": "\(address)", "data_dir": "\(options.dataDir)", "tls": "\(tls != nil)",
                                            "event_loops": "\(config.eventLoops)", "services": "\(router.services.joined(separator: ","))"])
        server.waitUntilFinished()
    }

    /// `--restore-from`: an offline full restore, then exit (a restart with the flag still set
    /// finds the data directory no longer empty and refuses, instead of restoring twice).
    func restore(from backup: String, logger: Logger, open: @escaping @Sendable (String) throws -> Backend) throws {
        let box = RestoreResultBox()
        let done = DispatchSemaphore(value: 0)
        let dataDir = options.dataDir
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
