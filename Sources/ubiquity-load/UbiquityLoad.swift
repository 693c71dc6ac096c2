import Foundation
import ArgumentParser
import Dispatch
import Histogram
import Synchronization
import UbiquityGRPC
import UbiquityGRPCClient
import UbiquityLock
import UbiquityLoop

#if canImport(Glibc)
import Glibc
#endif

/// The workloads of SPEC §6 / docs/benchmarks.md.
enum WorkloadKind: String, ExpressibleByArgument, CaseIterable {
    case ping
    case pointFetch = "point-fetch"
    case predicateFetch = "predicate-fetch"
    case pinnedFetch = "pinned-fetch"
    case save100
    case mixed
    /// W5: Changes.Subscribe streams and one paced writer (--subscribers, --rate).
    case fanout
    /// Not measured: (re)creates the store and inserts --objects objects with BatchInsert.
    case prepare
    /// W6, not measured itself: --accounts accounts, each with a session and a store of --objects
    /// objects (BatchInsert), listed in --accounts-file; reports accounts/s and stores/s.
    case prepareAccounts = "prepare-accounts"
    /// W6: point fetches and small saves over --active of the --accounts-file accounts at a time,
    /// the active set rotating (--rotate-every); calls that open a closed store measured apart.
    case manyAccounts = "many-accounts"
}

