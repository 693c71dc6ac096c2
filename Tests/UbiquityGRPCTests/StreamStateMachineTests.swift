import Logging
import UbiquityLoop
import XCTest
@testable import UbiquityGRPC

/// A stream's life driven without nghttp2: each row is a sequence of events and the actions the
/// machine answers them with (written as short strings so a table reads like the protocol).
final class StreamStateMachineTests: XCTestCase {
    private typealias Machine = StreamStateMachine
    private let loop = EventLoop(name: "stream-machine-test")
    private let owner = NoOwner()

    private func method(_ kind: RPCKind, _ execution: HandlerExecution = .task) -> MethodDescriptor {
        let sync: SyncUnaryHandler = { _, _ in SyncUnaryReply([]) }
        return MethodDescriptor(path: "/t.T/M", kind: kind, handler: { _ in }, execution: execution,
                                syncHandler: execution == .task ? nil : sync)
    }

    private func call() -> ServerCall {
        ServerCall(context: CallContext(path: "/t.T/M", metadata: Metadata(), deadline: nil, peer: "test", connection: ConnectionLocal()), kind: .unary,
                   streamID: 1, loop: loop, owner: owner, outboundHighWater: 1 << 16, inboundHighWater: 1 << 16,
                   maxSendMessageBytes: 1 << 20)
    }

    private func job() -> BlockingJob {
        BlockingJob(handler: { _, _ in SyncUnaryReply([]) }, request: [], path: "/t.T/M", metadata: Metadata(),
                    deadline: nil, peer: "test", connection: ConnectionLocal(), loop: loop, target: nil)
    }

    private func news(pending: Int = 0, status: RPCError? = nil, wantsHeaders: Bool = false) -> Machine.Event {
        .callUpdated(pending: pending, wantsHeaders: wantsHeaders, ended: status != nil)
    }

    /// Runs `events` from a fresh stream and returns each action, described. After each event
    /// the summary the transitions keep must be the one the state defines.
    private func run(_ events: [Machine.Event], _ machine: inout Machine, _ name: String) -> [String] {
        events.map { event in
            let action = describe(machine.event(event))
            XCTAssertEqual(machine.summary, Machine.Summary(of: machine.state), "\(name): summary after \(action)")
            return action
        }
    }

    private func describe(_ action: Machine.Action) -> String {
        switch action {
        case .none: return "-"
        case .respondTrailersOnly(let s, let http): return "trailersOnly(\(s.code.rawValue)\(http == 200 ? "" : ",http \(http)"))"
        case .cancelJobAndRespond(_, let s): return "cancelJob+trailersOnly(\(s.code.rawValue))"
        case .startResponse: return "startResponse"
        case .respondWithCallStatus: return "trailersOnly(call's status)"
        case .resumeData: return "resumeData"
        case .submitTrailers: return "submitTrailers"
        case .startTask(_, _, let halfClosed): return halfClosed ? "startTask(halfClosed)" : "startTask"
        case .runSync: return "runSync"
        case .finishInbound: return "finishInbound"
        case .failCall(_, let s): return "failCall(\(s.code.rawValue))"
        case .cancelCall(_, let reason, let override): return "cancelCall(\(reason)\(override ? ",status" : ""))"
        case .release(let r):
            var parts: [String] = []
            switch r.cancel {
            case .call(_, let reason)?: parts.append("cancel call \(reason)")
            case .job?: parts.append("cancel job")
            case nil: break
            }
            if r.creditFrom != nil { parts.append("credit") }
            parts.append(r.reusable ? "reuse" : "free")
            return "release(" + parts.joined(separator: ",") + ")"
        }
    }

