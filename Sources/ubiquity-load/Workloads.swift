import ArgumentParser
import Dispatch
import Foundation
import SwiftProtobuf
import UbiquityGRPC
import UbiquityGRPCClient
import UbiquityLock
import UbiquityProtos

/// The requests a run cycles through, built once before the clock starts.
struct WorkloadPlan {
    /// Measured calls cycle through these.
    var requests: [PreparedRequest]
    /// Calls one extra connection keeps running (one at a time) while the measured calls run —
    /// e.g. the writes under a pinned fetch. Not measured; counted separately.
    var background: [PreparedRequest] = []
    var note: String?
    /// Positions in `requests` whose latency is also recorded apart (W6: calls that open a store).
    var cold: [Bool] = []
}

/// Where the Stores workloads read and write, and how much data `prepare` made.
struct DataSet {
    var store: String
    var objects: Int
    var seed: UInt64
    /// `authorization` for every data call (`--token` / `--operator-key-file`; empty with `--auth off`).
    var metadata: [(String, String)] = []
}

/// The benchmark data model: one entity like the raw SQLite anchor's table.
enum BenchModel {
    static let entity = "Item"
    static let versionIdentifier = "bench-v1"

    static var model: Ubiquity_V1_Model {
        var m = Ubiquity_V1_Model()
        m.versionIdentifier = versionIdentifier
        var e = Ubiquity_V1_Entity()
        e.name = entity
        func attr(_ name: String, _ type: Ubiquity_V1_AttributeType, required: Bool = true) -> Ubiquity_V1_Attribute {
            var a = Ubiquity_V1_Attribute()
            a.name = name
            a.type = type
            a.required = required
            return a
        }
        e.attributes = [attr("name", .string), attr("age", .int64), attr("score", .double)]
        var index = Ubiquity_V1_PropertyList()
        index.properties = ["age"]
        e.indexes = [index]
        m.entities = [e]
        return m
    }

    /// Values of object number `i` (1-based) of a data set of `n`: every age in 0..<n/10 exactly
    /// ten times, scattered over the objects (as scripts/bench-tools/sqlite_anchor.c does).
    static func values(_ i: Int, of n: Int) -> Ubiquity_V1_ObjectValues {
        var o = Ubiquity_V1_ObjectValues()
        o.values = ["name": .string("name-\(i)"), "age": .int64(Int64((i &* 7919) % max(1, n / 10))),
                    "score": .double(Double(i % 1000) / 10)]
        return o
    }
}

extension Ubiquity_V1_Value {
    static func string(_ s: String) -> Self { var v = Self(); v.stringValue = s; return v }
    static func int64(_ x: Int64) -> Self { var v = Self(); v.int64Value = x; return v }
    static func double(_ x: Double) -> Self { var v = Self(); v.doubleValue = x; return v }
}

/// A small deterministic generator (SplitMix64), so runs with the same seed send the same keys.
struct SplitMix64 {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    mutating func below(_ n: Int) -> Int { Int(next() % UInt64(max(1, n))) }
}

/// Runs async set-up code from the synchronous command (never on a loop thread).
func blocking<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
    let box = Lock<Result<T, any Error>?>(nil)
    let done = DispatchSemaphore(value: 0)
    Task {
        let r: Result<T, any Error>
        do { r = .success(try await body()) } catch { r = .failure(error) }
        box.withLock { $0 = r }
        done.signal()
    }
    done.wait()
    return try box.withLock { $0! }.get()
}

enum Workloads {
    static let stores = "/ubiquity.v1.Stores/"
    /// Distinct pre-built requests per workload (keys cycle through them).
    static let variants = 4096

