import Histogram
import Synchronization
import UbiquityGRPC
import UbiquityGRPCClient
import UbiquityLoop

#if canImport(Glibc)
import Glibc
#endif

/// Monotonic nanoseconds (vDSO clock_gettime: no syscall).
func monotonicNanos() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

/// Calls finished so far, all workers (read by the progress line).
final class Progress: Sendable {
    let calls = Atomic<Int>(0)
}

/// What one worker measured.
struct WorkerResult {
    var histogram = Histogram<UInt64>(lowestDiscernibleValue: 1_000, highestTrackableValue: 120_000_000_000,
                                      numberOfSignificantValueDigits: .three)
    var ok = 0
    /// OK calls at the plan's `cold` positions, recorded here as well as in `histogram`.
    var cold = Histogram<UInt64>(lowestDiscernibleValue: 1_000, highestTrackableValue: 120_000_000_000,
                                 numberOfSignificantValueDigits: .three)
    var errors: [Int: Int] = [:]
    var firstError: String?
    var endNanos: UInt64 = 0
    var backgroundOK = 0
    var backgroundErrors = 0
}

/// One loop thread and its connections. Each connection keeps `streams` calls in flight: every
/// completion starts the next call on the same connection until the connection's share of the
/// request count is used up or the duration ends.
///
/// @unchecked Sendable: every mutable property is touched only on `thread`'s loop until the main
/// thread has joined that thread (after `done` was signalled); then only by the main thread.
/// The same invariant makes `@exclusivity(unchecked)` on the mutable state safe: one thread at a
/// time, and no overlapping accesses (a completion runs after the call that started it returned);
/// measured, without them the generator runs 15.3k instead of 14.7k instructions per call (+4%)
/// (callgrind, release, ubiquity-load -c 4 -m 16 Admin.Ping, 25k − 5k calls, 2026-11-25).
final class Worker: @unchecked Sendable {
    let index: Int
    let thread: EventLoopThread
    var loop: EventLoop { thread.loop }
    private let host: String
    private let port: Int
    private let streams: Int
    private let requests: [PreparedRequest]
    private let cold: [Bool]
    /// Calls the extra connection keeps running while the measured calls run (not measured).
    private let background: [PreparedRequest]
    @exclusivity(unchecked) private var backgroundConnection: ClientConnection?
    @exclusivity(unchecked) private var backgroundNext = 0
    @exclusivity(unchecked) private var backgroundInFlight = 0
    @exclusivity(unchecked) private var measuredDone = false
    private let progress: Progress
    @exclusivity(unchecked) private var connections: [ClientConnection] = []
    /// Calls each connection may still start.
    @exclusivity(unchecked) private var remaining: [Int]
    @exclusivity(unchecked) private var completions: [(ClientCallResult) -> Void] = []
    @exclusivity(unchecked) private var coldCompletions: [(ClientCallResult) -> Void] = []
    @exclusivity(unchecked) private var next = 0
    @exclusivity(unchecked) private var inFlight = 0
    @exclusivity(unchecked) private var stopIssuing = false
    @exclusivity(unchecked) private var finished = false
    @exclusivity(unchecked) private var timer: LoopTimer?
    private let onDone: @Sendable () -> Void
    @exclusivity(unchecked) var result = WorkerResult()

    init(index: Int, host: String, port: Int, shares: [Int], streams: Int, requests: [PreparedRequest], cold: [Bool] = [],
         background: [PreparedRequest], progress: Progress, onDone: @escaping @Sendable () -> Void) {
        self.index = index
        self.thread = EventLoopThread(name: "load-\(index)")
        self.host = host
        self.port = port
        self.remaining = shares
        self.streams = streams
        self.requests = requests
        self.cold = cold
        self.background = background
        self.progress = progress
        self.onDone = onDone
    }

