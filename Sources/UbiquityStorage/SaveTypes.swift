import Foundation

/// How a save resolves conflicts with the store (Core Data's merge policies).
public enum MergePolicy: String, Codable, Sendable, CaseIterable {
    /// Nothing applied; the error carries one conflict record per object.
    case error
    /// Per property: properties changed on both sides keep the store's value.
    case mergeByPropertyStoreTrump
    /// Per property: properties changed on both sides take the client's value.
    case mergeByPropertyObjectTrump
    /// The client's whole object state (snapshot + changes) replaces the store's.
    case overwrite
    /// The client's changes to conflicting objects are dropped; the store's state stays.
    case rollback
}

/// A relationship target in a save: an object inserted by the same save, or an existing object.
/// JSON: `{"temporary": "t1"}` or `{"permanent": "x-ubiquity://…/Entity/p3"}`.
public enum ObjectReference: Codable, Sendable, Hashable {
    case temporary(String)
    case permanent(ObjectID)

    private enum K: String, CodingKey { case temporary, permanent }
    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: K.self)
        if let t = try c.decodeIfPresent(String.self, forKey: .temporary) { self = .temporary(t); return }
        self = .permanent(try c.decode(ObjectID.self, forKey: .permanent))
    }
    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: K.self)
        switch self {
        case .temporary(let t): try c.encode(t, forKey: .temporary)
        case .permanent(let id): try c.encode(id, forKey: .permanent)
        }
    }
}

public struct InsertOperation: Codable, Sendable {
    public var temporaryID: String
    public var entity: String
    public var values: [String: StorageValue]
    /// Relationship name → targets (to-one: zero or one).
    public var relationships: [String: [ObjectReference]]
    public init(temporaryID: String, entity: String, values: [String: StorageValue] = [:], relationships: [String: [ObjectReference]] = [:]) {
        self.temporaryID = temporaryID; self.entity = entity; self.values = values; self.relationships = relationships
    }
    enum CodingKeys: String, CodingKey { case temporaryID, entity, values, relationships }
    public init(from d: Decoder) throws {
        let c = try d.container(keyedBy: CodingKeys.self)
        temporaryID = try c.decode(String.self, forKey: .temporaryID)
        entity = try c.decode(String.self, forKey: .entity)
        values = try c.decodeIfPresent([String: StorageValue].self, forKey: .values) ?? [:]
        relationships = try c.decodeIfPresent([String: [ObjectReference]].self, forKey: .relationships) ?? [:]
    }
}

public struct UpdateOperation: Codable, Sendable {
    public var objectID: ObjectID
    /// The version the client read (nil: no optimistic-locking check).
    public var expectedVersion: Int64?
    /// Changed attribute values.
    public var values: [String: StorageValue]
    /// Relationship name → complete new set of targets.
    public var relationships: [String: [ObjectReference]]
    /// The attribute values the client read (for per-property merges and conflict records).
    public var snapshot: [String: StorageValue]?
    public init(objectID: ObjectID, expectedVersion: Int64? = nil, values: [String: StorageValue] = [:],
                relationships: [String: [ObjectReference]] = [:], snapshot: [String: StorageValue]? = nil) {
        self.objectID = objectID; self.expectedVersion = expectedVersion; self.values = values; self.relationships = relationships; self.snapshot = snapshot
    }
    enum CodingKeys: String, CodingKey { case objectID, expectedVersion, values, relationships, snapshot }
    public init(from d: Decoder) throws {
        let c = try d.container(keyedBy: CodingKeys.self)
        objectID = try c.decode(ObjectID.self, forKey: .objectID)
        expectedVersion = try c.decodeIfPresent(Int64.self, forKey: .expectedVersion)
        values = try c.decodeIfPresent([String: StorageValue].self, forKey: .values) ?? [:]
        relationships = try c.decodeIfPresent([String: [ObjectReference]].self, forKey: .relationships) ?? [:]
        snapshot = try c.decodeIfPresent([String: StorageValue].self, forKey: .snapshot)
    }
}

