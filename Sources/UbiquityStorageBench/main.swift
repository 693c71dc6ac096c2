// Storage-engine micro-benchmark: engine vs raw SQLite anchors, side by side, same data, one run.
// Build and run (release):
//   swift build -c release --scratch-path .build-storage-rel --product UbiquityStorageBench
//   .build-storage-rel/release/UbiquityStorageBench [rows] [dir]
// Environment: UBQ_BENCH_ONLY=W1|W2|W4|W6|KV (one section), UBQ_BENCH_SAVES (W2's saves, 200),
// UBQ_BENCH_WAL_COALESCING=off, UBQ_BENCH_RETENTION=off. KV (the key-value tombstone trim,
// KeyValueTrimBench.swift) runs only when asked, on its own data: [rows] is then its accounts.
import CSQLite
import Foundation
import UbiquityStorage

let rows = CommandLine.arguments.count > 1 ? Int(CommandLine.arguments[1])! : 1_000_000
let dir = CommandLine.arguments.count > 2 ? CommandLine.arguments[2] : NSTemporaryDirectory() + "ubq-bench-\(getpid())"
try? FileManager.default.removeItem(atPath: dir)
try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(atPath: dir) }

struct LCG { var s: UInt64; mutating func next(_ n: Int) -> Int { s = s &* 6364136223846793005 &+ 1442695040888963407; return Int((s >> 33) % UInt64(n)) } }
func seconds(_ d: Duration) -> Double { Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18 }
func fmt(_ x: Double) -> String { String(format: x >= 100 ? "%.0f" : "%.2f", x) }
func line(_ name: String, _ ops: Double, unit: String = "ops/s") { print(name.padding(toLength: 58, withPad: " ", startingAt: 0), fmt(ops), unit) }

let model = ModelDefinition(entities: [
    EntityDefinition(name: "Row", attributes: [
        AttributeDefinition(name: "name", type: .string),
        AttributeDefinition(name: "age", type: .int32),
        AttributeDefinition(name: "score", type: .double),
    ], indexes: [["age"]]),
])

// MARK: raw SQLite anchor (C API, WAL, prepared statements; the ANCHORS.md schema)
final class Raw {
    var db: OpaquePointer?
    init(_ path: String, sync: String) {
        sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nil)
        exec("PRAGMA journal_mode=WAL"); exec("PRAGMA synchronous=\(sync)")
        exec("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, name TEXT, age INTEGER, score REAL)")
        exec("CREATE INDEX IF NOT EXISTS t_age ON t(age)")
    }
    func exec(_ s: String) { precondition(sqlite3_exec(db, s, nil, nil, nil) == SQLITE_OK, String(cString: sqlite3_errmsg(db))) }
    func prepare(_ s: String) -> OpaquePointer { var st: OpaquePointer?; precondition(sqlite3_prepare_v2(db, s, -1, &st, nil) == SQLITE_OK); return st! }
    func insert(_ st: OpaquePointer, id: Int64?, name: String, age: Int, score: Double) {
        if let id { sqlite3_bind_int64(st, 1, id) } else { sqlite3_bind_null(st, 1) }
        sqlite3_bind_text(st, 2, name, -1, ubq_sqlite_transient()); sqlite3_bind_int64(st, 3, Int64(age)); sqlite3_bind_double(st, 4, score)
        precondition(sqlite3_step(st) == SQLITE_DONE); sqlite3_reset(st)
    }
}

func values(_ i: Int) -> (String, Int, Double) { ("name-\(i)", (i &* 7919) % 100, Double(i) * 0.5) }

if ProcessInfo.processInfo.environment["UBQ_BENCH_ONLY"] == "KV" {
    print("UbiquityStorageBench KV, SQLite \(String(cString: sqlite3_libversion()))")
    try keyValueTrimBench(dir: dir, accounts: rows)
    try? FileManager.default.removeItem(atPath: dir)
    exit(0)
}

