import Foundation
import XCTest
@testable import UbiquityStorage

/// A device's local key-value entries moved into its account at first sign-in
/// (`KeyValueStore.moveLocalEntries`): the rule for a key in both, the versions, the feed
/// position, the quotas, and a move that happens once whatever is redone.
final class KeyValueMoveTests: StorageTestCase, @unchecked Sendable {
    private func open(_ quotas: KeyValueQuotas = KeyValueQuotas()) throws -> KeyValueStore {
        try KeyValueStore(path: dir + "/keyvalue.sqlite", quotas: quotas)
    }

    func testThePlanKeepsTheAccountsValuesAndTakesTheRestInKeyOrder() {
        func e(_ k: String, _ v: UInt8, version: Int64 = 1, deleted: Bool = false) -> KeyValueStore.Entry {
            .init(key: k, value: deleted ? [] : [v], version: version, seq: 1, deleted: deleted, author: "phone", updatedMS: 1)
        }
        let local = [e("z", 1), e("both", 2), e("gone-here", 3), e("deleted-locally", 4, deleted: true)]
        let account = ["both": e("both", 9, version: 4), "gone-here": e("gone-here", 0, version: 6, deleted: true)]
        let m = KeyValueStore.plan(local: local, account: account, seq: 10, usage: KeyValueUsage(keys: 1, bytes: 5), nowMS: 7)
        XCTAssertEqual(m.kept, ["both"], "a key the account has set keeps the account's value")
        XCTAssertEqual(m.written.map(\.key), ["gone-here", "z"], "key order; a local tombstone moves nothing")
        XCTAssertEqual(m.written.map(\.version), [7, 1], "versions go on after the account's tombstone")
        XCTAssertEqual(m.written.map(\.seq), [11, 12])
        XCTAssertEqual(m.written.map(\.origin), [.accountChange, .accountChange])
        XCTAssertEqual(m.written.map(\.value), [[3], [1]])
        XCTAssertEqual(m.seq, 12)
        XCTAssertEqual(m.usageBefore, KeyValueUsage(keys: 1, bytes: 5))
        XCTAssertEqual(m.usage, KeyValueUsage(keys: 3, bytes: 5 + 10 + 2))
    }

    func testTheMoveHappensOnceAndTheMovedKeysReadAsAnAccountChange() throws {
        let kv = try open()
        defer { kv.close() }
        _ = try kv.set(account: "acct", key: "theme", value: Array("dark".utf8), condition: .none, author: "tablet")
        _ = try kv.set(account: "local-1", key: "theme", value: Array("light".utf8), condition: .none, author: "phone")
        _ = try kv.set(account: "local-1", key: "seeded", value: [1], condition: .none, author: "phone")
        let before = try kv.position(account: "acct").seq
        XCTAssertEqual(try kv.planMove(from: "local-1", to: "acct").written.map(\.key), ["seeded"])
        let m = try kv.moveLocalEntries(from: "local-1", to: "acct")
        XCTAssertEqual(m.written.map(\.key), ["seeded"])
        XCTAssertEqual(m.kept, ["theme"])
        XCTAssertEqual(m.counts, .init(moved: 1, kept: 1))
        XCTAssertEqual(try kv.get(account: "acct", key: "theme")?.value, Array("dark".utf8))
        XCTAssertEqual(try kv.get(account: "acct", key: "seeded")?.author, "phone")
        let changes = try kv.changes(account: "acct", after: before, limit: 10)
        XCTAssertEqual(changes.map(\.key), ["seeded"])
        XCTAssertEqual(changes.map(\.origin), [.accountChange])
        XCTAssertEqual(try kv.position(account: "acct").usage, KeyValueUsage(keys: 2, bytes: 5 + 4 + 6 + 1))
        // nothing local is left: a redo (the job after a kill) moves nothing again
        XCTAssertEqual(try kv.changes(account: "local-1", after: 0, limit: 10), [])
        XCTAssertEqual(try kv.position(account: "local-1").seq, 0)
        let again = try kv.moveLocalEntries(from: "local-1", to: "acct")
        XCTAssertEqual(again.written, [])
        XCTAssertEqual(again.counts, .init(moved: 1, kept: 1), "a redo reports what the move did (the SignIn's counts after a kill)")
        kv.close()
        let reopened = try open()
        defer { reopened.close() }
        XCTAssertEqual(try reopened.moveLocalEntries(from: "local-1", to: "acct").counts, .init(moved: 1, kept: 1), "recorded on disk")
        XCTAssertEqual(try reopened.position(account: "acct").seq, m.seq)
        // a device's write afterwards is a write again
        _ = try reopened.set(account: "acct", key: "seeded", value: [2], condition: .none, author: "tablet")
        XCTAssertEqual(try reopened.changes(account: "acct", after: m.seq, limit: 10).map(\.origin), [.write])
    }

