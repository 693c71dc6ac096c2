import Synchronization
import SwiftProtobuf
import UbiquityGRPC
import UbiquityLoop

/// A gRPC channel for ordinary code (the `ubiq` CLI, tests, tools): one HTTP/2 connection on its
/// own loop thread, async calls, typed messages.
///
/// Every call hops onto the loop thread (`EventLoop.execute`), runs on the cheap layer
/// (`ClientConnection`) and resumes the caller from its completion. Errors are `RPCError`s with
/// the server's status code, message, `grpc-status-details-bin` bytes and trailing metadata.
/// Cancelling the calling task sends RST_STREAM(CANCEL). A channel does not reconnect: once its
/// connection is gone (server shutdown, network), calls fail with UNAVAILABLE; make a new one.
public final class GRPCChannel: Sendable {
    public let host: String
    public let port: Int
    private let thread: EventLoopThread
    private let state: LoopBound<ChannelState>
    private let closed = Atomic<Bool>(false)

    private var loop: EventLoop { thread.loop }

    /// Connects; throws `RPCError(.unavailable, …)` if it cannot. `tls`: speak TLS with it.
    public init(host: String, port: Int, tls: TLSContext? = nil) async throws {
        let thread = EventLoopThread(name: "ubq-client")
        thread.start()
        let loop = thread.loop
        let state = LoopBound(ChannelState(), loop: loop)
        do {
            try await withCheckedThrowingContinuation { (cont: CheckedContinuation<Void, any Error>) in
                loop.execute {
                    var options = ClientConnectionOptions()
                    options.tls = tls
                    ClientConnection.connect(loop: loop, host: host, port: port, options: options) { result in
                        switch result {
                        case .success(let connection):
                            state.get.connection = connection
                            cont.resume()
                        case .failure(let error):
                            cont.resume(throwing: error)
                        }
                    }
                }
            }
        } catch {
            loop.stop()
            thread.join()
            throw error
        }
        self.host = host
        self.port = port
        self.thread = thread
        self.state = state
    }

    deinit {
        close()
    }

    /// Closes the connection (GOAWAY) and stops the loop thread. Calls in flight fail with
    /// UNAVAILABLE. Idempotent.
    public func close() {
        guard !closed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        let state = self.state
        let loop = self.loop
        loop.execute {
            state.get.connection?.close()
            state.get.connection = nil
        }
        loop.stop()
        if !loop.inEventLoop { thread.join() }
    }

    /// A unary call.
    public func unary<Req: SwiftProtobuf.Message, Res: SwiftProtobuf.Message>(
        _ path: String, _ request: Req, as responseType: Res.Type,
        metadata: [(String, String)] = [], timeout: Double? = nil
    ) async throws -> Res {
        let bytes: [UInt8]
        do { bytes = try request.serializedBytes() } catch {
            throw RPCError(.internal, "cannot encode the request: \(error)")
        }
        let outcome = try await call(path, bytes, metadata: metadata, timeout: timeout)
        guard outcome.status == .ok else { throw outcome.error }
        guard let response = outcome.response else {
            throw RPCError(.internal, "the server ended a unary call without a response message")
        }
        if outcome.responseCount > 1 {
            throw RPCError(.internal, "the server sent \(outcome.responseCount) messages for a unary call")
        }
        do { return try Res(serializedBytes: response) } catch {
            throw RPCError(.internal, "cannot decode the response as \(Res.protoMessageName): \(error)")
        }
    }

