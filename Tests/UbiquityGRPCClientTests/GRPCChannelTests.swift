import Dispatch
import Foundation
import UbiquityGRPC
import UbiquityGRPCClient
import UbiquityLock
import UbiquityLoop
import UbiquityProtos
import UbiquityTestSupport
import XCTest

/// The client against the real server transport on a loopback port: both layers (the async
/// `GRPCChannel` and the callback `ClientConnection`), errors with details, deadlines,
/// cancellation, streaming, and more calls than the server's concurrent-stream limit.
final class GRPCChannelTests: XCTestCase {
    typealias Ping = Ubiquity_V1_PingRequest
    typealias Pong = Ubiquity_V1_PingResponse

    private var server: GRPCServer!
    private var port: Int { server.port }
    let handlerStarted = EventCounter()
    let handlerCancelled = EventCounter()

    override func setUpWithError() throws {
        var router = Router()
        router.unary("/test.Echo/Ping") { (req: Ping, call) in
            var res = Pong()
            res.payload = req.payload
            if let v = call.context.metadata["x-echo"] { res.payload = Data(v.utf8) }
            return res
        }
        router.unary("/test.Echo/Fail") { (_: Ping, _) -> Pong in
            throw RPCError(.notFound, "no such thing: ü 100%", details: [1, 2, 3])
        }
        let (started, cancelled) = (handlerStarted, handlerCancelled)
        router.unary("/test.Echo/Sleep") { (_: Ping, _) -> Pong in
            started.signal()
            do {
                try await Task.sleep(for: .seconds(20))
            } catch {
                cancelled.signal()
                throw error
            }
            return Pong()
        }
        router.serverStreaming("/test.Echo/Count") { (req: Ping, writer: ResponseWriter<Pong>, _) in
            for i in 0..<req.payload.count {
                var m = Pong()
                m.serverTimeMicros = Int64(i)
                try await writer.write(m)
            }
            if req.payload.first == 0xFF { throw RPCError(.aborted, "stopped after \(req.payload.count)") }
        }
        server = try LoopbackServer.start(router) { config in
            config.maxConcurrentStreams = 4
            config.shutdownGraceSeconds = 1
        }
    }

    override func tearDown() {
        LoopbackServer.stop(server)
        // XCTest keeps every test case object to the end of the run: drop the server so a
        // leak check at exit sees only what shutdown failed to free (scripts/sanitize address).
        server = nil
    }

    func testUnaryRoundTripWithMetadata() async throws {
        let channel = try await GRPCChannel(host: "127.0.0.1", port: port)
        defer { channel.close() }
        var req = Ping()
        req.payload = Data("hello".utf8)
        let res = try await channel.unary("/test.Echo/Ping", req, as: Pong.self)
        XCTAssertEqual(res.payload, Data("hello".utf8))
        let echoed = try await channel.unary("/test.Echo/Ping", req, as: Pong.self, metadata: [("x-echo", "from-metadata")], timeout: 5)
        XCTAssertEqual(String(decoding: echoed.payload, as: UTF8.self), "from-metadata")
    }

    func testErrorCarriesCodeMessageAndDetails() async throws {
        let channel = try await GRPCChannel(host: "127.0.0.1", port: port)
        defer { channel.close() }
        do {
            _ = try await channel.unary("/test.Echo/Fail", Ping(), as: Pong.self)
            XCTFail("expected an error")
        } catch let error as RPCError {
            XCTAssertEqual(error.code, .notFound)
            XCTAssertEqual(error.message, "no such thing: ü 100%")
            XCTAssertEqual(error.details, [1, 2, 3])
        }
        do {
            _ = try await channel.unary("/test.Echo/Nope", Ping(), as: Pong.self)
            XCTFail("expected an error")
        } catch let error as RPCError {
            XCTAssertEqual(error.code, .unimplemented)
        }
    }

