import XCTest
@testable import UbiquityServices

/// `ContextLifecycle` without a server: each test drives one context through the events a store
/// transition brings and checks what the registry is asked to do.
final class ContextLifecycleTests: XCTestCase {
    private let signOut = ContextLifecycle.Cause.transition("the device signed out")
    private func window(_ id: UInt64 = 1, deadline: Double = 100) -> ContextLifecycle.Window { .init(transition: id, deadline: deadline) }

    func testAnOpenContextRunsEveryCall() {
        var c = ContextLifecycle()
        XCTAssertEqual(c.call(now: 0), .proceed)
        XCTAssertEqual(c.callEnded(hasChanges: true), .none)
        XCTAssertEqual(c.state, .open)
    }

    func testWithChangesItSavesRepeatedlyInTheWindowThenSettlesThenIsReset() {
        var c = ContextLifecycle()
        XCTAssertEqual(c.transitionBegan(window(), cause: signOut, hasChanges: true), .none, "the transition waits for it")
        XCTAssertEqual(c.state, .saving(window(), signOut))
        // a save refused by a conflict leaves the changes: still saving, calls still run
        XCTAssertEqual(c.call(now: 10), .proceed)
        XCTAssertEqual(c.callEnded(hasChanges: true), .none)
        XCTAssertEqual(c.call(now: 20), .proceed)
        XCTAssertEqual(c.callEnded(hasChanges: false), .settled(transition: 1))
        XCTAssertEqual(c.state, .ready(window(), signOut))
        XCTAssertEqual(c.transitionEnded(1), .reset(signOut))
        XCTAssertEqual(c.call(now: 30), .refuse(signOut), "STORE_CHANGED until re-created")
        XCTAssertEqual(c.call(now: 1_000), .refuse(signOut))
    }

    func testWithoutChangesItSettlesAtOnce() {
        var c = ContextLifecycle()
        XCTAssertEqual(c.transitionBegan(window(7), cause: signOut, hasChanges: false), .settled(transition: 7))
        XCTAssertEqual(c.state, .ready(window(7), signOut))
    }

    func testNewChangesInTheWindowMakeTheTransitionWaitAgain() {
        var c = ContextLifecycle()
        _ = c.transitionBegan(window(), cause: signOut, hasChanges: false)
        XCTAssertEqual(c.call(now: 1), .proceed)
        XCTAssertEqual(c.callEnded(hasChanges: true), .none)
        XCTAssertEqual(c.state, .saving(window(), signOut))
        XCTAssertEqual(c.callEnded(hasChanges: false), .settled(transition: 1))
    }

    func testACallAtOrAfterTheDeadlineResetsTheContextAndIsRefused() {
        var c = ContextLifecycle()
        _ = c.transitionBegan(window(deadline: 50), cause: signOut, hasChanges: true)
        XCTAssertEqual(c.call(now: 49.9), .proceed)
        _ = c.callEnded(hasChanges: true)
        XCTAssertEqual(c.call(now: 50), .reset(signOut))
        XCTAssertEqual(c.state, .reset(signOut))
        XCTAssertEqual(c.transitionEnded(1), .none, "already reset: the transition has nothing left to do")
    }

    func testTheDeadlineEndsAWindowWhoseContextNeverSaved() {
        var c = ContextLifecycle()
        _ = c.transitionBegan(window(), cause: signOut, hasChanges: true)
        XCTAssertEqual(c.transitionEnded(1), .reset(signOut))
        XCTAssertTrue(c.isReset)
    }

    func testAnotherTransitionsEndLeavesTheWindowAlone() {
        var c = ContextLifecycle()
        _ = c.transitionBegan(window(1), cause: signOut, hasChanges: true)
        XCTAssertEqual(c.transitionBegan(window(2), cause: .transition("x"), hasChanges: true), .settled(transition: 2),
                       "the second need not wait: the first resets it")
        XCTAssertEqual(c.transitionEnded(2), .none)
        XCTAssertEqual(c.state, .saving(window(1), signOut))
    }

    func testDestroyOrReplaceResetsAtOnceFromAnyStateAndStaysReset() {
        var open = ContextLifecycle()
        open.storeDestroyedOrReplaced()
        XCTAssertEqual(open.call(now: 0), .refuse(.storeDestroyedOrReplaced))
        var saving = ContextLifecycle()
        _ = saving.transitionBegan(window(), cause: signOut, hasChanges: true)
        saving.storeDestroyedOrReplaced()
        XCTAssertEqual(saving.state, .reset(.storeDestroyedOrReplaced))
        XCTAssertEqual(saving.transitionEnded(1), .none)
        XCTAssertEqual(saving.transitionBegan(window(3), cause: signOut, hasChanges: true), .settled(transition: 3),
                       "a reset context stays reset: nothing to wait for")
        XCTAssertEqual(saving.state, .reset(.storeDestroyedOrReplaced))
    }
}

/// Which transitions may run at once (`StoreTransitions.Scope.overlaps`, `TransitionBook`).
final class TransitionBookTests: XCTestCase {
    private func session(_ account: String, _ id: String) -> StoreTransitions.Scope {
        .session(Account(id: account, session: id, device: "dev-" + id))
    }

    func testOnlySignOutsOfDifferentSessionsRunTogether() throws {
        var book = TransitionBook()
        let first = try book.begin(session("a", "s1"))
        XCTAssertNoThrow(try book.begin(session("a", "s2")))
        XCTAssertThrowsError(try book.begin(session("a", "s1")), "the same session twice")
        XCTAssertThrowsError(try book.begin(.account("a")))
        XCTAssertThrowsError(try book.begin(.store(UUID(), account: "a")))
        XCTAssertNoThrow(try book.begin(.account("b")), "another account")
        XCTAssertThrowsError(try book.begin(session("b", "s9")))
        book.end(first)
        XCTAssertNoThrow(try book.begin(session("a", "s1")), "free again once it ended")
    }

    func testARefusalIsAbortedTransitionInProgress() throws {
        var book = TransitionBook()
        _ = try book.begin(.account("a"))
        XCTAssertThrowsError(try book.begin(.account("a"))) { e in
            XCTAssertEqual((e as? ServiceError)?.reason, .transitionInProgress)
            XCTAssertEqual((e as? ServiceError)?.code, .aborted)
        }
    }
}
