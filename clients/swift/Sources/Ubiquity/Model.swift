import Foundation

/// Opaque bytes naming one generation of one store (SPEC §2). Reads at a token see the store as it
/// was after that save; the same token starts a subscription with no gap and no overlap.
public struct GenerationToken: Sendable, Hashable {
    public let bytes: Data
    public init(_ bytes: Data) { self.bytes = bytes }

    /// nil for the empty bytes the server sends where there is no token (an unpinned context).
    init?(ifPresent bytes: Data) {
        guard !bytes.isEmpty else { return nil }
        self.bytes = bytes
    }
}

/// How a save treats objects changed in the store since the client read them (SPEC §4.3).
public enum MergePolicy: Sendable, Hashable {
    /// Nothing is applied; the error carries one conflict record per object.
    case error
    /// Per property: properties changed on both sides keep the store's value.
    case storeTrump
    /// Per property: properties changed on both sides take the client's value.
    case objectTrump
    /// The client's whole object replaces the store's.
    case overwrite
    /// Conflicting objects are skipped; the store's state stays.
    case rollback

    var proto: Ubiquity_V1_MergePolicy {
        switch self {
        case .error: return .error
        case .storeTrump: return .mergeByPropertyStoreTrump
        case .objectTrump: return .mergeByPropertyObjectTrump
        case .overwrite: return .overwrite
        case .rollback: return .rollback
        }
    }

    init(proto: Ubiquity_V1_MergePolicy) {
        switch proto {
        case .mergeByPropertyStoreTrump: self = .storeTrump
        case .mergeByPropertyObjectTrump: self = .objectTrump
        case .overwrite: self = .overwrite
        case .rollback: self = .rollback
        default: self = .error
        }
    }
}

/// A stored object: its ID (`x-ubiquity://<store>/<Entity>/p<pk>`), version (optimistic locking)
/// and values. `object["name"]` reads one value.
public struct ManagedObject: Sendable, Hashable {
    public var id: String
    public var entity: String
    public var version: Int64
    public var values: [String: Value]
    /// Relationship name → destination object IDs.
    public var relationships: [String: [String]]

    public subscript(key: String) -> Value? { values[key] }

    init(proto: Ubiquity_V1_ManagedObject) {
        id = proto.objectID
        entity = proto.entity
        version = proto.version
        values = swiftValues(proto.values)
        relationships = proto.relationships.mapValues(\.objectIds)
    }
}

/// One sort key of a fetch.
public struct SortDescriptor: Sendable, Hashable {
    public var keyPath: String
    public var ascending: Bool
    public var caseInsensitive: Bool

    public init(_ keyPath: String, ascending: Bool = true, caseInsensitive: Bool = false) {
        self.keyPath = keyPath
        self.ascending = ascending
        self.caseInsensitive = caseInsensitive
    }

    public static func ascending(_ keyPath: String) -> Self { Self(keyPath) }
    public static func descending(_ keyPath: String) -> Self { Self(keyPath, ascending: false) }

    var proto: Ubiquity_V1_SortDescriptor {
        .with {
            $0.keyPath = keyPath
            $0.descending = !ascending
            $0.caseInsensitive = caseInsensitive
        }
    }
}

/// What a fetch returns (SPEC §4.1).
public enum ResultType: Sendable, Hashable {
    case objects, objectIDs, dictionaries, count

    var proto: Ubiquity_V1_ResultType {
        switch self {
        case .objects: return .objects
        case .objectIDs: return .objectIds
        case .dictionaries: return .dictionaries
        case .count: return .count
        }
    }
}

/// A fetch: entity, NSPredicate-format predicate with `$variables`, sort, paging, result type;
/// for dictionaries, grouping (`groupBy`, `having`) and `distinct`; relationship prefetching
/// (docs/query.md in the repository, NSFetchRequest's properties of the same names).
///
/// ```swift
/// // People per city with more than one, as rows ["city": …, "n": …]:
/// var byCity = FetchRequest("Person", resultType: .dictionaries, properties: ["city", "n = count:(SELF)"])
/// byCity.groupBy = ["city"]
/// byCity.having = "n > 1"
/// ```
public struct FetchRequest: Sendable {
    public var entity: String
    public var predicate: String
    public var arguments: [String: Argument]
    public var sort: [SortDescriptor]
    public var limit: Int32
    public var offset: Int32
    public var resultType: ResultType
    /// For `.dictionaries`: the key paths each row holds, or aggregates written
    /// `alias = fn:(keyPath)` with fn one of count, sum, min, max, average (`count:(SELF)`).
    public var properties: [String]
    /// `.dictionaries`: one row per group of these key paths (`propertiesToGroupBy`); every plain
    /// key path in ``properties`` must be one of them.
    public var groupBy: [String]
    /// `.dictionaries` with ``groupBy``: a predicate over the groups, on aggregate aliases and
    /// grouped key paths (`havingPredicate`: `"n > 1"`, `"total >= $min"`, with ``arguments``).
    public var having: String
    /// `.dictionaries`: drop duplicate rows (`returnsDistinctResults`).
    public var distinct: Bool
    /// Relationship key paths whose destinations come with the results, in
    /// ``FetchResult/prefetched`` (`relationshipKeyPathsForPrefetching`: `"owner"`,
    /// `"notes"`, `"friends.notes"`) — one load per level, however many results.
    public var prefetch: [String]
    /// Leave out objects of sub-entities (by default a fetch of an entity includes them).
    public var excludesSubentities: Bool

