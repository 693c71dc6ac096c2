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
public enum ObjectReference: Codable, Sendable, Hashable {
    case temporary(String)
    case permanent(ObjectID)
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
}

enum WriterJob {
    case save(SaveJob)
    /// Runs alone on the writer thread; nil arguments: the store is closing.
    case exclusive(CancelFlag, (Connection?, WriterEngine?) -> Void)
}

struct SaveJob {
    let request: SaveRequest
    let flag: CancelFlag
    let complete: (Result<SaveResult, Error>) -> Void
}

/// State only the writer thread touches.
final class WriterOwned: @unchecked Sendable {
    // Invariant: every property is read and written only on the writer thread (rule 1).
    var commitsSinceGC = 0
}
