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
        XCTAssertFalse(db.contains(String(token.dropFirst(SessionToken.prefix.count))), "the session token is not on disk")

        c = try Credentials(root: dir.path)
        defer { c.close() }
        XCTAssertEqual(c.resolve(token: token, now: Date().timeIntervalSince1970), .valid(session))
        XCTAssertEqual(session.scope, .store("notes"))
        XCTAssertEqual(c.resolve(token: token, now: session.expiresAt), .expired(session))
        XCTAssertEqual(c.resolve(token: "ubs_" + String(repeating: "x", count: 43), now: 0), .unknown)
        XCTAssertNil(c.verifyKey(secret + "x"))
        XCTAssertNil(c.verifyKey("ubk_0000000000000000.abc"))
    }

    /// Sessions get 128-bit tokens (`SessionToken`): `ubs_` and 22 base64url characters, each
    /// token different; device (local) sessions too.
    func testNewSessionTokensAre128BitsOfBase64url() throws {
        let c = try Credentials(root: dir.path)
        defer { c.close() }
        let (key, _) = try c.createKey(account: "a", scope: .readWrite, label: "")
        let alphabet = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        var seen = Set<String>()
        for i in 0..<50 {
            let (session, token) = try c.createSession(key: key, deviceID: "d\(i)", lifetime: 3600)
            XCTAssertTrue(token.hasPrefix("ubs_"), token)
            let secret = token.dropFirst(4)
            XCTAssertEqual(secret.count, 22, token)
            XCTAssertTrue(secret.allSatisfy { alphabet.contains($0) }, token)
            XCTAssertEqual(session.id, Credentials.sessionID(token: token))
            seen.insert(token)
        }
        XCTAssertEqual(seen.count, 50)
        guard case .session(_, let local, _) = try c.localSession(deviceID: "laptop", secret: "", lifetime: 3600) else {
            return XCTFail("no local session")
        }
        XCTAssertEqual(local.count, 4 + 22, local)
        // the last 2 of 128 bits are the 22nd character's low bits (base64url of 16 bytes), so
        // its first 20 characters carry 120 of them: the CSPRNG's, not a constant or a counter
        XCTAssertEqual(Set(seen.map { $0.dropFirst(4).prefix(3) }).count, 50, "random, not sequential")
    }

    /// An upgrade signs no device out: a session an older server stored for a 256-bit token
    /// (43 characters) resolves with that token after a reopen, as the new ones do, until it expires.
    func testSessionsOfTheOldTokenFormResolveAfterAnUpgrade() throws {
        var c = try Credentials(root: dir.path)
        let (key, _) = try c.createKey(account: "a", scope: .readWrite, label: "")
        let old = "ubs_" + Credentials.randomText()  // an older server's session token
        XCTAssertEqual(old.count, 4 + 43)
        let expires = Date().timeIntervalSince1970 + 3600
        // the row exactly as the older server wrote it (createSession then hashed 43 characters)
        try c.withConnection { conn, _ in
            try conn.run("INSERT INTO ubq_sessions(id, account, key_id, device_id, expires_at) VALUES (?, ?, ?, ?, ?)",
                         [.text(Credentials.sessionID(token: old)), .text("a"), .text(key.id), .text("phone"), .real(expires)])
        }
        c.close()
        c = try Credentials(root: dir.path)
        defer { c.close() }
        guard case .valid(let r) = c.resolve(token: old, now: Date().timeIntervalSince1970) else { return XCTFail("old token refused") }
        XCTAssertEqual(r.deviceID, "phone")
        XCTAssertEqual(r.account, "a")
        guard case .expired = c.resolve(token: old, now: expires) else { return XCTFail("old token outlives its session") }
        let (_, new) = try c.createSession(key: key, deviceID: "phone", lifetime: 3600)
        guard case .valid = c.resolve(token: new, now: Date().timeIntervalSince1970) else { return XCTFail("new token refused") }
        XCTAssertEqual(c.resolve(token: String(old.dropLast()), now: 0), .unknown)
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