print("UbiquityStorageBench: \(rows) rows, synchronous=FULL for writes, \(ProcessInfo.processInfo.activeProcessorCount) cores, SQLite \(String(cString: sqlite3_libversion()))")

// Load both databases with the same rows.
let raw = Raw(dir + "/raw.sqlite", sync: "OFF")
do {
    raw.exec("BEGIN")
    let st = raw.prepare("INSERT INTO t (id, name, age, score) VALUES (?, ?, ?, ?)")
    for i in 1...rows { let (n, a, s) = values(i); raw.insert(st, id: Int64(i), name: n, age: a, score: s) }
    sqlite3_finalize(st)
    raw.exec("COMMIT")
}
var cfg = StorageConfiguration()
cfg.synchronous = .off
cfg.logger.logLevel = .warning
let sid = UUID()
var store = try Store.open(path: dir + "/engine.sqlite", id: sid, model: model, configuration: cfg)
var ids: [ObjectID] = []
ids.reserveCapacity(rows)
let loadStart = ContinuousClock.now
var next = 1
while next <= rows {
    let n = min(10_000, rows - next + 1)
    let r = try await store.batchInsert(entity: "Row", objects: (next..<next + n).map { i in let (a, b, c) = values(i); return ["name": .string(a), "age": .int(Int64(b)), "score": .double(c)] })
    for k in 0..<n { ids.append(r.permanentIDs["b\(k)"]!) }
    next += n
}
print("load: \(rows) rows through batchInsert in \(fmt(seconds(ContinuousClock.now - loadStart))) s")
_ = try await store.checkpoint(truncate: true)
store.close()
var fullCfg = cfg
fullCfg.synchronous = .full
// UBQ_BENCH_WAL_COALESCING=off: the writer without WAL write coalescing (its A/B, docs/benchmarks.md).
fullCfg.walWriteCoalescing = ProcessInfo.processInfo.environment["UBQ_BENCH_WAL_COALESCING"] != "off"
print("WAL write coalescing: \(fullCfg.walWriteCoalescing ? "on" : "off")")
// UBQ_BENCH_RETENTION=off: no readable window and no history age / size limits (GC then does
// none of the retention work: the A/B of that work, docs/storage.md "History retention").
if ProcessInfo.processInfo.environment["UBQ_BENCH_RETENTION"] == "off" {
    fullCfg.minimumReadableWindowSeconds = 0
    fullCfg.historyRetentionSeconds = nil
    fullCfg.historyRetentionBytes = nil
}
print("retention work: \(fullCfg.historyRetentionBytes == nil ? "off" : "on")")
store = try Store.open(path: dir + "/engine.sqlite", id: sid, configuration: fullCfg)

// MARK: 1. read by ID
let only = ProcessInfo.processInfo.environment["UBQ_BENCH_ONLY"]
let reads = 200_000
if only == nil || only == "W1" {
print("\n== W1 point read by ID (random IDs) ==")
    let st = raw.prepare("SELECT id, name, age, score FROM t WHERE id = ?")
    var rng = LCG(s: 1)
    var sink = 0
    let t0 = ContinuousClock.now
    for _ in 0..<reads {
        sqlite3_bind_int64(st, 1, Int64(rng.next(rows) + 1))
        if sqlite3_step(st) == SQLITE_ROW { sink &+= Int(sqlite3_column_int64(st, 2)) }
        sqlite3_reset(st)
    }
    let rawRate = Double(reads) / seconds(ContinuousClock.now - t0)
    sqlite3_finalize(st)
    line("raw SQLite point select, 1 thread (anchor)", rawRate)

    var rng2 = LCG(s: 1)
    let t1 = ContinuousClock.now
    for _ in 0..<reads / 4 { let o = try await store.objects([ids[rng2.next(rows)]]); sink &+= o.count }
    let engSeq = Double(reads / 4) / seconds(ContinuousClock.now - t1)
    line("engine objects([id]), one request at a time", engSeq)

    let t2 = ContinuousClock.now
    let tasks = 16
    let per = reads / tasks
    let s = store
    let idsCopy = ids
    try await withThrowingTaskGroup(of: Void.self) { g in
        for k in 0..<tasks {
            g.addTask {
                var r = LCG(s: UInt64(k + 7))
                for _ in 0..<per { _ = try await s.objects([idsCopy[r.next(idsCopy.count)]]) }
            }
        }
        try await g.waitForAll()
    }
    let engPar = Double(per * tasks) / seconds(ContinuousClock.now - t2)
    line("engine objects([id]), 16 concurrent requests, 2 readers", engPar)
    let t3 = ContinuousClock.now
    var r3 = LCG(s: 3)
    for _ in 0..<(reads / 100) { _ = try await s.objects((0..<100).map { _ in idsCopy[r3.next(idsCopy.count)] }) }
    let engBatch = Double(reads) / seconds(ContinuousClock.now - t3)
    line("engine objects(100 ids) per request (objects/s)", engBatch)
    print("ratio engine/raw: sequential \(fmt(engSeq / rawRate)), concurrent \(fmt(engPar / rawRate)), batched \(fmt(engBatch / rawRate))  (sink \(sink % 10))")
}

