import CoreMetrics
import Prometheus

/// swift-metrics' backend in ubiquityd: swift-prometheus's registry, with each metric's help
/// text and buckets from `MetricCatalog` (swift-prometheus's own factory registers every
/// metric without help, which `promtool check metrics` rejects).
struct CatalogMetricsFactory: MetricsFactory {
    let registry: PrometheusCollectorRegistry
    /// Timers' histograms, kept apart from the registry (LatencyHistogram says why).
    let latencyHistograms: LatencyHistograms

    private func descriptor(_ label: String) -> MetricNameDescriptor {
        MetricNameDescriptor(metricName: label, unitName: "", helpText: MetricCatalog.info(label)?.help ?? "\(label) (not in MetricCatalog).")
    }

    private func buckets(_ label: String) -> [Double] {
        let b = MetricCatalog.info(label)?.buckets ?? []
        return b.isEmpty ? MetricCatalog.latencyBuckets : b
    }

    func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler {
        registry.makeCounter(descriptor: descriptor(label), labels: dimensions)
    }

    func makeFloatingPointCounter(label: String, dimensions: [(String, String)]) -> any FloatingPointCounterHandler {
        registry.makeCounter(descriptor: descriptor(label), labels: dimensions)
    }

    func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
        guard aggregate else { return registry.makeGauge(descriptor: descriptor(label), labels: dimensions) }
        return registry.makeValueHistogram(descriptor: descriptor(label), labels: dimensions, buckets: buckets(label))
    }

    func makeMeter(label: String, dimensions: [(String, String)]) -> any MeterHandler {
        registry.makeGauge(descriptor: descriptor(label), labels: dimensions)
    }

    func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler {
        latencyHistograms.make(label, labels: dimensions, bucketSeconds: buckets(label))
    }

    func destroyCounter(_ handler: any CounterHandler) {
        if let c = handler as? Prometheus.Counter { registry.unregisterCounter(c) }
    }

    func destroyFloatingPointCounter(_ handler: any FloatingPointCounterHandler) {
        if let c = handler as? Prometheus.Counter { registry.unregisterCounter(c) }
    }

    func destroyRecorder(_ handler: any RecorderHandler) {
        if let g = handler as? Prometheus.Gauge { registry.unregisterGauge(g) }
        if let h = handler as? ValueHistogram { registry.unregisterValueHistogram(h) }
    }

    func destroyMeter(_ handler: any MeterHandler) {
        if let g = handler as? Prometheus.Gauge { registry.unregisterGauge(g) }
    }

    func destroyTimer(_ handler: any TimerHandler) {
        if let h = handler as? LatencyHistogram { latencyHistograms.remove(h) }
    }
}