    func testDeadlineAndCancellation() async throws {
        let channel = try await GRPCChannel(host: "127.0.0.1", port: port)
        defer { channel.close() }
        do {
            _ = try await channel.unary("/test.Echo/Sleep", Ping(), as: Pong.self, timeout: 0.2)
            XCTFail("expected DEADLINE_EXCEEDED")
        } catch let error as RPCError {
            XCTAssertEqual(error.code, .deadlineExceeded)
        }
        let task = Task { try await channel.unary("/test.Echo/Sleep", Ping(), as: Pong.self) }
        let running = await handlerStarted.wait(for: 2)  // the first call's handler, then this one's
        XCTAssertTrue(running, "the second call's handler did not start")
        task.cancel()
        do {
            _ = try await task.value
            XCTFail("expected CANCELLED")
        } catch let error as RPCError {
            XCTAssertEqual(error.code, .cancelled)
        }
        // The server saw the RST_STREAM and cancelled both handlers.
        _ = await handlerCancelled.wait(for: 2)
        XCTAssertEqual(handlerCancelled.count, 2)
        // The connection still works.
        _ = try await channel.unary("/test.Echo/Ping", Ping(), as: Pong.self)
    }

    func testServerStreaming() async throws {
        let channel = try await GRPCChannel(host: "127.0.0.1", port: port)
        defer { channel.close() }
        var req = Ping()
        req.payload = Data(repeating: 1, count: 5)
        var seen: [Int64] = []
        for try await m in channel.serverStreaming("/test.Echo/Count", req, as: Pong.self) { seen.append(m.serverTimeMicros) }
        XCTAssertEqual(seen, [0, 1, 2, 3, 4])

        req.payload = Data([0xFF, 0xFF, 0xFF])
        seen = []
        do {
            for try await m in channel.serverStreaming("/test.Echo/Count", req, as: Pong.self) { seen.append(m.serverTimeMicros) }
            XCTFail("expected ABORTED")
        } catch let error as RPCError {
            XCTAssertEqual(error.code, .aborted)
            XCTAssertEqual(error.message, "stopped after 3")
        }
        XCTAssertEqual(seen, [0, 1, 2])
    }

    func testConnectFailureIsUnavailable() async throws {
        // A port that was just free: bind, read the port, close.
        let closedPort = server.port == 1 ? 2 : 1
        do {
            _ = try await GRPCChannel(host: "127.0.0.1", port: closedPort)
            XCTFail("expected UNAVAILABLE")
        } catch let error as RPCError {
            XCTAssertEqual(error.code, .unavailable)
        }
    }

    /// The cheap layer: 200 calls, 50 at a time, on a server allowing 4 concurrent streams —
    /// nghttp2 queues the rest, and every completion arrives exactly once, on the loop.
    func testClientConnectionMoreCallsThanStreamLimit() throws {
        let thread = EventLoopThread(name: "test-client")
        thread.start()
        let loop = thread.loop
        let done = DispatchSemaphore(value: 0)
        let outcome = Lock<(ok: Int, other: [String], offLoop: Int)>((0, [], 0))
        let port = self.port
        loop.execute {
            ClientConnection.connect(loop: loop, host: "127.0.0.1", port: port) { result in
                guard case .success(let conn) = result else { outcome.withLock { $0.other.append("connect") }; done.signal(); return }
                var req = Ping()
                req.payload = Data([7])
                let prepared = PreparedRequest(path: "/test.Echo/Ping", authority: conn.authority, message: try! req.serializedBytes())
                var started = 0
                var finished = 0
                func startOne() {
                    started += 1
                    conn.startCall(prepared, tag: UInt64(started)) { r in
                        outcome.withLock { o in
                            if !loop.inEventLoop { o.offLoop += 1 }
                            if r.status == .ok, let bytes = r.response, (try? Pong(serializedBytes: Array(bytes)))?.payload == Data([7]) {
                                o.ok += 1
                            } else {
                                o.other.append("\(r.status): \(r.message)")
                            }
                        }
                        finished += 1
                        if started < 200 { startOne() }
                        if finished == 200 { conn.close(); done.signal() }
                    }
                }
                for _ in 0..<50 { startOne() }
            }
        }
        XCTAssertEqual(done.wait(timeout: .now() + 30), .success)
        loop.stop()
        thread.join()
        let o = outcome.withLock { $0 }
        XCTAssertEqual(o.ok, 200)
        XCTAssertEqual(o.other, [])
        XCTAssertEqual(o.offLoop, 0)
    }
}
