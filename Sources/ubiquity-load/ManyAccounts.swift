import Foundation
import Synchronization
import UbiquityGRPC
import UbiquityGRPCClient
import UbiquityLock
import UbiquityProtos

#if canImport(Glibc)
import Glibc
#endif

/// W6 (issue 18): many accounts, each with its own store and session, a few of them active at a time.
///
/// `prepare-accounts` makes the accounts, the way a provisioning system would (CreateAccount and
/// CreateApiKey with the operator key, then SignIn), then one store per account filled with
/// BatchInsert over that account's session, and writes one line per account to `--accounts-file`.
/// `many-accounts` reads that file and drives point fetches and small saves, each over its
/// account's own session.
enum ManyAccounts {
    struct Account: Sendable {
        var storeID: String
        var session: String
    }

    /// How the active set moves: `active` accounts at a time; after every `rotateEvery` calls the
    /// longest-active one leaves and the next account joins.
    struct Rotation: Sendable {
        var active: Int
        var rotateEvery: Int
        var saveEvery: Int
    }

    // MARK: prepare-accounts

    /// Returns (seconds for the accounts, seconds for the stores). Accounts first, then stores, so
    /// each rate is measured on its own; `concurrency` accounts (or stores) in flight at a time.
    static func prepare(host: String, port: Int, operatorKeyFile: String, accounts: Int, objects: Int,
                        concurrency: Int, file: String) async throws -> (accounts: Double, stores: Double) {
        guard let text = try? String(contentsOfFile: operatorKeyFile, encoding: .utf8) else {
            throw LoadError(message: "prepare-accounts needs --operator-key-file: cannot read \(operatorKeyFile)")
        }
        let operatorAuth = [("authorization", "Bearer " + text.trimmingCharacters(in: .whitespacesAndNewlines))]
        let channel = try await GRPCChannel(host: host, port: port, tls: ClientTLS.context)
        defer { channel.close() }

        let start = monotonicNanos()
        let sessions = try await inParallel(accounts, concurrency) { i -> String in
            var create = Ubiquity_V1_CreateAccountRequest()
            create.displayName = "w6-\(i)"
            let account = try await channel.unary("/ubiquity.v1.Accounts/CreateAccount", create, as: Ubiquity_V1_Account.self,
                                                  metadata: operatorAuth)
            var key = Ubiquity_V1_CreateApiKeyRequest()
            key.accountID = account.accountID
            key.scope = .readWrite
            key.label = "ubiquity-load w6"
            let secret = try await channel.unary("/ubiquity.v1.Accounts/CreateApiKey", key, as: Ubiquity_V1_CreateApiKeyResponse.self,
                                                 metadata: operatorAuth).secret
            var signIn = Ubiquity_V1_SignInRequest()
            signIn.apiKey = secret
            signIn.deviceID = "ubiquity-load-w6"
            return try await channel.unary("/ubiquity.v1.Accounts/SignIn", signIn, as: Ubiquity_V1_SignInResponse.self).sessionToken
        }
        let accountsDone = monotonicNanos()
        let stores = try await inParallel(accounts, concurrency) { i -> String in
            let auth = [("authorization", "Bearer " + sessions[i])]
            var open = Ubiquity_V1_OpenStoreRequest()
            open.name = "w6"
            let storeID = try await channel.unary(Workloads.stores + "OpenStore", open, as: Ubiquity_V1_OpenStoreResponse.self,
                                                  metadata: auth).store.storeID
            var register = Ubiquity_V1_RegisterModelRequest()
            register.storeID = storeID
            register.model = BenchModel.model
            _ = try await channel.unary("/ubiquity.v1.Models/RegisterModel", register, as: Ubiquity_V1_RegisterModelResponse.self,
                                        metadata: auth)
            var insert = Ubiquity_V1_BatchInsertRequest()
            insert.storeID = storeID
            insert.entity = BenchModel.entity
            insert.author = "ubiquity-load-w6"
            insert.objects = (1...max(1, objects)).map { BenchModel.values($0, of: objects) }
            _ = try await channel.unary(Workloads.stores + "BatchInsert", insert, as: Ubiquity_V1_BatchResponse.self,
                                        metadata: auth, timeout: 120)
            return storeID
        }
        let end = monotonicNanos()
        let lines = (0..<accounts).map { "\(stores[$0])\t\(sessions[$0])\n" }.joined()
        guard FileManager.default.createFile(atPath: file, contents: Data(lines.utf8), attributes: [.posixPermissions: 0o600]) else {
            throw LoadError(message: "cannot write --accounts-file \(file)")
        }
        return (Double(accountsDone - start) / 1e9, Double(end - accountsDone) / 1e9)
    }

