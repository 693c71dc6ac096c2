import Dispatch
import SwiftProtobuf
import Histogram
import Synchronization
import UbiquityGRPC
import UbiquityGRPCClient
import UbiquityLock
import UbiquityLoop
import UbiquityProtos

#if canImport(Glibc)
import Glibc
#endif

/// W5 fan-out (SPEC §6, issue 17): `subscribers` `Changes.Subscribe` streams over `connections`
/// connections, and one writer saving one object at a time, paced at `rate` saves per second, on
/// a connection and thread of its own. Each save's start and acknowledgement times are matched,
/// by generation, with every subscriber's receipt of that transaction.
///
/// Threads: the writer has one loop thread; subscribers share `threads` loop threads
/// (connections round robin). Each `SubscriberWorker`'s state is touched only on its loop until
/// the main thread has joined it.
struct FanOutOptions {
    var host: String
    var port: Int
    var authority: String
    var store: String
    var subscribers: Int
    var connections: Int
    var threads: Int
    var rate: Double
    var durationSeconds: Double
    /// How long subscribers may take to receive the last acknowledged save after the writer stops.
    var drainSeconds: Double
    /// The server's process ID (same machine): its RSS and CPU are read from /proc.
    var serverPID: Int32?
    var system: String
    /// `authorization` for the data calls.
    var metadata: [(String, String)] = []
}

/// One save as the writer saw it.
struct SaveTiming {
    var generation: Int64
    var start: UInt64
    var ack: UInt64
}

/// The writer: one connection, saves issued on a 1 ms timer so that `rate × elapsed` saves have
/// started at any moment (open loop: a slow save does not delay the next one's start).
final class FanOutWriter: @unchecked Sendable {
    let thread = EventLoopThread(name: "load-writer")
    var loop: EventLoop { thread.loop }
    private let options: FanOutOptions
    private let request: PreparedRequest
    // Loop-thread state (joined before the main thread reads it).
    private var connection: ClientConnection?
    private var timer: LoopTimer?
    private var startNanos: UInt64 = 0
    private var endNanos: UInt64 = 0
    private var issued = 0
    private var inFlight = 0
    private var stopped = false
    private var onDone: (@Sendable () -> Void)?
    var saves: [SaveTiming] = []
    var errors = 0
    var firstError: String?
    var missingGeneration = 0
    /// Saves that were due but not started because `maxInFlight` were outstanding.
    var deferred = 0
    static let maxInFlight = 256

    init(options: FanOutOptions, request: PreparedRequest) {
        self.options = options
        self.request = request
    }

    func connect(_ completion: @escaping (RPCError?) -> Void) {
        ClientConnection.connect(loop: loop, host: options.host, port: options.port, options: ClientTLS.options) { r in
            switch r {
            case .success(let c): self.connection = c; completion(nil)
            case .failure(let e): completion(e)
            }
        }
    }

    func go(onDone: @escaping @Sendable () -> Void) {
        self.onDone = onDone
        saves.reserveCapacity(Int(options.rate * options.durationSeconds) + 16)
        startNanos = monotonicNanos()
        endNanos = startNanos + UInt64(options.durationSeconds * 1e9)
        let t = LoopTimer(loop: loop)
        timer = t
        t.start(milliseconds: 1, repeatMilliseconds: 1) { [self] in self.tick() }
        tick()
    }

    private func tick() {
        let now = monotonicNanos()
        if now >= endNanos { stop(); return }
        let due = Int(Double(now - startNanos) / 1e9 * options.rate) + 1
        guard let connection, connection.isUsable else { stop(); return }
        while issued < due {
            if inFlight >= Self.maxInFlight { deferred += due - issued; issued = due; break }
            issued += 1
            inFlight += 1
            connection.startCall(request, tag: monotonicNanos()) { [self] r in self.completed(r) }
        }
    }