    static func plan(_ kind: WorkloadKind, host: String, port: Int, authority: String, payload: Int,
                     timeout: Double?, data: DataSet, withWrites: Bool = false) throws -> WorkloadPlan {
        func prepared(_ method: String, _ message: some SwiftProtobuf.Message) throws -> PreparedRequest {
            PreparedRequest(path: stores + method, authority: authority, message: try message.serializedBytes(),
                            metadata: data.metadata, timeout: timeout)
        }
        var rng = SplitMix64(state: data.seed)
        switch kind {
        case .ping:
            var req = Ubiquity_V1_PingRequest()
            req.payload = Data(repeating: 0x61, count: payload)
            let bytes: [UInt8] = try req.serializedBytes()
            return WorkloadPlan(requests: [PreparedRequest(path: "/ubiquity.v1.Admin/Ping", authority: authority,
                                                           message: bytes, timeout: timeout)])
        case .prepare, .fanout, .prepareAccounts, .manyAccounts:
            throw ValidationError("\(kind.rawValue) has its own driver")
        case .pointFetch, .save100, .mixed, .predicateFetch, .pinnedFetch:
            break
        }

        let store = try blocking { try await StoreSetup.open(host: host, port: port, data: data) }
        func pointFetches() throws -> [PreparedRequest] {
            try (0..<variants).map { _ in
                var r = Ubiquity_V1_GetObjectsRequest()
                r.storeID = store.id
                r.objectIds = [store.objectID(1 + rng.below(data.objects))]
                return try prepared("GetObjects", r)
            }
        }
        func saves(_ count: Int) throws -> [PreparedRequest] {
            try (0..<count).map { v in
                var r = Ubiquity_V1_SaveRequest()
                r.storeID = store.id
                r.author = "ubiquity-load"
                r.inserts = (0..<100).map { i in
                    var ins = Ubiquity_V1_Insert()
                    ins.temporaryID = "t\(i)"
                    ins.entity = BenchModel.entity
                    // Ages above the prepared range: the index still takes them at random
                    // places, and predicate fetches keep finding exactly the prepared 10. At
                    // least 100,000 values, as the raw SQLite anchor draws from, so an empty
                    // store's index takes them at random places too.
                    let ages = max(100_000, data.objects / 10)
                    ins.values = ["name": .string("load-\(v)-\(i)"), "age": .int64(Int64(ages + rng.below(ages))),
                                  "score": .double(Double(rng.below(1000)) / 10)]
                    return ins
                }
                return try prepared("Save", r)
            }
        }
        func predicateFetches(at token: Data?) throws -> [PreparedRequest] {
            try (0..<variants).map { _ in
                var r = Ubiquity_V1_FetchRequest()
                r.storeID = store.id
                r.fetch.entity = BenchModel.entity
                r.fetch.predicate = "age == $age"
                var a = Ubiquity_V1_Argument()
                a.value = .int64(Int64(rng.below(max(1, data.objects / 10))))
                r.fetch.variables = ["age": a]
                if let token { r.at.token = token }
                return try prepared("Fetch", r)
            }
        }

        if withWrites && kind != .pointFetch && kind != .predicateFetch {
            throw ValidationError("--with-writes applies to point-fetch and predicate-fetch (pinned-fetch always writes)")
        }
        let writes = withWrites ? try saves(16) : []
        let writesNote = withWrites ? " while saves of 100 run on another connection" : ""
        switch kind {
        case .pointFetch:
            return WorkloadPlan(requests: try pointFetches(), background: writes,
                                note: "GetObjects of 1 random object ID out of \(data.objects)" + writesNote)
        case .save100:
            return WorkloadPlan(requests: try saves(64), note: "Save of 100 inserts (synchronous=FULL, one index)")
        case .mixed:
            // 9 point fetches to 1 save of 100, interleaved.
            let reads = try pointFetches()
            let writes = try saves(64)
            var ring: [PreparedRequest] = []
            for i in 0..<reads.count {
                ring.append(reads[i])
                if i % 9 == 8 { ring.append(writes[(i / 9) % writes.count]) }
            }
            return WorkloadPlan(requests: ring, note: "9 point fetches : 1 save of 100 objects")
        case .predicateFetch:
            _ = try blocking { try await StoreSetup.probeFetch(host: host, port: port, store: store) }
            return WorkloadPlan(requests: try predicateFetches(at: nil), background: writes,
                                note: "Fetch age == $age (10 objects) at the current generation" + writesNote)
        case .pinnedFetch:
            _ = try blocking { try await StoreSetup.probeFetch(host: host, port: port, store: store) }
            // Pin the current generation with a context (a lease that keeps its versions), then
            // read at that token while another connection keeps saving.
            let token = try blocking { try await StoreSetup.pin(host: host, port: port, store: store) }
            return WorkloadPlan(requests: try predicateFetches(at: token), background: try saves(16),
                                note: "Fetch age == $age at a pinned generation while saves of 100 run on another connection")
        case .ping, .prepare, .fanout, .prepareAccounts, .manyAccounts:
            fatalError("handled above")
        }
    }
}