    /// `body(0..<count)` with at most `width` in flight; results in index order.
    private static func inParallel<T: Sendable>(_ count: Int, _ width: Int,
                                                _ body: @escaping @Sendable (Int) async throws -> T) async throws -> [T] {
        try await withThrowingTaskGroup(of: (Int, T).self) { group in
            var out = [T?](repeating: nil, count: count)
            var next = 0
            func add() {
                guard next < count else { return }
                let i = next
                next += 1
                group.addTask { (i, try await body(i)) }
            }
            for _ in 0..<max(1, width) { add() }
            while let (i, value) = try await group.next() {
                out[i] = value
                add()
            }
            return out.map { $0! }
        }
    }

    static func read(_ file: String) throws -> [Account] {
        guard let text = try? String(contentsOfFile: file, encoding: .utf8) else {
            throw LoadError(message: "cannot read --accounts-file \(file): run `ubiquity-load --workload prepare-accounts` first")
        }
        return text.split(separator: "\n").compactMap { line in
            let parts = line.split(separator: "\t")
            return parts.count == 2 ? Account(storeID: String(parts[0]), session: String(parts[1])) : nil
        }
    }

    // MARK: many-accounts

    /// The ring of calls the workers cycle through. Positions are issued in order by one worker
    /// thread, so ring order is time order. A joining account's first call is a point fetch marked
    /// `cold`: its store was last used by `prepare-accounts` or by a run of another seed, at least
    /// hundreds of accounts ago — more than `--max-open-stores` (256) keeps open — so the call must
    /// open it. The joiner is not picked again within the next `quiet` calls, so no call counted
    /// as warm waits on that same open.
    static func plan(host: String, port: Int, authority: String, timeout: Double?, accounts all: [Account],
                     objects: Int, seed: UInt64, rotation r: Rotation) throws -> WorkloadPlan {
        guard all.count > r.active else {
            throw LoadError(message: "many-accounts needs more accounts (\(all.count) in the file) than --active (\(r.active))")
        }
        var rng = SplitMix64(state: seed)
        // Enough joins that the ring's wrap also finds closed stores: 2,000, or every account.
        let joins = min(all.count - r.active, 2_000)
        // Seeds 1, 2, 3, … (the rounds of scripts/bench) start at disjoint ranges of the file while
        // it has room, so no run's joiners were touched by the run before, whose stores may be open.
        let first = Int((seed &- 1) % UInt64(all.count)) * (r.active + joins) % all.count
        let used = (0..<(r.active + joins)).map { all[(first + $0) % all.count] }
        let fetchesPerAccount = 8
        var fetches: [[PreparedRequest]] = []
        var saves: [PreparedRequest] = []
        for (a, account) in used.enumerated() {
            let auth = [("authorization", "Bearer " + account.session)]
            let objectID = { (pk: Int) in "x-ubiquity://\(account.storeID.lowercased())/\(BenchModel.entity)/p\(pk)" }
            fetches.append(try (0..<fetchesPerAccount).map { _ in
                var q = Ubiquity_V1_GetObjectsRequest()
                q.storeID = account.storeID
                q.objectIds = [objectID(1 + rng.below(objects))]
                return PreparedRequest(path: Workloads.stores + "GetObjects", authority: authority, message: try q.serializedBytes(),
                                       metadata: auth, timeout: timeout)
            })
            var s = Ubiquity_V1_SaveRequest()
            s.storeID = account.storeID
            s.author = "ubiquity-load-w6"
            var ins = Ubiquity_V1_Insert()
            ins.temporaryID = "t"
            ins.entity = BenchModel.entity
            ins.values = ["name": .string("w6-\(a)"), "age": .int64(Int64(100_000 + rng.below(100_000))),
                          "score": .double(Double(rng.below(1000)) / 10)]
            s.inserts = [ins]
            saves.append(PreparedRequest(path: Workloads.stores + "Save", authority: authority, message: try s.serializedBytes(),
                                         metadata: auth, timeout: timeout))
        }

        // The oldest active account joined (active - 1) rotations ago: never rule it out.
        let quiet = min(128, (r.active - 1) * r.rotateEvery)
        var ring: [PreparedRequest] = []
        var cold: [Bool] = []
        ring.reserveCapacity(joins * r.rotateEvery)
        cold.reserveCapacity(joins * r.rotateEvery)
        var joinedAt = [Int](repeating: Int.min / 2, count: used.count)
        var calls = 0
        for step in 0..<joins {
            // Active: used[step ..< step + active]; at each step's start used[step + active - 1]
            // has just joined (step 0: the initial set, opened before the clock starts).
            if step > 0 {
                let joiner = step + r.active - 1
                joinedAt[joiner] = ring.count
                ring.append(fetches[joiner][0])
                cold.append(true)
            }
            let inStep = step > 0 ? r.rotateEvery - 1 : r.rotateEvery
            for _ in 0..<inStep {
                var a = step + rng.below(r.active)
                while ring.count - joinedAt[a] < quiet { a = step + rng.below(r.active) }
                calls += 1
                if r.saveEvery > 0 && calls % r.saveEvery == 0 {
                    ring.append(saves[a])
                } else {
                    ring.append(fetches[a][rng.below(fetchesPerAccount)])
                }
                cold.append(false)
            }
        }
        // Every run starts with used[0 ..< active] active: open their stores now, outside the
        // clock, so the run's cold calls are exactly the marked ones (and check the data).
        try blocking {
            let channel = try await GRPCChannel(host: host, port: port, tls: ClientTLS.context)
            defer { channel.close() }
            for a in 0..<r.active {
                var q = Ubiquity_V1_GetObjectsRequest()
                q.storeID = used[a].storeID
                q.objectIds = ["x-ubiquity://\(used[a].storeID.lowercased())/\(BenchModel.entity)/p1"]
                let found = try await channel.unary(Workloads.stores + "GetObjects", q, as: Ubiquity_V1_GetObjectsResponse.self,
                                                    metadata: [("authorization", "Bearer " + used[a].session)])
                guard found.missingObjectIds.isEmpty else {
                    throw LoadError(message: "account \(a)'s store lacks its objects: run `ubiquity-load --workload prepare-accounts` again")
                }
            }
        }
        let savePart = r.saveEvery > 0 ? "1 in \(r.saveEvery) a Save of 1 object, the rest " : ""
        return WorkloadPlan(requests: ring, note: "\(r.active) of \(all.count) accounts active, each over its own session; "
                            + "\(savePart)GetObjects of 1 random ID out of \(objects); every \(r.rotateEvery) calls one account leaves "
                            + "and the next joins (its first call, a fetch that must open its closed store, is measured apart: cold_*)",
                            cold: cold)
    }
}

