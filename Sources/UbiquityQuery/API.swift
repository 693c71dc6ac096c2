// The query layer's public types (issue 4; docs/query.md). The storage engine's types
// (StorageValue, ObjectID, ObjectSnapshot, GenerationToken, ModelDefinition) are used as they are.
import Foundation
import UbiquityStorage

/// The value of a `$variable`: a scalar, or a list (for `IN` and `BETWEEN`).
/// Object IDs are passed as `.uri(objectID.uri)` (or `.string`).
public enum QueryArgument: Sendable, Hashable {
    case scalar(StorageValue)
    case list([StorageValue])
}

public enum FetchResultType: String, Sendable, Codable { case objects, objectIDs, dictionaries, count }

public struct SortDescriptor: Sendable, Hashable, Codable {
    /// An attribute, or a key path through to-one relationships ending in an attribute; for
    /// dictionary results also the alias of an expression in `propertiesToFetch`.
    public var keyPath: String
    public var ascending: Bool
    /// Compare Unicode-case-folded strings (ignored for non-string attributes).
    public var caseInsensitive: Bool
    public init(keyPath: String, ascending: Bool = true, caseInsensitive: Bool = false) {
        self.keyPath = keyPath; self.ascending = ascending; self.caseInsensitive = caseInsensitive
    }
}

public struct FetchRequest: Sendable, Hashable {
    public var entity: String
    /// NSPredicate format (docs/query.md); nil = every object.
    public var predicate: String?
    public var variables: [String: QueryArgument] = [:]
    public var sortDescriptors: [SortDescriptor] = []
    /// 0 = no limit (up to `QueryLimits.maxFetchResults`).
    public var fetchLimit: Int = 0
    public var fetchOffset: Int = 0
    /// Results per batch of `fetchBatches`; 0 = one batch.
    public var fetchBatchSize: Int = 0
    public var resultType: FetchResultType = .objects
    /// Key paths (attributes, to-one relationships, key paths through to-one relationships). For
    /// dictionary results also expressions `alias = fn:(keyPath)` with fn one of count, sum, min,
    /// max, average; keyPath may be `SELF` for count. For objects it limits the values returned.
    public var propertiesToFetch: [String] = []
    public var propertiesToGroupBy: [String] = []
    /// Over group-by key paths and expression aliases (dictionaries with `propertiesToGroupBy`).
    public var havingPredicate: String?
    /// Dictionaries only: identical dictionaries come back once.
    public var returnsDistinctResults: Bool = false
    /// Relationship key paths (`department`, `items`, `items.product`) whose destinations are
    /// loaded with the results, set-based.
    public var relationshipKeyPathsForPrefetching: [String] = []
    public var includesSubentities: Bool = true
    public init(entity: String) { self.entity = entity }
}

public struct FetchResult: Sendable {
    /// The generation the fetch read.
    public var token: GenerationToken
    /// `.objects`.
    public var objects: [ObjectSnapshot] = []
    /// `.objectIDs`, also filled for `.objects`. Pending inserts carry their temporary (negative-pk) IDs.
    public var objectIDs: [ObjectID] = []
    /// `.dictionaries`.
    public var dictionaries: [[String: StorageValue]] = []
    /// `.count`, and the number of results for the other types.
    public var count: Int = 0
    /// Objects loaded by `relationshipKeyPathsForPrefetching`, each once, ordered by ID.
    public var prefetched: [ObjectSnapshot] = []
    /// The `.objects` results went to the caller's `FetchObjectSink` (`objects` and `objectIDs`
    /// are empty; `count` holds their number).
    public var objectsStreamed = false
    public init(token: GenerationToken) { self.token = token }
}

/// A context's unsaved changes, for `includesPendingChanges`. Inserted objects carry temporary
/// IDs (ObjectID with a negative pk); `updated` holds the full pending state of updated objects.
public struct PendingChanges: Sendable {
    public var inserted: [ObjectSnapshot]
    public var updated: [ObjectSnapshot]
    public var deleted: Set<ObjectID>
    public init(inserted: [ObjectSnapshot] = [], updated: [ObjectSnapshot] = [], deleted: Set<ObjectID> = []) {
        self.inserted = inserted; self.updated = updated; self.deleted = deleted
    }
    var isEmpty: Bool { inserted.isEmpty && updated.isEmpty && deleted.isEmpty }
}

/// Bounds on what a query may cost. Defaults are documented in docs/query.md.
public struct QueryLimits: Sendable, Hashable {
    /// Characters in a predicate (also `havingPredicate`).
    public var maxPredicateLength = 16_384
    /// Nesting of parentheses, NOT, and ANY/ALL/NONE.
    public var maxDepth = 64
    /// Comparisons, connectives, values and key paths in one predicate.
    public var maxNodes = 2_000
    /// Values in one `IN` list (literal or `$variable`).
    public var maxInListSize = 10_000
    /// Results of one `fetch` (without fetchLimit, a larger result fails instead of being cut).
    public var maxFetchResults = 100_000
    /// Results one `fetchBatches` stream, batch update or batch delete may cover.
    public var maxBatchResults = 1_000_000
    /// Sort descriptors, properties to fetch / group by, prefetch key paths (each).
    public var maxListEntries = 64
    /// Characters in a MATCHES pattern.
    public var maxRegexPatternLength = 1_000
    /// Instructions a compiled MATCHES pattern may have (counted repetition expands).
    public var maxRegexProgramSize = 5_000
    /// Work of one MATCHES evaluation: text characters × active pattern states.
    public var maxRegexSteps = 1_000_000
    /// Seconds the pin lease of a `fetchBatches` stream lasts between two batches.
    public var batchPinLease: Double = 300
    public init() {}
}

/// A query-language problem, with the request field it is about and, where the predicate text
/// has one, the 1-based column (in characters).
public struct QueryError: Error, Sendable, CustomStringConvertible, Equatable {
    public enum Reason: String, Sendable { case syntax, unknownEntity, unknownKeyPath, typeMismatch, unboundVariable, limitExceeded, unsupported }
    public var reason: Reason
    public var message: String
    public var column: Int?
    /// "predicate", "havingPredicate", "sortDescriptors", "propertiesToFetch", "propertiesToGroupBy",
    /// "relationshipKeyPathsForPrefetching", "entity", "variables", "fetchLimit", "uniqueKey", "objectIDs", "values".
    public var field: String
    public init(_ reason: Reason, _ message: String, column: Int? = nil, field: String = "predicate") {
        self.reason = reason; self.message = message; self.column = column; self.field = field
    }
    public var description: String { "\(field): \(message)" }
}

public struct BatchResult: Sendable {
    /// The generation the batch created (or, if nothing matched, the one it read).
    public var token: GenerationToken
    /// Objects matched and updated / deleted (cascaded deletes not included).
    public var count: Int
    public var objectIDs: [ObjectID]
}

public struct DeduplicationReport: Sendable {
    /// The last generation deduplication created (or the current one if it found nothing).
    public var token: GenerationToken
    /// Groups of duplicates found.
    public var groups: Int
    /// Every deleted loser, in deletion order.
    public var removed: [ObjectID]
    /// Winner → its losers.
    public var winners: [ObjectID: [ObjectID]]
}