/// Set-up calls through the async client (GRPCChannel).
enum StoreSetup {
    struct Store: Sendable {
        var id: String
        var objects: Int
        var metadata: [(String, String)] = []
        func objectID(_ pk: Int) -> String { "x-ubiquity://\(id.lowercased())/\(BenchModel.entity)/p\(pk)" }
    }

    /// Opens the prepared store and checks it holds objects p1...pN (N may be 0: saves only).
    static func open(host: String, port: Int, data: DataSet) async throws -> Store {
        let channel = try await GRPCChannel(host: host, port: port, tls: ClientTLS.context)
        defer { channel.close() }
        var open = Ubiquity_V1_OpenStoreRequest()
        open.name = data.store
        open.mustExist = true
        let opened: Ubiquity_V1_OpenStoreResponse
        do {
            opened = try await channel.unary(Workloads.stores + "OpenStore", open, as: Ubiquity_V1_OpenStoreResponse.self, metadata: data.metadata)
        } catch let e as RPCError where e.code == .notFound {
            throw LoadError(message: "store \"\(data.store)\" does not exist: run `ubiquity-load --workload prepare --objects \(data.objects)` first")
        }
        let store = Store(id: opened.store.storeID, objects: data.objects, metadata: data.metadata)
        guard data.objects > 0 else { return store }  // `prepare --objects 0`: an empty store
        var check = Ubiquity_V1_GetObjectsRequest()
        check.storeID = store.id
        check.objectIds = [store.objectID(1), store.objectID(data.objects)]
        let found = try await channel.unary(Workloads.stores + "GetObjects", check, as: Ubiquity_V1_GetObjectsResponse.self, metadata: data.metadata)
        guard found.missingObjectIds.isEmpty else {
            throw LoadError(message: "store \"\(data.store)\" lacks \(found.missingObjectIds.joined(separator: ", ")): run `ubiquity-load --workload prepare --objects \(data.objects)` first")
        }
        return store
    }

    /// Fails with a clear message when the server cannot run a predicate fetch yet; otherwise
    /// checks that `age == 0` finds the 10 objects `prepare` made (so the run measures the
    /// intended result size) and returns that count.
    @discardableResult
    static func probeFetch(host: String, port: Int, store: Store) async throws -> Int {
        let channel = try await GRPCChannel(host: host, port: port, tls: ClientTLS.context)
        defer { channel.close() }
        var r = Ubiquity_V1_FetchRequest()
        r.storeID = store.id
        r.fetch.entity = BenchModel.entity
        r.fetch.predicate = "age == 0"
        let found: Ubiquity_V1_FetchResults
        do {
            found = try await channel.unary(Workloads.stores + "Fetch", r, as: Ubiquity_V1_FetchResults.self, metadata: store.metadata)
        } catch let e as RPCError {
            throw LoadError(message: "n/a — this server cannot run predicate fetches yet (Stores.Fetch: \(e.code): \(e.message))")
        }
        let expected = min(10, store.objects)
        guard found.objects.count == expected else {
            throw LoadError(message: "the store's data is not what prepare makes: age == 0 found \(found.objects.count) objects, expected \(expected); run `ubiquity-load --workload prepare --objects \(store.objects)`")
        }
        return found.objects.count
    }

