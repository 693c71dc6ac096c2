import Histogram

#if canImport(Glibc)
import Glibc
#endif

/// What a W5 run measured: the writer's saves matched, by generation, with every receipt.
struct FanOutReport {
    var options: FanOutOptions
    var saves = 0
    var saveErrors = 0
    var saveFirstError: String?
    var savesWithoutGeneration = 0
    var deferredSaves = 0
    var writerSeconds = 0.0
    var saveLatency = FanOutReport.histogram()
    /// Receipt − the save's acknowledgement (0 when the receipt came first: `beforeAck`).
    var fromAck = FanOutReport.histogram()
    /// Receipt − the save's start.
    var fromStart = FanOutReport.histogram()
    var deliveries = 0
    var expected = 0
    var missing = 0
    var duplicates = 0
    var beforeAck = 0
    var endedEarly = 0
    var subscriberError: String?
    var malformed = 0
    var drainTimedOut = false
    var subscribeSeconds = 0.0
    var serverCPUSeconds: Double?
    var generatorCPUSeconds = 0.0
    /// Before connecting; after the connections are up; after every subscription caught up; at the end.
    var rssBeforeKiB: Int?
    var rssConnectedKiB: Int?
    var rssSubscribedKiB: Int?
    var rssEndKiB: Int?

    init(options: FanOutOptions) { self.options = options }

    static func histogram() -> Histogram<UInt64> {
        Histogram(lowestDiscernibleValue: 1_000, highestTrackableValue: 120_000_000_000, numberOfSignificantValueDigits: .three)
    }

    /// Reads the joined threads' state.
    mutating func merge(writer: FanOutWriter, workers: [SubscriberWorker]) {
        saves = writer.saves.count
        saveErrors = writer.errors
        saveFirstError = writer.firstError
        savesWithoutGeneration = writer.missingGeneration
        deferredSaves = writer.deferred
        writerSeconds = writer.seconds
        var index: [Int64: Int] = [:]
        index.reserveCapacity(writer.saves.count)
        for (i, s) in writer.saves.enumerated() {
            index[s.generation] = i
            _ = saveLatency.record(s.ack &- s.start)
        }
        var seen = [Bool](repeating: false, count: writer.saves.count)
        for w in workers {
            endedEarly += w.endedEarly
            subscriberError = subscriberError ?? w.firstError
            for sub in w.subscriptions {
                malformed += sub.malformed
                for k in seen.indices { seen[k] = false }
                for (g, t) in zip(sub.generations, sub.receipts) {
                    guard let i = index[g] else { continue }  // not one of the writer's saves
                    if seen[i] { duplicates += 1; continue }
                    seen[i] = true
                    deliveries += 1
                    let s = writer.saves[i]
                    if t < s.ack { beforeAck += 1 }
                    _ = fromAck.record(t > s.ack ? t - s.ack : 0)
                    _ = fromStart.record(t &- s.start)
                }
                expected += writer.saves.count
            }
        }
        missing = expected - deliveries
    }

    private func ms(_ h: Histogram<UInt64>, _ p: Double) -> Double {
        h.totalCount == 0 ? 0 : Double(h.valueAtPercentile(p)) / 1e6
    }

    /// Server memory per subscriber, its share of the connections included.
    var kibPerSubscriber: Double? {
        guard let a = rssBeforeKiB, let b = rssSubscribedKiB, options.subscribers > 0 else { return nil }
        return Double(b - a) / Double(options.subscribers)
    }

    /// The subscription alone: RSS growth from connected to subscribed.
    var kibPerSubscription: Double? {
        guard let a = rssConnectedKiB, let b = rssSubscribedKiB, options.subscribers > 0 else { return nil }
        return Double(b - a) / Double(options.subscribers)
    }

    var serverMicrosPerDelivery: Double? {
        serverCPUSeconds.map { $0 * 1e6 / Double(max(1, deliveries)) }
    }