    /// A server-streaming call: the messages as they arrive; the stream throws an `RPCError` if
    /// the call ends with a status other than OK. Ending the iteration early cancels the call.
    public func serverStreaming<Req: SwiftProtobuf.Message, Res: SwiftProtobuf.Message>(
        _ path: String, _ request: Req, as responseType: Res.Type,
        metadata: [(String, String)] = [], timeout: Double? = nil
    ) -> AsyncThrowingStream<Res, Error> {
        let (stream, continuation) = AsyncThrowingStream<Res, Error>.makeStream()
        let bytes: [UInt8]
        do { bytes = try request.serializedBytes() } catch {
            continuation.finish(throwing: RPCError(.internal, "cannot encode the request: \(error)"))
            return stream
        }
        let handle = CallHandle()
        let state = self.state
        let loop = self.loop
        loop.execute {
            guard let connection = state.get.connection else {
                continuation.finish(throwing: RPCError(.unavailable, "the channel is closed"))
                return
            }
            let prepared = PreparedRequest(path: path, authority: connection.authority, message: bytes,
                                           metadata: metadata, timeout: timeout)
            var streamID: Int32 = 0
            streamID = connection.startCall(prepared, collectMetadata: true, onMessage: { message in
                do {
                    continuation.yield(try Res(serializedBytes: Array(message)))
                } catch {
                    continuation.finish(throwing: RPCError(.internal, "cannot decode a response as \(Res.protoMessageName): \(error)"))
                    connection.cancel(streamID: streamID)
                }
            }) { result in
                if result.status == .ok {
                    continuation.finish()
                } else {
                    continuation.finish(throwing: RPCError(result.status, result.message, details: result.details,
                                                           metadata: result.trailingMetadata))
                }
            }
            handle.streamID.store(streamID, ordering: .relaxed)
        }
        continuation.onTermination = { reason in
            guard case .cancelled = reason else { return }
            loop.execute {
                let id = handle.streamID.load(ordering: .relaxed)
                if id > 0 { state.get.connection?.cancel(streamID: id) }
            }
        }
        return stream
    }

    /// Runs one call with a single request message and collects the whole outcome.
    private func call(_ path: String, _ bytes: [UInt8], metadata: [(String, String)], timeout: Double?) async throws -> CallOutcome {
        let handle = CallHandle()
        let state = self.state
        let loop = self.loop
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (cont: CheckedContinuation<CallOutcome, any Error>) in
                loop.execute {
                    guard let connection = state.get.connection else {
                        cont.resume(throwing: RPCError(.unavailable, "the channel is closed"))
                        return
                    }
                    if handle.cancelled.load(ordering: .relaxed) {
                        cont.resume(throwing: RPCError(.cancelled, "the call was cancelled by the client"))
                        return
                    }
                    let prepared = PreparedRequest(path: path, authority: connection.authority, message: bytes,
                                                   metadata: metadata, timeout: timeout)
                    let id = connection.startCall(prepared, collectMetadata: true) { result in
                        cont.resume(returning: CallOutcome(result))
                    }
                    handle.streamID.store(id, ordering: .relaxed)
                }
            }
        } onCancel: {
            handle.cancelled.store(true, ordering: .relaxed)
            // Runs after the job above (one loop, FIFO queue), so the stream ID is known there.
            loop.execute {
                let id = handle.streamID.load(ordering: .relaxed)
                if id > 0 { state.get.connection?.cancel(streamID: id) }
            }
        }
    }
}

/// Loop-thread state of a channel.
final class ChannelState {
    var connection: ClientConnection?
}

/// Links a caller's task to its call on the loop (for cancellation).
final class CallHandle: Sendable {
    let streamID = Atomic<Int32>(0)
    let cancelled = Atomic<Bool>(false)
}

/// A finished call, copied off the loop's buffers.
struct CallOutcome: Sendable {
    var status: StatusCode
    var message: String
    var details: [UInt8]?
    var response: [UInt8]?
    var responseCount: Int
    var trailingMetadata: Metadata

    init(_ r: ClientCallResult) {
        status = r.status
        message = r.message
        details = r.details
        response = r.response.map { Array($0) }
        responseCount = r.responseCount
        trailingMetadata = r.trailingMetadata
    }

    var error: RPCError {
        RPCError(status, message, details: details, metadata: trailingMetadata)
    }
}