    private func completed(_ r: ClientCallResult) {
        let ack = monotonicNanos()
        inFlight -= 1
        if r.status == .ok, let body = r.response, let generation = ProtoWire.saveGeneration(body) {
            saves.append(SaveTiming(generation: generation, start: r.tag, ack: ack))
        } else if r.status == .ok {
            missingGeneration += 1
        } else {
            errors += 1
            if firstError == nil { firstError = "\(r.status): \(r.message)" }
        }
        checkDone()
    }

    private func stop() {
        stopped = true
        timer?.close()
        timer = nil
        checkDone()
    }

    private func checkDone() {
        guard stopped, inFlight == 0, let done = onDone else { return }
        onDone = nil
        done()
    }

    func close() {
        timer?.close()
        timer = nil
        connection?.close()
        connection = nil
    }

    var seconds: Double { Double(endNanos - startNanos) / 1e9 }
}

/// One subscription: the generations it received, with receipt times.
struct Subscription {
    var connection: Int
    var streamID: Int32 = 0
    var caughtUp = false
    var ended: (StatusCode, String)?
    var maxGeneration: Int64 = -1
    var generations: [Int64] = []
    var receipts: [UInt64] = []
    var malformed = 0
}

/// Subscribers on one loop thread.
final class SubscriberWorker: @unchecked Sendable {
    let thread: EventLoopThread
    var loop: EventLoop { thread.loop }
    private let options: FanOutOptions
    private let request: PreparedRequest
    private let connectionCount: Int
    // Loop-thread state (joined before the main thread reads it).
    private var connections: [ClientConnection] = []
    var subscriptions: [Subscription]
    private var caughtUp = 0
    private var onAllCaughtUp: (@Sendable () -> Void)?
    private var target: Int64 = .max
    private var reached = 0
    private var onAllReached: (@Sendable () -> Void)?
    var endedEarly = 0
    var firstError: String?

    init(index: Int, options: FanOutOptions, request: PreparedRequest, connections: Int, subscribers: Int) {
        thread = EventLoopThread(name: "load-sub-\(index)")
        self.options = options
        self.request = request
        connectionCount = connections
        subscriptions = (0..<subscribers).map { Subscription(connection: $0 % max(1, connections)) }
    }

    func connect(_ completion: @escaping (RPCError?) -> Void) {
        var left = connectionCount
        var failed: RPCError?
        var slots = [ClientConnection?](repeating: nil, count: connectionCount)
        guard left > 0 else { completion(nil); return }
        for i in 0..<connectionCount {
            ClientConnection.connect(loop: loop, host: options.host, port: options.port, options: ClientTLS.options) { r in
                switch r {
                case .success(let c): slots[i] = c
                case .failure(let e): failed = failed ?? e
                }
                left -= 1
                if left == 0 {
                    if failed == nil { self.connections = slots.map { $0! } } else { for c in slots { c?.close() } }
                    completion(failed)
                }
            }
        }
    }

    /// Opens every subscription; `onAllCaughtUp` runs once each has received its caught-up marker.
    func subscribe(onAllCaughtUp: @escaping @Sendable () -> Void) {
        self.onAllCaughtUp = onAllCaughtUp
        if subscriptions.isEmpty { onAllCaughtUp(); return }
        for i in subscriptions.indices {
            let c = connections[subscriptions[i].connection]
            subscriptions[i].streamID = c.startCall(request, onMessage: { [self] bytes in self.received(i, bytes) },
                                                    completion: { [self] r in self.ended(i, r) })
        }
        for c in connections { c.flush() }
    }

    private func received(_ i: Int, _ bytes: UnsafeRawBufferPointer) {
        let now = monotonicNanos()
        switch ProtoWire.subscribeEvent(bytes) {
        case .transactions(let generations):
            for g in generations {
                subscriptions[i].generations.append(g)
                subscriptions[i].receipts.append(now)
                if g > subscriptions[i].maxGeneration {
                    let before = subscriptions[i].maxGeneration
                    subscriptions[i].maxGeneration = g
                    if before < target && g >= target { reachedOne() }
                }
            }
        case .caughtUp:
            guard !subscriptions[i].caughtUp else { return }
            subscriptions[i].caughtUp = true
            caughtUp += 1
            if caughtUp == subscriptions.count, let f = onAllCaughtUp { onAllCaughtUp = nil; f() }
        case .other:
            break
        case nil:
            subscriptions[i].malformed += 1
        }
    }