// MARK: 2. 100-object save vs raw 100-row insert transaction, synchronous=FULL
let saves = Int(ProcessInfo.processInfo.environment["UBQ_BENCH_SAVES"] ?? "") ?? 200
if only == nil || only == "W2" {
print("\n== W2 100-object save vs raw 100-row insert transaction (synchronous=FULL, age index) ==")
    let rawFull = Raw(dir + "/raw-full.sqlite", sync: "FULL")
    let st = rawFull.prepare("INSERT INTO t (id, name, age, score) VALUES (?, ?, ?, ?)")
    let t0 = ContinuousClock.now
    for k in 0..<saves {
        rawFull.exec("BEGIN")
        for j in 0..<100 { let (n, a, s) = values(k * 100 + j); rawFull.insert(st, id: nil, name: n, age: a, score: s) }
        rawFull.exec("COMMIT")
    }
    let rawRows = Double(saves * 100) / seconds(ContinuousClock.now - t0)
    sqlite3_finalize(st)
    line("raw SQLite 100-row insert transactions (anchor, rows/s)", rawRows)

    func req(_ k: Int) -> SaveRequest {
        var r = SaveRequest()
        r.inserts = (0..<100).map { j in let (n, a, s) = values(k * 100 + j); return InsertOperation(temporaryID: "t\(j)", entity: "Row", values: ["name": .string(n), "age": .int(Int64(a)), "score": .double(s)]) }
        return r
    }
    let s = store
    let t1 = ContinuousClock.now
    for k in 0..<saves { _ = try await s.save(req(k)) }
    let engRows = Double(saves * 100) / seconds(ContinuousClock.now - t1)
    line("engine save(100 inserts), one at a time (rows/s)", engRows)
    let t2 = ContinuousClock.now
    try await withThrowingTaskGroup(of: Void.self) { g in
        for w in 0..<4 { g.addTask { for k in 0..<(saves / 4) { _ = try await s.save(req(10_000 + w * 1000 + k)) } } }
        try await g.waitForAll()
    }
    let engGroup = Double(saves * 100) / seconds(ContinuousClock.now - t2)
    line("engine save(100 inserts), 4 concurrent (group commit, rows/s)", engGroup)
    print("ratio engine/raw: sequential \(fmt(engRows / rawRows)), concurrent \(fmt(engGroup / rawRows))")
}