/// Samples a process's resident memory, threads and file descriptors (from /proc) every 50 ms,
/// keeping the peak and the last sample.
final class ProcessSampler: @unchecked Sendable {
    // @unchecked: `samples` is behind its lock; `stop` is atomic; `thread` is set once in init.
    struct Sample: Sendable { var rssKiB = 0, threads = 0, fds = 0 }
    private let pid: Int32
    private let stopped = Atomic<Bool>(false)
    private let state = Lock<(peak: Sample, last: Sample)>((Sample(), Sample()))
    private let done = DispatchSemaphore(value: 0)

    init(pid: Int32) {
        self.pid = pid
        let t = Thread { [self] in
            while !self.stopped.load(ordering: .relaxed) {
                self.sample()
                usleep(50_000)
            }
            self.done.signal()
        }
        t.name = "load-sampler"
        t.start()
    }

    private func sample() {
        var s = Sample()
        if let text = FanOut.readFile("/proc/\(pid)/status") {
            for line in text.split(separator: "\n") {
                let f = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
                if line.hasPrefix("VmRSS:"), f.count > 1 { s.rssKiB = Int(f[1]) ?? 0 }
                if line.hasPrefix("Threads:"), f.count > 1 { s.threads = Int(f[1]) ?? 0 }
            }
        }
        s.fds = ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []).count
        state.withLock {
            $0.last = s
            $0.peak = Sample(rssKiB: max($0.peak.rssKiB, s.rssKiB), threads: max($0.peak.threads, s.threads),
                             fds: max($0.peak.fds, s.fds))
        }
    }

    /// Stops sampling after one last sample; returns (peak, last).
    func finish() -> (peak: Sample, last: Sample) {
        stopped.store(true, ordering: .relaxed)
        done.wait()
        sample()
        return state.withLock { $0 }
    }
}