    private func phase(_ m: Machine) -> String {
        switch m.state {
        case .receivingHeaders: return "receivingHeaders"
        case .receivingRequest: return "receivingRequest"
        case .handling(let h):
            let runner: String
            switch h.runner {
            case .task: runner = "task"
            case .sync(let job): runner = job == nil ? "sync" : "job"
            case .reply: runner = "reply"
            }
            return "handling(\(runner),\(h.response)\(h.readsRequest ? "" : ",discarding"))"
        case .answered(let leftover):
            switch leftover {
            case .nothing: return "answered"
            case .task: return "answered(task)"
            case .job: return "answered(job)"
            }
        case .closed: return "closed"
        }
    }

    // MARK: the table

    func testEventSequences() {
        let ok = RPCError(.ok)
        let bad = RPCError(.internal, "bad message")
        struct Row {
            let name: String
            let events: [Machine.Event]
            let actions: [String]
            let end: String
        }
        let unary = method(.unary), inline = method(.unary, .inline), blocking = method(.unary, .blocking)
        let clientStreaming = method(.clientStreaming)
        let aJob = job()
        let rows: [Row] = [
            Row(name: "unary .task call, response deferred once",
                events: [.admitted(unary, .task(call())), .requestEnded, news(pending: 10), .responseDeferred,
                         news(pending: 5), .responseFinished, .closed(.reset)],
                actions: ["-", "startTask(halfClosed)", "startResponse", "-", "resumeData", "submitTrailers",
                          "release(credit,reuse)"],
                end: "closed"),
            Row(name: "a .task call that ends with nothing sent answers Trailers-Only",
                events: [.admitted(unary, .task(call())), .requestEnded, news(status: RPCError(.notFound)), news(pending: 3)],
                actions: ["-", "startTask(halfClosed)", "trailersOnly(call's status)", "-"],
                end: "answered(task)"),
            Row(name: "news without output or status waits",
                events: [.admitted(unary, .task(call())), .requestEnded, news()],
                actions: ["-", "startTask(halfClosed)", "-"],
                end: "handling(task,notStarted)"),
            Row(name: "headers wanted before any message start the response",
                events: [.admitted(unary, .task(call())), .requestEnded, news(wantsHeaders: true), news(pending: 1)],
                actions: ["-", "startTask(halfClosed)", "startResponse", "-"],
                end: "handling(task,streaming)"),
            Row(name: "inline Ping: the handler runs at END_STREAM",
                events: [.admitted(inline, .sync), .requestEnded,
                         .syncReplied, .responseFinished, .closed(.reset)],
                actions: ["-", "runSync", "startResponse", "submitTrailers", "release(reuse)"],
                end: "closed"),
            Row(name: "a sync handler's error answers Trailers-Only",
                events: [.admitted(inline, .sync), .requestEnded,
                         .syncFailed(RPCError(.invalidArgument)), .responseFinished],
                actions: ["-", "runSync", "trailersOnly(3)", "-"],
                end: "answered"),
            Row(name: "rejected at the headers",
                events: [.rejected(RPCError(.unimplemented), httpStatus: 200), .admitted(unary, .task(call())), .requestEnded,
                         .deadlineExpired, .closed(.reset)],
                actions: ["trailersOnly(12)", "-", "-", "-", "release(reuse)"],
                end: "closed"),
            Row(name: "rejected with an HTTP status",
                events: [.rejected(RPCError(.internal), httpStatus: 415)],
                actions: ["trailersOnly(13,http 415)"],
                end: "answered"),
            Row(name: "a request that stops arriving during its headers",
                events: [.requestFailed(RPCError(.deadlineExceeded))],
                actions: ["trailersOnly(4)"],
                end: "answered"),
            Row(name: "a bad message before a .task handler started",
                events: [.admitted(unary, .task(call())), .requestFailed(bad), news(status: bad), .requestEnded],
                actions: ["-", "failCall(13)", "trailersOnly(call's status)", "-"],
                end: "answered(task)"),
            Row(name: "a bad message on a sync call",
                events: [.admitted(inline, .sync), .requestFailed(bad), .requestEnded],
                actions: ["-", "trailersOnly(13)", "-"],
                end: "answered"),
            Row(name: "client streaming starts at the headers and fails while answering",
                events: [.admitted(clientStreaming, .task(call())), news(pending: 4), .requestFailed(bad), .requestFailed(bad),
                         .requestEnded, .responseFinished],
                actions: ["startTask", "startResponse", "failCall(13)", "-", "-", "submitTrailers"],
                end: "answered(task)"),
            Row(name: "client streaming half-closes while running",
                events: [.admitted(clientStreaming, .task(call())), .requestEnded, .requestEnded],
                actions: ["startTask", "finishInbound", "finishInbound"],
                end: "handling(task,notStarted)"),
            Row(name: "deadline before a .task handler started",
                events: [.admitted(unary, .task(call())), .deadlineExpired, news(status: RPCError(.deadlineExceeded)), .requestEnded],
                actions: ["-", "cancelCall(deadline,status)", "trailersOnly(call's status)", "-"],
                end: "answered(task)"),
            Row(name: "deadline while a .task handler streams",
                events: [.admitted(unary, .task(call())), .requestEnded, news(pending: 2), .responseDeferred, .deadlineExpired,
                         news(pending: 0, status: RPCError(.deadlineExceeded)), .responseFinished],
                actions: ["-", "startTask(halfClosed)", "startResponse", "-", "cancelCall(deadline,status)",
                          "resumeData", "submitTrailers"],
                end: "answered(task)"),
            Row(name: "deadline before a sync handler started",
                events: [.admitted(blocking, .sync), .deadlineExpired, .requestEnded],
                actions: ["-", "trailersOnly(4)", "-"],
                end: "answered"),
            Row(name: "deadline while a .blocking job runs; its late outcome frees the stream for reuse",
                events: [.admitted(blocking, .sync), .requestEnded, .jobQueued(aJob), .deadlineExpired,
                         .syncReplied, .closed(.reset)],
                actions: ["-", "runSync", "-", "cancelJob+trailersOnly(4)", "-", "release(reuse)"],
                end: "closed"),
            Row(name: "a stream closed while its job may still answer is not reused",
                events: [.admitted(blocking, .sync), .requestEnded, .jobQueued(aJob), .deadlineExpired,
                         .closed(.reset)],
                actions: ["-", "runSync", "-", "cancelJob+trailersOnly(4)", "release(free)"],
                end: "closed"),
            Row(name: "reset while a .blocking job runs",
                events: [.admitted(blocking, .sync), .requestEnded, .jobQueued(aJob), .closed(.reset),
                         .syncReplied],
                actions: ["-", "runSync", "-", "release(cancel job,free)", "-"],
                end: "closed"),
            Row(name: "reset before the handler started",
                events: [.admitted(unary, .task(call())), .closed(.reset), .requestEnded],
                actions: ["-", "release(cancel call reset,credit,reuse)", "-"],
                end: "closed"),
            Row(name: "the connection closes under a running call",
                events: [.admitted(unary, .task(call())), .requestEnded, news(pending: 1), .closed(.connectionClosed)],
                actions: ["-", "startTask(halfClosed)", "startResponse", "release(cancel call connectionClosed,credit,reuse)"],
                end: "closed"),
            Row(name: "response HEADERS refused",
                events: [.admitted(unary, .task(call())), .requestEnded, news(pending: 1), .responseNotStarted, .responseFinished],
                actions: ["-", "startTask(halfClosed)", "startResponse", "cancelCall(protocolError)", "-"],
                end: "answered(task)"),
            Row(name: "a sync reply's HEADERS refused",
                events: [.admitted(inline, .sync), .requestEnded, .syncReplied,
                         .responseNotStarted],
                actions: ["-", "runSync", "startResponse", "-"],
                end: "answered"),
            Row(name: "a closed stream ignores everything",
                events: [.closed(.reset), .admitted(unary, .task(call())), .rejected(ok, httpStatus: 200), .closed(.reset)],
                actions: ["release(reuse)", "-", "-", "-"],
                end: "closed"),
        ]
        for row in rows {
            var m = Machine()
            XCTAssertEqual(run(row.events, &m, row.name), row.actions, row.name)
            XCTAssertEqual(phase(m), row.end, row.name)
        }
    }