    public init(
        _ entity: String, where predicate: String = "", _ arguments: [String: Argument] = [:],
        sort: [SortDescriptor] = [], limit: Int32 = 0, offset: Int32 = 0,
        resultType: ResultType = .objects, properties: [String] = [], groupBy: [String] = [],
        having: String = "", distinct: Bool = false, prefetch: [String] = [], excludesSubentities: Bool = false
    ) {
        self.entity = entity
        self.predicate = predicate
        self.arguments = arguments
        self.sort = sort
        self.limit = limit
        self.offset = offset
        self.resultType = resultType
        self.properties = properties
        self.groupBy = groupBy
        self.having = having
        self.distinct = distinct
        self.prefetch = prefetch
        self.excludesSubentities = excludesSubentities
    }

    var proto: Ubiquity_V1_FetchSpec {
        .with {
            $0.entity = entity
            $0.predicate = predicate
            $0.variables = arguments.mapValues(\.proto)
            $0.sortDescriptors = sort.map(\.proto)
            $0.fetchLimit = limit
            $0.fetchOffset = offset
            $0.resultType = resultType.proto
            $0.propertiesToFetch = properties
            $0.propertiesToGroupBy = groupBy
            $0.havingPredicate = having
            $0.returnsDistinctResults = distinct
            $0.relationshipKeyPathsForPrefetching = prefetch
            $0.excludesSubentities = excludesSubentities
        }
    }
}

/// What a fetch found, and the generation it read (`token`).
public struct FetchResult: Sendable {
    public var token: GenerationToken?
    public var objects: [ManagedObject]
    public var objectIDs: [String]
    public var rows: [[String: Value]]
    public var count: Int64
    /// The destinations of ``FetchRequest/prefetch``, by object ID (each once, however many
    /// results point at it).
    public var prefetched: [String: ManagedObject]

    init(proto: Ubiquity_V1_FetchResults) {
        token = GenerationToken(ifPresent: proto.token)
        objects = proto.objects.map(ManagedObject.init(proto:))
        objectIDs = proto.objectIds
        rows = proto.rows.map { swiftValues($0.values) }
        count = proto.count
        prefetched = Dictionary(
            proto.prefetched.map { ($0.objectID, ManagedObject(proto: $0)) }, uniquingKeysWith: { a, _ in a })
    }
}

/// A relationship target in a change (`ObjectRef`): an object inserted by the same save, by its
/// temporary ID, or an existing object by its ID (in a context also a pending insert's context
/// ID, `…/t<n>`). A string literal is an object ID.
public enum ObjectRef: Sendable, Hashable, ExpressibleByStringLiteral {
    /// The ``Insert/temporaryID`` of an insert in the same save.
    case inserted(String)
    /// An object ID (URI form).
    case object(String)

    public init(stringLiteral id: String) { self = .object(id) }

    var proto: Ubiquity_V1_ObjectRef {
        .with {
            switch self {
            case .inserted(let t): $0.temporaryID = t
            case .object(let id): $0.objectID = id
            }
        }
    }
}

/// Relationship name → its complete set of targets (zero or one for a to-one).
func protoRelationships(_ r: [String: [ObjectRef]]) -> [String: Ubiquity_V1_ObjectRefList] {
    r.mapValues { refs in .with { $0.refs = refs.map(\.proto) } }
}

/// A new object of a store-level save, named by a temporary ID of the caller's choice until the
/// save returns its permanent one. `relationships`: name → targets, which may be other inserts of
/// the same save (`.inserted("p1")`).
public struct Insert: Sendable {
    public var temporaryID: String
    public var entity: String
    public var values: [String: Value]
    public var relationships: [String: [ObjectRef]]