    func testAWriteToTheLocalEntriesAfterTheMoveIsRefusedAndWritesNothing() throws {
        let kv = try open()
        defer { kv.close() }
        _ = try kv.set(account: "local-1", key: "early", value: [1], condition: .none, author: "phone")
        let m = try kv.moveLocalEntries(from: "local-1", to: "acct")
        XCTAssertEqual(m.counts, .init(moved: 1, kept: 0))
        let position = try kv.position(account: "acct")
        // a write that was authenticated before the move revoked its session, committing after it
        XCTAssertEqual(try kv.set(account: "local-1", key: "late", value: [2], condition: .none, author: "phone"), .movedAway)
        XCTAssertEqual(try kv.set(account: "local-1", key: "early", value: [3], condition: .version(1), author: "phone"), .movedAway)
        XCTAssertEqual(try kv.delete(account: "local-1", key: "early", condition: .none, author: "phone"), .movedAway)
        XCTAssertEqual(try kv.changes(account: "local-1", after: 0, limit: 10), [], "nothing written where nobody reads")
        XCTAssertEqual(try kv.position(account: "local-1").seq, 0)
        XCTAssertEqual(try kv.position(account: "acct").seq, position.seq, "nor in the account")
        XCTAssertNil(try kv.get(account: "acct", key: "late"))
        // a device with no local entries is sealed all the same: its racing write is its first
        _ = try kv.moveLocalEntries(from: "local-2", to: "acct")
        XCTAssertEqual(try kv.set(account: "local-2", key: "k", value: [], condition: .none, author: ""), .movedAway)
        // the account itself, and any other, writes as before
        XCTAssertEqual(written(try kv.set(account: "acct", key: "late", value: [2], condition: .none, author: "phone"))?.version, 1)
        XCTAssertNotNil(written(try kv.set(account: "local-3", key: "k", value: [], condition: .none, author: "")))
        // deleting the account forgets the record with the rest
        try kv.removeAccount("acct")
        XCTAssertNotNil(written(try kv.set(account: "local-1", key: "k", value: [], condition: .none, author: "")))
    }

    func testAMoveRecordIsForgottenOnlyOnceItsJobEndedAndNoWriteCanStillNeedIt() throws {
        let kv = try open()
        defer { kv.close() }
        _ = try kv.set(account: "local-1", key: "a", value: [1], condition: .none, author: "phone")
        _ = try kv.set(account: "local-2", key: "b", value: [2], condition: .none, author: "tablet")
        _ = try kv.moveLocalEntries(from: "local-1", to: "acct", nowMS: 1_000)
        _ = try kv.moveLocalEntries(from: "local-2", to: "acct", nowMS: 5_000)
        XCTAssertEqual(try kv.movedRecords(), 2)

        XCTAssertEqual(try kv.forgetMoves(before: 1_000, except: []), 0, "moved at the cutoff: a write may still be on its way")
        XCTAssertEqual(try kv.forgetMoves(before: 2_000, except: ["local-1"]), 0, "its import job has not ended")
        XCTAssertEqual(try kv.moveLocalEntries(from: "local-1", to: "acct").counts, .init(moved: 1, kept: 0),
                       "kept: a redo still reports the move's counts")
        XCTAssertEqual(try kv.set(account: "local-1", key: "late", value: [3], condition: .none, author: "phone"), .movedAway,
                       "kept: a late write is still refused")

        XCTAssertEqual(try kv.forgetMoves(before: 2_000, except: ["local-2"]), 1, "ended and older than the cutoff")
        XCTAssertEqual(try kv.movedRecords(), 1)
        XCTAssertEqual(try kv.set(account: "local-2", key: "late", value: [3], condition: .none, author: "tablet"), .movedAway,
                       "the other move's record is untouched")
        // at startup nothing is in flight: every ended job's record goes
        XCTAssertEqual(try kv.forgetMoves(before: .max, except: []), 1)
        XCTAssertEqual(try kv.movedRecords(), 0)
        XCTAssertEqual(try kv.forgetMoves(before: .max, except: []), 0)
        // the moved keys stay the account's
        XCTAssertEqual(try kv.get(account: "acct", key: "a")?.value, [1])
        XCTAssertEqual(try kv.get(account: "acct", key: "b")?.value, [2])
    }

