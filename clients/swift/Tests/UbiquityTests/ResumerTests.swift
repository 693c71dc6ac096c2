import Foundation
import GRPCCore
import Testing
@testable import Ubiquity

/// The feed's resume rules and the save retry schedule, without a server.
@Suite(.timeLimit(.minutes(1))) struct ResumerTests {
    let t0 = ContinuousClock.now
    func error(_ code: RPCError.Code) -> UbiquityError { UbiquityError(RPCError(code: code, message: "x")) }
    func message(token: String) -> Ubiquity_V1_SubscribeResponse {
        .with {
            $0.resumeToken = Data(token.utf8)
            $0.caughtUp = .init()
        }
    }

    @Test func subscribesFromTheStartThenFromTheLastResumeToken() {
        var r = FeedResumer(start: .oldest, reconnectFor: .seconds(60))
        #expect(r.request(storeID: "s", filter: .init()).from.oldest)
        _ = r.received(message(token: "t1"))
        _ = r.received(message(token: "t2"))
        #expect(r.request(storeID: "s", filter: .init()).from.token == Data("t2".utf8))
        // A message without a token (none sent) keeps the last one.
        _ = r.received(.with { $0.progress = .init() })
        #expect(r.token == GenerationToken(Data("t2".utf8)))
    }

    @Test func resumableFailuresBackOffAndGiveUpAfterTheWindow() {
        var r = FeedResumer(start: .now, reconnectFor: .seconds(10))
        guard case .resubscribe(let d1) = r.failed(error(.unavailable), now: t0),
            case .resubscribe(let d2) = r.failed(error(.unavailable), now: t0 + .seconds(1))
        else { Issue.record("expected resubscribe"); return }
        #expect(d1 == .milliseconds(50) && d2 == .milliseconds(100))
        #expect(r.reconnects == 2)
        guard case .fail = r.failed(error(.unavailable), now: t0 + .seconds(11)) else {
            Issue.record("expected the window to end the feed"); return
        }
        // A received event resets the window and the backoff.
        _ = r.received(message(token: "t"))
        guard case .resubscribe(let d3) = r.failed(error(.unavailable), now: t0 + .seconds(30)) else {
            Issue.record("expected resubscribe"); return
        }
        #expect(d3 == .milliseconds(50))
    }

    @Test func otherFailuresEndTheFeedAndHistoryExpiredGoesToTheHook() {
        var r = FeedResumer(start: .now, reconnectFor: .seconds(10))
        guard case .fail = r.failed(error(.invalidArgument), now: t0) else { Issue.record("expected fail"); return }
        var expired = error(.failedPrecondition)
        expired.kind = .historyExpired
        guard case .historyExpired = r.failed(expired, now: t0) else { Issue.record("expected hook"); return }
        r.rebaselined(GenerationToken(Data("base".utf8)))
        #expect(r.request(storeID: "s", filter: .init()).from.token == Data("base".utf8))
    }

    @Test func aDrainedSubscriptionResumesFromTheTokenInItsResumeDetails() {
        var r = FeedResumer(start: .now, reconnectFor: .seconds(10))
        var drained = error(.unavailable)
        drained.resumeToken = GenerationToken(Data("drain".utf8))
        guard case .resubscribe = r.failed(drained, now: t0) else { Issue.record("expected resubscribe"); return }
        #expect(r.request(storeID: "s", filter: .init()).from.token == Data("drain".utf8))
    }

    @Test func aLocalSessionsFeedRenewsAnExpiryButEndsWhenRevoked() {
        var expired = error(.unauthenticated)
        expired.kind = .sessionExpired
        var revoked = error(.unauthenticated)
        revoked.kind = .sessionRevoked
        var local = FeedResumer(start: .now, reconnectFor: .seconds(10), signsIn: true, localSession: true)
        guard case .signInAgain = local.failed(expired, now: t0) else { Issue.record("expected sign-in"); return }
        // Revoked: the device's stores were imported into an account; a new local session would
        // follow a store that is gone.
        guard case .fail = local.failed(revoked, now: t0) else { Issue.record("expected fail"); return }
        var account = FeedResumer(start: .now, reconnectFor: .seconds(10), signsIn: true)
        guard case .signInAgain = account.failed(revoked, now: t0) else { Issue.record("expected sign-in"); return }
    }

    @Test func savesRetryOnlyUnknownOutcomesWithGrowingPauses() {
        var retry = SaveRetry(attempts: 4)
        #expect(retry.next(after: error(.aborted)) == nil)
        #expect(retry.next(after: error(.unavailable)) == .milliseconds(50))
        #expect(retry.next(after: error(.deadlineExceeded)) == .milliseconds(200))
        #expect(retry.next(after: error(.unavailable)) == .milliseconds(800))
        #expect(retry.next(after: error(.unavailable)) == nil)  // four attempts in all
    }

    @Test func errorKindComesFromTheReasonThenTheCode() {
        #expect(UbiquityError.kind(reason: "CONSTRAINT_CONFLICT", code: .aborted) == .constraintConflict)
        #expect(UbiquityError.kind(reason: "STORE_REPLACED", code: .failedPrecondition) == .generationExpired)
        #expect(UbiquityError.kind(reason: nil, code: .aborted) == .conflict)
        #expect(UbiquityError.kind(reason: "NO_MODEL", code: .failedPrecondition) == .failedPrecondition)
    }

    @Test func targetsAreHostAndPort() throws {
        #expect(try UbiquityClient.split("127.0.0.1:50051") == ("127.0.0.1", 50051))
        #expect(try UbiquityClient.split("[::1]:7") == ("::1", 7))
        #expect(throws: UbiquityError.self) { try UbiquityClient.split("nohost") }
    }
}
