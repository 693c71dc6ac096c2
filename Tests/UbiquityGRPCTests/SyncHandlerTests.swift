import Dispatch
import Foundation
import Synchronization
import UbiquityGRPC
import UbiquityGRPCClient
import UbiquityLock
import UbiquityLoop
import UbiquityProtos
import UbiquityTestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// The synchronous handler kinds (`.inline` on the loop thread, `.blocking` on the worker pool)
/// against the real server transport on a loopback port: right answers to the right calls under
/// concurrency, errors with the same status as async handlers, deadline and reset cancellation
/// with the response dropped, and the server still healthy afterwards.
final class SyncHandlerTests: XCTestCase {
    typealias Ping = Ubiquity_V1_PingRequest
    typealias Pong = Ubiquity_V1_PingResponse

    final class Probe: Sendable {
        let cancelledSeen = EventCounter()
        let runs = Atomic<Int>(0)
        let started = EventCounter()
        let threadNames = Lock<Set<String>>([])
        let order = Lock<[Int64]>([])
    }

    private var server: GRPCServer!
    private let probe = Probe()

    private func startServer(blockingThreads: Int) throws {
        let probe = self.probe
        var router = Router()
        router.blockingUnary("/test.Sync/Echo") { (req: Ping, ctx: SyncCallContext) -> Pong in
            probe.runs.wrappingAdd(1, ordering: .relaxed)
            probe.threadNames.withLock { _ = $0.insert(ThreadNames.current) }
            let n = Self.number(req)
            probe.order.withLock { $0.append(n) }
            var res = Pong()
            res.payload = req.payload
            res.serverTimeMicros = n
            if let v = ctx.metadata["x-echo"] { res.payload = Data(v.utf8) }
            return res
        }
        router.blockingUnaryWithMetadata("/test.Sync/WithTrailer") { (req: Ping, _: SyncCallContext) -> UnaryResponse<Pong> in
            var res = Pong()
            res.payload = req.payload
            var trailer = Metadata()
            trailer.add("x-trailer", "t1")
            return UnaryResponse(res, trailingMetadata: trailer)
        }
        router.blockingUnary("/test.Sync/Fail") { (_: Ping, _: SyncCallContext) -> Pong in
            throw RPCError(.notFound, "no such thing: ü 100%", details: [1, 2, 3])
        }
        router.inlineUnary("/test.Sync/InlineFail") { (_: Ping, _: SyncCallContext) -> Pong in
            throw RPCError(.failedPrecondition, "inline says no")
        }
        router.inlineUnary("/test.Sync/Inline") { (req: Ping, _: SyncCallContext) -> Pong in
            probe.threadNames.withLock { _ = $0.insert(ThreadNames.current) }
            var res = Pong()
            res.payload = req.payload
            res.serverTimeMicros = Self.number(req)
            return res
        }
        router.blockingUnary("/test.Sync/Poll") { (_: Ping, ctx: SyncCallContext) -> Pong in
            // A long read that polls its cancellation flag (as a SQLite progress handler would);
            // the usleep below is that read's work, not ordering (the test waits on `started`).
            probe.started.signal()
            for _ in 0..<2000 {
                if ctx.isCancelled {
                    probe.cancelledSeen.signal()
                    try ctx.checkCancellation()
                }
                usleep(10_000)
            }
            return Pong()
        }
        server = try LoopbackServer.start(router) { config in
            config.blockingThreads = blockingThreads
            config.maxReceiveMessageBytes = 4096
            config.shutdownGraceSeconds = 1
        }
    }

    override func tearDown() {
        LoopbackServer.stop(server)
        // XCTest keeps every test case object to the end of the run: drop the server so a
        // leak check at exit sees only what shutdown failed to free (scripts/sanitize address).
        server = nil
    }

    private static func ping(_ n: Int) -> Ping {
        var req = Ping()
        req.payload = Data("call-\(n)".utf8)
        return req
    }

    private static func number(_ req: Ping) -> Int64 {
        Int64(String(decoding: req.payload, as: UTF8.self).dropFirst(5)) ?? -1
    }

    func testManyConcurrentBlockingCallsEachGetTheirOwnAnswer() async throws {
        try startServer(blockingThreads: 3)
        let channel = try await GRPCChannel(host: "127.0.0.1", port: server.port)
        defer { channel.close() }
        let total = 400
        try await withThrowingTaskGroup(of: Void.self) { group in
            for n in 0..<total {
                group.addTask {
                    let res = try await channel.unary("/test.Sync/Echo", Self.ping(n), as: Pong.self)
                    XCTAssertEqual(res.payload, Data("call-\(n)".utf8))
                    XCTAssertEqual(res.serverTimeMicros, Int64(n))
                }
            }
            try await group.waitForAll()
        }
        XCTAssertEqual(probe.runs.load(ordering: .relaxed), total)
        XCTAssertEqual(Set(probe.order.withLock { $0 }), Set((0..<total).map(Int64.init)))
        let names = probe.threadNames.withLock { $0 }
        XCTAssertFalse(names.isEmpty)
        XCTAssertTrue(names.allSatisfy { $0.hasPrefix("ubq-blocking-") }, "ran on \(names)")
        // Metadata reaches the handler; trailing metadata reaches the client.
        let echoed = try await channel.unary("/test.Sync/Echo", Self.ping(1), as: Pong.self, metadata: [("x-echo", "md")], timeout: 5)
        XCTAssertEqual(String(decoding: echoed.payload, as: UTF8.self), "md")
        let withTrailer = try await channel.unary("/test.Sync/WithTrailer", Self.ping(7), as: Pong.self)
        XCTAssertEqual(withTrailer.payload, Data("call-7".utf8))
    }