    func testAMoveRecordFromBeforeItsTimeWasKeptReadsAsMovedLongAgo() throws {
        try makeFileFromBeforeTheImport(dir + "/keyvalue.sqlite", rows: """
            CREATE TABLE ubq_kv_moved(local TEXT PRIMARY KEY, account TEXT NOT NULL, moved INTEGER NOT NULL,
                kept INTEGER NOT NULL) WITHOUT ROWID;
            INSERT INTO ubq_kv_moved VALUES ('local-1', 'acct', 3, 1);
            """)
        let kv = try open()
        defer { kv.close() }
        XCTAssertEqual(try kv.set(account: "local-1", key: "k", value: [], condition: .none, author: ""), .movedAway)
        XCTAssertEqual(try kv.forgetMoves(before: 1, except: ["local-1"]), 0)
        XCTAssertEqual(try kv.forgetMoves(before: 1, except: []), 1)
        _ = try kv.moveLocalEntries(from: "local-2", to: "acct", nowMS: 7)
        XCTAssertEqual(try kv.forgetMoves(before: 7, except: []), 0, "a move recorded now keeps its time")
    }

    func testQuotasArePlannedAndTheMoveNeverDropsAKey() throws {
        var q = KeyValueQuotas()
        q.maxKeys = 2
        let kv = try open(q)
        defer { kv.close() }
        _ = try kv.set(account: "acct", key: "a", value: [], condition: .none, author: "")
        for k in ["b", "c"] { _ = try kv.set(account: "local-1", key: k, value: [], condition: .none, author: "") }
        let plan = try kv.planMove(from: "local-1", to: "acct")
        XCTAssertEqual(q.check(from: plan.usageBefore, to: plan.usage), .init(quota: .keys, limit: 2, requested: 3, used: 1))
        // the sign-in refuses on that plan; a move that happens anyway (another device filled the
        // account after the check) keeps every key and leaves the account over its quota
        let m = try kv.moveLocalEntries(from: "local-1", to: "acct")
        XCTAssertEqual(m.written.count, 2)
        XCTAssertEqual(q.excess(m.usage)?.quota, .keys)
        XCTAssertNil(q.excess(KeyValueUsage(keys: 2, bytes: 0)))
        XCTAssertEqual(try kv.accountsOverQuota(), 1)
    }

    func testAFileFromBeforeTheMoveGainsItsColumns() throws {
        try makeFileFromBeforeTheImport(dir + "/keyvalue.sqlite", rows: """
            INSERT INTO ubq_kv VALUES ('a', 'k', x'01', 1, 1, 0, 'd', 5);
            INSERT INTO ubq_kv_accounts VALUES ('a', 1, 1, 2);
            """)
        let kv = try open()
        defer { kv.close() }
        XCTAssertEqual(try kv.get(account: "a", key: "k")?.origin, .write)
        XCTAssertEqual(written(try kv.set(account: "a", key: "j", value: [], condition: .none, author: ""))?.seq, 2)
    }

    private func written(_ o: KeyValueStore.WriteOutcome) -> KeyValueStore.Entry? {
        if case .written(let e) = o { return e }
        XCTFail("expected a write, got \(o)")
        return nil
    }
}

