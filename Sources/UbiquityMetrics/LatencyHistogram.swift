import CoreMetrics
import Synchronization
import UbiquityLock

/// The histogram behind every swift-metrics `Timer` (call latency, commit and checkpoint
/// durations): one relaxed atomic per bucket, rendered as Prometheus' cumulative buckets only
/// when scraped.
///
/// Why not swift-prometheus' `Histogram<Duration>`: its `record` takes a mutex, checks the bucket
/// array is uniquely referenced, and compares the value against every bound through `Duration`'s
/// out-of-line `<` (the standard library is resilient), adding one to each bucket at or above it.
/// That was ~940 of the 1,180 instructions call metrics added to a Ping (callgrind, release;
/// docs/benchmarks.md, "what metrics cost"). Here a call costs a scan of `Int64` bounds and two
/// relaxed atomic adds.
final class LatencyHistogram: TimerHandler, @unchecked Sendable {
    let labels: [(String, String)]
    /// Upper bounds in nanoseconds, ascending; `counts[i]` holds the values in (bound[i-1], bound[i]],
    /// and `counts[bounds.count]` those above the last bound.
    let boundsNanos: [Int64]
    // @unchecked Sendable: the pointer is written once at init, then only through atomics.
    private let counts: UnsafeMutablePointer<Atomic<Int>>
    private let sumNanos = Atomic<Int64>(0)

    init(labels: [(String, String)], bucketSeconds: [Double]) {
        self.labels = labels
        boundsNanos = bucketSeconds.map { Int64(($0 * 1e9).rounded()) }
        counts = .allocate(capacity: boundsNanos.count + 1)
        for i in 0...boundsNanos.count { (counts + i).initialize(to: Atomic(0)) }
    }

    deinit {
        _ = counts.deinitialize(count: boundsNanos.count + 1)
        counts.deallocate()
    }

    func recordNanoseconds(_ duration: Int64) {
        var i = 0
        while i < boundsNanos.count && duration > boundsNanos[i] { i += 1 }
        counts[i].wrappingAdd(1, ordering: .relaxed)
        sumNanos.wrappingAdd(duration, ordering: .relaxed)
    }

    /// Cumulative counts by bound (the last is +Inf, which is also `_count`), and the sum in
    /// nanoseconds. Read bucket by bucket while calls record: a scrape may miss a call that ends
    /// meanwhile, but +Inf always equals the sum of what it read, as Prometheus requires.
    func snapshot() -> (cumulative: [Int], sumNanos: Int64) {
        var running = 0
        var cumulative: [Int] = []
        cumulative.reserveCapacity(boundsNanos.count + 1)
        for i in 0...boundsNanos.count {
            running += counts[i].load(ordering: .relaxed)
            cumulative.append(running)
        }
        return (cumulative, sumNanos.load(ordering: .relaxed))
    }
}

/// Every `LatencyHistogram` by metric name, for the exporter to render after the registry's
/// metrics (one HELP and TYPE per name, then each label set's series).
final class LatencyHistograms: Sendable {
    private let byName = Lock<[String: [LatencyHistogram]]>([:])

    /// The histogram of `name` and `labels`, made on first use: a second `Timer` with the same
    /// label set records into the same series (as swift-prometheus' registry does), never into a
    /// duplicate that would make the exposition invalid.
    func make(_ name: String, labels: [(String, String)], bucketSeconds: [Double]) -> LatencyHistogram {
        byName.withLock { all in
            if let existing = all[name]?.first(where: { $0.labels.elementsEqual(labels, by: ==) }) { return existing }
            let h = LatencyHistogram(labels: labels, bucketSeconds: bucketSeconds)
            all[name, default: []].append(h)
            return h
        }
    }

    func remove(_ h: LatencyHistogram) {
        byName.withLock { all in
            for name in all.keys { all[name]?.removeAll { $0 === h } }
        }
    }

    func render(into out: inout [UInt8], help: (String) -> String) {
        let all = byName.withLock { $0 }
        for name in all.keys.sorted() {
            guard let series = all[name], !series.isEmpty else { continue }
            out.append(contentsOf: "# HELP \(name) \(help(name))\n# TYPE \(name) histogram\n".utf8)
            for h in series {
                let labels = h.labels.map { "\($0.0)=\"\(Self.escaped($0.1))\"" }
                let prefix = labels.isEmpty ? "" : labels.joined(separator: ",") + ","
                let (cumulative, sum) = h.snapshot()
                for (i, bound) in h.boundsNanos.enumerated() {
                    out.append(contentsOf: "\(name)_bucket{\(prefix)le=\"\(Self.seconds(bound))\"} \(cumulative[i])\n".utf8)
                }
                let braces = labels.isEmpty ? "" : "{" + labels.joined(separator: ",") + "}"
                out.append(contentsOf: "\(name)_bucket{\(prefix)le=\"+Inf\"} \(cumulative.last!)\n".utf8)
                out.append(contentsOf: "\(name)_sum\(braces) \(Self.seconds(sum))\n".utf8)
                out.append(contentsOf: "\(name)_count\(braces) \(cumulative.last!)\n".utf8)
            }
        }
    }

    /// Seconds as swift-prometheus wrote `Duration`s ("0.00005", "1.0", "2.5"), so the `le`
    /// label values, and with them the series' identities in Prometheus, stay what they were.
    static func seconds(_ nanos: Int64) -> String {
        let sign = nanos < 0 ? "-" : ""
        let n = nanos.magnitude
        var fraction = String(n % 1_000_000_000)
        fraction = String(repeating: "0", count: 9 - fraction.count) + fraction
        while fraction.count > 1 && fraction.hasSuffix("0") { fraction.removeLast() }
        return "\(sign)\(n / 1_000_000_000).\(fraction)"
    }

    static func escaped(_ value: String) -> String {
        var out = ""
        for c in value {
            switch c {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.append(c)
            }
        }
        return out
    }
}
