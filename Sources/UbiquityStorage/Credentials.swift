import Crypto
import Foundation
import Synchronization

/// Accounts' API keys and device sessions, and the operator key (docs/accounts.md), in their own
/// database `<root>/credentials.sqlite` — the catalog stays about stores — plus the operator key
/// file `<root>/operator.key` (mode 0600), written on first start.
///
/// Secrets are random values shown once (256 bits; session tokens 128, `SessionToken`); only
/// their SHA-256 is stored. A slow KDF buys nothing here: it defends guessable secrets
/// (passwords) against offline guessing, and a 2^128 space cannot be searched whatever the hash
/// costs — while a fast hash keeps per-call authentication cheap. Every record is also kept in
/// memory, so resolving a session on a call is one hash and one dictionary lookup under a lock,
/// no SQL.
public final class Credentials: Sendable {
    /// What a key's sessions may do.
    public enum Scope: Sendable, Hashable {
        case readWrite, readOnly
        /// Read-write, on the store of this name only.
        case store(String)
    }

    public struct AccountRecord: Sendable, Equatable {
        public var id: String
        public var displayName: String
        public var createdAt: Double
    }

    public struct KeyRecord: Sendable, Equatable {
        public var id: String
        public var account: String
        public var scope: Scope
        public var label: String
        public var createdAt: Double
        public var revoked: Bool
        var hash: [UInt8]
    }

    public struct SessionRecord: Sendable, Equatable {
        /// The token's SHA-256, hex: the session's identity in memory and on disk.
        public var id: String
        public var account: String
        public var keyID: String
        public var deviceID: String
        public var scope: Scope
        public var expiresAt: Double
        public var revoked: Bool
    }

    /// What a presented session token is.
    public enum Resolution: Sendable, Equatable {
        case valid(SessionRecord), expired(SessionRecord), revoked(SessionRecord), unknown
    }

    struct State {
        var conn: Connection?
        /// `Credentials.epoch`: moved by every change of `inactive`, `keys` and `sessions` but
        /// the insertion of a new session (`add(session:)`), so no change that could end a
        /// token's session is missed, whichever code path makes it.
        let epoch: Epoch
        var accounts: [String: AccountRecord] = [:]
        /// Accounts not `active` (Credentials+Lifecycle.swift): their keys do not verify and
        /// they get no session.
        var inactive: [String: AccountState] = [:] { didSet { epoch.advance() } }
        var keys: [String: KeyRecord] = [:] { didSet { epoch.advance() } }
        var sessions: [String: SessionRecord] = [:] { didSet { if !addingSession { epoch.advance() } } }
        /// True only inside `add(session:)`.
        var addingSession = false
        /// Devices working in local stores, by device ID (`Credentials+Local.swift`).
        var localDevices: [String: LocalDevice] = [:]
        var signInsSincePurge = 0

        /// Records a new session without moving the epoch: a token that was not there before
        /// resolves to no memo, so adding one changes no memo's answer (and sign-ins, frequent
        /// on a busy server, would otherwise empty every connection's memo).
        mutating func add(session r: SessionRecord) {
            guard sessions[r.id] == nil else { sessions[r.id] = r; return }  // a replacement moves it
            addingSession = true
            defer { addingSession = false }
            sessions[r.id] = r
        }
    }
    let state: GuardedState<State>
    private let epochCounter: Epoch

    /// Counts the changes that can make a presented session token resolve differently: sign-out,
    /// key revocation, archive and delete, the purge of ended sessions (any change of sessions,
    /// keys or account states but a new session). It moves under the credentials lock, before the
    /// call making the change answers; read without the lock, it tells a per-connection memo of
    /// an earlier resolution (UbiquityServices' SessionMemo) whether it may still be trusted.
    public var epoch: UInt64 { epochCounter.value }

    /// An atomic counter (read on every call, without the lock).
    final class Epoch: Sendable {
        private let count = Atomic<UInt64>(0)
        var value: UInt64 { count.load(ordering: .sequentiallyConsistent) }
        func advance() { count.add(1, ordering: .sequentiallyConsistent) }
    }
    private let operatorKeyHash: [UInt8]
    /// Where the operator key file is.
    public let operatorKeyPath: String

