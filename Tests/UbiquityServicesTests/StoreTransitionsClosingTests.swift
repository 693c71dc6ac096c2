import Foundation
import XCTest
import UbiquityTestSupport
@testable import UbiquityServices
@testable import UbiquityStorage

/// Every WILL_CHANGE is closed (docs/lifecycle.md): through a real `Backend` on a temporary data
/// directory — its catalog and store files — a transition whose body throws, one whose later
/// store cannot be written, and one a "kill" left open, each end with a DID_CHANGE marked
/// cancelled on every store that heard the WILL_CHANGE, and no announcement left pending.
final class StoreTransitionsClosingTests: XCTestCase {
    private struct Refused: Error {}
    private var temporary: TemporaryDirectory?

    override func setUpWithError() throws { temporary = try TemporaryDirectory(prefix: "ubq-transitions") }
    override func tearDown() { temporary?.remove() }

    /// A backend with `names` stores of the default account, files created; their IDs in the
    /// order the transition visits them.
    private func backend(stores names: [String]) async throws -> (Backend, [UUID]) {
        let b = try Backend(dataDirectory: temporary!.path)
        var ids: [UUID] = []
        for n in names {
            let (r, _) = try XCTUnwrap(try b.catalog.store(account: "default", name: n, create: true))
            try await b.directory.withStore(r.id, create: true) { _ in }
            ids.append(r.id)
        }
        return (b, ids.sorted { $0.uuidString < $1.uuidString })
    }

    private func events(_ b: Backend, _ id: UUID, after start: GenerationToken) async throws -> [StoreEventRecord] {
        try await b.directory.withStore(id) { try await $0.history(after: start, limit: 100).transactions.compactMap(\.event) }
    }

    private func token(_ b: Backend, _ id: UUID) async throws -> GenerationToken {
        try await b.directory.withStore(id) { $0.currentToken }
    }

    func testABodyThatThrowsClosesEveryWillAsCancelledAndTheErrorGoesOn() async throws {
        let (b, ids) = try await backend(stores: ["a", "b"])
        let starts = [try await token(b, ids[0]), try await token(b, ids[1])]
        do {
            _ = try await StoreTransitions(backend: b, contexts: ContextRegistry(limits: b.limits))
                .run(.contentRemoved, scope: .account("default")) { () async throws -> Int in throw Refused() }
            XCTFail("the body's error goes on")
        } catch is Refused {}
        for (id, start) in zip(ids, starts) {
            let got = try await events(b, id, after: start)
            XCTAssertEqual(got.map(\.phase), [.willChange, .didChange])
            XCTAssertEqual(got.map(\.cancelled), [nil, true])
            XCTAssertEqual(got[1], got[0].cancelling())
            let open = try await b.directory.withStore(id) { try await $0.announcementLog().open }
            XCTAssertEqual(open, [])
        }
        XCTAssertTrue(try b.catalog.pendingAnnouncements().isEmpty)
        await b.shutdown()
    }

    func testALaterStoreThatCannotBeWrittenLeavesTheEarlierOnesClosed() async throws {
        let (b, ids) = try await backend(stores: ["a", "b"])
        let start = try await token(b, ids[0])
        // the second store's WILL_CHANGE append fails: its files moved away (closed first) under
        // its catalog record
        try b.directory.archive(ids[1], account: "default")
        var ran = false
        do {
            _ = try await StoreTransitions(backend: b, contexts: ContextRegistry(limits: b.limits))
                .run(.accountRemoved, scope: .account("default")) { ran = true }
            XCTFail("a WILL_CHANGE that cannot be written fails the transition")
        } catch {}
        XCTAssertFalse(ran, "the transition does not happen")
        let got = try await events(b, ids[0], after: start)
        XCTAssertEqual(got.map(\.phase), [.willChange, .didChange])
        XCTAssertEqual(got.last?.cancelled, true)
        XCTAssertTrue(try b.catalog.pendingAnnouncements().isEmpty)
        await b.shutdown()
    }

    func testAStartClosesTheWillAKilledProcessLeftOpenAndNothingElse() async throws {
        let (b, ids) = try await backend(stores: ["a", "b"])
        let start = try await token(b, ids[0])
        let untouched = try await token(b, ids[1])
        // what a process killed in the chance to save leaves: the row, a WILL_CHANGE on the first
        // store, none yet on the second
        let will = StoreEventRecord(phase: .willChange, transition: .accountRemoved, device: "d1", transitionID: "killed")
        try b.catalog.beginAnnouncement("killed", stores: ids)
        _ = try await b.directory.withStore(ids[0]) { try await $0.appendEvent(will) }
        await b.shutdown()

        let again = try Backend(dataDirectory: temporary!.path)
        let got = try await events(again, ids[0], after: start)
        XCTAssertEqual(got, [will, will.cancelling()])
        let second = try await events(again, ids[1], after: untouched)
        XCTAssertEqual(second, [], "no DID_CHANGE where no WILL_CHANGE was written")
        XCTAssertTrue(try again.catalog.pendingAnnouncements().isEmpty)
        await again.shutdown()
    }
}
