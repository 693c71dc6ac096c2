import CoreMetrics
#if canImport(Glibc)
import Glibc
#endif

/// One method's call metrics, recorded through swift-metrics (whatever backend the process
/// bootstrapped; the daemon's is Prometheus). Names and labels follow go-grpc-prometheus, which
/// dashboards and alerts already know: `grpc_server_handled_total{grpc_service, grpc_method,
/// grpc_type, grpc_code}` and `grpc_server_handling_seconds{grpc_service, grpc_method, grpc_type}`.
///
/// Every handle is made when the method is registered, none per call: making one goes through
/// the backend's registry lock, recording does not (a counter is an atomic add; the histogram
/// takes a lock of its own, one per method).
public final class MethodMetrics: Sendable {
    /// By status code 0...16 (others count as UNKNOWN, as `ServerCounters` does).
    private let handled: [CoreMetrics.Counter]
    private let handling: CoreMetrics.Timer

    public static let handledLabel = "grpc_server_handled_total"
    public static let handlingLabel = "grpc_server_handling_seconds"

    init(path: String, kind: RPCKind) {
        let parts = path.split(separator: "/")
        let dimensions = [("grpc_service", String(parts.first ?? "")), ("grpc_method", String(parts.last ?? "")),
                          ("grpc_type", kind.metricLabel)]
        // All 17 codes up front, as go-grpc-prometheus does: a rate over a series that appears
        // only with its first error misses that error.
        handled = (0...16).map { code in
            CoreMetrics.Counter(label: Self.handledLabel, dimensions: dimensions + [("grpc_code", StatusCode(rawValue: code).description)])
        }
        handling = CoreMetrics.Timer(label: Self.handlingLabel, dimensions: dimensions)
    }

    /// A call ended with `code`, `startNanos` (`monotonicNanos()` at admission) ago.
    func ended(_ code: StatusCode, startNanos: UInt64) {
        handled[(0...16).contains(code.rawValue) ? code.rawValue : 2].increment()
        handling.recordNanoseconds(Int64(truncatingIfNeeded: monotonicNanos() &- startNanos))
    }
}

extension RPCKind {
    var metricLabel: String {
        switch self {
        case .unary: "unary"
        case .serverStreaming: "server_stream"
        case .clientStreaming: "client_stream"
        case .bidirectional: "bidi_stream"
        }
    }
}

/// CLOCK_MONOTONIC in nanoseconds (a vDSO read: no system call).
func monotonicNanos() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
}
