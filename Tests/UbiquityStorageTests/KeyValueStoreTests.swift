import Foundation
import XCTest
@testable import UbiquityStorage

/// The quotas' accounting, as pure values.
final class KeyValueQuotasTests: XCTestCase {
    private var quotas: KeyValueQuotas {
        var q = KeyValueQuotas()
        q.maxKeys = 2; q.maxAccountBytes = 20; q.maxKeyBytes = 4; q.maxValueBytes = 10
        return q
    }

    func testUsageCountsKeysAndBothKeyAndValueBytes() {
        let u = KeyValueUsage().setting(keyBytes: 3, oldValueBytes: nil, valueBytes: 5)
        XCTAssertEqual(u, KeyValueUsage(keys: 1, bytes: 8))
        XCTAssertEqual(u.setting(keyBytes: 3, oldValueBytes: 5, valueBytes: 1), KeyValueUsage(keys: 1, bytes: 4))
        XCTAssertEqual(u.deleting(keyBytes: 3, valueBytes: 5), KeyValueUsage())
    }

    func testEachQuotaWithItsNumbers() {
        let q = quotas
        XCTAssertEqual(q.checkKey(bytes: 5)?.quota, .keyBytes)
        XCTAssertNil(q.checkKey(bytes: 4))
        XCTAssertEqual(q.check(usage: KeyValueUsage(), keyBytes: 1, oldValueBytes: nil, valueBytes: 11),
                       .init(quota: .valueBytes, limit: 10, requested: 11, used: 0))
        XCTAssertEqual(q.check(usage: KeyValueUsage(keys: 2, bytes: 4), keyBytes: 1, oldValueBytes: nil, valueBytes: 0),
                       .init(quota: .keys, limit: 2, requested: 3, used: 2))
        // replacing a key's value adds no key
        XCTAssertNil(q.check(usage: KeyValueUsage(keys: 2, bytes: 4), keyBytes: 1, oldValueBytes: 1, valueBytes: 3))
        XCTAssertEqual(q.check(usage: KeyValueUsage(keys: 1, bytes: 12), keyBytes: 2, oldValueBytes: nil, valueBytes: 7),
                       .init(quota: .accountBytes, limit: 20, requested: 21, used: 12))
        XCTAssertNil(q.check(usage: KeyValueUsage(keys: 1, bytes: 12), keyBytes: 2, oldValueBytes: nil, valueBytes: 6))
    }

    func testAnAccountOverALoweredQuotaMayStillShrink() {
        let over = KeyValueUsage(keys: 5, bytes: 50)
        XCTAssertNil(quotas.check(usage: over, keyBytes: 2, oldValueBytes: 8, valueBytes: 1))
        XCTAssertEqual(quotas.check(usage: over, keyBytes: 2, oldValueBytes: 1, valueBytes: 2)?.quota, .accountBytes)
    }
}

/// The key-value database: conditions, quotas, the compacted change log, one account never seeing
/// another's keys, and nothing written by a refused write.
final class KeyValueStoreTests: StorageTestCase, @unchecked Sendable {
    private func open(_ quotas: KeyValueQuotas = KeyValueQuotas()) throws -> KeyValueStore {
        try KeyValueStore(path: dir + "/keyvalue.sqlite", quotas: quotas)
    }

    private func written(_ o: KeyValueStore.WriteOutcome, file: StaticString = #filePath, line: UInt = #line) -> KeyValueStore.Entry? {
        guard case .written(let e) = o else { XCTFail("expected a write, got \(o)", file: file, line: line); return nil }
        return e
    }

    func testVersionsConditionsAndTombstones() throws {
        let kv = try open()
        defer { kv.close() }
        XCTAssertEqual(written(try kv.set(account: "a", key: "k", value: [1], condition: .mustNotExist, author: "d"))?.version, 1)
        XCTAssertEqual(try kv.set(account: "a", key: "k", value: [2], condition: .mustNotExist, author: ""), .conflict(exists: true, version: 1))
        XCTAssertEqual(try kv.set(account: "a", key: "k", value: [2], condition: .version(2), author: ""), .conflict(exists: true, version: 1))
        XCTAssertEqual(try kv.get(account: "a", key: "k")?.value, [1])
        XCTAssertEqual(written(try kv.delete(account: "a", key: "k", condition: .version(1), author: ""))?.version, 2)
        XCTAssertNil(try kv.get(account: "a", key: "k"))
        XCTAssertEqual(try kv.delete(account: "a", key: "k", condition: .none, author: ""), .absent(version: 2, seq: 2))
        XCTAssertEqual(try kv.set(account: "a", key: "k", value: [], condition: .version(2), author: ""), .conflict(exists: false, version: 2))
        XCTAssertEqual(written(try kv.set(account: "a", key: "k", value: [3], condition: .none, author: ""))?.version, 3)
        XCTAssertEqual(try kv.position(account: "a").usage, KeyValueUsage(keys: 1, bytes: 2))
    }