    // MARK: the queries the connection asks between events (formerly StreamLifecycleTests)

    func testUnaryCallQueries() {
        var s = Machine()
        XCTAssertFalse(s.summary.readsRequest, "no DATA before the headers are admitted")
        XCTAssertTrue(s.summary.awaitsRequest)
        XCTAssertTrue(s.summary.keepsHeaderFields)
        let c = call()
        _ = s.event(.admitted(method(.unary), .task(c)))
        XCTAssertTrue(s.summary.readsRequest)
        XCTAssertTrue(s.call === c)
        XCTAssertTrue(s.summary.awaitsRequest, "admitted, but the handler waits for END_STREAM")
        _ = s.event(.requestEnded)
        XCTAssertFalse(s.summary.awaitsRequest, "a running handler is not a stalled request")
        XCTAssertTrue(s.summary.wantsCallView)
        _ = s.event(news(pending: 1))
        XCTAssertFalse(s.summary.wantsCallView, "after the response started only output matters")
        XCTAssertFalse(s.summary.keepsHeaderFields, "header fields after the response started are trailers")
        XCTAssertFalse(s.summary.isAnswered)
        _ = s.event(.responseFinished)
        XCTAssertTrue(s.summary.isAnswered)
        XCTAssertFalse(s.summary.readsRequest, "an answered stream discards what still arrives")
        XCTAssertNil(s.call, "an answered call gets no more news")
        XCTAssertEqual(describe(s.event(.responseFinished)), "-", "a status goes out once")
        XCTAssertEqual(describe(s.event(news(pending: 1))), "-")
    }

