import Foundation
import XCTest
import UbiquityTestSupport
@testable import UbiquityStorage

/// The account lifecycle: the state machine alone, its records in credentials.sqlite, and the
/// directory's archive moves (docs/accounts.md "Archive, restore, delete").
final class AccountLifecycleTests: StorageTestCase, @unchecked Sendable {
    // MARK: state machine

    func testTheHappyPaths() {
        var m = AccountLifecycle(.active)
        XCTAssertEqual(m.begin(.archive), .success(.archiving))
        XCTAssertEqual(m.finish(), .archived)
        XCTAssertEqual(m.begin(.restore), .success(.restoring))
        XCTAssertEqual(m.finish(), .active)
        XCTAssertEqual(m.begin(.delete), .success(.deleting))
        XCTAssertEqual(m.finish(), .deleted)
        var archived = AccountLifecycle(.archived)
        XCTAssertEqual(archived.begin(.delete), .success(.deleting), "an archived account can be deleted, archive and all")
    }

    func testEveryRefusalChangesNothing() {
        let cases: [(AccountState, AccountLifecycle.Transition, AccountLifecycle.Refusal)] = [
            (.archived, .archive, .alreadyArchived),
            (.active, .restore, .notArchived),
            (.archiving, .restore, .busy(.archiving)),
            (.archiving, .delete, .busy(.archiving)),
            (.restoring, .archive, .busy(.restoring)),
            (.restoring, .delete, .busy(.restoring)),
        ] + AccountLifecycle.Transition.allCases.flatMap { t in [(.deleting, t, .gone), (.deleted, t, .gone)] }
        for (state, t, refusal) in cases {
            var m = AccountLifecycle(state)
            XCTAssertEqual(m.begin(t), .failure(refusal), "\(t) in \(state)")
            XCTAssertEqual(m.state, state, "a refusal leaves \(state) as it was")
        }
    }

    func testTheSameTransitionAgainIsARetryAndFinishIsIdempotent() {
        var m = AccountLifecycle(.archiving)
        XCTAssertEqual(m.begin(.archive), .success(.archiving))
        var r = AccountLifecycle(.restoring)
        XCTAssertEqual(r.begin(.restore), .success(.restoring))
        for s in [AccountState.active, .archived, .deleted] {
            var idle = AccountLifecycle(s)
            XCTAssertNil(idle.finish(), "nothing running in \(s)")
            XCTAssertEqual(idle.state, s)
        }
    }

    func testResumptionRunsForwards() {
        XCTAssertEqual(AccountLifecycle.resumption(of: .archiving), .archive)
        XCTAssertEqual(AccountLifecycle.resumption(of: .restoring), .restore)
        XCTAssertEqual(AccountLifecycle.resumption(of: .deleting), .delete)
        for s in [AccountState.active, .archived, .deleted] { XCTAssertNil(AccountLifecycle.resumption(of: s)) }
        XCTAssertEqual(AccountState.allCases.filter(\.serves), [.active])
        XCTAssertEqual(AccountState.allCases.filter { !$0.visible }, [.deleting, .deleted])
    }

    // MARK: credentials

    func testAnArchivedAccountsSessionsAndKeysAnswerAsUnknownUntilRestored() throws {
        let c = try Credentials(root: dir)
        defer { c.close() }
        _ = try c.addAccount(id: "a", displayName: "A")
        let (key, secret) = try c.createKey(account: "a", scope: .readWrite, label: "")
        let (_, token) = try c.createSession(key: key, deviceID: "d", lifetime: 3600)
        let ended = try c.beginTransition(.archive, account: "a")
        XCTAssertEqual(ended.count, 1)
        XCTAssertEqual(c.resolve(token: token, now: 0), .unknown, "as a token no one issued")
        XCTAssertNil(c.verifyKey(secret), "as an unknown key")
        XCTAssertThrowsError(try c.createSession(key: key, deviceID: "raced", lifetime: 3600))
        XCTAssertEqual(c.accountState("a"), .archiving)
        XCTAssertThrowsError(try c.beginTransition(.delete, account: "a")) { XCTAssertEqual($0 as? AccountLifecycle.Refusal, .busy(.archiving)) }
        try c.finishTransition(account: "a")
        XCTAssertEqual(c.accountState("a"), .archived)
        XCTAssertNotNil(c.account("a"), "an archived account is still listed")
        _ = try c.beginTransition(.restore, account: "a")
        try c.finishTransition(account: "a")
        XCTAssertEqual(c.accountState("a"), .active)
        XCTAssertEqual(c.resolve(token: token, now: 0), .unknown, "sessions ended at archive stay ended")
        XCTAssertNotNil(c.verifyKey(secret), "the key signs in again")
    }

