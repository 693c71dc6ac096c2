import XCTest
@testable import UbiquityServices

/// A connection's table of session memos (SessionMemoTable.swift), alone: what answers, what does
/// not, and what goes when it is full. (Behind `Authenticator.account`: SessionMemoTests.)
final class SessionMemoTableTests: XCTestCase {
    /// A session's `authorization` value as issued now (`ubs_` + 22 characters), distinct per `i`.
    private func header(_ i: Int) -> String { "Bearer ubs_" + String(String(repeating: "0", count: 22) + String(i)).suffix(22) }
    private func account(_ i: Int, expiresAt: Double = 1_000) -> Account {
        Account(id: "a\(i)", session: "s\(i)", device: "d", scope: .readWrite, expiresAt: expiresAt)
    }
    private func memo(_ i: Int, epoch: UInt64 = 7, expiresAt: Double = 1_000) -> SessionMemo {
        SessionMemo(header: header(i), account: account(i, expiresAt: expiresAt), epoch: epoch)
    }
    private func store(_ table: inout SessionMemoTable, _ memo: SessionMemo) {
        table.store(memo, key: SessionMemoTable.key(memo.header)!)
    }
    /// Which account the table answers for `header(i)`, if any.
    private func answer(_ table: inout SessionMemoTable, _ i: Int, epoch: UInt64 = 7, now: Double = 0) -> String? {
        table.account(for: header(i), epoch: epoch, now: now)?.id
    }

    func testEachSessionOfTheConnectionIsAnsweredForItsOwnAccount() {
        var table = SessionMemoTable()
        XCTAssertNil(answer(&table, 0), "empty")
        for i in 0..<10 { store(&table, memo(i)) }
        XCTAssertEqual(table.count, 10)
        for _ in 0..<2 {
            for i in [3, 0, 9, 9, 5, 1] { XCTAssertEqual(answer(&table, i), "a\(i)") }
        }
        // equal bytes in another string's storage (the transport makes a new String per call)
        XCTAssertEqual(table.account(for: String(decoding: Array(header(4).utf8), as: UTF8.self), epoch: 7, now: 0)?.id, "a4")
    }

    func testAValueNotStoredIsNotAnswered() {
        var table = SessionMemoTable()
        for i in 0..<10 { store(&table, memo(i)) }
        XCTAssertNil(answer(&table, 10))
        for other in ["", "Bearer", String(header(3).dropLast()), header(3) + "0", "bearer " + header(3).dropFirst(7)] {
            XCTAssertNil(table.account(for: other, epoch: 7, now: 0), other)
        }
    }

    func testAValueDifferingInOneByteIsNotAnswered() {
        var table = SessionMemoTable()
        for i in 0..<10 { store(&table, memo(i)) }
        for i in [9, 4] {  // the last stored (tried first, without the hash) and one found by its hash
            var bytes = Array(header(i).utf8)
            for b in bytes.indices {  // (0x20: no other stored value is one such flip away)
                bytes[b] ^= 0x20
                XCTAssertNil(table.account(for: String(decoding: bytes, as: UTF8.self), epoch: 7, now: 0), "session \(i), byte \(b)")
                bytes[b] ^= 0x20
            }
        }
    }

    func testAnotherValueInTheSlotOfAValuesHashIsNotAnswered() {
        var table = SessionMemoTable()
        store(&table, memo(1))
        // as if header(2) hashed like header(1): it replaces it in that slot
        table.store(memo(2), key: SessionMemoTable.key(header(1))!)
        XCTAssertEqual(table.count, 1)
        XCTAssertNil(answer(&table, 1), "confirmed by its bytes, not by its hash")
    }

    func testANewerEpochEmptiesTheTableAndAnOlderOneIsNotStored() {
        var table = SessionMemoTable()
        for i in 0..<10 { store(&table, memo(i, epoch: 7)) }
        XCTAssertNil(answer(&table, 3, epoch: 8), "credentials changed since")
        XCTAssertNil(answer(&table, 9, epoch: 8), "the last stored too")
        XCTAssertNil(answer(&table, 3, epoch: 6))
        store(&table, memo(3, epoch: 8))
        XCTAssertEqual(table.epoch, 8)
        XCTAssertEqual(table.count, 1, "memos of epoch 7 can never answer again")
        XCTAssertEqual(answer(&table, 3, epoch: 8), "a3")
        XCTAssertNil(answer(&table, 4, epoch: 8))
        // resolved before the change the table has seen (a slower call of the same connection)
        store(&table, memo(4, epoch: 7))
        XCTAssertEqual(table.count, 1)
        XCTAssertNil(answer(&table, 4, epoch: 8))
        XCTAssertNil(answer(&table, 4, epoch: 7))
    }

