import Foundation
import GRPCCore
import Testing
@testable import Ubiquity

/// When the client signs in again, and what a feed does when its session ends, without a server.
@Suite(.timeLimit(.minutes(1))) struct SessionStateTests {
    let now = Date(timeIntervalSince1970: 1_000_000)

    @Test func signsInFirstThenAMinuteBeforeALongSessionExpires() {
        var s = SessionState()
        #expect(s.needsSignIn(now: now))
        s.signedIn(token: "a", expiresAt: now + 86_400, accountID: "default", now: now)
        #expect(!s.needsSignIn(now: now))
        #expect(!s.needsSignIn(now: now + 86_400 - 61))
        #expect(s.needsSignIn(now: now + 86_400 - 60))
        #expect(s.signIns == 1 && s.accountID == "default")
    }

    @Test func aShortSessionIsRenewedAtHalfItsLifetimeNotOnEveryCall() {
        var s = SessionState()
        s.signedIn(token: "a", expiresAt: now + 2, accountID: "default", now: now)
        #expect(!s.needsSignIn(now: now + 0.9))
        #expect(s.needsSignIn(now: now + 1))
    }

    @Test func aRejectedTokenIsForgottenOnlyWhileItIsCurrent() {
        var s = SessionState()
        s.signedIn(token: "old", expiresAt: now + 3600, accountID: "default", now: now)
        let forgot = s.rejected("old")
        #expect(forgot)
        #expect(s.needsSignIn(now: now))
        s.signedIn(token: "new", expiresAt: now + 3600, accountID: "default", now: now)
        // A late failure of the old token must not throw away the session that replaced it.
        let forgotAgain = s.rejected("old")
        #expect(!forgotAgain)
        #expect(s.token == "new" && !s.needsSignIn(now: now))
    }

    @Test func signOutHandsBackTheTokenAndNeedsANewSignIn() {
        var s = SessionState()
        let none = s.signOut()
        #expect(none == nil)
        s.signedIn(token: "a", expiresAt: now + 3600, accountID: "default", now: now)
        let token = s.signOut()
        #expect(token == "a")
        #expect(s.needsSignIn(now: now) && s.token == nil)
    }

    func ended(_ reason: String, resume: String? = nil) -> UbiquityError {
        var e = UbiquityError(RPCError(code: .unauthenticated, message: "x"))
        e.reason = reason
        e.kind = UbiquityError.kind(reason: reason, code: .unauthenticated)
        e.resumeToken = resume.map { GenerationToken(Data($0.utf8)) }
        return e
    }

    @Test func aFeedWithAnApiKeySignsInAgainAndResumesFromTheErrorsToken() {
        let t0 = ContinuousClock.now
        var r = FeedResumer(start: .now, reconnectFor: .seconds(10), signsIn: true)
        guard case .signInAgain = r.failed(ended("SESSION_EXPIRED", resume: "t7"), now: t0) else {
            Issue.record("expected sign-in"); return
        }
        #expect(r.request(storeID: "s", filter: .init()).from.token == Data("t7".utf8))
        guard case .signInAgain = r.failed(ended("SESSION_REVOKED"), now: t0) else {
            Issue.record("expected sign-in"); return
        }
        // Two sessions ended before the stream delivered anything: not a passing expiry.
        guard case .fail = r.failed(ended("SESSION_EXPIRED"), now: t0) else { Issue.record("expected fail"); return }
        _ = r.received(.with { $0.progress = .init() })
        guard case .signInAgain = r.failed(ended("SESSION_EXPIRED"), now: t0) else {
            Issue.record("expected sign-in after a message"); return
        }
    }

    @Test func aFeedWithoutAnApiKeyOrWithABadKeyEnds() {
        let t0 = ContinuousClock.now
        var plain = FeedResumer(start: .now, reconnectFor: .seconds(10))
        guard case .fail = plain.failed(ended("SESSION_EXPIRED"), now: t0) else { Issue.record("expected fail"); return }
        var keyed = FeedResumer(start: .now, reconnectFor: .seconds(10), signsIn: true)
        guard case .fail = keyed.failed(ended("BAD_CREDENTIALS"), now: t0) else { Issue.record("expected fail"); return }
    }

    @Test func authReasonsHaveTheirOwnKinds() {
        #expect(UbiquityError.kind(reason: "BAD_CREDENTIALS", code: .unauthenticated) == .badCredentials)
        #expect(UbiquityError.kind(reason: "MISSING_CREDENTIALS", code: .unauthenticated) == .missingCredentials)
        #expect(UbiquityError.kind(reason: "SESSION_EXPIRED", code: .unauthenticated) == .sessionExpired)
        #expect(UbiquityError.kind(reason: "SESSION_REVOKED", code: .unauthenticated) == .sessionRevoked)
        #expect(UbiquityError.kind(reason: "SCOPE_EXCEEDED", code: .permissionDenied) == .scopeExceeded)
        #expect(UbiquityError.kind(reason: "SIGN_IN_RATE_LIMITED", code: .resourceExhausted) == .signInRateLimited)
        #expect(UbiquityError.kind(reason: nil, code: .unauthenticated) == .unauthenticated)
        var limited = UbiquityError(RPCError(code: .resourceExhausted, message: "x"))
        limited.reasonMetadata = ["retry_after_seconds": "42"]
        #expect(limited.retryAfter == .seconds(42))
    }
}
