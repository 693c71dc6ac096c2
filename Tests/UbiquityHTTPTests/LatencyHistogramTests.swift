import CoreMetrics
import UbiquityMetrics
import XCTest

/// Timers record into `LatencyHistogram` (not swift-prometheus' histogram): the exposition must
/// still be a valid Prometheus histogram with the same `le` values as before.
final class LatencyHistogramTests: XCTestCase {
    func testTimersRenderCumulativeBucketsSumAndCount() {
        let e = MetricsExporter()
        let factory = e.factory
        let labels = [("grpc_service", "ubiquity.v1.Admin"), ("grpc_method", "Ping"), ("grpc_type", "unary")]
        let timer = CoreMetrics.Timer(label: "grpc_server_handling_seconds", dimensions: labels, factory: factory)
        timer.recordNanoseconds(30_000)         // 30 µs: in le=0.00005 and above
        timer.recordNanoseconds(50_000)         // exactly a bound: counted in that bucket
        timer.recordNanoseconds(2_000_000)      // 2 ms: le=0.0025 and above
        timer.recordNanoseconds(60_000_000_000) // a minute: only +Inf
        // The same label set again is the same series (a duplicate would break the exposition).
        CoreMetrics.Timer(label: "grpc_server_handling_seconds", dimensions: labels, factory: factory).recordNanoseconds(1)
        let text = String(decoding: e.render(), as: UTF8.self)
        let series = #"grpc_service="ubiquity.v1.Admin",grpc_method="Ping",grpc_type="unary""#
        for line in [
            "# TYPE grpc_server_handling_seconds histogram",
            #"grpc_server_handling_seconds_bucket{\#(series),le="0.00005"} 3"#,
            #"grpc_server_handling_seconds_bucket{\#(series),le="0.001"} 3"#,
            #"grpc_server_handling_seconds_bucket{\#(series),le="0.0025"} 4"#,
            #"grpc_server_handling_seconds_bucket{\#(series),le="1.0"} 4"#,
            #"grpc_server_handling_seconds_bucket{\#(series),le="10.0"} 4"#,
            #"grpc_server_handling_seconds_bucket{\#(series),le="+Inf"} 5"#,
            "grpc_server_handling_seconds_sum{\(series)} 60.002080001",
            "grpc_server_handling_seconds_count{\(series)} 5",
        ] {
            XCTAssertTrue(text.contains(line + "\n"), "missing \(line) in\n\(text)")
        }
        XCTAssertEqual(text.components(separatedBy: "# HELP grpc_server_handling_seconds ").count, 2, text)
    }

    func testTimerWithoutLabels() {
        let e = MetricsExporter()
        CoreMetrics.Timer(label: "ubiquity_store_commit_seconds", factory: e.factory).recordNanoseconds(3_000_000)
        let text = String(decoding: e.render(), as: UTF8.self)
        XCTAssertTrue(text.contains(#"ubiquity_store_commit_seconds_bucket{le="0.0025"} 0"#), text)
        XCTAssertTrue(text.contains(#"ubiquity_store_commit_seconds_bucket{le="0.005"} 1"#), text)
        XCTAssertTrue(text.contains("ubiquity_store_commit_seconds_sum 0.003\n"), text)
        XCTAssertTrue(text.contains("ubiquity_store_commit_seconds_count 1\n"), text)
    }
}