/// Trimming tombstones (`KeyValueStore.trimTombstones`): by age, the account's floor and the
/// versions a key set anew starts from.
final class KeyValueTrimTests: StorageTestCase, @unchecked Sendable {
    func testTombstonesOlderThanTheCutoffGoAndRaiseTheFloor() throws {
        let kv = try KeyValueStore(path: dir + "/keyvalue.sqlite")
        defer { kv.close() }
        _ = try kv.set(account: "a", key: "old", value: [1], condition: .none, author: "", nowMS: 10)
        _ = try kv.delete(account: "a", key: "old", condition: .none, author: "", nowMS: 20)       // seq 2, version 2
        _ = try kv.set(account: "a", key: "new", value: [1], condition: .none, author: "", nowMS: 30)
        _ = try kv.delete(account: "a", key: "new", condition: .none, author: "", nowMS: 40)       // seq 4
        _ = try kv.set(account: "a", key: "kept", value: [1], condition: .none, author: "", nowMS: 5)
        _ = try kv.set(account: "b", key: "old", value: [1], condition: .none, author: "", nowMS: 10)
        XCTAssertEqual(try kv.trimFloor(account: "a"), 0)
        XCTAssertEqual(try kv.trimTombstones(before: 35), 1, "only the tombstone older than the cutoff; never a set key")
        XCTAssertEqual(try kv.trimFloor(account: "a"), 2)
        XCTAssertEqual(try kv.trimFloor(account: "b"), 0)
        XCTAssertEqual(try kv.changes(account: "a", after: 0, limit: 10).map(\.key), ["new", "kept"])
        XCTAssertEqual(try kv.get(account: "a", key: "kept")?.value, [1])
        XCTAssertEqual(try kv.trimTombstones(before: 35), 0, "nothing left to trim")
        XCTAssertEqual(try kv.trimFloor(account: "a"), 2, "the floor never goes back")
        let read = try kv.changesAndFloor(account: "a", after: 0, limit: 10)
        XCTAssertEqual(read.entries.map(\.key), ["new", "kept"])
        XCTAssertEqual(read.floor, 2, "one snapshot: a reader below the floor knows it may have missed a deletion")
        guard case .written(let again) = try kv.set(account: "a", key: "old", value: [2], condition: .none, author: "") else { return XCTFail("set") }
        XCTAssertEqual(again.version, 3, "above the trimmed incarnation's versions")
        guard case .written(let fresh) = try kv.set(account: "a", key: "never-seen", value: [], condition: .none, author: "") else { return XCTFail("set") }
        XCTAssertEqual(fresh.version, 3, "a key set anew in an account that trimmed starts above every trimmed version")
        XCTAssertEqual(try kv.position(account: "a").usage.keys, 3, "usage counts set keys only; trimming changes nothing it counts")
    }

    /// Its cost scales with what it trims: every statement of the trim reads the tombstone index,
    /// none scans the table (the pass it replaced scanned every entry of every account).
    func testTheTrimReadsTheTombstoneIndexNotTheTable() throws {
        let path = dir + "/keyvalue.sqlite"
        let kv = try KeyValueStore(path: path)
        kv.close()
        let c = try Connection(path: path, readOnly: true, vfs: nil, busyTimeoutMS: 5000)
        defer { c.close() }
        for sql in KeyValueStore.trimStatements {
            var plan: [String] = []
            try c.query("EXPLAIN QUERY PLAN " + sql, [.integer(0)]) { plan.append($0.text(3)) }
            XCTAssertTrue(plan.contains { $0.contains("COVERING INDEX ubq_kv_tombstones") }, "\(sql): \(plan)")
            XCTAssertFalse(plan.contains { $0.hasPrefix("SCAN") }, "\(sql): \(plan)")
        }
    }

    func testAFileFromBeforeTheTombstoneIndexGainsIt() throws {
        let path = dir + "/keyvalue.sqlite"
        try makeFileFromBeforeTheImport(path, rows: """
            INSERT INTO ubq_kv VALUES ('a', 'gone', x'', 2, 2, 1, 'd', 5);
            INSERT INTO ubq_kv_accounts VALUES ('a', 2, 0, 0);
            """)
        let kv = try KeyValueStore(path: path)
        defer { kv.close() }
        XCTAssertEqual(try kv.trimTombstones(before: 6), 1)
        XCTAssertEqual(try kv.trimFloor(account: "a"), 2)
    }

    private func written(_ o: KeyValueStore.WriteOutcome) -> KeyValueStore.Entry? {
        if case .written(let e) = o { return e }
        XCTFail("expected a write, got \(o)")
        return nil
    }
}

/// A key-value file as servers wrote it before the first-sign-in import and the tombstone trim
/// (no `origin`, `trimmed*`, tombstone index or move records), holding `rows`.
private func makeFileFromBeforeTheImport(_ path: String, rows: String) throws {
    let c = try Connection(path: path, readOnly: false, vfs: nil, busyTimeoutMS: 5000)
    defer { c.close() }
    try c.exec("""
        CREATE TABLE ubq_kv(account TEXT NOT NULL, key TEXT NOT NULL, value BLOB NOT NULL, version INTEGER NOT NULL, seq INTEGER NOT NULL,
            deleted INTEGER NOT NULL, author TEXT NOT NULL, updated_ms INTEGER NOT NULL, PRIMARY KEY(account, key)) WITHOUT ROWID;
        CREATE TABLE ubq_kv_accounts(account TEXT PRIMARY KEY, seq INTEGER NOT NULL, keys INTEGER NOT NULL, bytes INTEGER NOT NULL) WITHOUT ROWID;
        """ + rows)
}
