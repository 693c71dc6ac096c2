import Foundation
import XCTest
import UbiquityTestSupport
@testable import UbiquityStorage

/// Keys, sessions and the operator key on disk: hashes only, shown once, surviving a reopen.
final class CredentialsTests: XCTestCase {
    private var dir: TemporaryDirectory!

    override func setUpWithError() throws { dir = try TemporaryDirectory(prefix: "credentials") }
    override func tearDown() { dir.remove() }

    func testOperatorKeyFileIsPrivateAndKept() throws {
        let c = try Credentials(root: dir.path)
        c.close()
        let attrs = try FileManager.default.attributesOfItem(atPath: dir.file("operator.key"))
        XCTAssertEqual((attrs[.posixPermissions] as? NSNumber)?.intValue, 0o600)
        let key = try String(contentsOfFile: dir.file("operator.key"), encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let again = try Credentials(root: dir.path)
        defer { again.close() }
        XCTAssertTrue(again.isOperatorKey(key))
        XCTAssertFalse(again.isOperatorKey(key + "x"))
    }

    /// Session rows are keyed by the token's hex SHA-256: a changed hash would orphan every
    /// stored session. The vector is the standard SHA-256 (Python's hashlib).
    func testSessionIDIsTheTokensHexSHA256() {
        XCTAssertEqual(Credentials.sessionID(token: "ubs_test-token"),
                       "563ec2e573338e1b43cca4e6698942765aa120470b9d5fa2775637998d790aa4")
    }

    func testKeysAndSessionsSurviveAReopenAndOnlyHashesAreStored() throws {
        var c = try Credentials(root: dir.path)
        _ = try c.addAccount(id: "a", displayName: "A")
        let (key, secret) = try c.createKey(account: "a", scope: .store("notes"), label: "")
        XCTAssertEqual(Credentials.keyID(ofSecret: secret), key.id)
        let verified = try XCTUnwrap(c.verifyKey(secret))
        let (session, token) = try c.createSession(key: verified, deviceID: "d", lifetime: 3600)
        c.close()
        let db = try String(decoding: Data(contentsOf: URL(fileURLWithPath: dir.file("credentials.sqlite"))), as: UTF8.self)
            + ((try? String(decoding: Data(contentsOf: URL(fileURLWithPath: dir.file("credentials.sqlite-wal"))), as: UTF8.self)) ?? "")
        XCTAssertFalse(db.contains(secret) || db.contains(String(secret.suffix(43))), "the key's secret is not on disk")
        XCTAssertFalse(db.contains(String(token.suffix(43))), "the session token is not on disk")

        c = try Credentials(root: dir.path)
        defer { c.close() }
        XCTAssertEqual(c.resolve(token: token, now: Date().timeIntervalSince1970), .valid(session))
        XCTAssertEqual(session.scope, .store("notes"))
        XCTAssertEqual(c.resolve(token: token, now: session.expiresAt), .expired(session))
        XCTAssertEqual(c.resolve(token: "ubs_" + String(repeating: "x", count: 43), now: 0), .unknown)
        XCTAssertNil(c.verifyKey(secret + "x"))
        XCTAssertNil(c.verifyKey("ubk_0000000000000000.abc"))
    }

    func testRevokingAKeyEndsItsSessionsAndItsSignIns() throws {
        let c = try Credentials(root: dir.path)
        defer { c.close() }
        let (key, secret) = try c.createKey(account: "a", scope: .readWrite, label: "")
        let (s1, t1) = try c.createSession(key: key, deviceID: "d1", lifetime: 3600)
        let (_, t2) = try c.createSession(key: key, deviceID: "d2", lifetime: 3600)
        let ended = try XCTUnwrap(try c.revokeKey(key.id))
        XCTAssertEqual(ended.count, 2)
        XCTAssertNil(c.verifyKey(secret))
        for t in [t1, t2] {
            guard case .revoked = c.resolve(token: t, now: 0) else { return XCTFail("\(t) not revoked") }
        }
        XCTAssertNil(try c.revokeSession(id: s1.id), "already ended")
        XCTAssertNil(try c.revokeKey("ffffffffffffffff"))
    }

    func testLongEndedSessionsAreForgottenEveryFewSignIns() throws {
        let c = try Credentials(root: dir.path, purgeEverySignIns: 3)
        defer { c.close() }
        let (key, _) = try c.createKey(account: "a", scope: .readWrite, label: "")
        let longAgo = -(Credentials.endedSessionMemorySeconds + 60)
        let (_, old) = try c.createSession(key: key, deviceID: "d", lifetime: longAgo)
        let (_, recent) = try c.createSession(key: key, deviceID: "d", lifetime: -60)
        guard case .expired = c.resolve(token: old, now: Date().timeIntervalSince1970) else { return XCTFail("not yet purged") }
        _ = try c.createSession(key: key, deviceID: "d", lifetime: 3600)  // the third sign-in purges
        XCTAssertEqual(c.resolve(token: old, now: Date().timeIntervalSince1970), .unknown)
        guard case .expired = c.resolve(token: recent, now: Date().timeIntervalSince1970) else { return XCTFail("recently ended: kept") }
    }

    func testConstantTimeEqual() {
        XCTAssertTrue(Credentials.constantTimeEqual([1, 2, 3], [1, 2, 3]))
        XCTAssertFalse(Credentials.constantTimeEqual([1, 2, 3], [1, 2, 4]))
        XCTAssertFalse(Credentials.constantTimeEqual([1, 2], [1, 2, 3]))
    }
}