// MARK: 3. read at an old pinned generation vs current
if only == nil || only == "W4" {
print("\n== W4-style read by ID at an old pinned generation vs current ==")
    let s = store
    let pin = try s.pin(lease: 3600)
    // give the rows we read several newer versions after the pin
    let hot = Array(ids.prefix(20_000))
    for round in 0..<3 {
        for chunk in stride(from: 0, to: hot.count, by: 1000) {
            var r = SaveRequest()
            r.updates = hot[chunk..<min(chunk + 1000, hot.count)].map { UpdateOperation(objectID: $0, values: ["score": .double(Double(round))]) }
            _ = try await s.save(r)
        }
    }
    let n = 50_000
    var rc = LCG(s: 9)
    let t0 = ContinuousClock.now
    for _ in 0..<n { _ = try await s.objects([hot[rc.next(hot.count)]], at: .current) }
    let cur = Double(n) / seconds(ContinuousClock.now - t0)
    var rp = LCG(s: 9)
    let t1 = ContinuousClock.now
    for _ in 0..<n { _ = try await s.objects([hot[rp.next(hot.count)]], at: .token(pin.token)) }
    let pinned = Double(n) / seconds(ContinuousClock.now - t1)
    // and once more at current, to see run-to-run noise
    var rc2 = LCG(s: 9)
    let t2 = ContinuousClock.now
    for _ in 0..<n { _ = try await s.objects([hot[rc2.next(hot.count)]], at: .current) }
    let cur2 = Double(n) / seconds(ContinuousClock.now - t2)
    line("read at current (4 versions per row), 1 request at a time", cur)
    line("read at pinned generation (oldest of 4 versions)", pinned)
    line("read at current again (noise check)", cur2)
    print("pinned cost / current cost: \(fmt(((cur + cur2) / 2) / pinned))x (goal <= 1.2x)")
    s.unpin(pin)
}

// MARK: 4. delete-heavy saves and the tombstone index's share of them
if only == nil || only == "W6" {
print("\n== W6 100-object delete saves (synchronous=FULL) and the tombstone index rows they write ==")
    let s = store
    let victims = Array(ids.suffix(saves * 100))
    let t0 = ContinuousClock.now
    for k in 0..<saves {
        var r = SaveRequest()
        r.deletes = victims[(k * 100)..<((k + 1) * 100)].map { DeleteOperation(objectID: $0) }
        _ = try await s.save(r)
    }
    let engineSave = seconds(ContinuousClock.now - t0) / Double(saves)
    line("engine save(100 deletes), one at a time (ms per save)", engineSave * 1000, unit: "ms")
    // The index's own work: the same rows into a table of the same schema, in one transaction
    // (no commit per save: what a save adds to its transaction, without the fsync it shares).
    let rawT = Raw(dir + "/tombstones.sqlite", sync: "FULL")
    rawT.exec("CREATE TABLE ubq_tombstones (generation INTEGER NOT NULL, pk INTEGER NOT NULL, entity TEXT NOT NULL, deleted_at INTEGER NOT NULL, PRIMARY KEY (generation, pk)) WITHOUT ROWID")
    let st = rawT.prepare("INSERT INTO ubq_tombstones (generation, pk, entity, deleted_at) VALUES (?, ?, ?, ?)")
    let at = Int64(Date().timeIntervalSince1970)
    let t1 = ContinuousClock.now
    rawT.exec("BEGIN")
    for k in 0..<saves {
        for j in 0..<100 {
            sqlite3_bind_int64(st, 1, Int64(k + 1)); sqlite3_bind_int64(st, 2, victims[k * 100 + j].pk)
            sqlite3_bind_text(st, 3, "Row", -1, ubq_sqlite_transient()); sqlite3_bind_int64(st, 4, at)
            precondition(sqlite3_step(st) == SQLITE_DONE); sqlite3_reset(st)
        }
    }
    rawT.exec("COMMIT")
    let rows100 = seconds(ContinuousClock.now - t1) / Double(saves)
    sqlite3_finalize(st)
    line("100 tombstone rows, raw SQLite (ms per save's worth)", rows100 * 1000, unit: "ms")
    print("tombstone rows' share of a 100-delete save: \(fmt(100 * rows100 / engineSave))%")
}
store.close()