    func json() -> String {
        func num(_ x: Double?, _ digits: Int = 4) -> String {
            guard let x, x.isFinite else { return "null" }
            return String(format: "%.\(digits)f", x)
        }
        func int(_ x: Int?) -> String { x.map(String.init) ?? "null" }
        func str(_ s: String?) -> String {
            guard let s else { return "null" }
            var out = "\""
            for u in s.unicodeScalars {
                switch u {
                case "\"": out += "\\\""
                case "\\": out += "\\\\"
                default:
                    if u.value < 0x20 { out += String(format: "\\u%04x", u.value) } else { out.unicodeScalars.append(u) }
                }
            }
            return out + "\""
        }
        let fields = [
            "\"workload\": \"fanout\"", "\"system\": \(str(options.system))",
            "\"subscribers\": \(options.subscribers)", "\"connections\": \(options.connections)",
            "\"threads\": \(options.threads)", "\"rate\": \(num(options.rate, 1))",
            "\"saves\": \(saves)", "\"save_errors\": \(saveErrors)", "\"save_first_error\": \(str(saveFirstError))",
            "\"saves_without_generation\": \(savesWithoutGeneration)", "\"deferred_saves\": \(deferredSaves)",
            "\"seconds\": \(num(writerSeconds))", "\"throughput\": \(num(Double(saves) / max(writerSeconds, 1e-9), 1))",
            "\"save_p50_ms\": \(num(ms(saveLatency, 50)))", "\"save_p99_ms\": \(num(ms(saveLatency, 99)))",
            "\"deliveries\": \(deliveries)", "\"expected_deliveries\": \(expected)", "\"missing\": \(missing)",
            "\"duplicates\": \(duplicates)", "\"before_ack\": \(beforeAck)", "\"ended_early\": \(endedEarly)",
            "\"subscriber_error\": \(str(subscriberError))", "\"malformed\": \(malformed)",
            "\"drain_timed_out\": \(drainTimedOut)", "\"subscribe_seconds\": \(num(subscribeSeconds))",
            "\"p50_ms\": \(num(ms(fromAck, 50)))", "\"p99_ms\": \(num(ms(fromAck, 99)))",
            "\"p999_ms\": \(num(ms(fromAck, 99.9)))", "\"max_ms\": \(num(fromAck.totalCount == 0 ? 0 : Double(fromAck.max) / 1e6))",
            "\"from_start_p50_ms\": \(num(ms(fromStart, 50)))", "\"from_start_p99_ms\": \(num(ms(fromStart, 99)))",
            "\"from_start_p999_ms\": \(num(ms(fromStart, 99.9)))",
            "\"server_cpu_seconds\": \(num(serverCPUSeconds))",
            "\"server_cpu_us_per_delivery\": \(num(serverMicrosPerDelivery, 2))",
            "\"generator_cpu_seconds\": \(num(generatorCPUSeconds))",
            "\"rss_before_kib\": \(int(rssBeforeKiB))", "\"rss_connected_kib\": \(int(rssConnectedKiB))",
            "\"rss_subscribed_kib\": \(int(rssSubscribedKiB))", "\"kib_per_subscription\": \(num(kibPerSubscription, 2))",
            "\"rss_end_kib\": \(int(rssEndKiB))", "\"kib_per_subscriber\": \(num(kibPerSubscriber, 2))",
        ]
        return "{" + fields.joined(separator: ", ") + "}"
    }

    func text() -> String {
        func f(_ x: Double) -> String { String(format: "%.3f", x) }
        var lines = [
            "workload     fanout against \(options.system): \(options.subscribers) subscribers on \(options.connections) connections, \(options.threads) thread(s); one writer at \(Int(options.rate)) saves/s",
            "saves        \(saves) acknowledged in \(f(writerSeconds)) s (\(saveErrors) errors); save p50 \(f(ms(saveLatency, 50))) ms  p99 \(f(ms(saveLatency, 99))) ms",
            "deliveries   \(deliveries) of \(expected) expected (\(missing) missing, \(duplicates) duplicates, \(beforeAck) before the ack)\(drainTimedOut ? " — drain timed out" : "")",
            "from ack ms  p50 \(f(ms(fromAck, 50)))  p99 \(f(ms(fromAck, 99)))  p99.9 \(f(ms(fromAck, 99.9)))",
            "from start   p50 \(f(ms(fromStart, 50)))  p99 \(f(ms(fromStart, 99)))  p99.9 \(f(ms(fromStart, 99.9)))",
            "subscribe    all caught up in \(f(subscribeSeconds)) s",
        ]
        if let cpu = serverMicrosPerDelivery { lines.append("server CPU   \(String(format: "%.2f", cpu)) µs per delivery") }
        if let a = rssBeforeKiB, let m = rssConnectedKiB, let b = rssSubscribedKiB, let c = rssEndKiB {
            lines.append("server RSS   \(a) KiB before, \(m) KiB connected, \(b) KiB subscribed, \(c) KiB at the end; \(String(format: "%.2f", kibPerSubscriber ?? 0)) KiB per subscriber with its share of the connections, \(String(format: "%.2f", kibPerSubscription ?? 0)) KiB per subscription alone")
        }
        if let e = saveFirstError { lines.append("save error   \(e)") }
        if let e = subscriberError { lines.append("subscriber   \(e) (\(endedEarly) ended early)") }
        return lines.joined(separator: "\n")
    }
}