public struct DeleteOperation: Codable, Sendable {
    public var objectID: ObjectID
    public var expectedVersion: Int64?
    public init(objectID: ObjectID, expectedVersion: Int64? = nil) { self.objectID = objectID; self.expectedVersion = expectedVersion }
}

public struct SaveRequest: Codable, Sendable {
    public var inserts: [InsertOperation] = []
    public var updates: [UpdateOperation] = []
    public var deletes: [DeleteOperation] = []
    public var mergePolicy: MergePolicy = .error
    public var author: String?
    public var contextName: String?
    /// A retried save with the same ID returns the first committed outcome.
    public var clientTransactionID: String?
    /// Validate and conflict-check, report, never apply.
    public var dryRun: Bool = false
    /// The model version hash the client was built with (nil: not checked).
    public var modelVersionHash: String?
    public init() {}
    enum CodingKeys: String, CodingKey { case inserts, updates, deletes, mergePolicy, author, contextName, clientTransactionID, dryRun, modelVersionHash }
    public init(from d: Decoder) throws {
        let c = try d.container(keyedBy: CodingKeys.self)
        inserts = try c.decodeIfPresent([InsertOperation].self, forKey: .inserts) ?? []
        updates = try c.decodeIfPresent([UpdateOperation].self, forKey: .updates) ?? []
        deletes = try c.decodeIfPresent([DeleteOperation].self, forKey: .deletes) ?? []
        mergePolicy = try c.decodeIfPresent(MergePolicy.self, forKey: .mergePolicy) ?? .error
        author = try c.decodeIfPresent(String.self, forKey: .author)
        contextName = try c.decodeIfPresent(String.self, forKey: .contextName)
        clientTransactionID = try c.decodeIfPresent(String.self, forKey: .clientTransactionID)
        dryRun = try c.decodeIfPresent(Bool.self, forKey: .dryRun) ?? false
        modelVersionHash = try c.decodeIfPresent(String.self, forKey: .modelVersionHash)
    }
}

public struct SaveResult: Codable, Sendable {
    /// The new generation (for dry runs and replays: the generation then current / first committed).
    public var token: GenerationToken
    /// Temporary ID → permanent ID (for upserts: the existing object's ID).
    public var permanentIDs: [String: ObjectID]
    /// New version of every inserted or updated object.
    public var versions: [ObjectID: Int64]
    /// Conflicts the merge policy resolved.
    public var resolvedConflicts: [ConflictRecord]
    /// Objects whose update or delete the merge policy dropped.
    public var skipped: [ObjectID]
    public var dryRun: Bool
    /// True when this is the stored outcome of an earlier save with the same client transaction ID.
    public var replayed: Bool
    /// Set by the writer for a save of new objects only (`SaveTxn.temporaryIDsUnique`): the pk of
    /// its first insert; insert i got pk `firstNewPK + i` and version 1. `permanentIDs` and
    /// `versions` are then left empty by the writer and filled from the request by
    /// `addNewObjects` on the saving caller's thread (docs/storage.md concurrency rule 12), so
    /// the writer hashes no ID for them. Never set in a result a caller sees.
    var firstNewPK: Int64? = nil

    enum CodingKeys: String, CodingKey { case token, permanentIDs, versions, resolvedConflicts, skipped, dryRun, replayed }

    /// Fills `permanentIDs` and `versions` of a result the writer left compact (`firstNewPK`).
    mutating func addNewObjects(_ request: SaveRequest) {
        guard let first = firstNewPK else { return }
        firstNewPK = nil
        let sid = token.storeID
        permanentIDs.reserveCapacity(request.inserts.count)
        versions.reserveCapacity(request.inserts.count)
        for (i, ins) in request.inserts.enumerated() {
            let id = ObjectID(storeID: sid, entity: ins.entity, pk: first + Int64(i))
            permanentIDs[ins.temporaryID] = id
            versions[id] = 1
        }
    }
}