    func testAnExpiredSessionIsNotAnsweredAndTheOthersAre() {
        var table = SessionMemoTable()
        store(&table, memo(1, expiresAt: 100))
        store(&table, memo(2, expiresAt: 1_000))
        XCTAssertEqual(answer(&table, 1, now: 99), "a1")
        XCTAssertNil(answer(&table, 1, now: 100), "expired at expiresAt")
        XCTAssertNil(answer(&table, 1, now: 5_000))
        XCTAssertEqual(answer(&table, 2, now: 100), "a2")
        XCTAssertNil(answer(&table, 2, now: 1_000))
    }

    func testAFullTableEvictsInTheOrderStoredWhenNoneWasAnswered() {
        let n = SessionMemoTable.capacity
        var table = SessionMemoTable()
        for i in 0..<n { store(&table, memo(i)) }
        XCTAssertEqual(table.count, n)
        // a memo is marked when stored (it is the one tried first): the first eviction goes round
        // once clearing the marks, then takes the oldest; the next takes the next oldest
        store(&table, memo(n))
        store(&table, memo(n + 1))
        XCTAssertEqual(table.count, n, "bounded")
        XCTAssertNil(answer(&table, 0))
        XCTAssertNil(answer(&table, 1))
        for i in 2...(n + 1) { XCTAssertEqual(answer(&table, i), "a\(i)") }
    }

    func testAFullTableSparesOnceTheMemosAnsweredSinceTheHandPassed() {
        let n = SessionMemoTable.capacity
        var table = SessionMemoTable()
        for i in 0..<n { store(&table, memo(i)) }
        store(&table, memo(n))  // every mark cleared, slot 0's memo evicted; the hand at slot 1
        XCTAssertNil(answer(&table, 0))
        for i in stride(from: 2, to: n, by: 2) { XCTAssertEqual(answer(&table, i), "a\(i)") }
        // each store passes one answered memo (spared, its mark cleared) and evicts the next
        for i in 1...(n / 2) { store(&table, memo(n + i)) }
        XCTAssertEqual(table.count, n)
        for i in stride(from: 1, to: n, by: 2) { XCTAssertNil(answer(&table, i), "not answered: evicted") }
        for i in stride(from: 2, to: n, by: 2) { XCTAssertEqual(answer(&table, i), "a\(i)", "answered: kept") }
        for i in n...(n + n / 2) { XCTAssertEqual(answer(&table, i), "a\(i)") }

        // every memo answered: a store clears every mark going round once, then evicts where it began
        store(&table, memo(2 * n))
        XCTAssertEqual(table.count, n)
        XCTAssertNil(answer(&table, n), "slot 0's memo, where the hand stood")
        XCTAssertEqual(answer(&table, 2 * n), "a\(2 * n)")
    }

    func testTheMemoAnsweringOverAndOverIsNotTheOneEvicted() {
        let n = SessionMemoTable.capacity
        var table = SessionMemoTable()
        for i in 0..<n { store(&table, memo(i)) }
        store(&table, memo(n))  // every mark cleared; the hand at slot 1, session 1's
        // session 1 answers again and again, first through its hash, then as the last one
        for _ in 0..<5 { XCTAssertEqual(answer(&table, 1), "a1") }
        store(&table, memo(n + 1))
        XCTAssertEqual(answer(&table, 1), "a1", "spared")
        XCTAssertNil(answer(&table, 2), "the next one not answered since")
    }

    func testStoringTheSameValueAgainKeepsOneSlot() {
        var table = SessionMemoTable()
        store(&table, memo(1))
        store(&table, memo(2))
        store(&table, SessionMemo(header: header(1), account: account(1, expiresAt: 2_000), epoch: 7))
        XCTAssertEqual(table.count, 2)
        XCTAssertEqual(answer(&table, 1, now: 1_500), "a1", "the newer resolution answers")
    }
}