    func testAccountsAreSeparate() throws {
        let kv = try open()
        defer { kv.close() }
        _ = try kv.set(account: "a", key: "k", value: [1], condition: .none, author: "")
        XCTAssertNil(try kv.get(account: "b", key: "k"))
        XCTAssertEqual(try kv.list(account: "b", prefix: "", afterKey: nil, limit: 10).entries, [])
        XCTAssertEqual(try kv.changes(account: "b", after: 0, limit: 10), [])
        XCTAssertEqual(try kv.position(account: "b").seq, 0)
        XCTAssertEqual(written(try kv.set(account: "b", key: "k", value: [2], condition: .mustNotExist, author: ""))?.seq, 1)
    }

    func testARefusedWriteChangesNothing() throws {
        var q = KeyValueQuotas()
        q.maxKeys = 1
        let kv = try open(q)
        defer { kv.close() }
        _ = try kv.set(account: "a", key: "k", value: [1], condition: .none, author: "")
        let before = try kv.position(account: "a")
        guard case .quota(let v) = try kv.set(account: "a", key: "j", value: [], condition: .none, author: "") else { return XCTFail("expected a quota refusal") }
        XCTAssertEqual(v.quota, .keys)
        _ = try kv.set(account: "a", key: "k", value: [9], condition: .version(5), author: "")
        let after = try kv.position(account: "a")
        XCTAssertEqual(after.seq, before.seq)
        XCTAssertEqual(after.usage, before.usage)
        XCTAssertEqual(try kv.get(account: "a", key: "k")?.value, [1])
    }

    func testChangesAreEachKeysLatestStateInChangeOrder() throws {
        let kv = try open()
        defer { kv.close() }
        for (k, v) in [("x", 1), ("y", 2), ("x", 3)] { _ = try kv.set(account: "a", key: k, value: [UInt8(v)], condition: .none, author: "") }
        _ = try kv.delete(account: "a", key: "y", condition: .none, author: "d")
        let all = try kv.changes(account: "a", after: 0, limit: 10)
        XCTAssertEqual(all.map(\.key), ["x", "y"])
        XCTAssertEqual(all.map(\.seq), [3, 4])
        XCTAssertEqual(all.map(\.deleted), [false, true])
        XCTAssertEqual(try kv.changes(account: "a", after: 3, limit: 10).map(\.key), ["y"])
        XCTAssertEqual(try kv.changes(account: "a", after: 0, limit: 1).map(\.key), ["x"])
    }

    func testListIsPrefixBoundedAndPaged() throws {
        let kv = try open()
        defer { kv.close() }
        for k in ["a.1", "a.2", "a.3", "a", "a/", "b.1", "a.\u{e9}"] { _ = try kv.set(account: "acc", key: k, value: [], condition: .none, author: "") }
        _ = try kv.delete(account: "acc", key: "a.2", condition: .none, author: "")
        let p1 = try kv.list(account: "acc", prefix: "a.", afterKey: nil, limit: 2)
        XCTAssertEqual(p1.entries.map(\.key), ["a.1", "a.3"])
        XCTAssertTrue(p1.hasMore)
        let p2 = try kv.list(account: "acc", prefix: "a.", afterKey: "a.3", limit: 2)
        XCTAssertEqual(p2.entries.map(\.key), ["a.\u{e9}"])  // byte order: é (0xC3…) after the digits
        XCTAssertFalse(p2.hasMore)
        XCTAssertEqual(p2.seq, 8)
        XCTAssertEqual(try kv.list(account: "acc", prefix: "", afterKey: nil, limit: 100).entries.count, 6)
    }

    func testRemovingAnAccountRemovesOnlyItsEntries() throws {
        let kv = try open()
        defer { kv.close() }
        for a in ["a", "b"] { _ = try kv.set(account: a, key: "k", value: [1], condition: .none, author: "") }
        _ = try kv.delete(account: "a", key: "k", condition: .none, author: "")
        _ = try kv.set(account: "a", key: "j", value: [2], condition: .none, author: "")
        try kv.removeAccount("a")
        XCTAssertEqual(try kv.changes(account: "a", after: 0, limit: 10), [])
        XCTAssertEqual(try kv.position(account: "a").seq, 0)
        XCTAssertEqual(try kv.position(account: "a").usage, KeyValueUsage())
        XCTAssertEqual(try kv.get(account: "b", key: "k")?.value, [1])
    }

    func testWritesSurviveReopening() throws {
        var kv = try open()
        _ = try kv.set(account: "a", key: "k", value: [7], condition: .none, author: "dev")
        kv.close()
        kv = try open()
        defer { kv.close() }
        let e = try XCTUnwrap(try kv.get(account: "a", key: "k"))
        XCTAssertEqual([e.value, [UInt8(e.version)]], [[7], [1]])
        XCTAssertEqual(e.author, "dev")
        XCTAssertEqual(try kv.position(account: "a").seq, 1)
    }
}
