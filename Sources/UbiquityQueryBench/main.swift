// Query-layer benchmark (SPEC §6 W3/W4 in-process): a predicate fetch — indexed equality, 10
// results, 1,000,000 objects — next to the same query on raw SQLite, and at a pinned old
// generation next to current, all in one run on the same rows.
// Build and run (release):
//   swift build -c release --product UbiquityQueryBench
//   .build/release/UbiquityQueryBench [rows] [dir]
import CSQLite
import Foundation
import UbiquityQuery
import UbiquityStorage

let rows = CommandLine.arguments.count > 1 ? Int(CommandLine.arguments[1])! : 1_000_000
let dir = CommandLine.arguments.count > 2 ? CommandLine.arguments[2] : NSTemporaryDirectory() + "ubq-qbench-\(getpid())"
try? FileManager.default.removeItem(atPath: dir)
try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(atPath: dir) }

struct LCG { var s: UInt64; mutating func next(_ n: Int) -> Int { s = s &* 6364136223846793005 &+ 1442695040888963407; return Int((s >> 33) % UInt64(n)) } }
func seconds(_ d: Duration) -> Double { Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18 }
func fmt(_ x: Double) -> String { String(format: x >= 100 ? "%.0f" : "%.2f", x) }
func line(_ name: String, _ ops: Double, _ unit: String = "fetches/s") { print(name.padding(toLength: 64, withPad: " ", startingAt: 0), fmt(ops), unit) }

// Same schema as ANCHORS.md: name, age, score, index on age. age = i % (rows / 10): every age value
// has 10 rows, so `age == x` returns 10 objects.
let groups = max(1, rows / 10)
let model = ModelDefinition(entities: [
    EntityDefinition(name: "Row", attributes: [
        AttributeDefinition(name: "name", type: .string),
        AttributeDefinition(name: "age", type: .int32),
        AttributeDefinition(name: "score", type: .double),
    ], indexes: [["age"]]),
])
print("UbiquityQueryBench: \(rows) rows, \(ProcessInfo.processInfo.activeProcessorCount) cores, SQLite \(String(cString: sqlite3_libversion()))")

// raw SQLite anchor: the same rows, C API, WAL, one prepared statement, caller's thread
var raw: OpaquePointer?
sqlite3_open_v2(dir + "/raw.sqlite", &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nil)
func exec(_ db: OpaquePointer?, _ s: String) { precondition(sqlite3_exec(db, s, nil, nil, nil) == SQLITE_OK, String(cString: sqlite3_errmsg(db))) }
exec(raw, "PRAGMA journal_mode=WAL"); exec(raw, "PRAGMA synchronous=OFF")
exec(raw, "CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, age INTEGER, score REAL)")
exec(raw, "CREATE INDEX t_age ON t(age)")
exec(raw, "WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i < \(rows - 1)) INSERT INTO t (id, name, age, score) SELECT i + 1, 'name-' || i, i % \(groups), i * 0.5 FROM s")

var cfg = StorageConfiguration()
cfg.synchronous = .off
cfg.logger.logLevel = .warning
let store = try Store.open(path: dir + "/engine.sqlite", id: UUID(), model: model, configuration: cfg)
let loadStart = ContinuousClock.now
_ = try await store.bulkLoadForTesting(entity: "Row", count: rows, values: ["name": .textWithIndex(prefix: "name-"), "age": .indexModulo(Int64(groups)), "score": .indexTimes(0.5)])
_ = try await store.checkpoint(truncate: true)
print("load: \(rows) rows in \(fmt(seconds(ContinuousClock.now - loadStart))) s (test-only bulk loader)")

func request(_ age: Int) -> FetchRequest {
    var r = FetchRequest(entity: "Row")
    r.predicate = "age == $a"
    r.variables = ["a": .scalar(.int(Int64(age)))]
    return r
}
let n = 20_000

