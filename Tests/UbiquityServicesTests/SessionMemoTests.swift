import Foundation
import XCTest
import UbiquityGRPC
import UbiquityStorage
import UbiquityTestSupport
@testable import UbiquityServices

/// The per-connection session memo (SessionMemo.swift): alone, as a value, and behind
/// `Authenticator.account` with real credentials in a temporary directory, where every change
/// that ends a session must reach the very next call of the connection that memoised it.
final class SessionMemoTests: XCTestCase {
    private let header = "Bearer ubs_" + String(repeating: "A", count: 43)
    private let account = Account(id: "a", session: "s", device: "d", scope: .readWrite, expiresAt: 1_000)

    func testAnswersTheSameValueAtTheSameEpochBeforeExpiry() {
        let memo = SessionMemo(header: header, account: account, epoch: 7)
        XCTAssertTrue(memo.matches(header, epoch: 7, now: 999))
        XCTAssertTrue(memo.matches(String(decoding: Array(header.utf8), as: UTF8.self), epoch: 7, now: 0),
                      "equal bytes in another string's storage")
    }

    func testAnythingElseResolvesInFull() {
        let memo = SessionMemo(header: header, account: account, epoch: 7)
        XCTAssertFalse(memo.matches(header, epoch: 8, now: 0), "credentials changed since")
        XCTAssertFalse(memo.matches(header, epoch: 6, now: 0))
        XCTAssertFalse(memo.matches(header, epoch: 7, now: 1_000), "expired at expiresAt")
        XCTAssertFalse(memo.matches(header, epoch: 7, now: 5_000))
        var bytes = Array(header.utf8)
        for i in bytes.indices {
            bytes[i] ^= 0x01
            XCTAssertFalse(memo.matches(String(decoding: bytes, as: UTF8.self), epoch: 7, now: 0), "byte \(i) differs")
            bytes[i] ^= 0x01
        }
        for other in ["", String(header.dropLast()), header + "A", "bearer " + header.dropFirst(7)] {
            XCTAssertFalse(memo.matches(other, epoch: 7, now: 0), other)
        }
    }

    func testEqualIsByteEquality() {
        XCTAssertTrue(SessionMemo.equal("", ""))
        XCTAssertTrue(SessionMemo.equal("abc", "abc"))
        XCTAssertFalse(SessionMemo.equal("abc", "abd"))
        XCTAssertFalse(SessionMemo.equal("abc", "ab"))
        XCTAssertFalse(SessionMemo.equal("e\u{301}", "\u{e9}"), "canonically equivalent, different bytes")
        let long = String(repeating: "0123456789", count: 5) + "abc"  // words and a tail
        XCTAssertTrue(SessionMemo.equal(long, String(long.utf8.map { Character(UnicodeScalar($0)) })))
        for i in 0..<long.utf8.count {
            var bytes = Array(long.utf8)
            bytes[i] ^= 0x20
            XCTAssertFalse(SessionMemo.equal(long, String(decoding: bytes, as: UTF8.self)), "byte \(i)")
        }
    }

    // MARK: behind Authenticator.account

    private var dir: TemporaryDirectory!
    override func setUpWithError() throws { dir = try TemporaryDirectory(prefix: "session-memo") }
    override func tearDown() { dir.remove() }

    private struct Signed {
        let auth: Authenticator
        let key: Credentials.KeyRecord
        let session: Credentials.SessionRecord
        let metadata: Metadata
    }

    private func signIn(_ c: Credentials, account: String = "a", scope: Credentials.Scope = .readWrite, lifetime: Double = 3600) throws -> Signed {
        if c.account(account) == nil { _ = try c.addAccount(id: account, displayName: account) }
        let (key, _) = try c.createKey(account: account, scope: scope, label: "")
        let (session, token) = try c.createSession(key: key, deviceID: "d", lifetime: lifetime)
        return Signed(auth: Authenticator(credentials: c, sessionLifetime: lifetime), key: key, session: session,
                      metadata: Metadata(dictionaryLiteral: ("authorization", "Bearer " + token)))
    }

    private func reason(_ body: () throws -> Account) -> ErrorReason? {
        do { _ = try body(); return nil } catch let e as ServiceError { return e.reason } catch { return nil }
    }

    /// How many memos the connection keeps.
    private func memos(_ connection: ConnectionLocal) -> Int { (connection.value as? SessionMemoTable.Box)?.count ?? 0 }

    func testACallLeavesAMemoThatASignInElsewhereKeeps() throws {
        let c = try Credentials(root: dir.path)
        defer { c.close() }
        let s = try signIn(c)
        let connection = ConnectionLocal()
        let first = try s.auth.account(metadata: s.metadata, access: .write, connection: connection)
        XCTAssertEqual(first.session, s.session.id)
        XCTAssertEqual(memos(connection), 1)
        let epoch = c.epoch
        _ = try c.createSession(key: s.key, deviceID: "d2", lifetime: 3600)
        XCTAssertEqual(c.epoch, epoch, "a new session changes no token's answer")
        XCTAssertEqual(try s.auth.account(metadata: s.metadata, access: .read, connection: connection), first)
    }