    /// Connects every connection; `completion` gets nil or the first error. Loop thread.
    func connect(_ completion: @escaping (RPCError?) -> Void) {
        let count = remaining.count + (background.isEmpty ? 0 : 1)
        var left = count
        var failed: RPCError?
        guard left > 0 else { completion(nil); return }
        connections.reserveCapacity(left)
        var slots = [ClientConnection?](repeating: nil, count: left)
        for i in 0..<count {
            ClientConnection.connect(loop: loop, host: host, port: port, options: ClientTLS.options) { r in
                switch r {
                case .success(let c): slots[i] = c
                case .failure(let e): failed = failed ?? e
                }
                left -= 1
                if left == 0 {
                    if failed == nil {
                        var all = slots.map { $0! }
                        if !self.background.isEmpty { self.backgroundConnection = all.removeLast() }
                        self.connections = all
                    } else {
                        for c in slots { c?.close() }
                    }
                    completion(failed)
                }
            }
        }
    }

    /// Starts the calls; with `durationMillis` > 0 stops starting new ones after that long. Loop thread.
    func go(durationMillis: UInt64) {
        completions = connections.indices.map { ci in { [self] result in self.completed(ci, result) } }
        if !cold.isEmpty {
            coldCompletions = connections.indices.map { ci in { [self] result in self.completed(ci, result, cold: true) } }
        }
        if durationMillis > 0 {
            let t = LoopTimer(loop: loop)
            timer = t
            t.start(milliseconds: durationMillis) { [self] in
                self.stopIssuing = true
                self.timer?.close()
                self.timer = nil
                self.checkDone()
            }
        }
        issueBackground()
        for ci in connections.indices {
            for _ in 0..<streams where issue(ci) {}
        }
        for c in connections { c.flush() }
        checkDone()
    }

    private func issueBackground() {
        guard let c = backgroundConnection, !measuredDone, !stopIssuing, c.isUsable else { return }
        backgroundInFlight += 1
        let request = background[backgroundNext]
        backgroundNext = (backgroundNext + 1) % background.count
        c.startCall(request) { [self] r in
            self.backgroundInFlight -= 1
            if r.status == .ok { self.result.backgroundOK += 1 } else { self.result.backgroundErrors += 1 }
            self.issueBackground()
            self.checkDone()
        }
    }

    private func issue(_ ci: Int) -> Bool {
        guard !stopIssuing, remaining[ci] > 0 else { return false }
        let connection = connections[ci]
        guard connection.isUsable else { return false }
        remaining[ci] -= 1
        inFlight += 1
        let request = requests[next]
        let completion = !cold.isEmpty && cold[next] ? coldCompletions[ci] : completions[ci]
        next += 1
        if next == requests.count { next = 0 }
        connection.startCall(request, tag: monotonicNanos(), completion: completion)
        return true
    }

    private func completed(_ ci: Int, _ r: ClientCallResult, cold: Bool = false) {
        let end = monotonicNanos()
        inFlight -= 1
        if r.status == .ok {
            result.ok += 1
            _ = result.histogram.record(end &- r.tag)
            if cold { _ = result.cold.record(end &- r.tag) }
        } else {
            result.errors[r.status.rawValue, default: 0] += 1
            if result.firstError == nil { result.firstError = "\(r.status): \(r.message)" }
        }
        result.endNanos = end
        progress.calls.wrappingAdd(1, ordering: .relaxed)
        if !issue(ci) { checkDone() }
    }

    private func checkDone() {
        guard !finished else { return }
        // inFlight == 0 means every connection's last completion could not start another call.
        if inFlight == 0 { measuredDone = true }
        guard measuredDone, backgroundInFlight == 0 else { return }
        finished = true
        timer?.close()
        timer = nil
        if result.endNanos == 0 { result.endNanos = monotonicNanos() }
        for c in connections { c.close() }
        backgroundConnection?.close()
        backgroundConnection = nil
        connections.removeAll()
        completions.removeAll()
        coldCompletions.removeAll()
        onDone()
    }

    /// Ends early (the hard time bound): stops starting calls and closes connections, which fails
    /// the calls in flight with UNAVAILABLE. Loop thread.
    func abort() {
        stopIssuing = true
        for c in connections { c.close() }
        backgroundConnection?.close()
        checkDone()
    }
}
