import Foundation
import GRPCCore

/// Batch writes (`Stores.BatchInsert` / `BatchUpdate` / `BatchDelete`): one transaction each,
/// straight into the store — no merge policy, no conflict check (SPEC §4.2, like Core Data's
/// NSBatch*Request) — and `destroy()`.
///
/// Unlike `save`, a batch has no client transaction ID, so it is not sent again when its outcome
/// is unknown (UNAVAILABLE, DEADLINE_EXCEEDED): the error reaches the caller, who can read the
/// store to learn whether it applied.
extension Store {
    /// What a batch did.
    public struct BatchResult: Sendable {
        /// The generation the batch created.
        public var token: GenerationToken?
        /// How many objects it changed.
        public var count: Int64
        /// The objects' IDs (`batchInsert`: only with `returnObjectIDs`).
        public var objectIDs: [String]

        init(proto: Ubiquity_V1_BatchResponse) {
            token = GenerationToken(ifPresent: proto.token)
            count = proto.count
            objectIDs = proto.objectIds
        }
    }

    /// Inserts `objects` of `entity` in one transaction. With `upsert`, an object that clashes on
    /// a uniqueness constraint updates the existing one instead of failing the batch.
    @discardableResult
    public func batchInsert(
        _ entity: String, _ objects: [[String: Value]], upsert: Bool = false, author: String = "",
        returnObjectIDs: Bool = false
    ) async throws -> BatchResult {
        BatchResult(proto: try await client.unary(modelVersion: expectedModelVersion) { md, opts in
            try await client.stores.batchInsert(
                .with {
                    $0.storeID = id
                    $0.entity = entity
                    $0.objects = objects.map { values in .with { $0.values = protoValues(values) } }
                    $0.upsert = upsert
                    $0.author = author
                    $0.returnObjectIds = returnObjectIDs
                }, metadata: md, options: opts)
        })
    }

    /// Sets `values` on every object of `entity` (sub-entities included) matching `predicate`
    /// (an NSPredicate-format string with `$name` arguments; empty: all of them).
    @discardableResult
    public func batchUpdate(
        _ entity: String, where predicate: String = "", _ arguments: [String: Argument] = [:],
        set values: [String: Value], author: String = ""
    ) async throws -> BatchResult {
        BatchResult(proto: try await client.unary(modelVersion: expectedModelVersion) { md, opts in
            try await client.stores.batchUpdate(
                .with {
                    $0.storeID = id
                    $0.entity = entity
                    $0.predicate = predicate
                    $0.variables = arguments.mapValues(\.proto)
                    $0.values = protoValues(values)
                    $0.author = author
                }, metadata: md, options: opts)
        })
    }

    /// Deletes the objects of `entity` matching `predicate` (empty: all of them).
    @discardableResult
    public func batchDelete(
        _ entity: String, where predicate: String = "", _ arguments: [String: Argument] = [:], author: String = ""
    ) async throws -> BatchResult {
        try await batchDelete(entity, predicate: predicate, arguments: arguments, objectIDs: [], author: author)
    }

    /// Deletes these objects of `entity`.
    @discardableResult
    public func batchDelete(_ entity: String, ids objectIDs: [String], author: String = "") async throws -> BatchResult {
        try await batchDelete(entity, predicate: "", arguments: [:], objectIDs: objectIDs, author: author)
    }

    private func batchDelete(
        _ entity: String, predicate: String, arguments: [String: Argument], objectIDs: [String], author: String
    ) async throws -> BatchResult {
        BatchResult(proto: try await client.unary(modelVersion: expectedModelVersion) { md, opts in
            try await client.stores.batchDelete(
                .with {
                    $0.storeID = id
                    $0.entity = entity
                    $0.predicate = predicate
                    $0.variables = arguments.mapValues(\.proto)
                    $0.objectIds = objectIDs
                    $0.author = author
                }, metadata: md, options: opts)
        })
    }

    /// Destroys the store (`Stores.DestroyStore`): its data is gone, its feeds end, and calls on
    /// it fail with `.notFound` (STORE_NOT_FOUND) from then on.
    public func destroy() async throws {
        _ = try await client.unary { md, opts in
            try await client.stores.destroyStore(.with { $0.storeID = id }, metadata: md, options: opts)
        }
    }
}
