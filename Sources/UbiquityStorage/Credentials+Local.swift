import Crypto
import Foundation

/// Devices that work in local (fallback) stores before they sign in, and the jobs that import
/// those stores into an account on first sign-in (docs/accounts.md "Local stores").
///
/// A device registers its ID once and gets a **device secret** (`ubd_` + 256 random bits, shown
/// once, kept as SHA-256): knowing a device ID is not enough to read its data. Its stores belong
/// to a server-generated pseudo-account `local-<uuid>` — never the device ID, which is client
/// text and must not name a folder (SPEC §4.8) — so every account check applies unchanged:
/// another device's local store is NOT_FOUND like any other account's.
///
/// An import job is a row in `ubq_import_jobs`, written before anything is imported; its state
/// (`ImportJobState`) moves forward only, each step committed before the next begins, so a
/// restart finds where it stood and finishes.
extension Credentials {
    /// A device registered for local stores.
    public struct LocalDevice: Sendable, Equatable {
        public var deviceID: String
        /// The pseudo-account owning its stores (`local-<uuid>`).
        public var account: String
        var secretHash: [UInt8]
    }

    /// One first-sign-in import, as recorded.
    public struct ImportJob: Sendable, Equatable {
        public var id: String
        public var deviceID: String
        /// The local pseudo-account whose stores are imported.
        public var localAccount: String
        /// The account signed in to.
        public var account: String
        public var state: ImportJobState
        var secretHash: [UInt8]
    }

    static let localTablesSQL = """
        CREATE TABLE IF NOT EXISTS ubq_local_devices(device_id TEXT PRIMARY KEY, account TEXT NOT NULL UNIQUE,
            secret_hash BLOB NOT NULL, created_at REAL NOT NULL);
        CREATE TABLE IF NOT EXISTS ubq_import_jobs(id TEXT PRIMARY KEY, device_id TEXT NOT NULL, local_account TEXT NOT NULL,
            account TEXT NOT NULL, secret_hash BLOB NOT NULL, state TEXT NOT NULL, inserted INTEGER NOT NULL DEFAULT 0,
            merged INTEGER NOT NULL DEFAULT 0, deduplicated INTEGER NOT NULL DEFAULT 0, created_at REAL NOT NULL,
            stores TEXT NOT NULL DEFAULT '', kv_moved INTEGER NOT NULL DEFAULT 0, kv_kept INTEGER NOT NULL DEFAULT 0);
        """

    /// Adds `ubq_import_jobs.stores` to a database from before the import announced its DID_CHANGE
    /// itself (`ImportJobState.removed`).
    static func addImportStoresColumn(_ c: Connection) throws {
        // (the hardened connection's authorizer refuses pragma_table_info: probe the column instead)
        do { try c.query("SELECT stores FROM ubq_import_jobs LIMIT 1") { _ in } } catch {
            try c.exec("ALTER TABLE ubq_import_jobs ADD COLUMN stores TEXT NOT NULL DEFAULT ''")
        }
        // and the key-value counts (`ImportJobCounts.keyValuesMoved` / `keyValuesKept`)
        for column in ["kv_moved", "kv_kept"] {
            do { try c.query("SELECT \(column) FROM ubq_import_jobs LIMIT 1") { _ in } } catch {
                try c.exec("ALTER TABLE ubq_import_jobs ADD COLUMN \(column) INTEGER NOT NULL DEFAULT 0")
            }
        }
    }

    static func loadLocalDevices(_ c: Connection, into s: inout State) throws {
        try c.query("SELECT device_id, account, secret_hash FROM ubq_local_devices") { st in
            let hash: [UInt8] = if case .blob(let b) = st.value(2) { b } else { [] }
            s.localDevices[st.text(0)] = LocalDevice(deviceID: st.text(0), account: st.text(1), secretHash: hash)
        }
    }

    /// The device's registration, if it works in local stores.
    public func localDevice(_ deviceID: String) -> LocalDevice? { state.withLock { $0.localDevices[deviceID] } }