    public init(
        _ temporaryID: String, _ entity: String, _ values: [String: Value], relationships: [String: [ObjectRef]] = [:]
    ) {
        self.temporaryID = temporaryID
        self.entity = entity
        self.values = values
        self.relationships = relationships
    }

    var proto: Ubiquity_V1_Insert {
        .with {
            $0.temporaryID = temporaryID
            $0.entity = entity
            $0.values = protoValues(values)
            $0.relationships = protoRelationships(relationships)
        }
    }
}

/// Changed values of an existing object; `expectedVersion` (the version read) makes a concurrent
/// change a conflict for the merge policy to decide. `relationships`: each one named replaces
/// that relationship's whole set of targets (`[]` empties it).
public struct Update: Sendable {
    public var objectID: String
    public var values: [String: Value]
    public var relationships: [String: [ObjectRef]]
    public var expectedVersion: Int64?

    public init(
        _ objectID: String, _ values: [String: Value], relationships: [String: [ObjectRef]] = [:],
        expectedVersion: Int64? = nil
    ) {
        self.objectID = objectID
        self.values = values
        self.relationships = relationships
        self.expectedVersion = expectedVersion
    }

    var proto: Ubiquity_V1_Update {
        var p = Ubiquity_V1_Update()
        p.objectID = objectID
        p.values = protoValues(values)
        p.relationships = protoRelationships(relationships)
        if let expectedVersion { p.expectedVersion = expectedVersion }
        return p
    }
}

/// One object a save could not apply as asked (a decoded `ubiquity.v1.ConflictRecord`).
public struct Conflict: Sendable, Hashable {
    public enum Kind: Sendable, Hashable {
        case versionChanged, deletedInStore, uniquenessClash, unspecified
    }

    public var kind: Kind
    public var objectID: String
    public var temporaryID: String
    public var entity: String
    public var clientSnapshot: [String: Value]
    public var clientChanges: [String: Value]
    public var storeValues: [String: Value]
    public var clientVersion: Int64
    public var storeVersion: Int64
    /// The uniqueness constraint's properties, for `.uniquenessClash`.
    public var constraint: [String]

    init(proto r: Ubiquity_V1_ConflictRecord) {
        switch r.kind {
        case .versionChanged: kind = .versionChanged
        case .deletedInStore: kind = .deletedInStore
        case .uniquenessClash: kind = .uniquenessClash
        default: kind = .unspecified
        }
        objectID = r.objectID
        temporaryID = r.temporaryID
        entity = r.entity
        clientSnapshot = swiftValues(r.clientSnapshot)
        clientChanges = swiftValues(r.clientChanges)
        storeValues = swiftValues(r.storeValues)
        clientVersion = r.clientVersion
        storeVersion = r.storeVersion
        constraint = r.constraint
    }
}

/// The outcome of a committed (or replayed, or dry-run) save.
public struct SaveResult: Sendable {
    public var token: GenerationToken?
    public var generation: Int64
    /// Temporary ID → permanent object ID.
    public var permanentIDs: [String: String]
    /// Object ID → its new version.
    public var versions: [String: Int64]
    /// Conflicts the merge policy resolved.
    public var resolvedConflicts: [Conflict]
    /// Objects the `.rollback` policy left as the store had them.
    public var skippedObjectIDs: [String]
    public var dryRun: Bool
    /// True when the server answered a retry with the first attempt's outcome (same client
    /// transaction ID): the save was applied once.
    public var replayed: Bool
    /// The client transaction ID the save was sent with.
    public var clientTransactionID: String
    /// A nested context's save went into its parent context, not the store.
    public var savedToParent: Bool

    init(proto r: Ubiquity_V1_SaveResult, clientTransactionID: String, savedToParent: Bool = false) {
        token = GenerationToken(ifPresent: r.token)
        generation = r.generation
        permanentIDs = r.permanentIds
        versions = r.versions
        resolvedConflicts = r.resolvedConflicts.map(Conflict.init(proto:))
        skippedObjectIDs = r.skippedObjectIds
        dryRun = r.dryRun
        replayed = r.replayed
        self.clientTransactionID = clientTransactionID
        self.savedToParent = savedToParent
    }
}

/// A store of the account: a named object store with its own generations (SPEC §2).
public struct StoreInfo: Sendable, Hashable {
    public var id: String
    public var name: String
    public var modelVersionHash: String
    public var token: GenerationToken?
    public var generation: Int64

    init(proto s: Ubiquity_V1_StoreInfo) {
        id = s.storeID
        name = s.name
        modelVersionHash = s.modelVersionHash
        token = GenerationToken(ifPresent: s.token)
        generation = s.generation
    }
}
