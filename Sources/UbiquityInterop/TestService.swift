import Foundation
import UbiquityGRPC

/// The gRPC interop `grpc.testing.TestService` (Debian's grpc-proto), served by ubiquityd only with
/// `--enable-interop-testing`. It exists so stock clients can exercise every call shape, metadata,
/// status and flow-control behaviour of the transport, with tests named after the interop cases.
public enum InteropTestService {
    static let echoInitial = "x-grpc-test-echo-initial"
    static let echoTrailing = "x-grpc-test-echo-trailing-bin"

    public static func register(into router: inout Router) {
        let prefix = "/grpc.testing.TestService/"
        router.unaryWithMetadata(prefix + "EmptyCall") { (_: Grpc_Testing_Empty, call) in
            echoInitialMetadata(call)
            return UnaryResponse(Grpc_Testing_Empty(), trailingMetadata: trailingEcho(call))
        }
        for name in ["UnaryCall", "CacheableUnaryCall"] {
            router.unaryWithMetadata(prefix + name) { (req: Grpc_Testing_SimpleRequest, call) in
                echoInitialMetadata(call)
                if req.hasResponseStatus, req.responseStatus.code != 0 {
                    throw RPCError(StatusCode(rawValue: Int(req.responseStatus.code)), req.responseStatus.message,
                                   metadata: trailingEcho(call))
                }
                var res = Grpc_Testing_SimpleResponse()
                res.payload = try payload(size: req.responseSize)
                return UnaryResponse(res, trailingMetadata: trailingEcho(call))
            }
        }
        router.serverStreaming(prefix + "StreamingOutputCall") { (req: Grpc_Testing_StreamingOutputCallRequest, writer: ResponseWriter<Grpc_Testing_StreamingOutputCallResponse>, call) in
            echoInitialMetadata(call)
            for p in req.responseParameters {
                try await respond(p, writer)
            }
            if req.hasResponseStatus, req.responseStatus.code != 0 {
                throw RPCError(StatusCode(rawValue: Int(req.responseStatus.code)), req.responseStatus.message)
            }
        }
        router.clientStreaming(prefix + "StreamingInputCall") { (requests: RequestStream<Grpc_Testing_StreamingInputCallRequest>, call) in
            echoInitialMetadata(call)
            var total = 0
            for try await r in requests { total += r.payload.body.count }
            var res = Grpc_Testing_StreamingInputCallResponse()
            res.aggregatedPayloadSize = Int32(total)
            return res
        }
        router.bidirectional(prefix + "FullDuplexCall") { (requests: RequestStream<Grpc_Testing_StreamingOutputCallRequest>, writer: ResponseWriter<Grpc_Testing_StreamingOutputCallResponse>, call) in
            echoInitialMetadata(call)
            for try await req in requests {
                if req.hasResponseStatus, req.responseStatus.code != 0 {
                    throw RPCError(StatusCode(rawValue: Int(req.responseStatus.code)), req.responseStatus.message,
                                   metadata: trailingEcho(call))
                }
                for p in req.responseParameters { try await respond(p, writer) }
            }
            if let t = trailingEchoValue(call) {
                throw RPCError(.ok, metadata: t)  // a streaming handler's way to end OK with trailers
            }
        }
        router.bidirectional(prefix + "HalfDuplexCall") { (requests: RequestStream<Grpc_Testing_StreamingOutputCallRequest>, writer: ResponseWriter<Grpc_Testing_StreamingOutputCallResponse>, call) in
            echoInitialMetadata(call)
            var all: [Grpc_Testing_StreamingOutputCallRequest] = []
            for try await req in requests { all.append(req) }
            for req in all {
                for p in req.responseParameters { try await respond(p, writer) }
            }
        }
    }

    static func respond(_ p: Grpc_Testing_ResponseParameters, _ writer: ResponseWriter<Grpc_Testing_StreamingOutputCallResponse>) async throws {
        if p.intervalUs > 0 {
            try await Task.sleep(nanoseconds: UInt64(p.intervalUs) * 1000)
        }
        var res = Grpc_Testing_StreamingOutputCallResponse()
        res.payload = try payload(size: p.size)
        try await writer.write(res)
    }

    static func payload(size: Int32) throws -> Grpc_Testing_Payload {
        guard size >= 0 else { throw RPCError(.invalidArgument, "response size must not be negative, got \(size)") }
        var p = Grpc_Testing_Payload()
        p.type = .compressable
        p.body = Data(count: Int(size))
        return p
    }

    static func echoInitialMetadata(_ call: ServerCall) {
        if let v = call.context.metadata[echoInitial] {
            var md = Metadata()
            md.add(echoInitial, v)
            call.sendInitialMetadata(md)
        }
    }

    static func trailingEchoValue(_ call: ServerCall) -> Metadata? {
        guard let v = call.context.metadata.values(for: echoTrailing).first else { return nil }
        var md = Metadata()
        md.add(echoTrailing, v)
        return md
    }

    static func trailingEcho(_ call: ServerCall) -> Metadata { trailingEchoValue(call) ?? Metadata() }

}