    func testOneWorkerRunsCallsInArrivalOrder() async throws {
        try startServer(blockingThreads: 1)
        let channel = try await GRPCChannel(host: "127.0.0.1", port: server.port)
        defer { channel.close() }
        for n in 0..<50 {
            let res = try await channel.unary("/test.Sync/Echo", Self.ping(n), as: Pong.self)
            XCTAssertEqual(res.serverTimeMicros, Int64(n))
        }
        XCTAssertEqual(probe.order.withLock { $0 }, (0..<50).map(Int64.init))
    }

    func testInlineHandlerRunsOnTheLoopThreadAndAnswersCorrectly() async throws {
        try startServer(blockingThreads: 1)
        let channel = try await GRPCChannel(host: "127.0.0.1", port: server.port)
        defer { channel.close() }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for n in 0..<200 {
                group.addTask {
                    let res = try await channel.unary("/test.Sync/Inline", Self.ping(n), as: Pong.self)
                    XCTAssertEqual(res.payload, Data("call-\(n)".utf8))
                    XCTAssertEqual(res.serverTimeMicros, Int64(n))
                }
            }
            try await group.waitForAll()
        }
        XCTAssertEqual(probe.threadNames.withLock { $0 }, ["ubq-loop-0"])
    }

    func testErrorsEndTheCallWithTheSameStatusAsAsyncHandlers() async throws {
        try startServer(blockingThreads: 2)
        let channel = try await GRPCChannel(host: "127.0.0.1", port: server.port)
        defer { channel.close() }
        do {
            _ = try await channel.unary("/test.Sync/Fail", Ping(), as: Pong.self)
            XCTFail("expected an error")
        } catch let error as RPCError {
            XCTAssertEqual(error.code, .notFound)
            XCTAssertEqual(error.message, "no such thing: ü 100%")
            XCTAssertEqual(error.details, [1, 2, 3])
        }
        do {
            _ = try await channel.unary("/test.Sync/InlineFail", Ping(), as: Pong.self)
            XCTFail("expected an error")
        } catch let error as RPCError {
            XCTAssertEqual(error.code, .failedPrecondition)
            XCTAssertEqual(error.message, "inline says no")
        }
        // Requests past the receive limit are refused before any handler runs, as for async ones.
        var big = Ping()
        big.payload = Data(repeating: 7, count: 5000)
        for path in ["/test.Sync/Echo", "/test.Sync/Inline"] {
            do {
                _ = try await channel.unary(path, big, as: Pong.self)
                XCTFail("expected an error from \(path)")
            } catch let error as RPCError {
                XCTAssertEqual(error.code, .resourceExhausted, "\(path): \(error)")
            }
        }
        let res = try await channel.unary("/test.Sync/Echo", Self.ping(3), as: Pong.self)
        XCTAssertEqual(res.serverTimeMicros, 3)
    }

    func testDeadlineAndResetCancelTheBlockingCall() async throws {
        try startServer(blockingThreads: 2)
        let channel = try await GRPCChannel(host: "127.0.0.1", port: server.port)
        defer { channel.close() }
        do {
            _ = try await channel.unary("/test.Sync/Poll", Ping(), as: Pong.self, timeout: 0.2)
            XCTFail("expected DEADLINE_EXCEEDED")
        } catch let error as RPCError {
            XCTAssertEqual(error.code, .deadlineExceeded)
        }
        let task = Task { try await channel.unary("/test.Sync/Poll", Ping(), as: Pong.self) }
        let running = await probe.started.wait(for: 2)  // the deadline call's handler, then this one's
        XCTAssertTrue(running, "the second call's handler did not start")
        task.cancel()
        do {
            _ = try await task.value
            XCTFail("expected CANCELLED")
        } catch let error as RPCError {
            XCTAssertEqual(error.code, .cancelled)
        }
        // Both handlers saw their flag; the workers are free again and the server still answers.
        _ = await probe.cancelledSeen.wait(for: 2)
        XCTAssertEqual(probe.cancelledSeen.count, 2)
        let res = try await channel.unary("/test.Sync/Echo", Self.ping(9), as: Pong.self, timeout: 5)
        XCTAssertEqual(res.serverTimeMicros, 9)
    }

    func testShutdownCancelsABlockingCallPastTheGracePeriod() async throws {
        try startServer(blockingThreads: 1)
        let channel = try await GRPCChannel(host: "127.0.0.1", port: server.port)
        defer { channel.close() }
        let task = Task { try await channel.unary("/test.Sync/Poll", Ping(), as: Pong.self) }
        let running = await probe.started.wait(for: 1)
        XCTAssertTrue(running, "the call's handler did not start")
        server.beginShutdown()
        do {
            _ = try await task.value
            XCTFail("expected an error")
        } catch let error as RPCError {
            XCTAssertTrue([.unavailable, .cancelled].contains(error.code), "\(error)")
        }
        server.waitUntilFinished()
        XCTAssertEqual(probe.cancelledSeen.count, 1)
        server = nil
    }
}
