import CSQLite
import Foundation
import UbiquityStorage

// The key-value tombstone trim (UBQ_BENCH_ONLY=KV; docs/benchmarks.md "Key-value tombstone
// trim"): `KeyValueStore.trimTombstones` on a table of `accounts` × 10 entries, one tombstone per
// account, trimming 100, then 1,000, 10,000 and the rest — beside the full-scan statements it
// replaced, run on a copy of the same file without the tombstone index (the anchor, same run).
// The tombstone of account i was deleted at time i, so each cutoff trims exactly the count asked.

private func rawExec(_ db: OpaquePointer?, _ sql: String) {
    precondition(sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK, String(cString: sqlite3_errmsg(db)))
}

private func loadKeyValues(_ path: String, accounts: Int) {
    var db: OpaquePointer?
    sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, nil)
    defer { sqlite3_close(db) }
    rawExec(db, "PRAGMA synchronous=OFF")
    rawExec(db, "BEGIN")
    var kvSt: OpaquePointer?, acctSt: OpaquePointer?
    sqlite3_prepare_v2(db, "INSERT INTO ubq_kv(account, key, value, version, seq, deleted, author, updated_ms) VALUES (?, ?, ?, ?, ?, ?, 'bench', ?)", -1, &kvSt, nil)
    sqlite3_prepare_v2(db, "INSERT INTO ubq_kv_accounts(account, seq, keys, bytes) VALUES (?, 10, 9, ?)", -1, &acctSt, nil)
    let value = [UInt8](repeating: 7, count: 32)
    for a in 1...accounts {
        let account = String(format: "acct-%07d", a)
        for k in 0..<10 {
            let deleted = k == 0
            sqlite3_bind_text(kvSt, 1, account, -1, ubq_sqlite_transient())
            sqlite3_bind_text(kvSt, 2, "settings.key\(k)", -1, ubq_sqlite_transient())
            _ = value.withUnsafeBytes { sqlite3_bind_blob(kvSt, 3, $0.baseAddress, Int32(deleted ? 0 : value.count), ubq_sqlite_transient()) }
            sqlite3_bind_int64(kvSt, 4, deleted ? 2 : 1)
            sqlite3_bind_int64(kvSt, 5, Int64(k + 1))
            sqlite3_bind_int64(kvSt, 6, deleted ? 1 : 0)
            // live entries are recent; the tombstone of account a was made at time a
            sqlite3_bind_int64(kvSt, 7, deleted ? Int64(a) : 1_000_000_000_000)
            precondition(sqlite3_step(kvSt) == SQLITE_DONE, String(cString: sqlite3_errmsg(db)))
            sqlite3_reset(kvSt)
        }
        sqlite3_bind_text(acctSt, 1, account, -1, ubq_sqlite_transient())
        sqlite3_bind_int64(acctSt, 2, Int64(9 * (14 + value.count)))
        precondition(sqlite3_step(acctSt) == SQLITE_DONE)
        sqlite3_reset(acctSt)
    }
    sqlite3_finalize(kvSt); sqlite3_finalize(acctSt)
    rawExec(db, "COMMIT")
    rawExec(db, "PRAGMA wal_checkpoint(TRUNCATE)")
}

/// The trim before the tombstone index (one full pass per statement), as the anchor.
private func fullScanTrim(_ db: OpaquePointer?, before cutoff: Int64) -> Int {
    rawExec(db, "BEGIN IMMEDIATE")
    for sql in ["""
        UPDATE ubq_kv_accounts SET trimmed = max(trimmed, (SELECT max(seq) FROM ubq_kv k
            WHERE k.account = ubq_kv_accounts.account AND k.deleted = 1 AND k.updated_ms < ?1)),
          trimmed_version = max(trimmed_version, (SELECT max(version) FROM ubq_kv k
            WHERE k.account = ubq_kv_accounts.account AND k.deleted = 1 AND k.updated_ms < ?1))
        WHERE EXISTS (SELECT 1 FROM ubq_kv k WHERE k.account = ubq_kv_accounts.account AND k.deleted = 1 AND k.updated_ms < ?1)
        """, "DELETE FROM ubq_kv WHERE deleted = 1 AND updated_ms < ?1"] {
        var st: OpaquePointer?
        precondition(sqlite3_prepare_v2(db, sql, -1, &st, nil) == SQLITE_OK, String(cString: sqlite3_errmsg(db)))
        sqlite3_bind_int64(st, 1, cutoff)
        precondition(sqlite3_step(st) == SQLITE_DONE)
        sqlite3_finalize(st)
    }
    let removed = Int(sqlite3_changes(db))
    rawExec(db, "COMMIT")
    return removed
}

func keyValueTrimBench(dir: String, accounts: Int) throws {
    let path = dir + "/keyvalue.sqlite", anchorPath = dir + "/keyvalue-fullscan.sqlite"
    try KeyValueStore(path: path).close()  // its tables and indexes; filled raw below
    let loadStart = ContinuousClock.now
    loadKeyValues(path, accounts: accounts)
    try FileManager.default.copyItem(atPath: path, toPath: anchorPath)
    var anchor: OpaquePointer?
    sqlite3_open_v2(anchorPath, &anchor, SQLITE_OPEN_READWRITE, nil)
    defer { sqlite3_close(anchor) }
    rawExec(anchor, "PRAGMA journal_mode=WAL"); rawExec(anchor, "PRAGMA synchronous=FULL")
    rawExec(anchor, "DROP INDEX ubq_kv_tombstones")
    print("KV: \(accounts) accounts × 10 entries (\(accounts) tombstones) loaded in \(fmt(seconds(ContinuousClock.now - loadStart))) s")
    print("\n== KV tombstone trim: indexed (KeyValueStore.trimTombstones) vs the full scan it replaced ==")
    let kv = try KeyValueStore(path: path)
    defer { kv.close() }
    var cutoff: Int64 = 1
    for n in [100, 1_000, 10_000, accounts - 11_100] where n > 0 {
        cutoff += Int64(n)
        let t0 = ContinuousClock.now
        let removed = try kv.trimTombstones(before: cutoff)
        let indexed = seconds(ContinuousClock.now - t0)
        let t1 = ContinuousClock.now
        let anchorRemoved = fullScanTrim(anchor, before: cutoff)
        let scanned = seconds(ContinuousClock.now - t1)
        precondition(removed == n && anchorRemoved == n, "trimmed \(removed) / \(anchorRemoved), expected \(n)")
        line("trim \(n) of \(accounts * 10 - Int(cutoff) + 1 + n) entries: indexed ms", indexed * 1000, unit: "ms")
        line("  the same trim, full scan (before) ms", scanned * 1000, unit: "ms")
        line("  ratio full scan / indexed", scanned / max(indexed, 1e-9), unit: "x")
    }
}