enum WriterJob {
    case save(SaveJob)
    /// Runs alone on the writer thread; a failure: the writer connection could not be opened
    /// (`WriterQueue`'s late connect).
    case exclusive(CancelFlag, (Result<(Connection, WriterEngine), Error>) -> Void)

    /// Completes the job with `error` without running it (its batch had no writer connection).
    func fail(_ error: Error) {
        switch self {
        case .save(let s): s.complete(.failure(error))
        case .exclusive(_, let body): body(.failure(error))
        }
    }
}

struct SaveJob {
    /// The request and its prepared inserts, which the writer takes out (`take`) before it runs
    /// the save, so that it holds no reference to them when it completes the job: the saving
    /// caller, which keeps its own, then frees them on its thread, not the writer
    /// (docs/storage.md concurrency rule 12).
    private let handOver: HandOver
    /// A planned save (`Store.save(planning:)`): builds its request on the writer thread, inside
    /// the save's savepoint, from the state it will apply to. nil result: nothing to do.
    let planner: (@Sendable (ReadContext) throws -> SaveRequest?)?
    let flag: CancelFlag
    let complete: (Result<SaveResult, Error>) -> Void

    /// `prepared`: the inserts' model-only work, done on the caller's thread (docs/storage.md
    /// concurrency rule 12); used only when the writer's model is still `prepared.model` and there
    /// is no planner.
    init(request: SaveRequest, planner: (@Sendable (ReadContext) throws -> SaveRequest?)? = nil, prepared: PreparedSave? = nil,
         flag: CancelFlag, complete: @escaping (Result<SaveResult, Error>) -> Void) {
        handOver = HandOver(request: request, prepared: prepared)
        self.planner = planner; self.flag = flag; self.complete = complete
    }

    /// The request and prepared inserts, moved out of the job (writer thread only; once).
    func take() -> (SaveRequest, PreparedSave?) {
        let r = (handOver.request ?? SaveRequest(), handOver.prepared)
        handOver.request = nil; handOver.prepared = nil
        return r
    }

    /// Written by the submitting caller before the job is queued, then touched only by the writer
    /// thread (the queue's lock orders the hand-over).
    private final class HandOver: @unchecked Sendable {
        var request: SaveRequest?
        var prepared: PreparedSave?
        init(request: SaveRequest, prepared: PreparedSave?) { self.request = request; self.prepared = prepared }
    }
}

/// State only the writer thread touches (the thread serving the store's writer queue for the
/// current run: runs never overlap and are ordered by the writer pool's lock).
final class WriterOwned: @unchecked Sendable {
    // Invariant: every property is read and written only on the writer thread (rule 1).
    var commitsSinceGC = 0
    /// When to checkpoint; made from the store's configuration.
    var checkpoints: CheckpointPolicy
    /// The checkpoint's fence and writeback (CheckpointSteps.swift), made at first use.
    var fence: CheckpointFence?
    var writeback: DatabaseWriteback?
    init(checkpoints: CheckpointPolicy) { self.checkpoints = checkpoints }
    let insertStatements = InsertStatements()
}

/// The writer's multi-row INSERT texts (`SaveTxn.flushInserts`), per root table and rows per
/// statement, for one model object; made again when the model changes (a migration). Each text
/// keeps its prepared statement (`PreparedSQL`). Touched only on the writer thread (it lives in
/// `WriterOwned`).
final class InsertStatements {
    /// Rows per statement: the largest that fits what is left, so a 100-row save runs 64+32+4
    /// (three statements), any count below 128 at most seven, and the statement cache holds at
    /// most fourteen texts per table (each size with one entity per chunk or several).
    static let sizes = [64, 32, 16, 8, 4, 2, 1]
    private var model: ResolvedModel?
    private var texts: [String: [PreparedSQL?]] = [:]
    /// `SaveTxn.flushInserts`' text values of one statement, copied end to end after one unused
    /// byte (so the buffer is never empty and an empty text gets a non-null pointer: "" not NULL),
    /// and where each is bound (parameter index, offset, byte count). Kept here between statements
    /// so their storage is reused (`takeTextBytes`, `takeTextSlots`).
    var textBytes: [UInt8] = []
    var textSlots: [(index: Int32, offset: Int, count: Int)] = []