    /// True if `secret` is the registered device's (constant time).
    public func checkLocalSecret(_ deviceID: String, _ secret: String) -> Bool {
        guard let d = localDevice(deviceID) else { return false }
        return Self.constantTimeEqual(SHA256.hash(data: Array(secret.utf8)).bytes, d.secretHash)
    }

    /// What `localSession` found.
    public enum LocalSessionOutcome: Sendable, Equatable {
        /// A session; `newSecret` is set when this call registered the device.
        case session(SessionRecord, token: String, newSecret: String?)
        /// The device is registered and the secret is missing or wrong.
        case badSecret
        /// The device's local stores are being imported into an account.
        case importing
    }

    /// A local session for `deviceID`: registers the device (a new secret) if it is not yet, else
    /// checks `secret` in constant time.
    public func localSession(deviceID: String, secret: String, lifetime: Double) throws -> LocalSessionOutcome {
        let token = SessionToken.mint()
        let now = Date().timeIntervalSince1970
        return try withConnection { c, s in
            var newSecret: String?
            let device: LocalDevice
            if let d = s.localDevices[deviceID] {
                guard !secret.isEmpty, Self.constantTimeEqual(SHA256.hash(data: Array(secret.utf8)).bytes, d.secretHash) else { return .badSecret }
                device = d
            } else {
                let fresh = "ubd_" + Self.randomText()
                device = LocalDevice(deviceID: deviceID, account: "local-" + UUID().uuidString.lowercased(), secretHash: SHA256.hash(data: Array(fresh.utf8)).bytes)
                try c.run("INSERT INTO ubq_local_devices(device_id, account, secret_hash, created_at) VALUES (?, ?, ?, ?)",
                          [.text(deviceID), .text(device.account), .blob(device.secretHash), .real(now)])
                s.localDevices[deviceID] = device
                newSecret = fresh
            }
            if case .integer = try c.scalar("SELECT 1 FROM ubq_import_jobs WHERE device_id = ? AND state <> 'done'", [.text(deviceID)]) {
                return .importing
            }
            // key_id '' marks a local session (no API key; read-write on its own stores)
            let r = SessionRecord(id: Self.sessionID(token: token), account: device.account, keyID: "", deviceID: deviceID,
                                  scope: .readWrite, expiresAt: now + lifetime, revoked: false)
            try c.run("INSERT INTO ubq_sessions(id, account, key_id, device_id, expires_at) VALUES (?, ?, '', ?, ?)",
                      [.text(r.id), .text(r.account), .text(deviceID), .real(r.expiresAt)])
            s.sessions[r.id] = r
            return .session(r, token: token, newSecret: newSecret)
        }
    }

    /// What `beginImport` found.
    public enum BeginImport: Sendable, Equatable {
        /// The device has no local stores (never registered, or imported already).
        case nothingToImport
        /// The secret does not match the device's.
        case badSecret
        /// A job for this device that is already recorded (pending or done: a retried SignIn).
        case existing(ImportJob)
        /// A new job, recorded; `endedSessions` are the device's local sessions it revoked.
        case started(ImportJob, endedSessions: [SessionRecord])
    }

