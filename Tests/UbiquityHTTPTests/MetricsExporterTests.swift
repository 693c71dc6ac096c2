import Foundation
import UbiquityMetrics
import XCTest

/// A running total kept elsewhere, as the transport's atomics are.
private final class Source: @unchecked Sendable {
    // @unchecked: touched only by the sampler, which the exporter runs under its lock.
    var total: UInt64 = 0
}

final class MetricsExporterTests: XCTestCase {
    func testSamplersRunAtEveryRenderAndEveryFamilyHasHelpAndType() {
        let e = MetricsExporter()
        let open = e.gauge("ubiquity_contexts_open")
        let accepted = e.sampledCounter("ubiquity_grpc_connections_accepted_total")
        let source = Source()
        e.addSampler {
            source.total += 5  // samplers run one at a time, under the exporter's lock
            open.set(Double(source.total))
            accepted.set(total: source.total)
        }
        _ = e.render()
        let text = String(decoding: e.render(), as: UTF8.self)
        XCTAssertTrue(text.contains("ubiquity_contexts_open 10"), text)
        XCTAssertTrue(text.contains("ubiquity_grpc_connections_accepted_total 10"), text)
        for name in ["ubiquity_contexts_open", "ubiquity_grpc_connections_accepted_total"] {
            XCTAssertTrue(text.contains("# HELP \(name) "), text)
            XCTAssertTrue(text.contains("# TYPE \(name) "), text)
        }
    }

    func testSampledCounterNeverGoesBackwards() {
        let e = MetricsExporter()
        let c = e.sampledCounter("ubiquity_store_evictions_total")
        c.set(total: 7 as UInt64)
        c.set(total: 3 as UInt64)  // a smaller total (a restarted source) adds nothing
        c.set(total: 9 as UInt64)
        XCTAssertTrue(String(decoding: e.render(), as: UTF8.self).contains("ubiquity_store_evictions_total 9"))
    }

    func testCatalogNamesFollowPrometheusConventions() {
        var seen = Set<String>()
        for m in MetricCatalog.all {
            XCTAssertTrue(seen.insert(m.name).inserted, "\(m.name) twice")
            XCTAssertNotNil(m.name.range(of: "^[a-z_][a-z0-9_]*$", options: .regularExpression), m.name)
            XCTAssertEqual(m.kind == .counter, m.name.hasSuffix("_total"), "only counters end in _total: \(m.name)")
            if m.kind == .histogram { XCTAssertFalse(m.buckets.isEmpty, m.name) }
            XCTAssertFalse(m.help.isEmpty, m.name)
        }
    }

    /// docs/operations.md documents every metric (like ErrorReasonDocsTests for errors).
    func testEveryMetricIsDocumented() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let doc = try String(contentsOf: root.appendingPathComponent("docs/operations.md"), encoding: .utf8)
        for m in MetricCatalog.all {
            XCTAssertTrue(doc.contains("`\(m.name)`"), "docs/operations.md does not document \(m.name)")
        }
    }
}