    /// Ended sessions are kept this long past their expiry so a late call still learns why its
    /// token stopped working (SESSION_EXPIRED / SESSION_REVOKED rather than a bare "not valid").
    public static let endedSessionMemorySeconds: Double = 7 * 86_400
    /// How often (in sign-ins) long-ended sessions are dropped; also at every start.
    let purgeEverySignIns: Int

    /// Opens (creating if needed) the credentials database and the operator key file in `root`.
    public init(root: String, purgeEverySignIns: Int = 1024) throws {
        self.purgeEverySignIns = purgeEverySignIns
        let epochCounter = Epoch()
        self.epochCounter = epochCounter
        operatorKeyPath = root + "/operator.key"
        operatorKeyHash = SHA256.hash(data: Array(try Self.operatorKey(at: operatorKeyPath).utf8)).bytes
        let c = try Connection(path: root + "/credentials.sqlite", readOnly: false, vfs: nil, busyTimeoutMS: 5000)
        var s = State(conn: c, epoch: epochCounter)
        do {
            try c.exec("PRAGMA journal_mode=WAL")
            try c.exec("PRAGMA synchronous=FULL")
            // rarely written and small: every deleted row is zeroed, so nothing of a deleted
            // account stays in a free page (DeleteAccount)
            try c.exec("PRAGMA secure_delete=ON")
            // a kill between a deletion's commit and its checkpoint left the zeroed pages only in
            // the WAL and the old ones in the file: copy them in now (Connection.erasing)
            _ = c.checkpoint(.truncate)
            try c.exec("""
                CREATE TABLE IF NOT EXISTS ubq_accounts(id TEXT PRIMARY KEY, display_name TEXT NOT NULL, created_at REAL NOT NULL);
                CREATE TABLE IF NOT EXISTS ubq_api_keys(id TEXT PRIMARY KEY, account TEXT NOT NULL, hash BLOB NOT NULL,
                    scope TEXT NOT NULL, store_name TEXT NOT NULL, label TEXT NOT NULL, created_at REAL NOT NULL,
                    revoked INTEGER NOT NULL DEFAULT 0);
                CREATE TABLE IF NOT EXISTS ubq_sessions(id TEXT PRIMARY KEY, account TEXT NOT NULL, key_id TEXT NOT NULL,
                    device_id TEXT NOT NULL, expires_at REAL NOT NULL, revoked INTEGER NOT NULL DEFAULT 0);
                """ + Self.localTablesSQL)
            try Self.addStateColumn(c)
            try Self.addImportStoresColumn(c)
            try c.run("DELETE FROM ubq_sessions WHERE expires_at < ?", [.real(Date().timeIntervalSince1970 - Self.endedSessionMemorySeconds)])
            try c.query("SELECT id, display_name, created_at, state FROM ubq_accounts") { st in
                s.accounts[st.text(0)] = AccountRecord(id: st.text(0), displayName: st.text(1), createdAt: Self.real(st.value(2)))
                // an unknown state (a newer server's) serves nothing rather than everything
                let state = AccountState(rawValue: st.text(3)) ?? .archived
                if state != .active { s.inactive[st.text(0)] = state }
            }
            try c.query("SELECT id, account, hash, scope, store_name, label, created_at, revoked FROM ubq_api_keys") { st in
                let hash: [UInt8] = if case .blob(let b) = st.value(2) { b } else { [] }
                s.keys[st.text(0)] = KeyRecord(id: st.text(0), account: st.text(1), scope: Self.scope(st.text(3), store: st.text(4)),
                                               label: st.text(5), createdAt: Self.real(st.value(6)), revoked: st.int(7) != 0, hash: hash)
            }
            try c.query("SELECT id, account, key_id, device_id, expires_at, revoked FROM ubq_sessions") { st in
                let key = st.text(2)
                s.sessions[st.text(0)] = SessionRecord(id: st.text(0), account: st.text(1), keyID: key, deviceID: st.text(3),
                                                       scope: key.isEmpty ? .readWrite : s.keys[key]?.scope ?? .readOnly, expiresAt: Self.real(st.value(4)),
                                                       revoked: st.int(5) != 0)
            }
            try Self.loadLocalDevices(c, into: &s)
        } catch { c.close(); throw error }
        c.releaseThread()
        state = GuardedState(s)
    }

