import Foundation
import XCTest
import UbiquityTestSupport
@testable import UbiquityStorage

/// `Credentials.epoch`: what per-connection session memos (UbiquityServices' SessionMemo) trust.
/// Every change that can make a presented token resolve differently must move it; a sign-in,
/// which only adds a token, must not (else every sign-in anywhere would empty every memo).
final class CredentialsEpochTests: XCTestCase {
    private var dir: TemporaryDirectory!

    override func setUpWithError() throws { dir = try TemporaryDirectory(prefix: "credentials-epoch") }
    override func tearDown() { dir.remove() }

    func testSignInKeepsItAndEveryEndOfASessionMovesIt() throws {
        let c = try Credentials(root: dir.path)
        defer { c.close() }
        _ = try c.addAccount(id: "a", displayName: "A")
        let (key, _) = try c.createKey(account: "a", scope: .readWrite, label: "")
        var epoch = c.epoch
        let (s1, _) = try c.createSession(key: key, deviceID: "d1", lifetime: 3600)
        let (s2, _) = try c.createSession(key: key, deviceID: "d2", lifetime: 3600)
        XCTAssertEqual(c.epoch, epoch, "sign-ins")

        _ = try c.revokeSession(id: s1.id)
        XCTAssertNotEqual(c.epoch, epoch, "sign-out")
        epoch = c.epoch
        XCTAssertNil(try c.revokeSession(id: s1.id))
        _ = try c.revokeKey(key.id)
        XCTAssertNotEqual(c.epoch, epoch, "key revocation")
        XCTAssertEqual(c.resolve(token: "ubs_x", now: 0), .unknown)
        _ = s2

        let (key2, _) = try c.createKey(account: "a", scope: .readWrite, label: "")
        _ = try c.createSession(key: key2, deviceID: "d3", lifetime: 3600)
        epoch = c.epoch
        _ = try c.beginTransition(.archive, account: "a")
        XCTAssertNotEqual(c.epoch, epoch, "archive removes the account's sessions")
    }

    func testForgettingLongEndedSessionsMovesIt() throws {
        let c = try Credentials(root: dir.path, purgeEverySignIns: 2)
        defer { c.close() }
        let (key, _) = try c.createKey(account: "a", scope: .readWrite, label: "")
        // ended long ago: the second sign-in's purge drops it
        _ = try c.createSession(key: key, deviceID: "old", lifetime: -2 * Credentials.endedSessionMemorySeconds)
        let epoch = c.epoch
        _ = try c.createSession(key: key, deviceID: "new", lifetime: 3600)
        XCTAssertNotEqual(c.epoch, epoch)
    }
}
