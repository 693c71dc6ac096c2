import Dispatch
import UbiquityLock
import UbiquityLoop
import SwiftProtobuf
#if canImport(Glibc)
import Glibc
#endif

/// Where a method's handler runs (docs/threading.md, rule 4).
public enum HandlerExecution: Sendable {
    /// An async handler in its own Swift `Task` (the default; any shape, may await).
    case task
    /// A synchronous unary handler run on the loop thread, inside the request's processing. Only
    /// for pure, bounded, non-blocking CPU work: no I/O, no waiting on locks, no sleeping.
    case inline
    /// A synchronous unary handler run on the server's fixed pool of blocking worker threads
    /// (`ServerConfiguration.blockingThreads`): may block briefly (a synchronous SQLite read).
    case blocking
}

/// Cancellation of a synchronous call as its handler sees it: a view of the call's `BlockingJob`
/// (the loop cancels it on deadline expiry, RST_STREAM, a closed connection and the end of the
/// shutdown grace period; a cancelled call's response is dropped). Inline calls are never
/// cancelled: they run to completion inside one loop turn.
public struct CallCancellation: Sendable {
    let job: BlockingJob?

    /// Never cancelled (inline handlers).
    static let never = CallCancellation(job: nil)

    /// True once the transport cancelled the call. Handlers doing long work poll it.
    public var isCancelled: Bool { job?.isCancelled ?? false }
}

/// What a synchronous handler knows about its call.
public struct SyncCallContext: Sendable {
    /// `/package.Service/Method`.
    public let path: String
    /// Request metadata (custom headers; `-bin` values decoded).
    public let metadata: Metadata
    /// When the client's `grpc-timeout` runs out, if it sent one.
    public let deadline: ContinuousClock.Instant?
    /// The peer's address, "ip:port".
    public let peer: String
    /// What the services keep for the call's connection (the transport never reads it).
    public let connection: ConnectionLocal
    /// Set by the transport when the call is cancelled (deadline, reset, connection closed).
    public let cancellation: CallCancellation

    /// True once the call was cancelled; its response will be dropped.
    public var isCancelled: Bool { cancellation.isCancelled }

    /// Throws `CancellationError` once the call was cancelled.
    public func checkCancellation() throws {
        if cancellation.isCancelled { throw CancellationError() }
    }
}

/// The response of a synchronous unary handler: one message (unframed) and trailing metadata.
public struct SyncUnaryReply: Sendable {
    public var message: [UInt8]
    public var trailingMetadata: Metadata
    public init(_ message: [UInt8], trailingMetadata: Metadata = Metadata()) {
        self.message = message
        self.trailingMetadata = trailingMetadata
    }
}

/// A synchronous unary handler over raw message bytes. Returning ends the call with OK and the
/// reply; throwing ends it with `RPCError(converting:)`, exactly as an async handler's throw does.
public typealias SyncUnaryHandler = @Sendable (_ request: [UInt8], _ context: SyncCallContext) throws -> SyncUnaryReply

extension Router {
    /// Registers a raw synchronous unary method run `execution` (`.inline` or `.blocking`).
    public mutating func registerSync(_ path: String, execution: HandlerExecution, _ handler: @escaping SyncUnaryHandler) {
        precondition(execution != .task, "registerSync takes .inline or .blocking")
        // The async form is what a transport without sync support would run; this server never
        // calls it for these methods, but it keeps the descriptor complete and honest.
        let fallback: RawHandler = { call in
            let (bytes, _) = call.takeSingleRequest()
            let ctx = SyncCallContext(path: call.context.path, metadata: call.context.metadata,
                                      deadline: call.context.deadline, peer: call.context.peer,
                                      connection: call.context.connection, cancellation: .never)
            let reply = try handler(bytes ?? [], ctx)
            call.finish(message: reply.message, trailingMetadata: reply.trailingMetadata)
        }
        register(path, kind: .unary, execution: execution, sync: handler, fallback)
    }

    /// Registers a unary method whose handler runs on the loop thread (rule 4's exception): for
    /// pure, bounded, non-blocking CPU work only (see docs/threading.md for the criteria).
    public mutating func inlineUnary<Req: SwiftProtobuf.Message, Res: SwiftProtobuf.Message>(
        _ path: String, _ body: @escaping @Sendable (Req, SyncCallContext) throws -> Res
    ) {
        registerSync(path, execution: .inline) { bytes, ctx in
            SyncUnaryReply(try body(try Req(requestBytes: bytes), ctx).serializedBytes())
        }
    }

    /// Registers a unary method whose synchronous handler runs on a blocking worker thread.
    public mutating func blockingUnary<Req: SwiftProtobuf.Message, Res: SwiftProtobuf.Message>(
        _ path: String, _ body: @escaping @Sendable (Req, SyncCallContext) throws -> Res
    ) {
        registerSync(path, execution: .blocking) { bytes, ctx in
            SyncUnaryReply(try body(try Req(requestBytes: bytes), ctx).serializedBytes())
        }
    }

    /// Registers a blocking unary method that also sets trailing metadata.
    public mutating func blockingUnaryWithMetadata<Req: SwiftProtobuf.Message, Res: SwiftProtobuf.Message>(
        _ path: String, _ body: @escaping @Sendable (Req, SyncCallContext) throws -> UnaryResponse<Res>
    ) {
        registerSync(path, execution: .blocking) { bytes, ctx in
            let r = try body(try Req(requestBytes: bytes), ctx)
            return SyncUnaryReply(try r.message.serializedBytes(), trailingMetadata: r.trailingMetadata)
        }
    }
}
