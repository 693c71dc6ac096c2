import CoreMetrics
import Foundation
import Prometheus
import UbiquityHTTP
import UbiquityLock

/// The Prometheus exposition: one registry that swift-metrics records into (`factory`, for
/// `MetricsSystem.bootstrap`), plus values sampled when scraped (`addSampler`): what is a
/// state (connections open, WAL size) is read then rather than tracked on every change.
public final class MetricsExporter: Sendable {
    public let registry = PrometheusCollectorRegistry()
    private let latencyHistograms = LatencyHistograms()
    private let samplers = Lock<[@Sendable () -> Void]>([])

    public init() {}

    /// The swift-metrics backend recording into this exporter's registry.
    public var factory: any MetricsFactory { CatalogMetricsFactory(registry: registry, latencyHistograms: latencyHistograms) }

    /// A gauge for a sampler to set (its name must be in `MetricCatalog`).
    public func gauge(_ name: String, labels: [(String, String)] = []) -> Prometheus.Gauge {
        registry.makeGauge(descriptor: Self.descriptor(name), labels: labels)
    }

    /// A counter for a sampler that reads a running total somewhere else.
    public func sampledCounter(_ name: String, labels: [(String, String)] = []) -> SampledCounter {
        SampledCounter(registry.makeCounter(descriptor: Self.descriptor(name), labels: labels))
    }

    /// Runs at every scrape, before the exposition is rendered, on the HTTP server's thread.
    public func addSampler(_ sampler: @escaping @Sendable () -> Void) {
        samplers.withLock { $0.append(sampler) }
    }

    /// The text exposition format (version 0.0.4), every sampler run first.
    public func render() -> [UInt8] {
        // Under the lock: two scrapes at once would interleave their samples.
        samplers.withLock { all in
            for s in all { s() }
            var out = registry.emitToBuffer()
            latencyHistograms.render(into: &out) { MetricCatalog.info($0)?.help ?? "\($0) (not in MetricCatalog)." }
            return out
        }
    }

    /// GET /metrics (the exposition) and GET /healthz (200 while `healthy`, else 503).
    public func routes(healthy: @escaping @Sendable () -> Bool) -> HTTPRoutes {
        var routes = HTTPRoutes()
        routes.get("/metrics") { [self] in
            HTTPResponse(status: 200, headers: [("Content-Type", "text/plain; version=0.0.4; charset=utf-8")], body: render())
        }
        routes.get("/healthz") {
            healthy() ? .text(200, "ok\n") : .text(503, "draining\n")
        }
        return routes
    }

    static func descriptor(_ name: String) -> MetricNameDescriptor {
        guard let info = MetricCatalog.info(name) else { preconditionFailure("metric \(name) is not in MetricCatalog") }
        return MetricNameDescriptor(metricName: name, unitName: "", helpText: info.help)
    }
}

/// A Prometheus counter that follows a total kept elsewhere (a relaxed atomic of the transport,
/// a store directory's count): each sample adds what the total grew by.
public final class SampledCounter: Sendable {
    private let counter: Prometheus.Counter
    private let last = Lock<Double>(0)

    init(_ counter: Prometheus.Counter) { self.counter = counter }

    public func set(total: Double) {
        let delta = last.withLock { last -> Double in
            let d = total - last
            if d > 0 { last = total }
            return d
        }
        if delta > 0 { counter.increment(by: delta) }
    }

    public func set(total: UInt64) { set(total: Double(total)) }
}
