import SwiftProtobuf
import UbiquityGRPC

/// What a service method knows about its call (grpc-swift 2's `ServerContext` is the model): the
/// account it acts for, the request metadata, and whether the transport cancelled it.
struct ServerContext: Sendable {
    let account: Account
    let metadata: Metadata
    /// The peer's address, "ip:port": one connection (per-connection limits count by it).
    let peer: String
    private let cancellation: Cancellation

    private enum Cancellation: Sendable {
        case call(ServerCall)
        case sync(CallCancellation)
    }

    init(account: Account, call: ServerCall) {
        self.account = account
        metadata = call.context.metadata
        peer = call.context.peer
        cancellation = .call(call)
    }

    init(account: Account, sync context: SyncCallContext) {
        self.account = account
        metadata = context.metadata
        peer = context.peer
        cancellation = .sync(context.cancellation)
    }

    /// True once the call was cancelled (deadline, reset, connection closed); its response is
    /// dropped. Long reads poll it.
    var isCancelled: Bool {
        switch cancellation {
        case .call(let call): call.isCancelled
        case .sync(let c): c.isCancelled
        }
    }
}

/// A response message a hot method wrote in wire form itself (FetchEncoding, ObjectEncoding,
/// SaveEncoding), typed by the message it encodes. Its tests decode it with SwiftProtobuf and
/// require the message the generic path builds.
struct Encoded<Message: SwiftProtobuf.Message>: Sendable {
    let bytes: [UInt8]
}

/// Sends a streaming method's responses already in wire form (typed by the message they encode;
/// tests decode them with SwiftProtobuf).
struct EncodedWriter<Message: SwiftProtobuf.Message>: Sendable {
    let call: ServerCall
    /// Queues one response; suspends while the peer is not reading (the call's bounded queue).
    func send(_ bytes: [UInt8]) async throws { try await call.send(bytes) }
}

/// How a hot method's request is read: a hand-written decoder for its common form, SwiftProtobuf
/// for anything else (each decoder's tests require the same result as SwiftProtobuf's). Named
/// by the method's entry in its service's `MethodTable`.
protocol RequestDecoder: Sendable {
    associatedtype Request: Sendable
    static func decode(_ bytes: [UInt8]) throws -> Request
}

/// One service's methods as the router sees them (grpc-swift 2's `RegistrableRPCService` is the
/// model): the service is a type whose methods are its RPCs, and its `register(into:)` is a short
/// table of entries — name, shape, where it runs (docs/threading.md rule 4) and the method.
///
/// Around every handler, once: the call's `ServerContext` (account resolved) and the conversion
/// of whatever it throws into the call's status (`ServiceErrors.rpcError`). `queryFields` says
/// where a method's query sits in its request (`fetch.` for a FetchSpec), so query errors name
/// the request's own field (`fetch.predicate`).
///
/// A service that acts for no account (Admin, Health, Reflection) builds its table without a
/// `Backend`; its methods take the transport's call instead of a `ServerContext` and are passed to
/// the router as they are, with no wrapper (Admin.Ping is W0's inline hot path). They throw
/// `RPCError` themselves.
struct MethodTable {
    let prefix: String
    private let backend: Backend?
    var router: Router

    init(service: String, backend: Backend?, router: Router) {
        prefix = "/\(service)/"
        self.backend = backend
        self.router = router
    }

    /// The backend that resolves each call's account; a table built with no account registering
    /// an account method is a programming error, caught at startup.
    private func accounts(_ name: String) -> Backend {
        guard let backend else { preconditionFailure("\(prefix)\(name) needs an account, but its table has none") }
        return backend
    }

    /// A unary method run in its own task.
    mutating func unary<Req: SwiftProtobuf.Message, Res: SwiftProtobuf.Message>(
        _ name: String, queryFields: String = "", _ method: @escaping @Sendable (Req, ServerContext) async throws -> Res
    ) {
        let backend = accounts(name)
        let access = Access.of(path: prefix + name)
        router.unary(prefix + name) { (request: Req, call) in
            try await Self.converting(queryFields) {
                try await method(request, ServerContext(account: try backend.account(metadata: call.context.metadata, access: access, connection: call.context.connection), call: call))
            }
        }
    }

    /// A unary method run in its own task whose request a hand-written decoder reads and whose
    /// response it encodes itself.
    mutating func unary<Decoder: RequestDecoder, Res: SwiftProtobuf.Message>(
        _ name: String, decoder: Decoder.Type, queryFields: String = "",
        _ method: @escaping @Sendable (Decoder.Request, ServerContext) async throws -> Encoded<Res>
    ) {
        let backend = accounts(name)
        let access = Access.of(path: prefix + name)
        router.register(prefix + name, kind: .unary) { call in
            // The transport has checked there is exactly one message.
            let bytes = try await call.receive() ?? []
            let response = try await Self.converting(queryFields) {
                // credentials before the request: an unauthenticated caller learns nothing from validation
                let account = try backend.account(metadata: call.context.metadata, access: access, connection: call.context.connection)
                let request = try Decoder.decode(bytes)
                return try await method(request, ServerContext(account: account, call: call))
            }
            call.finish(message: response.bytes)
        }
    }