    /// A call leaves a memo; `end` ends the session some way; the connection's next call answers `reason`.
    private func assertNextCall(_ reason: ErrorReason, after end: (Credentials, Signed) throws -> Void,
                                _ message: String = "", line: UInt = #line) throws {
        let c = try Credentials(root: dir.path)
        defer { c.close() }
        let s = try signIn(c)
        let connection = ConnectionLocal()
        _ = try s.auth.account(metadata: s.metadata, access: .read, connection: connection)
        XCTAssertEqual(memos(connection), 1, line: line)
        try end(c, s)
        XCTAssertEqual(self.reason { try s.auth.account(metadata: s.metadata, access: .read, connection: connection) }, reason,
                       message, line: line)
    }

    func testSignOutReachesTheNextCallOfTheSameConnection() throws {
        try assertNextCall(.sessionRevoked) { c, s in _ = try c.revokeSession(id: s.session.id) }
    }

    func testKeyRevocationReachesTheNextCallOfTheSameConnection() throws {
        try assertNextCall(.sessionRevoked) { c, s in _ = try c.revokeKey(s.key.id) }
    }

    func testArchiveReachesTheNextCallOfTheSameConnection() throws {
        try assertNextCall(.badCredentials, after: { c, _ in _ = try c.beginTransition(.archive, account: "a") },
                           "an archived account's session answers as an unknown token")
    }

    func testExpiryReachesTheNextCallOfTheSameConnection() throws {
        let c = try Credentials(root: dir.path)
        defer { c.close() }
        // expired by the time of the second call: the memo's expiry is the session's
        let s = try signIn(c, lifetime: 1)
        let connection = ConnectionLocal()
        let first = try s.auth.account(metadata: s.metadata, access: .read, connection: connection)
        XCTAssertTrue(pollUntil(seconds: 30) { Date().timeIntervalSince1970 > first.expiresAt })
        XCTAssertEqual(reason { try s.auth.account(metadata: s.metadata, access: .read, connection: connection) }, .sessionExpired)
    }

    func testAReadOnlyMemoStillRefusesWrites() throws {
        let c = try Credentials(root: dir.path)
        defer { c.close() }
        let s = try signIn(c, scope: .readOnly)
        let connection = ConnectionLocal()
        _ = try s.auth.account(metadata: s.metadata, access: .read, connection: connection)
        XCTAssertEqual(memos(connection), 1)
        XCTAssertEqual(reason { try s.auth.account(metadata: s.metadata, access: .write, connection: connection) }, .scopeExceeded)
    }

    func testTwoSessionsTakingTurnsOnOneConnectionEachActForTheirOwnAccount() throws {
        let c = try Credentials(root: dir.path)
        defer { c.close() }
        let a = try signIn(c, account: "a"), b = try signIn(c, account: "b")
        let connection = ConnectionLocal()
        for _ in 0..<3 {
            XCTAssertEqual(try a.auth.account(metadata: a.metadata, access: .read, connection: connection).id, "a")
            XCTAssertEqual(try b.auth.account(metadata: b.metadata, access: .read, connection: connection).id, "b")
        }
        XCTAssertEqual(memos(connection), 2, "one memo per session the connection carries")
        // a value one byte off the memoised one is resolved, not matched
        var bytes = Array(b.metadata["authorization"]!.utf8)
        bytes[bytes.count - 1] ^= 0x01
        XCTAssertEqual(reason { try b.auth.account(metadata: Metadata(dictionaryLiteral: ("authorization", String(decoding: bytes, as: UTF8.self))), access: .read,
                                                  connection: connection) }, .badCredentials)
        XCTAssertEqual(reason { try b.auth.account(metadata: Metadata(), access: .read, connection: connection) }, .missingCredentials)
    }

    func testASignOutAmongSeveralSessionsOfOneConnectionReachesOnlyItsOwnNextCall() throws {
        let c = try Credentials(root: dir.path)
        defer { c.close() }
        let signed = try (0..<5).map { try signIn(c, account: "a\($0)") }
        let connection = ConnectionLocal()
        for _ in 0..<2 {
            for (i, s) in signed.enumerated() {
                XCTAssertEqual(try s.auth.account(metadata: s.metadata, access: .read, connection: connection).id, "a\(i)")
            }
        }
        XCTAssertEqual(memos(connection), 5)
        _ = try c.revokeSession(id: signed[2].session.id)
        XCTAssertEqual(reason { try signed[2].auth.account(metadata: signed[2].metadata, access: .read, connection: connection) }, .sessionRevoked)
        for (i, s) in signed.enumerated() where i != 2 {
            XCTAssertEqual(try s.auth.account(metadata: s.metadata, access: .read, connection: connection).id, "a\(i)")
        }
        XCTAssertEqual(memos(connection), 4, "the others memoised anew at the new epoch; the revoked one not")
        XCTAssertEqual(reason { try signed[2].auth.account(metadata: signed[2].metadata, access: .read, connection: connection) }, .sessionRevoked)
    }
}