@main
struct UbiquityLoad: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ubiquity-load",
        abstract: "Drives ubiquityd (or any gRPC server with the same methods) over gRPC and reports throughput and latency.",
        discussion: """
            Each connection keeps --streams calls in flight; a finished call starts the next one on the same
            connection. The run ends after --requests calls or --duration seconds, whichever comes first.
            Latency is measured from starting a call to its completion, on the generator's loop thread.
            """)

    @Option(help: "Server address, host:port.")
    var target = "127.0.0.1:50051"

    @Option(name: [.customShort("c"), .customLong("connections")], help: "HTTP/2 connections.")
    var connections = 4

    @Option(name: [.customShort("m"), .customLong("streams")], help: "Concurrent calls per connection.")
    var streams = 16

    @Option(name: [.customShort("n"), .customLong("requests")], help: "Calls in total (default 10000, or unbounded with --duration).")
    var requests: Int?

    @Option(name: [.customShort("d"), .customLong("duration")], help: "Stop starting calls after this many seconds.")
    var duration: Double?

    @Option(name: .shortAndLong, help: "Event-loop threads of the generator (connections are spread over them).")
    var threads = 1

    @Option(help: "Workload: \(WorkloadKind.allCases.map(\.rawValue).joined(separator: ", ")).")
    var workload: WorkloadKind = .ping

    @Option(help: "Store the Stores workloads use (prepare creates it).")
    var store = "bench"

    @Option(help: "Objects in the store: prepare inserts this many (0 makes an empty store, for save100); the fetch workloads pick keys among them.")
    var objects = 1_000_000

    @Option(help: "prepare: objects per BatchInsert call.")
    var batch = 10_000

    @Option(help: "Seed of the keys the fetch workloads pick.")
    var seed: UInt64 = 1

    @Option(help: "Speak TLS (ALPN h2) to the target, trusting this PEM CA; the server's certificate must name the --target host.")
    var tlsCa: String?

    @Flag(help: "point-fetch / predicate-fetch: one more connection keeps saving 100 objects at a time meanwhile (not measured), as pinned-fetch does.")
    var withWrites = false

    @Option(help: "Ping payload size in bytes.")
    var payload = 0

    @Option(help: "Per-call deadline in seconds (sent as grpc-timeout and enforced by the client).")
    var timeout: Double?

    @Option(help: "Name of the system under test, for the report (e.g. ubiquity, grpcio).")
    var system = "ubiquity"

    @Option(help: "Give up after this many seconds in total, whatever is still running (default: duration + 60, or 300).")
    var maxSeconds: Double?

    @Option(help: "fanout: Subscribe streams, spread over --connections.")
    var subscribers = 100

    @Option(help: "fanout: saves per second of the writer (one object each).")
    var rate = 1000.0

    @Option(help: "fanout: seconds subscribers get to receive the last save after the writer stops.")
    var drainSeconds = 10.0

    @Option(help: "fanout, many-accounts: the server's process ID on this machine (its RSS, CPU, threads and fds are read from /proc).")
    var serverPid: Int32?

    @Flag(help: "Print one JSON object for the run instead of the text report.")
    var json = false

    @Option(help: "Session token for the data calls (`authorization: Bearer <token>`; or set UBIQ_TOKEN).")
    var token: String?

    @Option(help: "The server's operator key file (<data-dir>/operator.key): the generator creates an API key for the default account and signs in with it. Neither this nor --token: no credentials (a server run with --auth off).")
    var operatorKeyFile: String?

    @Option(help: "prepare-accounts: accounts to create (each with an API key, a session and one store of --objects objects).")
    var accounts = 10_000

    @Option(help: "prepare-accounts writes, many-accounts reads: one line per account, store ID and session token (mode 0600).")
    var accountsFile: String?

    @Option(help: "prepare-accounts: accounts (then stores) being set up at a time.")
    var setupConcurrency = 16

    @Option(help: "many-accounts: accounts active at a time.")
    var active = 100

    @Option(help: "many-accounts: after this many calls the longest-active account leaves and the next one joins.")
    var rotateEvery = 1_000

    @Option(help: "many-accounts: one call in this many is a Save of 1 object (0: fetches only).")
    var saveEvery = 10

    @Flag(help: "No progress line, even on a terminal.")
    var quiet = false

    mutating func validate() throws {
        guard connections >= 1, streams >= 1, threads >= 1 else { throw ValidationError("connections, streams and threads must be at least 1") }
        if let requests, requests < 1 { throw ValidationError("--requests must be at least 1") }
        if let duration, !(duration > 0) { throw ValidationError("--duration must be positive") }
        guard parseTarget() != nil else { throw ValidationError("--target must be host:port") }
        guard objects >= 0 else { throw ValidationError("--objects must not be negative") }
        if workload == .fanout {
            guard subscribers >= 0, rate > 0, drainSeconds > 0 else { throw ValidationError("--subscribers must not be negative; --rate and --drain-seconds must be positive") }
            return
        }
        if [.prepareAccounts, .manyAccounts].contains(workload) {
            guard accountsFile != nil else { throw ValidationError("\(workload.rawValue) needs --accounts-file") }
            guard accounts >= 1, setupConcurrency >= 1, active >= 1, rotateEvery >= 2, saveEvery >= 0 else {
                throw ValidationError("--accounts, --setup-concurrency and --active must be at least 1, --rotate-every at least 2")
            }
            if workload == .manyAccounts && threads != 1 {
                throw ValidationError("many-accounts runs on one generator thread (--threads 1): the rotation is the order calls are issued in")
            }
            if workload == .prepareAccounts && operatorKeyFile == nil {
                throw ValidationError("prepare-accounts needs --operator-key-file (it creates accounts)")
            }
        }
        if objects == 0 && ![.ping, .prepare, .save100].contains(workload) {
            throw ValidationError("--objects 0 (an empty store) suits only save100 and prepare: \(workload.rawValue) reads prepared objects")
        }
    }

    func parseTarget() -> (String, Int)? {
        guard let colon = target.lastIndex(of: ":"), let port = Int(target[target.index(after: colon)...]), port > 0, port < 65536 else { return nil }
        var host = String(target[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        return host.isEmpty ? nil : (host, port)
    }

    func run() throws {
        ignoreSIGPIPE()
        if let tlsCa {
            do {
                ClientTLS.context = try TLSContext(clientTrusting: tlsCa)
            } catch {
                throw ValidationError("--tls-ca: \(error)")
            }
        }
        let (host, port) = parseTarget()!
        let authority = target
        if workload == .prepareAccounts {
            let (accounts, objects, width, file, keyFile) = (accounts, objects, setupConcurrency, accountsFile!, operatorKeyFile!)
            let t = try blocking {
                try await ManyAccounts.prepare(host: host, port: port, operatorKeyFile: keyFile, accounts: accounts,
                                               objects: objects, concurrency: width, file: file)
            }
            var report = Report(workload: workload.rawValue, system: system, connections: 1, streams: width, threads: 1,
                                requests: accounts * 6, ok: accounts * 6, seconds: t.accounts + t.stores,
                                throughput: Double(accounts) / (t.accounts + t.stores), p50: 0, p90: 0, p99: 0, p999: 0,
                                max: 0, errors: 0, errorsByStatus: [], cpuSeconds: 0, timedOut: false,
                                note: "\(accounts) accounts (CreateAccount, CreateApiKey, SignIn), then a store each (OpenStore, "
                                    + "RegisterModel, BatchInsert of \(objects) objects), \(width) at a time; throughput is accounts/s overall")
            report.extra = [("accounts", "\(accounts)"), ("objects_per_store", "\(objects)"),
                            ("accounts_seconds", String(format: "%.3f", t.accounts)),
                            ("accounts_per_s", String(format: "%.1f", Double(accounts) / t.accounts)),
                            ("stores_seconds", String(format: "%.3f", t.stores)),
                            ("stores_per_s", String(format: "%.1f", Double(accounts) / t.stores))]
            print(json ? report.json() : report.text())
            return
        }
        var metadata: [(String, String)] = []
        if workload == .manyAccounts {
            // Each call carries its own account's session (from --accounts-file).
        } else if let token = token ?? ProcessInfo.processInfo.environment["UBIQ_TOKEN"] {
            metadata = [("authorization", "Bearer " + token)]
        } else if let operatorKeyFile {
            let session = try blocking { try await LoadSignIn.session(host: host, port: port, operatorKeyFile: operatorKeyFile) }
            metadata = [("authorization", "Bearer " + session)]
        }
        let data = DataSet(store: store, objects: objects, seed: seed, metadata: metadata)
        if workload == .prepare {
            let (host, port, objects, batch) = (host, port, objects, batch)
            let (seconds, calls) = try blocking { try await StoreSetup.prepare(host: host, port: port, data: data, batch: batch) }
            let report = Report(workload: "prepare", system: system, connections: 1, streams: 2, threads: 1, requests: calls,
                                ok: calls, seconds: seconds, throughput: Double(objects) / seconds, p50: 0, p90: 0, p99: 0,
                                p999: 0, max: 0, errors: 0, errorsByStatus: [], cpuSeconds: 0, timedOut: false,
                                note: "\(objects) objects into store \"\(store)\" with BatchInsert (\(batch) per call); throughput is objects/s")
            print(json ? report.json() : report.text())
            return
        }
        if workload == .fanout {
            let options = FanOutOptions(host: host, port: port, authority: authority, store: store == "bench" ? "w5" : store,
                                        subscribers: subscribers, connections: connections, threads: threads, rate: rate,
                                        durationSeconds: duration ?? 10, drainSeconds: drainSeconds, serverPID: serverPid,
                                        system: system, metadata: metadata)
            do {
                try FanOut.run(options, json: json)
            } catch let e as RPCError {
                throw LoadError(message: "fanout: \(e.code): \(e.message)")
            }
            return
        }
        let plan: WorkloadPlan
        do {
            if workload == .manyAccounts {
                let all = try ManyAccounts.read(accountsFile!)
                plan = try ManyAccounts.plan(host: host, port: port, authority: authority, timeout: timeout, accounts: all,
                                             objects: objects, seed: seed,
                                             rotation: .init(active: active, rotateEvery: rotateEvery, saveEvery: saveEvery))
            } else {
                plan = try Workloads.plan(workload, host: host, port: port, authority: authority, payload: payload,
                                          timeout: timeout, data: data, withWrites: withWrites)
            }
        } catch let e as RPCError {
            throw LoadError(message: "setting up \(workload.rawValue): \(e.code): \(e.message)")
        }
        let total = requests ?? (duration == nil ? 10_000 : Int.max)
        let threadCount = min(threads, connections)

        // Shares of the request count per connection, and connections per worker (round robin).
        var shares = [[Int]](repeating: [], count: threadCount)
        for c in 0..<connections {
            let share = total == Int.max ? Int.max : total / connections + (c < total % connections ? 1 : 0)
            shares[c % threadCount].append(share)
        }
        let progress = Progress()
        let done = DispatchSemaphore(value: 0)
        let workers = (0..<threadCount).map { i in
            Worker(index: i, host: host, port: port, shares: shares[i], streams: streams, requests: plan.requests, cold: plan.cold,
                   background: i == 0 ? plan.background : [], progress: progress, onDone: { done.signal() })
        }

        // Every path out of this block, a failed connect included, stops every loop and joins its
        // thread, so no worker thread outlives the run (and the merge below reads joined state).
        let cpuBefore: Double, cpuAfter: Double, start: UInt64
        var sampler: ProcessSampler?
        var timedOut = false
        do {
            defer {
                for w in workers { w.loop.stop() }
                for w in workers { w.thread.join() }
            }

            // Connect everything first; the clock starts when every connection is up.
            let connectErrors = Lock<[String]>([])
            let connected = DispatchSemaphore(value: 0)
            for w in workers {
                w.thread.start { _ in
                    w.connect { error in
                        if let error { connectErrors.withLock { $0.append(error.message) } }
                        connected.signal()
                    }
                }
            }
            for _ in workers {
                if connected.wait(timeout: .now() + 15) == .timedOut {
                    connectErrors.withLock { $0.append("connecting to \(target) took longer than 15 s") }
                    break
                }
            }
            if let error = connectErrors.withLock({ $0.first }) { throw LoadError(message: error) }

            sampler = serverPid.map(ProcessSampler.init(pid:))
            cpuBefore = cpuSeconds()
            start = monotonicNanos()
            let durationMillis = duration.map { UInt64(($0 * 1000).rounded()) } ?? 0
            for w in workers { w.loop.execute { w.go(durationMillis: durationMillis) } }

            // Wait, printing progress on a terminal, within the hard bound.
            let bound = maxSeconds ?? (duration.map { $0 + 60 } ?? 300)
            let showProgress = !quiet && isatty(2) != 0
            var finishedWorkers = 0
            var lastCount = 0
            var lastTime = start
            while finishedWorkers < workers.count {
                if done.wait(timeout: .now() + 1) == .success {
                    finishedWorkers += 1
                    continue
                }
                let now = monotonicNanos()
                if Double(now - start) / 1e9 > bound {
                    timedOut = true
                    for w in workers { w.loop.execute { w.abort() } }
                    while finishedWorkers < workers.count {
                        if done.wait(timeout: .now() + 10) == .timedOut { break }
                        finishedWorkers += 1
                    }
                    break
                }
                if showProgress {
                    let count = progress.calls.load(ordering: .relaxed)
                    let rate = Double(count - lastCount) / (Double(now - lastTime) / 1e9)
                    let of = total == Int.max ? "" : "/\(total)"
                    writeStderr("\r\u{1B}[K[ubiquity-load] \(workload.rawValue): \(count)\(of) calls, \(Int(rate)) calls/s")
                    lastCount = count
                    lastTime = now
                }
            }
            if showProgress { writeStderr("\r\u{1B}[K") }
            cpuAfter = cpuSeconds()
        }

        // Merge (the worker threads are joined: their state is ours now).
        var merged = WorkerResult()
        for w in workers {
            merged.histogram.add(w.result.histogram)
            merged.cold.add(w.result.cold)
            merged.ok += w.result.ok
            for (k, v) in w.result.errors { merged.errors[k, default: 0] += v }
            merged.firstError = merged.firstError ?? w.result.firstError
            merged.endNanos = max(merged.endNanos, w.result.endNanos)
            merged.backgroundOK += w.result.backgroundOK
            merged.backgroundErrors += w.result.backgroundErrors
        }
        let seconds = Double(max(merged.endNanos, start + 1) - start) / 1e9
        let errorCount = merged.errors.values.reduce(0, +)
        let calls = merged.ok + errorCount
        var report = Report(
            workload: workload.rawValue, system: system, connections: connections, streams: streams,
            threads: threadCount, requests: calls, ok: merged.ok, seconds: seconds,
            throughput: Double(merged.ok) / seconds,
            p50: ms(merged.histogram, 50), p90: ms(merged.histogram, 90), p99: ms(merged.histogram, 99),
            p999: ms(merged.histogram, 99.9), max: merged.ok > 0 ? Double(merged.histogram.max) / 1e6 : 0,
            errors: errorCount,
            errorsByStatus: merged.errors.map { (StatusCode(rawValue: $0.key).description, $0.value) }.sorted { $0.0 < $1.0 },
            cpuSeconds: cpuAfter - cpuBefore, timedOut: timedOut, firstError: merged.firstError,
            note: plan.note, background: plan.background.isEmpty ? nil : (merged.backgroundOK, merged.backgroundErrors))
        if !plan.cold.isEmpty {
            let c = merged.cold
            report.extra += [("cold_calls", "\(c.totalCount)"), ("cold_p50_ms", String(format: "%.4f", ms(c, 50))),
                             ("cold_p99_ms", String(format: "%.4f", ms(c, 99))),
                             ("cold_max_ms", String(format: "%.4f", c.totalCount > 0 ? Double(c.max) / 1e6 : 0)),
                             ("joins_per_s", String(format: "%.1f", Double(c.totalCount) / seconds)),
                             ("active_accounts", "\(active)"), ("rotate_every_calls", "\(rotateEvery)"),
                             ("save_every", "\(saveEvery)")]
        }
        if let (peak, last) = sampler?.finish() {
            report.extra += [("server_rss_peak_kib", "\(peak.rssKiB)"), ("server_rss_end_kib", "\(last.rssKiB)"),
                             ("server_threads_peak", "\(peak.threads)"), ("server_threads_end", "\(last.threads)"),
                             ("server_fds_peak", "\(peak.fds)"), ("server_fds_end", "\(last.fds)")]
        }
        print(json ? report.json() : report.text())
        if timedOut { throw ExitCode(2) }
    }

    private func ms(_ h: Histogram<UInt64>, _ p: Double) -> Double {
        h.totalCount == 0 ? 0 : Double(h.valueAtPercentile(p)) / 1e6
    }
}

struct LoadError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}