    /// A unary method run synchronously on a blocking worker thread (`.blocking`) or on the loop
    /// (`.inline`: pure, bounded CPU work only), with a hand-written request decoder and response
    /// encoder (the synchronous methods today are the hot reads).
    mutating func sync<Decoder: RequestDecoder, Res: SwiftProtobuf.Message>(
        _ name: String, execution: HandlerExecution, decoder: Decoder.Type, queryFields: String = "",
        _ method: @escaping @Sendable (Decoder.Request, ServerContext) throws -> Encoded<Res>
    ) {
        let backend = accounts(name)
        let access = Access.of(path: prefix + name)
        router.registerSync(prefix + name, execution: execution) { bytes, call in
            SyncUnaryReply(try Self.convertingSync(queryFields) {
                let account = try backend.account(metadata: call.metadata, access: access, connection: call.connection)
                return try method(try Decoder.decode(bytes), ServerContext(account: account, sync: call))
            }.bytes)
        }
    }

    /// A unary method run synchronously on a blocking worker thread, decoded and encoded by
    /// SwiftProtobuf: short SQLite work that would otherwise hold a cooperative thread through an
    /// fsync (the key-value store's reads and writes).
    mutating func blocking<Req: SwiftProtobuf.Message, Res: SwiftProtobuf.Message>(
        _ name: String, _ method: @escaping @Sendable (Req, ServerContext) throws -> Res
    ) {
        let backend = accounts(name)
        let access = Access.of(path: prefix + name)
        router.registerSync(prefix + name, execution: .blocking) { bytes, call in
            SyncUnaryReply(try Self.convertingSync("") {
                let account = try backend.account(metadata: call.metadata, access: access, connection: call.connection)
                return try method(try Req(requestBytes: bytes), ServerContext(account: account, sync: call)).serializedBytes()
            })
        }
    }

    /// A server-streaming method: the handler writes typed messages as it goes.
    mutating func serverStreaming<Req: SwiftProtobuf.Message, Res: SwiftProtobuf.Message>(
        _ name: String, queryFields: String = "",
        _ method: @escaping @Sendable (Req, ResponseWriter<Res>, ServerContext) async throws -> Void
    ) {
        let backend = accounts(name)
        let access = Access.of(path: prefix + name)
        router.serverStreaming(prefix + name) { (request: Req, writer: ResponseWriter<Res>, call) in
            try await Self.converting(queryFields) {
                try await method(request, writer, ServerContext(account: try backend.account(metadata: call.context.metadata, access: access, connection: call.context.connection), call: call))
            }
        }
    }

    /// A server-streaming method that writes its responses in wire form itself (Subscribe: the
    /// transactions every subscriber of a shape shares are encoded once).
    mutating func serverStreamingEncoded<Req: SwiftProtobuf.Message, Res: SwiftProtobuf.Message>(
        _ name: String, _ method: @escaping @Sendable (Req, EncodedWriter<Res>, ServerContext) async throws -> Void
    ) {
        let backend = accounts(name)
        let access = Access.of(path: prefix + name)
        router.register(prefix + name, kind: .serverStreaming) { call in
            // The transport has checked there is exactly one request message.
            let bytes = try await call.receive() ?? []
            try await Self.converting("") {
                let account = try backend.account(metadata: call.context.metadata, access: access, connection: call.context.connection)
                let request = try Req(requestBytes: bytes)
                try await method(request, EncodedWriter(call: call), ServerContext(account: account, call: call))
            }
        }
    }

    /// An account-free unary method run on the loop thread (`.inline`: pure, bounded CPU work only).
    mutating func inline<Req: SwiftProtobuf.Message, Res: SwiftProtobuf.Message>(
        _ name: String, _ method: @escaping @Sendable (Req, SyncCallContext) throws -> Res
    ) {
        router.inlineUnary(prefix + name, method)
    }

    /// An account-free unary method run in its own task.
    mutating func unary<Req: SwiftProtobuf.Message, Res: SwiftProtobuf.Message>(
        _ name: String, _ method: @escaping @Sendable (Req, ServerCall) async throws -> Res
    ) {
        router.unary(prefix + name, method)
    }

    /// An account-free server-streaming method.
    mutating func serverStreaming<Req: SwiftProtobuf.Message, Res: SwiftProtobuf.Message>(
        _ name: String, _ method: @escaping @Sendable (Req, ResponseWriter<Res>, ServerCall) async throws -> Void
    ) {
        router.serverStreaming(prefix + name, method)
    }

    /// An account-free bidirectional-streaming method.
    mutating func bidirectional<Req: SwiftProtobuf.Message, Res: SwiftProtobuf.Message>(
        _ name: String, _ method: @escaping @Sendable (RequestStream<Req>, ResponseWriter<Res>, ServerCall) async throws -> Void
    ) {
        router.bidirectional(prefix + name, method)
    }

    private static func converting<T>(_ queryFields: String, _ body: () async throws -> T) async throws -> T {
        do { return try await body() } catch { throw ServiceErrors.rpcError(error, queryFields: queryFields) }
    }

    private static func convertingSync<T>(_ queryFields: String, _ body: () throws -> T) throws -> T {
        do { return try body() } catch { throw ServiceErrors.rpcError(error, queryFields: queryFields) }
    }
}

extension Router {
    /// Registers one service's methods: `entries` fills its table.
    /// `backend` resolves each call's account; nil for a service that acts for no account.
    mutating func register(service: String, backend: Backend?, _ entries: (inout MethodTable) -> Void) {
        var table = MethodTable(service: service, backend: backend, router: self)
        entries(&table)
        self = table.router
    }

    /// Registers the methods of a service that acts for no account.
    mutating func register(service: String, _ entries: (inout MethodTable) -> Void) {
        register(service: service, backend: nil, entries)
    }
}