    private func ended(_ i: Int, _ r: ClientCallResult) {
        subscriptions[i].ended = (r.status, r.message)
        guard !stopping else { return }
        endedEarly += 1
        if firstError == nil { firstError = "a subscription ended: \(r.status): \(r.message)" }
        // An ended subscription will receive nothing more: do not keep the others waiting for it.
        if !subscriptions[i].caughtUp {
            subscriptions[i].caughtUp = true
            caughtUp += 1
            if caughtUp == subscriptions.count, let f = onAllCaughtUp { onAllCaughtUp = nil; f() }
        }
        if subscriptions[i].maxGeneration < target { reachedOne() }
    }

    private func reachedOne() {
        reached += 1
        if reached == subscriptions.count, let f = onAllReached { onAllReached = nil; f() }
    }

    /// `onAllReached` runs once every subscription has received `generation` (or ended).
    func await(generation: Int64, onAllReached: @escaping @Sendable () -> Void) {
        target = generation
        self.onAllReached = onAllReached
        reached = subscriptions.filter { $0.maxGeneration >= generation || ($0.ended != nil && !stopping) }.count
        if reached == subscriptions.count { self.onAllReached = nil; onAllReached() }
    }

    private var stopping = false

    func close() {
        stopping = true
        for c in connections { c.close() }
        connections.removeAll()
    }
}

