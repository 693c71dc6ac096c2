import UbiquityGRPC
import UbiquityLock
import UbiquityProtos

/// `grpc.health.v1.Health`. The overall server is the empty service name. On drain every service
/// turns NOT_SERVING, every Watch stream gets that update and then ends with UNAVAILABLE.
public final class HealthService: Sendable {
    public typealias Status = Grpc_Health_V1_HealthCheckResponse.ServingStatus

    private struct Watcher {
        let service: String
        let continuation: AsyncStream<Status>.Continuation
    }
    private struct State {
        var statuses: [String: Status] = [:]
        var watchers: [Int: Watcher] = [:]
        var nextID = 0
        var draining = false
    }
    private let state = Lock(State())

    public init(services: [String]) {
        state.withLock { s in
            s.statuses[""] = .serving
            for name in services { s.statuses[name] = .serving }
        }
    }

    /// Sets one service's status and tells its watchers.
    public func set(_ service: String, _ status: Status) {
        let targets = state.withLock { s -> [AsyncStream<Status>.Continuation] in
            s.statuses[service] = status
            return s.watchers.values.filter { $0.service == service }.map(\.continuation)
        }
        for c in targets { c.yield(status) }
    }

    /// Graceful shutdown: everything NOT_SERVING, then every Watch stream ends.
    public func drain() {
        let targets = state.withLock { s -> [AsyncStream<Status>.Continuation] in
            s.draining = true
            for k in s.statuses.keys { s.statuses[k] = .notServing }
            return s.watchers.values.map(\.continuation)
        }
        for c in targets {
            c.yield(.notServing)
            c.finish()
        }
    }

    public func register(into router: inout Router) {
        router.register(service: "grpc.health.v1.Health") { t in
            // Inline (docs/threading.md, rule 4): one dictionary lookup under a lock that is only
            // ever held for dictionary updates (never across a wait), so it runs on the loop thread.
            t.inline("Check", check)
            t.serverStreaming("Watch", watch)
        }
    }

    func check(_ request: Grpc_Health_V1_HealthCheckRequest, call: SyncCallContext) throws -> Grpc_Health_V1_HealthCheckResponse {
        guard let status = state.withLock({ $0.statuses[request.service] }) else {
            throw RPCError(.notFound, "unknown service \"\(request.service)\"")
        }
        var res = Grpc_Health_V1_HealthCheckResponse()
        res.status = status
        return res
    }

    /// The current status, then each change, until the server drains (then UNAVAILABLE).
    func watch(_ request: Grpc_Health_V1_HealthCheckRequest, writer: ResponseWriter<Grpc_Health_V1_HealthCheckResponse>,
               call: ServerCall) async throws {
        let (stream, continuation) = AsyncStream<Status>.makeStream(bufferingPolicy: .bufferingNewest(8))
        let id = state.withLock { s -> Int in
            let id = s.nextID
            s.nextID += 1
            continuation.yield(s.statuses[request.service] ?? .serviceUnknown)
            if s.draining { continuation.finish() } else { s.watchers[id] = Watcher(service: request.service, continuation: continuation) }
            return id
        }
        defer { _ = state.withLock { $0.watchers.removeValue(forKey: id) } }
        var last: Status?
        for await status in stream {
            if status == last { continue }
            last = status
            var res = Grpc_Health_V1_HealthCheckResponse()
            res.status = status
            try await writer.write(res)
        }
        try Task.checkCancellation()
        throw RPCError(.unavailable, "the server is shutting down")
    }
}
