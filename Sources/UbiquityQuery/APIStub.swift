// PLACEHOLDER until the query-layer branch (issue 4) merges: the agreed API, so the services
// build; every query call fails with "unsupported". Replaced wholesale by the real layer.
import Foundation
import UbiquityStorage
public enum QueryArgument: Sendable, Hashable { case scalar(StorageValue); case list([StorageValue]) }
public enum FetchResultType: String, Sendable, Codable { case objects, objectIDs, dictionaries, count }
public struct SortDescriptor: Sendable, Hashable, Codable { public var keyPath: String; public var ascending: Bool; public var caseInsensitive: Bool; public init(keyPath: String, ascending: Bool = true, caseInsensitive: Bool = false) { self.keyPath = keyPath; self.ascending = ascending; self.caseInsensitive = caseInsensitive } }
public struct FetchRequest: Sendable {
  public var entity: String
  public var predicate: String? = nil
  public var variables: [String: QueryArgument] = [:]
  public var sortDescriptors: [SortDescriptor] = []
  public var fetchLimit = 0, fetchOffset = 0, fetchBatchSize = 0
  public var resultType: FetchResultType = .objects
  public var propertiesToFetch: [String] = [], propertiesToGroupBy: [String] = []
  public var havingPredicate: String? = nil
  public var returnsDistinctResults = false
  public var relationshipKeyPathsForPrefetching: [String] = []
  public var includesSubentities = true
  public init(entity: String) { self.entity = entity }
}
public struct FetchResult: Sendable { public var token: GenerationToken; public var objects: [ObjectSnapshot] = []; public var objectIDs: [ObjectID] = []; public var dictionaries: [[String: StorageValue]] = []; public var count = 0; public var prefetched: [ObjectSnapshot] = [] }
public struct PendingChanges: Sendable { public var inserted: [ObjectSnapshot]; public var updated: [ObjectSnapshot]; public var deleted: Set<ObjectID>; public init(inserted: [ObjectSnapshot], updated: [ObjectSnapshot], deleted: Set<ObjectID>) { self.inserted = inserted; self.updated = updated; self.deleted = deleted } }
public struct QueryLimits: Sendable { public var maxPredicateLength = 16384; public var maxDepth = 64; public var maxNodes = 2000; public var maxInListSize = 10000; public var maxFetchResults = 100000; public init() {} }
public struct QueryError: Error, Sendable, CustomStringConvertible {
  public enum Reason: String, Sendable { case syntax, unknownEntity, unknownKeyPath, typeMismatch, unboundVariable, limitExceeded, unsupported }
  public var reason: Reason; public var message: String; public var column: Int?; public var field: String
  public var description: String { message }
}
public struct BatchResult: Sendable { public var token: GenerationToken; public var count: Int; public var objectIDs: [ObjectID] }
public struct DeduplicationReport: Sendable { public var token: GenerationToken; public var groups: Int; public var removed: [ObjectID]; public var winners: [ObjectID: [ObjectID]] }
extension Store {
  public func fetch(_ request: FetchRequest, at: ReadGeneration = .current, minimumGeneration: Int64? = nil, pending: PendingChanges? = nil, limits: QueryLimits = QueryLimits()) async throws -> FetchResult { throw QueryError(reason: .unsupported, message: "stub", column: nil, field: "") }
  public func fetchBatches(_ request: FetchRequest, at: ReadGeneration = .current, limits: QueryLimits = QueryLimits()) -> AsyncThrowingStream<FetchResult, Error> { AsyncThrowingStream { $0.finish(throwing: QueryError(reason: .unsupported, message: "stub", column: nil, field: "")) } }
  public func batchUpdate(entity: String, predicate: String?, variables: [String: QueryArgument] = [:], values: [String: StorageValue], author: String? = nil, contextName: String? = nil, limits: QueryLimits = QueryLimits()) async throws -> BatchResult { throw QueryError(reason: .unsupported, message: "stub", column: nil, field: "") }
  public func batchDelete(entity: String, predicate: String?, variables: [String: QueryArgument] = [:], objectIDs: [ObjectID]? = nil, author: String? = nil, contextName: String? = nil, limits: QueryLimits = QueryLimits()) async throws -> BatchResult { throw QueryError(reason: .unsupported, message: "stub", column: nil, field: "") }
  public func deduplicate(entity: String, uniqueKey: [String], batchSize: Int = 500, author: String? = nil) async throws -> DeduplicationReport { throw QueryError(reason: .unsupported, message: "stub", column: nil, field: "") }
}