    func testRejectedAtTheHeaders() {
        var s = Machine()
        _ = s.event(.rejected(RPCError(.unimplemented), httpStatus: 200))
        XCTAssertFalse(s.summary.readsRequest)
        XCTAssertFalse(s.summary.awaitsRequest)
        XCTAssertNil(s.summary.kind)
    }

    func testClientStreamingReadsWhileAnsweringUntilItFails() {
        var s = Machine()
        _ = s.event(.admitted(method(.clientStreaming), .task(call())))
        _ = s.event(news(pending: 1))
        XCTAssertTrue(s.summary.readsRequest, "still receiving while the response streams")
        _ = s.event(.requestFailed(RPCError(.internal)))
        XCTAssertFalse(s.summary.readsRequest)
        XCTAssertFalse(s.summary.isAnswered, "the failed call's status still goes out")
    }

    func testASyncReplyIsHandedOutPrefixFirstAndItsStatusWithTheLastBytes() {
        var reply = SyncReply(message: [7, 8, 9], status: RPCError(.ok))
        var out = [UInt8](repeating: 0, count: 16)
        let first = out.withUnsafeMutableBufferPointer { reply.take(into: $0.baseAddress!, length: 6) }
        XCTAssertEqual(first.count, 6)
        XCTAssertNil(first.status, "the status comes with the last bytes")
        let second = out.withUnsafeMutableBufferPointer { reply.take(into: $0.baseAddress! + 6, length: 10) }
        XCTAssertEqual(second.count, 2)
        XCTAssertEqual(second.status?.code, .ok)
        XCTAssertEqual(Array(out[0..<8]), [0, 0, 0, 0, 3, 7, 8, 9], "the gRPC prefix, then the message")
        let after = out.withUnsafeMutableBufferPointer { reply.take(into: $0.baseAddress!, length: 16) }
        XCTAssertEqual(after.count, 0)
        XCTAssertNil(after.status, "the status goes out once")
    }
}

private final class NoOwner: CallOwner {
    func callNeedsService(_ call: ServerCall) {}
    func consumeInbound(streamID: Int32, bytes: Int) {}
}