func writeStderr(_ s: String) {
    var s = s
    s.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
}

/// User + system CPU time of this process so far (getrusage).
func cpuSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
        + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
}

struct Report {
    var workload: String
    var system: String
    var connections: Int
    var streams: Int
    var threads: Int
    var requests: Int
    var ok: Int
    var seconds: Double
    var throughput: Double
    var p50: Double
    var p90: Double
    var p99: Double
    var p999: Double
    var max: Double
    var errors: Int
    var errorsByStatus: [(String, Int)]
    var cpuSeconds: Double
    var timedOut: Bool
    var firstError: String?
    var note: String?
    /// Calls of the background connection (OK, errors), when the workload has one.
    var background: (ok: Int, errors: Int)?
    /// Workload-specific figures (name, JSON number), in the JSON and on one text line.
    var extra: [(String, String)] = []

    var cpuMicrosPerRequest: Double { requests > 0 ? cpuSeconds * 1e6 / Double(requests) : 0 }

    func json() -> String {
        func num(_ x: Double, _ digits: Int = 4) -> String {
            x.isFinite ? String(format: "%.\(digits)f", x) : "null"
        }
        func str(_ s: String) -> String {
            var out = "\""
            for u in s.unicodeScalars {
                switch u {
                case "\"": out += "\\\""
                case "\\": out += "\\\\"
                case "\n": out += "\\n"
                default:
                    if u.value < 0x20 { out += String(format: "\\u%04x", u.value) } else { out.unicodeScalars.append(u) }
                }
            }
            return out + "\""
        }
        let byStatus = errorsByStatus.map { "\(str($0.0)): \($0.1)" }.joined(separator: ", ")
        var fields = [
            "\"workload\": \(str(workload))", "\"system\": \(str(system))",
            "\"connections\": \(connections)", "\"streams\": \(streams)", "\"threads\": \(threads)",
            "\"requests\": \(requests)", "\"ok\": \(ok)", "\"seconds\": \(num(seconds))",
            "\"throughput\": \(num(throughput, 1))",
            "\"p50_ms\": \(num(p50))", "\"p90_ms\": \(num(p90))", "\"p99_ms\": \(num(p99))",
            "\"p999_ms\": \(num(p999))", "\"max_ms\": \(num(max))",
            "\"errors\": \(errors)", "\"errors_by_status\": {\(byStatus)}",
            "\"cpu_seconds\": \(num(cpuSeconds))", "\"cpu_us_per_request\": \(num(cpuMicrosPerRequest, 2))",
            "\"timed_out\": \(timedOut)",
        ]
        if let firstError { fields.append("\"first_error\": \(str(firstError))") }
        if let note { fields.append("\"note\": \(str(note))") }
        if let background {
            fields.append("\"background_calls\": \(background.ok + background.errors)")
            fields.append("\"background_errors\": \(background.errors)")
        }
        fields += extra.map { "\(str($0.0)): \($0.1)" }
        return "{" + fields.joined(separator: ", ") + "}"
    }