// MARK: W3: indexed equality, 10 results
print("\n== predicate fetch: age == $a (indexed), 10 objects per fetch ==")
let st = { var s: OpaquePointer?; precondition(sqlite3_prepare_v2(raw, "SELECT id, name, age, score FROM t WHERE age = ?", -1, &s, nil) == SQLITE_OK); return s! }()
var rng = LCG(s: 1)
var sink = 0
var t0 = ContinuousClock.now
for _ in 0..<n * 2 {
    sqlite3_bind_int64(st, 1, Int64(rng.next(groups)))
    while sqlite3_step(st) == SQLITE_ROW { sink &+= Int(sqlite3_column_int64(st, 0)); _ = sqlite3_column_text(st, 1); sink &+= Int(sqlite3_column_double(st, 3)) }
    sqlite3_reset(st)
}
let rawRate = Double(n * 2) / seconds(ContinuousClock.now - t0)
line("raw SQLite: prepared SELECT … WHERE age = ?, 1 thread (anchor)", rawRate)

rng = LCG(s: 1)
t0 = ContinuousClock.now
for _ in 0..<n { let r = try await store.fetch(request(rng.next(groups))); sink &+= r.count; precondition(r.count == 10) }
let engSeq = Double(n) / seconds(ContinuousClock.now - t0)
line("engine fetch (objects), one request at a time", engSeq)

rng = LCG(s: 1)
t0 = ContinuousClock.now
for _ in 0..<n { var r = request(rng.next(groups)); r.resultType = .objectIDs; sink &+= try await store.fetch(r).count }
let engIDs = Double(n) / seconds(ContinuousClock.now - t0)
line("engine fetch (objectIDs), one request at a time", engIDs)

// inside one read job: parse + compile + SQL + load, without the thread handoffs
let inRead = try await store.read { ctx -> Double in
    var r = LCG(s: 1)
    let s0 = ContinuousClock.now
    for _ in 0..<n { let c = try ctx.fetch(request(r.next(groups))).count; precondition(c == 10) }
    return Double(n) / seconds(ContinuousClock.now - s0)
}
line("executor alone (n fetches inside one read job)", inRead)

t0 = ContinuousClock.now
let tasks = 16
try await withThrowingTaskGroup(of: Void.self) { g in
    for k in 0..<tasks {
        g.addTask { var r = LCG(s: UInt64(k + 7)); for _ in 0..<(n / tasks) { _ = try await store.fetch(request(r.next(groups))) } }
    }
    try await g.waitForAll()
}
let engPar = Double(n / tasks * tasks) / seconds(ContinuousClock.now - t0)
line("engine fetch (objects), 16 concurrent requests, \(cfg.readerCount) readers", engPar)
print("ratio engine/raw: sequential \(fmt(engSeq / rawRate)), objectIDs \(fmt(engIDs / rawRate)), executor alone \(fmt(inRead / rawRate)), concurrent \(fmt(engPar / rawRate))")

// MARK: W4: the same fetch at a pinned old generation vs current
print("\n== the same fetch at a pinned old generation vs current ==")
let pin = try store.pin(lease: 3600)
let hot = min(groups, 2_000)   // ages 0..<2000: 20,000 objects get 3 newer versions each
for round in 0..<3 { _ = try await store.batchUpdate(entity: "Row", predicate: "age < \(hot)", values: ["score": .double(Double(round))]) }
func timed(_ g: ReadGeneration, seed: UInt64) async throws -> Double {
    var r = LCG(s: seed)
    let s0 = ContinuousClock.now
    for _ in 0..<n { let c = try await store.fetch(request(r.next(hot)), at: g).count; precondition(c == 10) }
    return Double(n) / seconds(ContinuousClock.now - s0)
}
let cur1 = try await timed(.current, seed: 5)
let pinned = try await timed(.token(pin.token), seed: 5)
let cur2 = try await timed(.current, seed: 5)
line("fetch at current (hot rows, 4 versions each)", cur1)
line("fetch at the pinned generation (the oldest of the 4 versions)", pinned)
line("fetch at current again (noise check)", cur2)
print("pinned cost / current cost: \(fmt(((cur1 + cur2) / 2) / pinned))x (goal <= 1.2x)  (sink \(sink % 10))")
store.unpin(pin)
sqlite3_finalize(st)
sqlite3_close(raw)
store.close()