/// Runs W5 and prints its report.
enum FanOut {
    static func run(_ o: FanOutOptions, json: Bool) throws {
        // An empty store with the bench model, made fresh so every run starts alike.
        let data = DataSet(store: o.store, objects: 0, seed: 1, metadata: o.metadata)
        let (host, port) = (o.host, o.port)
        _ = try blocking { try await StoreSetup.prepare(host: host, port: port, data: data, batch: 1) }
        let store = try blocking { try await StoreSetup.open(host: host, port: port, data: data) }

        var save = Ubiquity_V1_SaveRequest()
        save.storeID = store.id
        save.author = "ubiquity-load-writer"
        var ins = Ubiquity_V1_Insert()
        ins.temporaryID = "t0"
        ins.entity = BenchModel.entity
        ins.values = ["name": .string("w5"), "age": .int64(1), "score": .double(0.5)]
        save.inserts = [ins]
        let saveRequest = PreparedRequest(path: Workloads.stores + "Save", authority: o.authority,
                                          message: try save.serializedBytes(), metadata: o.metadata, timeout: 30)
        var sub = Ubiquity_V1_SubscribeRequest()
        sub.storeID = store.id
        sub.from.now = true
        let subscribeRequest = PreparedRequest(path: "/ubiquity.v1.Changes/Subscribe", authority: o.authority,
                                               message: try sub.serializedBytes(), metadata: o.metadata)

        let rssBefore = o.serverPID.flatMap(residentKiB)
        let threadCount = max(1, min(o.threads, o.connections))
        let workers = (0..<threadCount).map { t in
            let conns = o.connections / threadCount + (t < o.connections % threadCount ? 1 : 0)
            // Subscriptions spread over connections round robin: worker t owns connections
            // t, t + threads, …, and the subscriptions that land on them.
            var subs = 0
            for s in 0..<o.subscribers where (s % o.connections) % threadCount == t { subs += 1 }
            return SubscriberWorker(index: t, options: o, request: subscribeRequest, connections: conns, subscribers: subs)
        }
        let writer = FanOutWriter(options: o, request: saveRequest)
        var report = FanOutReport(options: o)
        report.rssBeforeKiB = rssBefore

        do {
            defer {
                for w in workers { w.loop.execute { w.close() } }
                writer.loop.execute { writer.close() }
                for w in workers { w.loop.stop(); w.thread.join() }
                writer.loop.stop()
                writer.thread.join()
            }
            let errors = Lock<[String]>([])
            let connected = DispatchSemaphore(value: 0)
            for w in workers {
                w.thread.start { _ in w.connect { e in if let e { errors.withLock { $0.append(e.message) } }; connected.signal() } }
            }
            writer.thread.start { _ in writer.connect { e in if let e { errors.withLock { $0.append(e.message) } }; connected.signal() } }
            for _ in 0...workers.count where connected.wait(timeout: .now() + 30) == .timedOut {
                throw LoadError(message: "connecting to \(o.host):\(o.port) took longer than 30 s")
            }
            if let e = errors.withLock({ $0.first }) { throw LoadError(message: e) }
            report.rssConnectedKiB = o.serverPID.flatMap(residentKiB)

            let subscribedStart = monotonicNanos()
            let caughtUp = DispatchSemaphore(value: 0)
            for w in workers { w.loop.execute { w.subscribe { caughtUp.signal() } } }
            let subscribeBound = 30 + Double(o.subscribers) / 500
            for _ in workers where caughtUp.wait(timeout: .now() + subscribeBound) == .timedOut {
                throw LoadError(message: "\(o.subscribers) subscriptions did not all report caught-up within \(Int(subscribeBound)) s")
            }
            report.subscribeSeconds = Double(monotonicNanos() - subscribedStart) / 1e9
            report.rssSubscribedKiB = o.serverPID.flatMap(residentKiB)

            let cpuBefore = o.serverPID.flatMap(processCPUSeconds)
            let myCPUBefore = cpuSeconds()
            let written = DispatchSemaphore(value: 0)
            writer.loop.execute { writer.go { written.signal() } }
            if written.wait(timeout: .now() + o.durationSeconds + 60) == .timedOut {
                throw LoadError(message: "the writer's saves did not finish within \(Int(o.durationSeconds + 60)) s")
            }
            // The writer is idle now (no timer, nothing in flight) and signalled after its last
            // write: reading its saves here races with nothing.
            let last = writer.saves.map(\.generation).max()
            if let last {
                let reached = DispatchSemaphore(value: 0)
                for w in workers { w.loop.execute { w.await(generation: last) { reached.signal() } } }
                for _ in workers where reached.wait(timeout: .now() + o.drainSeconds) == .timedOut {
                    report.drainTimedOut = true
                    break
                }
            }
            if let before = cpuBefore, let after = o.serverPID.flatMap(processCPUSeconds) {
                report.serverCPUSeconds = after - before
            }
            report.generatorCPUSeconds = cpuSeconds() - myCPUBefore
            report.rssEndKiB = o.serverPID.flatMap(residentKiB)
        }
        report.merge(writer: writer, workers: workers)
        print(json ? report.json() : report.text())
    }

    /// VmRSS of a process, KiB.
    static func residentKiB(_ pid: Int32) -> Int? {
        guard let text = readFile("/proc/\(pid)/status") else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            return Int(line.split(separator: " ", omittingEmptySubsequences: true)[1])
        }
        return nil
    }

    /// utime + stime of a process, seconds (/proc/PID/stat).
    static func processCPUSeconds(_ pid: Int32) -> Double? {
        guard let text = readFile("/proc/\(pid)/stat"), let paren = text.lastIndex(of: ")") else { return nil }
        let fields = text[text.index(after: paren)...].split(separator: " ")
        guard fields.count > 13, let u = Double(fields[11]), let s = Double(fields[12]) else { return nil }
        return (u + s) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    static func readFile(_ path: String) -> String? {
        guard let f = fopen(path, "r") else { return nil }
        defer { fclose(f) }
        var out = [UInt8]()
        var buf = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = fread(&buf, 1, buf.count, f)
            if n <= 0 { break }
            out += buf[0..<n]
        }
        return String(decoding: out, as: UTF8.self)
    }
}