    func text() -> String {
        var lines = [
            "workload     \(workload) against \(system): \(connections) connections × \(streams) streams, \(threads) thread(s)",
            "calls        \(requests) in \(String(format: "%.3f", seconds)) s (\(ok) OK, \(errors) errors)\(timedOut ? " — stopped at the time bound" : "")",
            "throughput   \(String(format: "%.0f", throughput)) calls/s",
            "latency ms   p50 \(String(format: "%.3f", p50))  p90 \(String(format: "%.3f", p90))  p99 \(String(format: "%.3f", p99))  p99.9 \(String(format: "%.3f", p999))  max \(String(format: "%.3f", max))",
            "generator    \(String(format: "%.2f", cpuSeconds)) s CPU, \(String(format: "%.2f", cpuMicrosPerRequest)) µs CPU per call",
        ]
        if !errorsByStatus.isEmpty {
            lines.append("errors       " + errorsByStatus.map { "\($0.0) \($0.1)" }.joined(separator: ", "))
        }
        if let firstError { lines.append("first error  \(firstError)") }
        if let note { lines.append("note         \(note)") }
        if !extra.isEmpty { lines.append("figures      " + extra.map { "\($0.0) \($0.1)" }.joined(separator: ", ")) }
        if let background { lines.append("background   \(background.ok + background.errors) calls, \(background.errors) errors (not measured)") }
        return lines.joined(separator: "\n")
    }
}

/// `--tls-ca`'s client context, for every connection the generator makes.
enum ClientTLS {
    // nonisolated(unsafe): written once at the start of `run()`, before any thread or
    // connection exists; only read afterwards.
    nonisolated(unsafe) static var context: TLSContext?

    static var options: ClientConnectionOptions {
        var o = ClientConnectionOptions()
        o.tls = context
        return o
    }
}