    /// Records an import job for the device's local stores into `account` and, in the same
    /// transaction, revokes the device's local sessions: nothing writes to the local stores
    /// after the job exists, so the import reads them complete.
    public func beginImport(deviceID: String, secret: String, account: String) throws -> BeginImport {
        let presented = SHA256.hash(data: Array(secret.utf8)).bytes
        return try withConnection { c, s in
            if let job = try Self.jobs(c, "WHERE device_id = ? ORDER BY created_at DESC LIMIT 1", [.text(deviceID)]).first,
               !job.state.isDone || s.localDevices[deviceID] == nil {
                guard Self.constantTimeEqual(presented, job.secretHash) else { return .badSecret }
                // a done job answers a retried SignIn into the same account only
                return job.state.isDone && job.account != account ? .nothingToImport : .existing(job)
            }
            guard let d = s.localDevices[deviceID] else { return .nothingToImport }
            guard Self.constantTimeEqual(presented, d.secretHash) else { return .badSecret }
            let job = ImportJob(id: UUID().uuidString.lowercased(), deviceID: deviceID, localAccount: d.account, account: account,
                                state: .importing, secretHash: d.secretHash)
            try c.run("BEGIN IMMEDIATE")
            do {
                try c.run("DELETE FROM ubq_import_jobs WHERE device_id = ?", [.text(deviceID)])  // an older, done job
                try c.run("""
                    INSERT INTO ubq_import_jobs(id, device_id, local_account, account, secret_hash, state, created_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?)
                    """, [.text(job.id), .text(deviceID), .text(d.account), .text(account), .blob(d.secretHash),
                          .text(job.state.column), .real(Date().timeIntervalSince1970)])
                try c.run("UPDATE ubq_sessions SET revoked = 1 WHERE account = ? AND key_id = ''", [.text(d.account)])
                try c.run("COMMIT")
            } catch { try? c.run("ROLLBACK"); throw error }
            var ended: [SessionRecord] = []
            for (sid, r) in s.sessions where r.account == d.account && !r.revoked {
                s.sessions[sid]?.revoked = true
                ended.append(r)
            }
            return .started(job, endedSessions: ended)
        }
    }

    /// Records a job's next state. Reaching `.done` also forgets the device's registration (its
    /// local stores are gone; the same device ID starts afresh if it works locally again).
    public func advance(_ job: ImportJob, to state: ImportJobState) throws {
        try withConnection { c, s in
            let counts = state.counts ?? ImportJobCounts()
            try c.run("BEGIN IMMEDIATE")
            do {
                try c.run("""
                    UPDATE ubq_import_jobs SET state = ?, inserted = ?, merged = ?, deduplicated = ?, stores = ?, kv_moved = ?, kv_kept = ?
                    WHERE id = ?
                    """, [.text(state.column), .integer(counts.inserted), .integer(counts.merged), .integer(counts.deduplicated),
                          .text(state.storesColumn), .integer(counts.keyValuesMoved), .integer(counts.keyValuesKept), .text(job.id)])
                if state.isDone {
                    try c.run("DELETE FROM ubq_local_devices WHERE device_id = ? AND account = ?", [.text(job.deviceID), .text(job.localAccount)])
                }
                try c.run("COMMIT")
            } catch { try? c.run("ROLLBACK"); throw error }
            if state.isDone, s.localDevices[job.deviceID]?.account == job.localAccount { s.localDevices[job.deviceID] = nil }
        }
    }

    /// Forgets a job that failed for a reason a retry would not change (the local stores stay).
    public func abandon(_ job: ImportJob) throws {
        try withConnection { c, _ in try c.run("DELETE FROM ubq_import_jobs WHERE id = ?", [.text(job.id)]) }
    }

    /// Jobs not yet done (a restart finishes them before serving).
    public func pendingImports() throws -> [ImportJob] {
        try withConnection { c, _ in try Self.jobs(c, "WHERE state <> 'done' ORDER BY created_at", []) }
    }

    private static func jobs(_ c: Connection, _ whereSQL: String, _ args: [SQLValue]) throws -> [ImportJob] {
        var out: [ImportJob] = []
        let columns = "id, device_id, local_account, account, secret_hash, state, inserted, merged, deduplicated, stores, kv_moved, kv_kept"
        try c.query("SELECT \(columns) FROM ubq_import_jobs " + whereSQL, args) { st in
            let hash: [UInt8] = if case .blob(let b) = st.value(4) { b } else { [] }
            let counts = ImportJobCounts(inserted: st.int(6), merged: st.int(7), deduplicated: st.int(8),
                                         keyValuesMoved: st.int(10), keyValuesKept: st.int(11))
            out.append(ImportJob(id: st.text(0), deviceID: st.text(1), localAccount: st.text(2), account: st.text(3),
                                 state: ImportJobState(column: st.text(5), counts: counts, stores: st.text(9)), secretHash: hash))
        }
        return out
    }
}

extension Credentials.SessionRecord {
    /// A session of a device working in its local stores (`Credentials.localSession`): no API key.
    public var isLocal: Bool { keyID.isEmpty }
}