    /// Creates a context pinned at the current generation, then moves the store past it (one
    /// save), and returns the pinned token. The context lives until the server's idle timeout.
    static func pin(host: String, port: Int, store: Store) async throws -> Data {
        let channel = try await GRPCChannel(host: host, port: port, tls: ClientTLS.context)
        defer { channel.close() }
        var cur = Ubiquity_V1_CurrentGenerationRequest()
        cur.storeID = store.id
        let token = try await channel.unary(Workloads.stores + "CurrentGeneration", cur, as: Ubiquity_V1_CurrentGenerationResponse.self, metadata: store.metadata).token
        var ctx = Ubiquity_V1_CreateContextRequest()
        ctx.storeID = store.id
        ctx.name = "ubiquity-load-pin"
        ctx.generationMode = .pinnedAtToken
        ctx.token = token
        _ = try await channel.unary("/ubiquity.v1.Contexts/CreateContext", ctx, as: Ubiquity_V1_ContextState.self, metadata: store.metadata)
        return token
    }

    /// `--workload prepare`: (re)creates the store with the bench model and inserts `objects`
    /// objects with BatchInsert, `batch` per call, two calls in flight. Returns the report.
    static func prepare(host: String, port: Int, data: DataSet, batch: Int) async throws -> (seconds: Double, calls: Int) {
        let channel = try await GRPCChannel(host: host, port: port, tls: ClientTLS.context)
        defer { channel.close() }
        var open = Ubiquity_V1_OpenStoreRequest()
        open.name = data.store
        var opened = try await channel.unary(Workloads.stores + "OpenStore", open, as: Ubiquity_V1_OpenStoreResponse.self, metadata: data.metadata)
        if !opened.created {
            var destroy = Ubiquity_V1_DestroyStoreRequest()
            destroy.storeID = opened.store.storeID
            _ = try await channel.unary(Workloads.stores + "DestroyStore", destroy, as: Ubiquity_V1_DestroyStoreResponse.self, metadata: data.metadata)
            opened = try await channel.unary(Workloads.stores + "OpenStore", open, as: Ubiquity_V1_OpenStoreResponse.self, metadata: data.metadata)
        }
        let storeID = opened.store.storeID
        var register = Ubiquity_V1_RegisterModelRequest()
        register.storeID = storeID
        register.model = BenchModel.model
        _ = try await channel.unary("/ubiquity.v1.Models/RegisterModel", register, as: Ubiquity_V1_RegisterModelResponse.self, metadata: data.metadata)

        let start = monotonicNanos()
        let batches = stride(from: 1, through: data.objects, by: batch).map { ($0, min(batch, data.objects - $0 + 1)) }
        // Two at a time: one being applied by the writer while the next one travels and decodes.
        try await withThrowingTaskGroup(of: Void.self) { group in
            var next = 0
            func add() {
                guard next < batches.count else { return }
                let (first, count) = batches[next]
                next += 1
                group.addTask {
                    var req = Ubiquity_V1_BatchInsertRequest()
                    req.storeID = storeID
                    req.entity = BenchModel.entity
                    req.author = "ubiquity-load-prepare"
                    req.objects = (first..<(first + count)).map { BenchModel.values($0, of: data.objects) }
                    _ = try await channel.unary(Workloads.stores + "BatchInsert", req, as: Ubiquity_V1_BatchResponse.self, metadata: data.metadata, timeout: 600)
                }
            }
            add(); add()
            while try await group.next() != nil { add() }
        }
        return (Double(monotonicNanos() - start) / 1e9, batches.count)
    }
}