    /// `textBytes` emptied down to its unused first byte, moved out (the caller puts it back).
    func takeTextBytes() -> [UInt8] {
        var b: [UInt8] = []
        swap(&b, &textBytes)
        b.removeAll(keepingCapacity: true); b.append(0)
        return b
    }

    func takeTextSlots() -> [(index: Int32, offset: Int, count: Int)] {
        var s: [(index: Int32, offset: Int, count: Int)] = []
        swap(&s, &textSlots)
        s.removeAll(keepingCapacity: true)
        return s
    }

    /// Appends `s`'s UTF-8 to `bytes`; returns where it is.
    static func append(_ s: String, to bytes: inout [UInt8]) -> (offset: Int, count: Int) {
        var s = s
        let offset = bytes.count
        s.withUTF8 { bytes.append(contentsOf: $0) }
        return (offset, bytes.count - offset)
    }

    /// Rows in the next chunk of `remaining` rows of `width` parameters each (pk, z_ent and the
    /// root's columns): the largest size that fits, within SQLite's parameter limit.
    static func rows(remaining: Int, width: Int, variableLimit: Int) -> Int {
        var k = 0
        while k < sizes.count - 1 && (sizes[k] > remaining || sizes[k] * width + 1 > variableLimit) { k += 1 }
        return sizes[k]
    }

    /// The statement for a chunk of `n` rows (one of `sizes`) of `width` parameters each.
    ///
    /// Parameters are numbered: `?1` is the save's generation (`created_gen` of every row, bound
    /// once per statement); row r's pk is `?(2 + r × width)`, its `z_ent` the next, then its
    /// columns. With `uniformEntity` (every row of the chunk is of one entity) `?2` is every row's
    /// `z_ent`, bound once, and row r's pk is `?(3 + r × (width − 1))`, then its columns.
    /// `ended_gen` and `version` are the constants every new row has (live, 1), written into the
    /// text, so nothing binds them.
    func statement(_ model: ResolvedModel, root: String, rows n: Int, width: Int, uniformEntity: Bool) -> PreparedSQL {
        if self.model !== model { self.model = model; texts = [:] }
        let k = Self.sizes.firstIndex(of: n)! + (uniformEntity ? Self.sizes.count : 0)
        if let s = texts[root]?[k] { return s }
        let one = model.insertSQL[root]!  // columns: pk, created_gen, ended_gen, version, z_ent, the root's columns
        let values = one.range(of: " VALUES ")!
        let into = one.range(of: "INSERT INTO ")!
        let tuples = (0..<n).map { r -> String in
            let pk = uniformEntity ? 3 + r * (width - 1) : 2 + r * width
            let entity = uniformEntity ? 2 : pk + 1
            let firstColumn = uniformEntity ? pk + 1 : pk + 2
            let cols = (0..<(width - 2)).map { "?\(firstColumn + $0)" }
            return "(" + (["?\(pk)", "?1", "\(ResolvedModel.live)", "1", "?\(entity)"] + cols).joined(separator: ", ") + ")"
        }
        let sql = PreparedSQL("INSERT OR FAIL INTO " + one[into.upperBound..<values.upperBound] + tuples.joined(separator: ", "))
        var list = texts[root] ?? Array(repeating: nil, count: 2 * Self.sizes.count)
        list[k] = sql
        texts[root] = list
        return sql
    }
}