    public func close() { state.withLock { $0.conn?.adoptThread(); $0.conn?.close(); $0.conn = nil } }

    func withConnection<T>(_ body: (Connection, inout State) throws -> T) throws -> T {
        try state.withLock { s in
            guard let c = s.conn else { throw StorageError(.storeClosed, "credentials database is closed") }
            c.adoptThread()
            defer { c.releaseThread() }
            return try body(c, &s)
        }
    }

    /// Copies accounts and API keys into a new file for a backup (VACUUM INTO, under the lock),
    /// without sessions: a session is a device's short-lived sign-in, and restoring it would
    /// bring back sessions revoked or ended after the backup was taken; a restored server's
    /// clients sign in again with their API keys, which are in the copy. The operator key file
    /// is not copied either: a restored server writes a new one on its first start.
    public func backup(to destination: String) throws {
        try withConnection { c, _ in try c.vacuumInto(destination) }
        let copy = try Connection(path: destination, readOnly: false, vfs: nil, busyTimeoutMS: 5000)
        defer { copy.close() }
        try copy.exec("PRAGMA secure_delete=ON")  // no session hash left in a free page
        try copy.exec("DELETE FROM ubq_sessions")
    }

    // MARK: operator key

    /// True if `presented` is the operator key (compared as hashes, in constant time).
    public func isOperatorKey(_ presented: String) -> Bool {
        Self.constantTimeEqual(SHA256.hash(data: Array(presented.utf8)).bytes, operatorKeyHash)
    }