    func testStatesSurviveAReopenAndPendingOnesAreListed() throws {
        var c = try Credentials(root: dir)
        for id in ["a", "b", "d"] { _ = try c.addAccount(id: id, displayName: id) }
        _ = try c.createKey(account: "d", scope: .readOnly, label: "")
        _ = try c.beginTransition(.archive, account: "a")
        _ = try c.beginTransition(.archive, account: "b")
        try c.finishTransition(account: "b")
        _ = try c.beginTransition(.delete, account: "d")
        XCTAssertNil(c.account("d"), "a tombstone is invisible at once")
        XCTAssertEqual(c.accounts(after: nil, limit: 10).map(\.id), ["a", "b"])
        XCTAssertEqual(c.accounts(after: "a", limit: 10).map(\.id), ["b"], "a page starts after its token's ID")
        c.close()

        c = try Credentials(root: dir)
        defer { c.close() }
        XCTAssertEqual(c.accountState("a"), .archiving)
        XCTAssertEqual(c.accountState("b"), .archived)
        XCTAssertEqual(c.pendingTransitions().map(\.account), ["a", "d"])
        XCTAssertEqual(c.pendingTransitions().map(\.transition), [.archive, .delete])
        XCTAssertEqual(Set(c.accountsWithArchive()), ["a", "b"])
        let (end, removed) = try c.finishTransition(account: "d")
        XCTAssertEqual(end, .deleted)
        XCTAssertEqual(removed, Credentials.Removed(keys: 1, sessions: 0))
        XCTAssertNil(c.accountState("d"))
        XCTAssertThrowsError(try c.beginTransition(.archive, account: "d")) { XCTAssertEqual($0 as? AccountLifecycle.Refusal, .gone) }
        XCTAssertEqual(try c.finishTransition(account: "d").0, .deleted, "finishing again changes nothing")
    }

    // MARK: catalog

    func testAClosedAccountGetsNoNewStoreAndItsRecordsGoWithIt() throws {
        let c = try Catalog(path: dir + "/catalog.sqlite")
        defer { c.close() }
        try c.ensureAccount("a")
        let (kept, _) = try XCTUnwrap(try c.store(account: "a", name: "kept", create: true))
        c.acceptStores(account: "a", false)
        XCTAssertNil(try c.store(account: "a", name: "new", create: true), "a call that raced the archive adds nothing")
        XCTAssertEqual(try c.store(account: "a", name: "kept", create: true)?.0, kept, "existing records still resolve")
        c.acceptStores(account: "a", true)
        XCTAssertNotNil(try c.store(account: "a", name: "new", create: true))
        try c.removeStore(id: kept.id)
        XCTAssertEqual(try c.removeAccount("a").map(\.name), ["new"])
        XCTAssertEqual(c.stores(account: "a"), [])
        XCTAssertNil(c.destroyedStore(id: kept.id), "the destroyed store's name goes too")
    }

    // MARK: directory

    func testArchiveMovesClosedFilesParksThemAndUnarchiveBringsThemBack() async throws {
        let d = try StoreDirectory(root: dir + "/data")
        d.locateAccounts { _ in "acct" }
        let id = UUID()
        _ = try await d.withStore(id, create: true, model: Fixtures.model) { s in
            try await s.save({ var r = SaveRequest(); r.inserts = [InsertOperation(temporaryID: "n", entity: "Note", values: ["n": .int(7)])]; return r }())
        }
        let live = d.livePath(for: id, account: "acct"), archived = d.archivePath(for: id, account: "acct")
        XCTAssertEqual(live, d.path(for: id))
        try d.archive(id, account: "acct")
        XCTAssertFalse(FileManager.default.fileExists(atPath: live))
        XCTAssertTrue(FileManager.default.fileExists(atPath: archived))
        XCTAssertTrue(d.isParked(id))
        XCTAssertEqual(d.openCount, 0, "closed before it moved")
        // a call that raced the archive cannot create an empty store where the old one was
        let raced = await reason { _ = try await d.withStore(id, create: true, model: Fixtures.model) { _ in 0 } }
        XCTAssertEqual(raced, .notFound)
        XCTAssertFalse(FileManager.default.fileExists(atPath: live))
        try d.archive(id, account: "acct")  // idempotent: a resumed archive finds nothing left to move
        try d.unarchive(id, account: "acct")
        XCTAssertFalse(d.isParked(id))
        let n = try await d.withStore(id) { s in try await s.objectIDs(entity: "Note").count }
        XCTAssertEqual(n, 1)
        XCTAssertGreaterThan(d.accountBytes("acct"), 0)
        try d.removeForDeletion(id, account: "acct")
        XCTAssertEqual(d.accountBytes("acct"), 0, "no file of the store is left, live or archived")
        XCTAssertTrue(d.isParked(id), "nothing recreates it before its record is gone")
        try d.removeAccountFolder("acct")
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir + "/data/accounts/acct"))
        await d.shutdown()
    }

    func testAStoreInUseRefusesToMove() async throws {
        let d = try StoreDirectory(root: dir + "/data")
        d.locateAccounts { _ in "acct" }
        let id = UUID()
        try await d.withStore(id, create: true, model: Fixtures.model) { _ in
            XCTAssertThrowsError(try d.archive(id, account: "acct")) { XCTAssertEqual(($0 as? StorageError)?.reason, .busy) }
        }
        XCTAssertFalse(d.isParked(id), "a refused archive parks nothing")
        XCTAssertTrue(FileManager.default.fileExists(atPath: d.livePath(for: id, account: "acct")))
        await d.shutdown()
    }
}
