import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Transport settings. Every limit has a documented default (docs/operations.md, SPEC §5); the
/// defaults follow gRPC core where it has one.
public struct ServerConfiguration: Sendable {
    /// Address to listen on: an IPv4 or IPv6 literal. Default loopback only.
    public var host = "127.0.0.1"
    /// TCP port; 0 picks a free one (printed at start).
    public var port = 50051
    /// Event-loop threads; more than one shares the port through SO_REUSEPORT.
    public var eventLoops = 1
    /// Largest request message accepted (gRPC core default: 4 MiB). Larger → RESOURCE_EXHAUSTED.
    public var maxReceiveMessageBytes = 4 * 1024 * 1024
    /// Largest response message a handler may send.
    public var maxSendMessageBytes = 4 * 1024 * 1024
    /// SETTINGS_MAX_CONCURRENT_STREAMS per connection.
    public var maxConcurrentStreams = 100
    /// SETTINGS_MAX_HEADER_LIST_SIZE; a larger request header list → RESOURCE_EXHAUSTED (HTTP 431).
    public var maxHeaderListBytes = 16 * 1024
    /// Simultaneous connections; the next one is closed at once.
    public var maxConnections = 1024
    /// Bytes queued for the socket past which the server stops reading that connection.
    public var maxWriteQueueBytes = 1024 * 1024
    /// Per call: bytes of responses queued before `send` suspends the handler.
    public var streamOutboundHighWater = 256 * 1024
    /// Per call: request bytes waiting for the handler past which flow-control credit is withheld.
    public var streamInboundHighWater = 1024 * 1024
    /// SETTINGS_INITIAL_WINDOW_SIZE advertised for request streams.
    public var initialWindowSize = 1024 * 1024
    /// Connection-level receive window.
    public var connectionWindowSize = 16 * 1024 * 1024
    /// Worker threads for `.blocking` handlers (started only when the router has such a method);
    /// 0 means one per available core.
    public var blockingThreads = 0
    /// A connection that has not sent its preface and SETTINGS within this long is closed (0: no
    /// limit). gRPC servers have one too (grpc-go: 120 s); ours is short because a silent
    /// connection holds one of `maxConnections` (ConnectionTimeouts).
    public var handshakeTimeoutMilliseconds: UInt64 = 10_000
    /// A connection with no open stream for this long gets GOAWAY and is closed (gRPC's
    /// `max_connection_idle`; 0: never). Clients reconnect on their next call.
    public var idleTimeoutMilliseconds: UInt64 = 300_000
    /// After shutdown begins, in-flight calls get this long to finish before they are cancelled.
    public var shutdownGraceSeconds = 10.0
    /// Abuse guards, per connection per second: empty DATA frames, PING frames, SETTINGS frames.
    public var maxEmptyDataFramesPerSecond = 1000
    public var maxPingsPerSecond = 1000
    public var maxSettingsPerSecond = 100
    /// RST_STREAM rate limit handed to nghttp2 (token bucket: burst, then per second).
    public var streamResetBurst: UInt64 = 1000
    public var streamResetRate: UInt64 = 100

    public init() {}

    /// Whether `host` (an IPv4 or IPv6 literal) is a loopback address: 127.0.0.0/8, ::1, or
    /// ::ffff:127.x.x.x. Plaintext h2c is the default only there (docs/tls.md).
    public static func isLoopback(host: String) -> Bool {
        var v4 = in_addr()
        if inet_pton(AF_INET, host, &v4) == 1 {
            return UInt32(bigEndian: v4.s_addr) >> 24 == 127
        }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, host, &v6) == 1 else { return false }
        let b = withUnsafeBytes(of: &v6) { Array($0) }
        if b[0..<15].allSatisfy({ $0 == 0 }) && b[15] == 1 { return true }
        return b[0..<10].allSatisfy({ $0 == 0 }) && b[10] == 0xff && b[11] == 0xff && b[12] == 127
    }
}

/// Live counters, shared by all loops (relaxed atomics: they are statistics, not synchronization).
public final class ServerCounters: Sendable {
    public let openConnections = Atomic<UInt64>(0)
    public let acceptedConnections = Atomic<UInt64>(0)
    public let refusedConnections = Atomic<UInt64>(0)
    /// Connections closed by the handshake or idle timeout.
    public let timedOutConnections = Atomic<UInt64>(0)
    public let openStreams = Atomic<UInt64>(0)
    public let protocolErrors = Atomic<UInt64>(0)
    /// Completed calls by status code (relaxed atomics: one increment per call, no lock).
    private let byStatus: InlineArray<17, Atomic<UInt64>> = InlineArray { _ in Atomic(0) }

    public init() {}

    func countStatus(_ code: StatusCode) {
        let i = (0..<17).contains(code.rawValue) ? code.rawValue : 2
        byStatus[i].wrappingAdd(1, ordering: .relaxed)
    }

    /// Completed calls by status code.
    public var callsByStatus: [Int: UInt64] {
        var out: [Int: UInt64] = [:]
        for i in 0..<17 {
            let v = byStatus[i].load(ordering: .relaxed)
            if v > 0 { out[i] = v }
        }
        return out
    }
}