    /// Reads the operator key file, writing a new key (mode 0600) if there is none.
    private static func operatorKey(at path: String) throws -> String {
        if let text = try? String(contentsOfFile: path, encoding: .utf8) {
            let key = text.trimmingCharacters(in: .whitespacesAndNewlines)
            guard !key.isEmpty else { throw StorageError(.io, "operator key file \(path) is empty: remove it to have a new key written") }
            return key
        }
        let key = "ubo_" + randomText()
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw StorageError(.io, "cannot create operator key file \(path): errno \(errno)") }
        defer { Glibc.close(fd) }
        let bytes = Array((key + "\n").utf8)
        guard write(fd, bytes, bytes.count) == bytes.count, fsync(fd) == 0 else {
            throw StorageError(.io, "cannot write operator key file \(path): errno \(errno)")
        }
        return key
    }

    // MARK: accounts

    /// Records an account (its ID is the caller's: server-generated, or "default").
    public func addAccount(id: String, displayName: String) throws -> AccountRecord {
        try withConnection { c, s in
            if let a = s.accounts[id] { return a }
            let a = AccountRecord(id: id, displayName: displayName, createdAt: Date().timeIntervalSince1970)
            try c.run("INSERT INTO ubq_accounts(id, display_name, created_at) VALUES (?, ?, ?)",
                      [.text(id), .text(displayName), .real(a.createdAt)])
            s.accounts[id] = a
            return a
        }
    }

    /// An account by ID; nil if there is none or it is being deleted (a tombstone is invisible).
    public func account(_ id: String) -> AccountRecord? {
        state.withLock { s in s.accounts[id].flatMap { (s.inactive[id]?.visible ?? true) ? $0 : nil } }
    }
    /// Every visible account, by ID.
    /// Up to `limit` listed accounts whose ID sorts after `after` (nil: from the first), in ID order.
    public func accounts(after: String?, limit: Int) -> [AccountRecord] {
        state.withLock { s in
            s.accounts.values.filter { a in (after.map { a.id > $0 } ?? true) && (s.inactive[a.id]?.visible ?? true) }
                .sorted { $0.id < $1.id }.prefix(limit).map { $0 }
        }
    }

    // MARK: API keys

    /// A new key for `account`: its record and its secret (`ubk_<id>.<secret>`, shown once).
    public func createKey(account: String, scope: Scope, label: String) throws -> (KeyRecord, secret: String) {
        let id = Self.randomHex(8)
        let secret = "ubk_\(id).\(Self.randomText())"
        let r = KeyRecord(id: id, account: account, scope: scope, label: label, createdAt: Date().timeIntervalSince1970,
                          revoked: false, hash: SHA256.hash(data: Array(secret.utf8)).bytes)
        let (kind, store) = Self.columns(scope)
        try withConnection { c, s in
            try c.run("INSERT INTO ubq_api_keys(id, account, hash, scope, store_name, label, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                      [.text(id), .text(account), .blob(r.hash), .text(kind), .text(store), .text(label), .real(r.createdAt)])
            s.keys[id] = r
        }
        return (r, secret)
    }

    public func key(_ id: String) -> KeyRecord? { state.withLock { $0.keys[id] } }

    /// Revokes a key and its sessions; returns the sessions it ended (nil: no such key).
    public func revokeKey(_ id: String) throws -> [SessionRecord]? {
        try withConnection { c, s in
            guard s.keys[id] != nil else { return nil }
            try c.run("BEGIN IMMEDIATE")
            do {
                try c.run("UPDATE ubq_api_keys SET revoked = 1 WHERE id = ?", [.text(id)])
                try c.run("UPDATE ubq_sessions SET revoked = 1 WHERE key_id = ?", [.text(id)])
                try c.run("COMMIT")
            } catch { try? c.run("ROLLBACK"); throw error }
            s.keys[id]?.revoked = true
            var ended: [SessionRecord] = []
            for (sid, r) in s.sessions where r.keyID == id && !r.revoked {
                s.sessions[sid]?.revoked = true
                ended.append(r)
            }
            return ended
        }
    }

    /// The key a presented secret names if the secret is right and the key is not revoked. The
    /// key ID in the secret finds the record; the secret's hash is compared in constant time.
    public func verifyKey(_ secret: String) -> KeyRecord? {
        guard let id = Self.keyID(ofSecret: secret) else { return nil }
        let presented = SHA256.hash(data: Array(secret.utf8)).bytes
        return state.withLock { s in
            guard let k = s.keys[id], Self.constantTimeEqual(presented, k.hash), !k.revoked, s.inactive[k.account] == nil else { return nil }
            return k
        }
    }

    /// The key ID part of an API key secret (`ubk_<16 hex>.<secret>`), nil if it has not that form.
    public static func keyID(ofSecret secret: String) -> String? {
        guard secret.hasPrefix("ubk_"), let dot = secret.firstIndex(of: ".") else { return nil }
        let id = secret[secret.index(secret.startIndex, offsetBy: 4)..<dot]
        guard id.count == 16, id.allSatisfy({ $0.isHexDigit }) else { return nil }
        return String(id)
    }

    // MARK: sessions

    /// A new session for a verified key: its record and its bearer token (shown once).
    public func createSession(key: KeyRecord, deviceID: String, lifetime: Double) throws -> (SessionRecord, token: String) {
        let token = SessionToken.mint()
        let r = SessionRecord(id: Self.sessionID(token: token), account: key.account, keyID: key.id, deviceID: deviceID,
                              scope: key.scope, expiresAt: Date().timeIntervalSince1970 + lifetime, revoked: false)
        try withConnection { c, s in
            // archived or deleted between verifyKey and here: no session may outlive that
            if s.inactive[key.account] != nil { throw StorageError(.notFound, "the account of key \(key.id) is not active") }
            try c.run("INSERT INTO ubq_sessions(id, account, key_id, device_id, expires_at) VALUES (?, ?, ?, ?, ?)",
                      [.text(r.id), .text(r.account), .text(r.keyID), .text(deviceID), .real(r.expiresAt)])
            s.add(session: r)
            // every sign-in adds a session: forget long-ended ones now and then, so a server that
            // runs for months holds only the sessions of the last `endedSessionMemorySeconds`
            s.signInsSincePurge += 1
            if s.signInsSincePurge >= purgeEverySignIns {
                s.signInsSincePurge = 0
                let horizon = Date().timeIntervalSince1970 - Self.endedSessionMemorySeconds
                try c.run("DELETE FROM ubq_sessions WHERE expires_at < ?", [.real(horizon)])
                s.sessions = s.sessions.filter { $0.value.expiresAt >= horizon }
            }
        }
        return (r, token)
    }

    /// A session by its token (memory only: this runs on every call).
    public func resolve(token: String, now: Double) -> Resolution {
        let id = Self.sessionID(token: token)
        // (no session of an archived or deleting account is here: beginTransition removes them
        // and createSession refuses them, both under this lock)
        guard let r = state.withLock({ $0.sessions[id] }) else { return .unknown }
        if r.revoked { return .revoked(r) }
        if r.expiresAt <= now { return .expired(r) }
        return .valid(r)
    }

    /// Revokes one session; returns it if it was live.
    public func revokeSession(id: String) throws -> SessionRecord? {
        try withConnection { c, s in
            guard let r = s.sessions[id], !r.revoked else { return nil }
            try c.run("UPDATE ubq_sessions SET revoked = 1 WHERE id = ?", [.text(id)])
            s.sessions[id]?.revoked = true
            return r
        }
    }

    /// Live sessions whose expiry has passed (the caller ends their streams and contexts).
    public func expiredSessions(now: Double, since: Double) -> [SessionRecord] {
        state.withLock { s in s.sessions.values.filter { !$0.revoked && $0.expiresAt <= now && $0.expiresAt > since } }
    }

    /// The session ID (hex SHA-256) of a token.
    /// Computed with no byte array (each costs a generic-metadata lookup beside its allocation,
    /// ~1,000 instructions: callgrind, docs/benchmarks.md "What authentication costs"): the
    /// token's own bytes are hashed and the hex written into the string's storage.
    public static func sessionID(token: String) -> String {
        var t = token
        var h = SHA256()
        t.withUTF8 { h.update(bufferPointer: UnsafeRawBufferPointer($0)) }
        return h.finalize().hex
    }

    // MARK: helpers

    /// Compares two digests without an early exit, so timing tells nothing of where they differ.
    /// The stored side is a BLOB read back from SQLite, so this compares bytes rather than relying
    /// on `SHA256Digest`'s own constant-time `==`.
    public static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var d: UInt8 = 0
        for i in 0..<a.count { d |= a[i] ^ b[i] }
        return d == 0
    }

    /// `bytes` random bytes (the system CSPRNG: getrandom on Linux), base64url without padding:
    /// 43 characters for the default 256 bits of keys and device secrets.
    static func randomText(bytes count: Int = 32) -> String {
        var g = SystemRandomNumberGenerator()
        let bytes = (0..<count).map { _ in UInt8.random(in: .min ... .max, using: &g) }
        return Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    static func randomHex(_ bytes: Int) -> String {
        var g = SystemRandomNumberGenerator()
        return (0..<bytes).map { _ in UInt8.random(in: .min ... .max, using: &g) }.withUnsafeBytes { lowerHex($0) }
    }

    static func real(_ v: SQLValue) -> Double { if case .real(let d) = v { d } else { 0 } }

    private static func columns(_ scope: Scope) -> (String, String) {
        switch scope {
        case .readWrite: ("read_write", "")
        case .readOnly: ("read_only", "")
        case .store(let name): ("store", name)
        }
    }

    private static func scope(_ kind: String, store: String) -> Scope {
        switch kind {
        case "read_write": .readWrite
        case "store": .store(store)
        default: .readOnly  // an unknown kind (a newer server's) grants the least
        }
    }
}
