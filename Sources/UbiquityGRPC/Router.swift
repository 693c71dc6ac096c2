import SwiftProtobuf

/// A handler over raw message bytes. It ends the call by returning (OK, unless it called `finish`)
/// or by throwing (the error becomes the status; see `RPCError(converting:)`).
public typealias RawHandler = @Sendable (ServerCall) async throws -> Void

/// One method: its shape and its handler. A class so each call's stream holds it with one
/// reference instead of copying (and retaining) every field.
public final class MethodDescriptor: Sendable {
    public let path: String
    public let kind: RPCKind
    public let handler: RawHandler
    /// Where the handler runs; `.inline` and `.blocking` are unary methods with `syncHandler`.
    public let execution: HandlerExecution
    public let syncHandler: SyncUnaryHandler?
    /// Nil unless the router was made with `callMetrics` (no clock reads, no calls when off).
    let metrics: MethodMetrics?

    init(path: String, kind: RPCKind, handler: @escaping RawHandler, execution: HandlerExecution, syncHandler: SyncUnaryHandler?,
         metrics: MethodMetrics? = nil) {
        self.path = path
        self.kind = kind
        self.handler = handler
        self.execution = execution
        self.syncHandler = syncHandler
        self.metrics = metrics
    }
}

/// Maps `/package.Service/Method` to handlers. Filled before the server starts, read-only after.
public struct Router: Sendable {
    public private(set) var methods: [String: MethodDescriptor] = [:]
    public private(set) var services: [String] = []
    /// Whether methods registered from now on record `MethodMetrics` (through swift-metrics:
    /// bootstrap its backend before registering).
    public let callMetrics: Bool

    public init(callMetrics: Bool = false) {
        self.callMetrics = callMetrics
    }

    public mutating func register(_ path: String, kind: RPCKind, _ handler: @escaping RawHandler) {
        register(path, kind: kind, execution: .task, sync: nil, handler)
    }

    mutating func register(_ path: String, kind: RPCKind, execution: HandlerExecution, sync: SyncUnaryHandler?,
                           _ handler: @escaping RawHandler) {
        precondition(path.hasPrefix("/") && path.dropFirst().contains("/"), "method path must be /Service/Method: \(path)")
        precondition(methods[path] == nil, "method registered twice: \(path)")
        methods[path] = MethodDescriptor(path: path, kind: kind, handler: handler, execution: execution, syncHandler: sync,
                                         metrics: callMetrics ? MethodMetrics(path: path, kind: kind) : nil)
        let service = String(path.dropFirst().split(separator: "/")[0])
        if !services.contains(service) { services.append(service) }
    }

    /// The method for `path`, or the UNIMPLEMENTED status to answer with.
    func lookup(_ path: String) -> Result<MethodDescriptor, RPCError> {
        if let m = methods[path] { return .success(m) }
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        if parts.count == 3, parts[0].isEmpty, services.contains(String(parts[1])) {
            return .failure(RPCError(.unimplemented, "unknown method \(parts[2]) for service \(parts[1])"))
        }
        let service = parts.count >= 2 ? String(parts[1]) : path
        return .failure(RPCError(.unimplemented, "unknown service \(service)"))
    }
}

// MARK: typed handlers over SwiftProtobuf messages

/// Writes typed response messages of a streaming call.
public struct ResponseWriter<Response: SwiftProtobuf.Message>: Sendable {
    let call: ServerCall
    /// Sends initial metadata now rather than with the first message.
    public func sendInitialMetadata(_ metadata: Metadata) { call.sendInitialMetadata(metadata) }
    /// Sends one message; suspends while the peer is not reading.
    public func write(_ message: Response) async throws {
        try await call.send(try message.serializedBytes())
    }
    /// Suspends while the peer is not reading; call it before building an expensive message.
    public func waitUntilWritable() async throws {
        try await call.waitUntilWritable()
    }
}

/// The typed request messages of a client-streaming or bidirectional call.
public struct RequestStream<Request: SwiftProtobuf.Message>: AsyncSequence, Sendable {
    public typealias Element = Request
    let call: ServerCall

    public struct AsyncIterator: AsyncIteratorProtocol {
        let call: ServerCall
        public mutating func next() async throws -> Request? {
            guard let bytes = try await call.receive() else { return nil }
            return try Request(requestBytes: bytes)
        }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(call: call) }
}

extension SwiftProtobuf.Message {
    /// Decodes a request message; bytes that are not one end the call INVALID_ARGUMENT.
    public init(requestBytes bytes: [UInt8]) throws {
        do {
            try self.init(serializedBytes: bytes)
        } catch {
            throw RPCError(.invalidArgument, "could not decode request as \(Self.protoMessageName): \(error)")
        }
    }
}

/// A typed unary response with optional trailing metadata.
public struct UnaryResponse<Response: SwiftProtobuf.Message>: Sendable {
    public var message: Response
    public var trailingMetadata: Metadata
    public init(_ message: Response, trailingMetadata: Metadata = Metadata()) {
        self.message = message
        self.trailingMetadata = trailingMetadata
    }
}

extension Router {
    /// Registers a unary method.
    public mutating func unary<Req: SwiftProtobuf.Message, Res: SwiftProtobuf.Message>(
        _ path: String, _ body: @escaping @Sendable (Req, ServerCall) async throws -> Res
    ) {
        register(path, kind: .unary) { call in
            let (bytes, _) = call.takeSingleRequest()
            let request = try Req(requestBytes: bytes ?? [])
            let response = try await body(request, call)
            call.finish(message: try response.serializedBytes())
        }
    }

    /// Registers a unary method that also sets trailing metadata.
    public mutating func unaryWithMetadata<Req: SwiftProtobuf.Message, Res: SwiftProtobuf.Message>(
        _ path: String, _ body: @escaping @Sendable (Req, ServerCall) async throws -> UnaryResponse<Res>
    ) {
        register(path, kind: .unary) { call in
            let (bytes, _) = call.takeSingleRequest()
            let request = try Req(requestBytes: bytes ?? [])
            let response = try await body(request, call)
            call.finish(message: try response.message.serializedBytes(), trailingMetadata: response.trailingMetadata)
        }
    }

    /// Registers a server-streaming method.
    public mutating func serverStreaming<Req: SwiftProtobuf.Message, Res: SwiftProtobuf.Message>(
        _ path: String, _ body: @escaping @Sendable (Req, ResponseWriter<Res>, ServerCall) async throws -> Void
    ) {
        register(path, kind: .serverStreaming) { call in
            let (bytes, _) = call.takeSingleRequest()
            let request = try Req(requestBytes: bytes ?? [])
            try await body(request, ResponseWriter(call: call), call)
        }
    }

    /// Registers a client-streaming method.
    public mutating func clientStreaming<Req: SwiftProtobuf.Message, Res: SwiftProtobuf.Message>(
        _ path: String, _ body: @escaping @Sendable (RequestStream<Req>, ServerCall) async throws -> Res
    ) {
        register(path, kind: .clientStreaming) { call in
            let response = try await body(RequestStream(call: call), call)
            call.finish(message: try response.serializedBytes())
        }
    }

    /// Registers a bidirectional-streaming method.
    public mutating func bidirectional<Req: SwiftProtobuf.Message, Res: SwiftProtobuf.Message>(
        _ path: String, _ body: @escaping @Sendable (RequestStream<Req>, ResponseWriter<Res>, ServerCall) async throws -> Void
    ) {
        register(path, kind: .bidirectional) { call in
            try await body(RequestStream(call: call), ResponseWriter(call: call), call)
        }
    }
}
